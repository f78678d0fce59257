"""Tests for the reduction rules: rules.numpy.reductions (sums, extrema, statistics) and
rules.numpy.linalg.norm.

Hypothesis draws shapes, axes, keepdims and dtypes and runs every reduction
through `testutils.check_rule`; explicit tests pin down the conventions of
docs/conventions-reductions.md (zeros in prod/cumprod, ties, NaNs, kinks,
every norm ord); engine tests differentiate small numpy programs (softmax,
log-sum-exp, the array methods) and compare with central finite differences.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, fd_grad, layout_array
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.reductions._common
import rules.numpy.reductions.extrema
import rules.numpy.reductions.sums
import rules.numpy.ufuncs.unary  # the elementwise operations of the engine tests
from rulekit import CoDual, NoRData, zero_codual
from testutils import check_rule

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


# -- helpers ----------------------------------------------------------------------------------


def values(seed: int, shape: tuple[int, ...], dtype: Any, away_from_zero: bool = False) -> Any:
    """Random values of `dtype`; `away_from_zero`: |x| in [0.5, 1.5] (products stay tame)."""
    rng = np.random.default_rng(seed)

    def draw() -> Any:
        if away_from_zero:
            return rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        return rng.normal(size=shape)

    x = draw() + 1j * draw() if np.dtype(dtype).kind == "c" else draw()
    return np.asarray(x).astype(dtype)


def pull(f: Any, x: np.ndarray, *args: Any, dy: Any = 1.0, **kwargs: Any) -> tuple[Any, Any]:
    """(y, x̄) for the rule of f(x, *args, **kwargs) with cotangent dy (constants elsewhere)."""
    cx = zero_codual(x)
    y, pb = rulekit.rrule(zero_codual(f), cx, *[CoDual(a) for a in args], **kwargs)
    if isinstance(y.x, np.ndarray):
        y.dx[...] = dy
        pb(NoRData())
    else:
        pb(dy if isinstance(dy, NoRData) else type(y.x)(dy))
    return y.x, cx.dx


@st.composite
def reduction_call(draw: Any, max_ndim: int = 3) -> tuple[tuple[int, ...], Any, bool]:
    """(shape, axis, keepdims): axis None, an int (maybe negative) or a tuple of axes."""
    ndim = draw(st.integers(0, max_ndim))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if ndim == 0 or kind == "none":
        axis: Any = None
    elif kind == "int":
        axis = draw(st.integers(-ndim, ndim - 1))
    else:
        picked = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
        axis = tuple(a - ndim if draw(st.booleans()) else a for a in picked)
    return shape, axis, draw(st.booleans())


dtypes = st.sampled_from([np.float64, np.float32, np.complex128])
real_dtypes = st.sampled_from([np.float64, np.float32])
seeds = st.integers(0, 2**16)


def lane_size(shape: tuple[int, ...], axis: Any) -> int:
    axes = range(len(shape)) if axis is None else np.atleast_1d(axis)
    return int(np.prod([shape[a] for a in axes]))


# -- hypothesis: check_rule over shapes, axes, keepdims, dtypes ---------------------------------


@SETTINGS
@given(reduction_call(), dtypes, seeds)
def test_sum_mean_prod(call: Any, dtype: Any, seed: int) -> None:
    shape, axis, keepdims = call
    kw = {"axis": axis, "keepdims": keepdims}
    x = values(seed, shape, dtype)
    check_rule(np.sum, x, kwargs=kw)
    check_rule(np.mean, x, kwargs=kw)
    check_rule(np.prod, values(seed, shape, dtype, away_from_zero=True), kwargs=kw)


@SETTINGS
@given(reduction_call(), dtypes, st.integers(0, 1), seeds)
def test_var_std(call: Any, dtype: Any, ddof: int, seed: int) -> None:
    shape, axis, keepdims = call
    if lane_size(shape, axis) <= ddof:
        ddof = 0
    kw = {"axis": axis, "keepdims": keepdims, "ddof": ddof}
    x = values(seed, shape, dtype)
    check_rule(np.var, x, kwargs=kw)
    check_rule(np.std, x, kwargs=kw)


@SETTINGS
@given(reduction_call(), real_dtypes, seeds)
def test_max_min(call: Any, dtype: Any, seed: int) -> None:
    shape, axis, keepdims = call
    x = values(seed, shape, dtype)  # distinct values: no ties
    for f in (np.max, np.min, np.amax, np.amin):
        check_rule(f, x, kwargs={"axis": axis, "keepdims": keepdims})


@SETTINGS
@given(reduction_call(), seeds, st.booleans())
def test_nan_reductions(call: Any, seed: int, cplx: bool) -> None:
    shape, axis, keepdims = call
    x = values(seed, shape, np.complex128 if cplx else np.float64)
    if x.size > 1:
        x.flat[seed % x.size] = np.nan  # one NaN: no lane is all-NaN
    kw = {"axis": axis, "keepdims": keepdims}
    check_rule(np.nansum, x, kwargs=kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a 1-element all-NaN lane can occur
        nanmean_ok = np.all(np.isfinite(np.nanmean(x, axis=axis)))
    if nanmean_ok:
        check_rule(np.nanmean, x, kwargs=kw)
        if not cplx:
            check_rule(np.nanmax, x, kwargs=kw)
            check_rule(np.nanmin, x, kwargs=kw)


@SETTINGS
@given(reduction_call(), dtypes, seeds)
def test_cumsum_cumprod(call: Any, dtype: Any, seed: int) -> None:
    shape, axis, _ = call
    if isinstance(axis, tuple):
        axis = axis[0] if axis else None
    check_rule(np.cumsum, values(seed, shape, dtype), kwargs={"axis": axis})
    check_rule(np.cumprod, values(seed, shape, dtype, away_from_zero=True), kwargs={"axis": axis})


@SETTINGS
@given(reduction_call(), st.sampled_from([np.float64, np.complex128]), st.booleans(), seeds)
def test_average(call: Any, dtype: Any, returned: bool, seed: int) -> None:
    shape, axis, keepdims = call
    x = values(seed, shape, dtype)
    w = np.random.default_rng(seed + 1).uniform(0.5, 1.5, size=shape)
    kw = {"axis": axis, "weights": w, "returned": returned, "keepdims": keepdims}
    check_rule(np.average, x, kwargs=kw)
    check_rule(np.average, x, kwargs={"axis": axis, "keepdims": keepdims})


VECTOR_ORDS = [None, 2, 1, np.inf, -np.inf, 0, 3, 0.5, -1, -2.5]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


@SETTINGS
@given(reduction_call(), st.sampled_from(VECTOR_ORDS), dtypes, seeds)
def test_vector_norms(call: Any, ord_: Any, dtype: Any, seed: int) -> None:
    shape, axis, keepdims = call
    x = values(seed, shape, dtype)
    if (isinstance(axis, tuple) and len(axis) != 1) or (axis is None and ord_ is not None):
        axis = -1 if shape else None  # a vector ord needs an int axis (or a 1-d x)
        x = x if shape else x.reshape(1)
    check_rule(np.linalg.norm, x, kwargs={"ord": ord_, "axis": axis, "keepdims": keepdims})


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 4), st.sampled_from([(), (2,)]), seeds)
def test_matrix_norms(m: int, n: int, batch: tuple[int, ...], seed: int) -> None:
    a = values(seed, (m, *batch, n), np.float64)
    c = values(seed, (m, n), np.complex128)
    for ord_ in MATRIX_ORDS:
        check_rule(np.linalg.norm, a, kwargs={"ord": ord_, "axis": (0, -1), "keepdims": True})
        check_rule(np.linalg.norm, c, kwargs={"ord": ord_})
        check_rule(np.linalg.norm, a.astype(np.float32), kwargs={"ord": ord_, "axis": (-1, 0)})


# -- fast paths: an int axis or None, keepdims, float32/float64 (_common.simple_call) --

FAST_FNS = (np.sum, np.mean, np.max, np.min, np.amax, np.amin)


def _run_rule(f: Any, x: np.ndarray, args: tuple[Any, ...], kw: dict[str, Any], seed: int) -> Any:
    """(y, x̄, rdata) of the registered rule: x̄ pre-seeded, a random ȳ."""
    rng = np.random.default_rng(seed)
    cx = CoDual(x, rng.normal(size=x.shape).astype(x.dtype))
    y, pb = rulekit.rrule(zero_codual(f), cx, *[CoDual(a) for a in args], **kw)
    if isinstance(y.x, np.ndarray):
        y.dx[...] = rng.normal(size=y.x.shape)
        rdata = pb(NoRData())
    else:
        rdata = pb(type(y.x)(rng.normal()))
    return y.x, cx.dx, rdata


def _assert_identical(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    assert np.asarray(a).dtype == np.asarray(b).dtype and np.shape(a) == np.shape(b)
    assert np.array_equal(a, b, equal_nan=True)
    assert np.array_equal(np.signbit(a), np.signbit(b))


def _assert_fast_is_general(
    f: Any, x: np.ndarray, axis: Any, keepdims: Any, positional: bool, seed: int
) -> None:
    """The fast call and the same call spelled with a tuple axis (the general code) agree
    bit for bit: output (type, dtype, shape, values), x̄ and rdata."""
    kw = {} if keepdims is None else {"keepdims": keepdims}
    args: tuple[Any, ...] = ()
    if positional:
        args = (axis,)
    elif axis is not None or seed % 2:
        kw["axis"] = axis
    gkw = {**kw, "axis": tuple(range(x.ndim)) if axis is None else (axis,)}
    assert rules.numpy.reductions._common.simple_call(x, [CoDual(a) for a in args], kw) is not None
    assert rules.numpy.reductions._common.simple_call(x, [], gkw) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (NaN lanes)
        want = f(x, *args, **kw)
    y, dx, rdata = _run_rule(f, x, args, kw, seed)
    gy, gdx, grdata = _run_rule(f, x, (), gkw, seed)
    _assert_identical(y, want)
    _assert_identical(y, gy)
    _assert_identical(dx, gdx)
    assert len(rdata) == 2 + len(args) and len(grdata) == 2
    assert all(isinstance(r, NoRData) for r in rdata + grdata)


@st.composite
def fast_call(draw: Any) -> tuple[np.ndarray, Any, Any, bool, int]:
    """(x, axis, keepdims, positional, seed): ties, NaNs and −0.0 in some lanes, any layout."""
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    seed = draw(seeds)
    rng = np.random.default_rng(seed)
    x = layout_array(rng, shape, draw(real_dtypes), draw(st.sampled_from("CFS")))
    if draw(st.booleans()):
        x[...] = rng.integers(-2, 3, size=shape)  # many ties
    if draw(st.booleans()):
        x[rng.random(shape) < 0.2] = -0.0
    if draw(st.booleans()):
        x[rng.random(shape) < 0.15] = np.nan
    axis = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1)))
    keepdims = draw(st.sampled_from([None, False, True]))
    positional = axis is not None and draw(st.booleans())
    return x, axis, keepdims, positional, seed


@SETTINGS
@given(fast_call(), st.sampled_from(FAST_FNS))
def test_fast_paths_are_the_general_code(call: Any, f: Any) -> None:
    _assert_fast_is_general(f, *call[:4], seed=call[4])


@pytest.mark.parametrize("f", FAST_FNS)
def test_fast_paths_every_axis_and_keepdims(f: Any) -> None:
    rng = np.random.default_rng(60)
    for dtype in (np.float64, np.float32):
        x = rng.integers(-2, 3, size=(3, 4, 5)).astype(dtype)
        x[0, 1, :2] = np.nan
        for axis in (None, 0, 1, 2, -1, -2, -3):
            for keepdims in (None, False, True):
                _assert_fast_is_general(f, x, axis, keepdims, False, seed=(axis or 0) + 3)
                _assert_fast_is_general(f, x[:, ::-1], axis, keepdims, False, seed=1)


def test_fast_path_ties_and_nan_lanes() -> None:
    x = np.array([[1.0, 3.0, 3.0, 3.0], [np.nan, 2.0, np.nan, 5.0], [-0.0, 0.0, -1.0, 0.0]])
    dy = np.array([3.0, 2.0, 6.0])
    for dtype in (np.float64, np.float32):
        xd = x.astype(dtype)
        y, dx = pull(np.max, xd, axis=1, dy=dy)
        assert dx.dtype == dtype and np.array_equal(dx, [[0, 1, 1, 1], [1, 0, 1, 0], [2, 2, 0, 2]])
        y, dx = pull(np.min, xd, -1, keepdims=True, dy=dy[:, None])
        assert np.array_equal(dx, [[3, 0, 0, 0], [1, 0, 1, 0], [0, 0, 6, 0]])
        _, dx = pull(np.amax, xd.T.copy(), axis=0, dy=dy)  # lanes across the rows
        assert np.array_equal(dx.T, [[0, 1, 1, 1], [1, 0, 1, 0], [2, 2, 0, 2]])
        y, dx = pull(np.amin, xd[2], dy=4.0)  # a scalar output: np.float32 / np.float64
        assert type(y) is dtype and np.array_equal(dx, [0, 0, 4, 0])
        y, dx = pull(np.max, xd)  # NaN: the lane's NaNs share ȳ
        assert np.isnan(y) and np.array_equal(dx, np.where(np.isnan(xd), 0.5, 0))
    _, dx = pull(np.max, np.array([2.0, 2.0, 2.0], np.float32), dy=1.0)  # ȳ/3 in double
    assert np.array_equal(dx, np.full(3, np.float32(1 / 3)))


def test_fast_path_takes_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name in ("extremum_lanes", "extremum_all"):
        kernel = getattr(rules.numpy.reductions.extrema, name)
        monkeypatch.setattr(
            rules.numpy.reductions.extrema,
            name,
            lambda *a, k=kernel, n=name: (calls.append(n), k(*a)),
        )
    x = values(61, (4, 5), np.float64)
    pull(np.max, x, axis=1)
    pull(np.min, x)
    pull(np.max, x, keepdims=True, dy=np.ones((1, 1)))
    pull(np.amin, np.asfortranarray(x), axis=0)  # an F-ordered x: the numpy formulation
    pull(np.max, x, axis=(0,))  # a tuple axis: the general code
    assert calls == ["extremum_lanes", "extremum_all", "extremum_lanes"]


def test_simple_call_takes_only_the_plain_forms() -> None:
    x = np.ones((2, 3))
    take = rules.numpy.reductions._common.simple_call
    assert take(x, [], {}) == (None, False, (NoRData(), NoRData()))
    assert take(x, [CoDual(-1)], {"keepdims": True})[:2] == (1, True)
    assert take(x, [], {"axis": -2, "keepdims": False})[:2] == (0, False)
    assert take(x.astype(np.float32), [], {"axis": None})[:2] == (None, False)
    for arr, args, kw in [
        (x, [], {"axis": (0,)}),
        (x, [], {"axis": 2}),  # out of range: numpy's own error, from the general code
        (x, [], {"axis": np.int64(0)}),
        (x, [], {"axis": True}),
        (x, [], {"keepdims": 1}),
        (x, [], {"keepdims": np._NoValue}),
        (x, [], {"dtype": np.float64}),
        (x, [], {"where": np.ones((2, 3), bool)}),
        (x, [CoDual(0)], {"axis": 0}),
        (x, [CoDual(0), CoDual(None), CoDual(True)], {}),
        (x.astype(np.float16), [], {}),
        (x + 0j, [], {}),
        (np.array(2.0), [], {}),
        (np.ones((2, 0)), [], {"axis": 0}),
        (x.astype(">f8"), [], {}),
    ]:
        assert take(arr, args, kw) is None, (arr.dtype, args, kw)


def test_fast_path_errors_are_numpys() -> None:
    x = np.ones((2, 3))
    for f in FAST_FNS:
        with pytest.raises(np.exceptions.AxisError):
            pull(f, x, axis=2)
    with pytest.raises(ValueError, match="zero-size array"):
        pull(np.max, np.ones((2, 0)), axis=1)


def test_engine_through_the_fast_paths() -> None:
    rng = np.random.default_rng(62)

    def f(x: Any) -> Any:
        m = np.max(x, axis=-1, keepdims=True)
        s = np.sum(np.exp(x - m), axis=1)
        return np.sum(np.log(s)) + np.mean(np.min(x, 0) ** 2) - np.amax(x) * np.mean(x, axis=1)[0]

    _check_grad(f, rng.normal(size=(4, 5)))
    x32 = rng.normal(size=(4, 5)).astype(np.float32)
    value, g = rulekit.value_and_grad(f)(x32)
    _, g64 = rulekit.value_and_grad(f)(x32.astype(np.float64))
    assert type(value) is np.float32 and g.dtype == np.float32
    assert np.allclose(g, g64)  # float32 arithmetic vs float64: measured 2.8e-7 relative


# -- outputs are numpy's ----------------------------------------------------------------------


def test_output_types_match_numpy() -> None:
    x = np.arange(1.0, 7.0).reshape(2, 3)
    calls = [
        (np.sum, (x[0],), {}),
        (np.sum, (x,), {"keepdims": True}),
        (np.mean, (x.astype(np.float32),), {}),
        (np.prod, (x,), {"axis": 1}),
        (np.max, (x,), {"axis": None}),
        (np.var, (x + 1j,), {}),
        (np.linalg.norm, (x,), {"ord": "nuc"}),
        (np.average, (x[0],), {"returned": True}),
        (np.sum, (x,), {"dtype": np.int64}),
    ]
    for f, args, kw in calls:
        y, _ = rulekit.rrule(zero_codual(f), *map(zero_codual, args), **kw)
        want = f(*args, **kw)
        got_parts, want_parts = (y.x, want) if isinstance(want, tuple) else ((y.x,), (want,))
        for got, ref in zip(got_parts, want_parts, strict=True):
            assert type(got) is type(ref), (f, kw)
            assert np.asarray(got).dtype == np.asarray(ref).dtype, (f, kw)
            assert np.shape(got) == np.shape(ref), (f, kw)


def test_integer_dtype_output_has_no_cotangent() -> None:
    x = np.array([1.5, 2.5])
    y, dx = pull(np.sum, x, dtype=np.int64, dy=NoRData())
    assert y == 3 and np.array_equal(dx, [0.0, 0.0])


# -- zeros: prod, cumprod -----------------------------------------------------------------------


def test_prod_zeros_exact() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by zero anywhere
        assert np.array_equal(pull(np.prod, np.array([2.0, 0.0, 3.0, 4.0]))[1], [0, 24, 0, 0])
        assert np.array_equal(pull(np.prod, np.array([2.0, 0.0, 3.0, 0.0]))[1], [0, 0, 0, 0])
        assert np.array_equal(pull(np.prod, np.zeros(3))[1], [0, 0, 0])
        x = np.array([[2.0, 0.0, 3.0], [1.0, 2.0, 3.0], [0.0, 0.0, 5.0]])
        y, dx = pull(np.prod, x, axis=1, keepdims=True, dy=np.array([[1.0], [2.0], [3.0]]))
        assert np.array_equal(y, [[0.0], [6.0], [0.0]])
        assert np.array_equal(dx, [[0, 6, 0], [12, 6, 4], [0, 0, 0]])
        _, dx = pull(np.prod, np.array([2.0, 0.0, 1j]), dy=1.0 + 0j)
        assert np.allclose(dx, [0, np.conj(2j), 0])  # x̄ᵢ = conj(Π_{j≠i} xⱼ)·ȳ
        _, dx = pull(np.prod, np.array([0.0, 3.0]), initial=2.0)  # initial is a factor
        assert np.array_equal(dx, [6.0, 0.0])


def _cumprod_jacobian_sum(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Σᵢ ȳᵢ ∂yᵢ/∂xₖ by brute force (no division)."""
    n = len(x)
    out = np.zeros(n, dtype=np.result_type(x, dy))
    for i in range(n):
        for k in range(i + 1):
            out[k] += dy[i] * np.conj(np.prod([x[j] for j in range(i + 1) if j != k]))
    return out


