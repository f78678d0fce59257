"""Rules for nansum and nanmean: sums and means that skip NaNs.

They are linear only for a fixed NaN pattern of x (the elements that count depend
on x's values), so unlike `np.sum`/`np.mean` (`rules.numpy.reductions.sums`) they
are written by hand; the tangent map is *not* `nansum(ẋ)` (ẋ has no NaNs where x
has them):

    y = nansum(x)   = Σ_{xᵢ not NaN} xᵢ      ⇒  x̄ += ȳ·[x not NaN]
    y = nanmean(x)  = nansum(x) / N, N the non-NaN count per lane
                                              ⇒  x̄ += ȳ·[x not NaN] / N

An all-NaN lane of nanmean (y = NaN, with numpy's warning) gives its lane zeros.
Options (axis, keepdims, dtype=, where=, initial=) as for np.sum/np.mean; see
docs/conventions-reductions.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Example, Vararg, example
from rules._support.cotangents import add_to_fdata, output_cotangent, scalar_rdata
from rules.numpy.reductions._common import expand, forward, plan, where_mask

__all__ = ["nanmean_rrule", "nansum_rrule"]

_SUM = ("axis", "dtype", "out", "keepdims", "initial", "where")
_MEAN = ("axis", "dtype", "out", "keepdims")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _nansum_examples() -> list[Example]:
    x = _rng(1).normal(size=(3, 4))
    x[0, 1] = x[2, 3] = np.nan
    return [example(x), example(x, axis=0, keepdims=True), example(x + 0.5j, -1)]


@rulekit.rrule.register(np.nansum, Array[np.inexact], Vararg[Any], examples=_nansum_examples)
def nansum_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = Σ x (+ initial) over `axis`, NaNs counted as 0, masked by where=  ⇒
    x̄ += where·ȳ·[x not NaN]; a traced positional `initial` gets initial̄ = Σ ȳ."""
    _, out, none, o = forward(f, x, args, kwargs, _SUM, allowed=("initial",))
    if o is None:
        return out, lambda dy: none
    axis = o.get("axis")
    kshape = None if axis is None else plan(axis, x.x.shape)[1]
    where = where_mask(o)
    dinit = args[4] if len(args) > 4 and args[4].dx is not None else None

    def nansum_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            g = output_cotangent(out, dy)
            if kshape is not None:
                g = expand(g, kshape)
            if where is not None:
                g = g * where
            add_to_fdata(x.dx, g * ~np.isnan(x.x))
        if dinit is None:
            return none
        return (*none[:6], scalar_rdata(dinit.x, output_cotangent(out, dy)), *none[7:])

    return out, nansum_pullback


def _nanmean_examples() -> list[Example]:
    x = _rng(3).normal(size=(3, 4))
    x[0, 0] = x[1, 2] = x[1, 3] = np.nan
    return [example(x), example(x, axis=1, keepdims=True), example(x - 1j, 0)]


@rulekit.rrule.register(np.nanmean, Array[np.inexact], Vararg[Any], examples=_nanmean_examples)
def nanmean_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = Σ x / N over `axis`, N the non-NaN (and where=) count ⇒ x̄ += keep·ȳ/N, keep the
    non-NaN (and where=) positions; an all-NaN lane gets zeros."""
    _, out, none, o = forward(f, x, args, kwargs, _MEAN)
    if o is None:
        return out, lambda dy: none
    axes, kshape = plan(o.get("axis"), x.x.shape)
    where = where_mask(o)

    def nanmean_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None and x.x.size:
            g = expand(output_cotangent(out, dy), kshape)
            keep = ~np.isnan(x.x)
            if where is not None:
                keep &= where
            n = np.maximum(np.sum(keep, axis=axes, keepdims=True), 1)
            add_to_fdata(x.dx, keep * (g / n))
        return none

    return out, nanmean_pullback
