"""Tests for rules.numpy.interpolation: np.interp and np.trapezoid.

The engine's gradients w.r.t. x, xp, fp (and left/right) against finite
differences, hypothesis-drawn, in every layout and on later calls; the
conventions at the knots (the segment to the right: one-sided differences) and
outside the range (numpy's clamping: no x-gradient), complex fp; trapezoid in y,
x and dx.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.interpolation  # noqa: F401  (registers np.interp, np.trapezoid)

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
XP = np.array([-1.0, -0.25, 0.4, 1.1, 2.0])


def _x_off_knots(seed: int, n: int) -> np.ndarray:
    x = np.random.default_rng(seed).uniform(-1.6, 2.6, n)
    for k in XP:  # keep finite differences away from the kinks
        x[np.abs(x - k) < 1e-3] += 0.01
    return x


@SETTINGS
@given(st.integers(0, 999), st.integers(1, 8), st.sampled_from([np.float64, np.complex128]))
def test_interp_random(seed: int, n: int, dtype: Any) -> None:
    x, fp = _x_off_knots(seed, n), rand(seed, (5,), dtype)
    w = rand(seed + 1, (n,))

    def loss(x: Any, xp: Any, fp: Any) -> Any:
        y = np.interp(x, xp, fp)
        return np.sum(np.real(y) * w) + np.sum(np.imag(y) * w[::-1])

    check_grads(loss, x, XP.copy(), fp)


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_interp_layouts_warm_left_right(layout: str) -> None:
    x, fp = _x_off_knots(1, 9), rand(2, (5,))

    def loss(x: Any, fp: Any, left: Any, right: Any) -> Any:
        return np.sum(np.sin(np.interp(x, XP, fp, left, right)))

    check_grads(loss, x, fp, -3.0, 4.0, layouts=(layout,), calls=3)
    check_grads(lambda x: np.sum(np.interp(x, XP, fp, right=2.0) ** 2), x.reshape(3, 3))
    check_grads(lambda x: np.interp(x, XP, fp) ** 2, 0.3)  # a scalar x
    check_grads(lambda x: np.sum(np.interp(x, XP, fp) ** 2), x.astype(np.float32))


def test_interp_at_the_knots_uses_the_segment_to_the_right() -> None:
    fp = np.array([0.0, 3.0, -1.0, 2.0, 2.5])
    slopes = np.diff(fp) / np.diff(XP)
    g = rulekit.grad(lambda x: np.sum(np.interp(x, XP, fp)))(XP.copy())
    np.testing.assert_allclose(g, [*slopes, 0.0])  # at xp[-1]: the clamped constant
    gf = rulekit.grad(lambda fp: np.sum(np.interp(XP, XP, fp)))(fp)
    np.testing.assert_allclose(gf, np.ones(5))  # y = fp[j] at each knot
    # the right derivative: a one-sided difference from the right
    h = 1e-7
    right = (np.interp(XP[1:4] + h, XP, fp) - np.interp(XP[1:4], XP, fp)) / h
    np.testing.assert_allclose(g[1:4], right, rtol=1e-6)


def test_interp_outside_the_range_is_clamped() -> None:
    fp = rand(3, (5,))
    x = np.array([-5.0, -1.01, 2.01, 7.0])
    gx, gxp, gfp = rulekit.grad(lambda x, xp, fp: np.sum(np.interp(x, xp, fp)), argnums=(0, 1, 2))(
        x, XP.copy(), fp
    )
    np.testing.assert_array_equal(gx, 0.0)
    np.testing.assert_array_equal(gxp, 0.0)
    np.testing.assert_array_equal(gfp, [2, 0, 0, 0, 2])
    # (numpy dispatches np.interp on x, xp and fp only: a traced `left` needs one of them traced)
    gx, gl = rulekit.grad(lambda x, left: np.sum(np.interp(x, XP, fp, left, 9.0)), (0, 1))(x, 1.5)
    assert gl == 2.0


def test_interp_period_is_refused() -> None:
    with pytest.raises(NotImplementedError, match="period"):
        rulekit.grad(lambda x: np.sum(np.interp(x, XP, XP, period=3.0)))(np.ones(2))


@SETTINGS
@given(st.integers(0, 999), st.sampled_from(["none", "1d", "nd", "dx"]), st.integers(0, 1))
def test_trapezoid_random(seed: int, kind: str, axis: int) -> None:
    y = rand(seed, (3, 4))
    n = y.shape[axis]
    if kind == "none":
        check_grads(lambda y: np.sum(np.trapezoid(y, axis=axis)), y)
    elif kind == "1d":
        x = np.cumsum(np.abs(rand(seed + 1, (n,))))
        check_grads(lambda y, x: np.sum(np.trapezoid(y, x, axis=axis) ** 2), y, x)
    elif kind == "nd":
        x = np.cumsum(np.abs(rand(seed + 2, (3, 4))), axis=axis)
        check_grads(lambda y, x: np.sum(np.trapezoid(y, x=x, axis=axis) ** 2), y, x)
    else:
        check_grads(lambda y, dx: np.sum(np.trapezoid(y, None, dx, axis) ** 2), y, 0.3)


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_trapezoid_layouts_dtypes_and_warm(layout: str) -> None:
    y, x = rand(4, (4, 5)), np.cumsum(np.abs(rand(5, (5,))))
    check_grads(lambda y, x: np.sum(np.trapezoid(y, x) ** 2), y, x, layouts=(layout,), calls=2)
    check_grads(lambda y: np.trapezoid(y), rand(6, (6,), np.float32))  # a scalar result
    check_grads(lambda y: np.abs(np.trapezoid(y)) ** 2, rand(7, (5,), np.complex128))
