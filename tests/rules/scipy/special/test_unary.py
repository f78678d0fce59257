"""Tests for rules.scipy.special (scipy.special): check_rule over shapes, dtypes and options; edge
cases at the non-differentiable and extreme points; and the engine on unchanged user code
(the ufunc path) and on the primitive wrappers (logsumexp, softmax, log_softmax, polygamma)."""

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
import rules.scipy.special as S
from rulekit import CoDual, NoFData, NoRData, zero_codual
from rules.scipy._routing import original
from testutils import check_rule

FAST = settings(max_examples=10, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
shapes = st.sampled_from([(), (1,), (3,), (2, 3)])
real_dtypes = st.sampled_from([np.float32, np.float64])

# The engine tests use np.einsum (rules.numpy.contractions); test_engine_numpy_user_code also uses
# numpy's operators and reductions, whose rules the `rules` package registers.

Sample = Callable[[np.random.Generator, Any], np.ndarray]


def U(lo: float, hi: float) -> Sample:
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def signed(lo: float, hi: float) -> Sample:
    return lambda rng, shape: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


# (ufunc, domain where it is smooth, whether complex input has a rule)
UNARY: list[tuple[np.ufunc, Sample, bool]] = [
    (sp.gammaln, U(0.3, 5.0), False),
    (sp.digamma, U(0.3, 5.0), False),
    (sp.gamma, U(0.3, 4.0), True),
    (sp.erf, U(-2.0, 2.0), True),
    (sp.erfc, U(-2.0, 2.0), True),
    (sp.erfinv, U(-0.9, 0.9), False),
    (sp.erfcinv, U(0.1, 1.9), False),
    (sp.expit, U(-5.0, 5.0), False),
    (sp.logit, U(0.05, 0.95), False),
    (sp.log_expit, U(-6.0, 6.0), False),
    (sp.ndtr, U(-3.0, 3.0), True),
    (sp.log_ndtr, U(-8.0, 3.0), True),
    (sp.ndtri, U(0.05, 0.95), False),
    (sp.entr, U(0.05, 2.0), False),
    (sp.i0, U(-3.0, 3.0), False),
    (sp.i1, U(-3.0, 3.0), False),
    (sp.i0e, signed(0.2, 4.0), False),
    (sp.i1e, U(-4.0, 4.0), False),
]


def value(rng: np.random.Generator, sample: Sample, shape: Any, dtype: Any) -> Any:
    """An array of `shape` and `dtype`, or for shape None a Python float."""
    if shape is None:
        return float(sample(rng, ()))
    return sample(rng, shape).astype(dtype)


@pytest.mark.parametrize(("ufunc", "sample", "cplx"), UNARY, ids=[u[0].__name__ for u in UNARY])
@FAST
@given(st.one_of(shapes, st.none()), real_dtypes, st.booleans(), seeds)
def test_unary(ufunc: np.ufunc, sample: Sample, cplx: bool, shape: Any, dtype: Any,
               numpy_scalar: bool, seed: int) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    x = value(rng, sample, shape, dtype)
    if numpy_scalar and shape == ():
        x = dtype(x)  # a numpy scalar: rdata of exactly its type
    check_rule(ufunc, x)
    if cplx and shape is not None:
        z = sample(rng, shape) + 1j * rng.uniform(-0.5, 0.5, shape)
        check_rule(ufunc, z.astype(np.complex128 if dtype is np.float64 else np.complex64))


def test_float32_in_float32_out() -> None:
    """scipy.special's float32 loops keep float32; the rules' outputs match exactly."""
    x = np.array([0.3, 0.6], np.float32)
    for ufunc, _, _ in UNARY:
        y, _pb = rulekit.rrule(zero_codual(ufunc), zero_codual(x))
        ref = ufunc(x)
        assert y.x.dtype == ref.dtype == np.float32 and y.dx.dtype == np.float32
    y, _pb = rulekit.rrule(zero_codual(sp.gammaln), zero_codual(np.float32(2.5)))
    assert type(y.x) is np.float32 and y.dx is NoFData()


def test_psi_is_digamma() -> None:
    assert S.psi is S.digamma is sp.digamma and S.erf is sp.erf
    check_rule(sp.psi, np.array([0.5, 2.0]))


# -- two-argument ufuncs ------------------------------------------------------------------------

BINARY: list[tuple[np.ufunc, Sample, Sample, bool]] = [
    (sp.xlogy, U(-1.0, 2.0), U(0.2, 3.0), True),
    (sp.xlog1py, U(-1.0, 2.0), U(-0.7, 2.0), True),
    (sp.rel_entr, U(0.1, 2.0), U(0.1, 2.0), False),
    (sp.beta, U(0.5, 3.0), U(0.5, 3.0), False),
    (sp.betaln, U(0.5, 3.0), U(0.5, 3.0), False),
]
pairs = st.sampled_from([((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2,)), (None, (3,))])


@pytest.mark.parametrize(("ufunc", "sx", "sy", "cplx"), BINARY, ids=[b[0].__name__ for b in BINARY])
@FAST
@given(pairs, real_dtypes, real_dtypes, st.booleans(), seeds)
def test_binary(ufunc: np.ufunc, sx: Sample, sy: Sample, cplx: bool, pair: Any, dx: Any,
                dy: Any, swap: bool, seed: int) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    xs, ys = pair[::-1] if swap else pair
    x, y = value(rng, sx, xs, dx), value(rng, sy, ys, dy)
    check_rule(ufunc, x, y)
    if cplx and xs is not None:
        check_rule(ufunc, x + 0.5j, y + 1j * rng.uniform(-1.0, 1.0, np.shape(y)))


def test_binary_integer_constants() -> None:
    rng = np.random.default_rng(1)
    y = rng.uniform(0.5, 2.0, 3)
    check_rule(sp.xlogy, np.array([0, 1, 2]), y)  # an integer array: no cotangent
    check_rule(sp.beta, 2, y)
    check_rule(sp.betaln, y, np.int64(3))
    check_rule(sp.rel_entr, y, 1)


@FAST
@given(st.sampled_from([0, 1, 2, 3, np.array([0, 2]), np.array([[1], [2]])]), shapes, real_dtypes,
       seeds)  # fmt: skip
def test_polygamma(n: Any, shape: Any, dtype: Any, seed: int) -> None:
    x = np.random.default_rng(seed).uniform(0.5, 4.0, shape).astype(dtype)
    check_rule(S.polygamma, n, x)


# -- logsumexp, softmax, log_softmax ------------------------------------------------------------

axes = st.sampled_from([None, 0, 1, -1, (0, 1)])


@FAST
@given(axes, st.sampled_from(["none", "same", "row", "scalar"]), st.booleans(), st.booleans(),
       real_dtypes, seeds)  # fmt: skip
def test_logsumexp(axis: Any, bkind: str, keepdims: bool, return_sign: bool, dtype: Any,
                   seed: int) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2.0, 2.0, (2, 3)).astype(dtype)
    b = {
        "none": None,
        "same": rng.uniform(0.5, 2.0, (2, 3)),
        "row": np.array([2.0, 0.5, 1.0]),
        "scalar": 1.7,
    }[bkind]
    if return_sign and b is not None:
        b = -b  # a negative sum: sign −1, log of its magnitude
    check_rule(S.logsumexp, a, axis, b, keepdims, return_sign)


