"""Rules for max/min reductions: np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin.

Registered for real and complex floating arrays. Options: `axis`, `keepdims`,
`initial=`, `where=`. Conventions (docs/conventions-reductions.md):

* **complex** x: numpy orders complex numbers lexicographically, by the real part
  and then, among equal real parts, by the imaginary part; y is the element so
  selected, y = x[k] ⇒ x̄[k] += ȳ (the selection is linear; PyTorch's convention
  ∂L/∂Re + i ∂L/∂Im passes through unchanged). Ties (equal complex values) split
  as for real x.

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
from rules._support.cotangents import output_cotangent
from rules._support.outputs import new_output
from rules.numpy.reductions._common import (
    expand,
    forward,
    option,
    plan,
    simple_call,
    split_lanes,
    where_mask,
)
from rules.numpy.reductions._kernels import extremum_all, extremum_lanes

__all__ = ["complex_extremum_rrule", "extremum_rrule", "tie_split"]

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
        example(t.astype(np.float32), -1),  # the fast path: a kernel pullback ...
        example(np.asfortranarray(t), axis=0, keepdims=False),  # ... numpy's (F order)
    ]


def _complex_examples(fn: Any) -> list[Example]:
    rng = np.random.default_rng(21)
    re = rng.permutation(12).reshape(3, 4) / 4.0 - 1.0
    # distinct real parts: where two real parts tie the imaginary parts decide, and y jumps
    # as the real parts move apart (lexicographic order is not continuous there)
    z = re + 1j * rng.normal(size=(3, 4))
    t = z.copy()
    t[1, 0] = t[1, 3] = 2.0 + 5.0j  # two tied maxima (equal complex values) in row 1
    t[2, 1] = t[2, 2] = -2.0 - 1.0j  # two tied minima in row 2
    if fn in _NAN_SKIPPING:
        z[1, 1] = complex(np.nan, 0.0)
    return [
        example(z),
        example(t, axis=1, keepdims=True),
        example(z, 0, where=np.array([True, False, True, True]), initial=0.1 + 0.0j),
        example(t.astype(np.complex64), -1),
    ]


def _register(fn: Any) -> None:
    rulekit.rrule.register(fn, Array[np.floating], Vararg[Any], examples=lambda: _examples(fn))(
        extremum_rrule
    )
    rulekit.rrule.register(
        fn, Array[np.complexfloating], Vararg[Any], examples=lambda: _complex_examples(fn)
    )(complex_extremum_rrule)


def complex_extremum_rrule(
    f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = max (or min) of complex x over `axis`, numpy's lexicographic order (real part,
    then imaginary part) ⇒ x̄ += w·ȳ, w = 1/#ties on the elements equal to y."""
    return _extremum_general(f, x, args, kwargs)


def extremum_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = max (or min) of x over `axis` ⇒ x̄ += w·ȳ, w = 1/#ties on the elements equal to y."""
    reduce = _REDUCE.get(f.x)
    if reduce is not None:
        simple = simple_call(x.x, args, kwargs)
        if simple is not None:
            return _extremum_simple(reduce, x, *simple)
    return _extremum_general(f, x, args, kwargs)


def _extremum_general(
    f: CoDual, x: CoDual, args: tuple[CoDual, ...], kwargs: dict[str, Any]
) -> tuple[CoDual, Any]:
    """extremum_rrule for every call: numpy's function forward, `tie_split` back."""
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
            scale = expand(output_cotangent(out, dy), kshape) / count
            np.add(x.dx, scale, out=x.dx, where=hit)  # x̄ += hit·ȳ/count in one pass
        return none

    return out, extremum_pullback


_REDUCE = {
    np.max: np.maximum.reduce,
    np.amax: np.maximum.reduce,
    np.min: np.minimum.reduce,
    np.amin: np.minimum.reduce,
}
_SCALARS = (np.float64, np.float32, float)


def _extremum_simple(
    reduce: Any, x: CoDual, axis: int | None, keepdims: bool, none: tuple[Any, ...]
) -> tuple[CoDual, Any]:
    """max/min of a float32/float64 array over one axis or all (`simple_call`).

    Forward: the ufunc reduction np.max/np.min call. Back: the tie-splitting
    kernels of `rules.numpy.reductions._kernels` for C-contiguous x and x̄, else `tie_split`.
    """
    X = x.x
    y = reduce(X, axis, None, None, keepdims)  # what np.max / np.min compute
    out = new_output(y)

    def extremum_simple_pullback(dy: Any) -> tuple[Any, ...]:
        dx = x.dx
        if dx is None:
            return none
        array = type(y) is np.ndarray
        g = out.dx if array else dy
        if X.flags.c_contiguous and dx.flags.c_contiguous and (array or type(g) in _SCALARS):
            if axis is not None:
                pre, n, post = split_lanes(X.shape, axis)
                lanes = (pre, n, post)
                extremum_lanes(
                    X.reshape(lanes), y.reshape(pre, post), g.reshape(pre, post), dx.reshape(lanes)
                )
            elif array:
                extremum_lanes(
                    X.reshape(1, -1, 1), y.reshape(1, 1), g.reshape(1, 1), dx.reshape(1, -1, 1)
                )
            else:
                extremum_all(X.reshape(-1), float(y), float(g), dx.reshape(-1))
            return none
        axes, kshape = plan(axis, X.shape)
        hit, count = tie_split(X, expand(y, kshape), axes)
        np.add(dx, expand(g, kshape) / count, out=dx, where=hit)
        return none

    return out, extremum_simple_pullback


for _fn in (np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin):
    _register(_fn)
