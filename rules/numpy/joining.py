"""Rules for joining, splitting and replicating arrays: concatenate, stack, hstack, vstack,
split, array_split, tile, repeat, roll, pad.

Every one of them is linear in its array argument(s) and declared once
(`rulekit.linear`: the reverse rule and the forward rule `ẏ = fn(ẋ, ...)` follow).
All but the splits return new arrays; each element of the output is one input
element (or a constant), so every adjoint gathers ȳ back:

    y = concatenate(xs, axis)  ⇒  x̄ₖ += ȳ[..., oₖ:oₖ₊₁, ...]
    y = stack(xs, axis)        ⇒  x̄ₖ += ȳ[..., k, ...]
    y = tile(x, reps)          ⇒  x̄ += Σ over the copies of ȳ
    y = repeat(x, r, axis)     ⇒  x̄ᵢ += Σ of ȳ over the rᵢ copies of xᵢ
    y = roll(x, s, axis)       ⇒  x̄ += roll(ȳ, −s, axis)
    y = pad(x, w, mode)        ⇒  x̄ += ȳ[interior] (constant); for index modes
                                   (edge, reflect, symmetric, wrap) x̄ gathers every
                                   copy of each element (np.add.at over the index map)

`split`/`array_split` return views: each piece's fdata is the same piece of x̄
(adjoint, for a copy: the pieces concatenated back). `pad` with `constant_values` is
affine, not linear: its tangent map pads with zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit import CoDual, Vararg, example, linear, rrule
from rules._support.examples import randn
from rules._support.patterns import InexactArray, Seq
from rules._support.shape import always_a_view

__all__ = ["PAD", "pad_rrule"]


# -- concatenate, stack, hstack, vstack ----------------------------------------------------


def _along(fn: Callable[..., Any], shape: tuple[int, ...], ax: int) -> int:
    """How many positions along the joining axis an input of `shape` fills."""
    if fn is np.hstack:
        return shape[ax] if len(shape) > ax else 1  # 0-d: atleast_1d
    if fn is np.vstack:
        return shape[0] if len(shape) >= 2 else 1  # 0-d, 1-d: atleast_2d gives one row
    return shape[ax]


def _join_adjoint(fn: Callable[..., Any]) -> Callable[..., list[Any]]:
    """The adjoint of joining function `fn`: x̄ₖ += the block of ȳ that xₖ became."""
    stacked = fn is np.stack

    def adjoint(g: np.ndarray, xs: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if fn is np.concatenate or stacked:
            axis = kwargs.get("axis", args[0] if args else 0)
        else:  # hstack joins along axis 1 (0 for 1-d inputs), vstack along axis 0
            axis = 0 if fn is np.vstack or np.ndim(xs[0]) <= 1 else 1
        if axis is None:  # concatenate(axis=None) flattens every input
            g = g.reshape(-1)
        ax = axis % g.ndim if axis is not None else 0
        lead: tuple[Any, ...] = (slice(None),) * ax
        grads: list[Any] = []
        start = 0
        for x in xs:
            if stacked:
                grads.append(g[(*lead, start)])
                start += 1
                continue
            shape = np.shape(x)
            k = int(np.prod(shape)) if axis is None else _along(fn, shape, ax)
            piece = g[(*lead, slice(start, start + k))]
            start += k
            grads.append(piece.reshape(shape) if piece.shape != shape else piece)
        return grads

    adjoint.__name__ = f"{fn.__name__}_adjoint"
    return adjoint


def _concatenate_examples() -> list[Any]:
    a, b = randn(2, 3), randn(1, 3, seed=1)
    return [
        example([a, b]),
        example((a, randn(2, 2, seed=2, dtype=np.float32)), axis=1),
        example([a, b], axis=None),
        example([a, b.astype(np.complex128)], 0),
    ]


def _stack_examples() -> list[Any]:
    a, b = randn(2, 3), randn(2, 3, seed=1)
    return [
        example([a, b]),
        example((a, b.astype(np.float32)), axis=-1),
        example([a[0, 0], b[1, 2]]),
    ]


def _hstack_examples() -> list[Any]:
    return [
        example([randn(3), randn(2, seed=1)]),
        example((randn(2, 1), randn(2, 3, seed=1, dtype=np.float32))),
        example([randn(), 1.5, randn(2, seed=1)]),
    ]


def _vstack_examples() -> list[Any]:
    return [
        example([randn(3), randn(2, 3, seed=1)]),
        example((randn(1, 2, dtype=np.float32), randn(2, seed=1))),
        example([randn(), np.float64(2.5)]),
    ]


for _fn, _ex in (
    (np.concatenate, _concatenate_examples),
    (np.stack, _stack_examples),
    (np.hstack, _hstack_examples),
    (np.vstack, _vstack_examples),
):
    linear(_fn, _join_adjoint(_fn), patterns=[(Seq, Vararg[Any])], examples=_ex)


# -- split, array_split: views ------------------------------------------------------------


def _split_adjoint(g: list[np.ndarray], ary: np.ndarray, indices: Any, axis: int = 0) -> Any:
    """The pieces' cotangents joined back along `axis`."""
    return np.concatenate(g, axis=axis) if g else np.zeros(ary.shape, ary.dtype)