def test_logsumexp_keywords_and_scalars() -> None:
    rng = np.random.default_rng(2)
    a = rng.normal(size=(3, 4))
    check_rule(S.logsumexp, a, kwargs={"axis": 0, "keepdims": True})
    check_rule(S.logsumexp, a, kwargs={"b": rng.uniform(0.5, 1.5, 4), "axis": 1})
    check_rule(S.logsumexp, 0.3)
    check_rule(S.logsumexp, np.float32(0.3))


def test_logsumexp_masked_entries() -> None:
    """A −inf entry (masked out) gets ā = 0; the others get the softmax of the rest."""
    a = np.array([1.0, -np.inf, 0.5])
    g = rulekit.grad(S.logsumexp)(a)
    assert g[1] == 0.0 and np.allclose(g[[0, 2]], sp.softmax(a[[0, 2]]))


@pytest.mark.parametrize("fn", [S.softmax, S.log_softmax], ids=["softmax", "log_softmax"])
@FAST
@given(axes, real_dtypes, seeds)
def test_softmax(fn: Any, axis: Any, dtype: Any, seed: int) -> None:
    x = np.random.default_rng(seed).normal(size=(2, 3)).astype(dtype)
    check_rule(fn, x, kwargs={"axis": axis})
    check_rule(fn, x[0], axis if axis in (None, 0, -1) else 0)  # positional axis, 1-D


