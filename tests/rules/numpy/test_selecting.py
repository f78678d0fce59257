"""Tests for rules.numpy.selecting: take, take_along_axis, sort, select, diag, diagonal, trace,
triu, tril.

Hypothesis draws shapes, axes, indices (with repeats, negative, wrapped and
clipped), offsets and conditions and runs each rule through
`testutils.check_rule`; explicit tests pin down the tie convention of sort and
the writable diagonal view; engine tests differentiate programs using them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions  # np.einsum: the losses of the engine tests
import rules.numpy.indexing.subscript
import rules.numpy.reductions.sums  # np.sum
import rules.numpy.selecting
import rules.numpy.ufuncs.binary  # np.multiply and friends
import rules.numpy.ufuncs.unary  # noqa: F401  (registers comparisons)
from rulekit import CoDual, NoRData, zero_codual
from testutils import check_rule, count_allocations

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
dtypes = st.sampled_from([np.float64, np.float32, np.complex128])
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


@SETTINGS
@given(shapes, st.data(), seeds, dtypes)
def test_take_random(shape: Any, data: Any, seed: int, dtype: Any) -> None:
    x = rand(seed, shape, dtype)
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
    n = x.size if axis is None else shape[axis]
    mode = data.draw(st.sampled_from(["raise", "wrap", "clip"]))
    lo, hi = (-n, n - 1) if mode == "raise" else (-2 * n, 2 * n)
    ind = data.draw(st.one_of(st.integers(lo, hi), st.lists(st.integers(lo, hi), max_size=5)))
    check_rule(np.take, x, ind, kwargs={"axis": axis, "mode": mode})


@SETTINGS
@given(shapes, st.data(), seeds, dtypes)
def test_take_along_axis_and_sort_random(shape: Any, data: Any, seed: int, dtype: Any) -> None:
    x = rand(seed, shape, dtype)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    s = list(shape)
    s[axis] = data.draw(st.integers(1, 4))
    if data.draw(st.booleans()):
        s[(axis + 1) % len(s)] = 1  # broadcast along another axis
    ind = np.random.default_rng(seed).integers(-shape[axis], shape[axis], size=s)
    check_rule(np.take_along_axis, x, ind, kwargs={"axis": axis})
    check_rule(np.take_along_axis, x, ind.reshape(-1) % x.size, kwargs={"axis": None})
    check_rule(np.sort, x, kwargs={"axis": data.draw(st.sampled_from([None, axis]))})


def test_sort_ties_follow_the_stable_order() -> None:
    x = zero_codual(np.array([2.0, 1.0, 2.0, 1.0]))
    y, pb = rulekit.rrule(zero_codual(np.sort), x)
    np.testing.assert_array_equal(y.x, [1.0, 1.0, 2.0, 2.0])
    y.dx[...] = [10.0, 20.0, 30.0, 40.0]
    pb(NoRData())
    # equal values keep their input order: the first 1.0 (index 1) is output 0, ...
    np.testing.assert_array_equal(x.dx, [30.0, 10.0, 40.0, 20.0])


@SETTINGS
@given(shapes, st.data(), seeds)
def test_select_random(shape: Any, data: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = data.draw(st.integers(1, 3))
    conds = [rng.random(shape) < 0.4 for _ in range(k)]
    choices: list[Any] = []
    for j in range(k):
        kind = data.draw(st.sampled_from(["full", "broadcast", "scalar"]))
        if kind == "scalar":
            choices.append(float(rand(seed + j, ())))
        else:
            s = shape if kind == "full" else (1,) * (len(shape) - 1) + shape[-1:]
            choices.append(rand(seed + j, s, data.draw(dtypes)))
    default = data.draw(st.sampled_from([None, 0.5, "array"]))
    args = () if default is None else (rand(seed, shape) if default == "array" else default,)
    check_rule(np.select, conds, choices, *args)


@SETTINGS
@given(st.data(), seeds, dtypes)
def test_diagonals_and_triangles_random(data: Any, seed: int, dtype: Any) -> None:
    m, n = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    batch = tuple(data.draw(st.lists(st.integers(1, 3), max_size=1)))
    x = rand(seed, (*batch, m, n), dtype)
    k = data.draw(st.integers(-m, n))
    a1, a2 = (len(batch), len(batch) + 1) if data.draw(st.booleans()) else (-1, -2)
    check_rule(np.diagonal, x, k, a1, a2)
    check_rule(np.trace, x, k, a1, a2)
    check_rule(np.triu, x, k)
    check_rule(np.tril, x, kwargs={"k": k})
    check_rule(np.diag, x[(0,) * len(batch)], k)
    check_rule(np.diag, rand(seed, (m,), dtype), k)


def test_diagonal_fdata_is_a_writable_view() -> None:
    x = zero_codual(rand(0, (3, 3)))
    y, _ = rulekit.rrule(zero_codual(np.diagonal), x)
    assert not y.x.flags.writeable and y.dx.flags.writeable
    assert np.shares_memory(y.x, x.x) and np.shares_memory(y.dx, x.dx)
    y.dx += 1.0  # what a later pullback does
    np.testing.assert_array_equal(x.dx, np.eye(3))


def test_trace_dtype_and_triu_of_a_vector() -> None:
    check_rule(np.trace, rand(1, (3, 3), np.float32), kwargs={"dtype": np.dtype(np.float64)})
    check_rule(np.triu, rand(2, (3,)), 1)
    check_rule(np.tril, rand(3, (4,)))


# -- through the engine -----------------------------------------------------------------------

W = rand(9, (4, 3))


def gathers(x: Any) -> Any:
    t = np.take(x, [0, 5, 5, -1])
    a = np.take_along_axis(x, np.argsort(x, axis=0), axis=0)
    s = np.sort(x, axis=1)
    return np.sum(t * t) + np.einsum("ij,ij->", a * s, W)


def selects(x: Any) -> Any:
    y = np.select([x > 0.5, x < -0.5], [x * x, 2.0 * x], default=x[0])
    return np.einsum("ij,ij->", y, W)


def diagonals(x: Any) -> Any:
    sq = x[:3]
    d = np.diagonal(sq)
    return (
        np.sum(d * d)
        + np.trace(sq, 1)
        + np.sum(np.triu(x, -1) * np.tril(W))
        + np.sum(np.diag(np.diag(sq)) * sq)
    )


@pytest.mark.parametrize("f", [gathers, selects, diagonals])
def test_engine_gradients(f: Any) -> None:
    check_grads(f, rand(3, (4, 3)))


def test_select_keyword_default_is_traced() -> None:
    """`default=` arrives as a CoDual keyword: it still gets its cotangent."""
    x = rand(4, (4, 3))
    grad = rulekit.grad(lambda x: np.sum(np.select([x > 0], [x * 2.0], default=x * 3.0)))(x)
    np.testing.assert_allclose(grad, np.where(x > 0, 2.0, 3.0))


def test_inactive_inputs() -> None:
    y, _ = rulekit.rrule(zero_codual(np.sort), CoDual(np.ones(3)))
    assert y.dx is None
    y, _ = rulekit.rrule(zero_codual(np.select), CoDual([np.ones(2) > 0]), CoDual([np.ones(2)]))
    assert y.dx is None


@pytest.mark.parametrize(
    ("f", "args"), [(np.take, (np.array([3, 7, 7]),)), (np.trace, ()), (np.take, (5,))]
)
def test_pullback_touches_only_the_selected_elements(f: Any, args: tuple[Any, ...]) -> None:
    """take and trace are declared `in_place`: their adjoints add ȳ into x̄ where the
    elements came from, with no x-sized temporary (a 300×300 x̄ is 720 kB)."""
    X = rand(7, (300, 300))
    x = zero_codual(X)
    y, pb = rulekit.rrule(zero_codual(f), x, *map(CoDual, args))
    dy: Any = NoRData()
    if isinstance(y.dx, np.ndarray):
        y.dx[...] = 1.0
    else:
        dy = 1.0
    used = count_allocations(pb, dy)
    assert used.bytes < X.nbytes // 10, str(used)
    want = np.zeros_like(X)
    if f is np.trace:
        np.fill_diagonal(want, 1.0)
    else:
        np.add.at(want.reshape(-1), np.asarray(args[0]), 1.0)
    np.testing.assert_array_equal(x.dx, want)
