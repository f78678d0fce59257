"""Forward rules and differentiable pullbacks for indexing, and the forward rules of the
functions that write into an array.

`x[idx]` is linear in x: ẏ = ẋ[idx] (a view of ẋ for a basic index, as y is of x), and its
pullback scatters ȳ back, x̄ = scatter_add(ȳ, x.shape, idx). The scatter is the primitive
`scatter_add(g, shape, idx)` = zeros(shape) with `np.add.at(·, idx, g)` (repeated indices
add up), registered here with its own three rules: it is linear too, its tangent is the
scatter of ġ and its pullback the gather ȳ[idx]. So `getitem` (basic, integer-array and
boolean indices) is differentiable to any order; `np.take` and `np.take_along_axis` get
their pullbacks from the same scatter.

Writes (`x[idx] = v`, `np.put`, `np.place`, `np.putmask`, `np.fill_diagonal`, `np.add.at`,
`np.subtract.at`) get forward rules only: they write the primal into x and the tangent into
ẋ the same way (a constant value writes zeros; `add.at` of a constant adds nothing). A
tangent written into an array without one raises TracingError. They have no vjp rules:
the nested reverse engine handles writes itself.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

import rulekit
from rulekit import CoDual, Dual, TracingError, example
from rulekit._registry import forward_registry, registry
from rules._support.examples import randn
from rules._support.forward import register_like
from rules._support.patterns import InexactArray
from rules._support.shape import BASIC, BOOL, index_kind
from rules.numpy.selecting import _along_axis, _norm_index
from rules.numpy.ufuncs.forward import inexact, to_arg

__all__ = ["scatter_add"]


# -- scatter_add: the adjoint of x[idx] -----------------------------------------------------------


def _scatter_add(g: Any, shape: tuple[int, ...], idx: Any) -> np.ndarray:
    """zeros(shape) with g added at idx (repeats add up; g broadcast to the indexed shape)."""
    dt = getattr(g, "dtype", None)
    z = np.zeros(shape, dt if dt is not None else np.dtype(type(g)))
    kind = index_kind(idx)
    if kind == BASIC:
        z[idx] += g
    elif kind == BOOL:
        z[idx] = g
    else:
        np.add.at(z, idx, g)
    return z


scatter_add = rulekit.primitive(_scatter_add)

_G: Any = Union[InexactArray, float, complex, np.floating, np.complexfloating]


def _scatter_examples() -> list[Any]:
    mask = np.array([True, False, True])
    return [
        example(randn(2, 2), (3, 4), (slice(1, 3), slice(None, None, 2))),
        example(randn(3, 4, seed=1), (5, 4), ([0, 2, 2], slice(None))),
        example(np.float32(1.5), (4,), 2),
        example(randn(2, 2, dtype=np.complex128), (3, 4), (mask, slice(1, 3))),
    ]


@rulekit.rrule.register(scatter_add, _G, tuple, Any, examples=_scatter_examples)
def scatter_add_rrule(f: CoDual, g: CoDual, shape: CoDual, idx: CoDual) -> tuple[CoDual, Any]:
    """y = scatter_add(g, shape, idx) ⇒ ḡ += ȳ[idx] (the gather, with repeats)."""
    y = _scatter_add(g.x, shape.x, idx.x)
    out = CoDual(y, np.zeros_like(y))

    def scatter_add_pullback(dy: Any) -> tuple[Any, ...]:
        return (rulekit.NoRData(), rulekit.accumulate(g, out.dx[idx.x]), rulekit.NoRData(),
                rulekit.NoRData())  # fmt: skip

    return out, scatter_add_pullback


def scatter_add_frule(f: Dual, g: Dual, shape: Dual, idx: Dual) -> Dual:
    """ẏ = scatter_add(ġ, shape, idx)."""
    y = scatter_add(g.x, shape.x, idx.x)
    return Dual(y, None if g.dx is None else scatter_add(g.dx, shape.x, idx.x))


def scatter_add_vjp(active: Sequence[bool], g: Any, shape: Any, idx: Any) -> tuple[Any, Any]:
    """ḡ = ȳ[idx] (reduced to g's shape)."""
    y = scatter_add(g, shape, idx)
    return y, lambda yb: (None if yb is None or not active[0] else to_arg(yb[idx], g), None, None)


register_like(scatter_add, frule=scatter_add_frule, vjp=scatter_add_vjp)


# -- x[idx] -------------------------------------------------------------------------------------


def getitem_frule(f: Dual, x: Dual, idx: Dual) -> Dual:
    """ẏ = ẋ[idx] (for a basic index a view of ẋ, as y is of x)."""
    y = x.x[idx.x]
    return Dual(y, None if x.dx is None else x.dx[idx.x])


def getitem_vjp(active: Sequence[bool], x: Any, idx: Any) -> tuple[Any, Any]:
    """x̄ = scatter_add(ȳ, x.shape, idx)."""
    y = x[idx]

    def pullback(g: Any) -> tuple[Any, Any]:
        if g is None or not active[0]:
            return (None, None)
        return (to_arg(scatter_add(g, np.shape(x), idx), x), None)

    return y, pullback


register_like(operator.getitem, frule=getitem_frule, vjp=getitem_vjp)


# -- np.take, np.take_along_axis: pullbacks by the same scatter ---------------------------------


def _take_index(shape: tuple[int, ...], indices: Any, axis: Any, mode: str) -> Any:
    if axis is None:
        size = int(np.prod(shape))
        return np.unravel_index(_norm_index(indices, size, mode) % max(size, 1), shape)
    ax = axis % len(shape)
    return (slice(None),) * ax + (_norm_index(indices, shape[ax], mode),)


def take_vjp(
    active: Sequence[bool], a: Any, indices: Any, *rest: Any, **kw: Any
) -> tuple[Any, Any]:
    """y = take(x, i, axis, mode) ⇒ x̄ = scatter_add(ȳ, x.shape, (:, …, i))."""
    y = np.take(a, indices, *rest, **kw)
    names = ("axis", "out", "mode")
    p = {**dict(zip(names, rest, strict=False)), **kw}
    index = _take_index(np.shape(a), indices, p.get("axis"), p.get("mode") or "raise")

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None or not active[0]:
            return (None,) * (2 + len(rest))
        return (to_arg(scatter_add(g, np.shape(a), index), a), *(None,) * (1 + len(rest)))

    return y, pullback


def take_along_axis_vjp(
    active: Sequence[bool], arr: Any, indices: Any, *rest: Any, **kw: Any
) -> tuple[Any, Any]:
    """y = take_along_axis(x, i, axis) ⇒ x̄ = scatter_add(ȳ, x.shape, along-axis index of i)."""
    y = np.take_along_axis(arr, indices, *rest, **kw)
    axis = rest[0] if rest else kw.get("axis", -1)
    shape = np.shape(arr)
    ind = np.asarray(indices)
    if axis is None:
        index: Any = np.unravel_index(ind % max(int(np.prod(shape)), 1), shape)
    else:
        index = _along_axis(shape, ind, axis % len(shape))

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None or not active[0]:
            return (None,) * (2 + len(rest))
        return (to_arg(scatter_add(g, shape, index), arr), *(None,) * (1 + len(rest)))

    return y, pullback


register_like(np.take, vjp=take_vjp)
register_like(np.take_along_axis, vjp=take_along_axis_vjp)


# -- writes: forward rules only -----------------------------------------------------------------


def _lost(what: str) -> TracingError:
    return TracingError(
        f"{what} writes a value with a tangent into an array without one (a constant). Fix: "
        "make the destination carry a tangent (e.g. `buf = np.zeros_like(x)` or "
        "`buf = x.copy()` from a differentiated x) and write into that; written into a "
        "constant the value's derivative would be lost."
    )


def _value_tangent(v: Dual, dest: Any) -> Any:
    """The tangent to write for value `v` into tangent array `dest` (zeros for a constant;
    the real part for a real destination)."""
    if v.dx is None:  # (zeros of the destination's dtype: v may be a list or a number)
        return np.zeros(np.shape(v.x), dest.dtype)
    if np.iscomplexobj(v.dx) and not np.iscomplexobj(dest):
        return np.real(v.dx)
    return v.dx


def _writer(what: str, write: Any, adds: bool = False, value: int | None = None) -> Any:
    """The forward rule of `write(x, *args)`, which writes value args[value] (default: the
    last argument) into x: it writes the primal into x.x and, the same way, the value's
    tangent into x.dx. The arguments after the value (np.put's `mode`) are options."""

    def rule(f: Dual, x: Dual, *args: Dual, **kw: Any) -> Dual:
        k = len(args) - 1 if value is None else value
        v = args[k]
        before = [a.x for a in args[:k]]
        after = [a.x for a in args[k + 1 :]]
        if x.dx is None and v.dx is not None and inexact(v.x):
            raise _lost(what)
        write(x.x, *before, v.x, *after, **kw)
        if x.dx is not None and not (adds and v.dx is None):
            write(x.dx, *before, _value_tangent(v, x.dx), *after, **kw)
        return Dual(None, None)

    rule.__name__ = rule.__qualname__ = f"{what}_frule"
    rule.__doc__ = f"{what}: ẋ written as x is (the value's tangent, zeros for a constant)."
    return rule


register_like(operator.setitem, frule=_writer("x[idx] = v", operator.setitem))
register_like(np.put, frule=_writer("np.put", np.put, value=1))  # put(a, ind, v, mode)
register_like(np.place, frule=_writer("np.place", np.place))
register_like(np.putmask, frule=_writer("np.putmask", np.putmask))


def _register_method_like(f: Any, frule: Any) -> None:
    """`register_like` for a bound method (`np.add.at`: a new object at each access, so
    matched by equality, not identity)."""
    seen = set()
    for r in registry.entries():
        if r.f == f and r.out is None and r.patterns not in seen:
            seen.add(r.patterns)
            forward_registry.add("frule", f, r.patterns, frule, examples=r.examples,
                                 module=__name__)  # fmt: skip


_register_method_like(np.add.at, _writer("np.add.at", np.add.at, adds=True))
_register_method_like(np.subtract.at, _writer("np.subtract.at", np.subtract.at, adds=True))


def fill_diagonal_frule(f: Dual, a: Dual, val: Dual, *rest: Dual, **kw: Any) -> Dual:
    """np.fill_diagonal(a, val, wrap): ȧ's diagonal gets val's tangent (zeros if constant)."""
    wrap = [r.x for r in rest]
    if a.dx is None and val.dx is not None and inexact(val.x):
        raise _lost("np.fill_diagonal")
    np.fill_diagonal(a.x, val.x, *wrap, **kw)
    if a.dx is not None:
        np.fill_diagonal(a.dx, _value_tangent(val, a.dx), *wrap, **kw)
    return Dual(None, None)


register_like(np.fill_diagonal, frule=fill_diagonal_frule)
