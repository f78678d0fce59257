"""Tests for rules.numpy.numeric: diff, gradient, cross, nan_to_num.

Hypothesis draws shapes, axes, orders, spacings and prepend/append values and runs
each rule through `testutils.check_rule`; hand-written tests cover the errors
(traced coordinate arrays), non-finite values with infinite imaginary parts and
2-vectors of `cross` (deprecated by numpy); engine tests differentiate user code,
including `nan_to_num(copy=False)` in place.
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
import rules.numpy.numeric
import rules.numpy.reductions.sums  # np.sum
import rules.numpy.ufuncs.binary  # np.multiply and friends
import rules.numpy.ufuncs.unary  # noqa: F401  (registers np.sin, np.where, np.real)
from rulekit import CoDual, NoRData, zero_codual
from testutils import check_rule

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
dtypes = st.sampled_from([np.float64, np.float32, np.complex128])
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


# -- property tests -----------------------------------------------------------------------------


@SETTINGS
@given(shapes, st.data(), seeds, dtypes)
def test_diff_random(shape: Any, data: Any, seed: int, dtype: Any) -> None:
    x = rand(seed, shape, dtype)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    kwargs: dict[str, Any] = {}
    for k, name in enumerate(("prepend", "append")):
        kind = data.draw(st.sampled_from(["none", "scalar", "array"]))
        if kind == "scalar":
            kwargs[name] = np.float64(0.5 + k)
        elif kind == "array":
            s = list(shape)
            s[axis] = data.draw(st.integers(1, 2))
            kwargs[name] = rand(seed + 1 + k, tuple(s), data.draw(dtypes))
    length = shape[axis] + sum(1 if np.ndim(v) == 0 else v.shape[axis] for v in kwargs.values())
    n = data.draw(st.integers(0, length))
    if data.draw(st.booleans()) and "prepend" in kwargs and "append" in kwargs:
        check_rule(np.diff, x, n, axis, kwargs["prepend"], kwargs["append"])  # positional
    else:
        check_rule(np.diff, x, n, axis, kwargs=kwargs)


@SETTINGS
@given(shapes, st.data(), seeds, dtypes)
def test_gradient_random(shape: Any, data: Any, seed: int, dtype: Any) -> None:
    edge = data.draw(st.sampled_from([1, 2]))
    shape = tuple(max(n, edge + 1) for n in shape)
    x = rand(seed, shape, dtype)
    nd = len(shape)
    axis = data.draw(
        st.one_of(
            st.none(),
            st.integers(-nd, nd - 1),
            st.permutations(range(nd)).map(lambda p: tuple(p[: max(1, len(p) - 1)])),
        )
    )
    axes = list(range(nd)) if axis is None else list(np.atleast_1d(axis))
    mode = data.draw(st.sampled_from(["none", "one", "each"]))
    if mode == "none":
        spacing: list[Any] = []
    elif mode == "one":
        spacing = [np.float64(data.draw(st.sampled_from([0.5, 2.0])))]
    else:
        spacing = [
            data.draw(st.sampled_from([np.float64(1.5), "coords"])) for _ in axes
        ]  # fmt: skip
        rng = np.random.default_rng(seed)
        spacing = [
            np.cumsum(rng.integers(1, 4, size=shape[a])) if h == "coords" else h
            for h, a in zip(spacing, axes, strict=True)
        ]
    check_rule(np.gradient, x, *spacing, kwargs={"axis": axis, "edge_order": edge})


TWO_VECTORS = "ignore:Arrays of 2-dimensional vectors are deprecated:DeprecationWarning"


@pytest.mark.filterwarnings(TWO_VECTORS)  # numpy deprecates 2-vectors; still supported
@SETTINGS
@given(st.data(), seeds)
def test_cross_random(data: Any, seed: int) -> None:
    lead_a = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    lead_b = lead_a[data.draw(st.integers(0, len(lead_a))) :]
    da, db = data.draw(st.sampled_from([(3, 3), (3, 2), (2, 3)]))
    a = rand(seed, (*lead_a, da), data.draw(dtypes))
    b = rand(seed + 1, (*lead_b, db), data.draw(dtypes))
    axa = data.draw(st.integers(0, a.ndim - 1))
    axb = data.draw(st.integers(0, b.ndim - 1))
    a, b = np.moveaxis(a, -1, axa), np.moveaxis(b, -1, axb)
    nc = max(len(lead_a), len(lead_b)) + 1
    axc = data.draw(st.integers(-nc, nc - 1))
    check_rule(np.cross, a, b, kwargs={"axisa": axa, "axisb": axb, "axisc": axc})


@SETTINGS
@given(shapes, st.data(), seeds, st.sampled_from([np.float64, np.float32]))
def test_nan_to_num_random(shape: Any, data: Any, seed: int, dtype: Any) -> None:
    x = rand(seed, shape, dtype)
    specials = data.draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf]), max_size=x.size))
    x.reshape(-1)[: len(specials)] = specials
    fills = data.draw(st.sampled_from([{}, {"nan": 1.5, "posinf": 9.0}, {"neginf": -4.0}]))
    check_rule(np.nan_to_num, x, kwargs=fills)
    check_rule(np.nan_to_num, x, False, np.float64(0.25), np.float64(3.0), np.float64(-3.0))


# -- by hand ------------------------------------------------------------------------------------


def test_nan_to_num_scalars() -> None:
    for v in (np.float64(2.5), np.float64(np.nan), 1.5, np.float32(-np.inf)):
        check_rule(np.nan_to_num, v)
    check_rule(np.nan_to_num, np.float64(np.inf), True, 0.0, np.float64(4.0))
    # a 0-d array with copy=False: overwritten in place, and a (new) scalar returned
    check_rule(np.nan_to_num, np.array(np.nan), False, np.float64(1.5))
    check_rule(np.nan_to_num, np.array(2.0), False)


def test_nan_to_num_complex_with_infinite_parts() -> None:
    """(The kit's perturbation of complex inf parts would warn: checked by hand.)"""
    z = np.array([1 + 2j, complex(np.inf, 1.0), complex(2.0, -np.inf), complex(np.nan, np.nan)])
    cz, cn = zero_codual(z.copy()), zero_codual(np.float64(0.0))
    y, pb = rulekit.rrule(
        zero_codual(np.nan_to_num), cz, CoDual(True), cn, zero_codual(np.float64(5.0))
    )
    np.testing.assert_array_equal(y.x, np.nan_to_num(z, posinf=5.0))
    y.dx[...] = [1 + 1j, 2 + 2j, 3 + 3j, 4 + 4j]
    _, _, _, dnan, dposinf = pb(NoRData())
    np.testing.assert_array_equal(cz.dx, [1 + 1j, 2j, 3, 0])
    assert dnan == 8.0 and dposinf == 2.0 and type(dnan) is np.float64


def test_nan_to_num_in_place_restores_and_masks() -> None:
    x = np.array([1.0, np.nan, np.inf, 2.0])
    cx = zero_codual(x)
    y, pb = rulekit.rrule(zero_codual(np.nan_to_num), cx, CoDual(False))
    assert y.x is x and y.dx is cx.dx and np.isfinite(x).all()
    cx.dx[...] = 1.0
    pb(NoRData())
    np.testing.assert_array_equal(cx.dx, [1.0, 0.0, 0.0, 1.0])
    assert np.isnan(x[1]) and x[2] == np.inf


def test_gradient_traced_coordinates_raise() -> None:
    with pytest.raises(NotImplementedError, match="coordinate array"):
        rulekit.rrule(zero_codual(np.gradient), zero_codual(rand(0, (4,))),
                      zero_codual(np.array([0.0, 1.0, 3.0, 4.0])))  # fmt: skip


@pytest.mark.filterwarnings(TWO_VECTORS)
def test_cross_of_two_vectors() -> None:
    a, b = rand(0, (3, 2)), rand(1, (3, 2), np.complex128)
    check_rule(np.cross, a, b)
    check_rule(np.cross, a[0], b[0].real)  # a 0-d result


# -- through the engine -------------------------------------------------------------------------

W = rand(9, (60,))


def _loss(y: Any) -> Any:
    y = np.ravel(y)
    return np.sum(np.real(y) * W[: y.size]) + np.sum(np.imag(y) * W[1 : y.size + 1])


def differences(x: Any) -> Any:
    a = np.diff(x, 2, 0)
    b = np.diff(x, prepend=x[:, :1] * 2.0)  # a traced keyword array
    c = np.diff(x, 1, 0, x[0, 0], x[1:2] ** 2)  # a traced scalar, positionally
    return _loss(a) + _loss(b**2) + _loss(c)


def gradients(x: Any) -> Any:
    gx, gy = np.gradient(x)
    g2 = np.gradient(x, 0.5, [0, 1, 3, 4], edge_order=2)
    h = np.gradient(x[0], x[1, 1] + 2.0)  # a traced scalar spacing
    return _loss(gx) + _loss(gy**2) + _loss(g2[1]) + _loss(h)


def crosses(x: Any) -> Any:
    return _loss(np.cross(x[:, :3], x[:, 1:])) + _loss(np.cross(x[:3], x[1:] * 2.0, axis=0))


def non_finite(x: Any) -> Any:
    y = np.where(x > 0.5, np.inf, x)
    z = np.where(x < -0.5, np.nan, x * 3.0)
    np.nan_to_num(z, copy=False)  # in place, then used
    return _loss(np.nan_to_num(y, posinf=7.0)) + _loss(z * z)


@pytest.mark.parametrize("f", [differences, gradients, crosses, non_finite])
def test_engine_gradients(f: Any) -> None:
    check_grads(f, rand(3, (4, 4)))
