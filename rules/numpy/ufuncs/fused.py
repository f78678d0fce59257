"""Allocation-free stateful rules for the hot elementwise ufuncs on real float arrays.

The engine's steady state for `np.log1p(0.25 * (A @ B - 18) ** 2)`: every op's
output and its fdata come from the rule's pool (`push`, `push_zeros`), the
pullback is one fused pass (`rules.numpy.ufuncs._kernels`) that accumulates into the
input fdata and clears the output's fdata, which then returns to the pool
clean — so no array is allocated, no fdata is zero-filled, and no temporary is
made. The adjoints are those of the plain rules in `rules.numpy.ufuncs.unary` /
`rules.numpy.ufuncs.binary` (written next to each kernel loop); these registrations
are more specific (float32/float64 arrays with Python-number or same-dtype
scalar operands), so everything else — complex, integers, numpy-scalar inputs,
keyword arguments — still dispatches to the plain rules.

Layouts: the pooled output and its fdata are laid out as numpy lays out the
result (F-ordered for an F-ordered operand, else C-ordered), and the kernels run
on their flat memory-order views (`rules._support.layout.flat_view`, never a copy).
Operands (and fdata) laid out like the output go straight to the kernels; other
layouts go through scratch copies laid out like the output (`like_scratch`),
broadcasting through numpy on scratch buffers; all allocation-free once warm.
A pullback must leave the output's fdata all zero before the pair goes back to
the pool: no path writes it through a reshape that might be a copy (issue #11).
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

import rulekit
from rulekit import Array, CoDual, NoRData, StatefulRRule
from rulekit._stateful import free_list
from rules._support.layout import flat_view, fortran, like_scratch
from rules._support.util import NO_F, NO_R, add_unbroadcast, broadcast_shape, filled_0d
from rules.numpy.ufuncs import binary as _binary  # noqa: F401  (the plain rules, looked up below)
from rules.numpy.ufuncs import unary as _unary  # noqa: F401
from rules.numpy.ufuncs._bcast_kernels import col_pullback, row_pullback
from rules.numpy.ufuncs._kernels import (
    BINARY,
    SCALAR,
    UNARY,
    binary_pullback,
    scalar_pullback,
    unary_pullback,
)

__all__ = ["FusedBinary", "FusedUnary"]

_nd = np.ndarray
_REAL = (np.dtype(np.float64), np.dtype(np.float32))
#: float32/float64 arrays: the operands these rules are registered for
RealArray = Union[Array[np.float64], Array[np.float32]]
#: a Python number (numpy keeps the array's dtype) or a float64 scalar
Number = Union[float, int]


class _Pair:
    """A pooled output and its fdata (zero whenever it is in the pool), with flat views."""

    __slots__ = ("flat_g", "flat_in", "flat_y", "g", "plan", "y")

    def __init__(self, like: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> None:
        # numpy's layout: F order for an F-ordered (not C-ordered) operand, else C order
        order: Any = "F" if like is not None and fortran(like) else "C"
        self.y = np.empty(shape, dtype, order=order)
        self.g = np.zeros(shape, dtype, order=order)
        self.flat_y, self.flat_g = flat_view(self.y), flat_view(self.g)
        # the broadcast kernel's arguments for the last operands (see `FusedBinary._arrays`)
        self.plan: tuple[Any, ...] | None = None
        self.flat_in: tuple[Any, ...] = ()  # (see `flat_views`)

    def flat_views(self, x: Any, dx: Any) -> tuple[Any, Any] | None:
        """Flat views of input x and its fdata dx (None: a dummy), or None when one is not
        laid out like the output. Cached for the very same objects (the cache holds them,
        so the same objects have the same memory layout)."""
        c = self.flat_in
        if len(c) == 3 and c[0] is x and c[1] is dx:
            return c[2]
        s = self.y.strides
        views = None
        if x.strides == s and (dx is None or dx.strides == s):
            views = (flat_view(x), self.flat_y if dx is None else flat_view(dx))
        self.flat_in = (x, dx, views)
        return views

    def flat_views2(self, a: Any, b: Any, da: Any, db: Any) -> tuple[Any, ...] | None:
        """`flat_views` for two same-shape inputs and their fdata."""
        c = self.flat_in
        if len(c) == 5 and c[0] is a and c[1] is b and c[2] is da and c[3] is db:
            return c[4]
        views = None
        va, vb = self.flat_views(a, da), self.flat_views(b, db)
        if va is not None and vb is not None:
            views = (va[0], vb[0], va[1], vb[1])
        self.flat_in = (a, b, da, db, views)
        return views


class _Pooled(StatefulRRule):
    """Outputs and fdata from a per-shape pool of pairs, owned by each call's pullback.

    Lighter than the base class's stack: a pair is taken in the forward pass, held by
    the pullback's closure and put back, its fdata zero, by the pullback. Interleaved
    calls hold different pairs; a forward pass whose pullback never runs just never
    returns its pair (nothing leaks: the closure owns it); a second call of the same
    pullback raises.
    """

    def __init__(self) -> None:
        super().__init__()
        self._pairs: dict[Any, list[_Pair]] = {}
        self._zerod: dict[str, np.ndarray] = {}  # (`filled_0d`: scalar operands)

    def _take(self, like: Any, shape: tuple[int, ...], dtype: np.dtype) -> tuple[_Pair, Any]:  # type: ignore[override]
        key = (shape, like.strides if like is not None else None, dtype.char)
        free = free_list(self._pairs, key)  # (bounded; a pair put back on a dropped list is freed)
        pair = free.pop() if free else _Pair(like, shape, dtype)
        return pair, free

    def _like(self, name: str, pair: _Pair) -> np.ndarray:
        """A scratch buffer laid out like the pair's output: flat views pair elements."""
        return like_scratch(self.scratch, name, pair.y)

    def _accumulate(self, dx: np.ndarray, contrib: Any) -> None:
        """dx += contrib (contrib in output shape), reduced over broadcast axes, no alloc."""
        add_unbroadcast(self, "reduce", dx, contrib)


