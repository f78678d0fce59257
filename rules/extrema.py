"""Rules for max/min reductions: np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin.

Registered for real floating arrays only (complex max/min compare
lexicographically and are not differentiable). Options: `axis`, `keepdims`,
`initial=`, `where=`. Conventions (docs/conventions-reductions.md):

* **ties** split ȳ equally among the tied maxima (as JAX does); an `initial=`
  equal to the result counts as one of the tied candidates (and, being a
  constant, keeps its share). For two tied elements this is exactly the
  central-difference derivative.
* **NaN**: `max`/`min` return NaN for a lane with a NaN, and the NaN elements
  of that lane share ȳ (the result *is* their value). `nanmax`/`nanmin` skip
  NaNs, so NaN positions get a zero cotangent; an all-NaN lane gets zeros.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Example, Vararg, example
from rules._reduce import (
    cotangent,
    expand,
    forward,
    option,
    plan,
    where_mask,
)

__all__ = ["extremum_rrule", "tie_split"]

_NAMES = ("axis", "out", "keepdims", "initial", "where")
_NAN_SKIPPING = frozenset({np.nanmax, np.nanmin})


def tie_split(
    x: np.ndarray,
    yk: Any,
    axes: tuple[int, ...],
    where: Any = None,
    initial: Any = None,
    skip_nan: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """`(hit, count)` with x̄ += hit·ȳ/count for y = max/min over `axes` (yk: kept-dims y).

    `hit` marks the elements equal to y, `count` (kept dims, ≥ 1) the tied
    candidates per lane (an `initial` equal to y included). A lane whose y is
    NaN is shared by its NaN elements (max/min) or gets nothing (skip_nan).
    """
    hit = x == yk
    if where is not None:
        hit &= where
    count = np.add.reduce(hit, axis=axes, keepdims=True, dtype=np.intp)
    if initial is not None:
        count += yk == initial
    if not skip_nan and not count.all():
        nan = np.isnan(x)
        if where is not None:
            nan &= where
        hit |= nan & np.isnan(yk)
        count = np.add.reduce(hit, axis=axes, keepdims=True, dtype=np.intp)
    return hit, np.maximum(count, 1)


def _examples(fn: Any) -> list[Example]:
    rng = np.random.default_rng(20)
    x = rng.permutation(12).reshape(3, 4) / 4.0 - 1.0  # distinct values
    t = x.copy()
    t[0, 3] = t[0, 0] = t.max()  # two tied maxima: the split equals central differences
    t[2, 1] = t[2, 2] = t.min()  # two tied minima
    if fn in _NAN_SKIPPING:
        x[1, 1] = x[0, 2] = t[1, 0] = np.nan
    return [
        example(x),
        example(t, axis=1, keepdims=True),
        example(x, 0, where=np.array([True, True, False, True]), initial=0.3),
        example(x.astype(np.float32), (0, -1)),
    ]


def _register(fn: Any) -> None:
    rulekit.rrule.register(fn, Array[np.floating], Vararg[Any], examples=lambda: _examples(fn))(
        extremum_rrule
    )


def extremum_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = max (or min) of x over `axis` ⇒ x̄ += w·ȳ, w = 1/#ties on the elements equal to y."""
    y, out, none, o = forward(f, x, args, kwargs, _NAMES)
    if o is None:
        return out, lambda dy: none
    axes, kshape = plan(o.get("axis"), x.x.shape)
    where = where_mask(o)
    initial = option(o, "initial")
    skip_nan = f.x in _NAN_SKIPPING

    def extremum_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            hit, count = tie_split(x.x, expand(y, kshape), axes, where, initial, skip_nan)
            scale = expand(cotangent(out, dy), kshape) / count
            np.add(x.dx, scale, out=x.dx, where=hit)  # x̄ += hit·ȳ/count in one pass
        return none

    return out, extremum_pullback


for _fn in (np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin):
    _register(_fn)
