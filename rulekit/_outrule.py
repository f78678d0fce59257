"""`np.copyto` as a stateful mutation rule, and the generic `out=` mechanism built on it.

Any rule gets an `out=` form for free: the engine computes `y = f(...)` with the
rule for the call without `out=`, then records `np.copyto(out, y)`. That copy
is a mutation (DESIGN §2): for `dst ← src`,

    src̄ += unbroadcast(dst̄),   dst̄ ← 0,   dst ← dst_old

The old value of `dst` is saved into the rule's pooled buffer, so once warm
the copy allocates nothing (unless `src` was broadcast, whose adjoint needs a
reduction). A rule may register a faster `out=` form of its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._errors import TracingError
from rulekit._example import example
from rulekit._patterns import Array
from rulekit._registry import build_primitive_rrule
from rulekit._stateful import StatefulRRule
from rulekit._tangents import NoFData, NoRData

__all__ = ["CopyToRule", "copy_into"]

_NO_F = NoFData()
_NO_R = NoRData()


def _sum_to(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1
    )
    return g.sum(axis=axes, keepdims=True).reshape(shape)


class CopyToRule(StatefulRRule):
    """`np.copyto(dst, src)`: `src̄ += unbroadcast(dst̄)`, `dst̄ ← 0`, `dst ← dst_old`."""

    def __call__(
        self, f: CoDual, dst: CoDual, src: CoDual, casting: Any = "same_kind", where: Any = True
    ) -> tuple[CoDual, Any]:
        if where is not True:
            raise NotImplementedError(
                "rulekit: np.copyto(..., where=mask) on traced arrays has no rule yet; "
                "use np.where(mask, src, dst) and assign the result instead."
            )
        if dst.dx is None:
            if src.dx is not None:
                raise TracingError(
                    "np.copyto (or out=) writes a traced value into an untraced array: "
                    "its gradient would be lost. Make the destination traced, e.g. "
                    "`buf = np.zeros_like(x)` from a traced x."
                )
            np.copyto(dst.x, src.x, casting=casting)  # constant into constant
            return CoDual(None, _NO_F), lambda dy: (_NO_R, _NO_R, _NO_R)
        tok = self.save(dst.x)
        np.copyto(dst.x, src.x, casting=casting)

        def copyto_pullback(dy: Any) -> tuple[Any, ...]:
            g = dst.dx
            rsrc: Any = _NO_R
            sdx = src.dx
            if sdx is not None:
                if isinstance(sdx, np.ndarray):
                    gs = _sum_to(g, sdx.shape)
                    sdx += gs.real if (gs.dtype.kind == "c" and sdx.dtype.kind != "c") else gs
                elif isinstance(src.x, (float, complex, np.floating, np.complexfloating)):
                    total = g.sum()
                    if not isinstance(src.x, (complex, np.complexfloating)):
                        total = total.real
                    rsrc = type(src.x)(total)
            g.fill(0)
            self.restore(tok, into=dst.x)
            return (_NO_R, _NO_R, rsrc)

        return CoDual(None, _NO_F), copyto_pullback


def _copyto_examples() -> list[Any]:
    rng = np.random.default_rng(0)
    return [
        example(rng.normal(size=(3, 4)), rng.normal(size=(3, 4))),
        example(rng.normal(size=(3, 4)), rng.normal(size=(4,))),
        example(rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(2, 3))),
    ]


@build_primitive_rrule.register(np.copyto, Array[np.inexact], Array, examples=_copyto_examples)
def _copyto_scalar_examples() -> list[Any]:
    rng = np.random.default_rng(1)
    return [example(rng.normal(size=(2, 3)), 2.5), example(rng.normal(size=3), np.float64(-1.0))]


@build_primitive_rrule.register(
    np.copyto, Array[np.inexact], object, examples=_copyto_scalar_examples
)
def _build_copyto(sig: Any) -> CopyToRule:
    return CopyToRule()


def copy_into(tape: Any, out_t: Any, result: Any) -> None:
    """Record `np.copyto(out, result)` on the tape (the generic `out=` mechanism)."""
    from rulekit._call import traced_call

    traced_call(tape, np.copyto, (out_t, result), {})
