"""Tests for rules.scipy.special: check_rule over shapes, dtypes, integer and (constant) float
orders and shapes, complex Bessel arguments; errors for active shape/order parameters; edge
points; and the engine on unchanged user code and on the multigammaln wrapper."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.special as sp
from fdcheck import check_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions  # noqa: F401  (registers np.einsum: engine tests)
from rulekit import CoDual, NoFData, NoRData, zero_codual
from rules.scipy.special import gamma_bessel as M
from testutils import check_rule

FAST = settings(max_examples=10, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
shapes = st.sampled_from([(), (3,), (2, 3)])
real_dtypes = st.sampled_from([np.float32, np.float64])
int_orders = st.sampled_from([0, 1, 2, -1, np.int64(3), np.array([0, 1, 2]), np.array([[1], [2]])])

Sample = Callable[[np.random.Generator, Any], Any]


def U(lo: float, hi: float) -> Sample:
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def value(rng: np.random.Generator, sample: Sample, shape: Any, dtype: Any) -> Any:
    """An array of `shape` and `dtype` (a numpy scalar of that dtype for shape ())."""
    x = sample(rng, shape).astype(dtype)
    return dtype(x) if shape == () else x


def fixed(ufunc: Any, consts: dict[int, Any], n: int) -> tuple[Callable[..., Any], Any]:
    """(primal, rule) of x ↦ ufunc(...) with the arguments in `consts` held constant (plain
    values, dx None, as the engine passes untraced arguments), so that check_rule can check
    the rule's cotangents for float shape/order parameters, which must not be active."""
    free = [i for i in range(n) if i not in consts]

    def full(xs: tuple[Any, ...]) -> list[Any]:
        it = iter(xs)
        return [consts[i] if i in consts else next(it) for i in range(n)]

    def primal(*xs: Any) -> Any:
        return ufunc(*full(xs))

    def rule(fc: CoDual, *cds: CoDual) -> Any:
        args = [CoDual(a, None) if i in consts else a for i, a in enumerate(full(cds))]
        y, pb = rulekit.rrule(zero_codual(ufunc), *args)
        return y, lambda dy: (NoRData(), *(pb(dy)[1 + i] for i in free))

    return primal, rule


# -- incomplete gamma and beta --------------------------------------------------------------------