def test_softmax_large_inputs_are_stable() -> None:
    """Inputs around 1000 would overflow exp; the pullbacks use only the forward's outputs."""
    x, w = np.array([1000.0, 1001.0, 999.0]), np.arange(1.0, 4.0)
    s = sp.softmax(x)
    assert np.allclose(rulekit.grad(S.logsumexp)(x), s)
    g = rulekit.grad(lambda v: np.einsum("i,i->", S.softmax(v), w))(x)
    assert np.allclose(g, s * (w - s @ w))
    g = rulekit.grad(lambda v: np.einsum("i,i->", S.log_softmax(v), w))(x)
    assert np.allclose(g, w - s * w.sum())


# -- edge cases ---------------------------------------------------------------------------------


def pull(ufunc: Any, *xs: Any, bar: float = 1.0) -> list[Any]:
    """Gradients of ufunc(*xs) (arrays) for cotangent `bar`, every argument active."""
    cds = [zero_codual(np.asarray(x, dtype=float)) for x in xs]
    y, pb = rulekit.rrule(zero_codual(ufunc), *cds)
    y.dx[...] = bar
    pb(NoRData())
    return [c.dx for c in cds]


def test_log_ndtr_far_left_tail() -> None:
    """φ and Φ both underflow near x = −40, yet log Φ' = φ/Φ ≈ |x| + 1/|x| stays finite."""
    x = np.array([-30.0, -40.0, -1000.0])
    (g,) = pull(sp.log_ndtr, x)
    t = -x
    mills = t + 1 / t - 2 / t**3 + 10 / t**5  # the asymptotic series of φ(x)/Φ(x), x → −∞
    assert np.allclose(g, mills, rtol=1e-9, atol=0)  # the next term is −74/t⁷
    x32 = np.array([-30.0], np.float32)
    y, pb = rulekit.rrule(zero_codual(sp.log_ndtr), c := zero_codual(x32))
    y.dx[...] = 1
    pb(NoRData())
    # float32: x̄ = exp(log φ(x) − log Φ(x)) with log Φ(−30) ≈ −454 rounded to float32 (ulp
    # 3e-5 there), an error the exp makes relative: measured 1.5e-5 (the kit's float32 rtol: 2e-3)
    assert c.dx.dtype == np.float32 and np.isclose(c.dx[0], mills[0], rtol=1e-4)
    h = 1e-4  # and it agrees with finite differences of scipy's log_ndtr at −30
    assert np.isclose(g[0], (sp.log_ndtr(-30 + h) - sp.log_ndtr(-30 - h)) / (2 * h), rtol=1e-7)


def test_entr_at_zero_and_outside_domain() -> None:
    (g,) = pull(sp.entr, [0.0, -1.0, 1.0])
    assert g[0] == np.inf  # the one-sided derivative −(log 0 + 1)
    assert np.isnan(g[1])  # outside the domain (entr = −inf)
    assert g[2] == -1.0


def test_xlogy_at_zero() -> None:
    gx, gy = pull(sp.xlogy, [0.0, 0.0, 2.0], [3.0, 0.0, 3.0])
    assert np.allclose(gx, [np.log(3.0), -np.inf, np.log(3.0)])  # ∂x = log y, also at x = 0
    assert np.array_equal(gy, [0.0, 0.0, 2.0 / 3.0])  # xlogy(0, y) ≡ 0: ∂y = 0
    gx, gy = pull(sp.xlog1py, [0.0, 1.0], [-1.0, 1.0])
    assert gx[0] == -np.inf and gy[0] == 0.0 and np.isclose(gx[1], np.log(2.0))


