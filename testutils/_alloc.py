"""Count numpy data-buffer allocations with a NEP 49 memory handler.

`counting()` installs, for the calling thread/context only, a `PyDataMem_Handler` whose
malloc/calloc/realloc/free are numba `cfunc`s: native code that bumps int64 counters and
forwards to libc. Nothing here is ever freed: an array allocated under a handler is freed
through that handler, possibly much later or at interpreter exit, so handlers, counters and
compiled code live for the life of the process. See docs/allocation-counter.md.
"""

from __future__ import annotations

import ctypes
import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["AllocationCount", "count_allocations", "counting"]

# Counter words of a slot (ctx points at them): nesting depth, then the running totals.
_DEPTH, _MALLOC, _CALLOC, _REALLOC, _BYTES = range(5)
_NWORDS = 8
# Slots of numpy's C-API table (numpy/_core/include/numpy/__multiarray_api.h, NumPy >= 1.22).
_SET_HANDLER_SLOT, _GET_HANDLER_SLOT = 304, 305


@dataclass(frozen=True)
class AllocationCount:
    """Numpy data-buffer allocations made inside one counting block."""

    count: int  #: mallocs + callocs + reallocs
    bytes: int  #: bytes requested by them (realloc: the new size)
    mallocs: int
    callocs: int
    reallocs: int

    def __int__(self) -> int:
        return self.count

    def __str__(self) -> str:
        return (
            f"{self.count} allocation{'' if self.count == 1 else 's'}, {self.bytes} bytes "
            f"({self.mallocs} malloc, {self.callocs} calloc, {self.reallocs} realloc)"
        )


class _Allocator(ctypes.Structure):
    """`PyDataMemAllocator`: ctx, then malloc/calloc/realloc/free taking ctx first."""

    _fields_ = [(n, ctypes.c_void_p) for n in ("ctx", "malloc", "calloc", "realloc", "free")]


class _Handler(ctypes.Structure):
    """`PyDataMem_Handler` of numpy/ndarraytypes.h (version 1; the allocator at offset 128)."""

    _fields_ = [
        ("name", ctypes.c_char * 127),
        ("version", ctypes.c_uint8),
        ("allocator", _Allocator),
    ]


# --- the allocator functions, compiled by numba (nopython, no GIL, no Python API) --------
# Their globals are bound by `_compile` right before compilation, so that importing this
# module does not import numba.
_carray: Any = None
_libc_malloc: Any = None
_libc_calloc: Any = None
_libc_realloc: Any = None
_libc_free: Any = None


def _nb_malloc(ctx: Any, size: Any) -> Any:
    c = _carray(ctx, (_NWORDS,), np.int64)
    if c[_DEPTH] > 0:
        c[_MALLOC] += 1
        c[_BYTES] += size
    return _libc_malloc(size)


def _nb_calloc(ctx: Any, nelem: Any, elsize: Any) -> Any:
    c = _carray(ctx, (_NWORDS,), np.int64)
    if c[_DEPTH] > 0:
        c[_CALLOC] += 1
        c[_BYTES] += nelem * elsize
    return _libc_calloc(nelem, elsize)


def _nb_realloc(ctx: Any, ptr: Any, size: Any) -> Any:
    c = _carray(ctx, (_NWORDS,), np.int64)
    if c[_DEPTH] > 0:
        c[_REALLOC] += 1
        c[_BYTES] += size
    return _libc_realloc(ptr, size)


def _nb_free(ctx: Any, ptr: Any, size: Any) -> None:
    _libc_free(ptr)


def _compile() -> list[Any]:
    """Compile the four cfuncs (numba's on-disk cache makes later processes faster)."""
    global _carray, _libc_malloc, _libc_calloc, _libc_realloc, _libc_free
    from numba import carray, cfunc, types

    vp, sz = types.voidptr, types.uintp
    _carray = carray
    _libc_malloc = types.ExternalFunction("malloc", vp(sz))
    _libc_calloc = types.ExternalFunction("calloc", vp(sz, sz))
    _libc_realloc = types.ExternalFunction("realloc", vp(vp, sz))
    _libc_free = types.ExternalFunction("free", types.void(vp))
    sigs = [vp(vp, sz), vp(vp, sz, sz), vp(vp, vp, sz), types.void(vp, vp, sz)]
    funcs = [_nb_malloc, _nb_calloc, _nb_realloc, _nb_free]
    try:
        return [cfunc(s, cache=True)(f) for s, f in zip(sigs, funcs, strict=True)]
    except RuntimeError:  # no writable cache location: compile every process
        return [cfunc(s)(f) for s, f in zip(sigs, funcs, strict=True)]


# --- process-lifetime state ---------------------------------------------------------------
_KEEP: list[object] = []  # everything numpy may still call into; never cleared
_LOCK = threading.Lock()  # guards `_state` (first use, then the slot pool)
_state: dict[str, Any] = {}
# Private prototypes (setting restype on the shared `ctypes.pythonapi` would leak to others).
_api = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
)(("PyCapsule_New", _api))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)
_incref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_IncRef", _api))


