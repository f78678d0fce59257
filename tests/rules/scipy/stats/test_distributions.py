"""Tests for rules.scipy.stats (the scipy.stats distributions autograd
differentiates): the registered examples and hypothesis-generated calls through check_rule,
edge cases (tails, outside the support, refused arguments) and the engine on user code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.stats as sst
from fdcheck import check_grads, fd_grad
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules  # noqa: F401  (registers numpy's rules: np.sum, @, ... for the engine tests)
import rules.scipy.stats as S
from rulekit import CoDual, NoRData, function_name, registry, zero_codual
from rules.scipy._routing import original
from rules.scipy.stats.multivariate import SingularCovarianceError
from testutils import check_rule

FAST = settings(max_examples=8, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)

# (namespace name, z range inside the support, shape-parameter ranges, integer shapes for cdfs)
FAMILIES: dict[str, tuple[tuple[float, float], list[tuple[float, float]], list[int]]] = {
    "norm": ((-2.5, 2.5), [], []),
    "t": ((-3.0, 3.0), [(2.0, 6.0)], [3]),
    "beta": ((0.1, 0.9), [(1.5, 4.0), (1.5, 4.0)], [2, 3]),
    "gamma": ((0.3, 4.0), [(1.5, 4.0)], [2]),
    "chi2": ((0.3, 5.0), [(2.5, 6.0)], [3]),
}
DENSITIES = ("pdf", "logpdf")
UNIVARIATE = [(d, m) for d in FAMILIES for m in getattr(S, d).methods]


# -- registration (the examples run in test_rule_examples.py) -----------------------------------


def test_every_listed_method_is_registered() -> None:
    modules = ("rules.scipy.stats.distributions", "rules.scipy.stats.multivariate")
    names = {function_name(r.f) for m in modules for r in registry.entries(module=m)}
    expected = {
        f"scipy.stats.{d}.{m}"
        for d in (
            "norm",
            "t",
            "beta",
            "gamma",
            "chi2",
            "poisson",
            "multivariate_normal",
            "dirichlet",
        )
        for m in getattr(S, d).methods
    }
    assert names == expected and len(expected) == 27


# -- univariate continuous: hypothesis over layouts, shapes and dtypes ------------------------


@pytest.mark.parametrize(("dist", "method"), UNIVARIATE)
@FAST
@given(st.sampled_from(["positional", "keyword", "scalars"]),
       st.sampled_from([np.float32, np.float64]), seeds)  # fmt: skip
def test_univariate(dist: str, method: str, layout: str, dtype: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    (lo, hi), ranges, ints = FAMILIES[dist]
    fn = getattr(getattr(S, dist), method)
    density = method in DENSITIES
    if layout == "scalars":
        loc: Any = float(rng.uniform(-1, 1))
        scale: Any = float(rng.uniform(0.5, 2))
        x: Any = dtype(loc + scale * rng.uniform(lo, hi))
        shapes: list[Any] = [float(rng.uniform(a, b)) for a, b in ranges] if density else ints
        check_rule(fn, x, *shapes, loc, scale)
        return
    loc, scale = rng.uniform(-1, 1, (2, 1)), rng.uniform(0.5, 2, 3)
    x = (loc + scale * rng.uniform(lo, hi, (2, 3))).astype(dtype)
    if layout == "positional":
        shapes = [rng.uniform(a, b, (1, 3)) for a, b in ranges] if density else ints
        check_rule(fn, x, *shapes, loc, scale)
    else:  # loc/scale as keyword arrays (CoDuals); cdf shapes as plain keyword floats
        kw: dict[str, Any] = {"loc": loc, "scale": scale}
        if density:
            check_rule(fn, x, *[rng.uniform(a, b) for a, b in ranges], kwargs=kw)
        else:
            names = [n.strip() for n in (getattr(sst, dist).shapes or "").split(",") if n]
            shp = {n: v + 0.5 for n, v in zip(names, ints, strict=True)}  # non-integer
            check_rule(fn, x, kwargs={**shp, **kw})


@pytest.mark.parametrize(("dist", "method"), [(d, m) for d, m in UNIVARIATE if d != "norm"])
def test_cdf_shape_parameters_are_refused(dist: str, method: str) -> None:
    """An active shape parameter of a cdf-type method raises; of a density, it is differentiated."""
    _, ranges, _ = FAMILIES[dist]
    fn = getattr(getattr(S, dist), method)
    x = {"beta": 0.4, "gamma": 1.2, "chi2": 1.2}.get(dist, 0.3)
    args = [
        zero_codual(fn),
        CoDual(np.array([x])),
        *(zero_codual(float(a + 0.1)) for a, _ in ranges),
    ]
    if method in DENSITIES:
        rulekit.rrule(*args)
    else:
        with pytest.raises(NotImplementedError, match="no rule for the derivative"):
            rulekit.rrule(*args)


# -- poisson ---------------------------------------------------------------------------------


@pytest.mark.parametrize("method", S.poisson.methods)
@FAST
@given(st.sampled_from([(), (4,), (2, 3)]), st.booleans(), seeds)
def test_poisson(method: str, shape: tuple[int, ...], keyword: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 7, shape) if shape else int(rng.integers(0, 7))
    mu = rng.uniform(0.5, 5.0, shape[-1:]) if shape else float(rng.uniform(0.5, 5.0))
    fn = getattr(S.poisson, method)
    if keyword and shape:
        check_rule(fn, k, kwargs={"mu": mu, "loc": -1})
    else:
        check_rule(fn, k, mu)


def test_poisson_count_is_refused() -> None:
    with pytest.raises(NotImplementedError, match="'k'"):
        rulekit.grad(lambda k: np.sum(S.poisson.pmf(k, 2.0)))(np.array([1.0, 2.0]))
    with pytest.raises(NotImplementedError, match="'loc'"):
        rulekit.grad(lambda loc: np.sum(S.poisson.logpmf(np.array([3]), 2.0, loc)))(1.0)


# -- multivariate normal, dirichlet ------------------------------------------------------------


FORMS = ["full", "diag", "scalar"]


def spd(rng: np.random.Generator, d: int) -> np.ndarray:
    a = rng.normal(size=(d, d))
    return a @ a.T / d + np.eye(d)


@pytest.mark.parametrize("method", ["logpdf", "pdf"])
@FAST
@given(st.sampled_from([1, 2, 3]), st.sampled_from([(), (3,), (2, 1)]), st.sampled_from(FORMS),
       st.booleans(), st.booleans(), seeds)  # fmt: skip
def test_multivariate_normal(method: str, d: int, batch: tuple[int, ...], form: str,
                             has_mean: bool, keyword: bool, seed: int) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(*batch, d))
    if d == 1 and batch == (3,):
        x = x[:, 0]  # scipy: a 1-d x of a 1-d normal is a batch of points
    cov = {"full": spd(rng, d), "diag": rng.uniform(0.5, 2, d), "scalar": rng.uniform(0.5, 2)}[form]
    mean = rng.normal(size=d) if has_mean or form != "full" else None
    fn = getattr(S.multivariate_normal, method)
    if keyword:
        check_rule(fn, x, kwargs={"mean": mean, "cov": cov, "allow_singular": True})
    else:
        check_rule(fn, x, mean, cov)


@FAST
@given(st.sampled_from([1, 2, 3]), st.sampled_from(["full", "diag", "scalar"]), seeds)
def test_multivariate_normal_entropy(d: int, form: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cov = {"full": spd(rng, d), "diag": rng.uniform(0.5, 2, d), "scalar": rng.uniform(0.5, 2)}[form]
    check_rule(S.multivariate_normal.entropy, rng.normal(size=d), cov)


def test_multivariate_normal_cov_reads_the_lower_triangle() -> None:
    """scipy ignores cov's strict upper triangle: its cotangent is 0 there, 2Σ̄ below."""
    rng = np.random.default_rng(1)
    x, C = rng.normal(size=(4, 3)), spd(rng, 3)
    C[0, 2] = 50.0  # ignored by scipy
    g = rulekit.grad(lambda C: np.sum(S.multivariate_normal.logpdf(x, None, C)))(C)
    assert np.all(np.triu(g, 1) == 0)
    Cs = np.tril(C) + np.tril(C, -1).T
    Ci, r = np.linalg.inv(Cs), x
    G = 0.5 * sum(Ci @ np.outer(ri, ri) @ Ci - Ci for ri in r)
    assert np.allclose(g, np.tril(2 * G, -1) + np.diag(np.diag(G)))