@pytest.mark.parametrize(
    "x",
    [
        [2.0, 0.0, 3.0, 0.0, 5.0],
        [0.0, 2.0, 3.0],
        [2.0, 3.0, 0.0],
        [0.0, 0.0, 1.5],
        [1.5, -2.0, 0.5],
        [0.0, 0.0, 0.0],
        [1.0 + 1j, 0.0, 2.0 - 1j, 0.5j],
    ],
)
def test_cumprod_zeros_exact(x: list[Any]) -> None:
    xa = np.array(x)
    dy = np.arange(1.0, len(x) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, dx = pull(np.cumprod, xa, dy=dy)
    assert np.allclose(dx, _cumprod_jacobian_sum(xa, dy), rtol=1e-14, atol=0)


def test_cumprod_zeros_along_axis_and_flattened() -> None:
    x = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])
    _, dx = pull(np.cumprod, x, axis=1, dy=np.ones((2, 3)))
    assert np.array_equal(dx, [[1, 3, 0], [4, 0, 0]])
    _, dx = pull(np.cumprod, x, dy=np.ones(6))  # axis=None: the flattened array
    assert np.allclose(dx.ravel(), _cumprod_jacobian_sum(x.ravel(), np.ones(6)))


# -- ties ---------------------------------------------------------------------------------------


