"""Running a Python function on traced inputs, and the reverse pass for its output.

`Tracer` is the machinery shared by `value_and_grad`, `value_and_pullback` and
`build_rrule`: it wraps the active inputs (arrays, scalars, and tuples / lists /
dicts of them) as `Traced` values whose fdata is memory the caller provides,
runs the function, seeds the output's cotangent and runs the tape backwards.
It keeps the call sites' rules between evaluations (one per call position),
so stateful rules are built once and reused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._engine._call import CallTape
from rulekit._engine._state import trace_state
from rulekit._engine._tape import ConstantPool, Site, Tape
from rulekit._engine._traced import Traced, TracedArray, TracedScalar, traced_in
from rulekit._errors import RulekitError, TracingError
from rulekit._registry import registry
from rulekit._stateful import StatefulRRule
from rulekit._tangents import NoFData, NoRData, NoTangent, increment, zero_fdata

__all__ = ["Tracer", "describe", "is_active_leaf", "output_codual", "untrace"]

_NO_F = NoFData()
_NO_R = NoRData()
_NO_T = NoTangent()
_FLOAT_SCALARS = (float, complex, np.floating, np.complexfloating)


def is_active_leaf(x: Any) -> bool:
    """Whether `x` can be an active input leaf: a float/complex array or scalar."""
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "fc"
    return isinstance(x, _FLOAT_SCALARS) and not isinstance(x, bool)


class Tracer:
    """Runs `f` on traced inputs and differentiates it; keeps rules per call site."""

    def __init__(self, f: Callable[..., Any]) -> None:
        self.f = f
        self.sites: list[Site] = []
        self.free_pools: list[ConstantPool] = []  # constant snapshots, reused by later tapes

    def new_tape(self) -> Tape:
        """A tape for one evaluation, sharing this tracer's call sites and constant pools."""
        return CallTape(self.sites, self.free_pools)

    def reset_rules(self, sites: list[Site] | None = None) -> None:
        """Drop saved state of every stateful rule (after an abandoned or failed pass) of
        this tracer, or of the call `sites` given (a compiled trace's)."""
        for site in self.sites if sites is None else sites:
            if isinstance(site.rule, StatefulRRule):
                site.rule.reset()

    # -- inputs ---------------------------------------------------------------

    def wrap(self, x: Any, dx: Any, tape: Tape) -> Any:
        """A traced version of input `x` whose fdata is `dx` (None: constant)."""
        if dx is None:
            return x
        if isinstance(x, np.ndarray):
            return TracedArray(CoDual(x, dx), tape, tape.new_slot(), False)
        if isinstance(x, _FLOAT_SCALARS):
            return TracedScalar(CoDual(x, _NO_F), tape, tape.new_slot(type(x)(0)), True)
        if isinstance(x, tuple):  # (a tuple of scalars has NoFData: each element is active)
            dxs = (_NO_F,) * len(x) if isinstance(dx, NoFData) else dx
            vals = [self.wrap(e, d, tape) for e, d in zip(x, dxs, strict=True)]
            return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
        if isinstance(x, list):
            return [self.wrap(e, d, tape) for e, d in zip(x, dx, strict=True)]
        if isinstance(x, dict):
            return {k: self.wrap(v, dx[k], tape) for k, v in x.items()}
        return x

    def input_rdata(self, traced: Any, tape: Tape, dx: Any = None) -> Any:
        """The rdata of a wrapped input after the reverse pass (scalars' cotangents).

        A list is a mutable container: its rdata is NoRData and its fdata `dx` holds full
        element tangents, so the cotangents of the traced scalars inside it (and inside
        its nested tuples and lists) are added into `dx` here, in place.
        """
        if isinstance(traced, Traced):
            return tape.rdata[traced.slot] if traced.scalar else _NO_R
        if isinstance(traced, tuple):
            dxs = dx if isinstance(dx, tuple) else (None,) * len(traced)
            rs = tuple(self.input_rdata(e, tape, d) for e, d in zip(traced, dxs, strict=True))
            return _NO_R if all(isinstance(r, NoRData) for r in rs) else rs
        if isinstance(traced, list) and isinstance(dx, list):
            for k, e in enumerate(traced):
                r = self.input_rdata(e, tape, dx[k])
                if not isinstance(r, NoRData):
                    dx[k] = increment(dx[k], r)
        return _NO_R

    # -- forward and reverse -------------------------------------------------

    def forward(self, targs: list[Any], kwargs: dict[str, Any], tape: Tape) -> Any:
        """Run `f` on the traced arguments; on error, restore state and re-raise."""
        registry.load_pending()  # (rule packages due now, before f looks anything up)
        state = trace_state
        state.active += 1
        state.tapes.append(tape)
        n_refused = len(state.refusals)
        try:
            out = self.f(*targs, **kwargs)
        except BaseException as e:
            tape.unwind()
            self.reset_rules(tape.sites)
            hidden = _hidden_refusal(e, state.refusals[n_refused:])
            if hidden is None:
                raise
            raise TracingError(
                f"{hidden}\n(Code between the traced function and this error caught that "
                f"and raised {type(e).__name__}: {e})"
            ) from e
        finally:
            state.tapes.pop()
            state.active -= 1
            swallowed = state.refusals[n_refused:]
            del state.refusals[n_refused:]
        if swallowed:  # f returned although a refusal was raised in it: someone caught it
            tape.unwind()
            self.reset_rules(tape.sites)
            raise TracingError(
                f"{swallowed[0]}\n(This error was raised inside the traced function and "
                "caught there, by its code or a library it called, which then went on "
                "differently than it would on plain arrays: the result could not be trusted. "
                "Fix the call named above, or run the code that catches it on plain values.)"
            )
        return out

    def seed(self, out: Any, dy: Any, tape: Tape) -> None:
        """Add the output cotangent `dy` to the traced output `out` (same structure).

        A `dy` whose structure, shape or dtype kind does not fit the output is
        refused (the forward pass is unwound first), never broadcast silently.
        """
        try:
            _check_cotangent(out, dy, "dy")
        except TypeError:
            tape.unwind()
            self.reset_rules(tape.sites)
            raise
        self._seed(out, dy, tape)
        tape.live = {t.slot for t in traced_in(out) if not t.tracked}

    def _seed(self, out: Any, dy: Any, tape: Tape) -> None:
        if isinstance(out, Traced):
            if out.tracked:  # (no derivative: its cotangent goes nowhere)
                return
            if out.scalar:
                cur = tape.rdata[out.slot]
                tape.rdata[out.slot] = dy if cur is None else cur + dy
            elif not isinstance(dy, (NoRData, NoTangent, NoFData)):
                out.cd.dx += dy
            return
        if isinstance(out, (tuple, list)):
            if isinstance(dy, (NoRData, NoTangent)):
                return
            for o, d in zip(out, dy, strict=True):
                self._seed(o, d, tape)
        elif isinstance(out, dict):
            for k, o in out.items():
                self._seed(o, dy[k], tape)

    def backward(self, tape: Tape) -> None:
        try:
            tape.reverse(tape.live)
        except BaseException:
            tape.unwind()
            self.reset_rules(tape.sites)
            raise
        finally:
            tape.release()


