"""Tests for rules.numpy.covariance: np.cov and np.corrcoef.

Gradients against finite differences for rowvar, bias, ddof, y=, weights
(constant and traced aweights), complex and float32 inputs, a single variable,
every layout and later calls; corrcoef's clip at ±1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.covariance  # (registers np.cov, np.corrcoef)
import rules.numpy.matmul  # (registers np.dot: the covariance formula)
import rules.numpy.selecting  # noqa: F401  (registers np.diag: corrcoef's formula)

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)


def _w(seed: int, shape: tuple[int, ...]) -> Any:
    return rand(seed, shape)


@SETTINGS
@given(st.integers(1, 4), st.integers(2, 6), st.integers(0, 99), st.data())
def test_cov_random(nv: int, nobs: int, seed: int, data: Any) -> None:
    m = rand(seed, (nv, nobs))
    rowvar = data.draw(st.booleans())
    bias = data.draw(st.booleans())
    ddof = data.draw(st.sampled_from([None, 0, 1]))
    m = m if rowvar else m.T.copy()
    w = _w(seed + 1, np.shape(np.cov(m, rowvar=rowvar)))
    check_grads(lambda m: np.sum(np.cov(m, rowvar=rowvar, bias=bias, ddof=ddof) * w), m)
    if nv > 1:
        wc = _w(seed + 2, (nv, nv))
        check_grads(lambda m: np.sum(np.corrcoef(m, rowvar=rowvar) * wc), m)


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_layouts_y_weights_and_warm(layout: str) -> None:
    m, y = rand(1, (3, 6)), rand(2, (6,))
    w = _w(3, (4, 4))
    check_grads(lambda m, y: np.sum(np.cov(m, y) * w), m, y, layouts=(layout,), calls=3)
    check_grads(lambda m, y: np.sum(np.corrcoef(m, y) * w), m, y, layouts=(layout,), calls=2)
    f, a = np.array([1, 2, 1, 3, 1, 2]), np.abs(rand(4, (6,))) + 0.5
    check_grads(lambda m: np.sum(np.cov(m, fweights=f, aweights=a) * w[:3, :3]), m)
    check_grads(lambda m, a: np.sum(np.cov(m, ddof=1, aweights=a) * w[:3, :3]), m, a)


def test_dtypes_and_a_single_variable() -> None:
    check_grads(lambda m: np.sum(np.cov(m) ** 2), rand(5, (2, 5), np.float32))
    z = rand(6, (2, 5), np.complex128)
    check_grads(lambda z: np.abs(np.sum(np.cov(z) * np.array([[1, 2j], [3, 4]]))) ** 2, z)
    check_grads(lambda z: np.abs(np.corrcoef(z)[0, 1]) ** 2, z)
    check_grads(lambda v: np.cov(v) ** 2, rand(7, (6,)))  # a 0-d result


def test_corrcoef_diagonal_has_no_cotangent() -> None:
    m = rand(8, (3, 5))
    g = rulekit.grad(lambda m: np.trace(np.corrcoef(m)))(m)
    np.testing.assert_allclose(g, 0.0, atol=1e-12)  # diag R = 1 identically