def test_multivariate_normal_singular_cov_is_refused() -> None:
    x, C = np.array([0.5, 0.5]), np.ones((2, 2))  # rank 1
    with pytest.raises(SingularCovarianceError, match="singular"):
        rulekit.grad(lambda x: S.multivariate_normal.logpdf(x, None, C, True))(x)
    with pytest.raises(SingularCovarianceError):
        rulekit.grad(lambda C: S.multivariate_normal.entropy(None, C))(C)
    # a positional list is not a pattern of these rules (they take arrays)
    with pytest.raises(rulekit.MissingRuleError):
        rulekit.grad(lambda x: S.multivariate_normal.logpdf(x, [0.0, 0.0], np.eye(2)))(x)


@pytest.mark.parametrize("method", ["logpdf", "pdf"])
@FAST
@given(st.sampled_from([2, 3, 4]), st.sampled_from([None, 1, 3]), seeds)
def test_dirichlet(method: str, K: int, n: int | None, seed: int) -> None:
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.7, 4.0, K)
    pts = rng.dirichlet(np.full(K, 6.0), size=n or 1).T  # (K, n)
    x = pts[: K - 1] if n else pts[: K - 1, 0]  # K−1 components: the kit may perturb them freely
    check_rule(getattr(S.dirichlet, method), x, alpha)


