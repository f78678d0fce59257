"""Forward rules and differentiable pullbacks of var, std and average.

    var:      y = Σ|x − μ|²/n, n = N − ddof      ẏ = (2/n)·Σ Re(conj(x − μ)·(ẋ − ṁ))
                                                 x̄ = 2(x − μ)·ȳ/n,  m̄ = −Σ x̄ (mean= given)
    std:      y = √var                           ẏ = vaṙ/(2y),  x̄ = (x − μ)·ȳ/(n·y)  (0 where y = 0)
    average:  y = Σ w·x / W, W = Σ w              ẏ = Σ (w·ẋ + ẇ·(x − y)) / W,  Ẇ = Σ ẇ
                                                 x̄ = conj(w/W)·ȳ,  w̄ = conj((x − y)/W)·ȳ + W̄

The terms in ṁ vanish when μ is x's own mean (Σ (x − μ) = 0); they count when a mean=
is given. where= masks the elements (var/std), `ddof`/`correction` as numpy's;
std's kink at zero variance gets 0 (as the reverse rule: the central derivative).
Complex x: var and std are real. A traced keyword `mean=`/`weights=` is refused by the
pullback (positional arguments carry cotangents; pass weights positionally).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Dual
from rulekit._declared_rules import shaped_like
from rules._support.forward import register_like
from rules.numpy.reductions import statistics as _statistics  # noqa: F401  (reverse rules first)
from rules.numpy.reductions.forward_common import (
    cot_like,
    kept,
    kind,
    options,
    reduction_plan,
    safe_ratio,
    spread,
    tangent_of,
)

__all__ = ["average_frule", "average_vjp", "var_frule", "var_vjp"]

_VAR = ("axis", "dtype", "out", "ddof", "keepdims")
_AVERAGE = ("axis", "weights", "returned")


def _traced(v: Any) -> bool:
    """Whether a keyword value is traced by an enclosing transformation (not a plain value)."""
    return v is not None and not isinstance(v, (np.ndarray, np.generic, float, int, complex))


def _var_parts(x: Any, o: dict[str, Any], y: Any) -> tuple[Any, Any, Any, tuple[int, ...]]:
    """(d = x − μ in the computing dtype, where mask or None, n = N − ddof (kept dims), axes)."""
    shape = np.shape(x)
    axes, _ = reduction_plan(o, shape)
    dt = o.get("dtype")
    xc = x if dt is None or np.result_type(x) == np.dtype(dt) else x.astype(dt)
    where = o.get("where", True)
    mask = None if where is True else np.broadcast_to(where, shape)
    mean = o.get("mean")
    if mean is None:
        mean = np.mean(xc, axis=axes, keepdims=True, where=True if mask is None else mask)
    d = xc - mean
    count = 1
    if mask is None:
        for i in axes:
            count *= shape[i]
    else:
        count = np.sum(mask, axis=axes, keepdims=True)
    ddof = o.get("correction", o.get("ddof", 0))
    return d, mask, count - ddof, axes


def var_frule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """var: ẏ = (2/n)·Σ Re(conj(x − μ)·(ẋ − ṁ)); std: ẏ = vaṙ/(2y), 0 where y = 0."""
    mean_kw = kwargs.get("mean")
    plain_kw = {k: (v.x if isinstance(v, Dual) else v) for k, v in kwargs.items()}
    y = f.x(x.x, *[a.x for a in args], **plain_kw)
    mdot = tangent_of(mean_kw)
    if kind(y) not in "fc" or (x.dx is None and mdot is None):
        return Dual(y, None)
    o = options(_VAR, args, kwargs)
    d, mask, n, axes = _var_parts(x.x, o, y)
    xd = 0 if x.dx is None else x.dx
    if mdot is not None:
        xd = xd - mdot
    s = np.real(np.conj(d) * xd)
    if mask is not None:
        s = np.where(mask, s, 0)
    t = np.sum(s, axis=axes, keepdims=True) * (2 / n)
    if f.x is np.std:
        t = safe_ratio(t, 2 * kept(y, np.shape(t)))
    return Dual(y, shaped_like(np.reshape(t, np.shape(y)), y))


def var_vjp(fn: Any) -> Any:
    """The differentiable pullback of np.var (x̄ = 2(x − μ)·ȳ/n) or np.std (x̄ = (x − μ)·ȳ/(n·y),
    0 where y = 0), where= masked."""
    std = fn is np.std

    def rule(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if _traced(kwargs.get("mean")):
            raise NotImplementedError(
                f"np.{fn.__name__}: a traced mean= keyword gets no cotangent from this "
                "differentiable pullback; compute np.mean((x - m)**2) instead."
            )
        y = fn(x, *args, **kwargs)
        o = options(_VAR, args, kwargs)

        def var_pullback(g: Any) -> tuple[Any, ...]:
            res: list[Any] = [None] * (1 + len(args))
            if not (active[0] and kind(x) in "fc" and kind(y) in "fc"):
                return tuple(res)
            d, mask, n, _ = _var_parts(x, o, y)
            _, kshape = reduction_plan(o, np.shape(x))
            gk = kept(np.real(g) if kind(g) == "c" else g, kshape)  # (y real: a complex
            # dtype= only stores it as complex, so Im ȳ meets nothing)
            s = safe_ratio(gk, n * kept(y, kshape)) if std else gk * (2 / n)
            gx = d * s
            if mask is not None:
                gx = np.where(mask, gx, 0)
            res[0] = cot_like(gx, x)
            return tuple(res)

        return y, var_pullback

    rule.__name__ = rule.__qualname__ = f"{fn.__name__}_vjp"
    rule.__doc__ = var_vjp.__doc__
    return rule


# -- average ----------------------------------------------------------------------------------


def _weights_like(w: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """The weights as np.average broadcasts them against x (x's shape, or along `axes`)."""
    if np.shape(w) == shape:
        return w
    p = np.argsort(axes)
    w = np.transpose(w, tuple(int(i) for i in p)) if len(axes) > 1 else w
    return np.reshape(w, tuple(s if i in axes else 1 for i, s in enumerate(shape)))


def _weights_back(gw: Any, w: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """The adjoint of `_weights_like`: gw (x's shape) summed back to w's shape."""
    if np.shape(w) == shape:
        return gw
    gw = np.sum(gw, axis=tuple(i for i in range(len(shape)) if i not in axes))
    if len(axes) > 1:
        gw = np.transpose(gw, tuple(int(i) for i in np.argsort(np.argsort(axes))))
    return np.reshape(gw, np.shape(w))


def _average_weights(args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    if len(args) >= 2:
        return args[1]
    return kwargs.get("weights")


def average_frule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """ẏ = Σ (w·ẋ + ẇ·(x − y)) / W; with returned=True also Ẇ = Σ ẇ."""
    wd = _average_weights(args, kwargs)
    plain_kw = {k: (v.x if isinstance(v, Dual) else v) for k, v in kwargs.items()}
    out = f.x(x.x, *[a.x for a in args], **plain_kw)
    o = options(_AVERAGE, args, kwargs)
    returned = bool(o.get("returned", False))
    avg = out[0] if returned else out
    w = o.get("weights")
    wdot = tangent_of(wd)
    xdot = x.dx if kind(x.x) in "fc" else None
    if kind(avg) not in "fc" or (xdot is None and wdot is None):
        return Dual(out, (None, None) if returned else None)
    shape = np.shape(x.x)
    axes, kshape = reduction_plan(o, shape)
    if w is None:
        assert xdot is not None
        t = np.mean(xdot, axis=axes, keepdims=True)
        t = shaped_like(np.reshape(t, np.shape(avg)), avg)
        return Dual(out, (t, None) if returned else t)
    wb = _weights_like(w, shape, axes)
    total = np.sum(np.broadcast_to(wb, shape), axis=axes, keepdims=True)
    num: Any = 0
    if xdot is not None:
        num = num + np.sum(wb * xdot, axis=axes, keepdims=True)
    wtot = None
    if wdot is not None:
        wdb = np.broadcast_to(_weights_like(wdot, shape, axes), shape)
        num = num + np.sum(wdb * (x.x - kept(avg, kshape)), axis=axes, keepdims=True)
        wtot = np.sum(wdb, axis=axes, keepdims=True)
    t = shaped_like(np.reshape(num / total, np.shape(avg)), avg)
    if not returned:
        return Dual(out, t)
    tw = None if wtot is None else shaped_like(np.reshape(wtot, np.shape(out[1])), out[1])
    return Dual(out, (t, tw))


def average_vjp(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """x̄ = conj(w/W)·ȳ, w̄ = conj((x − y)/W)·ȳ + W̄ (returned=True: ȳ = (ȳ, W̄))."""
    if _traced(kwargs.get("weights")):
        raise NotImplementedError(
            "np.average: traced weights= passed by keyword get no cotangent from this "
            "differentiable pullback; pass them positionally: np.average(x, axis, weights)."
        )
    out = np.average(x, *args, **kwargs)
    o = options(_AVERAGE, args, kwargs)
    returned = bool(o.get("returned", False))
    avg = out[0] if returned else out
    w = o.get("weights")
    shape = np.shape(x)
    axes, kshape = reduction_plan(o, shape)

    def average_pullback(g: Any) -> tuple[Any, ...]:
        res: list[Any] = [None] * (1 + len(args))
        gy, gw_total = g if returned else (g, None)
        if gy is None:
            gy = np.zeros(np.shape(avg), np.result_type(avg))
        if kind(avg) not in "fc":
            return tuple(res)
        gk = kept(gy, kshape)
        if w is None:
            if active[0] and kind(x) in "fc":
                n = 1
                for i in axes:
                    n *= shape[i]
                res[0] = cot_like(spread(gk / max(n, 1), kshape, shape), x)
            return tuple(res)
        wb = _weights_like(w, shape, axes)
        total = np.sum(np.broadcast_to(wb, shape), axis=axes, keepdims=True)
        if active[0] and kind(x) in "fc":
            res[0] = cot_like(np.broadcast_to(np.conj(wb / total) * gk, shape), x)
        if len(args) >= 2 and len(active) > 2 and active[2] and kind(w) in "fc":
            gw = np.conj((x - kept(avg, kshape)) / total) * gk
            if gw_total is not None:
                gw = gw + kept(gw_total, kshape)
            gw = np.broadcast_to(gw, shape)
            res[2] = cot_like(_weights_back(gw, w, shape, axes), w)
        return tuple(res)

    return out, average_pullback


register_like(np.var, frule=var_frule, vjp=var_vjp(np.var))
register_like(np.std, frule=var_frule, vjp=var_vjp(np.std))
register_like(np.average, frule=average_frule, vjp=average_vjp)
