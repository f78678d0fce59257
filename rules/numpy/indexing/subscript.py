"""Rules for indexing: `x[idx]` (operator.getitem), `x[idx] = v` (operator.setitem) and the
scatter `np.add.at(x, idx, v)` / `np.subtract.at`.

Index expressions (ints, slices, Ellipsis, None, integer and boolean arrays,
lists, tuples of them) are constants. Three kinds, told apart by
`rules._support.shape.index_kind`:

* basic (ints, slices, Ellipsis, None): `x[idx]` is a view of x, so its fdata is
  the same view of x̄ and the getitem pullback does nothing (a full integer
  index gives a scalar: `x̄[idx] += ȳ`);
* boolean arrays: a copy, each element of x read at most once: `x̄[idx] += ȳ`;
* integer arrays (lists): a copy, elements may repeat: `np.add.at(x̄, idx, ȳ)`.

`x[idx] = v` is a mutation (the mutation convention, docs/concepts.md). The old `x[idx]`
does not survive:

    v̄ += unbroadcast(x̄[idx]),   then  x̄[idx] ← 0  and  x[idx] ← old

With repeated integer indices numpy keeps one of the writes to each element;
only that write's element of v gets the cotangent (which one numpy kept is
found by replaying the same index on an int probe array). `np.add.at(x, idx, v)`
adds every write: `v̄ += x̄[idx]` (gathered with repeats), x̄ unchanged, and
x[idx] ← old (saved values, not x − v: subtraction would not be exact).

`np.fill_diagonal`, `np.put`, `np.place` and `np.putmask` (the same overwrite convention)
are in `rules.numpy.indexing.writes`, imported at the end of this module.
"""

from __future__ import annotations

import operator
from typing import Any, Union

import numpy as np

from rulekit import (
    CoDual,
    NoFData,
    StatefulRRule,
    TracingError,
    build_primitive_rrule,
    example,
    rrule,
)
from rules._support.cotangents import (
    ADD_REDUCE,
    NO_F,
    NO_R,
    add_to_fdata,
    add_to_fdata_pooled,
    no_pullback,
    no_rdata,
    scalar_rdata,
)
from rules._support.examples import randn
from rules._support.layout import zeros_like_exact
from rules._support.patterns import InexactArray
from rules._support.shape import BASIC, BOOL, INT, index_kind, view_index

__all__ = [
    "SetitemRule",
    "SetitemTupleRule",
    "getitem_rrule",
    "scatter_at_rrule",
    "setitem_advanced_rrule",
]

_NULL3 = no_rdata(3)
_no_pb3 = no_pullback(3)
_REAL = (float, int, np.floating, np.integer)
_COMPLEX = (complex, np.complexfloating)
_EXACT: dict[type, Any] = {np.float16: float, np.float32: float, np.complex64: complex}


def _same(v: Any) -> Any:
    return v


_NULL4 = no_rdata(4)


# -- x[idx] ---------------------------------------------------------------------------------


def getitem_rrule(f: CoDual, x: CoDual, idx: CoDual) -> tuple[CoDual, Any]:
    """y = x[idx]: basic ⇒ a view (ȳ is a view of x̄); scalar ⇒ x̄[idx] += ȳ;
    boolean ⇒ x̄[idx] += ȳ; integer arrays ⇒ np.add.at(x̄, idx, ȳ) (repeats accumulate)."""
    i = idx.x
    y = x.x[i]
    dx = x.dx
    if dx is None:
        return CoDual(y, None), _no_pb3
    kind = index_kind(i)
    if type(y) is not np.ndarray:  # a scalar: its cotangent arrives as dy

        def scalar_getitem_pullback(dy: Any) -> tuple[Any, ...]:
            if kind == INT:
                np.add.at(dx, i, dy)
            else:
                dx[i] += dy
            return _NULL3

        return CoDual(y, NO_F), scalar_getitem_pullback
    if kind == BASIC:
        return CoDual(y, dx[i]), _no_pb3
    out = CoDual(y, zeros_like_exact(y))

    def getitem_pullback(dy: Any) -> tuple[Any, ...]:
        if kind == BOOL:
            dx[i] += out.dx
        else:
            np.add.at(dx, i, out.dx)
        return _NULL3

    return out, getitem_pullback


