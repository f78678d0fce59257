"""Rules for shape manipulation: reshape, ravel, transposes, axis insertion/removal, flips,
broadcast_to, copy and astype, each declared once as a linear function (`rulekit.linear`).

Each declaration gives the function and its adjoint; the reverse rule (and the
forward rule, `ẏ = fn(ẋ)`) follow from it:

    y = transpose(x, p)      ⇒  x̄ += transpose(ȳ, p⁻¹)
    y = moveaxis(x, s, d)    ⇒  x̄ += moveaxis(ȳ, d, s)
    y = swapaxes(x, a, b)    ⇒  x̄ += swapaxes(ȳ, a, b)
    y = flip(x, axes)        ⇒  x̄ += flip(ȳ, axes)         (fliplr, flipud: the same)
    y = expand_dims/squeeze/reshape/ravel(x)
                             ⇒  x̄ += ȳ read back into x's shape (in the order it was read)
    y = broadcast_to(x, s)   ⇒  x̄ += unbroadcast(ȳ)
    y = copy(x)              ⇒  x̄ += ȳ
    y = x.astype(d)          ⇒  x̄ += ȳ cast back (a real x takes Re ȳ)

Views alias fdata (`view=` in the declarations: `rules._support.shape.always_a_view`,
or for reshape/ravel, which may copy, `rules._support.shape.view_or_new`):
when numpy returns a view of the input (`x.T`, `x.reshape(...)` of a contiguous
`x`, `np.squeeze`, `np.flip`, ...), the output's fdata is the same view of the
input's fdata and the pullback does nothing: later pullbacks already incremented
the shared memory. When numpy returns a copy the adjoint above is applied.

`np.broadcast_to` returns numpy's read-only view but is declared without `view`:
a zero-stride view of x̄ could not accumulate (`v += g` on overlapping memory does
not sum), so its output gets fdata of its own and its pullback adds `unbroadcast(ȳ)`
into x̄; see docs/conventions-shape-indexing.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit import CoDual, Vararg, example, linear
from rules._support.cotangents import unbroadcast
from rules._support.examples import randn
from rules._support.patterns import InexactArray
from rules._support.shape import ViewMismatchError, always_a_view, view_or_new

__all__ = ["ASTYPE", "COPY", "RESHAPE", "always_a_view"]


# -- views that are always views (`always_a_view`: the same view of x̄) -------------------


def _transpose_adjoint(g: np.ndarray, x: np.ndarray, axes: Any = None) -> np.ndarray:
    if axes is None:
        return np.transpose(g)
    return np.transpose(g, np.argsort([a % max(x.ndim, 1) for a in axes]))


linear(
    np.transpose,
    _transpose_adjoint,
    patterns=[(InexactArray, Vararg[Any])],
    view=always_a_view,
    examples=lambda: [
        example(randn(2, 3)),
        example(randn(2, 3, 4, dtype=np.float32), (2, 0, 1)),
        example(randn(2, 3, 4), axes=(1, 2, 0)),
        example(randn(3, 2, dtype=np.complex128)),
    ],
)
linear(
    np.swapaxes,
    lambda g, x, axis1, axis2: np.swapaxes(g, axis1, axis2),
    patterns=[(InexactArray, Any, Any)],
    view=always_a_view,
    examples=lambda: [
        example(randn(2, 3, 4), 0, 2),
        example(randn(3, 2, dtype=np.float32), -1, -2),
    ],
)
linear(
    np.moveaxis,
    lambda g, x, source, destination: np.moveaxis(g, destination, source),
    patterns=[(InexactArray, Any, Any)],
    view=always_a_view,
    examples=lambda: [
        example(randn(2, 3, 4), 0, -1),
        example(randn(2, 3, 4, dtype=np.complex64), [0, 1], [2, 0]),
    ],
)


def _back_to_shape(g: np.ndarray, x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """The adjoint of a C-order reshape (expand_dims, squeeze): ȳ reshaped to x's shape."""
    return g.reshape(x.shape)


linear(
    np.expand_dims,
    _back_to_shape,
    patterns=[(InexactArray, Any)],
    view=always_a_view,
    examples=lambda: [
        example(randn(2, 3), 1),
        example(randn(3, dtype=np.float32), (0, 2)),
        example(randn(), 0),
    ],
)
linear(
    np.squeeze,
    _back_to_shape,
    patterns=[(InexactArray, Vararg[Any])],
    view=always_a_view,
    examples=lambda: [example(randn(1, 3, 1)), example(randn(2, 1, dtype=np.float32), axis=1)],
)
linear(
    np.flip,
    lambda g, x, axis=None: np.flip(g, axis),
    patterns=[(InexactArray, Vararg[Any])],
    view=always_a_view,
    examples=lambda: [
        example(randn(2, 3)),
        example(randn(2, 3, 2, dtype=np.float32), axis=(0, 2)),
    ],
)
linear(
    np.fliplr,
    lambda g, x: np.fliplr(g),
    patterns=[(InexactArray,)],
    view=always_a_view,
    examples=lambda: [example(randn(3, 4)), example(randn(2, 3, 2, dtype=np.complex128))],
)
linear(
    np.flipud,
    lambda g, x: np.flipud(g),
    patterns=[(InexactArray,)],
    view=always_a_view,
    examples=lambda: [example(randn(4)), example(randn(3, 2, dtype=np.float32))],
)