def _immortal(obj: object) -> None:
    """Keep `obj` alive for good, even through module teardown at interpreter exit."""
    _KEEP.append(obj)
    _incref(obj)


class _Slot:
    """One handler: its counter words, its `PyDataMem_Handler` and the capsule numpy sees."""

    def __init__(self, index: int) -> None:
        self.words = (ctypes.c_int64 * _NWORDS)()
        self.handler = _Handler(b"rulekit_counting_%d" % index, 1)
        self.handler.allocator = _Allocator(ctypes.addressof(self.words), *_state["addresses"])
        self.capsule = _capsule_new(ctypes.addressof(self.handler), _state["name"], None)
        for obj in (self.words, self.handler, self.capsule, self):
            _immortal(obj)

    def totals(self) -> tuple[int, int, int, int]:
        w = self.words
        return w[_MALLOC], w[_CALLOC], w[_REALLOC], w[_BYTES]


def _init() -> dict[str, Any]:
    """First use: compile the cfuncs and bind numpy's handler API (once per process)."""
    with _LOCK:
        if _state:
            return _state
        try:
            mu = importlib.import_module("numpy._core._multiarray_umath")
        except ImportError:  # NumPy 1.x
            mu = importlib.import_module("numpy.core._multiarray_umath")
        table = (ctypes.c_void_p * (_GET_HANDLER_SLOT + 1)).from_address(
            _capsule_pointer(mu._ARRAY_API, None)
        )
        set_handler, get_handler = table[_SET_HANDLER_SLOT], table[_GET_HANDLER_SLOT]
        if not (set_handler and get_handler):
            raise RuntimeError("numpy's C-API table lacks PyDataMem_SetHandler/GetHandler")
        funcs = _compile()
        name = ctypes.create_string_buffer(b"mem_handler")  # capsule name: must outlive them
        for obj in (*funcs, name):
            _immortal(obj)
        _state.update(
            set_handler=ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(set_handler),
            get_handler=ctypes.PYFUNCTYPE(ctypes.py_object)(get_handler),
            addresses=[f.address for f in funcs],
            name=ctypes.cast(name, ctypes.c_char_p),
            slots={},  # id(capsule) -> slot, for every slot ever made
            free=[],  # slots not in use by any counting block
        )
        return _state


def _release(slot: _Slot) -> None:
    """Leave one counting block of `slot`; the outermost one returns it to the pool."""
    with _LOCK:
        slot.words[_DEPTH] -= 1
        if slot.words[_DEPTH] == 0:
            _state["free"].append(slot)


class counting:
    """Count numpy data-buffer allocations made in this thread/context inside `with`.

    ``with counting() as c: ...`` then ``c.result`` (an `AllocationCount`); ``c.count`` and
    ``c.bytes`` also read live inside the block. Blocks nest (each counts what happened
    inside it); the previous handler is restored on exit, exception or not. An instance is
    single-use. Blocks running concurrently in different threads count independently.
    """

    def __init__(self) -> None:
        self.result: AllocationCount | None = None
        self._slot: _Slot | None = None
        self._prev: object = None
        self._start = (0, 0, 0, 0)

    def __enter__(self) -> counting:
        if self._slot is not None or self.result is not None:
            raise RuntimeError("a counting() instance can be entered only once")
        st = _init()
        current = st["get_handler"]()
        with _LOCK:
            slot = st["slots"].get(id(current))
            if slot is None or slot.words[_DEPTH] == 0:  # not nested in one of ours: new slot
                slot = st["free"].pop() if st["free"] else _Slot(len(st["slots"]))
                st["slots"][id(slot.capsule)] = slot
            slot.words[_DEPTH] += 1
        self._slot, self._start = slot, slot.totals()
        try:
            self._prev = st["set_handler"](slot.capsule)
        except BaseException:
            _release(slot)
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        slot = self._slot
        assert slot is not None, "counting() exited without being entered"
        _state["set_handler"](self._prev)
        self.result = self._counted()
        self._prev = None
        _release(slot)

    def _counted(self) -> AllocationCount:
        if self.result is not None:
            return self.result
        if self._slot is None:
            return AllocationCount(0, 0, 0, 0, 0)
        m, c, r, b = (x - y for x, y in zip(self._slot.totals(), self._start, strict=True))
        return AllocationCount(m + c + r, b, m, c, r)

    @property
    def count(self) -> int:
        """Allocations so far (live inside the block, final after it)."""
        return self._counted().count

    @property
    def bytes(self) -> int:
        """Bytes requested so far (live inside the block, final after it)."""
        return self._counted().bytes


def count_allocations(fn: Callable[..., object], /, *args: Any, **kwargs: Any) -> AllocationCount:
    """Call ``fn(*args, **kwargs)`` once under `counting()`; return what it allocated.

    The return value of `fn` is dropped; its allocation (if any) is counted.
    """
    with counting() as c:
        fn(*args, **kwargs)
    assert c.result is not None
    return c.result
