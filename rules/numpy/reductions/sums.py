"""Rules for NumPy reductions: sum, nansum, mean, nanmean, prod, cumsum, cumprod.

The other reductions live next door and are registered by importing this
module: max/min/amax/amin/nanmax/nanmin in `rules.numpy.reductions.extrema`, var/std/average in
`rules.numpy.reductions.statistics`, `np.linalg.norm` in `rules.numpy.linalg.norm`.

Every rule calls the numpy function itself on the forward pass (so the output
is exactly numpy's: a numpy scalar for a full reduction, an array with
`keepdims=True`, ...) and takes `axis` (None, int, negative, tuple),
`keepdims`, `dtype=` and, where numpy has them, `where=` and `initial=`.
A scalar output's cotangent is the pullback's argument; an array output's is
in its fdata. Complex inputs: `x̄ = conj(∂y/∂x)·ȳ` (JAX/PyTorch); a real input
reduced with a complex `dtype=` gets the real part. An integer `dtype=` makes
the output non-differentiable (nothing flows back). Conventions (zeros in
prod/cumprod, NaNs): docs/conventions-reductions.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Example, Vararg, example
from rules._support.layout import zeros_like_exact
from rules._support.util import ADD_REDUCE, NO_F, NO_R, filled_0d, scalar_rdata
from rules.numpy.reductions._common import (
    add,
    axes_of,
    cotangent,
    expand,
    forward,
    lane_count,
    option,
    plan,
    simple_call,
    where_mask,
)

__all__ = ["cumulative_rrule", "mean_rrule", "prod_rrule", "sum_rrule"]

_SUM = ("axis", "dtype", "out", "keepdims", "initial", "where")
_MEAN = ("axis", "dtype", "out", "keepdims")
_CUM = ("axis", "dtype", "out")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# -- sum, nansum, mean, nanmean -------------------------------------------------------------


def _sum_examples() -> list[Example]:
    x = _rng(0).normal(size=(3, 4))
    return [
        example(x),
        example(x, (0, -1), None, None, True, 0.5),  # positional initial: initial̄ = Σȳ
        example(x + 1j * x[::-1], 1, where=np.array([True, False, True, True])),
        example(x.astype(np.float32), axis=-1, dtype=np.float64, initial=2.0),
        example(x, -1, keepdims=True),  # the fast path (an int axis, keepdims)
    ]


def _nansum_examples() -> list[Example]:
    x = _rng(1).normal(size=(3, 4))
    x[0, 1] = x[2, 3] = np.nan
    return [example(x), example(x, axis=0, keepdims=True), example(x + 0.5j, -1)]


@rulekit.rrule.register(np.sum, Array[np.inexact], Vararg[Any], examples=_sum_examples)
@rulekit.rrule.register(np.nansum, Array[np.inexact], Vararg[Any], examples=_nansum_examples)
def sum_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = Σ x (+ initial) over `axis`, masked by where= ⇒ x̄ += where·ȳ (ȳ broadcast back).

    A traced `initial` (positional: keywords are constants) gets initial̄ = Σȳ.

    nansum: NaNs count as 0, so NaN positions get a zero cotangent.
    """
    fn = f.x
    if fn is np.sum:
        simple = simple_call(x.x, args, kwargs)
        if simple is not None:
            return _sum_simple(x, *simple)
    _, out, none, o = forward(f, x, args, kwargs, _SUM, allowed=("initial",))
    if o is None:
        return out, lambda dy: none
    axis = o.get("axis")
    kshape = None if axis is None else plan(axis, x.x.shape)[1]
    where = where_mask(o)
    nan = fn is np.nansum
    dinit = args[4] if len(args) > 4 and args[4].dx is not None else None

    def sum_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            g = cotangent(out, dy)
            if kshape is not None:
                g = expand(g, kshape)
            if where is not None:
                g = g * where
            if nan:
                g = g * ~np.isnan(x.x)
            add(x, g)
        if dinit is None:
            return none
        return (*none[:6], scalar_rdata(dinit.x, cotangent(out, dy)), *none[7:])  # initial̄ = Σȳ

    return out, sum_pullback


_NULLS_1 = (NO_R, NO_R)