def test_ties_split_equally() -> None:
    x = np.array([[1.0, 3.0, 3.0, 3.0], [2.0, 2.0, -1.0, -1.0]])
    _, dx = pull(np.max, x, axis=1, dy=np.array([3.0, 2.0]))
    assert np.allclose(dx, [[0, 1, 1, 1], [1, 1, 0, 0]])
    _, dx = pull(np.amin, x, axis=1, dy=np.array([3.0, 2.0]))
    assert np.allclose(dx, [[3, 0, 0, 0], [0, 0, 1, 1]])
    _, dx = pull(np.nanmax, np.array([np.nan, 4.0, 4.0]))
    assert np.allclose(dx, [0, 0.5, 0.5])
    _, dx = pull(np.max, np.array([-0.0, 0.0]))  # -0.0 == 0.0: a tie
    assert np.allclose(dx, [0.5, 0.5])
    _, dx = pull(np.max, np.array([1.0, 2.0, 2.0]), initial=2.0)  # initial is a candidate
    assert np.allclose(dx, [0, 1 / 3, 1 / 3])
    _, dx = pull(np.max, np.array([1.0, 2.0]), initial=5.0)  # initial wins: x̄ = 0
    assert np.array_equal(dx, [0.0, 0.0])
    where = np.array([True, False, True])
    _, dx = pull(np.max, np.array([1.0, 9.0, 1.0]), where=where, initial=-1.0)
    assert np.allclose(dx, [0.5, 0, 0.5])


