"""`checkpoint(f)`: a callable whose forward keeps none of f's internals (memory for time).

    g = rulekit.checkpoint(f)
    y = g(*args)            # while tracing: ONE rule call, f run on plain values

Its rule (`CheckpointRule`, one per call site) runs f on the primal values
and keeps only its inputs (references, no copies: f must not write into its
arguments, which it receives as read-only views). The pullback first reruns
f's forward by f's derived rule (cached per signature), then that rule's
pullback: for y = f(x; θ), θ the values f captures (`lift_closure`),

    pullback(ȳ):  recompute y' = f(x; θ) with its tape;  ȳ' += ȳ;  (x̄, θ̄) += tape reverse

Outside any trace `g(*args)` is `f(*args)`. f must be a function of its
arguments and captured values: the recomputation must give the forward's y.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._derived import DerivedRules
from rulekit._engine._levels import active_levels
from rulekit._engine._primitive import primitive
from rulekit._engine._state import trace_state
from rulekit._errors import TracingError
from rulekit._example import Example
from rulekit._lifting import (
    Lifted,
    TreeDef,
    flatten,
    foreign_value_error,
    is_foreign_error,
    lift_closure,
    unflatten,
)
from rulekit._patterns import Vararg
from rulekit._register import build_primitive_rrule
from rulekit._scan_steps import untraced
from rulekit._tangents import NoFData, NoRData, zero_fdata

__all__ = ["CheckpointRule", "CheckpointSpec", "checkpoint", "checkpoint_p"]

_NO_R = NoRData()
_NO_F = NoFData()


class CheckpointSpec:
    """The static part of a checkpointed call: the lifted function and the trees."""

    __slots__ = ("args_def", "lifted", "n_args", "out_def")

    def __init__(self, lifted: Lifted, args_def: TreeDef, n_args: int) -> None:
        self.lifted = lifted
        self.args_def = args_def
        self.n_args = n_args
        self.out_def: TreeDef = None  # set by the forward pass

    def __call__(self, *leaves: Any) -> tuple[Any, ...]:
        """f on plain leaves (the arguments', the lifted values): `checkpoint_p(self, ...)`.
        (Being callable, a spec is a non-differentiable constant, like a function.)"""
        return _checkpoint_impl(self, *leaves)

    def __repr__(self) -> str:
        return f"CheckpointSpec({self.lifted!r})"


def _read_only(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        x = x.view()
        x.flags.writeable = False
    return x


def _run(spec: CheckpointSpec, leaves: tuple[Any, ...], consts: tuple[Any, ...]) -> list[Any]:
    """f on plain values (read-only arguments); a value of an enclosing trace is refused."""
    fn = spec.lifted.rebuild(consts)
    args = unflatten(spec.args_def, [_read_only(v) for v in leaves])
    try:
        with untraced():
            out = fn(*args)
    except TracingError as e:
        if is_foreign_error(e):
            raise foreign_value_error("the checkpointed function", e) from e
        raise
    outs, spec.out_def = flatten(out)
    return outs


def _checkpoint_impl(spec: CheckpointSpec, *leaves: Any) -> tuple[Any, ...]:
    """The primitive on plain values: f, its outputs copied where they share memory with an
    input or another output (as the rule's are: new outputs with their own fdata)."""
    outs = _run(spec, leaves[: spec.n_args], leaves[spec.n_args :])
    arrays = [v for v in leaves if isinstance(v, np.ndarray)]
    seen: list[Any] = []
    return tuple(_output(x, arrays, seen).x for x in outs)


checkpoint_p = primitive(_checkpoint_impl)


def checkpoint(f: Callable[..., Any]) -> Callable[..., Any]:
    """A callable computing `f(*args, **kwargs)` whose reverse pass recomputes f's internals.

    While tracing, the forward runs f on plain values and keeps only its inputs; the
    pullback reruns f traced (its rule cached per signature) and pulls back through
    that. Differentiable w.r.t. the arguments (pytrees of arrays and scalars) and values
    f captures, including values of an enclosing trace. f must not write into its
    arguments (it gets read-only views) and must compute the same value when rerun.
    """
    if not callable(f):
        raise TypeError(f"checkpoint expects a callable, got {type(f).__name__}")

    @functools.wraps(f)
    def checkpointed(*args: Any, **kwargs: Any) -> Any:
        if not trace_state.active or active_levels():
            # plain values, or under jvp / a nested grad: f itself, traced by the levels
            # (which keep what their rules need; recomputation is the reverse engine's)
            return f(*args, **kwargs)
        fn = functools.partial(f, **kwargs) if kwargs else f
        lifted, consts = lift_closure(fn, "the checkpointed function")
        leaves, args_def = flatten(args)
        spec = CheckpointSpec(lifted, args_def, len(leaves))
        out = checkpoint_p(spec, *leaves, *consts)
        return unflatten(spec.out_def, out)

    return checkpointed


def _output(x: Any, inputs: list[Any], seen: list[Any]) -> CoDual:
    """An output leaf the rule owns: copied if it shares memory with an input or an
    earlier output (a rule's new output has its own fdata); fresh zero fdata."""
    if isinstance(x, np.ndarray) and any(np.may_share_memory(x, v) for v in inputs + seen):
        x = x.copy()
    if isinstance(x, np.ndarray):
        seen.append(x)
    return CoDual(x, zero_fdata(x))


class CheckpointRule:
    """The rule of `checkpoint_p`, one per call site: keeps f's derived rules."""

    def __init__(self) -> None:
        self.rules = DerivedRules()

    def reset(self) -> None:
        """Drop the saved state of the derived rules' stateful rules."""
        self.rules.reset()

    def __call__(self, f: CoDual, spec_cd: CoDual, *cds: CoDual) -> tuple[CoDual, Any]:
        spec: CheckpointSpec = spec_cd.x
        n = spec.n_args
        prims = [c.x for c in cds]
        outs = _run(spec, tuple(prims[:n]), tuple(prims[n:]))
        out_def = spec.out_def
        arrays = [v for v in prims if isinstance(v, np.ndarray)]
        seen: list[Any] = []
        ycds = [_output(x, arrays, seen) for x in outs]
        dxs = tuple(y.dx for y in ycds)
        y = CoDual(tuple(o.x for o in ycds), _NO_F if all(d is _NO_F for d in dxs) else dxs)
        rules, lifted = self.rules, spec.lifted

        def checkpoint_pullback(dy: Any) -> tuple[Any, ...]:
            dys = (_NO_R,) * len(ycds) if isinstance(dy, NoRData) else dy
            ins = [CoDual(_read_only(c.x), c.dx) for c in cds]
            re_outs, re_def, pb = rules.flat(lifted, spec.args_def, n, ins)
            if re_def != out_def or len(re_outs) != len(ycds):
                pb((_NO_R,) * len(re_outs))
                raise TracingError(
                    "the checkpointed function returned a different structure when rerun in "
                    "the reverse pass: it must compute the same thing from the same inputs."
                )
            # ȳ' += ȳ: arrays' cotangents are in the outputs' fdata, scalars' in dy
            seed = [
                y.dx if isinstance(y.dx, np.ndarray) else r for y, r in zip(ycds, dys, strict=True)
            ]
            r = pb(tuple(seed))
            return (_NO_R, _NO_R, *r)

        return y, checkpoint_pullback


def _examples() -> list[Example]:
    """A call example for the conformance kit: pytree arguments and outputs (one output
    aliasing an argument), a captured array and a captured scalar."""
    rng = np.random.default_rng(0)
    W, s = rng.normal(size=(3, 3)), 0.7

    def f(p: Any, t: Any) -> Any:
        return {"y": np.sin(W @ p["x"]) * t * s, "same": p["x"], "n": np.sum(p["x"] ** 2)}

    lifted, consts = lift_closure(f)
    args = ({"x": rng.normal(size=3)}, 1.5)
    leaves, args_def = flatten(args)
    return [Example((CheckpointSpec(lifted, args_def, len(leaves)), *leaves, *consts))]


@build_primitive_rrule.register(checkpoint_p, CheckpointSpec, Vararg[Any], examples=_examples)
def _build_checkpoint_rule(sig: Any) -> CheckpointRule:
    return CheckpointRule()
