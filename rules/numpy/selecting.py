"""Rules for selecting elements: take, take_along_axis, sort, select, diag, diagonal, trace,
triu, tril.

Each output element is one input element (or a constant), so every adjoint
sends ȳ back to where the element came from:

    y = take(x, i, axis)          ⇒  np.add.at(x̄, (:, …, i), ȳ)      (repeats add up)
    y = take_along_axis(x, i, a)  ⇒  np.add.at(x̄, along-axis index, ȳ)
    y = sort(x, axis)             ⇒  x̄[perm] += ȳ   (perm: the stable argsort)
    y = select(conds, xs, d)      ⇒  x̄ₖ += ȳ where condₖ is the first true condition
    y = diagonal(x, k)            ⇒  a (read-only) view: its fdata is the diagonal of x̄
    y = trace(x)                  ⇒  diagonal(x̄) += ȳ
    y = triu(x, k)                ⇒  x̄ += triu(ȳ, k)

Ties in `sort`: sorting is not differentiable where two values are equal; the
rule uses the stable order (equal values keep their input order), so each tied
output position passes its cotangent to the input element numpy's stable sort
puts there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import CoDual, Vararg, example, rrule
from rules._support.arraylike import Seq
from rules._support.shape import (
    INEXACT,
    add_into,
    no_pullback,
    nulls,
    seq_fdata,
    seq_rdata,
    writable,
)
from rules._support.util import NO_R, new_output, randn

__all__ = [
    "diag_rrule",
    "diagonal_rrule",
    "select_rrule",
    "sort_rrule",
    "take_along_axis_rrule",
    "take_rrule",
    "trace_rrule",
    "tri_rrule",
]


def _arg(args: tuple[CoDual, ...], kwargs: dict[str, Any], k: int, name: str, default: Any) -> Any:
    """The value of parameter `name` (positional index k among the extra arguments)."""
    if name in kwargs:
        return kwargs[name]
    return args[k].x if len(args) > k else default


def _output(x: CoDual, y: Any, n: int, adjoint: Any) -> tuple[CoDual, Any]:
    """A new output y; the pullback runs `adjoint(ȳ)` (ȳ an array, or dy for a scalar)."""
    if x.dx is None or np.asarray(y).dtype.kind not in "fc":
        return CoDual(y, None), no_pullback(n)
    out = new_output(y)
    result = nulls(n)
    is_array = type(y) is np.ndarray

    def select_pullback(dy: Any) -> tuple[Any, ...]:
        adjoint(out.dx if is_array else dy)
        return result

    return out, select_pullback


# -- take, take_along_axis ------------------------------------------------------------------


def _norm_index(i: Any, n: int, mode: str) -> Any:
    i = np.asarray(i).astype(np.intp, copy=False)  # `[]` is a float array
    if mode == "wrap":
        return np.mod(i, n)
    if mode == "clip":
        return np.clip(i, 0, n - 1)
    return i


def take_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = take(x, i, axis, mode)  ⇒  np.add.at(x̄, (:, …, i), ȳ); axis=None: x̄.flat."""
    xp = x.x
    ind = _arg(args, kwargs, 0, "indices", None)
    axis = _arg(args, kwargs, 1, "axis", None)
    mode = _arg(args, kwargs, 3, "mode", "raise")
    y = np.take(xp, *(a.x for a in args), **kwargs)

    def take_adjoint(g: Any) -> None:
        dx = x.dx
        if axis is None:
            flat = _norm_index(ind, xp.size, mode) % max(xp.size, 1)
            np.add.at(dx, np.unravel_index(flat, xp.shape), g)
            return
        ax = axis % xp.ndim
        i = _norm_index(ind, xp.shape[ax], mode)
        np.add.at(dx, (slice(None),) * ax + (i,), g)

    return _output(x, y, 2 + len(args), take_adjoint)


def _take_examples() -> list[Any]:
    return [
        example(randn(2, 3), np.array([0, 5, 5, -1])),  # flat, repeated
        example(randn(3, 4, dtype=np.float32), [[0, 2], [2, 2]], axis=1),
        example(randn(4), 2),  # a scalar
        example(randn(3, 2, dtype=np.complex128), [4, -1], 0, mode="wrap"),
    ]


rrule.register(np.take, INEXACT, Any, Vararg[Any], examples=_take_examples)(take_rrule)


def _along_axis(shape: tuple[int, ...], ind: np.ndarray, axis: int) -> tuple[Any, ...]:
    """The fancy index equivalent to take_along_axis(x, ind, axis) for x of `shape`."""
    nd = len(shape)
    return tuple(
        ind if d == axis else np.arange(shape[d]).reshape([-1 if k == d else 1 for k in range(nd)])
        for d in range(nd)
    )