def test_norm_ties_split_equally() -> None:
    _, dx = pull(np.linalg.norm, np.array([3.0, -3.0, 1.0, 3.0]), np.inf)
    assert np.allclose(dx, [1 / 3, -1 / 3, 0, 1 / 3])
    _, dx = pull(np.linalg.norm, np.array([0.5, -0.5, 1.0]), -np.inf)
    assert np.allclose(dx, [0.5, -0.5, 0])
    a = np.array([[1.0, -2.0], [-2.0, 1.0]])  # both column sums and row sums are 3
    for ord_ in (1, np.inf):
        _, dx = pull(np.linalg.norm, a, ord_)
        assert np.allclose(dx, np.sign(a) / 2)
    _, dx = pull(np.linalg.norm, np.eye(3), 2)  # σ = 1, 1, 1: (1/3) Σ uᵢvᵢᵀ
    assert np.allclose(dx, np.eye(3) / 3)
    _, dx = pull(np.linalg.norm, np.diag([2.0, 2.0, 1.0]), 2)
    assert np.allclose(dx, np.diag([0.5, 0.5, 0.0]))
    _, dx = pull(np.linalg.norm, np.diag([3.0, 1.0, 1.0]), -2)
    assert np.allclose(dx, np.diag([0.0, 0.5, 0.5]))


