"""Tests for rules.numpy.ufuncs.methods: reduce, accumulate, outer and reduceat.

Gradients against finite differences on hypothesis-drawn shapes and axes, in
every layout and on later calls; conventions: ties of maximum.reduce/accumulate
split as np.max's, a logaddexp.reduce lane of −inf, reduceat's segments
(empty, decreasing, last), the options numpy's reduce takes positionally.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.reductions.extrema  # (registers np.max, np.min)
import rules.numpy.reductions.sums  # (registers np.sum, np.cumsum)
import rules.numpy.ufuncs.binary  # (registers the binary ufuncs whose methods are tested)
import rules.numpy.ufuncs.methods

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
REDUCE: list[Any] = [np.add.reduce, np.multiply.reduce, np.maximum.reduce, np.minimum.reduce,
          np.logaddexp.reduce, np.logaddexp2.reduce]  # fmt: skip
ACCUMULATE: list[Any] = [np.add.accumulate, np.multiply.accumulate, np.maximum.accumulate,
              np.minimum.accumulate]  # fmt: skip


def _distinct(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) / max(n, 1) + 0.5).reshape(shape)


def _loss(fn: Any, *args: Any, **kwargs: Any) -> Any:
    def loss(x: Any) -> Any:
        y = fn(x, *args, **kwargs)
        return np.sum(np.sin(y) * np.arange(1, np.size(y) + 1).reshape(np.shape(y)))

    return loss


@SETTINGS
@given(st.sampled_from(REDUCE), shapes, st.data())
def test_reduce_random(fn: Any, shape: Any, data: Any) -> None:
    x = _distinct(data.draw(st.integers(0, 99)), shape)
    nd = len(shape)
    axis = data.draw(st.sampled_from([None, *range(-nd, nd)]))
    keepdims = data.draw(st.booleans())
    check_grads(_loss(fn, axis=axis, keepdims=keepdims), x)
    check_grads(_loss(fn), x)  # the default axis=0


@SETTINGS
@given(st.sampled_from(ACCUMULATE), shapes, st.data())
def test_accumulate_random(fn: Any, shape: Any, data: Any) -> None:
    x = _distinct(data.draw(st.integers(0, 99)), shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    check_grads(_loss(fn, axis), x)


@pytest.mark.parametrize("fn", [*REDUCE, *ACCUMULATE], ids=lambda f: f"{f.__self__.__name__}")
@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_layouts_and_warm(fn: Any, layout: str) -> None:
    check_grads(_loss(fn, 1), _distinct(1, (3, 4)), layouts=(layout,), calls=2)


def test_float32_complex_and_positional_options() -> None:
    x = _distinct(2, (3, 4))
    check_grads(_loss(np.add.reduce, 1, None, None, True), x.astype(np.float32))
    check_grads(_loss(np.maximum.reduce, 1, None, None, True), x)
    check_grads(_loss(np.maximum.reduce, 0, np.float64, keepdims=True, initial=0.8), x)
    z = x + 1j * _distinct(3, (3, 4))
    check_grads(lambda z: np.abs(np.sum(np.multiply.reduce(z, 1))) ** 2, z)
    check_grads(lambda z: np.abs(np.sum(np.add.accumulate(z, 0))) ** 2, z)


def test_maximum_ties_split_like_np_max() -> None:
    t = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, -1.0]])
    g = rulekit.grad(lambda x: np.sum(np.maximum.reduce(x, axis=1)))(t)
    np.testing.assert_array_equal(g, rulekit.grad(lambda x: np.sum(np.max(x, axis=1)))(t))
    # running maximum of [1, 3, 3, 0, 3]: y = [1, 3, 3, 3, 3]; y₁ is x₁'s, y₂ and y₃ split
    # between x₁ and x₂, y₄ among x₁, x₂, x₄
    x = np.array([1.0, 3.0, 3.0, 0.0, 3.0])
    g = rulekit.grad(lambda x: np.sum(np.maximum.accumulate(x)))(x)
    np.testing.assert_allclose(g, [1.0, 1 + 0.5 + 0.5 + 1 / 3, 0.5 + 0.5 + 1 / 3, 0.0, 1 / 3])
    g = rulekit.grad(lambda x: np.sum(np.minimum.accumulate(-x)))(x)
    np.testing.assert_allclose(g, -np.array([1.0, 1 + 0.5 + 0.5 + 1 / 3, 1 + 1 / 3, 0.0, 1 / 3]))


def test_running_max_nan() -> None:
    # y = [1, nan, nan, nan]: each NaN result is shared by the NaNs so far (np.max's convention)
    x = np.array([1.0, np.nan, 2.0, np.nan])
    dy = np.array([1.0, 10.0, 100.0, 1000.0])
    _, (g,) = rulekit.value_and_pullback(np.maximum.accumulate, dy, x)
    np.testing.assert_array_equal(g, [1.0, 610.0, 0.0, 500.0])


def test_logaddexp_reduce_infinite_lanes() -> None:
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, 1.0, -np.inf]])
    g = rulekit.grad(lambda x: np.sum(np.logaddexp.reduce(x, axis=1) * np.array([2.0, 1.0])))(x)
    e = np.exp([0.0, 1.0]) / np.exp([0.0, 1.0]).sum()
    np.testing.assert_allclose(g, [[2 / 3, 2 / 3, 2 / 3], [e[0], e[1], 0.0]])


def test_logaddexp_reduce_refuses_initial() -> None:
    with pytest.raises(NotImplementedError, match="initial"):
        rulekit.grad(lambda x: np.logaddexp.reduce(x, initial=0.0))(np.ones(3))


@pytest.mark.parametrize("u", rules.numpy.ufuncs.methods.OUTER_UFUNCS, ids=lambda u: u.__name__)
def test_outer(u: Any) -> None:
    a, b = _distinct(4, (3,)) + 0.2, _distinct(5, (2, 2)) + 0.1  # (distinct: max, min)
    check_grads(lambda a, b: np.sum(np.sin(u.outer(a, b))), a, b)
    check_grads(lambda a: np.sum(np.sin(u.outer(a, 1.3))), a)
    check_grads(lambda b: np.sum(np.sin(u.outer(0.7, b))), b)
    check_grads(lambda a: np.sum(np.sin(u.outer(a, [0.25, 2.0, 1.25]))), a)  # a list operand


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_outer_layouts_dtypes_and_warm(layout: str) -> None:
    a, b = rand(6, (3, 2)), rand(7, (4,))
    check_grads(lambda a, b: np.sum(np.multiply.outer(a, b) ** 2), a, b,
                layouts=(layout,), calls=2)  # fmt: skip
    check_grads(lambda a, b: np.sum(np.subtract.outer(a, b) ** 2), a.astype(np.float32), b)
    z = rand(8, (3,), np.complex128)
    check_grads(lambda z, b: np.abs(np.sum(np.multiply.outer(z, b))) ** 2, z, b)


@SETTINGS
@given(st.integers(1, 7), st.data())
def test_reduceat_random(n: int, data: Any) -> None:
    idx = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5))
    x = rand(data.draw(st.integers(0, 99)), (n, 2))
    check_grads(_loss(np.add.reduceat, idx), x)
    check_grads(_loss(np.add.reduceat, idx, axis=0), x.T.copy().T)
    check_grads(_loss(np.add.reduceat, idx, 1), x.T.copy())


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_reduceat_layouts_and_warm(layout: str) -> None:
    x = rand(9, (6, 3))
    check_grads(_loss(np.add.reduceat, [0, 4, 2, 5]), x, layouts=(layout,), calls=2)


@pytest.mark.parametrize("fn", [np.cumulative_sum, np.cumulative_prod])
def test_cumulative_functions_trace_through_accumulate(fn: Any) -> None:
    for kw in ({"axis": 1}, {"axis": 0, "include_initial": True}):
        check_grads(_loss(fn, **kw), _distinct(10, (3, 4)), layouts=("F", "negative"), calls=2)
    check_grads(_loss(fn), _distinct(11, (5,)))