def _getitem_examples() -> list[Any]:
    x = randn(3, 4)
    return [
        example(x, (slice(1, None), slice(None, None, 2))),  # basic: a view
        example(randn(4, dtype=np.float32), 2),  # a scalar
        example(x, ([0, 2, 2], slice(None))),  # integer arrays, repeated rows
        example(randn(3, 4, dtype=np.complex128), (np.array([True, False, True]), slice(1, 3))),
    ]


rrule.register(operator.getitem, InexactArray, Any, examples=_getitem_examples)(getitem_rrule)


# -- x[idx] = v -----------------------------------------------------------------------------


def _lost_write(what: str) -> TracingError:
    return TracingError(
        f"{what} writes a traced value into an untraced array. Fix: make the destination "
        "traced (e.g. `buf = np.zeros_like(x)` or `buf = x.copy()` from a traced x) and write "
        "into that. Written into a plain array, the value would leave the trace and its "
        "gradient would be lost."
    )


def _value_rdata(v: CoDual, g: Any) -> Any:
    """Pass the cotangent `g` (the indexed shape) to the value v (array or scalar)."""
    vdx = v.dx
    if vdx is None:
        return NO_R
    if isinstance(vdx, np.ndarray):
        add_to_fdata(vdx, g)
        return NO_R
    if isinstance(vdx, NoFData):
        return scalar_rdata(v.x, g)
    raise NotImplementedError(
        f"x[idx] = v with v a {type(v.x).__name__} holding traced values has no rule. Fix: "
        "assign np.stack([...]) of the traced values (or np.asarray of constants) instead."
    )


