"""Rules for the linear reductions: sum, mean, cumsum, each declared once (`rulekit.linear`).

    y = Σ x (+ initial) over `axis`, masked by where=  ⇒  x̄ += where·ȳ (ȳ broadcast back),
                                                         initial̄ = Σ ȳ
    y = Σ x / N over `axis` (N elements, or the where= count)  ⇒  x̄ += where·ȳ/N
    y = cumsum(x, axis): yᵢ = Σ_{j≤i} xⱼ  ⇒  x̄ₖ += Σ_{i≥k} ȳᵢ (a reversed cumulative sum)

The declarations (`SUM`, `MEAN`, `CUMSUM`) give the adjoints above and, for
forward mode, the tangent maps (`np.sum(ẋ, ...)`, ...). `np.sum` and `np.mean` put
a fast path in front of the declared rule (`simple_call`: a float32/float64 array
and at most an int axis and `keepdims`), and `np.sum(x)` of a real array has an
allocation-free rule object per call site (`SumAll`). The reductions that are not
linear live next door: nansum/nanmean in `rules.numpy.reductions.nan_sums`,
prod/cumprod in `rules.numpy.reductions.products`, max/min in `extrema`, var/std/
average in `statistics`.

Every rule calls the numpy function itself on the forward pass (so the output is
exactly numpy's: a numpy scalar for a full reduction, an array with
`keepdims=True`, ...) and takes `axis` (None, int, negative, tuple), `keepdims`,
`dtype=` and, where numpy has them, `where=` and `initial=`. Complex inputs: the
adjoints have real coefficients, so x̄ = ȳ spread back; a real input reduced with a
complex `dtype=` gets the real part. An integer `dtype=` makes the output
non-differentiable (nothing flows back). See docs/conventions-reductions.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Example, Vararg, example, linear
from rules._support.cotangents import ADD_REDUCE, NO_F, NO_R, add_to_fdata
from rules._support.layout import filled_0d, zeros_like_exact
from rules.numpy.reductions._common import (
    NOVALUE,
    axes_of,
    expand,
    lane_count,
    plan,
    simple_call,
)

__all__ = ["CUMSUM", "MEAN", "SUM", "SumAll", "mean_rrule", "sum_rrule"]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _given(v: Any) -> bool:
    return v is not None and v is not NOVALUE


def _spread(g: Any, shape: tuple[int, ...], axis: Any, keepdims: Any) -> Any:
    """ȳ of a reduction over `axis` reshaped to broadcast against the input (of `shape`)."""
    if axis is None or (_given(keepdims) and keepdims):
        return g
    return expand(g, plan(axis, shape)[1])


def _masked(g: Any, where: Any) -> Any:
    return g if not _given(where) or where is True else g * where


# -- sum ------------------------------------------------------------------------------------


def _sum_adjoint(
    g: Any,
    a: np.ndarray,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: Any = NOVALUE,
    initial: Any = NOVALUE,
    where: Any = NOVALUE,
) -> Any:
    """x̄ += where·ȳ, ȳ broadcast back over the summed axes."""
    return _masked(_spread(g, a.shape, axis, keepdims), where)


def _initial_adjoint(g: Any, *args: Any, **kwargs: Any) -> Any:
    """initial̄ = Σ ȳ: `initial` is added to every output element."""
    return np.sum(g)


def _sum_tangent(x_dot: Any, *args: Any, **kwargs: Any) -> Any:
    """The linear part of np.sum: a constant keyword `initial=` is an offset, dropped."""
    kwargs.pop("initial", None)
    return np.sum(x_dot, *args, **kwargs)


#: y = Σ x + initial: linear in x and (a positional, traced) initial
SUM = linear(np.sum, (_sum_adjoint, _initial_adjoint), argnums=(0, 5), tangent=_sum_tangent)


def _sum_examples() -> list[Example]:
    x = _rng(0).normal(size=(3, 4))
    return [
        example(x),
        example(x, (0, -1), None, None, True, 0.5),  # positional initial: initial̄ = Σȳ
        example(x + 1j * x[::-1], 1, where=np.array([True, False, True, True])),
        example(x.astype(np.float32), axis=-1, dtype=np.float64, initial=2.0),
        example(x, -1, keepdims=True),  # the fast path (an int axis, keepdims)
    ]


@rulekit.rrule.register(np.sum, Array[np.inexact], Vararg[Any], examples=_sum_examples)
def sum_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """`SUM`'s rule, with the fast path for `np.sum(x, axis, keepdims=)` in front."""
    simple = simple_call(x.x, args, kwargs)
    if simple is not None:
        return _sum_simple(x, *simple)
    return SUM.rrule(f, x, *args, **kwargs)


