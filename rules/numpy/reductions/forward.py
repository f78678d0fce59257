"""Forward rules and differentiable pullbacks of the sums and products: sum, mean, nansum,
nanmean, prod, cumprod (cumsum's come from its linear declaration).

    sum:      ẏ = Σ where·ẋ (+ initial̇)              x̄ = where·ȳ (broadcast back),  initial̄ = Σ ȳ
    mean:     ẏ = Σ where·ẋ / N                       x̄ = where·ȳ / N
    nansum:   ẏ = Σ keep·ẋ (keep: not NaN, where)     x̄ = keep·ȳ
    nanmean:  ẏ = Σ keep·ẋ / max(#keep, 1)            x̄ = keep·ȳ / max(#keep, 1)
    prod:     ẏ = initial·Σ ẋᵢ·Π_{j≠i} xⱼ            x̄ᵢ = conj(initial·Π_{j≠i} xⱼ)·ȳ
    cumprod:  ẏᵢ = ẏᵢ₋₁·xᵢ + yᵢ₋₁·ẋᵢ                x̄ᵢ = conj(yᵢ₋₁)·aᵢ,  aᵢ = ȳᵢ + conj(xᵢ₊₁)·aᵢ₊₁

Products are exact with zeros: Π_{j≠i} xⱼ comes from prefix and suffix products (no
division), and cumprod runs its recurrence along the axis (one step per element of the
axis; a loop of the lane's length, not a division by x). Every body is plain NumPy on its
arguments, so the rules are differentiated again when their arguments are traced.
Options as numpy's: axis (None, int, tuple), dtype=, keepdims, where=, initial=;
complex x; an integer dtype= gives no tangent. Registered on the reverse rules'
patterns (`register_like`), the scalar-argument patterns included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Dual
from rulekit._declared_rules import shaped_like
from rules._support.forward import register_like
from rules.numpy.reductions import nan_sums as _nan_sums  # noqa: F401  (reverse rules first)
from rules.numpy.reductions import products as _products  # noqa: F401
from rules.numpy.reductions import scalar as _scalar  # noqa: F401
from rules.numpy.reductions import sums as _sums  # noqa: F401
from rules.numpy.reductions.forward_common import (
    cot_like,
    kind,
    options,
    reduction_plan,
    spread,
)

__all__ = ["cumprod_frule", "cumprod_vjp", "exclusive_prod", "prod_frule", "prod_vjp",
           "sum_frule", "sum_vjp"]  # fmt: skip

_SUM = ("axis", "dtype", "out", "keepdims", "initial", "where")
_MEAN = ("axis", "dtype", "out", "keepdims")
_CUM = ("axis", "dtype", "out")
_NAN_SKIPPING = (np.nansum, np.nanmean)


def _keep(fn: Any, x: Any, o: dict[str, Any]) -> Any:
    """The elements that count: where= (and, for nansum/nanmean, not NaN); None for all."""
    where = o.get("where", True)
    keep = None if where is True else np.broadcast_to(where, np.shape(x))
    if fn in _NAN_SKIPPING:
        nn = ~np.isnan(x)
        keep = nn if keep is None else keep & nn
    return keep


def _count(keep: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """The number of elements per lane (kept dims; ≥ 1 so an empty lane divides by 1)."""
    if keep is None:
        n = 1
        for i in axes:
            n *= shape[i]
        return max(n, 1)
    return np.maximum(np.sum(keep, axis=axes, keepdims=True), 1)


def sum_frule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """sum/nansum: ẏ = Σ keep·ẋ (+ initial̇); mean/nanmean: ẏ = Σ keep·ẋ / N."""
    fn = f.x
    y = fn(x.x, *[a.x for a in args], **kwargs)
    o = options(_MEAN if fn in (np.mean, np.nanmean) else _SUM, args, kwargs)
    init = args[4].dx if len(args) > 4 and kind(args[4].x) in "fc" else None
    if kind(y) not in "fc" or (x.dx is None and init is None):
        return Dual(y, None)
    t: Any = 0
    if x.dx is not None and kind(x.x) in "fc":
        shape = np.shape(x.x)
        axes, _ = reduction_plan(o, shape)
        keep = _keep(fn, x.x, o)
        xd = x.dx if keep is None else np.where(keep, x.dx, 0)
        dt = o.get("dtype")
        t = np.sum(xd, axis=axes, dtype=dt, keepdims=True)
        if fn in (np.mean, np.nanmean):
            t = t / _count(keep, shape, axes)
        t = np.reshape(t, np.shape(y))
    if init is not None:
        t = t + init
    return Dual(y, shaped_like(t, y))


def sum_vjp(fn: Any) -> Any:
    """The differentiable pullback of sum/nansum (x̄ = keep·ȳ broadcast back, initial̄ = Σ ȳ)
    or mean/nanmean (x̄ = keep·ȳ/N)."""
    mean = fn in (np.mean, np.nanmean)

    def rule(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        y = fn(x, *args, **kwargs)
        o = options(_MEAN if mean else _SUM, args, kwargs)

        def sum_pullback(g: Any) -> tuple[Any, ...]:
            res: list[Any] = [None] * (1 + len(args))
            if kind(y) not in "fc":
                return tuple(res)
            if active[0] and kind(x) in "fc":
                shape = np.shape(x)
                axes, kshape = reduction_plan(o, shape)
                keep = _keep(fn, x, o)
                gx = spread(g, kshape, shape)
                if mean:
                    gx = gx / _count(keep, shape, axes)
                if keep is not None:
                    gx = np.where(keep, gx, 0)
                res[0] = cot_like(gx, x)
            if len(args) > 4 and len(active) > 5 and active[5] and kind(args[4]) in "fc":
                res[5] = cot_like(np.sum(g), args[4])
            return tuple(res)

        return y, sum_pullback

    rule.__name__ = rule.__qualname__ = f"{fn.__name__}_vjp"
    rule.__doc__ = sum_vjp.__doc__
    return rule


# -- prod -------------------------------------------------------------------------------------


def exclusive_prod(x: Any, axes: tuple[int, ...]) -> Any:
    """Π_{j≠i} xⱼ over each lane of `axes` (kept as x's shape): prefix·suffix products, no
    division, so zeros are exact (and so are its derivatives)."""
    nd, k = np.ndim(x), len(axes)
    ends = tuple(range(nd - k, nd))
    moved = np.moveaxis(x, axes, ends) if axes != ends else x
    lead = np.shape(moved)[: nd - k]
    n = int(np.prod(np.shape(moved)[nd - k :]))  # (not -1: ambiguous for an empty lead)
    m = np.reshape(moved, (*lead, n))
    if n <= 1:
        r = np.ones(np.shape(m), dtype=np.result_type(x)) if n else m
    else:
        one = np.ones((*lead, 1), dtype=np.result_type(x))
        pre = np.concatenate([one, np.cumprod(m[..., :-1], axis=-1)], axis=-1)
        suf = np.flip(np.cumprod(np.flip(m[..., 1:], -1), axis=-1), -1)
        r = pre * np.concatenate([suf, one], axis=-1)
    r = np.reshape(r, np.shape(moved))
    return np.moveaxis(r, ends, axes) if axes != ends else r


def _prod_parts(x: Any, o: dict[str, Any], y: Any) -> tuple[Any, Any, tuple[int, ...], Any]:
    """(others, keep, kept shape, initial): others = initial·Π_{j≠i} xⱼ (in y's dtype)."""
    shape = np.shape(x)
    axes, kshape = reduction_plan(o, shape)
    dt = np.result_type(y)
    xe = x if np.result_type(x) == dt else x.astype(dt)
    keep = _keep(np.prod, x, o)
    if keep is not None:
        xe = np.where(keep, xe, 1)
    others = exclusive_prod(xe, axes) if np.ndim(x) else np.ones((), dt)
    initial = o.get("initial")
    if initial is not None:
        others = others * initial
    return others, keep, kshape, axes


def prod_frule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """ẏ = initial·Σ_lane where·ẋᵢ·Π_{j≠i} xⱼ."""
    y = f.x(x.x, *[a.x for a in args], **kwargs)
    if x.dx is None or kind(y) not in "fc" or kind(x.x) not in "fc":
        return Dual(y, None)
    o = options(_SUM, args, kwargs)
    others, keep, _, axes = _prod_parts(x.x, o, y)
    xd = x.dx if keep is None else np.where(keep, x.dx, 0)
    t = np.sum(xd * others, axis=axes, keepdims=True)
    return Dual(y, shaped_like(np.reshape(t, np.shape(y)), y))


def prod_vjp(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """x̄ᵢ = where·conj(initial·Π_{j≠i} xⱼ)·ȳ."""
    y = np.prod(x, *args, **kwargs)
    o = options(_SUM, args, kwargs)

    def prod_pullback(g: Any) -> tuple[Any, ...]:
        res: list[Any] = [None] * (1 + len(args))
        if active[0] and kind(x) in "fc" and kind(y) in "fc":
            others, keep, kshape, _ = _prod_parts(x, o, y)
            gx = spread(g, kshape, np.shape(x)) * np.conj(others)
            if keep is not None:
                gx = np.where(keep, gx, 0)
            res[0] = cot_like(gx, x)
        return tuple(res)

    return y, prod_pullback


# -- cumprod ------------------------------------------------------------------------------------


def _lanes(x: Any, o: dict[str, Any], y: Any) -> tuple[Any, int | None]:
    """x in y's dtype with the cumulative axis first (flattened for axis=None)."""
    axis = o.get("axis")
    xe = x if np.result_type(x) == np.result_type(y) else x.astype(np.result_type(y))
    if axis is None:
        return np.ravel(xe), None
    ax = int(axis) % max(np.ndim(x), 1)
    return np.moveaxis(xe, ax, 0), ax


def _unlane(v: Any, ax: int | None, shape: tuple[int, ...]) -> Any:
    return np.reshape(v, shape) if ax is None else np.moveaxis(v, 0, ax)


def cumprod_frule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """ẏᵢ = ẏᵢ₋₁·xᵢ + yᵢ₋₁·ẋᵢ along the axis (exact with zeros)."""
    y = f.x(x.x, *[a.x for a in args], **kwargs)
    if x.dx is None or kind(y) not in "fc" or kind(x.x) not in "fc":
        return Dual(y, None)
    o = options(_CUM, args, kwargs)
    xs, ax = _lanes(x.x, o, y)
    ds, _ = _lanes(x.dx, o, y)
    n = np.shape(xs)[0]
    if n == 0:
        return Dual(y, shaped_like(np.zeros(np.shape(y), np.result_type(y)), y))
    ys, ts = [xs[0]], [ds[0]]
    for i in range(1, n):
        ts.append(ts[-1] * xs[i] + ys[-1] * ds[i])
        ys.append(ys[-1] * xs[i])
    t = _unlane(np.stack(ts), ax, np.shape(y))
    return Dual(y, shaped_like(t, y))


def cumprod_vjp(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """x̄ᵢ = conj(yᵢ₋₁)·aᵢ with aᵢ = ȳᵢ + conj(xᵢ₊₁)·aᵢ₊₁ (y₋₁ = 1): exact with zeros."""
    y = np.cumprod(x, *args, **kwargs)
    o = options(_CUM, args, kwargs)

    def cumprod_pullback(g: Any) -> tuple[Any, ...]:
        res: list[Any] = [None] * (1 + len(args))
        if not (active[0] and kind(x) in "fc" and kind(y) in "fc"):
            return tuple(res)
        xs, ax = _lanes(x, o, y)
        n = np.shape(xs)[0]
        if n == 0:
            res[0] = cot_like(np.zeros(np.shape(x), np.result_type(y)), x)
            return tuple(res)
        gs, _ = _lanes(g, o, y)
        ys, _ = _lanes(y, o, y)
        acc = gs[n - 1]
        out = []
        for i in range(n - 1, -1, -1):
            out.append(acc if i == 0 else acc * np.conj(ys[i - 1]))
            if i:
                acc = gs[i - 1] + acc * np.conj(xs[i])
        res[0] = cot_like(_unlane(np.stack(out[::-1]), ax, np.shape(x)), x)
        return tuple(res)

    return y, cumprod_pullback


for _fn in (np.sum, np.mean, np.nansum, np.nanmean):
    register_like(_fn, frule=sum_frule, vjp=sum_vjp(_fn))
register_like(np.prod, frule=prod_frule, vjp=prod_vjp)
register_like(np.cumprod, frule=cumprod_frule, vjp=cumprod_vjp)

# the other reductions' forward rules (split for size); the ufunc methods' and ptp's are
# registered from rules.numpy.forward_products, after their reverse rules
from rules.numpy.reductions import forward_extrema as forward_extrema  # noqa: E402
from rules.numpy.reductions import forward_stats as forward_stats  # noqa: E402