def _twice() -> RuntimeError:
    return RuntimeError("a fused ufunc rule's pullback was called twice")


class FusedUnary(_Pooled):
    """`y = uf(x)` for a float32/float64 array x; x̄ += f'(x)·ȳ in one fused pass."""

    def __init__(self, uf: np.ufunc, fallback: Any) -> None:
        super().__init__()
        self.uf, self.op, self.fallback = uf, UNARY[uf.__name__], fallback

    def __call__(self, f: CoDual, x: CoDual, **kw: Any) -> tuple[CoDual, Any]:
        X = x.x
        if kw:
            dt = np.dtype(kw["dtype"]) if set(kw) == {"dtype"} else None
            if dt is None or dt not in _REAL or X.ndim == 0:
                return self.fallback(f, x, **kw)  # (other keywords: the plain rule)
            if dt != X.dtype:
                return self._cast(x, dt)
        if X.ndim == 0:
            return self._scalar(x)
        pair, free = self._take(X, X.shape, X.dtype)
        y = pair.y
        self.uf(X, out=y)
        state = [pair]

        def fused_unary_pullback(dy: Any) -> tuple[Any, Any]:
            if not state:
                raise _twice()
            dx = x.dx
            if dx is None:
                unary_pullback(self.op, pair.flat_y, pair.flat_y, pair.flat_g, pair.flat_g, False)
            elif (views := pair.flat_views(X, dx)) is not None:  # one layout: flat views line up
                unary_pullback(self.op, views[0], pair.flat_y, pair.flat_g, views[1], True)
            else:  # x or x̄ laid out unlike y: through scratch copies laid out like y
                xs, d = self._like("x", pair), self._like("dx", pair)
                np.copyto(xs, X)
                d.fill(0)
                unary_pullback(self.op, flat_view(xs), pair.flat_y, pair.flat_g, flat_view(d), True)
                np.add(dx, d, out=dx)
            state.clear()
            free.append(pair)
            return NO_R, NO_R

        return CoDual(y, pair.g), fused_unary_pullback

    def _cast(self, x: CoDual, dt: np.dtype) -> tuple[CoDual, Any]:
        """`uf(x, dtype=dt)`: x cast to dt first (as numpy does), its cotangent cast back.

        The cast x and its cotangent live in a pooled pair of their own until the pullback.
        """
        X = x.x
        xc, free_x = self._take(X, X.shape, dt)
        np.copyto(xc.y, X, casting="unsafe")
        inner = CoDual(xc.y, None if x.dx is None else xc.g)
        y, pb = self(CoDual(self.uf, NO_F), inner)

        def fused_cast_pullback(dy: Any) -> tuple[Any, Any]:
            pb(dy)
            if x.dx is not None:
                np.add(x.dx, xc.g, out=x.dx, casting="unsafe")
                xc.g.fill(0)
            free_x.append(xc)
            return NO_R, NO_R

        return y, fused_cast_pullback

    def _scalar(self, x: CoDual) -> tuple[CoDual, Any]:
        """A 0-d array in gives a numpy scalar out, as numpy does; its cotangent is `dy`."""
        X1 = x.x.reshape(1)  # (a reshape of a 0-d array, x̄'s below too, is always a view)
        pair, free = self._take(None, (1,), x.x.dtype)
        self.uf(X1, out=pair.y)

        def fused_scalar_pullback(dy: Any) -> tuple[Any, Any]:
            if x.dx is not None and not isinstance(dy, NoRData):
                pair.g.fill(dy)
                unary_pullback(self.op, X1, pair.y, pair.g, x.dx.reshape(1), True)
            free.append(pair)
            return NO_R, NO_R

        return CoDual(pair.y[0], NO_F), fused_scalar_pullback