def _sum_simple(
    x: CoDual, axis: int | None, keepdims: bool, none: tuple[Any, ...]
) -> tuple[CoDual, Any]:
    """`np.sum(x, axis, keepdims=)` of a float32/float64 array (`simple_call`): as `SUM`."""
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
                add_to_fdata(dx, dy)
            else:
                dx += g if kshape is None else g.reshape(kshape)
        return none

    return sum_simple_pullback


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


# -- mean -----------------------------------------------------------------------------------


def _mean_adjoint(
    g: Any,
    a: np.ndarray,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: Any = NOVALUE,
    *,
    where: Any = NOVALUE,
) -> Any:
    """x̄ += where·ȳ/N, N the number of elements (with where=: of selected ones) per lane."""
    if not a.size:
        return 0.0  # (no element: nothing to hand back, and no 0/0)
    shape = a.shape
    axes = axes_of(axis, a.ndim)
    g = _spread(g, shape, axis, keepdims)
    if not _given(where) or where is True:
        return g / lane_count(shape, axes, None)
    return where * (g / np.maximum(lane_count(shape, axes, where), 1))


#: y = Σ x / N: linear in x
MEAN = linear(np.mean, _mean_adjoint)


def _mean_examples() -> list[Example]:
    x = _rng(2).normal(size=(2, 3, 4))
    return [
        example(x),
        example(x, (0, 2), keepdims=True),
        example(x[0] - 2j * x[1], axis=-1, where=np.array([True, False, True, True])),
        example(x.astype(np.float32), 1, np.float64),  # positional dtype
        example(x.astype(np.float32), axis=-2),  # the fast path (an int axis)
    ]


@rulekit.rrule.register(np.mean, Array[np.inexact], Vararg[Any], examples=_mean_examples)
def mean_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """`MEAN`'s rule, with the fast path for `np.mean(x, axis, keepdims=)` in front."""
    simple = simple_call(x.x, args, kwargs)
    if simple is not None:
        return _mean_simple(x, *simple)
    return MEAN.rrule(f, x, *args, **kwargs)


def _mean_simple(
    x: CoDual, axis: int | None, keepdims: bool, none: tuple[Any, ...]
) -> tuple[CoDual, Any]:
    """`np.mean(x, axis, keepdims=)` of a float32/float64 array (`simple_call`): as `MEAN`.

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
                add_to_fdata(dx, dy / n)
            else:
                dx += g.reshape(kshape) / n
        return none

    return CoDual(y, NO_F if g is None else g), mean_simple_pullback


# -- cumsum ---------------------------------------------------------------------------------


def reverse_cumsum(g: np.ndarray, ax: int) -> np.ndarray:
    """Σ_{i≥k} gᵢ along `ax`: the adjoint of a cumulative sum."""
    return np.flip(np.cumsum(np.flip(g, ax), axis=ax), ax)


def _cumsum_adjoint(
    g: np.ndarray, a: np.ndarray, axis: Any = None, dtype: Any = None, out: Any = None
) -> np.ndarray:
    """x̄ₖ += Σ_{i≥k} ȳᵢ along `axis` (None: of the flattened x, reshaped back)."""
    if axis is None:
        return reverse_cumsum(g, 0).reshape(a.shape)
    return reverse_cumsum(g, axes_of(axis, a.ndim)[0])


def _cumsum_examples() -> list[Example]:
    x = _rng(6).normal(size=(3, 4))
    return [
        example(x),
        example(x + 1j * x[::-1], axis=-1),
        example(x, 0, dtype=np.complex128),  # a real input, complex sums: x̄ gets Re
        example(x.astype(np.float32), axis=1, dtype=np.float64),
    ]


#: yᵢ = Σ_{j≤i} xⱼ: linear in x
CUMSUM = linear(
    np.cumsum,
    _cumsum_adjoint,
    patterns=[(Array[np.inexact], Vararg[Any])],
    examples=_cumsum_examples,
)