def test_dirichlet_full_simplex_point() -> None:
    """x with all K components: x̄ = ȳ(α−1)/x (the natural extension off the simplex, as
    autograd); along the simplex (Σẋ = 0) it is the exact derivative."""
    rng = np.random.default_rng(2)
    alpha, x = rng.uniform(1.5, 4.0, 4), rng.dirichlet(np.full(4, 6.0))
    gx, ga = rulekit.grad(lambda x, a: S.dirichlet.logpdf(x, a), argnums=(0, 1))(x, alpha)
    assert np.allclose(gx, (alpha - 1) / x)
    v = rng.normal(size=4)
    v -= v.mean()  # a direction inside the simplex
    h = 1e-6
    fd = (sst.dirichlet.logpdf(x + h * v, alpha) - sst.dirichlet.logpdf(x - h * v, alpha)) / (2 * h)
    assert np.isclose(gx @ v, fd, rtol=1e-6)
    assert np.allclose(ga, fd_grad(lambda a: sst.dirichlet.logpdf(x, a), (alpha,), 0), rtol=1e-6)


# -- edges -------------------------------------------------------------------------------------


def grad1(f: Callable[[Any], Any], x: Any) -> Any:
    return rulekit.grad(lambda v: np.sum(f(v)))(x)


def test_norm_log_cdf_tails_are_stable() -> None:
    """d/dx log Φ(x) = φ(x)/Φ(x) ~ −x as x → −∞: from logpdf − logcdf, never 0/0."""
    z = np.array([-1e3, -40.0, 0.0, 40.0, 1e3])
    g = grad1(S.norm.logcdf, z)
    assert np.allclose(g[:2], [1000.001, 40.02496885], rtol=1e-6) and g[-1] == 0
    assert np.allclose(grad1(S.norm.logsf, -z), -g)


def test_outside_the_support_the_gradient_is_zero() -> None:
    assert np.array_equal(grad1(lambda x: S.gamma.logpdf(x, 2.0), np.array([-1.0])), [0.0])
    assert np.array_equal(grad1(lambda x: S.beta.pdf(x, 2.0, 3.0), np.array([-0.5, 1.5])), [0, 0])
    assert np.array_equal(grad1(lambda x: S.beta.cdf(x, 2, 3), np.array([-0.5, 1.5])), [0, 0])
    ga = rulekit.grad(lambda a: np.sum(S.gamma.logpdf(np.array([-1.0, 1.0]), a)))(2.0)
    assert np.isclose(ga, np.log(1.0) - 0.42278433509846713)  # only x = 1 counts: −ψ(2)
    # invalid parameters: scipy gives NaN, so does the gradient
    assert np.isnan(rulekit.grad(lambda s: np.sum(S.norm.logpdf(np.array([0.5]), 0.0, s)))(-1.0))