class FusedBinary(_Pooled):
    """`y = uf(a, b)` for float32/float64 arrays and Python-number (or same-dtype) scalars."""

    def __init__(self, uf: np.ufunc, fallback: Any) -> None:
        super().__init__()
        self.uf, self.fallback = uf, fallback
        name = uf.__name__
        self._shapes: dict[tuple[Any, Any], tuple[int, ...]] = {}
        self.op_scalar = SCALAR.get(name)
        self.op_rscalar = SCALAR.get("r" + name, SCALAR.get(name))  # c ∘ x
        if name == "power":
            self.op_rscalar = None  # cᵡ: the plain rule
        self.op_array = BINARY.get(name)

    def __call__(self, f: CoDual, a: CoDual, b: CoDual, **kw: Any) -> tuple[CoDual, Any]:
        A, B = a.x, b.x
        if not kw:
            if type(A) is _nd and A.dtype in _REAL and A.ndim:
                if type(B) is _nd:
                    if B.dtype == A.dtype and B.ndim and self.op_array is not None:
                        return self._arrays(a, b)
                elif self.op_scalar is not None and _weak(B, A.dtype):
                    return self._with_scalar(a, b, self.op_scalar, True)
            elif (
                type(B) is _nd and B.dtype in _REAL and B.ndim and _weak(A, B.dtype)
                and self.op_rscalar is not None
            ):  # fmt: skip
                return self._with_scalar(b, a, self.op_rscalar, False)
        return self.fallback(f, a, b, **kw)

    def _with_scalar(self, x: CoDual, c: CoDual, op: int, x_first: bool) -> tuple[CoDual, Any]:
        X, C = x.x, c.x
        pair, free = self._take(X, X.shape, X.dtype)
        y = pair.y
        if op == _POWER and C == 2:
            np.square(X, out=y)  # numpy's own fast path for x**2 (the same values)
        else:
            c0 = filled_0d(self._zerod, C, X.dtype)
            if x_first:
                self.uf(X, c0, out=y)
            else:
                self.uf(c0, X, out=y)
        state = [pair]

        def fused_scalar_pullback(dy: Any) -> tuple[Any, ...]:
            if not state:
                raise _twice()
            dx = x.dx
            want_c = c.dx is not None
            views = pair.flat_views(X, dx)
            if views is not None:  # one layout: flat views line up
                dc = scalar_pullback(
                    op,
                    views[0],
                    float(C),
                    pair.flat_y,
                    pair.flat_g,
                    views[1],
                    dx is not None,
                    want_c,
                )
            else:  # x or x̄ laid out unlike y: through scratch copies laid out like y
                xs, d = self._like("x", pair), self._like("dx", pair)
                np.copyto(xs, X)
                d.fill(0)
                dc = scalar_pullback(
                    op,
                    flat_view(xs),
                    float(C),
                    pair.flat_y,
                    pair.flat_g,
                    flat_view(d),
                    dx is not None,
                    want_c,
                )
                if dx is not None:
                    np.add(dx, d, out=dx)
            state.clear()
            free.append(pair)
            rc = type(C)(dc) if want_c and isinstance(C, (float, np.floating)) else NO_R
            return (NO_R, NO_R, rc) if x_first else (NO_R, rc, NO_R)

        return CoDual(y, pair.g), fused_scalar_pullback

    def _arrays(self, a: CoDual, b: CoDual) -> tuple[CoDual, Any]:
        A, B = a.x, b.x
        sa, sb = A.shape, B.shape
        if sa == sb:
            pair, free = self._take(A, sa, A.dtype)
        else:
            shape = self._shapes.get((sa, sb))
            if shape is None:
                if len(self._shapes) > 64:
                    self._shapes.clear()
                shape = self._shapes[sa, sb] = broadcast_shape(sa, sb)
            like = A if sa == shape else B if sb == shape else None
            pair, free = self._take(like, shape, A.dtype)
        y, g = pair.y, pair.g
        self.uf(A, B, out=y)
        op = self.op_array
        state = [pair]
        if sa != sb:
            # The plan holds views of these very operands, so while it is cached they stay
            # alive: the same objects with the same shapes have the same memory layout.
            # (Their fdata may be new arrays on every call: their views are made per call.)
            p = pair.plan
            if not (p is not None and p[0] is A and p[1] is B and p[2] == sa and p[3] == sb):
                p = pair.plan = (A, B, sa, sb, _bcast_plan(A, B, y, g))
            plan = p[4]
            if plan is not None:
                fd = _bcast_fdata(plan, a.dx, b.dx)
                if fd is not None:
                    return CoDual(y, g), self._bcast_pullback(plan, fd, op, pair, free, state)

        def fused_binary_pullback(dy: Any) -> tuple[Any, Any, Any]:
            if not state:
                raise _twice()
            da, db = a.dx, b.dx
            views = pair.flat_views2(A, B, da, db) if A.shape == B.shape else None
            if views is not None:  # one layout: flat views line up
                fa, fb, fda, fdb = views
                binary_pullback(
                    op, fa, fb, pair.flat_y, pair.flat_g, fda, fdb, da is not None, db is not None
                )
            else:
                self._broadcast_pullback(A, B, y, g, da, db)
                g.fill(0)
            state.clear()
            free.append(pair)
            return NO_R, NO_R, NO_R

        return CoDual(y, g), fused_binary_pullback

    def _bcast_pullback(
        self,
        plan: tuple[Any, ...],
        fd: tuple[Any, Any, bool, bool],
        op: Any,
        pair: _Pair,
        free: list[_Pair],
        state: list[Any],
    ) -> Any:
        """The pullback through a row/column kernel (`rules.numpy.ufuncs._bcast_kernels`)."""
        kernel, sf, F, S, Y, G = plan[:6]
        dF, dS, want_f, want_s = fd

        def fused_bcast_pullback(dy: Any) -> tuple[Any, Any, Any]:
            if not state:
                raise _twice()
            kernel(op, sf, F, S, Y, G, dF, dS, want_f, want_s)
            state.clear()
            free.append(pair)
            return NO_R, NO_R, NO_R

        return fused_bcast_pullback

    def _broadcast_pullback(self, A: Any, B: Any, y: Any, g: Any, da: Any, db: Any) -> None:
        """The same adjoints through numpy and scratch buffers (broadcasting, odd layouts)."""
        name = self.uf.__name__
        t = self.scratch("t", y.shape, y.dtype)
        if da is not None:
            if name in ("add", "subtract"):
                self._accumulate(da, g)
            elif name == "multiply":  # ā += b·ȳ
                self._accumulate(da, np.multiply(g, B, out=t))
            else:  # divide: ā += ȳ/b
                self._accumulate(da, np.divide(g, B, out=t))
        if db is not None:
            if name == "add":
                self._accumulate(db, g)
            elif name == "subtract":  # b̄ += −ȳ
                self._accumulate(db, np.negative(g, out=t))
            elif name == "multiply":  # b̄ += a·ȳ
                self._accumulate(db, np.multiply(g, A, out=t))
            else:  # divide: b̄ += −ȳ·y/b
                np.divide(g, B, out=t)
                np.multiply(t, y, out=t)
                self._accumulate(db, np.negative(t, out=t))