class SumAll:
    """`np.sum(x)` of a real array, no options: y = Σ x ⇒ x̄ += ȳ everywhere.

    The common loss `np.sum(...)`, allocation-free: the sum goes into a kept 0-d
    buffer (np.add.reduce would make a new 0-d array) and ȳ is added from a kept
    0-d array (a Python float operand would be made into a new one). A plain rule
    object, one per call site (`build_primitive_rrule`), not a StatefulRRule:
    nothing is saved from the forward pass for the pullback, each buffer is read
    as soon as it is written. Calls with keywords (axis=, where=, ...: dispatch
    sees positional arguments only) go to `sum_rrule`.
    """

    def __init__(self) -> None:
        self._zerod: dict[str, np.ndarray] = {}  # (`filled_0d`: ȳ)
        self._y: dict[str, np.ndarray] = {}  # the forward's 0-d result, per dtype

    def __call__(self, f: CoDual, x: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        X, dx = x.x, x.dx
        if kwargs or X.dtype.kind != "f":
            return sum_rrule(f, x, **kwargs)
        buf = self._y.get(X.dtype.char)
        if buf is None:
            buf = self._y[X.dtype.char] = np.empty((), X.dtype)
        ADD_REDUCE(X, None, None, buf)
        zerod = self._zerod

        def sum_all_pullback(dy: Any) -> tuple[Any, ...]:
            if dx is not None:
                np.add(dx, filled_0d(zerod, dy, dx.dtype), out=dx)
            return _NULLS_1

        return CoDual(buf[()], NO_F), sum_all_pullback


def _sum_all_examples() -> list[Example]:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(3, 4))
    return [
        example(x),
        example(np.asfortranarray(x)),
        example(x[::-1, ::2]),
        example(rng.normal(size=5).astype(np.float32)),
        example(np.array(1.5)),
        example(np.zeros((0, 3))),
        example(x, axis=0),
        example(np.asfortranarray(x), axis=1, keepdims=True),
    ]


rulekit.build_primitive_rrule.register(np.sum, Array[np.floating], examples=_sum_all_examples)(
    lambda sig: SumAll()
)


def _sum_simple(
    x: CoDual, axis: int | None, keepdims: bool, none: tuple[Any, ...]
) -> tuple[CoDual, Any]:
    """`np.sum(x, axis, keepdims=)` of a float32/float64 array (`simple_call`): as sum_rrule."""
    X = x.x
    y = ADD_REDUCE(X, axis, None, None, keepdims)  # what np.sum computes
    if type(y) is not np.ndarray:
        return CoDual(y, NO_F), _sum_pullback(x, None, None, none)
    g = zeros_like_exact(y)  # (laid out like y: F-ordered for an F-ordered x)
    kshape = None if keepdims else plan(axis, X.shape)[1]
    return CoDual(y, g), _sum_pullback(x, g, kshape, none)


def _sum_pullback(x: CoDual, g: Any, kshape: Any, none: tuple[Any, ...]) -> Any:
    """x̄ += ȳ broadcast back (ȳ: the array output's fdata `g`, else the pullback's `dy`)."""

    def sum_simple_pullback(dy: Any) -> tuple[Any, ...]:
        dx = x.dx
        if dx is not None:
            if g is None:
                add(x, dy)
            else:
                dx += g if kshape is None else g.reshape(kshape)
        return none

    return sum_simple_pullback


def _mean_examples() -> list[Example]:
    x = _rng(2).normal(size=(2, 3, 4))
    return [
        example(x),
        example(x, (0, 2), keepdims=True),
        example(x[0] - 2j * x[1], axis=-1, where=np.array([True, False, True, True])),
        example(x.astype(np.float32), 1, np.float64),  # positional dtype
        example(x.astype(np.float32), axis=-2),  # the fast path (an int axis)
    ]


def _nanmean_examples() -> list[Example]:
    x = _rng(3).normal(size=(3, 4))
    x[0, 0] = x[1, 2] = x[1, 3] = np.nan
    return [example(x), example(x, axis=1, keepdims=True), example(x - 1j, 0)]


