"""Tests for rules.numpy.convolution: np.convolve and np.correlate.

Gradients w.r.t. both operands against finite differences for every mode and
every pair of lengths (numpy swaps the operands when the second is longer, and
`same` is offset differently for correlate), real, float32 and complex operands
(numpy's conj of v in correlate), every layout and later calls.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rules.numpy.convolution  # noqa: F401  (registers np.convolve, np.correlate)

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


def _loss(fn: Any, mode: str, seed: int) -> Any:
    w: list[Any] = []

    def loss(a: Any, v: Any) -> Any:
        y = fn(a, v, mode)
        if not w:
            w.append(rand(seed, np.shape(y), np.complex128))
        return np.sum(np.real(y * w[0]))

    return loss


@SETTINGS
@given(
    st.sampled_from([np.convolve, np.correlate]),
    st.sampled_from(["full", "same", "valid"]),
    st.integers(1, 6),
    st.integers(1, 6),
    st.sampled_from(
        [
            (np.float64, np.float64),
            (np.complex128, np.float64),
            (np.float64, np.complex128),
            (np.complex128, np.complex128),
        ]
    ),
    st.integers(0, 99),
)
def test_every_mode_and_length(fn: Any, mode: str, n: int, m: int, dt: Any, seed: int) -> None:
    check_grads(_loss(fn, mode, seed), rand(seed, (n,), dt[0]), rand(seed + 1, (m,), dt[1]))


@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_layouts_and_warm(fn: Any, layout: str) -> None:
    check_grads(_loss(fn, "same", 3), rand(1, (7,)), rand(2, (3,)), layouts=(layout,), calls=3)


def test_float32_and_constant_operands() -> None:
    a, v = rand(4, (6,), np.float32), rand(5, (4,), np.float32)
    check_grads(lambda a, v: np.sum(np.convolve(a, v) ** 2), a, v)
    check_grads(lambda a: np.sum(np.correlate(a, [1.0, -2.0, 0.5], "full") ** 2), rand(6, (5,)))
    check_grads(lambda v: np.sum(np.convolve([0.5, 2.0], v, mode="valid") ** 2), rand(7, (4,)))