_POWER = SCALAR["power"]


def _bcast_plan(A: Any, B: Any, y: Any, g: Any) -> tuple[Any, ...] | None:
    """The operands' side of a row/column broadcast kernel call, or None when the call is
    not of that kind: `(kernel, sf, F, S, Y, G, rows, dummy)`.

    One operand F has the output's shape; the other, S, is a row (shape (…, 1, n), the
    output read as rows of n) or a column (shape (m, 1) against a 2-D (m, n) output).
    Everything C-contiguous, so every reshape here is a view (the kernel clears G through
    its view; `_bcast_fdata` checks the fdata likewise). (`dummy`, writable and never
    written, stands in for an inactive S's fdata; Y for an inactive F's.)
    """
    if A.shape == y.shape:
        F, S, sf = A, B, False
    elif B.shape == y.shape:
        F, S, sf = B, A, True
    else:
        return None
    if not (y.size and y.flags.c_contiguous and F.flags.c_contiguous and S.flags.c_contiguous):
        return None
    n = y.shape[-1]
    if S.ndim and S.shape[-1] == n and S.size == n:
        kernel, rows = row_pullback, (-1, n)
    elif y.ndim == 2 and S.shape == (y.shape[0], 1):
        kernel, rows = col_pullback, y.shape
    else:
        return None
    Y2 = y.reshape(rows)
    return kernel, sf, F.reshape(rows), S.reshape(-1), Y2, g.reshape(rows), rows, Y2.reshape(-1)


