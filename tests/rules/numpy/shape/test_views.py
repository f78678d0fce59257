"""Tests for rules.numpy.shape.views: reshape, ravel, transposes, expand_dims/squeeze, flips,
broadcast_to, copy, astype.

Hypothesis draws shapes, axes, orders and strided (non-contiguous) inputs and
runs the rules through `testutils.check_rule`, which checks that an output
aliases its input exactly when numpy's does and then shares the input's fdata
view. broadcast_to, the one deliberate exception (a read-only copy), is checked
by hand and through the engine.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions  # np.einsum: the losses of the engine tests
import rules.numpy.reductions.sums  # np.sum
import rules.numpy.shape.views
import rules.numpy.ufuncs.binary  # np.multiply and friends
import rules.numpy.ufuncs.unary  # noqa: F401  (registers np.sin)
from rulekit import CoDual, NoRData, zero_codual
from rules._support.shape import ViewMismatchError
from testutils import check_rule

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
dtypes = st.sampled_from([np.float64, np.float32, np.complex128])


@st.composite
def arrays(draw: Any, min_dims: int = 0, max_dims: int = 3) -> np.ndarray:
    """Random arrays, sometimes strided views (reversed, stepped, transposed)."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=min_dims, max_size=max_dims)))
    x = rand(draw(seeds), tuple(2 * n for n in shape), draw(dtypes))
    layout = draw(st.sampled_from(["c", "c", "step", "reverse", "transpose"]))
    if layout == "step":
        return x[(*(slice(None, None, 2) for _ in shape), ...)]
    if layout == "reverse":
        x = x[(*(slice(None, None, -1) for _ in shape), ...)]
    elif layout == "transpose":
        x = x.T
    return x[(*(slice(0, n) for n in shape), ...)]  # `...`: a 0-d array stays an array


