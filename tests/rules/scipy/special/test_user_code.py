"""Plain scipy.special calls in user code (issue 14): `erfcx`, `owens_t`, `kv`, `kve`, `iv`,
`zeta`, `lambertw`, `xlog1py`, `logit`, `expit` on traced values, against central
differences: float32 and float64, complex where scipy has a complex loop and the function
is holomorphic, Python and 0-d scalars, every memory layout, and the first and second call
of one `value_and_grad`. Also the rules alone (check_rule), the refused derivatives (Bessel
orders, the zeta exponent), and erfcx's derivative where its direct formula cancels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.special as sp
from fdcheck import EVERY_LAYOUT, check_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.scipy.special  # noqa: F401  (check_rule looks the rules up directly)
from rulekit import CoDual, zero_codual
from testutils import check_rule

FAST = settings(max_examples=10, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
shapes = st.sampled_from([(), (3,), (2, 3)])
real_dtypes = st.sampled_from([np.float32, np.float64])
int_orders = st.sampled_from([0, 1, 2, -1, np.int64(3), np.array([0, 1, 2]), np.array([[1], [2]])])


def every_way(f: Callable[..., Any], *args: Any, argnums: Any = None) -> None:
    """check_grads of `f` in every layout, two calls of one value_and_grad per layout."""
    check_grads(f, *args, argnums=argnums, layouts=EVERY_LAYOUT, calls=2)


def weights(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


# -- the rules alone ------------------------------------------------------------------------------


@FAST
@given(shapes, real_dtypes, st.booleans(), seeds)
def test_erfcx_rule(shape: Any, dtype: Any, cplx: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lo = -25.0 if dtype is np.float64 else -9.0  # (float32 erfcx overflows below −9.2)
    x = rng.uniform(lo, 40.0, shape).astype(dtype)  # (|x| ≥ 20: the asymptotic series)
    check_rule(sp.erfcx, dtype(x) if shape == () else x)
    if cplx:
        z = x + 1j * rng.uniform(-1.0, 1.0, shape).astype(dtype)
        check_rule(sp.erfcx, z)


@FAST
@given(shapes, shapes, real_dtypes, seeds)
def test_owens_t_rule(sh: Any, sa: Any, dtype: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    h, a = rng.uniform(-3.0, 3.0, sh).astype(dtype), rng.uniform(-3.0, 3.0, sa).astype(dtype)
    check_rule(sp.owens_t, h, a)
    check_rule(sp.owens_t, float(rng.uniform(-2.0, 2.0)), a)
    check_rule(sp.owens_t, h, rng.integers(-3, 4, sa))  # an integer constant a


@pytest.mark.parametrize("ufunc", [sp.kv, sp.kve], ids=["kv", "kve"])
@FAST
@given(int_orders, shapes, real_dtypes, st.booleans(), seeds)
def test_kv_kve_rule(ufunc: Any, v: Any, shape: Any, dtype: Any, cplx: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.2, 5.0, shape).astype(dtype)
    check_rule(ufunc, v, dtype(x) if shape == () else x)
    if cplx:
        check_rule(ufunc, v, x + 1j * rng.uniform(-2.0, 2.0, shape).astype(dtype))


def test_float32_in_float32_out() -> None:
    x = np.array([0.3, 2.5], np.float32)
    for f, args in ((sp.erfcx, (x,)), (sp.owens_t, (x, x)), (sp.kv, (1, x)), (sp.kve, (1, x))):
        cds, last = [CoDual(a, None) for a in args[:-1]], zero_codual(args[-1])
        y, pb = rulekit.rrule(zero_codual(f), *cds, last)
        assert y.x.dtype == f(*args).dtype == np.float32 and y.dx.dtype == np.float32
        y.dx[...] = 1.0
        pb(None)  # (array cotangents are added into the input's fdata)
        assert last.dx.dtype == np.float32 and np.all(last.dx != 0)


# -- plain user code ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_plain_calls_real(dtype: Any) -> None:
    rng = np.random.default_rng(14)
    x = rng.uniform(0.3, 3.0, (2, 3)).astype(dtype)
    p = rng.uniform(0.05, 0.95, (2, 3)).astype(dtype)
    w = weights((2, 3), 1)
    every_way(lambda x: np.sum(sp.erfcx(x - 1.0) * w), x)
    every_way(lambda h, a: np.sum(sp.owens_t(h - 1.5, a) * w), x, x[0] - 1.0)
    every_way(lambda x: np.sum((sp.kv(1.5, x) + sp.kve(0, x) + sp.kv(2, x)) * w), x)
    every_way(lambda x: np.sum(sp.iv(0.5, x) * w + sp.iv(2, x)), x)
    every_way(lambda q: np.sum(sp.zeta(3.0, q) * w), x)  # ∂q; the exponent is a constant
    every_way(lambda x: np.sum(np.real(sp.lambertw(x)) * w), x)
    every_way(lambda x, y: np.sum(sp.xlog1py(x, y - 0.2) * w), x, p)
    every_way(lambda p: np.sum(sp.logit(p) * w + sp.expit(3.0 * p)), p)


def test_plain_calls_complex() -> None:
    """Holomorphic with a complex loop: erfcx, kv, kve, iv, lambertw, xlog1py (z̄ = conj(f′)·ȳ)."""
    rng = np.random.default_rng(15)
    z = rng.uniform(0.3, 3.0, (2, 3)) + 1j * rng.uniform(-1.0, 1.0, (2, 3))
    w = weights((2, 3), 2) + 1j * weights((2, 3), 3)
    every_way(lambda z: np.sum(np.real(sp.erfcx(z) * w)), z)
    every_way(lambda z: np.sum(np.real((sp.kv(1.5, z) + sp.kve(1, z)) * w)), z)
    every_way(lambda z: np.sum(np.abs(sp.iv(1, z)) ** 2), z)
    every_way(lambda z: np.sum(np.real(sp.lambertw(z) * w)), z)
    every_way(lambda z, u: np.sum(np.real(sp.xlog1py(z, u) * w)), z, z.conj())
    check_grads(lambda z: np.real(sp.erfcx(z) * sp.kve(0, z)), 1.2 + 0.4j, calls=2)


@pytest.mark.parametrize("zero_d", [False, True], ids=["python-float", "0-d"])
def test_plain_calls_scalars(zero_d: bool) -> None:
    s: Any = (lambda v: np.array(v)) if zero_d else float
    check_grads(lambda t: sp.erfcx(t) * sp.expit(t), s(0.7), calls=2)
    check_grads(lambda t: sp.erfcx(t), s(30.0), calls=2)
    check_grads(lambda h, a: sp.owens_t(h, a), s(0.8), s(-1.3), calls=2)
    check_grads(lambda t: sp.kv(0.5, t) * sp.kve(2, t) + sp.iv(1, t), s(1.3), calls=2)
    check_grads(lambda q: sp.zeta(2.5, q), s(1.7), calls=2)
    check_grads(lambda t: np.real(sp.lambertw(t)), s(0.9), calls=2)
    check_grads(lambda x, y: sp.xlog1py(x, y) + sp.logit(y + 0.5), s(1.5), s(0.25), calls=2)


# -- derivatives that are refused ----------------------------------------------------------------


@pytest.mark.parametrize("ufunc", [sp.kv, sp.kve], ids=["kv", "kve"])
def test_bessel_order_must_be_constant(ufunc: Any) -> None:
    x = np.array([0.5, 2.0])
    with pytest.raises(NotImplementedError, match="order v"):
        rulekit.grad(lambda v, x: np.sum(ufunc(v, x)), argnums=(0, 1))(1.5, x)
    g = rulekit.grad(lambda x: np.sum(ufunc(np.array([1.5, 0.5]), x)))(x)  # a constant order
    assert np.all(np.isfinite(g))


def test_zeta_exponent_is_refused() -> None:
    q = np.array([1.5, 2.0])
    with pytest.raises(NotImplementedError, match=r"zeta\(x, q\).*respect to x"):
        rulekit.grad(lambda s, q: np.sum(sp.zeta(s, q)), argnums=(0, 1))(3.0, q)
    with pytest.raises(NotImplementedError, match=r"zeta\(x\).*respect to x"):
        rulekit.grad(lambda s: np.sum(sp.zeta(s)))(np.array([2.5, 3.0]))


# -- edge points ----------------------------------------------------------------------------------


def test_erfcx_where_the_direct_formula_cancels() -> None:
    """2x·erfcx(x) − 2/√π loses all digits for large x; the series keeps them (mpmath, 40
    digits). float32 input: computed in double, then rounded."""
    x = np.array([0.0, -3.0, 25.0, 100.0, 1e4, 1e8])
    want = np.array([-1.1283791670955126, -97237.06150316462, -0.0009005454634446267,
                     -5.6410497625993184e-05, -5.641895750849127e-09,
                     -5.641895835477562e-17])  # fmt: skip
    np.testing.assert_allclose(rulekit.grad(lambda x: np.sum(sp.erfcx(x)))(x), want, rtol=1e-14)
    g32 = rulekit.grad(lambda x: np.sum(sp.erfcx(x)))(x.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, want, rtol=2e-7)  # float32 rounding of the exact value
    g = rulekit.grad(lambda x: np.sum(sp.erfcx(x)))(np.array([np.inf, -30.0]))
    assert g[0] == 0.0 and g[1] == -np.inf


def test_owens_t_and_kv_edges() -> None:
    grads = rulekit.grad(lambda h, a: np.sum(sp.owens_t(h, a)), argnums=(0, 1))
    gh, ga = grads(np.array([0.0, 0.0, 0.0]), np.array([2.0, 0.0, np.inf]))
    assert np.all(gh == 0.0)  # T is even in h; at a = inf a kink: the mean of ∓φ(0)/2
    np.testing.assert_allclose(ga, [1 / (2 * np.pi * 5.0), 1 / (2 * np.pi), 0.0], rtol=1e-15)
    g = rulekit.grad(lambda x: np.sum(sp.kv(1, x)))(np.array([0.0, -1.0, 2.0]))
    assert g[0] == -np.inf and np.isnan(g[1])  # the pole; outside the real domain (kv: NaN)
    np.testing.assert_allclose(g[2], -0.5 * (sp.kv(0, 2.0) + sp.kv(2, 2.0)), rtol=1e-15)
