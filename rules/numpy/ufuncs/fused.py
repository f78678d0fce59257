"""Allocation-free stateful rules for the hot elementwise ufuncs on real float arrays.

The engine's steady state for `np.log1p(0.25 * (A @ B - 18) ** 2)`: every op's
output and its fdata come from the rule's pool (`push`, `push_zeros`), the
pullback is one fused pass that accumulates into the input fdata and clears the
output's fdata, which then returns to the pool clean — so no array is allocated, no
fdata is zero-filled, and no temporary is made. The passes are numba kernels generated
from each ufunc's declaration (`rules.numpy.ufuncs._kernels.kernels_of`): the adjoints
are those of the plain rules of `rules.numpy.ufuncs.unary` / `.binary`, from the same
declared partials, not a copy of them. These registrations
are more specific (float32/float64 arrays with Python-number or same-dtype
scalar operands), so everything else — complex, integers, numpy-scalar inputs,
keyword arguments — still dispatches to the plain rules.

Layouts: the pooled output and its fdata are laid out as numpy lays out the
result (F-ordered for an F-ordered operand, else C-ordered), and the kernels run
on their flat memory-order views (`rules._support.layout.flat_view`, never a copy).
Operands (and fdata) laid out like the output go straight to the kernels; other
layouts and broadcasts go through scratch copies laid out like the output
(`like_scratch`), their cotangents reduced over broadcast axes into scratch buffers;
all allocation-free once warm.
A pullback must leave the output's fdata all zero before the pair goes back to
the pool: no path writes it through a reshape that might be a copy (issue #11).
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

import rulekit
from rulekit import Array, CoDual, NoRData
from rules._support.cotangents import NO_F, NO_R, broadcast_shape
from rules._support.layout import filled_0d, flat_view
from rules.numpy.ufuncs import binary as _binary  # noqa: F401  (the plain rules, looked up below)
from rules.numpy.ufuncs import unary as _unary  # noqa: F401
from rules.numpy.ufuncs._common import DECLARATIONS
from rules.numpy.ufuncs._kernels import kernels_of
from rules.numpy.ufuncs._pool import Pair, Pooled, bcast_fdata, bcast_plan, twice

__all__ = ["FusedBinary", "FusedUnary"]

_nd = np.ndarray
_REAL = (np.dtype(np.float64), np.dtype(np.float32))
#: float32/float64 arrays: the operands these rules are registered for
RealArray = Union[Array[np.float64], Array[np.float32]]
#: a Python number (numpy keeps the array's dtype) or a float64 scalar
Number = Union[float, int]


class FusedUnary(Pooled):
    """`y = uf(x)` for a float32/float64 array x; x̄ += f'(x)·ȳ in one fused pass."""

    def __init__(self, uf: np.ufunc, fallback: Any) -> None:
        super().__init__()
        self.uf, self.fallback = uf, fallback
        self.kernels = kernels_of(DECLARATIONS[uf])

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
        pair, free = self._take((X,), X.shape, X.dtype)
        y = pair.y
        self.uf(X, out=y)
        state = [pair]

        def fused_unary_pullback(dy: Any) -> tuple[Any, Any]:
            if not state:
                raise twice()
            dx = x.dx
            unary = self.kernels.unary
            if dx is None:
                unary(pair.flat_y, pair.flat_y, pair.flat_g, pair.flat_g, False)
            elif (views := pair.flat_views(X, dx)) is not None:  # one layout: flat views line up
                unary(views[0], pair.flat_y, pair.flat_g, views[1], True)
            else:  # x or x̄ laid out unlike y: through scratch copies laid out like y
                xs, d = self._like("x", pair), self._like("dx", pair)
                np.copyto(xs, X)
                d.fill(0)
                unary(flat_view(xs), pair.flat_y, pair.flat_g, flat_view(d), True)
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
        xc, free_x = self._take((X,), X.shape, dt)
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
        pair, free = self._take((), (1,), x.x.dtype)
        self.uf(X1, out=pair.y)

        def fused_scalar_pullback(dy: Any) -> tuple[Any, Any]:
            if x.dx is not None and not isinstance(dy, NoRData):
                pair.g.fill(dy)
                self.kernels.unary(X1, pair.y, pair.g, x.dx.reshape(1), True)
            free.append(pair)
            return NO_R, NO_R

        return CoDual(pair.y[0], NO_F), fused_scalar_pullback


