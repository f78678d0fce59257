"""Rules for joining, splitting and replicating arrays: concatenate, stack, hstack, vstack,
split, array_split, tile, repeat, roll, pad.

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

`split`/`array_split` return views: each piece's fdata is the same piece of x̄.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit import CoDual, Vararg, example, rrule
from rules._support.arraylike import Seq, inactive
from rules._support.shape import INEXACT, add_into, no_pullback, nulls, seq_fdata, seq_rdata
from rules._support.util import NO_R, is_inexact_array, new_output, randn

__all__ = [
    "concatenate_rrule",
    "pad_rrule",
    "repeat_rrule",
    "roll_rrule",
    "split_rrule",
    "tile_rrule",
]


# -- concatenate, stack, hstack, vstack ----------------------------------------------------


def _axis(kwargs: dict[str, Any], a: list[Any], default: Any = 0) -> Any:
    return kwargs.get("axis", a[0] if a else default)


def concatenate_rrule(f: CoDual, seq: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = concatenate/stack/hstack/vstack(xs): x̄ₖ += the block of ȳ that xₖ became."""
    fn = f.x
    a = [c.x for c in args]
    xs, _ = seq_fdata(seq)
    y = fn(xs, *a, **kwargs)
    n = 2 + len(args)
    if seq.dx is None or not is_inexact_array(y):
        return inactive(y, n)
    out = new_output(y)
    result = nulls(n)
    if fn is np.concatenate or fn is np.stack:
        axis = _axis(kwargs, a)
    elif fn is np.hstack:
        axis = 0 if np.ndim(xs[0]) <= 1 else 1
    else:  # vstack
        axis = 0
    stacked = fn is np.stack

    def concatenate_pullback(dy: Any) -> tuple[Any, ...]:
        g = out.dx
        if axis is None:  # concatenate(axis=None) flattens every input
            g = g.reshape(-1)
        ax = axis % g.ndim if axis is not None else 0
        lead = (slice(None),) * ax
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
        return (NO_R, seq_rdata(seq, grads), *result[2:])

    return out, concatenate_pullback


def _along(fn: Callable[..., Any], shape: tuple[int, ...], ax: int) -> int:
    """How many positions along the joining axis an input of `shape` fills."""
    if fn is np.hstack:
        return shape[ax] if len(shape) > ax else 1  # 0-d: atleast_1d
    if fn is np.vstack:
        return shape[0] if len(shape) >= 2 else 1  # 0-d, 1-d: atleast_2d gives one row
    return shape[ax]


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
    rrule.register(_fn, Seq, Vararg[Any], examples=_ex)(concatenate_rrule)


# -- split, array_split: views ------------------------------------------------------------


def split_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """ys = split(x, ...): a list of views of x, each with the same view of x̄ as fdata."""
    fn = f.x
    a = [c.x for c in args]
    ys = fn(x.x, *a, **kwargs)
    n = 2 + len(args)
    if x.dx is None:
        return inactive(ys, n)
    return CoDual(ys, fn(x.dx, *a, **kwargs)), no_pullback(n)


def _split_examples() -> list[Any]:
    return [
        example(randn(6), 3),
        example(randn(2, 5, dtype=np.float32), [1, 3], axis=1),
        example(randn(4, 2, dtype=np.complex128), [2]),
    ]


def _array_split_examples() -> list[Any]:
    return [example(randn(7), 3), example(randn(3, 5, dtype=np.float32), 2, 1)]


rrule.register(np.split, INEXACT, Any, Vararg[Any], examples=_split_examples)(split_rrule)
rrule.register(np.array_split, INEXACT, Any, Vararg[Any], examples=_array_split_examples)(
    split_rrule
)


# -- tile, repeat, roll --------------------------------------------------------------------


def _copy_rule(
    f: CoDual, x: CoDual, args: tuple[CoDual, ...], kwargs: dict[str, Any], adjoint: Any
) -> tuple[CoDual, Any]:
    """A rule for `y = f(x, ...)` (a new array) whose pullback is `adjoint(ȳ) -> Δx̄`."""
    y = f.x(x.x, *(c.x for c in args), **kwargs)
    n = 2 + len(args)
    if x.dx is None:
        return inactive(y, n)
    out = new_output(y)
    result = nulls(n)
    if type(y) is not np.ndarray:  # a scalar output: ȳ arrives as dy

        def scalar_pullback(dy: Any) -> tuple[Any, ...]:
            add_into(x.dx, adjoint(np.asarray(dy)))
            return result

        return out, scalar_pullback

    def copy_pullback(dy: Any) -> tuple[Any, ...]:
        add_into(x.dx, adjoint(out.dx))
        return result

    return out, copy_pullback