def _hidden_refusal(e: BaseException, refusals: list[TracingError]) -> TracingError | None:
    """The TracingError behind `e` when a library caught it and raised its own error.

    (scipy.optimize's MINPACK, for one, turns any error converting the function's
    result into "Result from function call is not a proper array of floats".)
    """
    if isinstance(e, RulekitError) or not isinstance(e, Exception) or not refusals:
        return None
    return refusals[-1]


_ZERO_DY = (NoRData, NoTangent, NoFData)


def _check_cotangent(out: Any, dy: Any, where: str) -> None:
    """Refuse an output cotangent `dy` that does not have the structure of `out`."""
    if isinstance(dy, _ZERO_DY) or (dy is None and not isinstance(out, Traced)):
        return
    if isinstance(out, Traced):
        x = out.cd.x
        if out.scalar:
            if not isinstance(dy, (int, float, complex, np.number)) and np.shape(dy) != ():
                raise TypeError(f"{where} must be a scalar for a scalar output, got {describe(dy)}")
            return
        if np.shape(dy) != x.shape or not isinstance(dy, (np.ndarray, np.number, float, int)):
            raise TypeError(
                f"{where} must have the output's shape {x.shape} (an array or scalar "
                f"cotangent per output element), got {describe(dy)}"
            )
        if np.iscomplexobj(dy) and x.dtype.kind != "c":
            raise TypeError(f"{where} is complex but the output is real ({x.dtype})")
        return
    if isinstance(out, (tuple, list)):
        if not isinstance(dy, (tuple, list)) or len(dy) != len(out):
            raise TypeError(
                f"{where} must have the output's structure, a {type(out).__name__} of "
                f"{len(out)} cotangents, got {describe(dy)}"
            )
        for k, (o, d) in enumerate(zip(out, dy, strict=True)):
            _check_cotangent(o, d, f"{where}[{k}]")
    elif isinstance(out, dict):
        if not isinstance(dy, dict) or set(dy) != set(out):
            raise TypeError(
                f"{where} must be a dict with the output's keys {sorted(map(str, out))}, "
                f"got {describe(dy)}"
            )
        for k, o in out.items():
            _check_cotangent(o, dy[k], f"{where}[{k!r}]")