# -- NaN ----------------------------------------------------------------------------------------


def test_nan_positions() -> None:
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [4.0, 2.0, 2.0]])
    dy = np.array([1.0, 2.0, 3.0])
    with pytest.warns(RuntimeWarning):  # numpy's own warning for the all-NaN row
        y, dx = pull(np.nanmax, x, axis=1, dy=dy)
    assert np.isnan(y[1]) and np.array_equal(dx, [[0, 0, 1], [0, 0, 0], [3, 0, 0]])
    _, dx = pull(np.nansum, x, axis=1, dy=dy)
    assert np.array_equal(dx, [[1, 0, 1], [0, 0, 0], [3, 3, 3]])
    with pytest.warns(RuntimeWarning):
        _, dx = pull(np.nanmean, x, axis=1, dy=dy)
    assert np.allclose(dx, [[0.5, 0, 0.5], [0, 0, 0], [1, 1, 1]])
    _, dx = pull(np.nanmin, x[[0, 2]], axis=1, dy=dy[:2])
    assert np.array_equal(dx, [[1, 0, 0], [0, 1, 1]])
    # max (not nanmax): the lane's NaNs share ȳ, so NaN propagates to them
    y, dx = pull(np.max, np.array([1.0, np.nan, 3.0, np.nan]))
    assert np.isnan(y) and np.array_equal(dx, [0, 0.5, 0, 0.5])


