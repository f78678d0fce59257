"""Tests for rules.numpy.polynomial: np.polyval, np.vander, np.polyfit.

Gradients against finite differences w.r.t. coefficients and points (arrays,
scalars, lists of traced numbers), float32/complex, every layout and later calls;
vander at x = 0; polyfit in y and x, with weights, several columns, cov=, full=,
and its refusal of a rank-deficient fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.linalg  # (registers np.linalg.lstsq, inv: polyfit's formula)
import rules.numpy.polynomial  # noqa: F401  (registers np.polyval, np.vander, np.polyfit)

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)


@SETTINGS
@given(st.integers(1, 5), st.integers(0, 99), st.sampled_from([np.float64, np.complex128]))
def test_polyval_random(n: int, seed: int, dtype: Any) -> None:
    p, x = rand(seed, (n,), dtype), rand(seed + 1, (3, 2))
    check_grads(lambda p, x: np.sum(np.abs(np.polyval(p, x)) ** 2), p, x)


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_polyval_layouts_scalars_lists_and_warm(layout: str) -> None:
    p, x = rand(1, (4,)), rand(2, (5,))
    check_grads(lambda p, x: np.sum(np.polyval(p, x) ** 2), p, x, layouts=(layout,), calls=3)
    check_grads(lambda p: np.polyval(p, 0.7) ** 2, p)
    check_grads(lambda x: np.polyval([1.0, -2.0, 0.5], x) ** 2, 0.3)
    check_grads(lambda x: np.sum(np.polyval(p.astype(np.float32), x)), x.astype(np.float32))

    def listed(a: Any) -> Any:  # a list of traced numbers as the coefficients
        return np.sum(np.polyval([np.sum(a), np.sum(a * a), 1.0], 2 * a))

    check_grads(listed, rand(3, (2,)))


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_vander(layout: str) -> None:
    x = rand(4, (5,))
    x[2] = 0.0
    w = rand(5, (5, 4))
    check_grads(lambda x: np.sum(np.vander(x, 4) * w), x, layouts=(layout,), calls=2)
    check_grads(lambda x: np.sum(np.vander(x, increasing=True) ** 2), x)
    check_grads(lambda x: np.sum(np.abs(np.vander(x, 3)) ** 2), rand(6, (3,), np.complex128))
    check_grads(lambda x: np.sum(np.vander(x, 3) ** 2), rand(7, (3,), np.float32))
    g = rulekit.grad(lambda x: np.sum(np.vander(x, 3)))(np.zeros(2))  # d(x² + x + 1) at 0
    np.testing.assert_array_equal(g, [1.0, 1.0])


def _points(seed: int, n: int = 8) -> np.ndarray:
    return np.linspace(-1.0, 1.5, n) + 0.05 * rand(seed, (n,))


@SETTINGS
@given(st.integers(0, 3), st.integers(0, 99), st.booleans())
def test_polyfit_random(deg: int, seed: int, weighted: bool) -> None:
    x, y = _points(seed), rand(seed + 1, (8,))
    w = np.abs(rand(seed + 2, (8,))) + 0.5 if weighted else None
    check_grads(lambda x, y: np.sum(np.polyfit(x, y, deg, w=w) ** 2), x, y)


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_polyfit_layouts_columns_cov_full(layout: str) -> None:
    x, y = _points(1), rand(2, (8, 2))
    check_grads(lambda x, y: np.sum(np.polyfit(x, y, 2) ** 2), x, y, layouts=(layout,), calls=2)
    check_grads(lambda y: np.sum(np.polyfit(x, y, 2, cov=True)[1]), y[:, 0])
    check_grads(lambda y: np.sum(np.polyfit(x, y, 2, cov="unscaled")[1] ** 2) + 0 * y[0], y[:, 1])
    check_grads(lambda y: np.polyfit(x, y, 1, full=True)[1][0], y[:, 0])  # the residual
    check_grads(lambda x: np.sum(np.polyfit(x, y[:, 0], 2) ** 2), x.astype(np.float32))


def test_polyfit_rank_deficient_is_refused() -> None:
    x = np.array([1.0, 1.0, 1.0, 2.0])  # two distinct points: degree 2 is rank deficient
    with pytest.warns(np.exceptions.RankWarning), pytest.raises(np.linalg.LinAlgError):
        rulekit.grad(lambda y: np.sum(np.polyfit(x, y, 2)))(rand(3, (4,)))