def describe(x: Any) -> str:
    """A user-facing description of a value (traced values as what they stand for)."""
    if isinstance(x, Traced):
        v = x.cd.x
        if x.scalar:
            return f"a traced scalar ({type(v).__name__})"
        return f"a traced array of shape {v.shape} and dtype {v.dtype}"
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    if isinstance(x, (tuple, list)):
        inner = ", ".join(describe(e) for e in x[:4]) + (", ..." if len(x) > 4 else "")
        return f"a {type(x).__name__} of {len(x)} ({inner})"
    return f"{type(x).__name__} {x!r}"[:120]


def output_codual(out: Any) -> CoDual:
    """The CoDual of a traced function's output (constants get fresh zero fdata)."""
    if isinstance(out, Traced) and not out.tracked:
        return out.cd
    if isinstance(out, (tuple, list)) and any(_has_traced(o) for o in out):
        parts = [output_codual(o) for o in out]
        xs = [p.x for p in parts]
        dxs = [p.dx for p in parts]
        if isinstance(out, tuple):
            x = type(out)(*xs) if hasattr(out, "_fields") else tuple(xs)
            fd = _NO_F if all(isinstance(d, NoFData) for d in dxs) else tuple(dxs)
            return CoDual(x, fd)
        return CoDual(xs, dxs)
    out = untrace(out, copy=False)  # (values without derivative are constants)
    try:
        return CoDual(out, zero_fdata(out))
    except TypeError as e:
        raise TracingError(f"the traced function returned {type(out).__name__}: {e}") from e


def _has_traced(x: Any) -> bool:
    if isinstance(x, Traced):
        return not x.tracked
    if isinstance(x, (tuple, list)):
        return any(_has_traced(e) for e in x)
    return False


def untrace(x: Any, copy: bool = True) -> Any:
    """Replace traced values by (copies of) their primals, inside containers too."""
    if isinstance(x, Traced):
        v = x.cd.x
        return v.copy() if copy and isinstance(v, np.ndarray) else v
    if isinstance(x, tuple):
        vals = [untrace(e, copy) for e in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [untrace(e, copy) for e in x]
    if isinstance(x, dict):
        return {k: untrace(v, copy) for k, v in x.items()}
    return x