# -- kinks: std at zero variance, norms at zero, var with ddof ≥ N --------------------------------


def test_std_at_zero_variance_is_zero() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(pull(np.std, np.full(4, 2.5))[1], np.zeros(4))
        x = np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]])
        _, dx = pull(np.std, x, axis=1, ddof=1, dy=np.array([1.0, 1.0]))
    assert np.array_equal(dx[0], [0, 0, 0]) and np.all(np.isfinite(dx[1]))
    assert np.allclose(dx[1], fd_grad(lambda v: np.std(v, ddof=1), (x[1],), 0))


def test_var_with_ddof_at_least_n_gives_nan() -> None:
    with pytest.warns(RuntimeWarning):  # numpy's "Degrees of freedom <= 0"
        y, dx = pull(np.var, np.array([1.0, 2.0]), ddof=2)
    assert np.isinf(y) and np.all(np.isnan(dx))


def test_norms_at_zero_are_zero() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for ord_ in [None, 2, 1, np.inf, 3, 0.5]:
            assert np.array_equal(pull(np.linalg.norm, np.zeros(3), ord_)[1], np.zeros(3))
        for ord_ in MATRIX_ORDS:
            assert np.array_equal(pull(np.linalg.norm, np.zeros((2, 3)), ord_)[1], np.zeros((2, 3)))
        _, dx = pull(np.linalg.norm, np.array([1.0, 0.0, -2.0]), 0.5)  # zero element: 0
    assert dx[1] == 0 and np.allclose(dx[[0, 2]], [1 + np.sqrt(2), -(1 + np.sqrt(2)) / np.sqrt(2)])
    with pytest.warns(RuntimeWarning):  # numpy: 0 ** negative in the forward pass
        y, dx = pull(np.linalg.norm, np.array([1.0, 0.0, -2.0]), -1)
    assert y == 0 and np.array_equal(dx, [0, 0, 0])
    _, dx = pull(np.linalg.norm, np.array([[1.0, 2.0], [2.0, 4.0]]), -2)  # singular: σ_min = 0
    assert np.array_equal(dx, np.zeros((2, 2)))


