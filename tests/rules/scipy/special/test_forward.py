"""Forward rules and differentiable pullbacks of scipy.special (rules.scipy.special.forward and
the declarations of rules.scipy.special._common): tangents against finite differences,
pullbacks against the forward rules (⟨ȳ, Jẋ⟩ = ⟨x̄, ẋ⟩) and the reverse rules, refusals of
constant operands, and the rules traced by the reverse engine (twice differentiable)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.special as sp
from forward_rules import check_forward, check_pullback, check_twice, jvp, vjp_of
from scipy.special import _ufuncs

import rules.scipy.special as S

R = np.random.default_rng(0)


def U(lo: float, hi: float, shape: Any = (2, 3), dtype: Any = np.float64) -> Any:
    if shape is None:
        return float(R.uniform(lo, hi))
    return R.uniform(lo, hi, shape).astype(dtype)


UNARY = [
    (sp.erf, -2, 2), (sp.gammaln, 0.3, 5), (sp.expit, -4, 4), (sp.logit, 0.1, 0.9),
    (sp.entr, 0.1, 2), (sp.digamma, 0.5, 4), (sp.log_ndtr, -5, 3), (sp.erfinv, -0.8, 0.8),
    (sp.i0, -3, 3), (sp.i1, -3, 3), (sp.ndtri, 0.1, 0.9), (sp.rgamma, 0.4, 3),
]  # fmt: skip
LAYOUTS = ["C", "F", "strided", "reversed", "0d", "scalar", "f32"]


def layout(x: np.ndarray, kind: str) -> Any:
    if kind == "F":
        return np.asfortranarray(np.tile(x, (2, 1)))
    if kind == "strided":
        return np.tile(x, (1, 2))[:, ::2]
    if kind == "reversed":
        return x[::-1, ::-1]
    if kind == "0d":
        return x[0, 0].reshape(())
    if kind == "scalar":
        return float(x[0, 0])
    if kind == "f32":
        return x.astype(np.float32)
    return x


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize(("fn", "lo", "hi"), UNARY, ids=[u[0].__name__ for u in UNARY])
def test_unary(fn: Any, lo: float, hi: float, kind: str) -> None:
    x = layout(U(lo, hi), kind)
    d = R.normal(size=np.shape(x)).astype(np.result_type(x))
    d = float(d) if kind == "scalar" else d
    yb = R.normal(size=np.shape(x))
    yb = float(yb) if kind == "scalar" else yb.astype(np.result_type(x))
    loose = kind == "f32"
    check_forward(fn, [x], [d], rtol=2e-3 if loose else 1e-6, atol=1e-3 if loose else 1e-8)
    check_pullback(fn, [x], [d], yb, rtol=1e-4 if loose else 1e-8)


@pytest.mark.parametrize("fn", [sp.erf, sp.erfc, sp.ndtr, sp.gamma])
def test_complex(fn: Any) -> None:
    z = U(0.3, 1.5, 3) + 1j * U(-0.5, 0.5, 3)
    dz = R.normal(size=3) + 1j * R.normal(size=3)
    yb = R.normal(size=3) + 1j * R.normal(size=3)
    check_forward(fn, [z], [dz])
    check_pullback(fn, [z], [dz], yb)


BINARY = [
    (sp.xlogy, U(-1, 2), U(0.2, 3, 3)),
    (sp.xlog1py, U(-1, 2), U(-0.5, 2, (2, 1))),
    (sp.rel_entr, U(0.1, 2), U(0.1, 2, 3)),
    (sp.beta, U(0.5, 3), U(0.5, 3, 3)),
    (sp.betaln, U(0.5, 3), U(0.5, 3, 3)),
    (sp.owens_t, U(-2, 2), U(-2, 2, 3)),
]


@pytest.mark.parametrize(("fn", "a", "b"), BINARY, ids=[u[0].__name__ for u in BINARY])
def test_binary(fn: Any, a: Any, b: Any) -> None:
    da, db = R.normal(size=a.shape), R.normal(size=b.shape)
    yb = R.normal(size=np.broadcast_shapes(a.shape, b.shape))
    for dots in ([da, db], [da, None], [None, db]):
        check_forward(fn, [a, b], dots)
        check_pullback(fn, [a, b], dots, yb)


def test_xlogy_at_zero() -> None:
    x, y = np.array([0.0, 1.0, 0.0]), np.array([2.0, 3.0, 0.5])
    _, t = jvp(sp.xlogy, [x, y], [None, np.ones(3)])
    np.testing.assert_array_equal(t, [0.0, 1 / 3, 0.0])


def test_integer_operand_is_constant() -> None:
    x = U(0.3, 3)
    check_forward(sp.gammainc, [2, x], [None, R.normal(size=x.shape)])
    check_forward(sp.jv, [np.array([[0], [2]]), x], [None, R.normal(size=x.shape)])
    check_pullback(sp.jv, [1, x], [None, R.normal(size=x.shape)], R.normal(size=x.shape))


@pytest.mark.parametrize(
    ("fn", "args"),
    [(sp.gammainc, (1.5, 0.7)), (sp.betainc, (1.5, 2.0, 0.3)), (sp.jv, (0.5, 1.2))],
)
def test_active_constant_operand_refused(fn: Any, args: tuple[float, ...]) -> None:
    dots = [1.0] + [None] * (len(args) - 1)
    with pytest.raises(NotImplementedError, match="derivative with respect to"):
        jvp(fn, args, dots)
    with pytest.raises(NotImplementedError, match="derivative with respect to"):
        vjp_of(fn, *args)((True,) + (False,) * (len(args) - 1), *args)
    # the same operand as a constant: fine
    _, t = jvp(fn, args, [None] * (len(args) - 1) + [1.0])
    assert np.isfinite(t)


# -- the Python functions: logsumexp, softmax, log_softmax, polygamma, multigammaln -------------

LSE_CALLS = [
    ((U(-1, 1),), {"axis": 1}),
    ((U(-1, 1, 4, np.float32),), {}),
    ((U(-1, 1), 1, U(0.5, 2, 3), True, True), {}),  # b positional, keepdims, return_sign
    ((U(-1, 1), None, U(0.5, 2)), {}),
    ((U(-1, 1, (2, 3, 2)),), {"axis": (0, 2), "keepdims": True}),
    ((U(-1, 1),), {"axis": 0, "b": U(0.5, 2, 3)}),  # b by keyword: a constant
    ((U(-1, 1), -1, np.array([2.0, -0.3, 1.0]), False, True), {}),  # a negative weight
]


@pytest.mark.parametrize(("call", "kw"), LSE_CALLS)
def test_logsumexp(call: tuple[Any, ...], kw: dict[str, Any]) -> None:
    f = S.logsumexp
    args = list(call)
    dots: list[Any] = [R.normal(size=args[0].shape).astype(args[0].dtype)] + [None] * (
        len(args) - 1
    )
    if len(args) > 2:
        dots[2] = R.normal(size=args[2].shape)
    y = f(*args, **kw)
    loose = args[0].dtype == np.float32
    t = check_forward(f, args, dots, kw, rtol=1e-3 if loose else 1e-6, atol=1e-4 if loose else 1e-8)
    ybar = (
        (R.normal(size=np.shape(y[0])), None)
        if isinstance(y, tuple)
        else np.asarray(R.normal(size=np.shape(y))).astype(np.result_type(y))
    )
    if isinstance(y, tuple):
        np.testing.assert_array_equal(t[1], 0)
    check_pullback(f, args, dots, ybar, kw, rtol=1e-4 if loose else 1e-8,
                   reverse=not isinstance(y, tuple))  # fmt: skip
    if not loose:
        check_twice(f, args, 0, ybar, kw)
        if len(args) > 2:
            check_twice(f, args, 2, ybar, kw)


SOFTMAX_CALLS = [
    ((U(-2, 2),), {"axis": 1}),
    ((U(-2, 2, 4, np.float32),), {}),
    ((U(-2, 2, (2, 3, 2)), (0, 2)), {}),
    ((U(-2, 2, (3, 2)),), {"axis": 0}),
    ((np.asfortranarray(U(-2, 2, (3, 4)))[::-1],), {"axis": -1}),
]


@pytest.mark.parametrize("fn", [S.softmax, S.log_softmax])
@pytest.mark.parametrize(("args", "kw"), SOFTMAX_CALLS)
def test_softmax(fn: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    x = args[0]
    dots = [R.normal(size=x.shape).astype(x.dtype)] + [None] * (len(args) - 1)
    yb = R.normal(size=x.shape).astype(x.dtype)
    loose = x.dtype == np.float32
    check_forward(fn, args, dots, kw, rtol=1e-3 if loose else 1e-6, atol=1e-4 if loose else 1e-8)
    check_pullback(fn, args, dots, yb, kw, rtol=1e-4 if loose else 1e-8)
    if not loose:
        check_twice(fn, args, 0, yb, kw)


@pytest.mark.parametrize(
    ("n", "x"), [(1, U(0.5, 4)), (np.array([0, 1, 2]), U(0.5, 4, (2, 1), np.float32)), (0, 1.7)]
)
def test_polygamma(n: Any, x: Any) -> None:
    dx = R.normal(size=np.shape(x)).astype(np.result_type(x))
    dx = float(dx) if np.ndim(x) == 0 else dx
    y = S.polygamma(n, x)
    yb = R.normal(size=np.shape(y))
    loose = np.result_type(x) == np.float32
    check_forward(S.polygamma, [n, x], [None, dx], rtol=1e-4 if loose else 1e-6)
    check_pullback(S.polygamma, [n, x], [None, dx], yb, rtol=1e-4 if loose else 1e-8)
    if not loose:
        check_twice(S.polygamma, [n, x], 1, yb)


@pytest.mark.parametrize(("a", "d"), [(U(2, 5), 3), (U(1, 5, 4, np.float32), 2), (2.5, 4)])
def test_multigammaln(a: Any, d: int) -> None:
    da = R.normal(size=np.shape(a)).astype(np.result_type(a))
    da = float(da) if np.ndim(a) == 0 else da
    y = S.multigammaln(a, d)
    yb = R.normal(size=np.shape(y))
    loose = np.result_type(a) == np.float32
    check_forward(S.multigammaln, [a, d], [da, None], rtol=1e-4 if loose else 1e-6)
    check_pullback(S.multigammaln, [a, d], [da, None], yb, rtol=1e-4 if loose else 1e-8)
    if not loose:
        check_twice(S.multigammaln, [a, d], 0, yb)


def test_gammasgn_zero() -> None:
    x = np.array([-2.5, -0.5, 0.5, 3.5])
    y, t = jvp(sp.gammasgn, [x], [np.ones(4)])
    np.testing.assert_array_equal(y, sp.gammasgn(x))
    np.testing.assert_array_equal(t, 0)
    assert t.dtype == y.dtype
    _, pb = vjp_of(sp.gammasgn, x)((True,), x)
    np.testing.assert_array_equal(pb(np.ones(4))[0], 0)


def test_zeta_and_lambertw() -> None:
    q = U(0.5, 3)
    zeta, riemann, lambertw = _ufuncs._zeta, _ufuncs._riemann_zeta, _ufuncs._lambertw
    check_forward(zeta, [3, q], [None, R.normal(size=q.shape)])
    check_pullback(zeta, [3, q], [None, R.normal(size=q.shape)], R.normal(size=q.shape))
    with pytest.raises(NotImplementedError, match="zeta"):
        jvp(zeta, [3.0, q], [1.0, None])
    with pytest.raises(NotImplementedError, match="zeta"):
        jvp(riemann, [3.0], [1.0])
    assert jvp(riemann, [3], [None])[1] is None
    z = U(0.2, 3, 3)
    dz = R.normal(size=3)
    check_forward(lambertw, [z, np.array(0), 1e-8], [dz, None, None])
    yb = R.normal(size=3) + 1j * R.normal(size=3)
    check_pullback(lambertw, [z, np.array(0), 1e-8], [dz, None, None], yb)


# -- twice differentiable: the derived rules of the declared functions --------------------------


@pytest.mark.parametrize(
    ("fn", "args", "i"),
    [
        (sp.erf, [U(-2, 2)], 0),
        (sp.gammaln, [U(0.5, 4)], 0),
        (sp.expit, [U(-3, 3)], 0),
        (sp.logit, [U(0.1, 0.9)], 0),
        (sp.entr, [U(0.2, 2)], 0),
        (sp.digamma, [U(0.5, 4)], 0),
        (sp.ndtr, [U(-2, 2)], 0),
        (sp.xlogy, [U(-1, 2), U(0.3, 3, 3)], 0),
        (sp.xlogy, [U(-1, 2), U(0.3, 3, 3)], 1),
        (sp.xlog1py, [U(-1, 2), U(0.3, 3, 3)], 1),
        (sp.rel_entr, [U(0.2, 2), U(0.3, 3, 3)], 0),
        (sp.rel_entr, [U(0.2, 2), U(0.3, 3, 3)], 1),
        (sp.gammainc, [2, U(0.3, 3)], 1),
    ],
)
def test_declared_twice_differentiable(fn: Any, args: list[Any], i: int) -> None:
    yb = R.normal(size=np.broadcast_shapes(*(np.shape(a) for a in args)))
    check_twice(fn, args, i, yb)
