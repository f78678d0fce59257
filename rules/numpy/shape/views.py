"""Rules for shape manipulation: reshape, ravel, transposes, axis insertion/removal, flips,
broadcast_to, copy and astype.

Views alias fdata (see `rules._support.shape`): when numpy returns a view of the
input (`x.T`, `x.reshape(...)` of a contiguous `x`, `np.squeeze`, `np.flip`, ...),
the output's fdata is the same view of the input's fdata and the pullback does
nothing — later pullbacks already incremented the shared memory. When numpy
returns a copy the output gets fresh zero fdata and the pullback applies the
adjoint of the (linear, index-permuting) map:

    y = reshape(x)  ⇒  x̄ += reshape⁻¹(ȳ)       y = copy(x)   ⇒  x̄ += ȳ
    y = x.astype(d) ⇒  x̄ += ȳ cast back (a real x takes Re ȳ)

`np.broadcast_to` returns numpy's read-only view but gives it fdata of its own:
a zero-stride view of x̄ could not accumulate (`v += g` on overlapping memory does
not sum), so its pullback adds `unbroadcast(ȳ)` into x̄; see
docs/conventions-shape-indexing.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit import CoDual, Vararg, example, rrule
from rules._support.shape import INEXACT, ViewMismatchError, no_pullback, same_view, view_or_new
from rules._support.util import accumulate, new_output, randn

__all__ = [
    "astype_rrule",
    "broadcast_to_rrule",
    "copy_rrule",
    "reshape_rrule",
    "view_rrule",
]


def _args(args: tuple[CoDual, ...]) -> list[Any]:
    return [a.x for a in args]


# -- views that are always views ----------------------------------------------------------


def view_rrule(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The rule of a function that always returns a view of its first argument.

    `y = fn(x, ...)` aliases x  ⇒  ȳ *is* a view of x̄: nothing to do in the pullback.
    """

    def rule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        a = _args(args)
        return same_view(x, fn(x.x, *a, **kwargs), fn, *a, **kwargs), no_pullback(2 + len(args))

    rule.__name__ = rule.__qualname__ = f"{fn.__name__}_rrule"
    return rule


def _transpose_examples() -> list[Any]:
    return [
        example(randn(2, 3)),
        example(randn(2, 3, 4, dtype=np.float32), (2, 0, 1)),
        example(randn(2, 3, 4), axes=(1, 2, 0)),
        example(randn(3, 2, dtype=np.complex128)),
    ]


def _swapaxes_examples() -> list[Any]:
    return [example(randn(2, 3, 4), 0, 2), example(randn(3, 2, dtype=np.float32), -1, -2)]


def _moveaxis_examples() -> list[Any]:
    return [
        example(randn(2, 3, 4), 0, -1),
        example(randn(2, 3, 4, dtype=np.complex64), [0, 1], [2, 0]),
    ]


def _expand_dims_examples() -> list[Any]:
    return [
        example(randn(2, 3), 1),
        example(randn(3, dtype=np.float32), (0, 2)),
        example(randn(), 0),
    ]


def _squeeze_examples() -> list[Any]:
    return [example(randn(1, 3, 1)), example(randn(2, 1, dtype=np.float32), axis=1)]


def _flip_examples() -> list[Any]:
    return [example(randn(2, 3)), example(randn(2, 3, 2, dtype=np.float32), axis=(0, 2))]


def _flip2d_examples() -> list[Any]:
    return [example(randn(3, 4)), example(randn(2, 3, 2, dtype=np.complex128))]


def _flipud_examples() -> list[Any]:
    return [example(randn(4)), example(randn(3, 2, dtype=np.float32))]


for _fn, _pats, _ex in (
    (np.transpose, (INEXACT, Vararg[Any]), _transpose_examples),
    (np.swapaxes, (INEXACT, Any, Any), _swapaxes_examples),
    (np.moveaxis, (INEXACT, Any, Any), _moveaxis_examples),
    (np.expand_dims, (INEXACT, Any), _expand_dims_examples),
    (np.squeeze, (INEXACT, Vararg[Any]), _squeeze_examples),
    (np.flip, (INEXACT, Vararg[Any]), _flip_examples),
    (np.fliplr, (INEXACT,), _flip2d_examples),
    (np.flipud, (INEXACT,), _flipud_examples),
):
    rrule.register(_fn, *_pats, examples=_ex)(view_rrule(_fn))


# -- reshape and ravel: a view when numpy can, else a copy ---------------------------------


def _order(x: np.ndarray, order: Any) -> str:
    """The index order a reshape/ravel read `x` in ('A' resolved against x's layout)."""
    if order is None or order == "C":
        return "C"
    if order == "A":
        return "F" if x.flags.f_contiguous and not x.flags.c_contiguous else "C"
    return str(order)


def _unflatten_add(dx: np.ndarray, x: np.ndarray, g: np.ndarray, order: str) -> None:
    """`dx += g` read back in `order` (the adjoint of a reshape/ravel copy of `x`)."""
    if order != "K":
        dx += g.reshape(x.shape, order=order)  # type: ignore[call-overload]
        return
    # ravel(order='K') of a strided x reads memory order; an array laid out like x
    # (empty_like keeps the stride order) ravels to a view in that same order.
    buf = np.empty_like(x)
    flat = np.ravel(buf, order="K")
    if not np.shares_memory(flat, buf):
        raise ViewMismatchError("rulekit internal error: ravel(order='K') adjoint lost its view")
    flat[...] = g.reshape(-1)
    dx += buf


