"""Rules for selecting elements: take, take_along_axis, sort, select, diag, diagonal, trace,
triu, tril.

Each output element is one input element (or a constant), so every adjoint
sends ȳ back to where the element came from. All but `sort` and `select` are
declared once as linear functions (`rulekit.linear`: the reverse and forward rules
follow); `sort` is linear only for its data-dependent permutation and `select`
takes a traced `default=` by keyword, so both stay hand-written:

    y = take(x, i, axis)          ⇒  np.add.at(x̄, (:, …, i), ȳ)     (repeats add up)
    y = take_along_axis(x, i, a)  ⇒  np.add.at(x̄, along-axis index, ȳ)
    y = sort(x, axis)             ⇒  x̄[perm] += ȳ   (perm: the stable argsort)
    y = select(conds, xs, d)      ⇒  x̄ₖ += ȳ where condₖ is the first true condition
    y = diagonal(x, k)            ⇒  diagonal(x̄, k) += ȳ; a (read-only) view: its fdata is
                                     the diagonal of x̄ (made writable)
    y = diag(v, k)                ⇒  v̄ += diagonal(ȳ, k) (1-d v); 2-d: as diagonal
    y = trace(x)                  ⇒  diagonal(x̄) += ȳ
    y = triu(x, k)                ⇒  x̄ += triu(ȳ, k)  (1-d x: summed over the rows)

Ties in `sort`: sorting is not differentiable where two values are equal; the
rule uses the stable order (equal values keep their input order), so each tied
output position passes its cotangent to the input element numpy's stable sort
puts there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import CoDual, Vararg, example, linear, rrule
from rules._support.arguments import sequence_fdata
from rules._support.cotangents import NO_R, accumulate_sequence, no_pullback, no_rdata, unbroadcast
from rules._support.examples import randn
from rules._support.forward import register_like
from rules._support.outputs import new_output
from rules._support.patterns import InexactArray, Seq
from rules._support.shape import view_or_new, writable

__all__ = ["select_rrule", "sort_rrule"]


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
    result = no_rdata(n)
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


def _take_adjoint(
    dx: np.ndarray,
    g: Any,
    a: np.ndarray,
    indices: Any,
    axis: Any = None,
    out: Any = None,
    mode: str = "raise",
) -> None:
    """y = take(x, i, axis, mode)  ⇒  np.add.at(x̄, (:, …, i), ȳ); axis=None: x̄.flat."""
    if axis is None:
        flat = _norm_index(indices, a.size, mode) % max(a.size, 1)
        np.add.at(dx, np.unravel_index(flat, a.shape), g)
    else:
        ax = axis % a.ndim
        np.add.at(dx, (slice(None),) * ax + (_norm_index(indices, a.shape[ax], mode),), g)


linear(
    np.take,
    _take_adjoint,
    patterns=[(InexactArray, Any, Vararg[Any])],
    in_place=True,  # (x̄ gets ȳ at the taken elements only: no x-sized temporary)
    examples=lambda: [
        example(randn(2, 3), np.array([0, 5, 5, -1])),  # flat, repeated
        example(randn(3, 4, dtype=np.float32), [[0, 2], [2, 2]], axis=1),
        example(randn(4), 2),  # a scalar
        example(randn(3, 2, dtype=np.complex128), [4, -1], 0, mode="wrap"),
    ],
)


def _along_axis(shape: tuple[int, ...], ind: np.ndarray, axis: int) -> tuple[Any, ...]:
    """The fancy index equivalent to take_along_axis(x, ind, axis) for x of `shape`."""
    nd = len(shape)
    return tuple(
        ind if d == axis else np.arange(shape[d]).reshape([-1 if k == d else 1 for k in range(nd)])
        for d in range(nd)
    )


def _take_along_axis_adjoint(
    dx: np.ndarray, g: np.ndarray, arr: np.ndarray, indices: Any, axis: Any = -1
) -> None:
    """y = take_along_axis(x, i, axis)  ⇒  np.add.at(x̄, along-axis index of i, ȳ)."""
    ind = np.asarray(indices)
    if axis is None:
        np.add.at(dx, np.unravel_index(ind % max(arr.size, 1), arr.shape), g)
    else:
        np.add.at(dx, _along_axis(arr.shape, ind, axis % arr.ndim), g)


linear(
    np.take_along_axis,
    _take_along_axis_adjoint,
    patterns=[(InexactArray, Any, Vararg[Any])],
    in_place=True,
    examples=lambda: [
        example(randn(3, 4), np.argsort(randn(3, 4), axis=1), axis=1),
        example(randn(3, 4, dtype=np.float32), np.array([[0, 0, 2, 1]]), 0),  # broadcast, repeats
        example(randn(3, 4), np.array([11, 0, 0]), axis=None),
    ],
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


rrule.register(np.sort, InexactArray, Vararg[Any], examples=_sort_examples)(sort_rrule)


# -- select ---------------------------------------------------------------------------------


def select_rrule(
    f: CoDual, conds: CoDual, choices: CoDual, *args: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = select(conds, xs, default)  ⇒  x̄ₖ += ȳ where condₖ is the first true condition,
    default̄ += ȳ where none is."""
    xs, _ = sequence_fdata(choices)
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
        result = [NO_R, NO_R, accumulate_sequence(choices, grads), *no_rdata(len(args))]
        if dflt is not None and dflt.dx is not None:
            rd = accumulate_sequence(CoDual([dflt.x], [dflt.dx]), [np.where(taken, 0, g)])
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