def take_along_axis_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = take_along_axis(x, i, axis)  ⇒  np.add.at(x̄, along-axis index of i, ȳ)."""
    xp = x.x
    ind = np.asarray(_arg(args, kwargs, 0, "indices", None))
    axis = _arg(args, kwargs, 1, "axis", -1)
    y = np.take_along_axis(xp, *(a.x for a in args), **kwargs)

    def take_along_axis_adjoint(g: np.ndarray) -> None:
        if axis is None:
            np.add.at(x.dx, np.unravel_index(ind % max(xp.size, 1), xp.shape), g)
        else:
            np.add.at(x.dx, _along_axis(xp.shape, ind, axis % xp.ndim), g)

    return _output(x, y, 2 + len(args), take_along_axis_adjoint)


def _take_along_axis_examples() -> list[Any]:
    x = randn(3, 4)
    return [
        example(x, np.argsort(x, axis=1), axis=1),
        example(randn(3, 4, dtype=np.float32), np.array([[0, 0, 2, 1]]), 0),  # broadcast, repeats
        example(x, np.array([11, 0, 0]), axis=None),
    ]


rrule.register(np.take_along_axis, INEXACT, Any, Vararg[Any], examples=_take_along_axis_examples)(
    take_along_axis_rrule
)


# -- sort -------------------------------------------------------------------------------


def sort_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = sort(x, axis)  ⇒  x̄[perm] += ȳ with perm the stable argsort (ties: input order)."""
    xp = x.x
    axis = _arg(args, kwargs, 0, "axis", -1)
    if _arg(args, kwargs, 2, "order", None) is not None:
        raise NotImplementedError("rulekit: np.sort(order=...) is for structured arrays")
    src = xp.reshape(-1) if axis is None else xp
    ax = 0 if axis is None else axis
    perm = np.argsort(src, axis=ax, kind="stable")
    y = np.take_along_axis(src, perm, axis=ax)

    def sort_adjoint(g: np.ndarray) -> None:
        if axis is None:
            x.dx[np.unravel_index(perm, xp.shape)] += g  # perm has no repeats
        else:
            x.dx[_along_axis(xp.shape, perm, ax % xp.ndim)] += g

    return _output(x, y, 2 + len(args), sort_adjoint)


def _sort_examples() -> list[Any]:
    return [
        example(randn(5)),
        example(randn(3, 4, dtype=np.float32), axis=0),
        example(randn(2, 3), None),
        example(randn(4, dtype=np.complex128), kind="stable"),
    ]


rrule.register(np.sort, INEXACT, Vararg[Any], examples=_sort_examples)(sort_rrule)


# -- select ---------------------------------------------------------------------------------


