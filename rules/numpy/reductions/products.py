"""Rules for prod and cumprod: the products, which are not linear.

    y = initial·Π x over `axis`  ⇒  x̄ᵢ += conj(initial·Π_{j≠i} xⱼ)·ȳ  (0 where where= is False)
    y = cumprod(x): yᵢ = Π_{j≤i} xⱼ  ⇒  x̄ₖ += Σ_{i≥k} ȳᵢ·conj(Π_{j≤i, j≠k} xⱼ)

Zeros are exact (prefix·suffix products, no division by zero); options (axis,
keepdims, dtype=, where=, initial=) as for np.sum. Conventions (zeros, NaNs):
docs/conventions-reductions.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Example, Vararg, example
from rules._support.cotangents import add_to_fdata, output_cotangent
from rules.numpy.reductions._common import axes_of, expand, forward, option, plan, where_mask
from rules.numpy.reductions.sums import reverse_cumsum

__all__ = ["cumprod_rrule", "prod_rrule"]

_SUM = ("axis", "dtype", "out", "keepdims", "initial", "where")
_CUM = ("axis", "dtype", "out")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


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
            g = expand(output_cotangent(out, dy), kshape)
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
            add_to_fdata(x.dx, g)
        return none

    return out, prod_pullback


# -- cumprod ----------------------------------------------------------------------------------


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


@rulekit.rrule.register(np.cumprod, Array[np.inexact], Vararg[Any], examples=_cumprod_examples)
def cumprod_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """Cumulative product along `axis` (None: of the flattened array).

    yᵢ = Π_{j≤i} xⱼ ⇒ x̄ₖ += Σ_{i≥k} ȳᵢ·conj(Π_{j≤i, j≠k} xⱼ). Before a lane's first zero z
    that is conj(1/xₖ)·Σ_{i≥k} ȳᵢ conj(yᵢ); at z it is Σ_{i≥z} ȳᵢ conj(y'ᵢ) with y' the
    cumprod with x_z set to 1; after z it is 0. No division by zero.
    """
    y, out, none, o = forward(f, x, args, kwargs, _CUM)
    if o is None:
        return out, lambda dy: none
    axis = o.get("axis")
    ax = 0 if axis is None else axes_of(axis, x.x.ndim)[0]

    def cumprod_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            g = _cumprod_cotangent(x.x.ravel() if axis is None else x.x, y, out.dx, ax)
            add_to_fdata(x.dx, g if axis is not None else g.reshape(x.x.shape))
        return none

    return out, cumprod_pullback


def _cumprod_cotangent(x: np.ndarray, y: np.ndarray, g: np.ndarray, ax: int) -> np.ndarray:
    x = x.astype(y.dtype, copy=False)
    r = reverse_cumsum(g * np.conj(y), ax)
    zero = x == 0
    if not zero.any():
        return r / np.conj(x)
    seen = np.cumsum(zero, axis=ax)
    first = zero & (seen == 1)
    out = np.zeros_like(r)
    np.divide(r, np.conj(x), out=out, where=seen == 0)
    y1 = np.cumprod(np.where(first, 1, x), axis=ax)
    at_zero = reverse_cumsum(g * np.conj(y1), ax)
    out[first] = at_zero[first]
    return out