def test_special_points() -> None:
    # t with df = ∞ is the normal distribution (scipy agrees); ∂df = 0 there
    _, (gx, gdf) = rulekit.value_and_grad(lambda x, d: np.sum(S.t.logpdf(x, d)), argnums=(0, 1))(
        np.array([0.5]), np.inf
    )
    assert np.allclose(gx, [-0.5]) and gdf == 0.0
    # xlogy convention at 0: beta(1, b) at x = 0, chi2(2) at x = 0, poisson μ = 0 at k = 0
    assert np.allclose(grad1(lambda x: S.beta.pdf(x, 1.0, 3.0), np.array([0.0])), [-6.0])
    assert np.allclose(grad1(lambda x: S.chi2.logpdf(x, 2.0), np.array([0.0])), [-0.5])
    assert np.allclose(grad1(lambda m: S.poisson.logpmf(np.array([0]), m), np.array([0.0])), [-1])


# -- the engine on user code -------------------------------------------------------------------


def test_engine_univariate() -> None:
    rng = np.random.default_rng(3)
    x, mu, sig = rng.normal(size=6), rng.normal(size=6), rng.uniform(0.5, 2, 6)
    check_grads(lambda x, m, s: np.sum(S.norm.logpdf(x, m, s)), x, 0.3, 1.2)  # traced scalars
    check_grads(lambda x, m, s: np.sum(S.norm.logcdf(x, loc=m, scale=s)), x, mu, sig)
    check_grads(lambda x, m, s: np.sum(S.norm.logsf(x, m, s) * S.norm.pdf(x, m)), x, mu, sig)
    check_grads(lambda x, m, s: np.sum(S.norm.cdf(x, m, s) - S.norm.sf(x, m, s) ** 2), x, 0.1, sig)
    check_grads(lambda x, d, m, s: np.sum(S.t.logpdf(x, d, m, s)), x, 3.5, 0.2, 1.3)
    check_grads(lambda x, m: np.sum(S.t.logcdf(x, 4, m) + S.t.cdf(x, 2.5, loc=m)), x, mu)
    u = rng.uniform(0.1, 0.9, 5)
    check_grads(lambda u, a, b: np.sum(S.beta.logpdf(u, np.exp(a), b)), u, 0.4, 2.5)
    check_grads(lambda u, a, b: np.sum(S.beta.pdf(u, a, b) + S.beta.cdf(u, 2, 3)), u, 1.7, 2.5)
    p = rng.uniform(0.3, 4.0, 5)
    check_grads(lambda p, a, s: np.sum(S.gamma.logpdf(p, a, 0.0, s)), p, 2.2, 1.4)
    check_grads(lambda p, a: np.sum(S.gamma.pdf(p, a) * S.gamma.cdf(p, 2)), p, 2.2)
    check_grads(lambda p, k: np.sum(S.chi2.logpdf(p, k) + S.chi2.pdf(p, k)), p, 3.3)
    check_grads(lambda p: np.sum(S.chi2.cdf(p, 3)), p)
    # integer data and plain keyword lists are constants
    check_grads(lambda m, s: np.sum(S.norm.logpdf(np.arange(4), m, s)), 0.5, 1.5)
    check_grads(lambda m: np.sum(S.t.logpdf(np.arange(3), m, scale=[1.0, 2.0, 3.0])), 0.5)
    k = rng.integers(0, 6, 5)
    check_grads(lambda th: np.sum(S.poisson.logpmf(k, np.exp(th))), rng.normal(size=5))
    check_grads(lambda m: np.sum(S.poisson.pmf(k, m) + S.poisson.cdf(k, m)), 2.5)


def test_engine_keyword_scalar_is_refused_by_the_engine() -> None:
    with pytest.raises(rulekit.TracingError, match="keyword"):
        rulekit.grad(lambda m: np.sum(S.norm.logpdf(np.ones(2), loc=m)))(0.3)


