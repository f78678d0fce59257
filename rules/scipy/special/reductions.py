"""Rules for scipy.special's reductions `logsumexp`, `softmax`, `log_softmax`.

They are Python functions that convert their input with `np.asarray`, which a
traced value refuses, so this module exports `rulekit.primitive` wrappers with
scipy's names and signatures (also as `rules.scipy.special.logsumexp`, ...): plain
calls go straight to scipy, traced calls dispatch to the rules below. Real
inputs only (float16/32/64 arrays and real scalars); complex input has no rule.

The pullbacks use the forward's own outputs, so they are as stable as scipy's
forward: no exp of an unshifted input is ever taken.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import scipy.special as sp

import rulekit
from rulekit import Array, CoDual, NoFData, Vararg
from rules._support.arguments import is_active, primal
from rules._support.binding import binder
from rules._support.cotangents import NO_R, accumulate, no_rdata, output_cotangent
from rules._support.outputs import new_output

__all__ = ["log_softmax", "logsumexp", "softmax"]

logsumexp = rulekit.primitive(sp.logsumexp)
softmax = rulekit.primitive(sp.softmax)
log_softmax = rulekit.primitive(sp.log_softmax)

_REAL = Union[Array[np.float16], Array[np.float32], Array[np.float64], float, np.floating]


_LOGSUMEXP, _SOFTMAX, _LOG_SOFTMAX = (
    binder(sp.logsumexp),
    binder(sp.softmax),
    binder(sp.log_softmax),
)


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """`axis` (None, an int or a tuple) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    return tuple(sorted(int(a) % max(ndim, 1) for a in axes))


# -- logsumexp ----------------------------------------------------------------------------------


def _logsumexp_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(300)
    a = rng.uniform(-1.0, 1.0, (2, 3))
    b = np.array([2.0, -0.3, 1.0])  # Σ b·eᵃ ≥ 0.29 on this range: the sign is stable
    return [
        rulekit.example(a, axis=1),
        rulekit.example(rng.uniform(-2.0, 2.0, 4).astype(np.float32)),  # → np.float32 scalar
        rulekit.example(a, 1, b, True, True),  # b positional (differentiable), keepdims, sign
        rulekit.example(a, None, rng.uniform(0.5, 2.0, (2, 3))),  # full reduction with b
    ]


@rulekit.rrule.register(logsumexp, _REAL, Vararg[Any], examples=_logsumexp_examples)
def logsumexp_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = log|Σ b·eᵃ| (over `axis`), s = sign(Σ b·eᵃ) (return_sign; else s = 1):
    ā += s·b·exp(a − y)·ȳ,  b̄ += s·exp(a − y)·ȳ  (y and ȳ broadcast back over `axis`).
    The sign output is piecewise constant: its cotangent is ignored."""
    o = _LOGSUMEXP((a, *rest), kwargs)
    bcd = o["b"]
    b = primal(bcd)
    if b is not None and np.iscomplexobj(b):
        raise NotImplementedError(
            "rules.scipy.special.logsumexp: a complex b has no rule. Fix: pass a real b (the rule "
            "takes real a and b only)."
        )
    axis, keepdims = primal(o["axis"]), bool(primal(o["keepdims"]))
    rs = bool(primal(o["return_sign"]))
    res = sp.logsumexp(a.x, axis=axis, b=b, keepdims=keepdims, return_sign=rs)
    out = new_output(res)
    nargs = 2 + len(rest)

    def pullback(dy: Any) -> tuple[Any, ...]:
        need_a, need_b = is_active(a), is_active(bcd)
        if not (need_a or need_b):
            return no_rdata(nargs)
        if rs:
            dx0 = out.dx[0] if not isinstance(out.dx, NoFData) else None
            g = output_cotangent(CoDual(res[0], dx0), dy[0] if isinstance(dy, tuple) else dy)
            lse, sign = res
        else:
            g, lse, sign = output_cotangent(out, dy), res, None
        shape = np.broadcast_shapes(np.shape(a.x), np.shape(b))
        axes = _axes(axis, len(shape))
        if not keepdims:
            g, lse = np.expand_dims(g, axes), np.expand_dims(lse, axes)
            sign = None if sign is None else np.expand_dims(sign, axes)
        with np.errstate(invalid="ignore"):  # −inf − (−inf) where a slice has no mass: NaN
            w = np.exp(a.x - lse) * g
        if sign is not None:
            w = w * sign
        ra = accumulate(a, w if b is None else w * b) if need_a else NO_R
        rb = accumulate(bcd, w) if need_b else NO_R
        r = [NO_R, ra, *no_rdata(len(rest))]
        if need_b and isinstance(bcd, CoDual) and len(rest) >= 2 and rest[1] is bcd:
            r[3] = rb  # b passed positionally: its rdata (a scalar b's cotangent) goes back
        return tuple(r)

    return out, pullback


# -- softmax, log_softmax -----------------------------------------------------------------------


def _softmax_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(310)
    return [
        rulekit.example(rng.normal(size=(2, 3)), axis=1),
        rulekit.example(rng.normal(size=4).astype(np.float32)),
        rulekit.example(rng.normal(size=(2, 3, 2)), (0, 2)),  # a tuple of axes, positional
        rulekit.example(rng.normal(size=(3, 2)), axis=0),
    ]


@rulekit.rrule.register(softmax, _REAL, Vararg[Any], examples=_softmax_examples)
def softmax_rrule(f: CoDual, x: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """s = softmax(x) over `axis`  ⇒  x̄ += s ⊙ (ȳ − Σ_axis s ⊙ ȳ)."""
    axis = _SOFTMAX((x, *rest), kwargs).value("axis")
    s = sp.softmax(x.x, axis=axis)
    out = new_output(s)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if not is_active(x):
            return no_rdata(2 + len(rest))
        sg = s * output_cotangent(out, dy)
        gx = sg - s * np.sum(sg, axis=axis, keepdims=True)
        return (NO_R, accumulate(x, gx), *no_rdata(len(rest)))

    return out, pullback


@rulekit.rrule.register(log_softmax, _REAL, Vararg[Any], examples=_softmax_examples)
def log_softmax_rrule(f: CoDual, x: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = x − logsumexp(x) over `axis`  ⇒  x̄ += ȳ − exp(y)·Σ_axis ȳ."""
    axis = _LOG_SOFTMAX((x, *rest), kwargs).value("axis")
    y = sp.log_softmax(x.x, axis=axis)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if not is_active(x):
            return no_rdata(2 + len(rest))
        g = output_cotangent(out, dy)
        gx = g - np.exp(y) * np.sum(g, axis=axis, keepdims=True)
        return (NO_R, accumulate(x, gx), *no_rdata(len(rest)))

    return out, pullback
