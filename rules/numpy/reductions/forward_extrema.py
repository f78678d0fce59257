"""Forward rules and differentiable pullbacks of max/min (amax, amin, nanmax, nanmin).

    y = max (or min) of x over `axis`  ⇒  ẏ = Σ_lane hit·ẋ / count,   x̄ = hit·ȳ / count

with `hit` the elements equal to y and `count` the tied candidates per lane, exactly as
the reverse rule splits ties (`tie_split`: equal shares, an `initial=` equal to y counted,
NaN lanes shared by their NaNs for max/min, skipped by nanmax/nanmin). `hit` comes from
comparisons, which carry no derivative, so the bodies are differentiable again (piecewise
linear: their own derivatives are zero). Complex x: numpy's lexicographic order, ties on
equal values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Dual
from rulekit._declared_rules import shaped_like
from rules._support.forward import register_like
from rules.numpy.reductions import extrema as _extrema  # noqa: F401  (reverse rules first)
from rules.numpy.reductions.extrema import tie_split
from rules.numpy.reductions.forward_common import (
    cot_like,
    kept,
    kind,
    options,
    reduction_plan,
    spread,
)

__all__ = ["EXTREMA", "extremum_frule", "extremum_vjp"]

_NAMES = ("axis", "out", "keepdims", "initial", "where")
_NAN_SKIPPING = (np.nanmax, np.nanmin)
EXTREMA = (np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin)


def ties(fn: Any, x: Any, y: Any, o: dict[str, Any]) -> tuple[Any, Any, tuple[int, ...],
                                                              tuple[int, ...]]:  # fmt: skip
    """(hit, count, axes, kept shape) of y = fn(x, **o): plain (untraced) masks and counts."""
    shape = np.shape(x)
    axes, kshape = reduction_plan(o, shape)
    where = o.get("where", True)
    hit, count = tie_split(
        x,
        kept(y, kshape),
        axes,
        None if where is True else where,
        o.get("initial"),
        fn in _NAN_SKIPPING,
    )
    return hit, count, axes, kshape


def extremum_frule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """ẏ = Σ_lane hit·ẋ / count (ties split equally)."""
    y = f.x(x.x, *[a.x for a in args], **kwargs)
    if x.dx is None or kind(y) not in "fc" or kind(x.x) not in "fc":
        return Dual(y, None)
    hit, count, axes, _ = ties(f.x, x.x, y, options(_NAMES, args, kwargs))
    t = np.sum(np.where(hit, x.dx, 0), axis=axes, keepdims=True) / count
    return Dual(y, shaped_like(np.reshape(t, np.shape(y)), y))


def extremum_vjp(fn: Any) -> Any:
    """The differentiable pullback of max/min `fn`: x̄ = hit·ȳ / count."""

    def rule(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        y = fn(x, *args, **kwargs)
        o = options(_NAMES, args, kwargs)

        def extremum_pullback(g: Any) -> tuple[Any, ...]:
            res: list[Any] = [None] * (1 + len(args))
            if active[0] and kind(x) in "fc" and kind(y) in "fc":
                hit, count, _, kshape = ties(fn, x, y, o)
                res[0] = cot_like(np.where(hit, spread(g, kshape, np.shape(x)) / count, 0), x)
            return tuple(res)

        return y, extremum_pullback

    rule.__name__ = rule.__qualname__ = f"{fn.__name__}_vjp"
    rule.__doc__ = extremum_vjp.__doc__
    return rule


for _fn in EXTREMA:
    register_like(_fn, frule=extremum_frule, vjp=extremum_vjp(_fn))
