"""Tests for rules.numpy.shape.forms: append, np.astype, atleast_1d/2d/3d, column_stack, rot90,
partition, real_if_close.

Hypothesis draws shapes, axes, dtypes and strided inputs and runs each rule through
`testutils.check_rule` (which also checks that views share their input's fdata);
hand-written tests cover what finite differences cannot reach (real_if_close's
real view, ties of partition); engine tests differentiate user code with each.
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
import rules.numpy.shape.forms
import rules.numpy.ufuncs.binary  # np.multiply and friends
import rules.numpy.ufuncs.unary  # noqa: F401  (registers np.sin, np.real, np.abs)
from rulekit import CoDual, NoRData, zero_codual
from testutils import check_rule

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
dtypes = st.sampled_from([np.float64, np.float32, np.complex128])
shapes = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)


# -- property tests -----------------------------------------------------------------------------


@SETTINGS
@given(shapes, st.data(), seeds, dtypes)
def test_append_random(shape: Any, data: Any, seed: int, dtype: Any) -> None:
    x = rand(seed, shape, dtype)
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
    if axis is None:
        values: Any = data.draw(
            st.sampled_from([rand(seed + 1, (2,)), np.float64(0.5), [1.5, np.float64(2.0)]])
        )
    else:
        s = list(shape)
        s[axis] = data.draw(st.integers(1, 3))
        values = rand(seed + 1, tuple(s), data.draw(dtypes))
    check_rule(np.append, x, values, kwargs={"axis": axis})


@st.composite
def strided(draw: Any, min_dims: int = 0, max_dims: int = 3) -> np.ndarray:
    """Random arrays, sometimes non-contiguous views (stepped, reversed, transposed)."""
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=min_dims, max_size=max_dims)))
    x = rand(draw(seeds), tuple(2 * n for n in shape), draw(dtypes))
    layout = draw(st.sampled_from(["c", "step", "reverse", "transpose"]))
    if layout == "step":
        return x[(*(slice(None, None, 2) for _ in shape), ...)]
    if layout == "reverse":
        x = x[(*(slice(None, None, -1) for _ in shape), ...)]
    elif layout == "transpose":
        x = x.T
    return x[(*(slice(0, n) for n in shape), ...)]


@SETTINGS
@given(st.lists(strided(), min_size=1, max_size=3), st.booleans())
def test_atleast_random(xs: list[np.ndarray], with_scalar: bool) -> None:
    args: list[Any] = list(xs) + ([np.float64(1.5)] if with_scalar else [])
    for fn in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
        check_rule(fn, *args)


@SETTINGS
@given(st.data(), seeds)
def test_column_stack_random(data: Any, seed: int) -> None:
    rows = data.draw(st.integers(1, 3))
    parts: list[Any] = []
    for k in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["1d", "2d"] if rows > 1 else ["0d", "1d", "2d"]))
        shape = {"0d": (), "1d": (rows,), "2d": (rows, data.draw(st.integers(1, 2)))}[kind]
        parts.append(rand(seed + k, shape, data.draw(dtypes)))
    check_rule(np.column_stack, data.draw(st.sampled_from([list, tuple]))(parts))


@SETTINGS
@given(strided(min_dims=2), st.integers(-5, 5), st.data())
def test_rot90_random(x: np.ndarray, k: int, data: Any) -> None:
    a = data.draw(st.integers(0, x.ndim - 1))
    b = data.draw(st.integers(0, x.ndim - 1).filter(lambda v: v != a))
    check_rule(np.rot90, x, k, (a, b))


@SETTINGS
@given(shapes, st.data(), seeds, dtypes)
def test_partition_random(shape: Any, data: Any, seed: int, dtype: Any) -> None:
    x = rand(seed, shape, dtype)
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
    n = x.size if axis is None else shape[axis]
    kth = data.draw(
        st.one_of(st.integers(-n, n - 1), st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
    )
    check_rule(np.partition, x, kth, kwargs={"axis": axis})


# -- by hand ------------------------------------------------------------------------------------


def test_partition_with_ties_gives_a_permutation_of_the_cotangent() -> None:
    x = np.array([2.0, 1.0, 2.0, 0.0, 1.0, 2.0])
    cx = zero_codual(x.copy())
    y, pb = rulekit.rrule(zero_codual(np.partition), cx, CoDual(3))
    np.testing.assert_array_equal(y.x, np.partition(x, 3))
    y.dx[...] = np.arange(1.0, 7.0)
    pb(NoRData())
    assert sorted(cx.dx) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    # each x̄ᵢ is the ȳ of a position holding the same value
    for i, g in enumerate(cx.dx):
        assert y.x[int(g) - 1] == x[i]


def test_real_if_close_returns_a_view_of_the_real_part_sharing_fdata() -> None:
    z = rand(0, (2, 3)) + 1e-15j
    cz = zero_codual(z.copy())
    y, pb = rulekit.rrule(zero_codual(np.real_if_close), cz)
    assert y.x.dtype == np.float64 and np.shares_memory(y.x, cz.x)
    assert np.shares_memory(y.dx, cz.dx)
    y.dx += 2.0  # a later pullback
    pb(NoRData())
    np.testing.assert_array_equal(cz.dx, np.full((2, 3), 2.0 + 0j))
    same = rand(1, (3,)) + 1j
    c = zero_codual(same)
    y2, _ = rulekit.rrule(zero_codual(np.real_if_close), c)
    assert y2.x is same and y2.dx is c.dx


def test_atleast_of_an_inactive_array_among_active_ones() -> None:
    x, c = rand(0, (3,)), rand(1, (2, 2))
    y, pb = rulekit.rrule(zero_codual(np.atleast_2d), zero_codual(x), CoDual(c), zero_codual(2.5))
    assert np.shares_memory(y.dx[0], y.dx[0]) and y.dx[1].shape == (2, 2)
    y.dx[2][...] = 3.0
    assert pb(NoRData()) == (NoRData(), NoRData(), NoRData(), 3.0)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")  # complex → real, as numpy
def test_np_astype_device_and_scalars() -> None:
    check_rule(np.astype, np.float32(1.5), np.float64)
    check_rule(np.astype, rand(0, (2,), np.complex128), np.float64)  # Im dropped
    check_rule(np.astype, rand(0, (2,)), np.float64, kwargs={"copy": False, "device": "cpu"})
    with pytest.raises(ValueError):
        rulekit.rrule(
            zero_codual(np.astype), zero_codual(rand(0, (2,))), CoDual(np.float32), device="gpu"
        )


# -- through the engine -------------------------------------------------------------------------

W = rand(9, (40,))


def _loss(y: Any) -> Any:
    y = np.ravel(y)
    return np.sum(np.real(y) * W[: y.size]) + np.sum(np.imag(y) * W[1 : y.size + 1])


def appends(x: Any) -> Any:
    a = np.append(x, [x[0, 0] * 2.0, 3.0])  # a list with a traced scalar
    b = np.append(x, x[:1] ** 2, axis=0)
    return _loss(a) + _loss(b) + _loss(np.append(x, x[1, 1]))


def atleasts(x: Any) -> Any:
    a, b = np.atleast_2d(x[0], x[1, 2])
    c = np.atleast_3d(x)
    c[0, 0, 0] = b[0, 0] * 5.0  # written through a view of a copy of x
    return _loss(a * 3.0) + _loss(b) + _loss(np.sin(c))


def stacks_and_rotations(x: Any) -> Any:
    c = np.column_stack([x[0], np.sin(x[1]), x[:, :2]])
    r = np.rot90(x.copy(), 3, (1, 0))
    r[0] *= 2.0
    return _loss(c) + _loss(r) + _loss(np.rot90(x) ** 2)


def casts_and_partitions(x: Any) -> Any:
    z = np.astype(x, np.complex128) * (1 + 2j)
    close = np.real_if_close(x * (1 + 0j))  # a real view
    p = np.partition(x, 1) + np.partition(x, [0, 2], axis=0)
    return _loss(z) + _loss(close**2) + _loss(p) + np.partition(x, 2, axis=None)[2] * 3.0


@pytest.mark.parametrize("f", [appends, atleasts, stacks_and_rotations, casts_and_partitions])
def test_engine_gradients(f: Any) -> None:
    check_grads(f, rand(3, (4, 4)))
