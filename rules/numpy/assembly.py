"""Rules for functions that assemble arrays from parts: meshgrid, block, insert, delete,
apply_along_axis, derived from traceable re-implementations (`rules.numpy._composite`).

numpy's own code converts its arguments with `np.asarray`; these do what it does
with functions that have rules, so each adjoint is that of a linear rearrangement:

    meshgrid(*xi)          = reshape + broadcast_to (+ copy)  ⇒ x̄ᵢ += ȳᵢ summed over the grid
    block(arrays)          = nested concatenate               ⇒ each block gets its slice of ȳ
    insert(a, obj, v, ax)  = take([a.ravel(), v.ravel()], i)   ⇒ ā, v̄ += np.add.at(·, i, ȳ)
    delete(a, obj, ax)     = take(a.ravel(), i)                ⇒ ā += np.add.at(·, i, ȳ)
    apply_along_axis(f, ax, a, *args)  = stack of f(a[…, :, …]) ⇒ each slice gets f's adjoint

The positions `i` come from numpy itself: `np.insert`/`np.delete` applied to the
element numbers of `a` (and of `v`, numbered negatively) give where each result
element comes from, so indices, slices, booleans, repeats and broadcasting of `v`
follow numpy exactly. `meshgrid(..., copy=False)` broadcasts with np.broadcast_to:
read-only views with fdata of their own, where numpy's np.broadcast_arrays views are
still writable (deprecated, with a FutureWarning on write). `apply_along_axis`: traced
values that `f` uses must be passed in `*args` (a traced value captured by `f`'s
closure belongs to the outer trace and raises TracingError).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, Vararg, example
from rules._support.examples import randn
from rules._support.forward import register_traced
from rules.numpy._composite import composite

__all__ = ["apply_along_axis_impl", "block_impl", "delete_impl", "insert_impl", "meshgrid_impl"]


def meshgrid_impl(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> Any:
    """np.meshgrid (numpy/lib/_function_base_impl.py) on traced values."""
    ndim = len(xi)
    if indexing not in ["xy", "ij"]:
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    s0 = (1,) * ndim
    out = [np.reshape(x, (*s0[:i], -1, *s0[i + 1 :])) for i, x in enumerate(xi)]
    if indexing == "xy" and ndim > 1:
        out[0] = np.reshape(out[0], (1, -1, *s0[2:]))
        out[1] = np.reshape(out[1], (-1, 1, *s0[2:]))
    shape = np.broadcast_shapes(*(np.shape(o) for o in out))
    if not sparse and any(np.shape(o) != shape for o in out):  # (as np.broadcast_arrays)
        out = [o if np.shape(o) == shape else np.broadcast_to(o, shape) for o in out]
    if copy:
        out = [np.copy(o) for o in out]
    return out if sparse and not copy else tuple(out)  # (numpy's types: a list only then)


def _depth(a: Any, where: str) -> tuple[int, int]:
    """(list depth, largest leaf ndim) of a block layout; numpy's errors for bad layouts."""
    if type(a) is tuple:
        raise TypeError(
            f"{where} is a tuple. Only lists can be used to arrange blocks, and np.block "
            "does not allow implicit conversion from tuple to ndarray."
        )
    if type(a) is not list:
        return 0, np.ndim(a)
    if not a:
        raise ValueError(f"{where} cannot be empty. Lists are not allowed to be empty.")
    parts = [_depth(e, f"{where}[{k}]") for k, e in enumerate(a)]
    if len({d for d, _ in parts}) > 1:
        raise ValueError(f"List depths are mismatched in {where}.")
    return parts[0][0] + 1, max(n for _, n in parts)


def block_impl(arrays: Any) -> Any:
    """np.block: leaves promoted to a common ndim, then concatenated innermost-last."""
    depth, max_ndim = _depth(arrays, "arrays")
    ndim = max(depth, max_ndim)

    def rec(a: Any, level: int) -> Any:
        if type(a) is list:
            return np.concatenate([rec(e, level + 1) for e in a], axis=-(depth - level))
        lead = ndim - np.ndim(a)
        if not lead:
            return np.copy(a)
        if rulekit.is_traced(a) and not np.ndim(a):  # a traced number
            return np.ones((1,) * lead, a.dtype) * a
        return np.reshape(a, (1,) * lead + np.shape(a))

    return rec(arrays, 0)


def insert_impl(arr: Any, obj: Any, values: Any, axis: Any = None) -> Any:
    """np.insert as a take from [arr.ravel(), values.ravel()] at positions numpy computes."""
    n = int(np.size(arr))
    if isinstance(values, (list, tuple)) and any(rulekit.is_traced(v) for v in values):
        values = np.stack(values)  # (a list of traced values: np.asarray cannot take it)
    vals = values if rulekit.is_traced(values) else np.asarray(values)
    vshape = np.shape(vals)
    if rulekit.is_traced(vals) and not vshape:  # a traced number: a 1-element array
        vals = np.ones(1, np.result_type(arr.dtype, vals.dtype)) * vals
    if vals.dtype != arr.dtype:  # (numpy casts the values to arr's dtype)
        vals = vals.astype(arr.dtype)
    ia = np.arange(n).reshape(np.shape(arr))
    iv = -1 - np.arange(int(np.size(vals))).reshape(vshape)
    idx = np.insert(ia, obj, iv, axis=axis)
    src = np.concatenate([np.ravel(arr), np.ravel(vals)])
    return np.take(src, np.where(idx >= 0, idx, n - 1 - idx))


