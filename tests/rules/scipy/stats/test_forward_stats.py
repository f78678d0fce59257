"""Forward rules and differentiable pullbacks of the scipy.stats methods
(rules/scipy/stats/forward.py): norm, gamma, beta, chi2 (pdf, logpdf, cdf, logcdf, sf,
logsf as each has them), multivariate_normal (logpdf, pdf, entropy) and dirichlet (logpdf,
pdf).

Over C/F/negative-stride/strided layouts and float32/float64: `rulekit.jvp` against central
differences (every argument with a tangent, loc=/scale= given by keyword too), and
`rulekit.hessian` of a scalar function of the call in the three modes against central
differences of the reverse engine's gradient `rulekit.grad`. Then the values (scipy's to
rounding, outside the support and at invalid parameters too), the refusals (a cdf's shape
parameter, a singular covariance), and the nested pullback's keyword rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.stats as sst
from forward_rules import HESSIAN_GRID, HESSIAN_IDS, MODES, fd_hessian, fd_jvp

import rulekit
import rules.scipy.stats  # noqa: F401  (routes scipy.stats's methods to the rules)
from rules.scipy.stats.multivariate import SingularCovarianceError
from testutils._layouts import relayout

LAYOUTS = ("C", "F", "negative", "strided")
DTYPES = (np.float64, np.float32)

# family → (z range inside the support, shape parameter ranges, integer shapes for cdfs)
FAMILIES: dict[str, tuple[tuple[float, float], list[tuple[float, float]], list[int]]] = {
    "norm": ((-2.0, 2.0), [], []),
    "gamma": ((0.5, 3.5), [(1.5, 4.0)], [2]),
    "beta": ((0.15, 0.85), [(1.5, 4.0), (1.5, 4.0)], [2, 3]),
    "chi2": ((0.5, 4.5), [(2.5, 6.0)], [3]),
}
METHODS = {
    "norm": ("pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"),
    "gamma": ("pdf", "logpdf", "cdf"),
    "beta": ("pdf", "logpdf", "cdf"),
    "chi2": ("pdf", "logpdf", "cdf"),
}
UNIVARIATE = [(d, m) for d, ms in METHODS.items() for m in ms]
DENSITIES = ("pdf", "logpdf")


def _params(family: str, method: str, dtype: Any, layout: str, seed: int) -> Any:
    """(p, unpack): one (3, 4) array in `layout` holding x (columns 0–1), a column loc
    (column 2) and the scalar parameters (column 3: shapes, then scale); unpack(p) gives the
    call's (x, *shapes, loc, scale). A cdf's shapes are integers (constants)."""
    rng = np.random.default_rng(seed)
    (lo, hi), shape_ranges, int_shapes = FAMILIES[family]
    p = np.zeros((3, 4))
    p[:, 2] = rng.uniform(-0.1, 0.1, 3)  # loc
    scale = rng.uniform(0.8, 1.3)
    p[:, :2] = p[:, 2:3] + scale * rng.uniform(lo, hi, (3, 2))
    density = method in DENSITIES
    k = len(shape_ranges) if density else 0
    for i, (a, b) in enumerate(shape_ranges[:k]):
        p[i, 3] = rng.uniform(a, b)
    p[k, 3] = scale
    p = relayout(p.astype(dtype), layout)

    def unpack(q: Any) -> tuple[Any, ...]:
        shapes = [q[i, 3] for i in range(k)] if density else list(int_shapes)
        return (q[:, :2], *shapes, q[:, 2:3], q[k, 3])

    return p, unpack


_REFERENCE: dict[Any, np.ndarray] = {}  # (the differences, one per case: layouts and modes share)


def _check_hessian(f: Callable[[Any], Any], x: np.ndarray, mode: str, key: Any) -> None:
    """The Hessian in float64 C order (every mode); elsewhere H·v along a random v, one
    pass instead of one per element of x, against the same differences of gradients."""
    single = x.dtype == np.float32
    if key not in _REFERENCE:
        _REFERENCE[key] = fd_hessian(f, np.ascontiguousarray(x))
    ref = _REFERENCE[key]
    scale = 1 + np.max(np.abs(ref))
    tol = 1e-3 if single else 1e-6
    if not single and x.flags.c_contiguous:
        H = rulekit.hessian(f, mode=mode)(x)
        assert np.shape(H) == x.shape + x.shape
        np.testing.assert_allclose(H, ref, rtol=tol, atol=tol * scale)
        return
    v = np.asarray(np.random.default_rng(5).normal(size=x.shape), x.dtype)
    _, Hv = rulekit.hvp(f, (x,), (v,), mode=mode)
    assert np.shape(Hv) == x.shape and Hv.dtype == x.dtype
    want = (ref.reshape(x.size, x.size) @ v.ravel().astype(np.float64)).reshape(x.shape)
    np.testing.assert_allclose(Hv, want, rtol=tol, atol=tol * scale * np.max(np.abs(v)))


def _check_jvp(f: Callable[..., Any], primals: tuple[Any, ...], single: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    tangents = tuple(np.asarray(rng.normal(size=np.shape(p)), np.result_type(p)) for p in primals)
    y, t = rulekit.jvp(f, primals, tangents)
    want = f(*primals)
    np.testing.assert_allclose(y, want, rtol=1e-6 if single else 1e-12)  # (float32: rounding)
    assert np.shape(t) == np.shape(want) and np.result_type(t) == np.result_type(want)
    tol = 1e-3 if single else 1e-6
    fd = fd_jvp(f, primals, tangents, {}, 1e-6)
    np.testing.assert_allclose(t, fd, rtol=tol, atol=tol * (1 + np.max(np.abs(fd))))


# -- univariate: jvp and hessian ------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("family,method", UNIVARIATE)
def test_univariate_jvp(family: str, method: str, dtype: Any, layout: str) -> None:
    fn = getattr(getattr(sst, family), method)
    p, unpack = _params(family, method, dtype, layout, seed=11)
    x, *shapes, loc, scale = unpack(p)
    k = len(shapes) if method in DENSITIES else 0
    single = dtype == np.float32
    # every argument positional, each with a tangent (a cdf's shapes: constants)
    consts = shapes[k:] if k < len(shapes) else []

    def positional(x: Any, *rest: Any) -> Any:
        return fn(x, *rest[:k], *consts, *rest[k:])

    _check_jvp(positional, (x, *shapes[:k], loc, scale), single, seed=1)

    # loc= and scale= by keyword, with tangents
    def keywords(x: Any, loc: Any, scale: Any) -> Any:
        return fn(x, *shapes, loc=loc, scale=scale)

    _check_jvp(keywords, (x, loc, scale), single, seed=2)


@pytest.mark.parametrize("dtype,layout,mode", HESSIAN_GRID, ids=HESSIAN_IDS)
@pytest.mark.parametrize("family,method", UNIVARIATE)
def test_univariate_hessian(family: str, method: str, dtype: Any, layout: str, mode: str) -> None:
    fn = getattr(getattr(sst, family), method)
    p, unpack = _params(family, method, dtype, layout, seed=12)

    def f(q: Any) -> Any:
        return np.sum(fn(*unpack(q)) ** 2)

    _check_hessian(f, p, mode, key=(family, method, np.dtype(dtype).name))


# -- multivariate normal and dirichlet ------------------------------------------------------------


def _mvn_p(dtype: Any, layout: str) -> np.ndarray:
    """(3, 4): two points in rows 0–1, columns 0–1; the mean in row 2, columns 0–1; the cov's
    lower triangle in rows 0–1, columns 2–3 (p[0, 3], above the diagonal, is not read)."""
    rng = np.random.default_rng(20)
    p = rng.normal(size=(3, 4)) * 0.5
    p[0, 2], p[1, 2], p[1, 3], p[0, 3] = 2.0, 0.4, 1.5, -7.0
    return relayout(p.astype(dtype), layout)


MVN: dict[str, Callable[[Any], Any]] = {
    "logpdf": lambda q: sst.multivariate_normal.logpdf(q[:2, :2], q[2, :2], q[:2, 2:4]),
    "pdf": lambda q: sst.multivariate_normal.pdf(q[:2, :2], q[2, :2], q[:2, 2:4]) * 10,
    "logpdf-one-point": lambda q: sst.multivariate_normal.logpdf(q[0, :2], q[2, :2], q[:2, 2:4]),
    "logpdf-diag-cov": lambda q: sst.multivariate_normal.logpdf(q[:2, :2], q[2, :2], q[:2, 2] ** 2),
    "logpdf-scalar-cov": lambda q: sst.multivariate_normal.logpdf(q[:2, 0], None, q[1, 3]),
    "entropy": lambda q: sst.multivariate_normal.entropy(q[2, :2], q[:2, 2:4]),
}


def _scalar(y: Any) -> Any:
    return np.sum(y**2)  # (of a NumPy scalar too)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", list(MVN))
def test_mvn_jvp(case: str, dtype: Any, layout: str) -> None:
    _check_jvp(MVN[case], (_mvn_p(dtype, layout),), dtype == np.float32, seed=3)


@pytest.mark.parametrize("dtype,layout,mode", HESSIAN_GRID, ids=HESSIAN_IDS)
@pytest.mark.parametrize("case", list(MVN))
def test_mvn_hessian(case: str, dtype: Any, layout: str, mode: str) -> None:
    f = lambda q: _scalar(MVN[case](q))  # noqa: E731
    _check_hessian(f, _mvn_p(dtype, layout), mode, key=("mvn", case, np.dtype(dtype).name))


def _dirichlet_p(dtype: Any, layout: str) -> np.ndarray:
    """(3, 4): three points with K − 1 = 3 components in columns 0–2 (components along the
    first axis), alpha's first three entries in column 3."""
    rng = np.random.default_rng(21)
    p = np.zeros((3, 4))
    p[:, :3] = rng.dirichlet(np.full(4, 6.0), size=3).T[:3]
    p[:, 3] = rng.uniform(1.5, 4.0, 3)
    return relayout(p.astype(dtype), layout)


