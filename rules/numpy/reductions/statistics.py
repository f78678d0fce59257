"""Rules for np.var, np.std and np.average.

var/std take `axis`, `dtype`, `ddof` (or `correction`), `keepdims`, `where=`
and `mean=` (a precomputed mean; traced, it gets its cotangent too). Complex
inputs: var and std are real, `x̄ = 2(x − μ)·ȳ/(N − ddof)` (the cotangent of a
real function of complex x is ∂y/∂Re x + i·∂y/∂Im x). Conventions
(docs/conventions-reductions.md): std at zero variance gives x̄ = 0, the
central (symmetric) derivative of this norm-like kink, as for norms at zero;
`ddof ≥ N` (numpy: inf/NaN and a warning) gives NaN cotangents.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Example, NoRData, Vararg, example
from rules._support.arguments import fdata, primal
from rules._support.cotangents import add_to_fdata, no_rdata, output_cotangent, unbroadcast
from rules._support.outputs import new_output
from rules.numpy.reductions._common import (
    axes_of,
    expand,
    flag,
    forward,
    lane_count,
    option,
    plan,
    read_options,
    reject_traced_scalars,
    safe_div,
    where_mask,
)

__all__ = ["average_rrule", "var_rrule"]

_VAR = ("axis", "dtype", "out", "ddof", "keepdims")
_AVERAGE = ("axis", "weights", "returned")


# -- var, std -------------------------------------------------------------------------------


def _var_examples() -> list[Example]:
    x = np.random.default_rng(30).normal(size=(3, 4))
    c = x.copy()
    c[:, 2] = 0.5  # a constant column: std's kink at zero variance gets 0 (= central differences)
    return [
        example(x),
        example(c, axis=0, ddof=1, keepdims=True),
        example(x + 1j * x[::-1], (0, 1), where=np.array([True, True, False, True])),
        example(x.astype(np.float32), -1, dtype=np.float64, correction=1),
    ]


@rulekit.rrule.register(np.var, Array[np.inexact], Vararg[Any], examples=_var_examples)
@rulekit.rrule.register(np.std, Array[np.inexact], Vararg[Any], examples=_var_examples)
def var_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = Σ|x − μ|²/(N − ddof) over `axis` (where= masked) ⇒ x̄ += 2(x − μ)·ȳ/(N − ddof).

    std = √var ⇒ x̄ += (x − μ)·ȳ/((N − ddof)·y), and 0 where y = 0. With mean=m
    given: the same with m for μ, and m̄ −= Σ (the x̄ increment) over `axis`.
    """
    mean_arg = kwargs.get("mean")
    call_kw = kwargs if not isinstance(mean_arg, CoDual) else {**kwargs, "mean": mean_arg.x}
    y, out, none, o = forward(f, x, args, kwargs, _VAR, call_kwargs=call_kw)
    if o is None:
        return out, lambda dy: none
    shape = x.x.shape
    axes, kshape = plan(o.get("axis"), shape)
    where = where_mask(o)
    ddof = option(o, "correction")
    ddof = o.get("ddof", 0) if ddof is None else ddof
    dof = lane_count(shape, axes, where) - ddof
    dtype = option(o, "dtype")
    std = f.x is np.std
    given_mean = option(o, "mean")

    def var_pullback(dy: Any) -> tuple[Any, ...]:
        mbar = fdata(given_mean)
        if x.dx is None and mbar is None:
            return none
        if given_mean is None:
            mu = np.mean(
                x.x, axis=axes, dtype=dtype, keepdims=True, where=True if where is None else where
            )
        else:
            mu = primal(given_mean)
        d = x.x - mu
        g = expand(output_cotangent(out, dy), kshape)
        n = dof if np.all(dof > 0) else np.where(dof > 0, dof, np.nan)  # ddof ≥ N: NaN
        s = safe_div(g, n * expand(y, kshape)) if std else g * (2 / n)
        gx = d * s
        if where is not None:
            gx = gx * where
        if x.dx is not None:
            add_to_fdata(x.dx, gx)
        if mbar is not None:
            add_to_fdata(
                given_mean.dx, -unbroadcast(np.sum(gx, axis=axes, keepdims=True), mbar.shape)
            )
        return none

    return out, var_pullback