class FusedBinary(Pooled):
    """`y = uf(a, b)` for float32/float64 arrays and Python-number (or same-dtype) scalars."""

    def __init__(self, uf: np.ufunc, fallback: Any) -> None:
        super().__init__()
        self.uf, self.fallback = uf, fallback
        self._shapes: dict[tuple[Any, Any], tuple[int, ...]] = {}
        self.kernels = kernels_of(DECLARATIONS[uf])
        self.arrays = uf is not np.power  # (aᵇ and cᵡ for arrays a, b, x: the plain rule)

    def __call__(self, f: CoDual, a: CoDual, b: CoDual, **kw: Any) -> tuple[CoDual, Any]:
        A, B = a.x, b.x
        if not kw:
            if type(A) is _nd and A.dtype in _REAL and A.ndim:
                if type(B) is _nd:
                    if B.dtype == A.dtype and B.ndim and self.arrays:
                        return self._arrays(a, b)
                elif _weak(B, A.dtype):
                    return self._with_scalar(a, b, True)
            elif (
                type(B) is _nd and B.dtype in _REAL and B.ndim and _weak(A, B.dtype) and self.arrays
            ):
                return self._with_scalar(b, a, False)
        return self.fallback(f, a, b, **kw)

    def _with_scalar(self, x: CoDual, c: CoDual, x_first: bool) -> tuple[CoDual, Any]:
        """y = x ∘ c (`x_first`) or c ∘ x for an array x and a scalar c."""
        X, C = x.x, c.x
        pair, free = self._take((X,), X.shape, X.dtype)
        y = pair.y
        kernel = self.kernels.scalar_right if x_first else self.kernels.scalar_left
        if x_first and self.uf is np.power and C == 2:
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
                raise twice()
            dx = x.dx
            want_c = c.dx is not None
            want_x = dx is not None
            views = pair.flat_views(X, dx)
            cf = float(C)
            if views is not None:  # one layout: flat views line up
                xv, dv = views
            else:  # x or x̄ laid out unlike y: through scratch copies laid out like y
                xs, d = self._like("x", pair), self._like("dx", pair)
                np.copyto(xs, X)
                d.fill(0)
                xv, dv = flat_view(xs), flat_view(d)
            if x_first:
                dc = kernel(xv, cf, pair.flat_y, pair.flat_g, dv, want_x, want_c)
            else:
                dc = kernel(cf, xv, pair.flat_y, pair.flat_g, dv, want_x, want_c)
            if views is None and want_x:
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
            pair, free = self._take((A, B), sa, A.dtype)
        else:
            shape = self._shapes.get((sa, sb))
            if shape is None:
                if len(self._shapes) > 64:
                    self._shapes.clear()
                shape = self._shapes[sa, sb] = broadcast_shape(sa, sb)
            pair, free = self._take((A, B), shape, A.dtype)
        y, g = pair.y, pair.g
        self.uf(A, B, out=y)
        state = [pair]
        if sa != sb:
            # The plan holds views of these very operands, so while it is cached they stay
            # alive: the same objects with the same shapes have the same memory layout.
            # (Their fdata may be new arrays on every call: their views are made per call.)
            p = pair.plan
            if not (p is not None and p[0] is A and p[1] is B and p[2] == sa and p[3] == sb):
                p = pair.plan = (A, B, sa, sb, bcast_plan(A, B, y, g))
            plan = p[4]
            if plan is not None:
                fd = bcast_fdata(plan, a.dx, b.dx)
                if fd is not None:
                    return CoDual(y, g), self._bcast_pullback(plan, fd, pair, free, state)

        def fused_binary_pullback(dy: Any) -> tuple[Any, Any, Any]:
            if not state:
                raise twice()
            da, db = a.dx, b.dx
            views = pair.flat_views2(A, B, da, db) if A.shape == B.shape else None
            if views is not None:  # one layout: flat views line up
                fa, fb, fda, fdb = views
                self.kernels.binary(
                    fa, fb, pair.flat_y, pair.flat_g, fda, fdb, da is not None, db is not None
                )
            else:
                self._broadcast_pullback(A, B, pair, da, db)
            state.clear()
            free.append(pair)
            return NO_R, NO_R, NO_R

        return CoDual(y, g), fused_binary_pullback

    def _bcast_pullback(
        self,
        plan: tuple[Any, ...],
        fd: tuple[Any, Any, bool, bool],
        pair: Pair,
        free: list[Pair],
        state: list[Any],
    ) -> Any:
        """The pullback through the declaration's row or column kernel (`_bcast_plan`)."""
        kind, sf, F, S, Y, G = plan[:6]
        kernel = getattr(self.kernels, kind)
        dF, dS, want_f, want_s = fd

        def fused_bcast_pullback(dy: Any) -> tuple[Any, Any, Any]:
            if not state:
                raise twice()
            kernel(sf, F, S, Y, G, dF, dS, want_f, want_s)
            state.clear()
            free.append(pair)
            return NO_R, NO_R, NO_R

        return fused_bcast_pullback

    def _broadcast_pullback(self, A: Any, B: Any, pair: Pair, da: Any, db: Any) -> None:
        """Broadcasts and odd layouts: the operands copied (broadcast) into scratch buffers
        laid out like y, the same-shape kernel on their flat views, its cotangents (in
        scratch) reduced over the broadcast axes into ā, b̄. Clears ȳ."""
        a_s, b_s = self._like("a", pair), self._like("b", pair)
        np.copyto(a_s, A)
        np.copyto(b_s, B)
        fy = pair.flat_y  # (a dummy for an inactive operand's cotangent: never written)
        d_a = self._like("da", pair) if da is not None else None
        d_b = self._like("db", pair) if db is not None else None
        for d in (d_a, d_b):
            if d is not None:
                d.fill(0)
        self.kernels.binary(
            flat_view(a_s), flat_view(b_s), fy, pair.flat_g,
            fy if d_a is None else flat_view(d_a), fy if d_b is None else flat_view(d_b),
            d_a is not None, d_b is not None,
        )  # fmt: skip
        if d_a is not None:
            self._accumulate(da, d_a)
        if d_b is not None:
            self._accumulate(db, d_b)


def _weak(c: Any, dtype: np.dtype) -> bool:
    """A scalar numpy combines with a `dtype` array without changing the dtype."""
    t = type(c)
    return t is float or t is int or (isinstance(c, np.floating) and c.dtype == dtype)


# -- registration: more specific than the plain rules, which remain the fallback ----------------


def _plain_rule(uf: np.ufunc, *keys: Any) -> Any:
    """The plain rule (`rules.numpy.ufuncs.unary`, `.binary`) for these argument types."""
    from rulekit import Signature, registry

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