def tile_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = tile(x, reps)  ⇒  x̄ += ȳ reshaped to (r₀, s₀, r₁, s₁, ...), summed over the rᵢ."""
    shape = x.x.shape
    reps = kwargs["reps"] if "reps" in kwargs else args[0].x
    r = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    d = max(len(shape), len(r))
    s = (1,) * (d - len(shape)) + shape
    r = (1,) * (d - len(r)) + r

    def tile_adjoint(g: np.ndarray) -> np.ndarray:
        split = [n for pair in zip(r, s, strict=True) for n in pair]
        return g.reshape(split).sum(axis=tuple(range(0, 2 * d, 2))).reshape(shape)

    return _copy_rule(f, x, args, kwargs, tile_adjoint)


def _tile_examples() -> list[Any]:
    return [
        example(randn(2, 3), (2, 1)),
        example(randn(3, dtype=np.float32), 2),
        example(randn(2, 1), (3, 1, 2)),
        example(randn(2, 2, 2, dtype=np.complex128), (2, 3)),
    ]


rrule.register(np.tile, INEXACT, Vararg[Any], examples=_tile_examples)(tile_rrule)


def repeat_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = repeat(x, r, axis)  ⇒  x̄ᵢ += Σ of ȳ over the copies of xᵢ (axis=None: flat x)."""
    xp = x.x
    a = [c.x for c in args]
    repeats = np.asarray(kwargs.get("repeats", a[0] if a else None))
    axis = kwargs.get("axis", a[1] if len(a) > 1 else None)

    def repeat_adjoint(g: np.ndarray) -> np.ndarray:
        ax = 0 if axis is None else axis % max(xp.ndim, 1)
        base = (xp.reshape(-1) if axis is None else xp).shape
        m = base[ax]
        if repeats.size == 1:  # every element repeated r times: sum over a new axis
            rr = int(repeats.reshape(()))
            out = g.reshape((*base[:ax], m, rr, *base[ax + 1 :])).sum(axis=ax + 1)
        else:
            rep = np.broadcast_to(repeats, (m,))
            out = np.zeros(base, dtype=g.dtype)
            keep = rep > 0  # np.add.reduceat cannot express an empty segment
            if keep.any():
                starts = (np.cumsum(rep) - rep)[keep]
                out[(slice(None),) * ax + (keep,)] = np.add.reduceat(g, starts, axis=ax)
        return out.reshape(xp.shape)

    return _copy_rule(f, x, args, kwargs, repeat_adjoint)


def _repeat_examples() -> list[Any]:
    return [
        example(randn(2, 3), 2),
        example(randn(2, 3, dtype=np.float32), [1, 0, 3], axis=1),
        example(randn(3), np.array([2, 1, 1])),
        example(randn(2, 2, dtype=np.complex128), 3, 0),
    ]


rrule.register(np.repeat, INEXACT, Any, Vararg[Any], examples=_repeat_examples)(repeat_rrule)


def roll_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = roll(x, s, axis)  ⇒  x̄ += roll(ȳ, −s, axis)."""
    a = [c.x for c in args]
    shift: Any = kwargs.get("shift", a[0] if a else None)
    axis = kwargs.get("axis", a[1] if len(a) > 1 else None)
    back = -shift if np.ndim(shift) == 0 else tuple(-np.asarray(shift))

    def roll_adjoint(g: np.ndarray) -> np.ndarray:
        return np.roll(g, back, axis)

    return _copy_rule(f, x, args, kwargs, roll_adjoint)


def _roll_examples() -> list[Any]:
    return [
        example(randn(5), 2),
        example(randn(3, 4, dtype=np.float32), -1, axis=1),
        example(randn(3, 4), (1, 2), (0, 1)),
        example(randn(2, 3, dtype=np.complex128), 4),
    ]


rrule.register(np.roll, INEXACT, Any, Vararg[Any], examples=_roll_examples)(roll_rrule)


# -- pad -----------------------------------------------------------------------------------

_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")


def pad_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = pad(x, w, mode): constant ⇒ x̄ += ȳ[interior]; edge/reflect/symmetric/wrap copy
    elements of x, so y = x.flat[J] for the index map J = pad(arange, w, mode) and
    x̄.flat += Σ over J (np.add.at)."""
    xp = x.x
    a = [c.x for c in args]
    width: Any = kwargs.get("pad_width", a[0] if a else None)
    mode = kwargs.get("mode", a[1] if len(a) > 1 else "constant")
    options = {k: v for k, v in kwargs.items() if k not in ("pad_width", "mode")}
    if any(isinstance(v, CoDual) for v in options.values()):
        raise NotImplementedError(
            "rulekit: np.pad with a traced array as a keyword argument (constant_values=...) "
            "has no rule: keyword arguments get no cotangent. Pad with a constant and add the "
            "traced border with np.concatenate, or write the border with y[...] = v."
        )
    if mode == "constant":
        w = np.broadcast_to(np.asarray(width, dtype=np.intp), (xp.ndim, 2))
        interior = tuple(slice(lo, lo + n) for (lo, _), n in zip(w, xp.shape, strict=True))

        def constant_adjoint(g: np.ndarray) -> np.ndarray:
            return g[interior]

        return _copy_rule(f, x, args, kwargs, constant_adjoint)
    if mode not in _INDEX_MODES or options.get("reflect_type", "even") != "even":
        raise NotImplementedError(
            f"rulekit: np.pad(mode={mode!r}{', reflect_type=odd' if mode in _INDEX_MODES else ''})"
            " has no rule. Supported modes: 'constant' (constant_values as constants), 'edge', "
            "'reflect', 'symmetric', 'wrap' (reflect_type='even'). Build other paddings from "
            "np.concatenate of slices of the array, which is differentiable."
        )
    index_map = np.pad(np.arange(xp.size).reshape(xp.shape), width, mode=mode, **options)

    def gather_adjoint(g: np.ndarray) -> np.ndarray:
        flat = np.zeros(xp.size, dtype=g.dtype)
        np.add.at(flat, index_map, g)
        return flat.reshape(xp.shape)

    return _copy_rule(f, x, args, kwargs, gather_adjoint)


def _pad_examples() -> list[Any]:
    return [
        example(randn(3), 2),
        example(randn(2, 3, dtype=np.float32), ((1, 0), (2, 1)), constant_values=1.5),
        example(randn(3, 2), ((2, 3), (1, 1)), "reflect"),
        example(randn(2, 2, dtype=np.complex128), 3, mode="wrap"),
    ]


rrule.register(np.pad, INEXACT, Vararg[Any], examples=_pad_examples)(pad_rrule)
