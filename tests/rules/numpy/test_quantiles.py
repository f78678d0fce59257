"""Tests for rules.numpy.quantiles: median, percentile, quantile (and nan- forms), ptp.

The engine's gradients against finite differences on hypothesis-drawn shapes,
axes, q and methods, in every memory layout and on later calls of one
`value_and_grad`; explicit tests pin the conventions: ½/½ for an even-count
median, ties split equally (quantile(x, 1) has np.max's gradient), NaN lanes, the
q-derivative of method "linear", and the refusals.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.quantiles  # (registers median, percentile, quantile, ptp)
import rules.numpy.reductions.extrema  # noqa: F401  (registers np.max, np.min: ptp's formula)

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)
METHODS = ["linear", "lower", "higher", "nearest", "midpoint", "weibull", "hazen",
           "median_unbiased", "normal_unbiased", "inverted_cdf", "closest_observation"]  # fmt: skip


def _loss(fn: Any, *args: Any, **kwargs: Any) -> Any:
    w = None

    def loss(x: Any) -> Any:
        nonlocal w
        y = fn(x, *args, **kwargs)
        if w is None:
            w = rand(99, np.shape(y))
        return np.sum(y * w)

    return loss


def _distinct(seed: int, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    """Distinct values (no ties: every order statistic differentiable)."""
    n = int(np.prod(shape))
    v = np.random.default_rng(seed).permutation(n) / max(n, 1) + 0.1
    return v.reshape(shape).astype(dtype)


@SETTINGS
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), st.data())
def test_quantile_random(shape: Any, data: Any) -> None:
    x = _distinct(data.draw(st.integers(0, 99)), shape)
    nd = len(shape)
    axis = data.draw(st.sampled_from([None, *range(-nd, nd), tuple(range(nd))]))
    q = data.draw(st.sampled_from([0.3, 0.61, np.array([0.15, 0.8])]))
    method = data.draw(st.sampled_from(METHODS))
    keepdims = data.draw(st.booleans())
    check_grads(_loss(np.quantile, q, axis=axis, method=method, keepdims=keepdims), x)
    check_grads(_loss(np.percentile, np.asarray(q) * 100, axis=axis, method=method), x)


@pytest.mark.parametrize("fn", [np.median, np.nanmedian])
@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_median_in_every_layout_and_warm(fn: Any, layout: str) -> None:
    x = _distinct(3, (4, 6))
    check_grads(_loss(fn, axis=1), x, layouts=(layout,), calls=3)
    check_grads(_loss(fn), x, layouts=(layout,), calls=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtypes_0d_and_scalar_results(dtype: Any) -> None:
    x = _distinct(4, (7,), dtype)
    check_grads(lambda x: np.median(x) * 2.0, x)
    check_grads(lambda x: np.quantile(x, 0.4) ** 2, x)
    check_grads(lambda x: np.percentile(x, [10, 90]).sum(), x)
    check_grads(lambda x: np.median(x, keepdims=True).sum(), np.array(1.5, dtype))  # 0-d


def test_even_count_median_gives_half_to_each_middle_value() -> None:
    g = rulekit.grad(np.median)(np.array([4.0, 1.0, 3.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.5, 0.5])
    g = rulekit.grad(np.median)(np.array([4.0, 1.0, 3.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0])


def test_linear_interpolation_weights() -> None:
    x = np.array([10.0, 0.0, 30.0, 20.0])  # sorted 0, 10, 20, 30: q=0.5 → position 1.5
    g = rulekit.grad(lambda x: np.quantile(x, 0.5))(x)
    np.testing.assert_allclose(g, [0.5, 0.0, 0.0, 0.5])
    g = rulekit.grad(lambda x: np.quantile(x, 0.1))(x)  # position 0.3: 0.7·x₍₀₎ + 0.3·x₍₁₎
    np.testing.assert_allclose(g, [0.3, 0.7, 0.0, 0.0])
    g = rulekit.grad(lambda x: np.quantile(x, 0.1, method="lower"))(x)
    np.testing.assert_allclose(g, [0.0, 1.0, 0.0, 0.0])


def test_ties_are_split_and_q_one_is_max() -> None:
    x = np.array([1.0, 3.0, 3.0, 0.0, 2.0])
    g = rulekit.grad(lambda x: np.quantile(x, 1.0))(x)
    np.testing.assert_array_equal(g, rulekit.grad(np.max)(x))
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.5, 0.0, 0.0])
    g = rulekit.grad(np.median)(np.array([2.0, 2.0, 1.0, 2.0, 5.0]))
    np.testing.assert_allclose(g, [1 / 3, 1 / 3, 0.0, 1 / 3, 0.0])


def test_nan_lanes() -> None:
    x = np.array([[1.0, np.nan, 3.0, 2.0], [4.0, 0.0, 5.0, 6.0]])
    g = rulekit.grad(lambda x: np.sum(np.median(x, axis=1)))(x)
    np.testing.assert_array_equal(g, [[0, 1, 0, 0], [0.5, 0, 0.5, 0]])  # NaN lane: to the NaN
    g = rulekit.grad(lambda x: np.sum(np.nanmedian(x, axis=1)))(x)
    np.testing.assert_array_equal(g, [[0, 0, 0, 1], [0.5, 0, 0.5, 0]])  # NaN skipped
    x = _distinct(5, (3, 5))
    x[0, 1] = x[2, 4] = x[2, 0] = np.nan
    check_grads(_loss(np.nanquantile, [0.2, 0.7], axis=1), x)
    check_grads(_loss(np.nanpercentile, 35.0, axis=1, method="midpoint"), x)


@pytest.mark.parametrize("method", ["linear", "nearest", "lower"])
def test_traced_q(method: Any) -> None:
    x = _distinct(6, (3, 5))
    check_grads(lambda q: np.sum(np.quantile(x, q, axis=1, method=method)), 0.37)
    check_grads(lambda q: np.sum(np.percentile(x, q, method=method)), np.array([12.0, 71.0]))
    check_grads(lambda x, q: np.sum(np.quantile(x, q, axis=0)), x, np.array([0.3, 0.8]))


def test_refusals_name_what_is_supported() -> None:
    x = _distinct(7, (5,))
    with pytest.raises(NotImplementedError, match="linear"):
        rulekit.grad(lambda q: np.quantile(x, q, method="hazen"))(0.3)
    w = np.ones(5)
    with pytest.raises(NotImplementedError, match="weights"):
        rulekit.grad(lambda x: np.quantile(x, 0.3, method="inverted_cdf", weights=w))(x)


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_ptp(layout: str) -> None:
    x = _distinct(8, (3, 4))
    check_grads(_loss(np.ptp, axis=0), x, layouts=(layout,), calls=2)
    check_grads(lambda x: np.ptp(x), x)
    t = np.array([[1.0, 3.0, 3.0, 0.0], [0.0, 2.0, 0.0, 1.0]])  # tied maxima / minima
    g = rulekit.grad(lambda x: np.sum(np.ptp(x, axis=1)))(t)
    np.testing.assert_array_equal(g, [[0, 0.5, 0.5, -1], [-0.5, 1, -0.5, 0]])


def test_untraced_calls_are_numpy() -> None:
    x = rand(9, (4, 5))
    for fn, args in ((np.median, ()), (np.quantile, (0.3,)), (np.ptp, ())):
        v, _ = rulekit.value_and_grad(lambda x, fn=fn, args=args: np.sum(fn(x, *args)))(x)
        assert v == np.sum(fn(x, *args))


def test_overwrite_input_leaves_the_traced_input_intact() -> None:
    x = _distinct(10, (3, 5))
    keep = x.copy()
    check_grads(_loss(np.median, axis=1, overwrite_input=True), x)
    check_grads(_loss(np.percentile, 40.0, 0, None, True), x)  # positional overwrite_input
    np.testing.assert_array_equal(x, keep)


def test_out_by_keyword() -> None:
    x = _distinct(11, (3, 5))

    def f(x: Any) -> Any:
        out = np.zeros_like(x[:, 0])  # (a traced destination)
        np.median(x, axis=1, out=out)
        return np.sum(out * np.arange(1.0, 4.0))

    check_grads(f, x)