def _bcast_fdata(plan: tuple[Any, ...], da: Any, db: Any) -> tuple[Any, Any, bool, bool] | None:
    """`(F̄, S̄, want F̄, want S̄)` for the kernel (the plan's dummies for inactive operands),
    or None when an fdata is not laid out like its C-contiguous primal."""
    dF, dS = (db, da) if plan[1] else (da, db)
    dt = plan[4].dtype
    if dF is not None and not (dF.flags.c_contiguous and dF.dtype == dt):
        return None
    if dS is not None and not (dS.flags.c_contiguous and dS.dtype == dt):
        return None
    return (
        plan[4] if dF is None else dF.reshape(plan[6]),
        plan[7] if dS is None else dS.reshape(-1),
        dF is not None,
        dS is not None,
    )


def _weak(c: Any, dtype: np.dtype) -> bool:
    """A scalar numpy combines with a `dtype` array without changing the dtype."""
    t = type(c)
    return t is float or t is int or (isinstance(c, np.floating) and c.dtype == dtype)


# -- registration: more specific than the plain rules, which remain the fallback ----------------


def _plain_rule(uf: np.ufunc, *keys: Any) -> Any:
    """The plain rule (`rules.numpy.ufuncs.unary`, `.binary`) for these argument types."""
    from rulekit._registry import Signature, registry

    return registry.lookup(Signature(uf, keys)).impl


