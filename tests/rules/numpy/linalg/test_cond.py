"""Tests for rules.numpy.linalg.cond: np.linalg.cond (every p), and matrix_rank on primals."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand

import rulekit
import rules.numpy.linalg  # (registers numpy.linalg's rules: svd, inv, norm, ... in cond's formula)
import rules.numpy.linalg.cond  # noqa: F401  (registers np.linalg.cond)


def _matrix(seed: int, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    return rand(seed, shape, dtype) + 2 * np.eye(shape[-2], shape[-1])


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, np.inf, -np.inf])
@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_cond(p: Any, layout: str) -> None:
    a = _matrix(1, (3, 3))
    check_grads(lambda a: np.linalg.cond(a, p), a, layouts=(layout,), calls=2)


def test_cond_stacks_rectangular_complex_float32() -> None:
    check_grads(lambda a: np.sum(np.linalg.cond(a)), _matrix(2, (2, 3, 3)))
    check_grads(lambda a: np.linalg.cond(a), _matrix(3, (4, 3)))
    # (np.real: numpy 2.2 returns the "fro" condition number of a complex matrix as complex)
    check_grads(lambda a: np.real(np.linalg.cond(a, "fro")), _matrix(4, (3, 3), np.complex128))
    check_grads(lambda a: np.linalg.cond(a), _matrix(5, (3, 3), np.float32))


def test_matrix_rank_runs_on_primals() -> None:
    a = _matrix(6, (3, 3))

    def f(a: Any) -> Any:
        r = np.linalg.matrix_rank(a)
        assert isinstance(r, (int, np.integer)) and r == 3
        return r * np.sum(a)

    np.testing.assert_array_equal(rulekit.grad(f)(a), np.full((3, 3), 3.0))