# -- reshape and ravel: a view when numpy can, else a copy ---------------------------------


def _order(x: np.ndarray, order: Any) -> str:
    """The index order a reshape/ravel read `x` in ('A' resolved against x's layout)."""
    if order is None or order == "C":
        return "C"
    if order == "A":
        return "F" if x.flags.f_contiguous and not x.flags.c_contiguous else "C"
    return str(order)


def _read_back(g: np.ndarray, x: np.ndarray, order: Any) -> np.ndarray:
    """ȳ read back into x's shape in the order a reshape/ravel of `x` read it: its adjoint."""
    order = _order(x, order)
    if order != "K":
        return g.reshape(x.shape, order=order)
    # ravel(order='K') of a strided x reads memory order; an array laid out like x
    # (empty_like keeps the stride order) ravels to a view in that same order.
    buf = np.empty_like(x)
    flat = np.ravel(buf, order="K")
    if not np.shares_memory(flat, buf):
        raise ViewMismatchError("rulekit internal error: ravel(order='K') adjoint lost its view")
    flat[...] = g.reshape(-1)
    return buf


def _reshape_adjoint(
    g: np.ndarray, a: np.ndarray, shape: Any = None, order: Any = "C", **kwargs: Any
) -> np.ndarray:
    return _read_back(g, a, order)


def _ravel_adjoint(g: np.ndarray, a: np.ndarray, order: Any = "C") -> np.ndarray:
    return _read_back(g, a, order)


def _alias_in_order(pos: int) -> Callable[..., tuple[CoDual, bool]]:
    """`view_or_new` for a reshape/ravel whose `order` is argument `pos` (after x): 'K' and
    'A' read memory order, so fdata laid out unlike x would pair other elements."""

    def alias(x: CoDual, y: Any, fn: Any, *rest: Any, **kwargs: Any) -> tuple[CoDual, bool]:
        order = kwargs.get("order", rest[pos] if len(rest) > pos else "C")
        return view_or_new(x, y, fn, *rest, memory_order=order in ("K", "A"), **kwargs)

    return alias


#: y = reshape(x, shape, order): a view or a copy; x̄ += ȳ read back in `order`
RESHAPE = linear(
    np.reshape,
    _reshape_adjoint,
    patterns=[(InexactArray, Any, Vararg[Any])],
    view=_alias_in_order(1),
    examples=lambda: [
        example(randn(2, 6), (3, 4)),  # a view
        example(randn(2, 3, dtype=np.float32), (3, 2), order="F"),
        example(randn(4, 3).T, (2, 6)),  # a copy (x non-contiguous)
        example(randn(2, 3, dtype=np.complex128), -1),
    ],
)
linear(
    np.ravel,
    _ravel_adjoint,
    patterns=[(InexactArray, Vararg[Any])],
    view=_alias_in_order(0),
    examples=lambda: [
        example(randn(2, 3)),  # a view
        example(randn(3, 4)[:, ::2]),  # a copy
        example(randn(3, 2, dtype=np.float32), "F"),
        example(randn(2, 3, 4).transpose(1, 0, 2)[:, ::-1], order="K"),
    ],
)


# -- broadcast_to: a read-only view with fdata of its own ------------------------------------

linear(
    np.broadcast_to,
    lambda g, x, shape, *args, **kwargs: unbroadcast(g, x.shape),
    patterns=[(InexactArray, Any, Vararg[Any])],
    examples=lambda: [
        example(randn(3), (2, 3)),
        example(randn(2, 1, dtype=np.float32), (4, 2, 3)),
        example(randn(), (2,)),
    ],
)


# -- copies -----------------------------------------------------------------------------------


def _identity_adjoint(g: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """x̄ += ȳ: the adjoint of a copy (or cast: `_give` takes Re ȳ for a real x)."""
    return g


#: y = np.copy(x)  ⇒  x̄ += ȳ
COPY = linear(
    np.copy,
    _identity_adjoint,
    patterns=[(InexactArray, Vararg[Any])],
    examples=lambda: [
        example(randn(2, 3)),
        example(randn(3, dtype=np.float32), "F"),
        example(randn(dtype=np.complex128)),
    ],
)

#: y = x.astype(d): x̄ += ȳ cast back to x's dtype (complex → real keeps Re, so a complex x̄
#: gets ȳ + 0j; real → complex: x̄ += Re ȳ). To an integer/bool dtype the output carries no
#: derivative; `copy=False` with x's own dtype returns x itself, with x's fdata.
ASTYPE = linear(
    np.ndarray.astype,
    _identity_adjoint,
    patterns=[(InexactArray, Any, Vararg[Any])],
    examples=lambda: [
        example(randn(2, 3), np.float32),
        example(randn(3, dtype=np.float32), "float64"),
        example(randn(2, 2), np.dtype(np.complex128)),
        example(randn(3), np.dtype(np.float64), copy=False),  # returns x itself
    ],
)
