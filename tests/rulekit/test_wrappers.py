"""TracingError names the registered wrapper of third-party code that converted a traced value."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.special

import rulekit
import rules


def test_scipy_python_function_points_to_its_bundled_wrapper() -> None:
    assert rules.special.logsumexp is not scipy.special.logsumexp
    with pytest.raises(rulekit.TracingError, match=r"call rules\.special\.logsumexp\(\.\.\.\)"):
        rulekit.grad(lambda x: scipy.special.logsumexp(x))(np.ones(3))
    with pytest.raises(rulekit.TracingError, match=r"rules\.lapack\.solve_triangular"):
        rulekit.grad(lambda a: np.sum(scipy.linalg.solve_triangular(a, np.ones(2))))(np.eye(2))


def test_no_hint_for_code_without_a_wrapper() -> None:
    def opaque(x: np.ndarray) -> np.ndarray:
        return np.asarray(x) * 2

    with pytest.raises(rulekit.TracingError) as info:
        rulekit.grad(lambda x: np.sum(opaque(x)))(np.ones(3))
    assert "Fix: call rules." not in str(info.value)
