"""`scan`: a loop whose body is traced once and whose derived rule runs at every step.

    carry, ys = rulekit.scan(body, init, xs, length=None, checkpoint=False)

is JAX's `lax.scan`: `body(carry, x) -> (carry, y)` runs over the leading axis
of `xs` (a pytree of arrays, or None with `length`), and the `y`s are stacked
along a new first axis (a pytree of them too; `y = None` gives `ys = None`).

While tracing, a scan is **one rule call** on the tape: `scan` lifts the
body's captured values (`lift_closure`) and calls the primitive `scan_p(spec,
*init leaves, *xs leaves, *lifted values)`, whose rule (`ScanRule`, one per
call site) runs the body's derived rule (cached in a `DerivedRules`) at every
step. With carries cₖ₊₁, yₖ = body(cₖ, xₖ; θ) (θ the lifted values):

    forward:  c₀ = copy(init); each step's pullback kept (checkpoint=True: only cₖ)
    reverse:  c̄ₙ = carry's cotangent;  for k = n−1 … 0:
              (c̄ₖ, x̄ₖ, θ̄ₖ) = pullbackₖ(c̄ₖ₊₁, ȳs[k]);   x̄s[k] += x̄ₖ,  θ̄ += θ̄ₖ
              init̄ += c̄₀

Array cotangents travel in fdata (a carry's fdata is shared from the step that
makes it to the step that reads it; arrays the body captures accumulate over the
steps in their own fdata), scalar cotangents as rdata (captured scalars' summed).
With `checkpoint=True` the forward runs the body on plain values, storing only
the carries, and the reverse recomputes step k from cₖ before its pullback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._derived import DerivedRules
from rulekit._engine._levels import active_levels, plain
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
from rulekit._scan_steps import Steps, _pair, check_carry, own_copy, untraced
from rulekit._tangents import NoFData, NoRData, zero_fdata

__all__ = ["ScanRule", "ScanSpec", "scan", "scan_p"]

_NO_R = NoRData()
_NO_F = NoFData()


class ScanSpec:
    """The static part of a scan call: the lifted body and the trees (one per call)."""

    __slots__ = ("carry_def", "checkpoint", "length", "lifted", "n_carry", "n_xs", "xs_def",
                 "ys_def")  # fmt: skip

    def __init__(self, lifted: Lifted, carry_def: TreeDef, xs_def: TreeDef, n_carry: int,
                 n_xs: int, length: int, checkpoint: bool) -> None:  # fmt: skip
        self.lifted = lifted
        self.carry_def = carry_def
        self.xs_def = xs_def
        self.n_carry = n_carry
        self.n_xs = n_xs
        self.length = length  # (used when there are no xs: their leading axis otherwise)
        self.checkpoint = checkpoint
        self.ys_def: TreeDef = None  # set by the forward pass

    @property
    def args_def(self) -> TreeDef:
        return ("tuple", None, self.carry_def, self.xs_def)

    def __call__(self, *leaves: Any) -> tuple[Any, ...]:
        """The scan on plain leaves (init's, xs', the lifted values): `scan_p(self, ...)`.
        (Being callable, a spec is a non-differentiable constant, like a function.)"""
        return _scan_impl(self, *leaves)

    def __repr__(self) -> str:
        return f"ScanSpec({self.lifted!r}, length={self.length})"


def _length(xs_leaves: Sequence[Any], length: int | None) -> int:
    ns = set()
    for a in xs_leaves:
        if np.ndim(a) == 0:
            raise TypeError(
                f"scan: every leaf of xs must be an array to scan over its leading axis, got "
                f"{type(a).__name__} {np.shape(a)}. Fix: pass arrays (np.asarray), or capture "
                "constants in the body instead of passing them in xs."
            )
        ns.add(np.shape(a)[0])
    if len(ns) > 1:
        raise ValueError(f"scan: the leaves of xs have different leading axes {sorted(ns)}")
    if length is not None:
        length = int(length)
        if length < 0 or (ns and ns != {length}):
            raise ValueError(f"scan: length={length} but xs has leading axis {sorted(ns)}")
        return length
    if not ns:
        raise TypeError("scan: with xs=None (or no arrays in xs), length= is required")
    return ns.pop()


def scan(
    body: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | None = None,
    checkpoint: bool = False,
) -> tuple[Any, Any]:
    """Loop `carry, y = body(carry, x)` over the leading axis of `xs`; return `(carry, ys)`.

    JAX's `lax.scan` semantics. The carry keeps its structure, shapes and dtypes; the
    `y`s are stacked on a new first axis. Differentiable with respect to `init`, `xs`
    and values the body captures (also values traced by an enclosing trace). The body
    is traced once per signature; `checkpoint=True` keeps only the carries for the
    reverse pass and recomputes each step there. The body must not write into `x`
    (a read-only view of `xs`); it may write into its carry (a copy of init's).
    """
    if not callable(body):
        raise TypeError(f"scan: body must be callable, got {type(body).__name__}")
    carry_leaves, carry_def = flatten(init)
    xs_leaves, xs_def = flatten(xs)
    n = _length(xs_leaves, length)
    if active_levels():  # under jvp or a nested grad: the loop, traced by the levels
        return _unrolled(body, carry_leaves, carry_def, xs_leaves, xs_def, n)
    if not trace_state.active:  # plain values: just the loop
        c, ys, ys_def = Steps.loop(body, carry_leaves, carry_def, xs_leaves, xs_def, n)
        return unflatten(carry_def, _unaliased(c, xs_leaves)), unflatten(ys_def, ys)
    lifted, consts = lift_closure(body, "scan's body")
    spec = ScanSpec(lifted, carry_def, xs_def, len(carry_leaves), len(xs_leaves), n,
                    bool(checkpoint))  # fmt: skip
    out = scan_p(spec, *carry_leaves, *xs_leaves, *consts)
    nc = spec.n_carry
    return unflatten(carry_def, out[:nc]), unflatten(spec.ys_def, out[nc:])


def _scan_impl(spec: ScanSpec, *leaves: Any) -> tuple[Any, ...]:
    """The primitive on plain values: the loop, with the body rebuilt from the lifted values."""
    nc, nx = spec.n_carry, spec.n_xs
    body = spec.lifted.rebuild(leaves[nc + nx :])
    xs = leaves[nc : nc + nx]
    n = _length(xs, spec.length if not xs else None)
    try:
        with untraced():  # (a value of an enclosing trace the lifting missed is refused)
            c, ys, spec.ys_def = Steps.loop(body, leaves[:nc], spec.carry_def, xs, spec.xs_def, n)
    except TracingError as e:
        if is_foreign_error(e):
            raise foreign_value_error("scan's body", e) from e
        raise
    return (*_unaliased(c, leaves), *ys)


def _unrolled(body: Callable[..., Any], carry_leaves: Sequence[Any], carry_def: TreeDef,
              xs_leaves: Sequence[Any], xs_def: TreeDef, n: int) -> tuple[Any, Any]:  # fmt: skip
    """The scan as a Python loop whose every operation the running levels (forward mode,
    nested reverse mode) trace, with the ys stacked functionally (np.stack): the
    derivatives are those of the unrolled loop, to any order. (`checkpoint` has no effect
    here: the levels keep what their rules need.)"""
    if n == 0:  # (the ys' structure, shapes and dtypes: from the plain loop on zeros)
        plain_carry = [plain(v) for v in carry_leaves]
        plain_xs = [plain(v) for v in xs_leaves]
        _, empty, empty_def = Steps.loop(body, plain_carry, carry_def, plain_xs, xs_def, 0)
        init = [np.copy(v) if np.ndim(plain(v)) else v for v in carry_leaves]
        return unflatten(carry_def, init), unflatten(empty_def, empty)
    cur = list(carry_leaves)
    steps: list[list[Any]] = []
    ys_def: TreeDef = ("none", None)
    for i in range(n):
        xs_i = [a[i, ...] for a in xs_leaves]
        c, y = _pair(body(unflatten(carry_def, cur), unflatten(xs_def, xs_i)))
        c_leaves, c_def = flatten(c)
        check_carry([plain(v) for v in carry_leaves], [plain(v) for v in c_leaves], c_def,
                    carry_def)  # fmt: skip
        y_leaves, y_def = flatten(y)
        if i == 0:
            ys_def = y_def
        elif y_def != ys_def:
            raise TypeError(f"scan's body returned ys of changing structure at step {i}")
        steps.append(y_leaves)
        cur = c_leaves
    ys = [np.stack([step[k] for step in steps]) for k in range(len(steps[0]))]
    return unflatten(carry_def, cur), unflatten(ys_def, ys)


def _unaliased(carry: list[Any], inputs: Sequence[Any]) -> list[Any]:
    """The final carry, its arrays copied where they share memory with an input (a body
    may return x, or a captured array): a new value, as the rule's outputs are."""
    arrays = [a for a in inputs if isinstance(a, np.ndarray)]
    return [
        v.copy()
        if isinstance(v, np.ndarray) and any(np.may_share_memory(v, a) for a in arrays)
        else v
        for v in carry
    ]


scan_p = primitive(_scan_impl)


class ScanRule:
    """The rule of `scan_p`, one per call site: keeps the body's derived rules.

    It keeps no saved state of its own (each call's pullback holds its steps), so it
    is reentrant; `reset` resets the derived rules' stateful rules.
    """

    def __init__(self) -> None:
        self.rules = DerivedRules()

    def reset(self) -> None:
        """Drop the saved state of the derived rules' stateful rules."""
        self.rules.reset()

    def __call__(self, f: CoDual, spec_cd: CoDual, *cds: CoDual) -> tuple[CoDual, Any]:
        spec: ScanSpec = spec_cd.x
        nc, nx = spec.n_carry, spec.n_xs
        init, xs, consts = cds[:nc], cds[nc : nc + nx], cds[nc + nx :]
        n = _length([c.x for c in xs], spec.length if not xs else None)
        steps = Steps(self.rules, spec.lifted, spec.args_def, spec.carry_def, xs, consts)
        carry = [own_copy(c.x) for c in init]
        try:
            if spec.checkpoint or n == 0:
                final, ys = self._forward_stored(steps, spec, carry, n)
            else:
                final, ys = steps.forward(carry, n)
        except BaseException as e:
            steps.unwind()
            if isinstance(e, TracingError) and is_foreign_error(e):
                raise foreign_value_error("scan's body", e) from e
            raise
        spec.ys_def = steps.ys_def
        outs = [own_copy(c.x) for c in final] + [CoDual(a, zero_fdata(a)) for a in ys]
        dxs = tuple(o.dx if o.dx is not None else _NO_F for o in outs)
        y = CoDual(tuple(o.x for o in outs), _NO_F if all(d is _NO_F for d in dxs) else dxs)

        def scan_pullback(dy: Any) -> tuple[Any, ...]:
            dys = (_NO_R,) * len(outs) if isinstance(dy, NoRData) else dy
            # c̄ₙ: array leaves' cotangents in the outputs' fdata, scalars' in dy
            cot = [
                o.dx if isinstance(o.dx, np.ndarray) else r for o, r in zip(outs, dys, strict=True)
            ][:nc]
            ys_dx = [o.dx for o in outs[nc:]]
            if spec.checkpoint or n == 0:
                cot = steps.reverse_stored(cot, ys_dx)
            else:
                cot = steps.reverse(cot, ys_dx)
            init_r = []
            for c, r in zip(init, cot, strict=True):  # init̄ += c̄₀
                if c.dx is None or isinstance(r, NoRData):
                    init_r.append(_NO_R)
                elif isinstance(c.dx, np.ndarray):
                    c.dx += r
                    init_r.append(_NO_R)
                else:
                    init_r.append(r)
            return (_NO_R, _NO_R, *init_r, *(_NO_R,) * nx, *steps.const_rdata())

        return y, scan_pullback

    @staticmethod
    def _forward_stored(
        steps: Steps, spec: ScanSpec, carry: list[CoDual], n: int
    ) -> tuple[list[CoDual], list[np.ndarray]]:
        """checkpoint=True: run the body on plain values, keeping a copy of every carry."""
        body = spec.lifted.rebuild([c.x for c in steps.consts])
        with untraced():
            c, ys, steps.ys_def = Steps.loop(
                body, [cd.x for cd in carry], spec.carry_def, [cd.x for cd in steps.xs],
                spec.xs_def, n, store=steps.stored,
            )  # fmt: skip
        return [CoDual(x, None) for x in c], ys


def _examples() -> list[Example]:
    """Call examples for the conformance kit: an RNN-like body with a pytree carry and a
    captured array, with and without checkpointing, and a loop without xs."""
    rng = np.random.default_rng(0)
    W = rng.normal(size=(3, 3)) * 0.5

    def body(c: Any, x: Any) -> Any:
        h, s = c
        h2 = np.tanh(W @ h + (0.0 if x is None else x))
        return (h2, s + np.sum(h2) * 0.5), h * s

    out = []
    for xs, ck in ((rng.normal(size=(4, 3)), False), (rng.normal(size=(3, 3)), True),
                   (None, False)):  # fmt: skip
        lifted, consts = lift_closure(body)
        (leaves, carry_def), (xl, xs_def) = flatten((np.ones(3), 0.5)), flatten(xs)
        spec = ScanSpec(lifted, carry_def, xs_def, len(leaves), len(xl), 2, ck)
        out.append(Example((spec, *leaves, *xl, *consts), name=f"xs={xs is not None} ck={ck}"))
    return out


@build_primitive_rrule.register(scan_p, ScanSpec, Vararg[Any], examples=_examples)
def _build_scan_rule(sig: Any) -> ScanRule:
    return ScanRule()