def test_engine_multivariate() -> None:
    rng = np.random.default_rng(4)
    X, mu, A = rng.normal(size=(5, 3)), rng.normal(size=3), rng.normal(size=(3, 3))

    def nll(X: Any, mu: Any, A: Any) -> Any:
        return -np.sum(S.multivariate_normal.logpdf(X, mu, A @ A.T + np.eye(3)))

    check_grads(nll, X, mu, A)
    check_grads(lambda x, A: S.multivariate_normal.pdf(x, None, A @ A.T + np.eye(3)), X[0], A)
    check_grads(lambda A: S.multivariate_normal.entropy(None, A @ A.T + np.eye(3)), A)
    check_grads(
        lambda s: np.sum(S.multivariate_normal.logpdf(X, np.zeros(3), cov=s * s)),
        rng.uniform(1, 2, 3),
    )
    x, alpha = rng.dirichlet(np.full(4, 5.0), size=3).T[:3], rng.uniform(1.5, 3, 4)
    check_grads(lambda x, a: np.sum(S.dirichlet.logpdf(x, np.exp(a))), x, np.log(alpha))
    check_grads(lambda a: np.sum(S.dirichlet.pdf(x, a)), alpha)
    check_grads(lambda x: np.sum(S.dirichlet.logpdf(x, alpha=[1.5, 2.0, 3.0, 2.5])), x)


def test_plain_calls_go_to_scipy() -> None:
    x = np.array([0.2, 0.7])
    own = original(sst.beta.logpdf)(x, 2.0, 3.0)  # scipy's own method, behind the routed one
    np.testing.assert_array_equal(S.beta.logpdf(x, 2.0, 3.0), own, strict=True)
    np.testing.assert_array_equal(sst.beta.logpdf(x, 2.0, 3.0), own, strict=True)
    # the wrapper's fn is scipy's own bound method; the distribution's method routes to it
    assert S.norm.pdf.fn == original(sst.norm.pdf) and S.norm.pdf.fn.__self__ is sst.norm
    assert S.norm.pdf.fn != sst.norm.pdf
    assert sst.norm.pdf.__rulekit_primitive__ is S.norm.pdf
    assert sst.t.cdf.__rulekit_primitive__ is S.t.cdf
    # another instance of the class (a frozen distribution makes one) runs scipy's own method
    other = type(sst.norm)(name="norm")
    np.testing.assert_array_equal(other.pdf(x), original(sst.norm.pdf)(x), strict=True)
    with pytest.raises(rulekit.TracingError):
        rulekit.grad(lambda x: np.sum(other.pdf(x)))(x)
    assert function_name(S.norm.pdf) == "scipy.stats.norm.pdf"
    assert function_name(S.multivariate_normal.logpdf) == "scipy.stats.multivariate_normal.logpdf"
    assert repr(S.t) == "rules.scipy.stats.t(pdf, logpdf, cdf, logcdf)"
    with pytest.raises(AttributeError, match="differentiable methods"):
        S.norm.ppf  # noqa: B018
    _, pb = rulekit.rrule(zero_codual(S.norm.pdf), CoDual(x))  # nothing active: no work
    assert pb(NoRData()) == (NoRData(), NoRData())


def test_traced_calls_through_distribution_methods() -> None:
    """The routed `scipy.stats.t.cdf` differentiates; scipy's own bound method (taken before the
    routing was installed) refuses, naming the fix."""
    x = np.array([-0.4, 0.3, 1.1])
    check_grads(lambda x: np.sum(sst.t.cdf(x, 3.0)), x)
    check_grads(lambda x: np.sum(sst.norm.logpdf(x, 0.2, 1.5)), x)
    own = original(sst.t.cdf)
    with pytest.raises(rulekit.TracingError) as info:
        rulekit.grad(lambda x: np.sum(own(x, 3.0)))(x)
    msg = str(info.value)
    assert "Fix: call scipy.stats.t.cdf(...) through its module, or " in msg, msg
    assert "rules.scipy.stats.t.cdf(...)" in msg and "norm" not in msg, msg