def _writable_view(x: CoDual, y: Any, fn: Any, *rest: Any, **kwargs: Any) -> tuple[CoDual, bool]:
    """`view_or_new` for numpy's read-only diagonal views: the fdata view is made writable so
    that later pullbacks can accumulate into it (a diagonal's elements never overlap)."""
    return view_or_new(x, y, lambda d, *a, **k: writable(fn(d, *a, **k)), *rest, **kwargs)


def _dtype(v: Any) -> np.dtype:
    return v.dtype if hasattr(v, "dtype") else np.result_type(v)  # (a traced value's too)


def _diagonal_adjoint(g: Any, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """y = diagonal(x, k, a₁, a₂)  ⇒  x̄ = ȳ on that diagonal, 0 elsewhere (ȳ broadcast:
    trace). Built functionally, so that the pullback is differentiable again: ȳ padded
    along the diagonal's rows (k ≥ 0: x̄[i, i+k] = ȳᵢ) or columns (k < 0: x̄[j−k, j] = ȳⱼ),
    spread over them and kept on the diagonal's mask by np.where."""
    shape = np.shape(a)
    a1, a2 = axis1 % len(shape), axis2 % len(shape)
    n1, n2 = shape[a1], shape[a2]
    rest = tuple(n for d, n in enumerate(shape) if d not in (a1, a2))
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    dt = np.result_type(_dtype(a), _dtype(g))
    G = g * np.ones((*rest, length), dt)
    m = n1 if offset >= 0 else n2
    if m > length:
        G = np.concatenate([G, np.zeros((*rest, m - length), dt)], axis=-1)
    G = G[..., :, None] if offset >= 0 else G[..., None, :]
    z = np.where(np.eye(n1, n2, offset, dtype=bool), G, np.zeros((), dt))
    return np.moveaxis(z, (-2, -1), (a1, a2))


linear(
    np.diagonal,
    _diagonal_adjoint,
    patterns=[(InexactArray, Vararg[Any])],
    view=_writable_view,
    examples=lambda: [
        example(randn(3, 3)),
        example(randn(3, 4, dtype=np.float32), 1),
        example(randn(2, 3, 4, dtype=np.complex128), offset=-1, axis1=1, axis2=2),
    ],
)

linear(
    np.diag,
    lambda g, v, k=0: np.diagonal(g, k) if v.ndim == 1 else _diagonal_adjoint(g, v, k),
    patterns=[(InexactArray, Vararg[Any])],
    view=_writable_view,  # (of a 2-d v: its diagonal; of a 1-d v: a new matrix)
    examples=lambda: [
        example(randn(3)),
        example(randn(2, dtype=np.float32), -1),
        example(randn(3, 4)),  # a view of the diagonal
        example(randn(3, 3, dtype=np.complex128), k=1),
    ],
)


def _trace_adjoint(
    dx: np.ndarray,
    g: Any,
    a: np.ndarray,
    offset: int = 0,
    axis1: int = 0,
    axis2: int = 1,
    dtype: Any = None,
    out: Any = None,
) -> None:
    """y = trace(x, offset, a₁, a₂)  ⇒  diagonal(x̄, offset, a₁, a₂) += ȳ."""
    d = writable(np.diagonal(dx, offset, axis1, axis2))
    d += np.asarray(g)[..., None]


linear(
    np.trace,
    _trace_adjoint,
    patterns=[(InexactArray, Vararg[Any])],
    in_place=True,  # (only the diagonal of x̄ changes: no x-sized temporary)
    examples=lambda: [
        example(randn(3, 3)),
        example(randn(3, 4, dtype=np.float32), 1),
        example(randn(2, 3, 3, dtype=np.complex128), axis1=1, axis2=2),
        example(randn(2, 2, dtype=np.float32), dtype=np.dtype(np.float64)),
    ],
)


_TRACE_ARGS = ("offset", "axis1", "axis2", "dtype", "out")


def trace_vjp(active: Sequence[bool], a: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """y = trace(x, offset, a₁, a₂) ⇒ x̄ = ȳ on that diagonal: the differentiable pullback
    (`_diagonal_adjoint`, functional; the reverse rule adds into x̄ in place instead)."""
    o = {**dict(zip(_TRACE_ARGS, rest, strict=False)), **kw}
    y = np.trace(a, *rest, **kw)

    def pullback(g: Any) -> tuple[Any, ...]:
        none = (None,) * len(rest)
        if g is None or not active[0]:
            return (None, *none)
        k, a1, a2 = o.get("offset", 0), o.get("axis1", 0), o.get("axis2", 1)
        ga = _diagonal_adjoint(np.expand_dims(g, -1) if np.ndim(g) else g, a, k, a1, a2)
        if _dtype(ga).kind == "c" and _dtype(a).kind != "c":
            ga = np.real(ga)
        return (ga if _dtype(ga) == _dtype(a) else np.astype(ga, _dtype(a)), *none)

    return y, pullback


register_like(np.trace, vjp=trace_vjp)


def _triu_examples() -> list[Any]:
    return [
        example(randn(3, 3)),
        example(randn(3, 4, dtype=np.float32), 1),
        example(randn(2, 3, 3, dtype=np.complex128), k=-1),
        example(randn(3)),  # 1-d: a matrix with v as every row
    ]


# y = triu(x, k) (tril)  ⇒  x̄ += triu(ȳ, k) (tril), summed over the broadcast rows of a 1-d x
linear(
    np.triu,
    lambda g, m, k=0: unbroadcast(np.triu(g, k), m.shape),
    patterns=[(InexactArray, Vararg[Any])],
    examples=_triu_examples,
)
linear(
    np.tril,
    lambda g, m, k=0: unbroadcast(np.tril(g, k), m.shape),
    patterns=[(InexactArray, Vararg[Any])],
    examples=_triu_examples,
)