@pytest.mark.parametrize("ufunc", [sp.gammainc, sp.gammaincc], ids=["gammainc", "gammaincc"])
@FAST
@given(st.sampled_from([1, 2, 5, np.array([1, 3, 4])]), shapes, real_dtypes, seeds)
def test_gammainc(ufunc: Any, a: Any, shape: Any, dtype: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = value(rng, U(0.2, 5.0), shape if np.ndim(a) == 0 else (2, 3), dtype)
    check_rule(ufunc, a, x)
    a_float = rng.uniform(0.3, 4.0, np.shape(x))  # a float shape parameter, constant
    primal, rule = fixed(ufunc, {0: a_float}, 2)
    check_rule(primal, x, rule=rule)


@FAST
@given(st.sampled_from([1, 2, np.array([1, 2, 4])]), st.sampled_from([1, 3, np.array([[2], [1]])]),
       shapes, real_dtypes, seeds)  # fmt: skip
def test_betainc(a: Any, b: Any, shape: Any, dtype: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = value(rng, U(0.05, 0.95), shape, dtype)
    check_rule(sp.betainc, a, b, x)
    ab = {0: rng.uniform(0.5, 3.0, np.shape(x)), 1: rng.uniform(0.5, 3.0)}
    primal, rule = fixed(sp.betainc, ab, 3)
    check_rule(primal, x, rule=rule)


def test_shape_parameters_must_be_constant() -> None:
    """The a, b derivatives have no closed form: active → NotImplementedError, never a zero."""
    x = np.array([0.2, 0.7])
    with pytest.raises(NotImplementedError, match=r"betainc.*respect to b"):
        rulekit.rrule(zero_codual(sp.betainc), CoDual(2.0, None), zero_codual(1.5), zero_codual(x))
    with pytest.raises(NotImplementedError, match=r"gammainc.*respect to a"):
        rulekit.grad(lambda a: np.sum(sp.gammainc(a, x)))(1.5)
    with pytest.raises(NotImplementedError, match=r"gammaincc.*respect to a"):
        rulekit.grad(lambda x: np.sum(sp.gammaincc(x, x)))(x)
    # integer shapes and plain float constants are fine
    g = rulekit.grad(lambda x: np.sum(sp.betainc(2, 3.5, x)))(x)
    assert np.allclose(g, x * (1 - x) ** 2.5 / sp.beta(2, 3.5))


def test_incomplete_gamma_at_zero() -> None:
    """∂P(a, x)/∂x at x = 0: +inf (a < 1), 1 (a = 1), 0 (a > 1): the one-sided limits."""
    (g,) = pull(sp.gammainc, [0.5, 1.0, 2.0], [0.0, 0.0, 0.0])
    assert np.array_equal(g, [np.inf, 1.0, 0.0])
    (g,) = pull(sp.betainc, [1.0, 2.0], [1.0, 1.0], [0.0, 0.0])
    assert np.array_equal(g, [1.0, 0.0])
    (g,) = pull(sp.gammainc, [200.0], [190.0])  # log space: no overflow of x^{a−1}, Γ(a)
    assert np.isfinite(g[0]) and np.isclose(
        g[0], np.exp(199 * np.log(190.0) - 190 - sp.gammaln(200))
    )


def pull(ufunc: Any, *xs: Any) -> list[Any]:
    """Cotangent of the last argument of ufunc(*xs) for ȳ = 1 (the others constant)."""
    cds = [CoDual(np.asarray(x, float), None) for x in xs[:-1]]
    last = zero_codual(np.asarray(xs[-1], float))
    y, pb = rulekit.rrule(zero_codual(ufunc), *cds, last)
    y.dx[...] = 1
    pb(NoRData())
    return [last.dx]


# -- gammasgn, rgamma -----------------------------------------------------------------------------


@FAST
@given(shapes, real_dtypes, st.booleans(), seeds)
def test_gammasgn_rgamma(shape: Any, dtype: Any, cplx: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = value(rng, lambda r, s: r.uniform(-3.3, 4.0, s), shape, dtype)
    check_rule(sp.gammasgn, x)
    check_rule(sp.rgamma, x)
    if cplx and shape != ():
        check_rule(sp.rgamma, x + 1j * rng.uniform(-1.0, 1.0, shape).astype(dtype))


def test_gammasgn_is_flat_and_rgamma_at_poles() -> None:
    (g,) = pull(sp.gammasgn, [-2.5, -0.5, 0.5, 3.0])
    assert np.array_equal(g, np.zeros(4))
    # 1/Γ is entire: at x = −n its derivative is (−1)ⁿ n! (ψ has a pole there, 1/Γ a zero)
    (g,) = pull(sp.rgamma, [0.0, -1.0, -2.0, -3.0])
    assert np.array_equal(g, [1.0, -1.0, 2.0, -6.0])
    h = 1e-6
    assert np.isclose(g[2], (sp.rgamma(-2 + h) - sp.rgamma(-2 - h)) / (2 * h), rtol=1e-6)


# -- Bessel functions -----------------------------------------------------------------------------

BESSEL = [
    (sp.jv, U(0.0, 6.0), True),
    (sp.iv, U(-3.0, 3.0), True),
    (sp.ive, lambda r, s: r.uniform(0.2, 4.0, s) * r.choice([-1.0, 1.0], s), True),
    (sp.yn, U(0.5, 6.0), False),
]


@pytest.mark.parametrize(("ufunc", "sample", "cplx"), BESSEL, ids=[b[0].__name__ for b in BESSEL])
@FAST
@given(int_orders, shapes, real_dtypes, seeds)
def test_bessel_integer_orders(ufunc: Any, sample: Sample, cplx: bool, v: Any, shape: Any,
                               dtype: Any, seed: int) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    x = value(rng, sample, shape, dtype)
    check_rule(ufunc, v, x)
    if cplx and shape != ():
        z = x + 1j * rng.uniform(-1.5, 1.5, shape).astype(dtype)
        check_rule(ufunc, v, z)


@pytest.mark.parametrize("ufunc", [sp.jv, sp.iv, sp.ive], ids=["jv", "iv", "ive"])
@FAST
@given(st.floats(-2.5, 2.5, allow_subnormal=False), st.booleans(), seeds)  # scipy: NaN there
def test_bessel_float_orders(ufunc: Any, v: float, cplx: bool, seed: int) -> None:
    """Non-integer orders (constants): positive arguments, where the real functions exist."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.3, 4.0, (2, 3)) + (1j * rng.uniform(-1.0, 1.0, (2, 3)) if cplx else 0)
    primal, rule = fixed(ufunc, {0: v}, 2)
    check_rule(primal, x, rule=rule)
    primal, rule = fixed(ufunc, {0: rng.uniform(-2.0, 2.0, 3)}, 2)  # an array of orders
    check_rule(primal, x, rule=rule)


@pytest.mark.parametrize("ufunc", [sp.j0, sp.j1, sp.y0, sp.y1], ids=["j0", "j1", "y0", "y1"])
@FAST
@given(shapes, real_dtypes, seeds)
def test_bessel_unary(ufunc: Any, shape: Any, dtype: Any, seed: int) -> None:
    lo = 0.3 if ufunc in (sp.y0, sp.y1) else -6.0
    check_rule(ufunc, value(np.random.default_rng(seed), U(lo, 6.0), shape, dtype))
    check_rule(ufunc, float(np.random.default_rng(seed).uniform(max(lo, 0.3), 6.0)))


def test_bessel_orders_must_be_constant() -> None:
    x = np.array([0.5, 2.0])
    for ufunc in (sp.jv, sp.iv, sp.ive, sp.yn):
        with pytest.raises(NotImplementedError, match="order v"):
            rulekit.grad(lambda v, x, u=ufunc: np.sum(u(v, x)), argnums=(0, 1))(1.0, x)


def test_bessel_values_at_zero_and_jn_alias() -> None:
    assert M.jn is sp.jn is sp.jv
    assert pull(sp.j1, [0.0])[0][0] == 0.5 and pull(sp.j0, [0.0])[0][0] == 0.0
    assert pull(sp.jv, [1.0], [0.0])[0][0] == 0.5 and pull(sp.iv, [1.0], [0.0])[0][0] == 0.5
    assert pull(sp.ive, [0.0], [0.0])[0][0] == 0.0  # kink: the mean of the one-sided ∓1
    assert pull(sp.ive, [1.0], [0.0])[0][0] == 0.5
    # Y₀' = −Y₁ = (Y₋₁ − Y₁)/2 through yn's recurrence at n = 0
    assert np.isclose(pull(sp.yn, [0.0], [1.5])[0][0], -sp.y1(1.5))


def test_float32_in_float32_out() -> None:
    x = np.array([0.3, 0.6], np.float32)
    for f, args in ((sp.j0, (x,)), (sp.jv, (1, x)), (sp.gammainc, (np.float32(2), x)),
                    (sp.rgamma, (x,)), (sp.gammasgn, (x,))):  # fmt: skip
        cds = [CoDual(a, None) for a in args[:-1]]
        y, _pb = rulekit.rrule(zero_codual(f), *cds, zero_codual(args[-1]))
        assert y.x.dtype == f(*args).dtype == np.float32 and y.dx.dtype == np.float32


# -- multigammaln ---------------------------------------------------------------------------------


@FAST
@given(shapes, real_dtypes, st.integers(1, 4), seeds)
def test_multigammaln(shape: Any, dtype: Any, d: int, seed: int) -> None:
    a = value(np.random.default_rng(seed), U(2.0, 5.0), shape, dtype)
    check_rule(M.multigammaln, a, d)
    check_rule(M.multigammaln, 2.5, np.int64(d))


def test_multigammaln_scalar_output() -> None:
    y, pb = rulekit.rrule(zero_codual(M.multigammaln), zero_codual(2.5), CoDual(3, None))
    assert type(y.x) is np.float64 and y.dx is NoFData()
    _, da, _ = pb(np.float64(1.0))
    assert type(da) is float and np.isclose(da, sp.digamma([2.5, 2.0, 1.5]).sum())


# -- the engine -----------------------------------------------------------------------------------


def test_engine_ufunc_path() -> None:
    """Unchanged user code: the scipy ufuncs reach the rules through __array_ufunc__."""
    rng = np.random.default_rng(7)
    x, w = rng.uniform(0.5, 3.0, (2, 3)), rng.normal(size=(2, 3))
    check_grads(lambda x, w: np.einsum("ij,ij->", sp.jv(2, x) + sp.ive(1, x), w), x, w)
    check_grads(lambda x: np.sum(sp.gammainc(1.5, x) * sp.y1(x) + sp.rgamma(x)), x)
    check_grads(lambda x: np.sum(sp.betainc(2.0, 3.0, x / 4.0) * sp.gammasgn(x - 1)), x)
    check_grads(lambda t: sp.j0(t) * sp.yn(2, t) + sp.iv(0, t), 1.3)  # traced scalars
    z = x + 0.5j  # complex: a real loss of a complex Bessel value
    check_grads(lambda x: np.sum(np.abs(sp.jv(1, x + 0.5j)) ** 2 + np.real(sp.ive(2, x - z))), x)


def test_engine_multigammaln_wrapper() -> None:
    a = np.array([2.0, 3.5, 4.0])
    check_grads(lambda a: np.sum(M.multigammaln(a, 3) ** 2), a)
    check_grads(lambda s: M.multigammaln(s, 2) * s, 1.7)


def test_engine_out_keyword() -> None:
    """out= into a traced array: the engine's generic out= (compute, then a recorded copy)."""
    rng = np.random.default_rng(8)
    x, w = rng.uniform(0.5, 3.0, 4), rng.normal(size=4)

    def f(x: Any) -> Any:
        out = np.zeros_like(x)
        sp.jv(1, x, out=out)
        sp.gammainc(2.0, out + 1.0, out=out)
        return np.sum(out * w)

    check_grads(f, x)