def test_norm_ord_zero_is_a_count() -> None:
    y, dx = pull(np.linalg.norm, np.array([1.0, 0.0, -2.0]), 0)
    assert y == 2 and np.array_equal(dx, np.zeros(3))


def test_nuclear_norm_of_rank_deficient_matrix() -> None:
    u = np.array([[1.0], [2.0], [2.0]]) / 3
    v = np.array([[3.0, 4.0]]) / 5
    _, dx = pull(np.linalg.norm, 7 * u @ v, "nuc")  # rank 1: only σ₁'s u₁v₁ᵀ
    assert np.allclose(dx, u @ v)


@pytest.mark.parametrize("ord_", VECTOR_ORDS)
def test_every_vector_ord(ord_: Any) -> None:
    x = np.array([[0.3, -1.2, 2.0], [1.5, 0.7, -0.4]])
    check_rule(np.linalg.norm, x, kwargs={"ord": ord_, "axis": 1})
    check_rule(np.linalg.norm, x[0] + 1j * x[1], kwargs={"ord": ord_})


@pytest.mark.parametrize("ord_", [2.0, 1.0, 0.5, -1.5, 3.0])
def test_float_ord_is_differentiable(ord_: float) -> None:
    x = np.array([[0.3, -1.2, 2.0], [1.5, 0.7, -0.4]])
    check_rule(np.linalg.norm, x, ord_, 1)  # positional ord: the kit differentiates it too


def test_infinite_float_ord_has_zero_cotangent() -> None:
    # ‖x‖_p is constant in p at p = ±inf (the kit cannot perturb an infinite argument).
    for ord_, want in ((np.inf, [0, -1]), (-np.inf, [1, 0])):
        cx, cord = zero_codual(np.array([0.5, -2.0])), zero_codual(ord_)
        _, pb = rulekit.rrule(zero_codual(np.linalg.norm), cx, cord)
        _, _, dord = pb(1.0)
        assert type(dord) is float and dord == 0.0 and np.array_equal(cx.dx, want)


