"""Tests for rules.numpy.indexing.subscript: `x[idx]`, `x[idx] = v`, `np.add.at` / `np.subtract.at`.

Hypothesis draws shapes and random index expressions (ints, slices with any
step, int arrays with repeats, boolean masks, None, Ellipsis, and mixtures) and
runs getitem and setitem through `testutils.check_rule`; explicit tests pin
down views, the last-write-wins convention of repeated-index assignment,
aliasing values (`x[1:] = x[:-1]`) and zero allocation of basic setitem; engine
tests differentiate small programs that slice, write into slices and scatter.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions  # np.einsum: the losses of the engine tests
import rules.numpy.creation  # np.zeros_like
import rules.numpy.indexing.subscript
import rules.numpy.reductions.sums  # np.sum
import rules.numpy.shape.views
import rules.numpy.ufuncs.binary  # np.multiply and friends
import rules.numpy.ufuncs.unary  # np.sin, comparisons
from rulekit import CoDual, NoFData, NoRData, zero_codual
from rules.numpy.indexing.subscript import SetitemRule, SetitemTupleRule
from testutils import check_rule, count_allocations

SETTINGS = settings(max_examples=400, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)
dtypes = st.sampled_from([np.float64, np.float32, np.complex128])


@st.composite
def indices(draw: Any, shape: tuple[int, ...]) -> Any:
    """A random index expression for an array of `shape` (every kind numpy accepts)."""
    if draw(st.integers(0, 9)) == 0:  # a boolean mask of the whole array
        return np.array(draw(st.lists(st.booleans(), min_size=int(np.prod(shape)),
                                      max_size=int(np.prod(shape))))).reshape(shape)  # fmt: skip
    k = draw(st.integers(1, 3))  # the length shared by integer arrays
    entries: list[Any] = []
    arrays = None  # "int" or "bool": numpy must broadcast advanced entries together
    for n in shape[: draw(st.integers(1, len(shape)))]:
        kind = draw(st.sampled_from(["int", "slice", "slice", "all", "ints", "ints", "mask"]))
        if kind == "ints" and arrays in (None, "int"):
            entries.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k))))
            arrays = "int"
        elif kind == "mask" and arrays is None:
            entries.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
            arrays = "bool"
        elif kind == "int":
            entries.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            ends = st.one_of(st.none(), st.integers(-n - 1, n + 1))
            step = draw(st.sampled_from([None, 1, 2, -1, -2]))
            entries.append(slice(draw(ends), draw(ends), step))
        else:
            entries.append(slice(None))
    full = len(entries) == len(shape)
    if draw(st.integers(0, 3)) == 0:  # Ellipsis: anywhere in a full index, else last
        entries.insert(draw(st.integers(0, len(entries))) if full else len(entries), Ellipsis)
    if draw(st.booleans()):
        entries.insert(draw(st.integers(0, len(entries))), None)
    if len(entries) == 1 and draw(st.booleans()):
        return entries[0]
    return tuple(entries)


# -- getitem ----------------------------------------------------------------------------------


@SETTINGS
@given(st.data(), shapes, dtypes, seeds)
def test_getitem_random_indices(data: Any, shape: Any, dtype: Any, seed: int) -> None:
    idx = data.draw(indices(shape))
    check_rule(operator.getitem, rand(seed, shape, dtype), idx)


def test_getitem_views_share_fdata() -> None:
    x = zero_codual(rand(0, (3, 4)))
    idx: Any
    for idx in (slice(1, None), (Ellipsis, None, slice(None, None, -2)), 1, (0, slice(1, 3))):
        y, _ = rulekit.rrule(zero_codual(operator.getitem), x, CoDual(idx))
        assert np.shares_memory(y.x, x.x) and np.shares_memory(y.dx, x.dx)
        assert y.dx.strides == y.x.strides
    for idx in ([0, 0], x.x > 0, (slice(None), np.array([1]))):
        y, _ = rulekit.rrule(zero_codual(operator.getitem), x, CoDual(idx))
        assert not np.shares_memory(y.dx, x.dx) and not np.any(y.dx)


def test_getitem_repeated_indices_accumulate() -> None:
    x = zero_codual(np.arange(4.0))
    y, pb = rulekit.rrule(zero_codual(operator.getitem), x, CoDual([1, 1, 3, 1]))
    y.dx[...] = [1.0, 2.0, 3.0, 4.0]
    pb(NoRData())
    np.testing.assert_array_equal(x.dx, [0.0, 7.0, 0.0, 3.0])


def test_getitem_scalar_output_gets_rdata() -> None:
    x = zero_codual(np.arange(6.0).reshape(2, 3))
    y, pb = rulekit.rrule(zero_codual(operator.getitem), x, CoDual((1, -1)))
    assert type(y.x) is np.float64 and y.dx is NoFData()
    pb(np.float64(2.5))
    assert x.dx[1, 2] == 2.5 and x.dx.sum() == 2.5


def test_getitem_inactive_input() -> None:
    y, _ = rulekit.rrule(zero_codual(operator.getitem), CoDual(np.ones(3)), CoDual(slice(1)))
    assert y.dx is None


# -- setitem ----------------------------------------------------------------------------------


@st.composite
def values_for(draw: Any, target: tuple[int, ...], dtype: Any) -> Any:
    """A value assignable to a target of shape `target`: scalar, array or broadcast array."""
    kind = draw(st.sampled_from(["float", "numpy", "array", "broadcast", "0d"]))
    # Offset from the seeds of x: a write of x's own values would look like no mutation.
    seed = draw(seeds) + 2**20
    if kind == "float":
        return float(rand(seed, ()))
    if kind == "numpy":
        return np.dtype(dtype if np.dtype(dtype).kind == "f" else np.float64).type(rand(seed, ()))
    if kind == "0d":
        return rand(seed, (), dtype)
    shape = list(target)
    if kind == "broadcast":
        shape = [1 if draw(st.booleans()) else n for n in shape][draw(st.integers(0, len(shape))) :]
    return rand(seed, tuple(shape), draw(st.sampled_from([dtype, np.float64])))


@SETTINGS
@given(st.data(), shapes, dtypes, seeds)
def test_setitem_random_indices(data: Any, shape: Any, dtype: Any, seed: int) -> None:
    x = rand(seed, shape, dtype)
    idx = data.draw(indices(shape))
    v = data.draw(values_for(x[idx].shape if np.ndim(x[idx]) else (), dtype))
    check_rule(operator.setitem, x, idx, v)


def test_setitem_dispatch() -> None:
    x = np.ones((3, 3))
    sig = rulekit.signature_of
    assert isinstance(rulekit.build_primitive_rrule(sig(operator.setitem, x, 1, 2.0)), SetitemRule)
    rule = rulekit.build_primitive_rrule(sig(operator.setitem, x, (1, 2), 2.0))
    assert isinstance(rule, SetitemTupleRule)
    assert rulekit.registry.which(operator.setitem, x, x > 0, 2.0).impl is (
        rules.numpy.indexing.subscript.setitem_advanced_rrule
    )


def test_setitem_repeated_index_last_write_wins() -> None:
    x, v = np.zeros(3), np.array([1.0, 2.0, 3.0])
    cx, cv = zero_codual(x), zero_codual(v)
    _, pb = rulekit.rrule(zero_codual(operator.setitem), cx, CoDual([0, 2, 0]), cv)
    assert np.array_equal(x, [3.0, 0.0, 2.0])  # numpy kept the last write to x[0]
    cx.dx[...] = [10.0, 20.0, 30.0]
    pb(NoRData())
    np.testing.assert_array_equal(cv.dx, [0.0, 30.0, 10.0])  # the overwritten write gets 0
    np.testing.assert_array_equal(cx.dx, [0.0, 20.0, 0.0])
    np.testing.assert_array_equal(x, 0.0)


def test_setitem_value_aliasing_the_target() -> None:
    """x[1:] = x[:-1]: v's fdata is a view of x's; x̄[idx] must be read before it is zeroed."""
    x = np.arange(4.0)
    cx = zero_codual(x)
    v, _ = rulekit.rrule(zero_codual(operator.getitem), cx, CoDual(slice(None, -1)))
    _, pb = rulekit.rrule(zero_codual(operator.setitem), cx, CoDual(slice(1, None)), v)
    np.testing.assert_array_equal(x, [0.0, 0.0, 1.0, 2.0])
    cx.dx[...] = [1.0, 2.0, 3.0, 4.0]
    pb(NoRData())
    # x_after = (x0, x0, x1, x2): x̄_before = (1 + 2, 3, 4, 0)
    np.testing.assert_array_equal(cx.dx, [3.0, 3.0, 4.0, 0.0])
    np.testing.assert_array_equal(x, np.arange(4.0))


def test_setitem_constant_target_with_traced_value_raises() -> None:
    with pytest.raises(rulekit.TracingError, match="untraced array"):
        rulekit.rrule(
            zero_codual(operator.setitem), CoDual(np.ones(3)), CoDual(0), zero_codual(1.0)
        )


@pytest.mark.parametrize(
    ("idx", "v"),
    [
        ((slice(None), 1), 2.5),
        ((0, slice(1, 3)), np.array([1.0, 2.0])),
        ((Ellipsis, 2), np.float32(1.5)),
        ((1, 1), np.ones((1, 1))),
    ],
)
def test_basic_tuple_setitem_allocates_nothing_once_warm(idx: Any, v: Any) -> None:
    x = rand(0, (3, 4))
    rule = SetitemTupleRule()

    def once() -> None:
        cx = CoDual(x, np.zeros_like(x))
        cv = zero_codual(v)
        _, pb = rule(CoDual(operator.setitem), cx, CoDual(idx), cv)
        pb(NoRData())

    once()
    cx, cv = CoDual(x, np.zeros_like(x)), zero_codual(v)  # allocated outside the count

    def warm() -> None:
        _, pb = rule(CoDual(operator.setitem), cx, CoDual(idx), cv)
        pb(NoRData())

    assert count_allocations(warm).count == 0


# -- np.add.at --------------------------------------------------------------------------------


@SETTINGS
@given(shapes, dtypes, seeds, st.data())
def test_add_at_random(shape: Any, dtype: Any, seed: int, data: Any) -> None:
    x = rand(seed, shape, dtype)
    idx = np.array(data.draw(st.lists(st.integers(-shape[0], shape[0] - 1), min_size=1,
                                      max_size=5)))  # fmt: skip
    v = rand(seed + 1, (len(idx), *shape[1:]), dtype)
    if data.draw(st.booleans()):
        v = v[:1]  # broadcast along the repeated index
    check_rule(np.add.at, x, idx, v)
    check_rule(np.subtract.at, x, idx, v)


def test_add_at_restores_exactly() -> None:
    x = np.array([1.0, 1e-17, 3.0])  # x + v − v would not give x back
    cx, cv = zero_codual(x), zero_codual(np.array([1.0, 1.0]))
    _, pb = rulekit.rrule(zero_codual(np.add.at), cx, CoDual([1, 1]), cv)
    cx.dx[...] = [1.0, 2.0, 3.0]
    pb(NoRData())
    assert x[1] == 1e-17 and np.array_equal(cv.dx, [2.0, 2.0])
    assert np.array_equal(cx.dx, [1.0, 2.0, 3.0])  # x̄ passes through unchanged


# -- through the engine -----------------------------------------------------------------------

W = rand(7, (4, 3))


def shift_write(x: Any) -> Any:
    z = np.zeros_like(x)
    z[1:] = x[:-1] * 2
    return np.einsum("ij,ij->", z, W)


def mask_write(x: Any) -> Any:
    y = x.copy()
    y[y > 0.3] = 0
    y[:, [0, 0]] = x[:, 1:]  # last write wins
    return np.einsum("ij,ij->", y * y, W)


def scatter(x: Any) -> Any:
    z = np.zeros_like(x)
    np.add.at(z, [0, 0, 2], x[1:])
    np.subtract.at(z, (slice(None), [1, 1]), x[:, :1])  # type: ignore[arg-type]
    return np.einsum("ij,ij->", z * x, W)


def mixed_reads(x: Any) -> Any:
    a = x[[0, 2], 1:]  # advanced + basic
    b = x[x[:, 0] > 0, ::-1]  # boolean + reversed slice
    c = x[None, ..., 1]
    return np.sum(a * a) + np.sum(b * W[: b.shape[0]]) + np.sum(c * c * c)


def views_write_back(x: Any) -> Any:
    y = x.copy()
    t = y.T
    t[0] *= 2.0  # through the transpose
    s = y[::2]
    s += y[1::2]  # through a strided view, reading its sibling
    r = y.reshape(3, 4)
    r[1, 1:] = np.sin(r[0, :3])  # through a reshape view
    y[2, 2] = y[0, 0] * y[3, 1]  # single elements
    return np.einsum("ij,ij->", y, W)


@pytest.mark.parametrize("f", [shift_write, mask_write, scatter, mixed_reads, views_write_back])
def test_engine_gradients(f: Any) -> None:
    check_grads(f, rand(3, (4, 3)))


def test_engine_view_gradient_reaches_its_base() -> None:
    """In-place ops on a view of the input: the input's gradient sees them."""

    def f(x: Any) -> Any:
        x.T[1] *= 3.0
        x[::2] += 1.0
        x.reshape(-1)[5] = 0.0
        return np.einsum("ij,ij->", x * x, W)

    x = rand(4, (4, 3))
    value, grad = rulekit.value_and_grad(f)(x.copy())
    expect = x.copy()
    expect[:, 1] *= 3.0
    expect[::2] += 1.0
    expect.reshape(-1)[5] = 0.0
    scale = np.full((4, 3), 1.0)
    scale[:, 1] = 3.0
    scale.reshape(-1)[5] = 0.0
    np.testing.assert_allclose(value, np.sum(expect * expect * W))
    np.testing.assert_allclose(grad, 2 * expect * W * scale)