def select_rrule(
    f: CoDual, conds: CoDual, choices: CoDual, *args: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = select(conds, xs, default)  ⇒  x̄ₖ += ȳ where condₖ is the first true condition,
    default̄ += ȳ where none is."""
    xs, _ = seq_fdata(choices)
    kw = dict(kwargs)
    dflt = args[0] if args else kw.pop("default", None)
    if dflt is not None and not isinstance(dflt, CoDual):
        dflt = CoDual(dflt, None)
    extra = () if dflt is None else (dflt.x,)
    y = np.select(conds.x, xs, *extra, *(a.x for a in args[1:]), **kw)
    n = 3 + len(args)
    active = choices.dx is not None or (dflt is not None and dflt.dx is not None)
    if not active or y.dtype.kind not in "fc":
        return CoDual(y, None), no_pullback(n)
    out = new_output(y)

    def select_pullback(dy: Any) -> tuple[Any, ...]:
        g = out.dx
        taken = np.zeros(g.shape, dtype=bool)
        grads = []
        for c in conds.x:
            first = np.broadcast_to(c, g.shape) & ~taken
            taken |= first
            grads.append(np.where(first, g, 0))
        result = [NO_R, NO_R, seq_rdata(choices, grads), *nulls(len(args))]
        if dflt is not None and dflt.dx is not None:
            rd = seq_rdata(CoDual([dflt.x], [dflt.dx]), [np.where(taken, 0, g)])
            if args:
                result[3] = rd[0] if isinstance(rd, tuple) else rd
        return tuple(result)

    return out, select_pullback


def _select_examples() -> list[Any]:
    x = randn(2, 3)
    a, b = randn(2, 3, seed=1), randn(3, seed=2)
    return [
        example([x > 0, x < 0.5], [a, b]),  # overlapping conditions, broadcast choice
        example([x > 0], [a.astype(np.float32)], 2.5),
        example([x > 1, x > -1], [a, 1.5], randn(2, 3, seed=3)),  # a scalar choice, array default
    ]


rrule.register(np.select, Seq, Seq, Vararg[Any], examples=_select_examples)(select_rrule)


# -- diagonals and triangles ------------------------------------------------------------


def diagonal_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = diagonal(x): a read-only view of x; its fdata is the same diagonal of x̄, made
    writable so that later pullbacks can accumulate into it (its elements never overlap)."""
    a = [c.x for c in args]
    y = np.diagonal(x.x, *a, **kwargs)
    dx = x.dx
    return CoDual(y, None if dx is None else writable(np.diagonal(dx, *a, **kwargs))), no_pullback(
        2 + len(args)
    )


def _diagonal_examples() -> list[Any]:
    return [
        example(randn(3, 3)),
        example(randn(3, 4, dtype=np.float32), 1),
        example(randn(2, 3, 4, dtype=np.complex128), offset=-1, axis1=1, axis2=2),
    ]


rrule.register(np.diagonal, INEXACT, Vararg[Any], examples=_diagonal_examples)(diagonal_rrule)


def diag_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = diag(v, k): 1-d v ⇒ a new matrix, v̄ += diagonal(ȳ, k); 2-d ⇒ its diagonal (a
    read-only view, fdata the same diagonal of x̄ as in `diagonal_rrule`)."""
    a = [c.x for c in args]
    y = np.diag(x.x, *a, **kwargs)
    n = 2 + len(args)
    if x.x.ndim == 2:
        dx = x.dx
        return CoDual(y, None if dx is None else writable(np.diag(dx, *a, **kwargs))), (
            no_pullback(n)
        )
    k = _arg(args, kwargs, 0, "k", 0)

    def diag_adjoint(g: np.ndarray) -> None:
        add_into(x.dx, np.diagonal(g, k))

    return _output(x, y, n, diag_adjoint)


def _diag_examples() -> list[Any]:
    return [
        example(randn(3)),
        example(randn(2, dtype=np.float32), -1),
        example(randn(3, 4)),  # a view of the diagonal
        example(randn(3, 3, dtype=np.complex128), k=1),
    ]


rrule.register(np.diag, INEXACT, Vararg[Any], examples=_diag_examples)(diag_rrule)


def trace_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = trace(x, offset, axis1, axis2)  ⇒  diagonal(x̄, offset, axis1, axis2) += ȳ."""
    off = _arg(args, kwargs, 0, "offset", 0)
    ax1 = _arg(args, kwargs, 1, "axis1", 0)
    ax2 = _arg(args, kwargs, 2, "axis2", 1)
    y = np.trace(x.x, *(a.x for a in args), **kwargs)

    def trace_adjoint(g: Any) -> None:
        d = writable(np.diagonal(x.dx, off, ax1, ax2))
        add_into(d, np.asarray(g)[..., None])

    return _output(x, y, 2 + len(args), trace_adjoint)


def _trace_examples() -> list[Any]:
    return [
        example(randn(3, 3)),
        example(randn(3, 4, dtype=np.float32), 1),
        example(randn(2, 3, 3, dtype=np.complex128), axis1=1, axis2=2),
        example(randn(2, 2, dtype=np.float32), dtype=np.dtype(np.float64)),
    ]


rrule.register(np.trace, INEXACT, Vararg[Any], examples=_trace_examples)(trace_rrule)


def tri_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = triu(x, k) (tril)  ⇒  x̄ += triu(ȳ, k) (tril), summed over broadcast rows for 1-d x."""
    fn = f.x
    k = _arg(args, kwargs, 0, "k", 0)
    y = fn(x.x, *(a.x for a in args), **kwargs)

    def tri_adjoint(g: np.ndarray) -> None:
        add_into(x.dx, fn(g, k))

    return _output(x, y, 2 + len(args), tri_adjoint)


def _triu_examples() -> list[Any]:
    return [
        example(randn(3, 3)),
        example(randn(3, 4, dtype=np.float32), 1),
        example(randn(2, 3, 3, dtype=np.complex128), k=-1),
        example(randn(3)),  # 1-d: a matrix with v as every row
    ]


for _fn in (np.triu, np.tril):
    rrule.register(_fn, INEXACT, Vararg[Any], examples=_triu_examples)(tri_rrule)