def test_rel_entr_edges() -> None:
    gx, gy = pull(sp.rel_entr, [0.0, 0.0, -1.0, 1.0], [2.0, 0.0, 1.0, 2.0])
    assert gx[0] == -np.inf and gy[0] == 0.0  # x = 0 < y: one-sided −inf, flat in y
    assert np.isnan(gx[1]) and gy[1] == 0.0  # x = y = 0
    assert np.isnan(gx[2]) and np.isnan(gy[2])  # outside the domain
    assert np.isclose(gx[3], np.log(0.5) + 1) and np.isclose(gy[3], -0.5)


def test_bessel_at_zero() -> None:
    (g1e,) = pull(sp.i1e, [0.0, 1e-300])
    (g1,) = pull(sp.i1, [0.0])
    (g0e,) = pull(sp.i0e, [0.0])
    assert g1e[0] == 0.5 and np.isclose(g1e[1], 0.5) and g1[0] == 0.5
    assert g0e[0] == 0.0  # kink at 0: the mean of the one-sided derivatives ∓1


def test_domain_edges_give_inf_without_warnings() -> None:
    """Warnings are errors here: the pullbacks silence numpy's warnings at these points."""
    assert np.all(pull(sp.logit, [0.0, 1.0])[0] == np.inf)
    assert np.all(pull(sp.erfinv, [1.0, -1.0])[0] == np.inf)
    assert np.all(pull(sp.ndtri, [0.0, 1.0])[0] == np.inf)


def test_expit_tails_do_not_cancel() -> None:
    (g,) = pull(sp.expit, [40.0, -40.0])
    assert np.allclose(g, np.exp(-40.0), rtol=1e-12)


def test_scalar_rdata_types() -> None:
    for x in (0.7, np.float64(0.7), np.float32(0.7)):
        y, pb = rulekit.rrule(zero_codual(sp.erf), zero_codual(x))
        _, dx = pb(type(y.x)(1))
        assert type(dx) is type(x) and np.isclose(dx, 2 / np.sqrt(np.pi) * np.exp(-0.49))


def test_constant_operand() -> None:
    y, cx = np.array([1.0, 2.0]), CoDual(np.array([0.5, 0.5]))  # dx None: a constant
    out, pb = rulekit.rrule(zero_codual(sp.xlogy), cx, cy := zero_codual(y))
    out.dx[...] = 1
    assert pb(NoRData())[1] is NoRData() and np.allclose(cy.dx, 0.5 / y)


def test_unsupported_keywords_and_dtypes() -> None:
    x = np.array([0.5, 1.5])
    with pytest.raises(NotImplementedError, match="where"):
        rulekit.rrule(zero_codual(sp.erf), zero_codual(x), where=x > 1)
    with pytest.raises(rulekit.MissingRuleError):  # scipy's erfinv has no complex loop
        rulekit.rrule(zero_codual(sp.erfinv), zero_codual(x + 0j))
    with pytest.raises(rulekit.MissingRuleError):  # the order of polygamma is an integer
        rulekit.rrule(zero_codual(S.polygamma), zero_codual(1.0), zero_codual(x))
    with pytest.raises(rulekit.MissingRuleError):
        rulekit.rrule(zero_codual(S.logsumexp), zero_codual(x + 1j))


# -- the engine ---------------------------------------------------------------------------------


def test_engine_ufunc_path() -> None:
    """Unchanged user code: scipy.special ufuncs reach the rules through __array_ufunc__."""
    rng = np.random.default_rng(3)
    x, y = rng.uniform(0.5, 3.0, (2, 3)), rng.normal(size=(2, 3))
    check_grads(lambda x, y: np.einsum("ij,ij->", sp.gammaln(x), y), x, y)
    check_grads(lambda x, y: np.einsum("ij,ij->", sp.xlogy(x, sp.expit(y)), sp.log_ndtr(y)), x, y)
    check_grads(lambda t: sp.xlogy(sp.erf(t), sp.i1e(t)), 0.4)  # traced scalars
    check_grads(lambda a, b: np.einsum("i->", sp.betaln(a, b)), 1.5, np.array([2.5, 0.7]))


