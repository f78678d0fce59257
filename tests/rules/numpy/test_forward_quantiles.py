"""Forward rules and differentiable pullbacks of np.median, np.nanmedian, np.quantile,
np.nanquantile, np.percentile and np.nanpercentile (rules/numpy/quantiles.py: numpy's
formula on a sort, traced).

Over C/F/negative-stride/strided layouts and float32/float64: `rulekit.jvp` against central
differences (in x, and in a traced q), and `rulekit.hessian` of a scalar function of the
call in the three modes against central differences of the reverse engine's gradient
`rulekit.grad`. The inputs keep away from the kinks: distinct values (no order change within
a difference step) and q whose virtual index is at least 0.01 from an integer. Then the
values (numpy's, bit for bit, for every method, dtype and option), ties and NaN lanes (the
reverse rule's conventions), and the errors."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from forward_rules import HESSIAN_GRID, MODES, fd_hessian, vjp_of

import rulekit
import rules  # noqa: F401  (registers the rules)
from rules.numpy.quantiles import _METHODS
from testutils._layouts import relayout

LAYOUTS = ("C", "F", "negative", "strided")
DTYPES = (np.float64, np.float32)
NAN_FNS = (np.nanmedian, np.nanquantile, np.nanpercentile)


def _x(shape: tuple[int, ...], dtype: Any, layout: str = "C", nans: bool = False) -> Any:
    """Distinct values at least 0.1 apart (a difference step never reorders them); with
    `nans`, one NaN in the first lane along the last axis (a lane of 3 values there)."""
    rng = np.random.default_rng(0)
    size = int(np.prod(shape))
    x = rng.permutation(size).reshape(shape) * 0.25 - size / 8 + 0.05 * rng.uniform(size=shape)
    if nans:
        x[(0,) * (len(shape) - 1) + (1,)] = np.nan
    return relayout(np.asarray(x, dtype=dtype), layout)


def _q(fn: Any, q: Any) -> Any:
    return q * 100 if fn in (np.percentile, np.nanpercentile) else q


#: (id, fn, extra positional args after x, keywords); x has shape (3, 4), lanes of 4 (or 3)
CASES: list[tuple[str, Any, Callable[[Any], tuple[Any, ...]], dict[str, Any]]] = [
    ("median", np.median, lambda f: (), {}),
    ("median-axis1", np.median, lambda f: (), {"axis": 1}),
    ("median-axis0-keepdims", np.median, lambda f: (), {"axis": 0, "keepdims": True}),
    ("nanmedian-axis1", np.nanmedian, lambda f: (), {"axis": 1}),
    ("nanmedian", np.nanmedian, lambda f: (), {}),
    *[(f"{f.__name__}", f, lambda f: (_q(f, 0.3),), {})
      for f in (np.quantile, np.percentile, np.nanquantile, np.nanpercentile)],
    *[(f"{f.__name__}-vector-axis1", f, lambda f: (_q(f, np.array([0.3, 0.55, 0.85])),),
       {"axis": 1}) for f in (np.quantile, np.percentile, np.nanquantile, np.nanpercentile)],
    ("quantile-axis-tuple-keepdims", np.quantile, lambda f: (0.3,),
     {"axis": (0, 1), "keepdims": True}),
    ("nanquantile-axis0", np.nanquantile, lambda f: (np.array([0.3, 0.85]),), {"axis": 0}),
    *[(f"quantile-{m}", np.quantile, lambda f: (np.array([0.3, 0.55, 0.85]),),
       {"axis": 1, "method": m}) for m in _METHODS if m != "linear"],
    *[(f"nanpercentile-{m}", np.nanpercentile, lambda f: (30.0,), {"axis": 1, "method": m})
      for m in ("hazen", "weibull", "nearest", "midpoint", "median_unbiased")],
]  # fmt: skip
BY_ID = {c[0]: c for c in CASES}
#: the cases run in every layout, dtype and mode (the others: C-ordered float64)
REPRESENTATIVE = ["median-axis1", "nanmedian-axis1", "quantile", "percentile-vector-axis1",
                  "nanquantile-vector-axis1", "quantile-axis-tuple-keepdims", "quantile-hazen",
                  "quantile-nearest", "nanpercentile-weibull"]  # fmt: skip
GRID = [
    (c, dt, lay)
    for c in BY_ID
    for dt in DTYPES
    for lay in LAYOUTS
    if c in REPRESENTATIVE or (dt is np.float64 and lay == "C")
]


def _call(case: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    _, fn, extra, kw = BY_ID[case]
    return fn, extra(fn), kw


def _fd(f: Callable[[Any], Any], x: Any, v: Any, h: float = 1e-6) -> Any:
    xw, vw = np.asarray(x, np.float64), np.asarray(v, np.float64)
    return (np.asarray(f(xw + h * vw)) - np.asarray(f(xw - h * vw))) / (2 * h)


def _tol(dtype: Any) -> float:
    return 1e-4 if dtype == np.float32 else 1e-7


# -- jvp and hessian in x -------------------------------------------------------------------------


@pytest.mark.parametrize("case,dtype,layout", GRID,
                         ids=[f"{c}-{np.dtype(d).name}-{lay}" for c, d, lay in GRID])  # fmt: skip
def test_jvp(case: str, dtype: Any, layout: str) -> None:
    fn, extra, kw = _call(case)
    x = _x((3, 4), dtype, layout, nans=fn in NAN_FNS)
    v = np.asarray(np.random.default_rng(1).normal(size=x.shape), dtype)
    y, t = rulekit.jvp(lambda a: fn(a, *extra, **kw), (x,), (v,))
    want = fn(x, *extra, **kw)
    assert type(y) is type(want) and np.shape(y) == np.shape(want)
    assert np.result_type(y) == np.result_type(want) == np.result_type(t)
    np.testing.assert_array_equal(y, want)
    fd = _fd(lambda a: fn(a, *extra, **kw), x, v)
    np.testing.assert_allclose(t, fd, rtol=_tol(dtype), atol=_tol(dtype))


#: the Hessians: the covering grid of dtype, layout and mode over the representative cases
HGRID = [
    (c, dt, lay, m)
    for c in BY_ID
    for dt, lay, m in HESSIAN_GRID
    if c in REPRESENTATIVE or (dt is np.float64 and lay == "C")
]
HIDS = [f"{c}-{np.dtype(d).name}-{lay}-{m}" for c, d, lay, m in HGRID]


@pytest.mark.parametrize("case,dtype,layout,mode", HGRID, ids=HIDS)
def test_hessian(case: str, dtype: Any, layout: str, mode: str) -> None:
    fn, extra, kw = _call(case)
    x = _x((3, 4), dtype, layout, nans=fn in NAN_FNS)
    w = np.random.default_rng(2).normal(size=np.shape(fn(x, *extra, **kw)))

    def f(a: Any) -> Any:
        return np.sum(w * fn(a, *extra, **kw) ** 3)  # (y³: y is piecewise linear in x)

    ref = fd_hessian(f, x)
    H = rulekit.hessian(f, mode=mode)(x)
    assert np.shape(H) == x.shape + x.shape
    tol = 1e-3 if dtype == np.float32 else 1e-6
    np.testing.assert_allclose(H, ref, rtol=tol, atol=tol * (1 + np.max(np.abs(ref))))


# -- a traced q -----------------------------------------------------------------------------------

Q_FNS = [np.quantile, np.percentile, np.nanquantile, np.nanpercentile]
#: the methods whose rules differentiate a traced q: linear, and the piecewise-constant ones
Q_METHODS = ["linear", "nearest", "midpoint", "inverted_cdf", "lower", "higher",
             "averaged_inverted_cdf", "closest_observation"]  # fmt: skip
REFUSED_Q = ["hazen", "weibull", "median_unbiased", "normal_unbiased", "interpolated_inverted_cdf"]


@pytest.mark.parametrize("method", Q_METHODS)
@pytest.mark.parametrize("fn", Q_FNS, ids=lambda f: f.__name__)
def test_q_jvp_and_hessian(fn: Any, method: str) -> None:
    """∂y/∂q: (n − 1)·(x₍ₗ₊₁₎ − x₍ₗ₎) for linear, 0 for the piecewise-constant methods; the
    hessian of Σ y³ in (a scale of x, q) jointly, in the three modes."""
    x = _x((3, 4), np.float64, nans=fn in NAN_FNS)
    q = _q(fn, np.array([0.3, 0.55, 0.85]))
    y, t = rulekit.jvp(lambda s: fn(x, s, axis=1, method=method), (q,), (np.ones(3),))
    np.testing.assert_array_equal(y, fn(x, q, axis=1, method=method))
    fd = _fd(lambda s: fn(x, s, axis=1, method=method), q, np.ones(3))
    np.testing.assert_allclose(t, fd, rtol=1e-7, atol=1e-7)
    if method != "linear":
        np.testing.assert_array_equal(t, 0)
    nan = np.where(np.isnan(x), np.nan, 0.0)
    clean = np.nan_to_num(x)  # (x·p₀ with its NaNs kept out of p₀'s derivative)

    def f(p: Any) -> Any:
        return np.sum(fn(clean * p[0] + nan, p[1:], axis=1, method=method) ** 3)

    p = np.concatenate([[1.1], q])
    ref = fd_hessian(f, p, h=1e-6)
    for mode in MODES:
        H = rulekit.hessian(f, mode=mode)(p)
        np.testing.assert_allclose(H, ref, rtol=1e-5, atol=1e-5 * (1 + np.max(np.abs(ref))))


@pytest.mark.parametrize("method", REFUSED_Q)
def test_q_refused_for_other_continuous_methods(method: str) -> None:
    """A traced q with hazen, weibull, ...: refused in every mode, as by the reverse rule
    (QuantileMethodError is a TracingError and a NotImplementedError); a constant q is fine."""
    x = _x((3, 4), np.float64)
    for run in (
        lambda: rulekit.jvp(lambda s: np.quantile(x, s, method=method), (0.3,), (1.0,)),
        lambda: rulekit.hessian(lambda s: np.quantile(x, s, method=method) ** 3)(0.3),
        lambda: rulekit.grad(lambda s: np.quantile(x, s, method=method))(0.3),
    ):
        with pytest.raises(NotImplementedError, match="linear"):
            run()
    with pytest.raises(rulekit.TracingError, match="constant"):
        rulekit.jvp(lambda s: np.quantile(x, s, method=method), (0.3,), (1.0,))
    H = rulekit.hessian(lambda a: np.quantile(a, 0.3, method=method) ** 3)(x)
    np.testing.assert_allclose(H, fd_hessian(lambda a: np.quantile(a, 0.3, method=method) ** 3,
                                              x), rtol=1e-6, atol=1e-6)  # fmt: skip


def test_scalar_q_traced_python_float() -> None:
    """A Python float q promotes weakly (a float32 x gives float32), traced or not."""
    x = _x((3, 4), np.float32)
    y, t = rulekit.jvp(lambda s: np.quantile(x, s, axis=0), (0.3,), (1.0,))
    want = np.quantile(x, 0.3, axis=0)
    assert y.dtype == want.dtype == np.float32 and t.dtype == np.float32
    np.testing.assert_array_equal(y, want)
    g = rulekit.grad(lambda s: np.sum(np.quantile(x, s, axis=0)))(0.3)
    np.testing.assert_allclose(np.sum(t), g, rtol=1e-5)


# -- values: numpy's, bit for bit -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16], ids=lambda d: d.__name__)
@pytest.mark.parametrize("fn", [np.median, np.nanmedian, *Q_FNS], ids=lambda f: f.__name__)
def test_values(fn: Any, dtype: Any) -> None:
    """The forward rule's value, dtype and type are numpy's for every method and option:
    ties, NaN lanes (all-NaN ones for the nan forms), q a Python float, a NumPy float, a
    float32, a vector, a list; 0-d results as NumPy scalars."""
    rng = np.random.default_rng(5)
    x = np.round(rng.normal(size=(3, 4, 5)), 1).astype(dtype)  # (ties)
    x[0, 1, :2] = np.nan
    if fn in NAN_FNS:
        x[1, 2, :] = np.nan
    qs: list[Any] = [0.3, np.float64(0.37), np.float32(0.62), np.array([0.1, 0.5, 0.99]),
                     [0.25, 0.75], 0.0, 1.0]  # fmt: skip
    methods = _METHODS if fn not in (np.median, np.nanmedian) else ("linear",)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (numpy's all-NaN slice warning)
        for axis in (None, 0, -1, (0, 2)):
            for keepdims in (False, True):
                for q in qs if fn not in (np.median, np.nanmedian) else [None]:
                    for method in methods:
                        args = (
                            ()
                            if q is None
                            else ([_q(fn, e) for e in q] if isinstance(q, list) else _q(fn, q),)
                        )
                        kw: dict[str, Any] = {"axis": axis, "keepdims": keepdims}
                        if q is not None:
                            kw["method"] = method
                        want = fn(x, *args, **kw)
                        y, _ = rulekit.jvp(lambda a, args=args, kw=kw: fn(a, *args, **kw),
                                           (x,), (np.ones_like(x),))  # fmt: skip
                        assert type(y) is type(want), (axis, keepdims, q, method)
                        assert np.result_type(y) == np.result_type(want), (axis, q, method)
                        np.testing.assert_array_equal(y, want, err_msg=f"{axis} {q} {method}")


# -- the reverse rule's conventions: ties and NaN lanes -------------------------------------------


TIE_CASES = [(np.median, ()), (np.quantile, (0.5,)), (np.nanmedian, ()), (np.percentile, (70.0,))]


@pytest.mark.parametrize("fn,args", TIE_CASES, ids=[f.__name__ for f, _ in TIE_CASES])
def test_ties_split_like_the_reverse_rule(fn: Any, args: tuple[Any, ...]) -> None:
    """An order statistic shared by tied elements takes their average tangent: the forward
    rule, the differentiable pullback and the reverse rule give the same (sub)gradient."""
    x = np.array([[1.0, 2.0, 2.0, 3.0, 2.0], [0.5, 0.5, 4.0, 1.0, 1.0]])
    ybar = np.array([1.0, -2.0])
    g = rulekit.grad(lambda a: np.sum(fn(a, *args, axis=1) * ybar))(x)  # (the reverse rule)
    jac = np.stack([rulekit.jvp(lambda a: fn(a, *args, axis=1), (x,), (e.reshape(x.shape),))[1]
                    for e in np.eye(x.size)])  # fmt: skip
    np.testing.assert_allclose((jac @ ybar).reshape(x.shape), g, rtol=1e-14)
    pulled = vjp_of(fn, x, *args)((True, *(False for _ in args)), x, *args, axis=1)[1](ybar)[0]
    np.testing.assert_allclose(pulled, g, rtol=1e-14)


@pytest.mark.parametrize("fn", [np.median, np.quantile, np.nanquantile], ids=lambda f: f.__name__)
def test_nan_lanes(fn: Any) -> None:
    """A lane holding a NaN: NaN, whose tangent is the average of the NaNs' (np.max's
    convention, as the reverse rule's cotangent ȳ/#NaN); an all-NaN lane of a nan form:
    NaN, no tangent."""
    x = np.array([[1.0, np.nan, 3.0, np.nan], [0.5, 2.0, 1.0, 4.0], [np.nan] * 4])
    args = () if fn is np.median else (0.4,)
    v = np.zeros_like(x)
    v[0, 1], v[0, 3], v[1, 2], v[2, 0] = 1.0, 3.0, 1.0, 5.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (numpy's all-NaN slice warning)
        y, t = rulekit.jvp(lambda a: fn(a, *args, axis=1), (x,), (v,))
        np.testing.assert_array_equal(y, fn(x, *args, axis=1))
        rows = [rulekit.grad(lambda a, i=i: fn(a, *args, axis=1)[i])(x) for i in range(3)]
    np.testing.assert_allclose(t, [np.sum(r * v) for r in rows], rtol=1e-14)
    if fn is np.nanquantile:
        assert t[2] == 0 and np.isfinite(t[0])
    else:
        assert t[0] == 2.0 and t[2] == 1.25


# -- errors ---------------------------------------------------------------------------------------


def test_errors() -> None:
    x = _x((3, 4), np.float64)
    with pytest.raises(ValueError, match="range"):
        rulekit.jvp(lambda a: np.quantile(a, 1.5), (x,), (x,))
    with pytest.raises(ValueError, match="Percentiles"):
        rulekit.jvp(lambda a: np.percentile(a, -3.0), (x,), (x,))
    with pytest.raises(ValueError, match="not a valid method"):
        rulekit.jvp(lambda a: np.quantile(a, 0.3, method="cubic"), (x,), (x,))
    with pytest.raises(NotImplementedError, match="weights"):
        rulekit.jvp(lambda a: np.quantile(a, 0.3, method="inverted_cdf", weights=np.ones_like(x)),
                    (x,), (x,))  # fmt: skip
    with pytest.raises(NotImplementedError, match="weights"):
        rulekit.hessian(lambda a: np.sum(np.quantile(a, 0.3, method="inverted_cdf",
                                                     weights=np.ones_like(x))))(x)  # fmt: skip