def _winners(xp: np.ndarray, i: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """For an integer-array assignment `x[i] = ...` of result shape `shape`: a mask of the
    writes numpy kept (None if no target repeats). Replays the index on an int probe."""
    n = int(np.prod(shape))
    if n < 2:
        return None
    probe = np.empty(xp.shape, dtype=np.intp)
    order = np.arange(n, dtype=np.intp).reshape(shape)
    probe[i] = order
    kept = probe[i] == order
    return None if kept.all() else kept


def setitem_advanced_rrule(f: CoDual, x: CoDual, idx: CoDual, v: CoDual) -> tuple[CoDual, Any]:
    """`x[idx] = v` with integer or boolean arrays in idx (a plain rule: numpy's gather of
    the overwritten values allocates anyway). With repeated targets only the write numpy
    kept gets the cotangent."""
    i, xp, dx = idx.x, x.x, x.dx
    old = xp[i]  # advanced indexing: a copy (or a scalar)
    if dx is None and v.dx is not None and np.size(old):
        raise _lost_write("x[idx] = v")
    xp[i] = v.x
    kept = None
    if v.dx is not None and type(old) is np.ndarray and index_kind(i) == INT:
        kept = _winners(xp, i, old.shape)

    def setitem_pullback(dy: Any) -> tuple[Any, ...]:
        rv = NO_R
        if dx is not None:
            g = dx[i]  # a copy: zeroing x̄[idx] below does not change it
            dx[i] = 0
            if kept is not None:
                g = np.where(kept, g, 0)  # only the write numpy kept survives
            rv = _value_rdata(v, g)
        xp[i] = old
        return (NO_R, NO_R, NO_R, rv)

    return CoDual(None, NO_F), setitem_pullback


class SetitemRule(StatefulRRule):
    """`x[idx] = v` with a basic index:  v̄ += unbroadcast(x̄[idx]),  x̄[idx] ← 0,
    x[idx] ← old. The overwritten values go into a pooled buffer, reductions into
    scratch buffers: once warm, forward + pullback allocate nothing."""

    def __call__(self, f: CoDual, x: CoDual, idx: CoDual, v: CoDual) -> tuple[CoDual, Any]:
        i = idx.x
        if index_kind(i) != BASIC:  # x[True] = v: a bool matches the int pattern
            return setitem_advanced_rrule(f, x, idx, v)
        xp, dx, vp = x.x, x.dx, v.x
        target = xp[i]
        if type(target) is not np.ndarray:  # a single element: use a 0-d view of it
            i = view_index(i)
            target = xp[i]
        if dx is None and v.dx is not None and target.size:
            raise _lost_write("x[idx] = v")
        token = self.save(target)
        try:
            if isinstance(vp, _REAL) or (isinstance(vp, _COMPLEX) and xp.dtype.kind == "c"):
                # `target[...] = scalar` (and fill with a float32 scalar) would allocate a
                # 0-d array; a Python number holds the same value exactly
                target.fill(_EXACT.get(type(vp), _same)(vp))
            else:
                target[...] = vp
        except Exception:
            self.restore(token)
            raise

        def setitem_pullback(dy: Any) -> tuple[Any, ...]:
            rv = NO_R
            if dx is not None:
                g = dx[i]
                vdx = v.dx
                if isinstance(vdx, np.ndarray) and np.may_share_memory(vdx, dx):
                    # v aliases x (x[1:] = x[:-1]): read x̄[idx] before zeroing it
                    buf = self.scratch("g", g.shape, g.dtype)
                    np.copyto(buf, g)
                    g.fill(0)
                    rv = self._value_rdata(v, buf)
                else:
                    rv = self._value_rdata(v, g)
                    g.fill(0)
            self.restore(token, into=xp[i])
            return (NO_R, NO_R, NO_R, rv)

        return CoDual(None, NO_F), setitem_pullback

    def _value_rdata(self, v: CoDual, g: np.ndarray) -> Any:
        """`_value_rdata` without allocating: sums go into scratch buffers."""
        vdx = v.dx
        if vdx is None:
            return NO_R
        if isinstance(vdx, np.ndarray):
            if g.dtype.kind == "c" and vdx.dtype.kind != "c":
                g = g.real
            shape = vdx.shape
            if len(shape) > g.ndim:  # (x[i] = v drops v's leading unit axes)
                g = g.reshape((1,) * (len(shape) - g.ndim) + g.shape)
            add_to_fdata_pooled(self, "sum", vdx, g)
            return NO_R
        x = v.x
        if not isinstance(vdx, NoFData) or not isinstance(x, (*_REAL, *_COMPLEX)):
            return _value_rdata(v, g)
        if isinstance(x, (bool, int, np.integer)):
            return NO_R
        total = self.scratch("total", (), g.dtype)
        ADD_REDUCE(g, None, None, total)  # np.sum(g, out=total), without its Python layers
        if total.dtype.kind == "c" and not isinstance(x, _COMPLEX):
            total = total.real
        t = type(x)
        if t is float or t is complex:
            return t(total[()])
        # np.float32(value) allocates a 0-d array; indexing a 0-d buffer does not
        out = self.scratch("rdata", (), np.dtype(t))
        np.copyto(out, total, casting="unsafe")
        return out[()]


class SetitemTupleRule:
    """`x[idx] = v` with a tuple index: basic tuples go to a `SetitemRule` (allocation-free
    once warm), tuples holding arrays to `setitem_advanced_rrule`. (A plain callable, not
    a StatefulRRule: its advanced calls allocate, as numpy's own indexing does.)"""

    def __init__(self) -> None:
        self.basic = SetitemRule()

    def __call__(self, f: CoDual, x: CoDual, idx: CoDual, v: CoDual) -> tuple[CoDual, Any]:
        if index_kind(idx.x) == BASIC:
            return self.basic(f, x, idx, v)
        return setitem_advanced_rrule(f, x, idx, v)

    def reset(self) -> None:
        self.basic.reset()


def _setitem_basic_examples() -> list[Any]:
    return [
        example(randn(3, 4), slice(1, 3), randn(2, 4, seed=1)),  # rows, an array
        example(randn(4, dtype=np.float32), 1, np.float32(2.5)),  # one element, a scalar
        example(randn(3, 4, dtype=np.complex128), slice(None), randn(4, seed=3)),  # a real row
        example(randn(2, 3), Ellipsis, 1.5),  # everything, a Python float
    ]


def _setitem_tuple_examples() -> list[Any]:
    x = randn(3, 4)
    return [
        example(x, (slice(None), slice(1, 3)), randn(3, 2, seed=1)),  # basic
        example(randn(2, 3), (Ellipsis, None, 0), randn(1, 1, seed=4)),  # broadcast v
        example(x, ([0, 2, 0], 1), randn(3, seed=2)),  # integer arrays, a repeated target
        example(x, (x[:, 0] > 0, slice(None, 2)), 2.0),  # a boolean mask and a slice
    ]


def _setitem_advanced_examples() -> list[Any]:
    x = randn(3, 4)
    return [
        example(x, x > 0.2, 1.5),  # a boolean mask, a Python float
        example(
            randn(5, dtype=np.float32), np.array([4, 0, 4]), randn(3, seed=1, dtype=np.float32)
        ),
        example(x, [2, 0], randn(4, seed=2)),  # a list: rows, v broadcast
    ]


_Basic: Any = Union[int, np.integer, slice, type(Ellipsis), type(None)]

build_primitive_rrule.register(
    operator.setitem, InexactArray, _Basic, Any, examples=_setitem_basic_examples
)(lambda sig: SetitemRule())
build_primitive_rrule.register(
    operator.setitem, InexactArray, tuple, Any, examples=_setitem_tuple_examples
)(lambda sig: SetitemTupleRule())
rrule.register(operator.setitem, InexactArray, Any, Any, examples=_setitem_advanced_examples)(
    setitem_advanced_rrule
)


def _setitem_bool_examples() -> list[Any]:
    return [example(randn(3), True, randn(1, 3, seed=1)), example(randn(2, 2), False, 1.5)]


# `x[True] = v` adds an axis (advanced indexing); a bool would otherwise match `int`.
rrule.register(operator.setitem, InexactArray, bool, Any, examples=_setitem_bool_examples)(
    setitem_advanced_rrule
)


# -- np.add.at, np.subtract.at --------------------------------------------------------------


def scatter_at_rrule(f: CoDual, x: CoDual, idx: CoDual, v: CoDual) -> tuple[CoDual, Any]:
    """np.add.at(x, idx, v): x̄ unchanged, v̄ += x̄[idx] (gathered with repeats), x ← old.
    np.subtract.at: v̄ −= x̄[idx]."""
    fn, i, xp, dx = f.x, idx.x, x.x, x.dx
    if dx is None and v.dx is not None:
        raise _lost_write("np.add.at(x, idx, v)")
    old = np.array(xp[i], copy=True)
    fn(xp, i, v.x)
    sign = -1 if fn == np.subtract.at else 1

    def scatter_at_pullback(dy: Any) -> tuple[Any, ...]:
        rv = NO_R
        if v.dx is not None and dx is not None:
            g = dx[i]
            rv = _value_rdata(v, -g if sign < 0 else g)
        xp[i] = old
        return (NO_R, NO_R, NO_R, rv)

    return CoDual(None, NO_F), scatter_at_pullback


def _add_at_examples() -> list[Any]:
    return [
        example(randn(5), np.array([0, 1, 1, 4]), randn(4, seed=1)),  # repeated index
        example(randn(3, 2, dtype=np.float32), ([0, 0], slice(None)), np.float32(0.5)),
        example(randn(2, 3), (slice(None), [2, 2]), randn(2, 1, seed=2)),  # a broadcast v
    ]


def _subtract_at_examples() -> list[Any]:
    return [example(randn(4), [1, 1, 3], randn(3, seed=1))]


for _fn, _ex in ((np.add.at, _add_at_examples), (np.subtract.at, _subtract_at_examples)):
    rrule.register(_fn, InexactArray, Any, Any, examples=_ex)(scatter_at_rrule)