def _alpha(q: Any) -> Any:
    return np.concatenate([q[:, 3], np.full(1, 2.5, q.dtype)])


DIRICHLET: dict[str, Callable[[Any], Any]] = {
    "logpdf": lambda q: sst.dirichlet.logpdf(q[:, :3], _alpha(q)),
    "pdf": lambda q: sst.dirichlet.pdf(q[:, :3], _alpha(q)),
    "logpdf-one-point": lambda q: sst.dirichlet.logpdf(q[:, 0], _alpha(q)),
    "logpdf-full-x": lambda q: sst.dirichlet.logpdf(
        np.concatenate([q[:, 1], 1 - np.sum(q[:, 1], keepdims=True)]), _alpha(q)
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", list(DIRICHLET))
def test_dirichlet_jvp(case: str, dtype: Any, layout: str) -> None:
    _check_jvp(DIRICHLET[case], (_dirichlet_p(dtype, layout),), dtype == np.float32, seed=4)


@pytest.mark.parametrize("dtype,layout,mode", HESSIAN_GRID, ids=HESSIAN_IDS)
@pytest.mark.parametrize("case", list(DIRICHLET))
def test_dirichlet_hessian(case: str, dtype: Any, layout: str, mode: str) -> None:
    f = lambda q: _scalar(DIRICHLET[case](q))  # noqa: E731
    _check_hessian(f, _dirichlet_p(dtype, layout), mode, key=("dir", case, np.dtype(dtype).name))


# -- values: scipy's, outside the support and at invalid parameters too ---------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("family,method", UNIVARIATE)
def test_univariate_values(family: str, method: str, dtype: Any) -> None:
    """The forward rule's value is scipy's (dtype, type, −inf/0/1/NaN outside), and its
    tangent is 0 where the value is a constant of the support's outside."""
    rng = np.random.default_rng(30)
    fn = getattr(getattr(sst, family), method)
    x = (rng.normal(size=(3, 5)) * 2).astype(dtype)
    x[0, :4] = [np.nan, -np.inf, np.inf, 0.0]
    shapes = [rng.uniform(-0.5, 3.0, (1, 5)) for _ in FAMILIES[family][1]]
    loc, scale = rng.uniform(-0.5, 0.5, (3, 1)), rng.uniform(-0.3, 2.0, (1, 5))
    args = (x, *shapes, loc, scale)
    want = fn(*args)
    consts = args[1:] if method not in DENSITIES else ()
    rest = args[1 + len(consts) :]
    y, t = rulekit.jvp(lambda v, *r: fn(v, *consts, *r), (x, *rest),
                       (np.ones_like(x), *(np.zeros_like(a) for a in rest)))  # fmt: skip
    assert y.dtype == want.dtype and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-13, atol=0)
    # the tangent: 0 where the value is a constant (a point at ±inf, outside the support,
    # an invalid parameter), finite where it is scipy's formula
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (x - loc) / scale
    valid = (scale > 0) & np.all([s > 0 for s in shapes], axis=0) if shapes else scale > 0
    lo, hi = {"norm": (-np.inf, np.inf), "beta": (0, 1)}.get(family, (0, np.inf))
    inside = (lo < z) & (z < hi) if method not in DENSITIES else (lo <= z) & (z <= hi)
    formula = valid & inside & np.isfinite(z)
    assert np.all(t[~formula] == 0)
    assert np.all(np.isfinite(t[formula]))
    # 0-d inputs give a NumPy scalar, as scipy's
    z = np.float64(FAMILIES[family][0][0] + 0.1)
    s = [2.5] * len(FAMILIES[family][1])
    y0, _ = rulekit.jvp(lambda v: fn(v, *s), (z,), (np.float64(1.0),))
    assert type(y0) is type(fn(z, *s)) and y0 == pytest.approx(fn(z, *s), rel=1e-13)


def test_outside_the_support_does_not_spoil_a_shared_parameter() -> None:
    """A point outside the support (logpdf −inf) adds nothing to the gradient of a parameter
    shared by every point, at any order (the formula is not evaluated there)."""
    x = np.array([-1.0, 0.5, 1.5, 2.0])

    def f(a: Any) -> Any:
        y = sst.gamma.logpdf(x, a[0], 0.0, a[1])
        return np.sum(np.where(np.isfinite(y), y, 0.0))

    a = np.array([2.5, 1.2])
    for mode in MODES:
        H = rulekit.hessian(f, mode=mode)(a)
        assert np.all(np.isfinite(H))
        np.testing.assert_allclose(H, fd_hessian(f, a), rtol=1e-6, atol=1e-6)


# -- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["gamma", "beta", "chi2"])
def test_cdf_shape_parameter_refused(family: str) -> None:
    """A cdf's active shape parameter raises NotImplementedError in every mode, as in reverse
    mode; a constant one (a float closed over) is fine under a nested pullback."""
    n = len(FAMILIES[family][1])
    x = np.array([0.3, 0.6])
    shapes = np.full(n, 2.5)
    cdf = getattr(sst, family).cdf
    with pytest.raises(NotImplementedError, match="incomplete"):
        rulekit.jvp(lambda s: cdf(x, *s), (shapes,), (np.ones(n),))
    with pytest.raises(NotImplementedError, match="incomplete"):
        rulekit.hessian(lambda s: np.sum(cdf(x, *s)))(shapes)

    def g(v: Any) -> Any:
        return np.sum(cdf(v, *[2.5] * n) ** 2)  # (Python floats: constants)

    for mode in MODES:
        np.testing.assert_allclose(rulekit.hessian(g, mode=mode)(x), fd_hessian(g, x),
                                   rtol=1e-6, atol=1e-7)  # fmt: skip


def test_singular_covariance() -> None:
    """A singular cov: scipy's LinAlgError without allow_singular; SingularCovarianceError
    when differentiated with it (its density lives on a subspace)."""
    cov = np.array([[1.0, 1.0], [1.0, 1.0]])
    x = np.array([[0.1, 0.1], [0.3, 0.3]])
    with pytest.raises(np.linalg.LinAlgError):
        rulekit.jvp(lambda c: sst.multivariate_normal.logpdf(x, None, c), (cov,), (cov,))
    with pytest.raises(SingularCovarianceError):
        rulekit.jvp(lambda c: sst.multivariate_normal.logpdf(x, None, c, True), (cov,), (cov,))
    with pytest.raises(SingularCovarianceError):
        rulekit.hessian(lambda c: sst.multivariate_normal.entropy(None, c))(cov)


def test_off_simplex_raises_scipys_error() -> None:
    x = np.array([0.5, 0.6, 0.2])
    with pytest.raises(ValueError, match=r"entry|simplex"):
        rulekit.jvp(lambda a: sst.dirichlet.logpdf(x, a), (np.full(4, 2.0),), (np.ones(4),))


def test_keyword_tangent_in_nested_pullback_refused() -> None:
    """Differentiable pullbacks take derivatives of positional arguments: a traced loc= under
    a nested grad raises TracingError naming the fix (forward mode takes it)."""
    x = np.array([0.2, -0.4])
    with pytest.raises(rulekit.TracingError, match="positionally"):
        rulekit.hessian(lambda m: np.sum(sst.norm.logpdf(x, loc=m) ** 2))(np.array([0.1, 0.3]))
    H = rulekit.hessian(lambda m: np.sum(sst.norm.logpdf(x, m) ** 2))(np.array([0.1, 0.3]))
    np.testing.assert_allclose(
        H, fd_hessian(lambda m: np.sum(sst.norm.logpdf(x, m) ** 2), np.array([0.1, 0.3])),
        rtol=1e-6, atol=1e-7,
    )  # fmt: skip
