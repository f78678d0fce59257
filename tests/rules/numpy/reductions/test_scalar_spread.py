"""Reductions of a scalar (issue 14): np.var/np.std of a traced or constant Python or numpy
float (the constant 0: x̄ = 0), and np.sum/np.mean/np.max of a complex scalar (the
identity), against finite differences."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads

import rulekit
import rules  # noqa: F401  (registers every bundled rule)


@pytest.mark.parametrize("fn", [np.var, np.std])
def test_spread_of_a_traced_scalar_is_constant(fn: Any) -> None:
    x = np.array([0.5, -1.5, 2.0])
    check_grads(lambda x: fn(np.sum(x * x)) + np.sum(x), x)  # d/dx: 1, not 1 + 2x·(…)
    g = rulekit.grad(lambda x: fn(np.sum(x * x)) + np.sum(x))(x)
    np.testing.assert_array_equal(g, np.ones(3))


@pytest.mark.parametrize("c", [1.5, np.float64(1.5), np.float32(1.5), 1.5 + 2.0j])
@pytest.mark.parametrize("fn", [np.var, np.std, np.mean, np.sum])
def test_reductions_of_a_constant_scalar_inside_a_trace(fn: Any, c: Any) -> None:
    check_grads(lambda x: np.sum(x * np.real(fn(c))), np.array([0.5, -1.5]))


def test_var_of_a_traced_python_float_argument() -> None:
    assert (
        rulekit.grad(lambda s: np.var(s) + np.sum(np.std(s, keepdims=True)) + 2.0 * s)(1.5) == 2.0
    )


@pytest.mark.parametrize("fn", [np.sum, np.mean, np.prod, np.max, np.min])
def test_reducing_a_traced_complex_scalar_is_the_identity(fn: Any) -> None:
    z = np.array([0.5 + 1.0j, -1.5 + 0.25j])
    check_grads(lambda z: np.abs(fn(np.sum(z * z))) ** 2, z)
