"""Tests for rules.numpy.joining: concatenate, stack, hstack, vstack, split, array_split, tile,
repeat, roll, pad.

Hypothesis draws shapes, axes, section counts, repetitions, shifts and pad widths
and runs each rule through `testutils.check_rule`; engine tests differentiate
code that splits, concatenates, stacks scalars and pads.
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
import rules.numpy.joining
import rules.numpy.reductions.sums  # np.sum
import rules.numpy.ufuncs.binary  # np.multiply and friends
import rules.numpy.ufuncs.unary  # noqa: F401  (registers np.sin)
from rulekit import CoDual, NoRData, zero_codual
from testutils import check_rule

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
dtypes = st.sampled_from([np.float64, np.float32, np.complex128])
shapes = st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple)


@SETTINGS
@given(shapes, st.data(), seeds)
def test_concatenate_and_stack_random(shape: Any, data: Any, seed: int) -> None:
    nd = len(shape)
    axis = data.draw(st.integers(-nd, nd - 1))
    parts = []
    for k in range(data.draw(st.integers(1, 3))):
        s = list(shape)
        s[axis] = data.draw(st.integers(1, 3))
        parts.append(rand(seed + k, tuple(s), data.draw(dtypes)))
    container = data.draw(st.sampled_from([list, tuple]))
    check_rule(np.concatenate, container(parts), kwargs={"axis": axis})
    check_rule(np.concatenate, container(parts), kwargs={"axis": None})
    same = [rand(seed + k, shape, data.draw(dtypes)) for k in range(data.draw(st.integers(1, 3)))]
    check_rule(np.stack, container(same), kwargs={"axis": data.draw(st.integers(-nd - 1, nd))})
    check_rule(np.hstack, container(same))
    check_rule(np.vstack, container(same))


def test_hstack_vstack_of_scalars_and_vectors() -> None:
    check_rule(np.hstack, [rand(0, ()), 2.5, rand(1, (3,))])
    check_rule(np.vstack, [rand(0, (3,)), rand(1, (2, 3))])
    check_rule(np.stack, [np.float64(1.5), np.float64(-0.5)])


def test_scalar_elements_get_rdata() -> None:
    """A list of traced scalars (the engine's list fdata holds NoFData for them)."""
    a, b = np.float64(1.5), np.float64(-2.0)
    seq = CoDual([a, b], [rulekit.NoFData(), rulekit.NoFData()])
    y, pb = rulekit.rrule(zero_codual(np.stack), seq)
    y.dx[...] = [3.0, 4.0]
    _, r = pb(NoRData())
    assert r == (3.0, 4.0) and all(type(e) is np.float64 for e in r)


@SETTINGS
@given(shapes, st.data(), seeds, dtypes)
def test_splits_random(shape: Any, data: Any, seed: int, dtype: Any) -> None:
    x = rand(seed, shape, dtype)
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    check_rule(np.array_split, x, data.draw(st.integers(1, n + 1)), kwargs={"axis": axis})
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    check_rule(np.split, x, cuts, axis)
    check_rule(np.split, x, 1, axis)


def test_split_pieces_alias_fdata() -> None:
    x = zero_codual(rand(0, (6, 2)))
    ys, pb = rulekit.rrule(zero_codual(np.split), x, CoDual(3))
    for y, dy in zip(ys.x, ys.dx, strict=True):
        assert np.shares_memory(y, x.x) and np.shares_memory(dy, x.dx)
        dy += 1.0
    assert pb(NoRData()) == (NoRData(),) * 3 and np.all(x.dx == 1.0)


@SETTINGS
@given(shapes, st.data(), seeds, dtypes)
def test_tile_repeat_roll_random(shape: Any, data: Any, seed: int, dtype: Any) -> None:
    x = rand(seed, shape, dtype)
    reps = data.draw(st.one_of(st.integers(1, 3), st.lists(st.integers(1, 3), max_size=4)))
    check_rule(np.tile, x, reps if isinstance(reps, int) else tuple(reps))
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
    n = x.size if axis is None else shape[axis]
    repeats = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=n,
                                                              max_size=n)))  # fmt: skip
    check_rule(np.repeat, x, repeats, kwargs={"axis": axis})
    shift = data.draw(st.integers(-5, 5))
    if axis is None and data.draw(st.booleans()):
        check_rule(np.roll, x, shift)
    else:
        axes = tuple(range(len(shape)))[: data.draw(st.integers(1, len(shape)))]
        check_rule(np.roll, x, tuple(shift + k for k in range(len(axes))), axes)


@SETTINGS
@given(shapes, st.data(), seeds, dtypes)
def test_pad_random(shape: Any, data: Any, seed: int, dtype: Any) -> None:
    x = rand(seed, shape, dtype)
    widths = data.draw(
        st.one_of(
            st.integers(0, 3),
            st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)),
                     min_size=len(shape), max_size=len(shape)).map(tuple),
        )
    )  # fmt: skip
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap"]))
    if mode == "constant":
        check_rule(np.pad, x, widths, kwargs={"constant_values": 0.5})
    else:
        check_rule(np.pad, x, widths, mode)


@pytest.mark.parametrize(
    ("mode", "options"),
    [("linear_ramp", {}), ("mean", {}), ("reflect", {"reflect_type": "odd"}), ("empty", {})],
)
def test_pad_unsupported_modes_raise(mode: str, options: dict[str, Any]) -> None:
    with pytest.raises(NotImplementedError, match="Supported modes"):
        rulekit.rrule(
            zero_codual(np.pad), zero_codual(np.ones(3)), CoDual(1), CoDual(mode), **options
        )


# -- through the engine -----------------------------------------------------------------------

W = rand(9, (6, 3))


def split_concat(x: Any) -> Any:
    a, b = np.split(x, [1])
    b *= 2.0  # written through a piece: x changes too
    c = np.concatenate([b, np.sin(a), x[:1]], axis=0)
    return np.einsum("ij,ij->", c * c, W[: c.shape[0]])


def stacks(x: Any) -> Any:
    s = np.stack([x[0, 0], x[1, 1] * x[2, 2], x[3, 0]])  # traced scalars
    h = np.hstack([x[0], s, 1.0])
    v = np.vstack([x, x[0] * x[1]])
    return np.sum(h * np.arange(7.0)) + np.einsum("ij,ij->", v, W[:5])


def replicate(x: Any) -> Any:
    t = np.tile(x[:2], (2, 2))
    r = np.repeat(x, [1, 0, 2], axis=1)
    p = np.pad(x, ((1, 0), (2, 1)), mode="symmetric")
    q = np.pad(x, 1)
    return np.sum(t * t) + np.sum(np.roll(r, 2, axis=0) * r[::-1]) + np.sum(p**3) + np.sum(q)


@pytest.mark.parametrize("f", [split_concat, stacks, replicate])
def test_engine_gradients(f: Any) -> None:
    check_grads(f, rand(3, (4, 3)))
