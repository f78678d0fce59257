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
from rulekit._errors import TracingError
from rulekit._primitive import trace_state
from rulekit._stateful import StatefulRRule
from rulekit._tangents import NoFData, NoRData, NoTangent, zero_fdata
from rulekit._tape import Site, Tape
from rulekit._traced import Traced, TracedArray, TracedScalar

__all__ = ["Tracer", "is_active_leaf"]

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

    def reset_rules(self) -> None:
        """Drop saved state of every stateful rule (after an abandoned or failed pass)."""
        for site in self.sites:
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
        if isinstance(x, tuple):
            dxs = (None,) * len(x) if isinstance(dx, NoFData) else dx
            vals = [
                self.wrap(e, d if is_active_leaf(e) or d is not None else None, tape)
                for e, d in zip(x, dxs, strict=True)
            ]
            return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
        if isinstance(x, list):
            return [self.wrap(e, d, tape) for e, d in zip(x, dx, strict=True)]
        if isinstance(x, dict):
            return {k: self.wrap(v, dx[k], tape) for k, v in x.items()}
        return x

    def input_rdata(self, traced: Any, tape: Tape) -> Any:
        """The rdata of a wrapped input after the reverse pass (scalars' cotangents)."""
        if isinstance(traced, Traced):
            return tape.rdata[traced.slot] if traced.scalar else _NO_R
        if isinstance(traced, tuple):
            rs = tuple(self.input_rdata(e, tape) for e in traced)
            return _NO_R if all(isinstance(r, NoRData) for r in rs) else rs
        return _NO_R

    # -- forward and reverse -------------------------------------------------

    def forward(self, targs: list[Any], kwargs: dict[str, Any], tape: Tape) -> Any:
        """Run `f` on the traced arguments; on error, restore state and re-raise."""
        trace_state.active += 1
        try:
            return self.f(*targs, **kwargs)
        except BaseException:
            tape.unwind()
            self.reset_rules()
            raise
        finally:
            trace_state.active -= 1

    def seed(self, out: Any, dy: Any, tape: Tape) -> None:
        """Add the output cotangent `dy` to the traced output `out` (same structure)."""
        if isinstance(out, Traced):
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
                self.seed(o, d, tape)
        elif isinstance(out, dict):
            for k, o in out.items():
                self.seed(o, dy[k], tape)

    def backward(self, tape: Tape) -> None:
        try:
            tape.reverse()
        except BaseException:
            tape.unwind()
            self.reset_rules()
            raise
        finally:
            tape.unguard()


def output_codual(out: Any) -> CoDual:
    """The CoDual of a traced function's output (constants get fresh zero fdata)."""
    if isinstance(out, Traced):
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
    try:
        return CoDual(out, zero_fdata(out))
    except TypeError as e:
        raise TracingError(f"the traced function returned {type(out).__name__}: {e}") from e


def _has_traced(x: Any) -> bool:
    if isinstance(x, Traced):
        return True
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
