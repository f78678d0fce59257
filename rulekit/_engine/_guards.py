"""What a compiled trace depends on besides its steps: its inputs' signature and its captures.

`entry_key(args, kwargs, active)` is the key a compiled function's traces are
cached under: for differentiated arguments and non-differentiated arrays, the
structure, shapes, dtypes and layouts (strides, alignment, writeability); for
other non-differentiated arguments, their values (Python scalars, strings,
tuples, ...) or, for other objects, their identity. A call whose key has no
trace is traced; a trace that writes into memory also checks which input arrays
share memory (`sharing`).

`Captures` watches what `f` reads from outside its arguments: the module
globals its code names, its closure cells and defaults, and, through them,
the Python functions it calls (their globals and cells), containers (tuples,
lists, dicts) and objects' attributes, a few levels deep. Each value found is
compared on every replay: arrays by identity, shape, dtype, layout and
*contents*; Python scalars and strings by value; functions, classes and other
objects by identity. A change retraces, so plain NumPy code in `f` that reads a
captured array (`W2 = W.T * 2`) is never replayed stale. Modules are not walked
(`np`, `math`); what `f` reaches through a module attribute (`mymodule.W`) is
not watched (docs/compiled-replay.md says so).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

__all__ = ["Captures", "Snapshot", "entry_key", "sharing"]

_PLAIN = (type(None), bool, int, float, complex, str, bytes, np.generic, np.dtype, slice)
_MAX_WATCHED = 512  # values watched per function (the rest is documented as unwatched)
_DEPTH = 4


def _array_key(a: np.ndarray) -> tuple[Any, ...]:
    f = a.flags
    return (a.shape, a.dtype, a.strides, f.aligned, f.writeable)


def _key(x: Any, active: bool, arrays: list[np.ndarray], keep: list[Any]) -> Any:
    t = type(x)
    if t is np.ndarray:
        arrays.append(x)
        return _array_key(x)
    if t is tuple or t is list:
        return (t, tuple(_key(e, active, arrays, keep) for e in x))
    if isinstance(x, tuple):
        return (t, tuple(_key(e, active, arrays, keep) for e in x))
    if t is dict:
        return (t, tuple((k, _key(v, active, arrays, keep)) for k, v in x.items()))
    if active:  # (a differentiated scalar: its type, not its value)
        return t
    if isinstance(x, _PLAIN):
        return (t, repr(x)) if isinstance(x, (float, complex, np.inexact)) else (t, x)
    keep.append(x)  # (kept alive with the trace, so that its id is not reused)
    return ("id", id(x))


def entry_key(
    args: tuple[Any, ...], kwargs: dict[str, Any], nums: tuple[int, ...], keep: list[Any]
) -> tuple[Any, list[np.ndarray]]:
    """The cache key of a compiled function's call (see the module docstring), and the
    input arrays in order (for `sharing`, which only traces that write need).

    Objects compared by identity are appended to `keep`, which the caller keeps with the
    trace recorded under this key.
    """
    arrays: list[np.ndarray] = []
    parts = tuple(_key(a, i in nums, arrays, keep) for i, a in enumerate(args))
    kw = tuple((k, _key(v, False, arrays, keep)) for k, v in sorted(kwargs.items()))
    return (nums, parts, kw), arrays


def sharing(arrays: list[np.ndarray]) -> tuple[tuple[int, int], ...]:
    """Which of the input `arrays` may share memory (pairs of positions).

    Part of what a trace that writes into memory depends on: `x += 1` changes `y` too
    when `y` is a view of `x`. A trace that writes nothing computes the same either way.
    """
    n = len(arrays)
    return tuple(
        (i, j)
        for i in range(n)
        for j in range(i + 1, n)
        if np.may_share_memory(arrays[i], arrays[j])
    )


_UINT: dict[int, np.dtype[Any]] = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16),
                                   4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}  # fmt: skip


class Snapshot:
    """A copy of an array's contents, and an allocation-free test that they are unchanged.

    Compared bit for bit (NaN equal to the same NaN; 0.0 and -0.0 differ, which only
    costs a retrace) through unsigned-integer views, into kept scratch buffers: a
    steady-state replay must not allocate.
    """

    __slots__ = ("copy", "result", "scratch", "uint")

    def __init__(self, a: np.ndarray) -> None:
        self.copy = a.copy(order="K")
        self.copy.flags.writeable = False
        self.uint = _UINT.get(a.dtype.itemsize) if a.dtype.kind not in "OV" else None
        self.scratch = np.empty(a.shape, bool) if self.uint is not None else None
        self.result = np.empty((), bool)

    def holds(self, a: np.ndarray) -> bool:
        """Whether `a` (of the snapshot's shape and dtype) has the snapshot's contents."""
        c, u = self.copy, self.uint
        if u is None or self.scratch is None:
            return bool(np.array_equal(a, c, equal_nan=a.dtype.kind in "fc"))
        np.not_equal(a.view(u), c.view(u), out=self.scratch)
        np.logical_or.reduce(self.scratch, axis=None, out=self.result)
        return not self.result


class _Entry:
    """One watched value: `holder[name]` (a dict entry, a cell, an element, an attribute)."""

    __slots__ = ("get", "obj", "snapshot", "what")

    def __init__(self, get: Any, obj: Any, what: str) -> None:
        self.get = get
        self.obj = obj
        self.what = what
        self.snapshot: Any = None
        if isinstance(obj, np.ndarray):
            self.snapshot = (_array_key(obj), Snapshot(obj))
        elif isinstance(obj, _PLAIN):
            self.snapshot = obj

    def changed(self) -> bool:
        """Whether the value differs from the one traced (an error comparing: changed)."""
        try:
            return self._changed()
        except Exception:  # (gone from its holder, or an object array that cannot compare)
            return True

    def _changed(self) -> bool:
        now = self.get()
        obj = self.obj
        if isinstance(obj, np.ndarray):
            if now is not obj:
                return True
            key, snap = self.snapshot
            return _array_key(obj) != key or not snap.holds(obj)
        if isinstance(obj, _PLAIN):
            if type(now) is not type(obj):
                return True
            if isinstance(obj, (float, complex, np.inexact)):
                return not (now == obj or (now != now and obj != obj))
            return bool(now != obj)
        return now is not obj


class Captures:
    """The values a function reads from outside its arguments, as they were when traced."""

    def __init__(self, f: Any) -> None:
        self.entries: list[_Entry] = []
        self._seen: set[int] = set()
        self._walk_callable(f, f"{getattr(f, '__qualname__', f)!s}", 0)

    def arrays(self) -> set[int]:
        """The ids of the arrays watched (compared, contents included, on every call)."""
        return {id(e.obj) for e in self.entries if isinstance(e.obj, np.ndarray)}

    def changed(self) -> str | None:
        """What changed since the trace (a description), or None."""
        for e in self.entries:
            if e.changed():
                return f"{e.what} changed since the function was traced"
        return None

    # -- the walk -----------------------------------------------------------------

    def _add(self, get: Any, obj: Any, what: str, depth: int) -> None:
        if len(self.entries) >= _MAX_WATCHED or isinstance(obj, types.ModuleType):
            return
        self.entries.append(_Entry(get, obj, what))
        if id(obj) in self._seen or depth >= _DEPTH or isinstance(obj, (*_PLAIN, np.ndarray)):
            return
        self._seen.add(id(obj))
        t = type(obj)
        if t is tuple or t is list:
            for i, e in enumerate(obj):
                self._add(_item(obj, i), e, f"{what}[{i}]", depth + 1)
        elif t is dict:
            for k, v in list(obj.items()):
                self._add(_item(obj, k), v, f"{what}[{k!r}]", depth + 1)
        elif callable(obj) and not isinstance(obj, type):
            self._walk_callable(obj, what, depth + 1)
        elif not isinstance(obj, type):
            attrs = getattr(obj, "__dict__", None)
            if isinstance(attrs, dict):
                for k, v in list(attrs.items()):
                    self._add(_item(attrs, k), v, f"{what}.{k}", depth + 1)

    def _walk_callable(self, f: Any, what: str, depth: int) -> None:
        if isinstance(f, types.MethodType):  # (its object's attributes are watched)
            owner = f.__self__
            self._add(lambda: owner, owner, f"{what}.__self__", depth)
            f = f.__func__
        if hasattr(f, "func") and hasattr(f, "args") and hasattr(f, "keywords"):  # partial
            self._add(lambda: f.func, f.func, f"{what}.func", depth)
            self._add(lambda: f.args, f.args, f"{what}.args", depth)
            self._add(lambda: f.keywords, f.keywords, f"{what}.keywords", depth)
            return
        wrapped = getattr(f, "__wrapped__", None)
        if wrapped is not None and wrapped is not f:
            self._add(lambda: f.__wrapped__, wrapped, f"{what}.__wrapped__", depth)
        code = getattr(f, "__code__", None)
        if not isinstance(code, types.CodeType):
            attrs = getattr(f, "__dict__", None)  # (a callable object: its attributes)
            if isinstance(attrs, dict) and not isinstance(f, type):
                for k, v in list(attrs.items()):
                    self._add(_item(attrs, k), v, f"{what}.{k}", depth)
                call = next(  # (and what its class's __call__ reads)
                    (c.__dict__["__call__"] for c in type(f).__mro__ if "__call__" in c.__dict__),
                    None,
                )
                if isinstance(call, types.FunctionType):
                    self._walk_callable(call, f"{what}.__call__", depth + 1)
            return
        glob = getattr(f, "__globals__", {})
        for name in sorted(_names(code)):
            if name in glob:
                self._add(_item(glob, name), glob[name], f"global {name!r}", depth)
        for name, cell in zip(code.co_freevars, f.__closure__ or (), strict=False):
            try:
                value = cell.cell_contents
            except ValueError:  # (an empty cell: assigned later)
                continue
            self._add(_cell(cell), value, f"closure variable {name!r}", depth)
        for i, d in enumerate(getattr(f, "__defaults__", None) or ()):
            self._add(_item(f.__defaults__, i), d, f"default argument {i}", depth)
        for k, d in (getattr(f, "__kwdefaults__", None) or {}).items():
            self._add(_item(f.__kwdefaults__, k), d, f"default argument {k!r}", depth)


def _names(code: types.CodeType) -> set[str]:
    """The global names `code` and the code nested in it (lambdas, comprehensions) use."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _names(c)
    return names


def _item(holder: Any, key: Any) -> Any:
    return lambda: holder[key]


def _cell(cell: Any) -> Any:
    return lambda: cell.cell_contents
