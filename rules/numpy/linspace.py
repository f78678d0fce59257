"""Rules for numpy's creation functions with differentiable arguments: linspace.

    y = linspace(s, e, num)   ⇒  s̄ += Σᵢ (1 − tᵢ) ȳᵢ,  ē += Σᵢ tᵢ ȳᵢ,  tᵢ = i/div
                                 (div = num − 1 with the endpoint, else num);
                                 retstep's step = (e − s)/div adds ∓ step̄/div

numpy sets the last point to exactly `stop` when endpoint=True, so t_last = 1.
An integer `dtype=` floors the points: the output is not differentiable
(inactive). `num = 1` with the endpoint gives a nan step (a constant).
(`np.full(shape, v)` and `np.array([traced, ...])` cannot be traced: numpy does not
dispatch them on `v`; use `np.full_like(x, v)`, `np.zeros(shape) + v`, `np.stack`.)
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from rulekit import CoDual, Vararg, example, rrule
from rules._support.arguments import primals
from rules._support.binding import binder
from rules._support.cotangents import accumulate, element_cotangent
from rules._support.examples import randn
from rules._support.outputs import inactive_output, new_output
from rules._support.patterns import Numeric

__all__ = ["linspace_rrule"]

ArrayLike = Union[Numeric, list, tuple]


# -- linspace ---------------------------------------------------------------------------------

_bind_linspace = binder(np.linspace)


def linspace_rrule(
    f: CoDual, start: CoDual, stop: CoDual, *args: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = linspace(s, e, num, endpoint, retstep, dtype, axis): yᵢ = s + tᵢ(e − s), tᵢ = i/div
    (div = num − 1 with the endpoint, else num)  ⇒  s̄ += Σ(1 − tᵢ)ȳᵢ, ē += Σ tᵢȳᵢ; the step
    (e − s)/div of retstep=True adds ∓ step̄/div (div = 0: numpy's step is nan, a constant)."""
    b = _bind_linspace((start, stop, *args), kwargs)
    p = primals(args, kwargs)
    res = np.linspace(start.x, stop.x, *p[0], **p[1])
    retstep = bool(b.value("retstep"))
    y = res[0] if retstep else res
    nargs = 3 + len(args)
    if (start.dx is None and stop.dx is None) or (y.dtype.kind not in "fc"):
        return inactive_output(res, nargs)
    num, endpoint = int(b.value("num")), bool(b.value("endpoint"))
    div = num - 1 if endpoint else num
    t = np.arange(num, dtype=np.float64) / div if div > 0 else np.zeros(num)
    axis = int(b.value("axis")) % y.ndim
    out = new_output(res)

    def linspace_pullback(dy: Any) -> tuple[Any, ...]:
        g = np.moveaxis(out.dx[0] if retstep else out.dx, axis, 0)
        gs = np.tensordot(1 - t, g, axes=(0, 0))
        ge = np.tensordot(t, g, axes=(0, 0))
        if retstep and div > 0:
            gstep = element_cotangent(out, dy, 1)
            if gstep is not None:
                gs = gs - np.asarray(gstep) / div
                ge = ge + np.asarray(gstep) / div
        return b.rdata({"start": accumulate(start, gs), "stop": accumulate(stop, ge)})

    return out, linspace_pullback


def _linspace_examples() -> list[Any]:
    return [
        example(np.float64(-1.0), np.float64(2.0), 5),
        example(randn(2), randn(3, 1, seed=1), 4, endpoint=False, axis=-1),
        example(0.5, randn(2, dtype=np.float32), 3, retstep=True),
        example(np.complex128(1 + 2j), 3.0, 4, True, True, np.complex64),
    ]


rrule.register(np.linspace, ArrayLike, ArrayLike, Vararg[Any], examples=_linspace_examples)(
    linspace_rrule
)