linear(
    np.split,
    _split_adjoint,
    patterns=[(InexactArray, Any, Vararg[Any])],
    view=always_a_view,
    examples=lambda: [
        example(randn(6), 3),
        example(randn(2, 5, dtype=np.float32), [1, 3], axis=1),
        example(randn(4, 2, dtype=np.complex128), [2]),
    ],
)
linear(
    np.array_split,
    _split_adjoint,
    patterns=[(InexactArray, Any, Vararg[Any])],
    view=always_a_view,
    examples=lambda: [example(randn(7), 3), example(randn(3, 5, dtype=np.float32), 2, 1)],
)


# -- tile, repeat, roll --------------------------------------------------------------------


def _tile_adjoint(g: np.ndarray, A: np.ndarray, reps: Any) -> np.ndarray:
    """y = tile(x, reps)  ⇒  x̄ += ȳ reshaped to (r₀, s₀, r₁, s₁, ...), summed over the rᵢ."""
    shape = np.shape(A)
    r = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    d = max(len(shape), len(r))
    s = (1,) * (d - len(shape)) + shape
    r = (1,) * (d - len(r)) + r
    split = [n for pair in zip(r, s, strict=True) for n in pair]
    return g.reshape(split).sum(axis=tuple(range(0, 2 * d, 2))).reshape(shape)


linear(
    np.tile,
    _tile_adjoint,
    patterns=[(InexactArray, Vararg[Any])],
    examples=lambda: [
        example(randn(2, 3), (2, 1)),
        example(randn(3, dtype=np.float32), 2),
        example(randn(2, 1), (3, 1, 2)),
        example(randn(2, 2, 2, dtype=np.complex128), (2, 3)),
    ],
)


def _repeat_adjoint(g: np.ndarray, a: np.ndarray, repeats: Any, axis: Any = None) -> np.ndarray:
    """y = repeat(x, r, axis)  ⇒  x̄ᵢ += Σ of ȳ over the copies of xᵢ (axis=None: flat x)."""
    rs = np.asarray(repeats)
    ax = 0 if axis is None else axis % max(a.ndim, 1)
    base = (a.reshape(-1) if axis is None else a).shape
    m = base[ax]
    if rs.size == 1:  # every element repeated r times: sum over a new axis
        rr = int(rs.reshape(()))
        out = g.reshape((*base[:ax], m, rr, *base[ax + 1 :])).sum(axis=ax + 1)
    else:
        rep = np.broadcast_to(rs, (m,))
        out = np.zeros(base, dtype=g.dtype)
        keep = rep > 0  # np.add.reduceat cannot express an empty segment
        if keep.any():
            starts = (np.cumsum(rep) - rep)[keep]
            out[(slice(None),) * ax + (keep,)] = np.add.reduceat(g, starts, axis=ax)
    return out.reshape(a.shape)


