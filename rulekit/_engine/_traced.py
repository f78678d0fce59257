"""`Traced`: the value user code sees in place of an active array or scalar while tracing.

It speaks NumPy's protocols, so unchanged user code (`import numpy as np`)
reaches the rules: `__array_ufunc__` (ufuncs, operators, in-place operators),
`__array_function__` (numpy functions), plus indexing, `x[i] = v` and the
common array methods and attributes. It refuses to be turned into a plain
array or number (`__array__`, `float()`, `.item()`), since the value would
leave the trace and its gradient would silently be lost.

Its operations are recorded through its tape: `self.tape.call(f, args, kwargs)`
(`rulekit._engine._call.traced_call`, the method of the engine's tapes).
"""

from __future__ import annotations

import numbers
import operator
import sys
import threading
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from rulekit._codual import CoDual
from rulekit._engine import _operators
from rulekit._engine._array_methods import ArrayMethods
from rulekit._engine._levels import LevelValue, _levels, defers
from rulekit._engine._primal_only import PRIMAL_ONLY
from rulekit._engine._refusals import (
    index_refusal,
    inner_into_outer,
    leak,
    refuse,
    subclass_caller,
)
from rulekit._engine._scalar_calls import scalars_as_arrays
from rulekit._engine._tape import Tape
from rulekit._engine._wrappers import suggest_wrapper
from rulekit._errors import TracingError, subclass_error

__all__ = ["Traced", "TracedArray", "TracedScalar", "find_tape", "is_traced", "primal",
           "refuse_out", "traced_in"]  # fmt: skip


def _on_primals(func: Any, args: Any, kwargs: Any) -> Any:
    """Run a function without derivative on the primal values; refuse writes into traced arrays
    (`np.any(x > 0, out=buf)` with a traced buf would change it behind the tape's back)."""
    refused = isinstance(kwargs.get("out"), Traced)  # (checked first: nothing is written)
    out = None if refused else func(*primal(args), **primal(kwargs))
    if refused or any(isinstance(a, Traced) and out is a.cd.x for a in args):
        raise refuse_out(func)
    return out


def refuse_out(func: Any) -> TracingError:
    """The refusal for a function without derivative writing into a traced array."""
    return refuse(
        TracingError(
            f"{getattr(func, '__name__', func)}(..., out=...) wrote into a traced array. Fix: "
            "drop out= and use the result (it carries no derivative); a traced array "
            "cannot be overwritten by a function without a rule."
        )
    )


def _primal_call(t: Traced, func: Any, args: Any, kwargs: Any) -> Any:
    """A function without derivative applied to traced `t` (and others): on the primals, or,
    in a compiled trace, recorded so that a replay recomputes its (tracked) result."""
    if t.tape.tracking:
        return t.tape.primal(func, args, kwargs)
    return _on_primals(func, args, kwargs)


def _is_traced(a: Any) -> bool:
    return isinstance(a, Traced)


def _primal_value(a: Any) -> Any:
    return a.cd.x if isinstance(a, Traced) else a


class _Fallbacks(threading.local):
    """Per thread: numpy functions whose Python implementation is running (traced through)."""

    def __init__(self) -> None:
        self.running: set[Any] = set()


_falling_back = _Fallbacks()


def primal(x: Any) -> Any:
    """`x` with traced values replaced by their primals (in tuples, lists and dicts too)."""
    if isinstance(x, Traced):
        return x.cd.x
    t = type(x)
    if t is tuple or t is list:
        return t(primal(e) for e in x)
    if t is dict:
        return {k: primal(v) for k, v in x.items()}
    return x