def test_traced_discrete_options_are_refused() -> None:
    x = np.eye(2)
    with pytest.raises(NotImplementedError, match="ord"):
        rulekit.rrule(zero_codual(np.linalg.norm), zero_codual(x), zero_codual(2.0))
    with pytest.raises(NotImplementedError, match="ddof"):
        rulekit.rrule(zero_codual(np.var), zero_codual(x), CoDual(None), CoDual(None),
                      CoDual(None), zero_codual(1.0))  # fmt: skip


@pytest.mark.parametrize("ord_", MATRIX_ORDS)
def test_every_matrix_ord(ord_: Any) -> None:
    a = np.array([[0.3, -1.2, 2.0], [1.5, 0.7, -0.4]])
    check_rule(np.linalg.norm, a, kwargs={"ord": ord_})
    check_rule(np.linalg.norm, a.T + 1j * a.T[::-1], kwargs={"ord": ord_})
    check_rule(np.linalg.norm, np.stack([a, 2 * a[::-1]]), kwargs={"ord": ord_, "axis": (2, 1)})


# -- through the engine ---------------------------------------------------------------------------


# the first argument by default
_check_grad = partial(check_grads, argnums=0)


def softmax_xent(z: Any, y: Any) -> Any:
    z = z - np.max(z, axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.sum(y * logp) / z.shape[0]


def logsumexp(x: Any) -> Any:
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def test_engine_softmax_and_logsumexp() -> None:
    rng = np.random.default_rng(50)
    z = rng.normal(size=(5, 4))
    z[0, 1] = z[0, 3] = 5.0  # a tie in a row maximum: the max cancels out of the loss
    y = np.eye(4)[rng.integers(0, 4, size=5)]
    _check_grad(softmax_xent, z, y)
    _check_grad(logsumexp, rng.normal(size=(3, 3)))
    _check_grad(lambda x: np.sum(logsumexp(x) * x), rng.normal(size=4))


def test_engine_array_methods() -> None:
    rng = np.random.default_rng(51)
    x = rng.uniform(0.5, 1.5, size=(3, 4))

    def f(x: Any) -> Any:
        return (
            x.sum()
            + x.mean(axis=0).sum()
            + x.prod(axis=1).sum()
            + x.max(axis=1).sum()
            + x.min()
            + x.var(axis=0, ddof=1).sum()
            + x.std()
            + x.cumsum(axis=1).sum()
            + x.cumprod().sum()
        )

    _check_grad(f, x)


def test_engine_norms_average_var_mean() -> None:
    rng = np.random.default_rng(52)
    x, w = rng.normal(size=(3, 4)), rng.uniform(0.5, 1.5, size=(3, 4))
    _check_grad(lambda x: np.linalg.norm(x) + np.linalg.norm(x, "nuc") + np.linalg.norm(x, 1), x)
    _check_grad(lambda x: np.sum(np.linalg.norm(x, 3, axis=0)), x)
    _check_grad(lambda x, w: np.sum(np.average(x, axis=1, weights=w)), x, w, argnums=(0, 1))
    w1 = rng.uniform(0.5, 1.5, size=3)  # 1-d weights along axis 0; returned=(avg, Σw)
    _check_grad(lambda x, w1: np.sum(np.average(x, 0, w1, True)[1] * 2.0), x, w1, argnums=(0, 1))
    _check_grad(lambda x, w1: np.sum(np.average(x, 0, w1, True)[0] ** 2), x, w1, argnums=(0, 1))
    _check_grad(lambda x: np.sum(np.var(x, axis=1, mean=np.mean(x, axis=1, keepdims=True))), x)
    _check_grad(lambda x: np.sum(np.var(x, 1, mean=np.mean(x, 1, keepdims=True) + 0.5)), x)


def test_engine_scalar_output_types() -> None:
    x = np.array([1.0, 2.0, 4.0])
    value, g = rulekit.value_and_grad(lambda x: np.sum(x * x))(x)
    assert type(value) is np.float64 and np.array_equal(g, 2 * x)
    value, g = rulekit.value_and_grad(lambda x: np.sum(np.sum(x, keepdims=True)))(x)
    assert np.array_equal(g, np.ones(3))
