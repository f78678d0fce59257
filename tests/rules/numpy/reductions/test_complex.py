"""Reductions of complex arrays through the engine (issue 14): sum, mean, prod, max/min in
numpy's lexicographic order, var, std, cumsum, cumprod, against finite differences.

Gradients follow PyTorch's convention (∂L/∂Re + i ∂L/∂Im), which is what `check_grads`
computes for a complex argument.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads

import rulekit
import rules  # noqa: F401  (registers every bundled rule)


def _z(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.normal(size=shape) + 1j * rng.normal(size=shape)


def _sq(v: Any) -> Any:
    return np.abs(v) ** 2  # a real loss of a complex value


@pytest.mark.parametrize(
    "loss",
    [
        lambda z: np.sum(_sq(np.sum(z, axis=0))),
        lambda z: _sq(np.sum(z)),
        lambda z: np.sum(_sq(np.mean(z, axis=1, keepdims=True))),
        lambda z: _sq(np.prod(z)),
        lambda z: np.sum(_sq(np.prod(z, axis=0))),
        lambda z: np.sum(_sq(np.cumsum(z, axis=1))),
        lambda z: np.sum(_sq(np.cumprod(z, axis=0))),
        lambda z: np.var(z) + 2.0 * np.std(z),
        lambda z: np.sum(np.var(z, axis=0, ddof=1) * np.arange(1.0, 5.0)),
        lambda z: np.sum(np.std(z, axis=1)),
        lambda z: np.sum(np.real(np.max(z, axis=1) * np.min(z, axis=1))),
        lambda z: _sq(np.max(z)) + np.imag(np.min(z)),
        lambda z: np.sum(_sq(np.amax(z, axis=0))) + np.sum(np.imag(np.amin(z, axis=0))),
    ],
)
def test_complex_reductions_match_finite_differences(loss: Any, rng: np.random.Generator) -> None:
    check_grads(loss, _z(rng, 3, 4), layouts=EVERY_LAYOUT)


def test_var_of_complex_is_mean_squared_modulus_of_the_deviation(
    rng: np.random.Generator,
) -> None:
    z = _z(rng, 6)
    assert np.isrealobj(np.var(z))
    g = rulekit.grad(np.var)(z)
    np.testing.assert_allclose(g, 2 * (z - z.mean()) / z.size, rtol=1e-12)  # x̄ = 2(z − μ)/N


def test_complex_max_is_lexicographic_and_the_gradient_goes_to_the_selected_element() -> None:
    z = np.array([1.0 + 5.0j, 2.0 - 1.0j, 2.0 + 3.0j, 0.5 + 9.0j])  # real parts tie at 2
    assert np.max(z) == 2.0 + 3.0j and np.min(z) == 0.5 + 9.0j
    g = rulekit.grad(lambda z: _sq(np.max(z)))(z)
    # ∂|y|² = 2y at y's index (to rounding: np.abs's rule computes 2|y|·y/|y|)
    np.testing.assert_allclose(g, [0, 0, 2 * (2.0 + 3.0j), 0], rtol=1e-14, atol=0)
    g = rulekit.grad(lambda z: np.real(np.min(z)) + 3.0 * np.imag(np.min(z)))(z)
    np.testing.assert_array_equal(g, [0, 0, 0, 1.0 + 3.0j])


def test_complex_max_ties_split_equally_as_central_differences_do() -> None:
    z = np.array([1.0 + 1.0j, 2.0 + 2.0j, 2.0 + 2.0j, -3.0j])
    g = rulekit.grad(lambda z: np.real(np.max(z)) + np.imag(np.max(z)))(z)
    np.testing.assert_array_equal(g, [0, 0.5 + 0.5j, 0.5 + 0.5j, 0])
    check_grads(lambda z: np.real(np.max(z)) + np.imag(np.max(z)), z)


def test_nanmax_of_complex_skips_nan(rng: np.random.Generator) -> None:
    z = _z(rng, 5)
    z[1] = complex(np.nan, 0.0)
    g = rulekit.grad(lambda z: _sq(np.nanmax(z)))(z)
    k = np.argmax(np.where(np.isnan(z), -np.inf, z.real))
    want = np.zeros_like(z)
    want[k] = 2 * z[k]
    np.testing.assert_allclose(g, want, rtol=1e-14, atol=0)  # (2|y|·y/|y|: rounding)