class Traced(ArrayMethods, NDArrayOperatorsMixin):
    """A traced value: what user code sees in place of an active array or scalar while tracing.

    Holds its CoDual (`cd`), its tape and its slot on that tape. Only the engine
    makes them; `isinstance(v, rulekit.Traced)` tells whether a value is traced
    (e.g. for an integration that must refuse traced values, as numba's does).
    """

    __slots__ = ("cd", "scalar", "slot", "tape")
    __array_priority__ = 1000
    #: A value computed from traced ones that carries no derivative (compiled replay only:
    #: `rulekit._engine._tracked`); its operations are recorded so that a replay recomputes it.
    tracked = False

    def __init__(self, cd: CoDual, tape: Tape, slot: int, scalar: bool) -> None:
        self.cd = cd
        self.tape = tape
        self.slot = slot
        self.scalar = scalar

    # -- NumPy protocols --------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if _levels.stack and defers(inputs, kwargs):  # (an inner transformation's values)
            return NotImplemented
        f = ufunc if method == "__call__" else getattr(ufunc, method)
        return self.tape.call(f, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if _levels.stack and defers(args, kwargs):
            return NotImplemented
        if func in PRIMAL_ONLY:  # no derivative: answer on the primal values, as numpy would
            return _primal_call(self, func, args, kwargs)
        impl = getattr(func, "_implementation", None)
        fallback = scalars_as_arrays(func, args, kwargs, _is_traced, _primal_value)
        running = _falling_back.running
        if (
            fallback is None
            and impl is not None
            and hasattr(impl, "__code__")
            and (func not in running)
        ):
            # Without a rule, a function written in Python on top of other numpy
            # functions is traced through: its implementation runs on traced values.
            # Not re-entrantly: np.max's implementation calls `x.max()`, which is
            # np.max again; the inner call then reports the missing rule instead.
            def fallback() -> Any:
                running.add(func)
                try:
                    return impl(*args, **kwargs)
                finally:
                    running.discard(func)

        return self.tape.call(func, args, kwargs, fallback)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        owner = subclass_caller(sys._getframe(1))
        if owner is not None:
            raise refuse(subclass_error(owner, "an operand combined with a traced value"))
        frame = sys._getframe(1)
        hint = suggest_wrapper(frame)
        if hint:  # the one specific fix, instead of the general ones
            raise refuse(
                TracingError(
                    f"NumPy was asked to convert (__array__) a traced value.{hint} Converted "
                    "to a plain array, the value would leave the trace and its gradient "
                    "would silently be lost."
                )
            )
        raise leak("NumPy was asked to convert (__array__)", frame)

    # -- conversions that would leak -------------------------------------------

    def __float__(self) -> float:
        raise leak("float() was applied to", sys._getframe(1))

    def __int__(self) -> int:
        raise leak("int() was applied to", sys._getframe(1))

    def __complex__(self) -> complex:
        raise leak("complex() was applied to", sys._getframe(1))

    def __index__(self) -> int:
        raise index_refusal(sys._getframe(1))

    def item(self, *args: Any) -> Any:
        raise leak(".item() was applied to")

    def tolist(self) -> Any:
        raise leak(".tolist() was applied to")

    def __bool__(self) -> bool:
        # Python control flow on a traced value (`if x > 0`) is fine: the branch taken
        # does not carry a derivative. A compiled trace records the outcome as a guard.
        b = bool(self.cd.x)
        program = self.tape.program
        if program is not None:
            program.guard(self, bool, b)
        return b

    # -- attributes ---------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self.cd.x)

    @property
    def dtype(self) -> np.dtype:
        return np.asarray(self.cd.x).dtype if self.scalar else self.cd.x.dtype

    @property
    def ndim(self) -> int:
        return np.ndim(self.cd.x)

    @property
    def size(self) -> int:
        return int(np.size(self.cd.x))

    @property
    def flags(self) -> Any:
        return self.cd.x.flags

    @property
    def flat(self) -> Any:
        raise refuse(
            TracingError(
                "x.flat is not supported on a traced array. Fix: use np.ravel(x) or "
                "x.reshape(-1) to read, and `buf = np.zeros_like(x)` with `buf[np.unravel_index"
                "(i, buf.shape)] = v` (or np.put / np.fill_diagonal) to write."
            )
        )

    def __repr__(self) -> str:
        kind = "scalar" if self.scalar else f"array{self.shape}"
        return f"Traced({kind}, dtype={self.dtype}, slot={self.slot})"

    # -- copying: a traced copy; pickling: refused --------------------------------

    def __copy__(self) -> Any:
        return self if self.scalar else np.copy(cast(Any, self))  # (scalars are immutable)

    def __deepcopy__(self, memo: Any) -> Any:
        return self.__copy__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise refuse(
            TracingError(
                "a traced value cannot be pickled. Fix: pickle plain values before or after "
                "differentiating (the value rulekit returns), not inside the differentiated "
                "function; inside it, use x.copy() or copy.deepcopy(x) for a traced copy. "
                "Unpickled, the value would be detached from the trace: its gradient lost."
            )
        )

    def __hash__(self) -> int:
        return id(self)

    # -- methods (each routes to the numpy function with a rule) ---------------

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        call = (self, dtype, *args)
        retry = scalars_as_arrays(np.ndarray.astype, call, kwargs, _is_traced, _primal_value)
        return self.tape.call(np.ndarray.astype, call, kwargs, retry)

    # Integer-valued queries carry no derivative: answer them on the primal.
    def argmax(self, *args: Any, **kwargs: Any) -> Any:
        return _primal_call(self, np.argmax, (self, *args), kwargs)

    def argmin(self, *args: Any, **kwargs: Any) -> Any:
        return _primal_call(self, np.argmin, (self, *args), kwargs)

    def argsort(self, *args: Any, **kwargs: Any) -> Any:
        return _primal_call(self, np.argsort, (self, *args), kwargs)

    def nonzero(self) -> Any:
        return _primal_call(self, np.nonzero, (self,), {})

    def all(self, *args: Any, **kwargs: Any) -> Any:
        return _primal_call(self, np.all, (self, *args), kwargs)

    def any(self, *args: Any, **kwargs: Any) -> Any:
        return _primal_call(self, np.any, (self, *args), kwargs)


class TracedArray(Traced):
    """A traced array: a `Traced` that is also a sequence (`len`, iteration, `x[i]`)."""

    __slots__ = ()

    def __len__(self) -> int:
        return len(self.cd.x)

    def __iter__(self) -> Any:
        for i in range(len(self.cd.x)):
            yield self[i]

    # -- indexing -------------------------------------------------------------------

    def __getitem__(self, idx: Any) -> Any:
        return self.tape.call(operator.getitem, (self, idx), {})

    def __setitem__(self, idx: Any, value: Any) -> None:
        if _levels.stack and defers(value, None):
            raise inner_into_outer()
        self.tape.call(operator.setitem, (self, idx, value), {})

    def fill(self, value: Any) -> None:
        self[...] = value

    def sort(self, axis: int = -1, **kwargs: Any) -> None:
        self[...] = np.sort(self, axis=axis, **kwargs)


class TracedScalar(Traced):
    """A traced scalar (a numpy or Python float): deliberately *not* a sequence.

    numpy treats an object with `__getitem__` as a sequence, and turns the
    TracingError of `plain[i] = s` into "setting an array element with a
    sequence"; without it the TracingError reaches the user.
    """

    __slots__ = ()


# np.isscalar(x[0]) is True for a numpy float64; the traced scalar standing for it says the same.
numbers.Number.register(TracedScalar)

_operators.install(Traced, (TracedArray, TracedScalar))


def is_traced(x: Any) -> bool:
    """Whether `x` is a value some transformation traces: the reverse engine's `Traced`, or a
    value of a forward or nested level (rule code that must not convert it asks this)."""
    return isinstance(x, (Traced, LevelValue))


def traced_in(x: Any) -> Iterator[Traced]:
    """The traced values in `x`, inside tuples, lists and dicts too (depth first)."""
    if isinstance(x, Traced):
        yield x
    elif isinstance(x, (tuple, list)):
        for e in x:
            yield from traced_in(e)
    elif isinstance(x, dict):
        for e in x.values():
            yield from traced_in(e)


def find_tape(values: Any) -> Tape | None:
    """The tape of the first traced value in `values` (inside lists and tuples too)."""
    for v in values:
        t = type(v)
        if t is TracedArray or t is TracedScalar or isinstance(v, Traced):
            return v.tape
        if (t is list or t is tuple) and v:
            tape = find_tape(v)
            if tape is not None:
                return tape
    return None