@rulekit.rrule.register(np.mean, Array[np.inexact], Vararg[Any], examples=_mean_examples)
@rulekit.rrule.register(np.nanmean, Array[np.inexact], Vararg[Any], examples=_nanmean_examples)
def mean_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = Σ x / N over `axis` (N elements, or the where= count) ⇒ x̄ += where·ȳ/N.

    nanmean: N counts the non-NaN elements; NaN positions get a zero cotangent,
    and an all-NaN lane (y = NaN, with numpy's warning) gives its lane zeros.
    """
    if f.x is np.mean:
        simple = simple_call(x.x, args, kwargs)
        if simple is not None:
            return _mean_simple(x, *simple)
    _, out, none, o = forward(f, x, args, kwargs, _MEAN)
    if o is None:
        return out, lambda dy: none
    shape = x.x.shape
    axes, kshape = plan(o.get("axis"), shape)
    where = where_mask(o)
    nan = f.x is np.nanmean

    def mean_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None and x.x.size:
            g = expand(cotangent(out, dy), kshape)
            if nan:
                keep = ~np.isnan(x.x)
                if where is not None:
                    keep &= where
                n = np.maximum(np.sum(keep, axis=axes, keepdims=True), 1)
                g = keep * (g / n)
            elif where is None:
                g = g / lane_count(shape, axes, None)
            else:
                g = where * (g / np.maximum(lane_count(shape, axes, where), 1))
            add(x, g)
        return none

    return out, mean_pullback


def _mean_simple(
    x: CoDual, axis: int | None, keepdims: bool, none: tuple[Any, ...]
) -> tuple[CoDual, Any]:
    """`np.mean(x, axis, keepdims=)` of a float32/float64 array (`simple_call`): as mean_rrule.

    The forward pass is numpy's `_mean` (a sum divided by the count as an intp).
    """
    X = x.x
    shape = X.shape
    axes, kshape = plan(axis, shape)
    n = lane_count(shape, axes, None)
    s = ADD_REDUCE(X, axis, None, None, keepdims)
    if type(s) is np.ndarray:
        y = np.true_divide(s, np.intp(n), out=s, casting="unsafe", subok=False)
        g = zeros_like_exact(y)
    else:
        y, g = s.dtype.type(s / np.intp(n)), None

    def mean_simple_pullback(dy: Any) -> tuple[Any, ...]:
        dx = x.dx
        if dx is not None:
            if g is None:
                add(x, dy / n)
            else:
                dx += g.reshape(kshape) / n
        return none

    return CoDual(y, NO_F if g is None else g), mean_simple_pullback


# -- prod -----------------------------------------------------------------------------------


def _prod_examples() -> list[Example]:
    x = _rng(4).uniform(0.5, 1.5, size=(3, 4)) * np.sign(_rng(5).normal(size=(3, 4)))
    z = x.copy()
    z[0, 1] = 0.0  # one zero in row 0 ...
    z[1, 0] = z[1, 2] = 0.0  # ... two in row 1
    return [
        example(x),
        example(z, axis=1, keepdims=True),
        example(z + 0.5j * x, (0, 1), initial=1.5),
        example(x.astype(np.float32), 0, where=np.array([True, False, True, True])),
    ]


def _exclusive_prod(x: np.ndarray, axes: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Π_{j≠i} x_j over each lane, by prefix and suffix products: no division, zeros exact."""
    nd, k = x.ndim, len(axes)
    ends = tuple(range(nd - k, nd))
    moved = np.moveaxis(x, axes, ends)
    m = moved.reshape((*moved.shape[: nd - k], -1)).astype(dtype, copy=False)
    pre = np.ones_like(m)
    suf = np.ones_like(m)
    if m.shape[-1] > 1:
        np.cumprod(m[..., :-1], axis=-1, out=pre[..., 1:])
        np.cumprod(m[..., :0:-1], axis=-1, out=suf[..., -2::-1])
    pre *= suf
    return np.moveaxis(pre.reshape(moved.shape), ends, axes)


@rulekit.rrule.register(np.prod, Array[np.inexact], Vararg[Any], examples=_prod_examples)
def prod_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = initial·Π x over `axis` ⇒ x̄ᵢ += conj(initial·Π_{j≠i} xⱼ)·ȳ (0 where where= is False).

    Without zeros (y finite and ≠ 0) Π_{j≠i} xⱼ = y/xᵢ. Otherwise it comes from
    prefix·suffix products, so zeros are exact and nothing is divided: one zero
    in a lane gives only that element a cotangent, two or more give none.
    """
    y, out, none, o = forward(f, x, args, kwargs, _SUM)
    if o is None:
        return out, lambda dy: none
    axes, kshape = plan(o.get("axis"), x.x.shape)
    where = where_mask(o)
    initial = option(o, "initial")

    def prod_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            g = expand(cotangent(out, dy), kshape)
            xe = x.x if where is None else np.where(where, x.x, 1)
            yk = expand(y, kshape)
            if np.all(np.isfinite(yk) & (yk != 0)):
                others = yk / xe
            else:
                others = _exclusive_prod(xe, axes, np.result_type(y))
                if initial is not None:
                    others = others * initial
            g = g * np.conj(others)
            if where is not None:
                g = g * where
            add(x, g)
        return none

    return out, prod_pullback


# -- cumsum, cumprod ------------------------------------------------------------------------


def _cumsum_examples() -> list[Example]:
    x = _rng(6).normal(size=(3, 4))
    return [
        example(x),
        example(x + 1j * x[::-1], axis=-1),
        example(x, 0, dtype=np.complex128),  # a real input, complex sums: x̄ gets Re
        example(x.astype(np.float32), axis=1, dtype=np.float64),
    ]


def _cumprod_examples() -> list[Example]:
    x = _rng(7).uniform(0.5, 1.5, size=(3, 4)) * np.sign(_rng(8).normal(size=(3, 4)))
    z = x.copy()
    z[0, 0] = z[1, 2] = z[2, 1] = z[2, 3] = 0.0  # a leading zero, a middle one, two in a row
    return [
        example(x),
        example(z, axis=1),
        example(z - 0.5j * x, axis=0),
        example(x.astype(np.float32), -1),
    ]


@rulekit.rrule.register(np.cumsum, Array[np.inexact], Vararg[Any], examples=_cumsum_examples)
@rulekit.rrule.register(np.cumprod, Array[np.inexact], Vararg[Any], examples=_cumprod_examples)
def cumulative_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """Cumulative sum and product along `axis` (None: of the flattened array).

    cumsum:  yᵢ = Σ_{j≤i} xⱼ ⇒ x̄ₖ += Σ_{i≥k} ȳᵢ (a reversed cumulative sum).
    cumprod: yᵢ = Π_{j≤i} xⱼ ⇒ x̄ₖ += Σ_{i≥k} ȳᵢ·conj(Π_{j≤i, j≠k} xⱼ). Before a lane's
    first zero z that is conj(1/xₖ)·Σ_{i≥k} ȳᵢ conj(yᵢ); at z it is Σ_{i≥z} ȳᵢ conj(y'ᵢ)
    with y' the cumprod with x_z set to 1; after z it is 0. No division by zero.
    """
    y, out, none, o = forward(f, x, args, kwargs, _CUM)
    if o is None:
        return out, lambda dy: none
    axis = o.get("axis")
    ax = 0 if axis is None else axes_of(axis, x.x.ndim)[0]
    prod = f.x is np.cumprod

    def cumulative_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            g = out.dx
            if prod:
                g = _cumprod_cotangent(x.x.ravel() if axis is None else x.x, y, g, ax)
            else:
                g = _reverse_cumsum(g, ax)
            add(x, g if axis is not None else g.reshape(x.x.shape))
        return none

    return out, cumulative_pullback


def _reverse_cumsum(g: np.ndarray, ax: int) -> np.ndarray:
    """Σ_{i≥k} gᵢ along `ax`."""
    return np.flip(np.cumsum(np.flip(g, ax), axis=ax), ax)


def _cumprod_cotangent(x: np.ndarray, y: np.ndarray, g: np.ndarray, ax: int) -> np.ndarray:
    x = x.astype(y.dtype, copy=False)
    r = _reverse_cumsum(g * np.conj(y), ax)
    zero = x == 0
    if not zero.any():
        return r / np.conj(x)
    seen = np.cumsum(zero, axis=ax)
    first = zero & (seen == 1)
    out = np.zeros_like(r)
    np.divide(r, np.conj(x), out=out, where=seen == 0)
    y1 = np.cumprod(np.where(first, 1, x), axis=ax)
    at_zero = _reverse_cumsum(g * np.conj(y1), ax)
    out[first] = at_zero[first]
    return out