def delete_impl(arr: Any, obj: Any, axis: Any = None) -> Any:
    """np.delete as a take from arr.ravel() at the positions numpy keeps."""
    idx = np.delete(np.arange(int(np.size(arr))).reshape(np.shape(arr)), obj, axis=axis)
    return np.take(np.ravel(arr), idx)


def apply_along_axis_impl(func1d: Any, axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    """np.apply_along_axis: func1d on each 1-d slice along `axis`, results stacked in place."""
    nd = np.ndim(arr)
    axis = int(axis)
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(axis, nd)
    axis %= nd
    moved = np.moveaxis(arr, axis, -1)
    outer = np.shape(moved)[:-1]
    inds = list(np.ndindex(*outer))
    if not inds:
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    res = [func1d(moved[ind], *args, **kwargs) for ind in inds]
    rshape = np.shape(res[0])
    out = np.reshape(np.stack(res), outer + rshape)
    k = len(rshape)
    if k == 0:
        return out
    return np.moveaxis(out, tuple(range(len(outer), len(outer) + k)), tuple(range(axis, axis + k)))


def _register(fn: Any, impl: Any, adjoint: str, examples: Any, *patterns: Any) -> None:
    rulekit.build_primitive_rrule.register(fn, *patterns, examples=examples)(
        composite(impl, adjoint)
    )
    register_traced(fn, impl)


def _meshgrid_examples() -> list[Any]:
    a, b, c = randn(3, seed=31), randn(4, seed=32), randn(2, seed=33)
    return [
        example(a, b),
        example(a, b, c, indexing="ij"),
        example(a, b.astype(np.float32), sparse=True),
        example(a, copy=False),
        example(a, c, copy=False, sparse=True),
        # (copy=False, sparse=False: numpy's broadcast views are writable through a deprecated
        # path, which the kit's aliasing check takes for plain views; tested in tests/ instead)
    ]


def _block_examples() -> list[Any]:
    A, B, c = randn(2, 2, seed=34), randn(2, 3, seed=35), randn(5, seed=36)
    return [
        example([A, B]),
        example([randn(3, seed=37), c]),  # 1-d: concatenated
        example([A, randn(2, 1, seed=38, dtype=np.float32)]),
        example([randn(seed=39), c]),  # a 0-d block: promoted to 1-d
    ]


def _insert_examples() -> list[Any]:
    x = randn(3, 4, seed=39)
    return [
        example(x, 2, 5.0),  # flattened
        example(x, 1, randn(3, seed=40), axis=1),
        example(x, [0, 2, 2], randn(3, 4, seed=41)[:3, 0], axis=1),  # repeated positions
        example(x, slice(0, 3), randn(1, seed=42), axis=0),  # a broadcast value
        example(x.astype(np.float32), -1, randn(4, seed=43, dtype=np.float32), axis=0),
    ]


def _delete_examples() -> list[Any]:
    x = randn(3, 4, seed=44)
    return [
        example(x, 2),
        example(x, [0, 2], axis=1),
        example(x, slice(None, None, 2), 0),
        example(x, np.array([True, False, True, False]), axis=-1),
    ]


def _apply_examples() -> list[Any]:
    x = randn(3, 4, seed=45)
    return [
        example(np.sum, 0, x),
        example(np.sort, 1, x),  # a 1-d result per slice
        example(np.outer, -1, x, randn(2, seed=46)),  # a 2-d result, an extra argument
    ]


_register(np.meshgrid, meshgrid_impl, "yᵢ = broadcast reshaped xᵢ ⇒ x̄ᵢ += ȳᵢ summed over the grid",
          _meshgrid_examples, Vararg[Any])  # fmt: skip
_register(np.block, block_impl, "y = nested concatenation ⇒ each block += its slice of ȳ",
          _block_examples, list)  # fmt: skip
_register(np.insert, insert_impl, "y = take([a, v], i) ⇒ ā, v̄ += np.add.at at the positions i",
          _insert_examples, Array[np.inexact], Vararg[Any])  # fmt: skip
_register(np.delete, delete_impl, "y = take(a, i) ⇒ ā += np.add.at(ā, i, ȳ)",
          _delete_examples, Array[np.inexact], Vararg[Any])  # fmt: skip
_register(np.apply_along_axis, apply_along_axis_impl,
          "y[…, :, …] = f(x[…, :, …]) ⇒ each slice's x̄ += f's adjoint of its ȳ",
          _apply_examples, Any, Any, Array[np.inexact], Vararg[Any])  # fmt: skip
