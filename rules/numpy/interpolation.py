"""Rules for np.interp (piecewise-linear interpolation, differentiable in x, xp, fp, left,
right) and np.trapezoid (the integral of that interpolant).

For x in the segment numpy uses, xp[j] ≤ x < xp[j+1] (searchsorted(xp, x, "right") − 1),
y = fp[j] + s·(x − xp[j]) with s = (fp[j+1] − fp[j])/(xp[j+1] − xp[j]), t = (x − xp[j])/Δxp:

    x̄ += Re(s̄·ȳ),  fp̄[j] += (1 − t)·ȳ,  fp̄[j+1] += t·ȳ,
    xp̄[j] += (t − 1)·Re(s̄·ȳ),  xp̄[j+1] −= t·Re(s̄·ȳ)

Conventions (docs/conventions-misc.md): at a knot x = xp[j] the segment to its
right is used (the right derivative in x; numpy returns fp[j] there, the same
value); at x = xp[-1] and outside [xp[0], xp[-1]] y is the constant fp[-1], fp[0],
`left` or `right` (numpy's clamping): x̄ = 0 and xp̄ = 0 there, and ȳ goes to that
constant (fp[0]/fp[-1], or `left`/`right` when given and traced). A NaN x gives
y = x. `period=` is not supported (NotImplementedError).

`np.trapezoid(y, x, dx, axis)` = Σ Δx·(yᵢ + yᵢ₊₁)/2 is derived from numpy's own formula
(`rules.numpy._composite`): ȳᵢ = (Δxᵢ₋₁ + Δxᵢ)/2·Ī, x̄ᵢ = (yᵢ₋₁ − yᵢ₊₁)/2·Ī (one-sided at the
ends), and a traced scalar dx gets Σ (yᵢ + yᵢ₊₁)/2·Ī.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Vararg, example
from rules._support.cotangents import accumulate, no_rdata, output_cotangent
from rules._support.examples import randn
from rules._support.outputs import new_output
from rules.numpy._composite import composite

__all__ = ["interp_rrule", "trapezoid_impl"]

_NAMES = ("x", "xp", "fp", "left", "right", "period")


def interp_rrule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = fp[j] + s(x − xp[j]) ⇒ x̄ = Re(s̄ȳ), fp̄ⱼ,ⱼ₊₁ = (1−t, t)ȳ, xp̄ⱼ,ⱼ₊₁ = (t−1, −t)Re(s̄ȳ)."""
    cd = dict(zip(_NAMES, args, strict=False))
    o = {n: c.x for n, c in cd.items()}
    o.update(kwargs)
    if o.get("period") is not None:
        raise NotImplementedError("np.interp: period= has no rule; call it without period=")
    y = f.x(*[a.x for a in args], **kwargs)
    out = new_output(y)
    none = no_rdata(len(args) + 1)
    if not any(c.dx is not None for c in cd.values()):
        return out, lambda dy: none

    def interp_pullback(dy: Any) -> tuple[Any, ...]:
        x = np.asarray(o["x"], np.float64)
        xp = np.asarray(o["xp"], np.float64)
        fp = np.asarray(o["fp"])
        g = np.broadcast_to(np.asarray(output_cotangent(out, dy)), x.shape)
        n = xp.size
        j = np.searchsorted(xp, x, side="right") - 1
        inner = (j >= 0) & (j < n - 1)
        jj = np.clip(j, 0, max(n - 2, 0))
        k = np.minimum(jj + 1, n - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            dxp = xp[k] - xp[jj]
            t = np.where(inner, (x - xp[jj]) / np.where(inner, dxp, 1), 0)
            s = np.where(inner, (fp[k] - fp[jj]) / np.where(inner, dxp, 1), 0)
        gi = np.where(inner, g, 0)
        gs = np.real(np.conj(s) * gi)  # Re(s̄ȳ): the cotangent of the position x
        nan = np.isnan(x)
        below = ~nan & (j < 0)
        above = ~nan & ~inner & (j >= n - 1) & (x != xp[-1])
        at_end = ~nan & ~inner & ~below & ~above
        fpb = np.zeros(fp.shape, np.result_type(fp, g))
        np.add.at(fpb, jj, (1 - t) * gi)
        np.add.at(fpb, k, t * gi)
        fpb[-1] += np.sum(np.where(at_end, g, 0))
        grads: dict[str, Any] = {"x": gs + np.where(nan, np.real(g), 0), "fp": fpb}
        for side, mask, end in (("left", below, 0), ("right", above, -1)):
            total = np.sum(np.where(mask, g, 0))
            if o.get(side) is None:
                fpb[end] += total
            else:
                grads[side] = total
        xpb = np.zeros(xp.shape)
        np.add.at(xpb, jj, (t - 1) * gs)
        np.add.at(xpb, k, -t * gs)
        grads["xp"] = xpb
        rd = [accumulate(c, grads.get(name)) if c.dx is not None else none[0]
              for name, c in cd.items()]  # fmt: skip
        return (none[0], *rd)

    return out, interp_pullback


def _examples() -> list[Any]:
    xp = np.array([-1.0, -0.2, 0.5, 1.3, 2.0])
    fp = randn(5, seed=13)
    x = np.array([-1.5, -0.7, 0.1, 0.9, 1.9, 2.5, 0.45])
    return [
        example(x, xp, fp),
        example(x.astype(np.float32), xp, fp),
        example(x.reshape(7, 1), xp, fp + 1j * randn(5, seed=14)),  # complex fp
        example(0.3, xp, fp),  # a scalar x
        example(x, xp, fp, -2.0, 3.0),  # left=, right=
        example(x, xp, fp, right=4.0),
    ]


rulekit.rrule.register(np.interp, Any, Any, Any, Vararg[Any], examples=_examples)(interp_rrule)


def trapezoid_impl(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """np.trapezoid's formula (numpy/lib/_function_base_impl.py) on traced values."""
    if x is None:
        d = dx
    else:
        if not rulekit.is_traced(x):
            x = np.asanyarray(x)
        if np.ndim(x) == 1:
            d = np.diff(x)
            shape = [1] * np.ndim(y)
            shape[axis] = d.shape[0]
            d = np.reshape(d, shape)
        else:
            d = np.diff(x, axis=axis)
    nd = np.ndim(y)
    slice1 = [slice(None)] * nd
    slice2 = [slice(None)] * nd
    slice1[axis] = slice(1, None)
    slice2[axis] = slice(None, -1)
    return np.sum(d * (y[tuple(slice1)] + y[tuple(slice2)]) / 2.0, axis=axis)


def _trapezoid_examples() -> list[Any]:
    y = randn(3, 5, seed=29)
    return [
        example(y),
        example(y, np.sort(randn(5, seed=30))),  # 1-d sample points
        example(y, np.cumsum(np.abs(randn(3, 5, seed=47)), axis=0), axis=0),  # n-d x
        example(y.astype(np.float32), dx=0.5, axis=0),
        example(y + 1j * randn(3, 5, seed=48), None, 0.25),  # complex y, a positional dx
        example(randn(4, seed=49)),  # a 0-d result
    ]


rulekit.build_primitive_rrule.register(np.trapezoid, Array[np.inexact], Vararg[Any],
                                       examples=_trapezoid_examples)(composite(
    trapezoid_impl, "I = Σ Δx(yᵢ + yᵢ₊₁)/2 ⇒ ȳᵢ = Ī(Δxᵢ₋₁ + Δxᵢ)/2, x̄ᵢ = Ī(yᵢ₋₁ − yᵢ₊₁)/2"
))  # fmt: skip