linear(
    np.repeat,
    _repeat_adjoint,
    patterns=[(InexactArray, Any, Vararg[Any])],
    examples=lambda: [
        example(randn(2, 3), 2),
        example(randn(2, 3, dtype=np.float32), [1, 0, 3], axis=1),
        example(randn(3), np.array([2, 1, 1])),
        example(randn(2, 2, dtype=np.complex128), 3, 0),
    ],
)


def _roll_adjoint(g: np.ndarray, a: np.ndarray, shift: Any, axis: Any = None) -> np.ndarray:
    """y = roll(x, s, axis)  ⇒  x̄ += roll(ȳ, −s, axis)."""
    back = -shift if np.ndim(shift) == 0 else tuple(-np.asarray(shift))
    return np.roll(g, back, axis)


linear(
    np.roll,
    _roll_adjoint,
    patterns=[(InexactArray, Any, Vararg[Any])],
    examples=lambda: [
        example(randn(5), 2),
        example(randn(3, 4, dtype=np.float32), -1, axis=1),
        example(randn(3, 4), (1, 2), (0, 1)),
        example(randn(2, 3, dtype=np.complex128), 4),
    ],
)


# -- pad -----------------------------------------------------------------------------------

_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")


def _pad_adjoint(
    g: np.ndarray, array: np.ndarray, pad_width: Any, mode: Any = "constant", **kwargs: Any
) -> np.ndarray:
    """y = pad(x, w, mode): constant ⇒ x̄ += ȳ[interior]; edge/reflect/symmetric/wrap copy
    elements of x, so y = x.flat[J] for the index map J = pad(arange, w, mode) and
    x̄.flat += Σ over J (np.add.at)."""
    if mode == "constant":
        w = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (array.ndim, 2))
        return g[tuple(slice(lo, lo + n) for (lo, _), n in zip(w, array.shape, strict=True))]
    index_map = np.pad(np.arange(array.size).reshape(array.shape), pad_width, mode, **kwargs)
    flat = np.zeros(array.size, dtype=g.dtype)
    np.add.at(flat, index_map, g)
    return flat.reshape(array.shape)


def _pad_tangent(x_dot: np.ndarray, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    """The linear part of pad: `constant_values` (a constant offset) padded as zeros."""
    kwargs.pop("constant_values", None)
    return np.pad(x_dot, pad_width, mode, **kwargs)


#: y = pad(x, w, mode) for the modes that copy elements of x (linear, or affine: constant)
PAD = linear(np.pad, _pad_adjoint, tangent=_pad_tangent)


def pad_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """`PAD`'s rule, for the modes it covers: the others are refused with what to do."""
    mode = kwargs.get("mode", args[1].x if len(args) > 1 else "constant")
    if mode != "constant" and (
        mode not in _INDEX_MODES or kwargs.get("reflect_type", "even") != "even"
    ):
        raise NotImplementedError(
            f"rulekit: np.pad(mode={mode!r}{', reflect_type=odd' if mode in _INDEX_MODES else ''})"
            " has no rule. Supported modes: 'constant' (constant_values as constants), 'edge', "
            "'reflect', 'symmetric', 'wrap' (reflect_type='even'). Build other paddings from "
            "np.concatenate of slices of the array, which is differentiable."
        )
    return PAD.rrule(f, x, *args, **kwargs)


def _pad_examples() -> list[Any]:
    return [
        example(randn(3), 2),
        example(randn(2, 3, dtype=np.float32), ((1, 0), (2, 1)), constant_values=1.5),
        example(randn(3, 2), ((2, 3), (1, 1)), "reflect"),
        example(randn(2, 2, dtype=np.complex128), 3, mode="wrap"),
    ]


rrule.register(np.pad, InexactArray, Vararg[Any], examples=_pad_examples)(pad_rrule)
