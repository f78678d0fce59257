"""Under the levels: functions that return a list (np.split and its family) and buffers made
by `np.zeros_like`-type functions that traced values are then written into.

A list output is a list of values of the level (forward mode: a list of tangents; the nested
reverse level: pieces without a cotangent get zeros, as in the reverse engine). A buffer
made from a value that an enclosing transformation traces is traced by it too, so that the
tangents written into it keep their own derivatives (reverse over forward, jacfwd of jacfwd).
Each is compared with differences of the reverse engine's gradient, on two calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from forward_rules import MODES, fd_hessian

import rulekit
import rules  # noqa: F401  (registers the rules)
from testutils._layouts import relayout

SPLITS: dict[str, Callable[[Any], Any]] = {
    "split": lambda x: np.sum(np.split(x, [1, 3])[2] ** 3) + np.sum(np.split(x, 2)[0] ** 2),
    "array_split": lambda x: np.sum(np.array_split(x * x, 3)[1] ** 3),
    "hsplit": lambda x: np.sum(np.hsplit(x, 2)[1] ** 3),
    "vsplit": lambda x: np.sum(np.vsplit(np.outer(x, x), 2)[0] ** 2),
}


def _buffer(like: Any) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        y = like(np.concatenate([x, x[:2]]))
        y[1:5] = x**2
        y[0] = y[0] + x[1] * 3  # (ones_like's 1 kept)
        return np.sum(np.sin(y) * y)

    return f


BUFFERS = {
    "zeros_like": _buffer(np.zeros_like),
    "ones_like": _buffer(np.ones_like),
    "empty_like": _buffer(lambda a: np.empty_like(a) * 0),
    "full_like": _buffer(lambda a: np.full_like(a, 0.5)),
}
CASES = {**SPLITS, **BUFFERS}


@pytest.mark.parametrize("layout", ["C", "negative", "strided"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES)
def test_hessian(case: str, mode: str, layout: str) -> None:
    f = CASES[case]
    x = relayout(np.array([0.3, -0.5, 1.2, 0.7]), layout)
    ref = fd_hessian(f, x)
    hess = rulekit.hessian(f, mode=mode)
    for _ in range(3):  # (later calls of one object)
        np.testing.assert_allclose(hess(x), ref, rtol=1e-6, atol=1e-6 * (1 + np.max(np.abs(ref))))


@pytest.mark.parametrize("case", BUFFERS)
def test_jacfwd_of_jacfwd_writes_into_a_buffer(case: str) -> None:
    f = CASES[case]
    x = np.array([0.3, -0.5, 1.2, 0.7])
    np.testing.assert_allclose(rulekit.jacfwd(rulekit.jacfwd(f))(x), fd_hessian(f, x),
                               rtol=1e-6, atol=1e-6)  # fmt: skip


def test_a_list_output_under_jvp_and_nested_vjp() -> None:
    """jvp of np.split gives a list of values and a list of tangents; a nested pullback with
    a cotangent for one piece only gives the others zeros."""
    x = np.array([0.3, -0.5, 1.2, 0.7])
    y, t = rulekit.jvp(lambda x: np.split(x * 2, 2), (x,), (np.ones(4),))
    assert type(y) is list and type(t) is list and len(t) == 2
    np.testing.assert_array_equal(np.concatenate(t), np.full(4, 2.0))

    def g(x: Any) -> Any:  # the gradient of piece 1's weighted sum, differentiated again
        return rulekit.grad(lambda z: np.sum(np.split(z**3, 2)[1] * np.arange(2.0)))(x)

    want = np.diag(np.concatenate([[0, 0], 6 * x[2:] * np.arange(2.0)]))
    np.testing.assert_allclose(rulekit.jacfwd(g)(x), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rulekit.jacrev(g)(x), want, rtol=1e-12, atol=1e-12)