def _examples_unary(domain: str) -> Any:
    from rules.numpy.ufuncs._common import DOMAINS

    def examples() -> list[rulekit.Example]:
        r = np.random.default_rng(len(domain))
        d = DOMAINS[domain]
        return [
            rulekit.example(d(r, (3, 4))),
            rulekit.example(np.asfortranarray(d(r, (4, 3))).astype(np.float32, order="F")),
            rulekit.example(d(r, (4, 6))[:, ::2]),  # a strided view
            rulekit.example(np.array(d(r, ()))),  # 0-d: numpy returns a scalar
        ]

    return examples


def _examples_binary(name: str, dt: Any) -> Any:
    def examples() -> list[rulekit.Example]:
        r = np.random.default_rng(len(name))
        pos = lambda *s: np.asarray(r.uniform(0.5, 2.0, size=s), dt)  # noqa: E731  (divisors)
        normal = lambda *s: np.asarray(r.normal(size=s), dt)  # noqa: E731
        return [
            rulekit.example(normal(3, 4), pos(3, 4)),
            rulekit.example(normal(2, 3), pos(3)),
            rulekit.example(normal(3, 1), pos(1, 4)),
            rulekit.example(np.asfortranarray(normal(3, 2)), pos(3, 2)),
        ]

    return examples


def _examples_scalar(name: str, first: bool, ints: bool = False) -> Any:
    def examples() -> list[rulekit.Example]:
        r = np.random.default_rng(len(name) + first)
        x = r.uniform(0.5, 2.0, size=(3, 4))  # positive: bases of powers, divisors
        if ints:
            calls: list[tuple[Any, Any]] = [(x, 3), (x.astype(np.float32)[::2], -2), (x, 2)]
        else:
            c = 2.0 if name == "power" else 1.7  # (x**2.0: numpy's x² fast path)
            calls = [
                (x, c),
                (x.astype(np.float32), 2.5),
                (np.asfortranarray(x), -0.5),
                (x[:, ::2], np.float64(0.8)),
            ]
        return [rulekit.example(*(c if first else c[::-1])) for c in calls]

    return examples


_UNARY_DOMAINS = {
    "negative": "any",
    "square": "any",
    "sqrt": "pos",
    "exp": "any",
    "expm1": "any",
    "log": "pos",
    "log1p": "pos",
    "log2": "pos",
    "log10": "pos",
    "sin": "any",
    "cos": "any",
    "tan": "unit",
    "tanh": "any",
    "sinh": "any",
    "cosh": "any",
    "arctan": "any",
    "reciprocal": "nonzero",
    "absolute": "nonzero",
}


def _register() -> None:
    f64 = (np.float64, 2)
    for name, domain in _UNARY_DOMAINS.items():
        uf = getattr(np, name)
        plain = _plain_rule(uf, f64)
        rulekit.build_primitive_rrule.register(uf, RealArray, examples=_examples_unary(domain))(
            lambda sig, uf=uf, plain=plain: FusedUnary(uf, plain)
        )
    for name in ("add", "subtract", "multiply", "divide", "power"):
        uf = getattr(np, name)
        plain = _plain_rule(uf, f64, f64)

        def build(sig: Any, uf: np.ufunc = uf, plain: Any = plain) -> FusedBinary:
            return FusedBinary(uf, plain)

        reg = rulekit.build_primitive_rrule.register
        if name != "power":  # (aᵇ for two arrays, and cᵡ, stay with the plain rule)
            for dt in (np.float64, np.float32):  # (mixed precisions: the plain rule)
                reg(uf, Array[dt], Array[dt], examples=_examples_binary(name, dt))(build)
            reg(uf, float, RealArray, examples=_examples_scalar(name, False))(build)
            reg(uf, int, RealArray, examples=_examples_scalar(name, False, ints=True))(build)
        reg(uf, RealArray, float, examples=_examples_scalar(name, True))(build)
        reg(uf, RealArray, int, examples=_examples_scalar(name, True, ints=True))(build)


_register()
