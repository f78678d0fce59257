"""Forward rules and differentiable pullbacks of the ufunc reduce methods and of np.ptp.

    add.reduce = sum, multiply.reduce = prod, maximum/minimum.reduce = max/min (axis=0 by
    default; maximum/minimum.reduce take a dtype= that must be x's), as their reverse rules
    delegate; ptp = max − min ⇒ ẏ = ẏ_max − ẏ_min, x̄ = x̄_max − x̄_min (ties split).

Their reverse rules are registered by rules.numpy.ufuncs.methods and rules.numpy.quantiles,
which are imported after rules.numpy.reductions: this module is imported from
rules.numpy.forward_products, at the end of rules.numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Dual
from rules._support.forward import register_like
from rules.numpy import quantiles as _quantiles  # noqa: F401  (reverse rules first)
from rules.numpy.reductions.forward import prod_frule, prod_vjp, sum_frule, sum_vjp
from rules.numpy.reductions.forward_extrema import extremum_frule, extremum_vjp
from rules.numpy.ufuncs import methods as _methods  # noqa: F401

__all__ = ["method_frule", "method_vjp", "ptp_frule", "ptp_vjp"]

_TARGET = {"add": np.sum, "multiply": np.prod, "maximum": np.max, "minimum": np.min}
_FRULE = {np.sum: sum_frule, np.prod: prod_frule, np.max: extremum_frule, np.min: extremum_frule}
_VJP = {np.sum: sum_vjp(np.sum), np.prod: prod_vjp, np.max: extremum_vjp(np.max),
        np.min: extremum_vjp(np.min)}  # fmt: skip


_Call = tuple[Any, list[Any], dict[str, Any]]


def _as_target(method: Any, x: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> _Call:
    """(target, args, kwargs) of the equivalent np.sum/prod/max/min call (axis=0 default;
    max/min: reduce's dtype argument dropped, checked to be x's)."""
    target = _TARGET[method.__self__.__name__]
    a, kw = list(args), dict(kwargs)
    if target in (np.max, np.min):
        dt = kw.pop("dtype", None)
        if len(a) > 1:
            dt = a.pop(1)
            dt = dt.x if isinstance(dt, Dual) else dt
        if dt is not None and np.dtype(dt) != np.result_type(x):
            raise NotImplementedError(
                f"np.{method.__self__.__name__}.reduce: dtype= other than x's has no rule"
            )
    if not a and "axis" not in kw:
        kw["axis"] = 0
    return target, a, kw


def method_frule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """ẏ of ufunc.reduce: the tangent of the equivalent reduction (see the module docstring)."""
    target, a, kw = _as_target(f.x, x.x, args, kwargs)
    return _FRULE[target](Dual(target, None), x, *a, **kw)


def method_vjp(method: Any) -> Any:
    """The differentiable pullback of ufunc.reduce `method` (the equivalent reduction's)."""

    def rule(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        target, a, kw = _as_target(method, x, args, kwargs)
        dropped = len(a) != len(args)
        act = list(active)
        if dropped:
            del act[2]
        y, pb = _VJP[target](tuple(act), x, *a, **kw)

        def method_pullback(g: Any) -> tuple[Any, ...]:
            r = list(pb(g))
            if dropped:
                r.insert(2, None)
            return tuple(r)

        return y, method_pullback

    rule.__name__ = rule.__qualname__ = f"{method.__self__.__name__}_reduce_vjp"
    return rule


def ptp_frule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """ẏ = ẏ_max − ẏ_min."""
    hi = extremum_frule(Dual(np.max, None), x, *args, **kwargs)
    lo = extremum_frule(Dual(np.min, None), x, *args, **kwargs)
    y = np.ptp(x.x, *[a.x for a in args], **kwargs)
    return Dual(y, None if hi.dx is None else hi.dx - lo.dx)


def ptp_vjp(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """x̄ = x̄_max − x̄_min (ties split)."""
    _, pmax = extremum_vjp(np.max)(active, x, *args, **kwargs)
    _, pmin = extremum_vjp(np.min)(active, x, *args, **kwargs)
    y = np.ptp(x, *args, **kwargs)

    def ptp_pullback(g: Any) -> tuple[Any, ...]:
        a, b = pmax(g), pmin(g)
        return tuple(None if u is None else u - v for u, v in zip(a, b, strict=True))

    return y, ptp_pullback


for _name in _TARGET:
    _m = getattr(np, _name).reduce
    register_like(_m, frule=method_frule, vjp=method_vjp(_m))
register_like(np.ptp, frule=ptp_frule, vjp=ptp_vjp)
