"""Tracked values: what a compiled trace keeps of values that carry no derivative.

While `value_and_grad(f, compile=True)` records a trace, a value computed from
traced values without a derivative (a comparison's mask `x > 0`, an index
`np.argmax(x)`, a non-differentiated argument and whatever is computed from it)
stays traced, as a `TrackedArray` or `TrackedScalar`. Its operations are
recorded like any other, run on the primal values (`primal_call`), so a replay
recomputes it from the new inputs instead of reusing the recording's value.

Where such a value leaves the trace (`bool()`, `int()`, `float()`,
`operator.index`, `.item()`, `.tolist()`, or NumPy's `__array__` when plain code
reads it), the value read is recorded as a guard: a replay recomputes it and
retraces when it differs. The array `__array__` hands out is read-only, since a
plain write into it would change the value behind the trace's back.

Outside compiled tracing there are no tracked values: `wrap_output` returns
plain results for outputs without a derivative, as it always has.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._engine._state import foreign_trace_error, trace_state
from rulekit._engine._tape import Tape
from rulekit._engine._traced import Traced, TracedArray, TracedScalar, primal, refuse_out, traced_in

__all__ = ["WRITERS", "TrackedArray", "TrackedScalar", "primal_call", "track"]

# numpy functions that write into their first argument (besides `out=`).
WRITERS = frozenset(
    [operator.setitem, np.copyto, np.put, np.place, np.putmask, np.fill_diagonal,
     np.put_along_axis]
)  # fmt: skip


def _read(t: Traced, conv: Callable[[Any], Any]) -> Any:
    """`conv(primal)` for plain code, recorded as a guard of the trace being recorded."""
    program = t.tape.program
    if program is None:  # (no trace is recording: the value outlived its call)
        raise foreign_trace_error(t.tape)
    value = conv(t.cd.x)
    program.guard(t, conv, value)
    return value


def _frozen(x: Any) -> np.ndarray:
    """An array copy of `x` (what a guard on `__array__` compares)."""
    return np.array(x, copy=True)


class _Reads:
    """The conversions of a tracked value: each reads the primal and records a guard."""

    __slots__ = ()

    def __array__(self: Any, dtype: Any = None, copy: Any = None) -> np.ndarray:
        _read(self, _frozen)
        v = np.asarray(self.cd.x)
        if dtype is not None and v.dtype != dtype:
            return v.astype(dtype)
        if copy:
            return v.copy()
        v = v.view()
        v.flags.writeable = False
        return v

    def __float__(self: Any) -> float:
        return _read(self, float)

    def __int__(self: Any) -> int:
        return _read(self, int)

    def __complex__(self: Any) -> complex:
        return _read(self, complex)

    def __index__(self: Any) -> int:
        return _read(self, operator.index)

    def item(self: Any, *args: Any) -> Any:
        return _read(self, lambda v: np.asarray(v).item(*args))

    def tolist(self: Any) -> Any:
        return _read(self, lambda v: np.asarray(v).tolist())


class TrackedArray(_Reads, TracedArray):
    """An array computed from traced values that has no derivative (compiled tracing)."""

    __slots__ = ()
    tracked = True


class TrackedScalar(_Reads, TracedScalar):
    """A number computed from traced values that has no derivative (compiled tracing).

    Subscriptable, as the NumPy scalar it stands for is (`s[()]`, `s[s > 0]`). (Unlike
    an active `TracedScalar`, whose refusals NumPy would turn into "setting an array
    element with a sequence": a tracked one converts, with a guard, when NumPy asks.)
    """

    __slots__ = ()
    tracked = True

    def __getitem__(self, idx: Any) -> Any:
        return self.tape.call(operator.getitem, (self, idx), {})


def track(tape: Tape, y: Any, inputs: dict[int, Traced]) -> Any:
    """The value user code sees for `y`, a result without derivative, on a tracking tape.

    Arrays and NumPy scalars become tracked values (an array that is one of the call's
    inputs, as `out=` returns, becomes that input's traced value again); tuples and lists
    are tracked element by element; Python values stay plain (the replay compares them:
    they are part of the call's result signature).
    """
    t = type(y)
    if t is np.ndarray or isinstance(y, np.generic):
        same = inputs.get(id(y))
        if same is not None:
            return same
        if t is np.ndarray:
            return TrackedArray(CoDual(y, None), tape, tape.new_slot(), False)
        return TrackedScalar(CoDual(y, None), tape, tape.new_slot(), True)
    if t is tuple or t is list:
        return t(track(tape, e, inputs) for e in y)
    if isinstance(y, tuple):  # (a named tuple)
        return t(*(track(tape, e, inputs) for e in y))
    return y


def _written(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments `f` writes into: `out=` and the destination of numpy's writers."""
    out = kwargs.get("out")
    dst = list(out) if isinstance(out, tuple) else [out]
    if (f in WRITERS or getattr(f, "__name__", None) == "at") and args:
        dst.append(args[0])  # (ufunc.at, np.copyto, x[i] = v, ...)
    return [d for d in dst if d is not None]


def primal_call(tape: Tape, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run `f`, which carries no derivative here, on the primals; track its result.

    Reached on a tracking tape for a NumPy function without derivative (`PRIMAL_ONLY`,
    `x.argmax()`) and for any call none of whose arguments is active. Recorded, when
    a program is being recorded, so that a replay runs it again on the new values.
    """
    tapes = trace_state.tapes
    if not tapes or tapes[-1] is not tape:
        raise foreign_trace_error(tape)
    program = tape.program
    for d in _written(f, args, kwargs):
        if isinstance(d, Traced) and not d.tracked:
            raise refuse_out(f)
        if program is not None:
            program.check_write(f, d)
    y = f(*primal(args), **primal(kwargs))
    result = track(tape, y, {id(t.cd.x): t for t in traced_in((args, kwargs))})
    if program is not None:
        program.call(None, primal_call, f, args, kwargs, result)
    return result