def reshape_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = reshape(x): a view shares x̄; a copy pulls back x̄ += reshape(ȳ, x.shape, order)."""
    a = _args(args)
    fn = f.x
    y = fn(x.x, *a, **kwargs)
    pos = 1 if fn is np.ravel else 2  # where a positional `order` sits
    given = kwargs.get("order", a[pos - 1] if len(a) >= pos else "C")
    out, is_view = view_or_new(x, y, fn, *a, memory_order=given in ("K", "A"), **kwargs)
    n = 2 + len(args)
    if is_view:
        return out, no_pullback(n)
    order = _order(x.x, given)
    result = no_pullback(n)(None)

    def reshape_pullback(dy: Any) -> tuple[Any, ...]:
        _unflatten_add(x.dx, x.x, out.dx, order)
        return result

    return out, reshape_pullback


def _reshape_examples() -> list[Any]:
    return [
        example(randn(2, 6), (3, 4)),  # a view
        example(randn(2, 3, dtype=np.float32), (3, 2), order="F"),
        example(randn(4, 3).T, (2, 6)),  # a copy (x non-contiguous)
        example(randn(2, 3, dtype=np.complex128), -1),
    ]


def _ravel_examples() -> list[Any]:
    return [
        example(randn(2, 3)),  # a view
        example(randn(3, 4)[:, ::2]),  # a copy
        example(randn(3, 2, dtype=np.float32), "F"),
        example(randn(2, 3, 4).transpose(1, 0, 2)[:, ::-1], order="K"),
    ]


rrule.register(np.reshape, INEXACT, Any, Vararg[Any], examples=_reshape_examples)(reshape_rrule)
rrule.register(np.ravel, INEXACT, Vararg[Any], examples=_ravel_examples)(reshape_rrule)


# -- broadcast_to: a read-only copy (zero-stride fdata could not accumulate) ---------------


def broadcast_to_rrule(
    f: CoDual, x: CoDual, shape: CoDual, *args: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = broadcast_to(x, shape): numpy's read-only view, with fdata of its own  ⇒
    x̄ += unbroadcast(ȳ).

    The view's elements share memory (zero strides), so a view of x̄ as its fdata could
    not accumulate (`ȳ += g` keeps one of the overlapping writes instead of summing
    them). Being read-only, y is never written through, so separate fdata loses nothing.
    """
    y = np.broadcast_to(x.x, shape.x, *_args(args), **kwargs)
    n = 3 + len(args)
    if x.dx is None:
        return CoDual(y, None), no_pullback(n)
    out = CoDual(y, np.zeros(y.shape, x.dx.dtype))
    result = no_pullback(n)(None)

    def broadcast_to_pullback(dy: Any) -> tuple[Any, ...]:
        accumulate(x, out.dx)
        return result

    return out, broadcast_to_pullback


def _broadcast_to_examples() -> list[Any]:
    return [
        example(randn(3), (2, 3)),
        example(randn(2, 1, dtype=np.float32), (4, 2, 3)),
        example(randn(), (2,)),
    ]


rrule.register(np.broadcast_to, INEXACT, Any, Vararg[Any], examples=_broadcast_to_examples)(
    broadcast_to_rrule
)


# -- copies ---------------------------------------------------------------------------------


def copy_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = np.copy(x)  ⇒  x̄ += ȳ."""
    y = np.copy(x.x, *_args(args), **kwargs)
    n = 2 + len(args)
    if x.dx is None:
        return CoDual(y, None), no_pullback(n)
    out = new_output(y)
    result = no_pullback(n)(None)

    def copy_pullback(dy: Any) -> tuple[Any, ...]:
        x.dx += out.dx
        return result

    return out, copy_pullback


def _copy_examples() -> list[Any]:
    return [
        example(randn(2, 3)),
        example(randn(3, dtype=np.float32), "F"),
        example(randn(dtype=np.complex128)),
    ]


rrule.register(np.copy, INEXACT, Vararg[Any], examples=_copy_examples)(copy_rrule)


def astype_rrule(
    f: CoDual, x: CoDual, dtype: CoDual, *args: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = x.astype(d): x̄ += ȳ cast to x's dtype; complex → real keeps Re, so a complex
    x̄ gets ȳ + 0j; real → complex: x̄ += Re ȳ. To an integer/bool dtype: not
    differentiable, the output is inactive. `copy=False` with x's dtype returns x itself,
    with x's fdata."""
    xp = x.x
    y = xp.astype(dtype.x, *_args(args), **kwargs)
    n = 3 + len(args)
    if y is xp:
        return CoDual(y, x.dx), no_pullback(n)
    if x.dx is None or y.dtype.kind not in "fc":
        return CoDual(y, None), no_pullback(n)
    out = new_output(y)
    result = no_pullback(n)(None)

    def astype_pullback(dy: Any) -> tuple[Any, ...]:
        g = out.dx
        x.dx += g.real if (g.dtype.kind == "c" and xp.dtype.kind != "c") else g
        return result

    return out, astype_pullback


def _astype_examples() -> list[Any]:
    return [
        example(randn(2, 3), np.float32),
        example(randn(3, dtype=np.float32), "float64"),
        example(randn(2, 2), np.dtype(np.complex128)),
        example(randn(3), np.dtype(np.float64), copy=False),  # returns x itself
    ]


rrule.register(np.ndarray.astype, INEXACT, Any, Vararg[Any], examples=_astype_examples)(
    astype_rrule
)