# -- average --------------------------------------------------------------------------------


def _average_examples() -> list[Example]:
    rng = np.random.default_rng(31)
    x = rng.normal(size=(3, 4))
    w = rng.uniform(0.5, 1.5, size=(3, 4))
    return [
        example(x, weights=w),
        example(x, 1, w[0], True),  # 1-d weights along axis 1, returned=(avg, Σw)
        example(x + 1j * w, axis=(0, 1), weights=w - 0.5j, keepdims=True),
        example(x, axis=0, returned=True),  # no weights: the mean; the count has no cotangent
    ]


@rulekit.rrule.register(np.average, Array[np.inexact], Vararg[Any], examples=_average_examples)
def average_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = Σ w·x / W, W = Σ w over `axis` ⇒ x̄ += conj(w/W)·ȳ, w̄ += conj((x − y)/W)·ȳ + W̄.

    `returned=True` returns (y, W); W̄ is its cotangent (none without weights,
    where W is a count). The weights may be traced, positionally or as weights=.
    """
    o = read_options(_AVERAGE, args, kwargs)
    reject_traced_scalars("np.average", _AVERAGE, args)
    wcd: Any = o.get("weights")
    wts = primal(wcd)
    call_kw = dict(kwargs)
    if "weights" in kwargs:
        call_kw["weights"] = wts
    pos = [a.x for a in args]
    y = np.average(x.x, *pos, **call_kw)
    out = new_output(y)
    none = no_rdata(len(args) + 2)
    returned = flag(o, "returned")
    axis = o.get("axis")
    axes, kshape = plan(axis, x.x.shape)
    if len(args) >= 2:
        wcd = args[1]  # positional weights: their CoDual (an array's cotangent goes to fdata)

    def average_pullback(dy: Any) -> tuple[Any, ...]:
        avg = y[0] if returned else y
        if returned:
            if type(avg) is np.ndarray:
                gy, gw_total = out.dx
            else:
                gy, gw_total = (0.0 if isinstance(d, NoRData) else d for d in dy)
        else:
            gy, gw_total = output_cotangent(out, dy), None
        g = expand(gy, kshape)
        wdx = fdata(wcd)
        if wts is None:
            if x.dx is not None:
                add_to_fdata(x.dx, g / (x.x.size // max(np.size(avg), 1)))
            return none
        wb = _broadcastable_weights(np.asarray(wts), x.x.shape, axis)
        total = np.sum(wb, axis=axes, keepdims=True)
        if x.dx is not None:
            add_to_fdata(x.dx, np.conj(wb / total) * g)
        if wdx is not None:
            gw = np.conj((x.x - expand(avg, kshape)) / total) * g
            if gw_total is not None:
                gw = gw + expand(gw_total, kshape)
            gw = unbroadcast(np.broadcast_to(gw, x.x.shape), wb.shape)
            if wb.shape != np.shape(wts):
                p = np.argsort(axes)
                gw = gw.reshape(tuple(np.shape(wts)[i] for i in p)).transpose(np.argsort(p))
            add_to_fdata(wcd.dx, gw)
        return none

    return out, average_pullback


def _broadcastable_weights(w: np.ndarray, shape: tuple[int, ...], axis: Any) -> np.ndarray:
    """The weights as numpy.average broadcasts them against `a` (same shape, or along axis)."""
    if w.shape == shape:
        return w
    axes = axes_of(axis, len(shape))
    w = w.transpose(np.argsort(axes))
    return w.reshape(tuple(s if i in axes else 1 for i, s in enumerate(shape)))