def test_engine_wrapper_path() -> None:
    """logsumexp/softmax/log_softmax/polygamma through their rulekit.primitive wrappers."""
    rng = np.random.default_rng(4)
    x, W, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.uniform(0.5, 2.0, 4)
    c = rng.normal(size=(2, 4))

    def dense(x: Any, W: Any) -> Any:
        return np.einsum("ij,jk->ik", x, W)

    check_grads(lambda x, W: np.einsum("i->", S.logsumexp(dense(x, W), axis=1)), x, W)
    check_grads(lambda x, W, b: np.einsum("i->", S.logsumexp(dense(x, W), 1, b)), x, W, b)
    check_grads(lambda x, W: np.einsum("ij,ij->", S.log_softmax(dense(x, W), axis=1), c), x, W)
    check_grads(lambda x, W: np.einsum("ij,ij->", S.softmax(dense(x, W), axis=0), c), x, W)
    check_grads(lambda x: np.einsum("ij->", S.polygamma(1, sp.expit(x))), x)
    # b as a traced keyword array; return_sign with scalar outputs (the sign gets no cotangent)
    check_grads(lambda W, b: np.einsum("i->", S.logsumexp(W, axis=1, b=b)), W, b)
    check_grads(lambda a, b: S.logsumexp(a, None, b, False, True)[0], W[0], -b)


def test_wrappers_call_scipy_directly() -> None:
    x = np.array([[0.5, 1.5], [2.0, -1.0]])
    for name in ["logsumexp", "softmax", "polygamma"]:
        wrapper, routed = getattr(S, name), getattr(sp, name)
        own = original(routed)  # scipy's own function, behind the routed public name
        assert wrapper.__wrapped__ is own and wrapper.fn is own and own is not routed
        assert routed.__rulekit_primitive__ is wrapper  # the public name routes to this wrapper
    # plain calls, through the wrapper and through the routed name: scipy's results bit for bit
    own_lse = original(sp.logsumexp)(x, axis=1, b=2.0)
    for f in (S.logsumexp, sp.logsumexp):
        np.testing.assert_array_equal(f(x, axis=1, b=2.0), own_lse, strict=True)
    for f in (S.softmax, sp.softmax):
        np.testing.assert_array_equal(f(x, 0), original(sp.softmax)(x, 0), strict=True)
    for f in (S.polygamma, sp.polygamma):
        np.testing.assert_array_equal(f(2, x), original(sp.polygamma)(2, x), strict=True)


def test_engine_numpy_user_code() -> None:
    """The same with plain numpy operators and reductions (their rules come from `rules`)."""
    rng = np.random.default_rng(5)
    x, y, W = rng.uniform(0.5, 3.0, (2, 3)), rng.normal(size=(2, 3)), rng.normal(size=(3, 4))
    check_grads(lambda x, y: np.sum(sp.gammaln(x) * y), x, y)
    check_grads(lambda x, W: np.sum(S.logsumexp(x @ W, axis=1)), x, W)
    check_grads(lambda t: sp.erf(t) * sp.i1e(t) + sp.expit(-t), 0.4)


def test_engine_scipy_python_functions_are_refused() -> None:
    """scipy's own logsumexp converts with np.asarray: called traced (bound before the routing
    was installed) the engine raises naming the fix, never a silent zero; the routed public
    name and the wrapper differentiate."""
    x = np.array([0.5, 1.5])
    with pytest.raises(rulekit.TracingError) as info:
        rulekit.grad(original(sp.logsumexp))(x)
    msg = str(info.value)
    assert "Fix: call scipy.special.logsumexp(...) through its module, or " in msg, msg
    assert "rules.scipy.special.logsumexp(...)" in msg, msg
    np.testing.assert_allclose(rulekit.grad(S.logsumexp)(x), sp.softmax(x), rtol=1e-14)
    np.testing.assert_allclose(rulekit.grad(sp.logsumexp)(x), sp.softmax(x), rtol=1e-14)
    check_grads(sp.logsumexp, x)
    w = np.array([0.3, -1.2])
    check_grads(lambda x: np.einsum("i,i", sp.softmax(x), w), x)
