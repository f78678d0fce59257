"""Tests for rules.scipy.signal (scipy.signal.convolve): check_rule over dimensions, sizes
(in2 larger or smaller, odd and even), modes, methods, dtypes and complex inputs; the engine against
finite differences."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.signal
from fdcheck import check_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions  # noqa: F401  (registers np.einsum: engine test)
from rules.scipy import signal as S
from testutils import check_rule

FAST = settings(max_examples=25, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
modes = st.sampled_from(["full", "same", "valid"])
methods = st.sampled_from(["auto", "direct", "fft"])
kinds = st.sampled_from(["f64", "f32", "c128", "mixed", "int"])


def make(rng: np.random.Generator, shape: tuple[int, ...], kind: str, first: bool) -> Any:
    x = rng.normal(size=shape)
    if kind == "f32":
        return x.astype(np.float32)
    if kind == "c128" or (kind == "mixed" and first):
        return x + 1j * rng.normal(size=shape)
    if kind == "int" and not first:  # an integer operand: a constant
        return rng.integers(-3, 4, size=shape)
    return x


@st.composite
def shape_pairs(draw: Any, mode: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ndim = draw(st.integers(1, 3))
    s1 = tuple(draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    s2 = tuple(draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    if mode == "valid":  # one input must be at least as large as the other along every axis
        big, small = tuple(map(max, s1, s2)), tuple(map(min, s1, s2))
        s1, s2 = (big, small) if draw(st.booleans()) else (small, big)
    return s1, s2


@FAST
@given(st.data(), modes, methods, kinds, seeds)
def test_convolve(data: Any, mode: str, method: str, kind: str, seed: int) -> None:
    s1, s2 = data.draw(shape_pairs(mode))
    rng = np.random.default_rng(seed)
    a, b = make(rng, s1, kind, True), make(rng, s2, kind, False)
    check_rule(S.convolve, a, b, mode, method)


def test_convolve_keywords_and_scalars() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 7)), rng.normal(size=(3, 4))
    check_rule(S.convolve, a, b, kwargs={"mode": "same"})  # in2 taller than in1 on axis 0
    check_rule(S.convolve, b, a[:, :3], kwargs={"mode": "same", "method": "fft"})
    check_rule(S.convolve, np.array(2.0), np.array(3.0))  # 0-d: scipy returns a numpy scalar
    check_rule(S.convolve, np.array(2.0 + 1j), np.array(3.0), "valid")


def test_convolve_same_even_kernel_offset() -> None:
    """'same' with an even kernel: scipy's window starts at (N2 − 1)//2 of the full result."""
    x, k = np.arange(1.0, 6.0), np.array([1.0, 10.0])
    _, (gx, gk, _) = rulekit.value_and_pullback(S.convolve, np.eye(5)[0], x, k, "same")
    # y[0] = x[0]·k[0] (window offset 0): ∂y[0]/∂x = k[0]·e₀, ∂y[0]/∂k = x[0]·e₀
    assert np.array_equal(gx, [1.0, 0, 0, 0, 0]) and np.array_equal(gk, [1.0, 0.0])


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_engine(mode: str) -> None:
    rng = np.random.default_rng(2)
    img, ker, w = rng.normal(size=(5, 6)), rng.normal(size=(3, 2)), rng.normal(size=3)

    def loss(img: Any, ker: Any, w: Any) -> Any:
        y = S.convolve(np.tanh(img), ker * w[0], mode=mode)
        z = S.convolve(y, w[None, :], mode="same")  # a second layer, 2-D with a row kernel
        return np.sum(z**2)

    check_grads(loss, img, ker, w)


def test_plain_call_is_scipy() -> None:
    a, b = np.arange(4.0), np.array([1.0, -1.0])
    assert np.array_equal(S.convolve(a, b), scipy.signal.convolve(a, b))
