"""Forward rules and differentiable pullbacks of np.diagonal, np.diag and np.trace
(rules/numpy/selecting.py: the diagonal's adjoint built functionally, trace's own pullback).

Every offset sign, axes given in either order, C/F/strided/negative-stride layouts,
float64/float32/complex128, empty diagonals: tangents against central differences,
pullbacks against the forward and reverse rules, the rules run on traced values, and the
Hessian of a function through them in the three modes against differences of gradients.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from forward_rules import MODES, check_forward, check_pullback, check_twice, fd_hessian

import rulekit
import rules  # noqa: F401  (registers the rules)
from testutils._layouts import relayout

LAYOUTS = ("C", "F", "negative", "strided")

#: (id, fn, input shape, keywords)
CASES: list[tuple[str, Any, tuple[int, ...], dict[str, Any]]] = [
    ("diagonal", np.diagonal, (3, 4), {}),
    ("diagonal-offset", np.diagonal, (3, 4), {"offset": 2}),
    ("diagonal-negative-offset", np.diagonal, (4, 3), {"offset": -1}),
    ("diagonal-axes-swapped", np.diagonal, (2, 3, 4), {"offset": 1, "axis1": 2, "axis2": 0}),
    ("diagonal-empty", np.diagonal, (3, 4), {"offset": 5}),
    ("diag-of-matrix", np.diag, (3, 3), {"k": -1}),
    ("diag-of-vector", np.diag, (3,), {"k": 1}),
    ("trace", np.trace, (3, 3), {}),
    ("trace-offset", np.trace, (3, 4), {"offset": 1}),
    ("trace-axes", np.trace, (2, 3, 4), {"offset": -1, "axis1": 2, "axis2": 1}),
]
IDS = [c[0] for c in CASES]


def _x(shape: tuple[int, ...], dtype: Any, layout: str, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.normal(size=shape)
    return relayout(x.astype(dtype), layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_and_pullback(case: Any, dtype: Any, layout: str) -> None:
    _, fn, shape, kw = case
    x = _x(shape, dtype, layout)
    dot = _x(shape, dtype, "C", seed=1)
    single = dtype == np.float32
    check_forward(fn, [x], [dot], kw, rtol=1e-3 if single else 1e-6, atol=1e-3 if single else 1e-8)
    y = fn(x, **kw)
    yb = _x(np.shape(y), np.result_type(y), "C", seed=2)
    check_pullback(fn, [x], [dot], yb, kw, rtol=1e-4 if single else 1e-8)
    if dtype == np.float64:
        check_twice(fn, [x], 0, yb, kw)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_hessian(case: Any, mode: str) -> None:
    """Σ w·f(x @ x-like products)³ in a (negative-stride) x: second derivatives through the
    rules' own derivatives, on a first and a second call."""
    _, fn, shape, kw = case
    x = _x(shape, np.float64, "negative", seed=3)
    w = _x(np.shape(fn(x, **kw)), np.float64, "C", seed=4)

    def f(a: Any) -> Any:
        return np.sum(w * fn(np.sin(a) * a, **kw) ** 3)

    ref = fd_hessian(f, x)
    hess = rulekit.hessian(f, mode=mode)
    for _ in range(3):  # (later calls of one object)
        np.testing.assert_allclose(hess(x), ref, rtol=1e-6, atol=1e-6 * (1 + np.max(np.abs(ref))))