@SETTINGS
@given(arrays(min_dims=1), st.data())
def test_reshape_random(x: np.ndarray, data: Any) -> None:
    sizes = [d for d in range(1, x.size + 1) if x.size % d == 0]
    first = data.draw(st.sampled_from(sizes))
    shape = data.draw(st.sampled_from([(first, -1), (-1,), (x.size // first, 1, first)]))
    order = data.draw(st.sampled_from(["C", "F", "A"]))
    check_rule(np.reshape, x, shape, kwargs={"order": order})


@SETTINGS
@given(arrays(), st.sampled_from(["C", "F", "A", "K"]))
def test_ravel_random(x: np.ndarray, order: str) -> None:
    check_rule(np.ravel, x, order)


@SETTINGS
@given(arrays(min_dims=1), st.data())
def test_axis_permutations_random(x: np.ndarray, data: Any) -> None:
    nd = x.ndim
    axes = tuple(data.draw(st.permutations(range(nd))))
    check_rule(np.transpose, x, axes)
    check_rule(np.swapaxes, x, data.draw(st.integers(-nd, nd - 1)), 0)
    src = data.draw(st.lists(st.integers(0, nd - 1), unique=True, min_size=1))
    dst = data.draw(st.permutations(range(nd)))[: len(src)]
    check_rule(np.moveaxis, x, src, dst)
    check_rule(np.flip, x, kwargs={"axis": data.draw(st.sampled_from([None, 0, -1]))})


@SETTINGS
@given(arrays(), st.data())
def test_expand_dims_and_squeeze_random(x: np.ndarray, data: Any) -> None:
    axis = data.draw(st.integers(-x.ndim - 1, x.ndim))
    check_rule(np.expand_dims, x, axis)
    y = np.expand_dims(x, axis)
    check_rule(np.squeeze, y, kwargs={"axis": axis})
    check_rule(np.squeeze, y)


def test_flips_2d() -> None:
    x = rand(0, (3, 4))
    check_rule(np.fliplr, x)
    check_rule(np.flipud, x[::-1])


def test_views_alias_fdata_and_pull_back_nothing() -> None:
    x = zero_codual(rand(1, (2, 3)))
    for f, args in ((np.transpose, ()), (np.reshape, ((3, 2),)), (np.ravel, ()),
                    (np.expand_dims, (0,)), (np.flip, ()), (np.moveaxis, (0, 1))):  # fmt: skip
        y, pb = rulekit.rrule(zero_codual(f), x, *map(CoDual, args))
        assert np.shares_memory(y.x, x.x) and np.shares_memory(y.dx, x.dx)
        assert y.dx.strides == y.x.strides
        y.dx[...] += 1.0  # what a later pullback does: it lands in x̄ directly
        assert all(r is NoRData() for r in pb(NoRData()))
    assert np.all(x.dx == 6.0)


def test_inactive_input_gives_inactive_output() -> None:
    for f, args in ((np.transpose, ()), (np.reshape, ((3, 2),)), (np.copy, ())):
        y, _ = rulekit.rrule(zero_codual(f), CoDual(np.ones((2, 3))), *map(CoDual, args))
        assert y.dx is None


def test_reshape_fdata_with_other_strides_is_an_error() -> None:
    """The engine keeps fdata with the primal's strides; if not, no silent copy."""
    x = rand(2, (3, 4))
    bad = CoDual(x, np.zeros((4, 3)).T)  # F-ordered fdata of a C-ordered primal
    with pytest.raises(ViewMismatchError, match="strides"):
        rulekit.rrule(zero_codual(np.reshape), bad, CoDual((12,)))


# -- broadcast_to: numpy's read-only view, with fdata of its own ----------------------------


@pytest.mark.parametrize(("shape", "to"), [((3,), (2, 3)), ((2, 1), (4, 2, 3)), ((), (2,))])
def test_broadcast_to_is_numpys_view_with_its_own_fdata(
    shape: tuple[int, ...], to: tuple[int, ...]
) -> None:
    x = zero_codual(rand(3, shape))
    y, pb = rulekit.rrule(zero_codual(np.broadcast_to), x, CoDual(to))
    assert np.array_equal(y.x, np.broadcast_to(x.x, to)) and not y.x.flags.writeable
    assert np.shares_memory(y.x, x.x)  # aliases x, as numpy's result does
    assert not np.shares_memory(y.dx, x.dx) and not np.any(y.dx)  # but fdata of its own
    g = rand(4, to)
    y.dx[...] = g
    pb(NoRData())
    where = np.broadcast_to(np.arange(x.x.size).reshape(shape), to).ravel()
    expect = np.bincount(where, weights=g.ravel(), minlength=x.x.size).reshape(shape)
    np.testing.assert_allclose(x.dx, expect)  # x̄ = Σ of ȳ over the copies of each element
    y, _ = rulekit.rrule(zero_codual(np.broadcast_to), CoDual(x.x), CoDual(to))
    assert np.shares_memory(y.x, x.x) and y.dx is None  # inactive: numpy's view itself


def test_broadcast_to_through_the_engine() -> None:
    w = rand(5, (4, 2, 3))

    def f(x: Any) -> Any:
        b = np.broadcast_to(x, (4, 2, 3))
        return np.einsum("ijk,ijk->", b * b, w)

    check_grads(f, rand(6, (2, 1)), atol=0.0)


# -- copy, astype -------------------------------------------------------------------------


@SETTINGS
@given(arrays(), st.sampled_from([np.float32, np.float64, np.complex64]))
def test_copy_and_astype_random(x: np.ndarray, dtype: Any) -> None:
    check_rule(np.copy, x)
    if x.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        return  # complex → real: a ComplexWarning from numpy, tested below
    # (Casts *to* float16 are left out: its rounding steps, ~1e-3 relative, are as large as
    # the kit's finite-difference steps, so FD cannot see the identity derivative.)
    check_rule(np.ndarray.astype, x, np.dtype(dtype))
    if x.dtype.kind == "f":
        check_rule(np.ndarray.astype, x.astype(np.float16), np.dtype(dtype))


def test_astype_complex_to_real_drops_the_imaginary_part() -> None:
    x = zero_codual(np.array([1 + 2j, 3 - 1j]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        y, pb = rulekit.rrule(zero_codual(np.ndarray.astype), x, CoDual(np.float64))
    y.dx[...] = [1.0, 2.0]
    pb(NoRData())
    np.testing.assert_array_equal(x.dx, [1.0 + 0j, 2.0 + 0j])


def test_astype_to_int_is_inactive_and_copy_false_aliases() -> None:
    x = zero_codual(rand(7, (3,)))
    y, _ = rulekit.rrule(zero_codual(np.ndarray.astype), x, CoDual(np.int64))
    assert y.dx is None
    y, _ = rulekit.rrule(zero_codual(np.ndarray.astype), x, CoDual(np.float64), copy=False)
    assert y.x is x.x and y.dx is x.dx


# -- through the engine -------------------------------------------------------------------


W = rand(8, (2, 6))


def reshapes(x: Any) -> Any:
    y = x.T.reshape(2, 6)  # a copy (x.T is not C-contiguous)
    z = x.reshape(2, 6)  # a view
    z *= 2.0  # ... written through: x changes too
    return np.einsum("ij,ij->", y * z, W) + np.sum(np.ravel(x.T, order="K") ** 2)


def axes(x: Any) -> Any:
    y = np.moveaxis(np.expand_dims(x, 0), 0, -1)  # (4, 3, 1)
    y = np.squeeze(np.swapaxes(y, 0, 1), axis=2)  # (3, 4)
    return np.sum(np.sin(np.flip(y, 0)) * np.fliplr(y)) + np.sum(np.flipud(x) * x.T.T)


def casts(x: Any) -> Any:
    y = x.astype(np.float32).astype(np.float64)  # float32 rounding: FD still within rtol
    return np.sum(np.sin(y) * x.astype(np.complex128).real)


@pytest.mark.parametrize("f", [reshapes, axes])
def test_engine_gradients(f: Any) -> None:
    check_grads(f, rand(9, (4, 3)))


def test_engine_astype() -> None:
    x = rand(10, (4, 3))
    value, grad = rulekit.value_and_grad(casts)(x)
    y = x.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(grad, np.cos(y) * x + np.sin(y))
    np.testing.assert_allclose(value, casts(x))
