"""NumPy functions called on traced scalars, whose rules take arrays (`_engine/_scalar_calls.py`).

A NumPy or Python float reaches `np.squeeze`, `np.cumsum`, `np.reshape(x, ())`, `.astype`
... as the result of a reduction or as the input itself. Each engine retries such a call
on the scalar as a 0-d array, and returns a scalar where numpy does. Checked against
central differences for every kind of scalar, in the reverse engine (two calls of one
object), under jvp and in the three Hessian modes, with the value and type numpy gives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules  # noqa: F401  (registers the rules)

MODES = ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward")


def _cube(y: Any) -> Any:
    """y·y·y: a float scalar's `y ** 3` in numpy is not np.power(y, 3), which the rules
    compute, to the last bit; products are."""
    return y * y * y


#: name → g(s), s a scalar: each applies a function with array rules to a scalar
CALLS: dict[str, Callable[[Any], Any]] = {
    "squeeze": lambda s: _cube(np.squeeze(s)),
    "reshape-0d": lambda s: _cube(np.reshape(s, ())),
    "reshape-2d": lambda s: np.sum(_cube(np.reshape(s, (1, 1)))),
    "cumsum": lambda s: np.sum(_cube(np.cumsum(s))),
    "norm": lambda s: _cube(np.linalg.norm(s)),
    "transpose": lambda s: _cube(np.transpose(s)),
    "ravel": lambda s: np.sum(_cube(np.ravel(s))),
    "expand_dims": lambda s: np.sum(_cube(np.expand_dims(s, 0))),
    "zeros_like": lambda s: np.sum(np.zeros_like(s) + _cube(s)),
    "astype": lambda s: _cube(s.astype(np.float64)),
    "after-a-reduction": lambda s: _cube(np.squeeze(np.sum(s * np.ones(3)))),
}
#: the kinds of scalar each call gets (a Python float has no .astype: numpy's own error)
KINDS: dict[str, Callable[[float], Any]] = {
    "python-float": float,
    "float64": np.float64,
    "float32": np.float32,
    "0-d": lambda v: np.array(v),
}


def _cases() -> list[tuple[str, str]]:
    return [(c, k) for c in CALLS for k in KINDS if not (c == "astype" and k == "python-float")]


def _f(call: str) -> Callable[[Any], Any]:
    g = CALLS[call]
    return lambda s: g(s * 1.0) if np.ndim(s) == 0 else g(s)  # (a scalar, also from a 0-d x)


@settings(max_examples=8, deadline=None, derandomize=True)
@given(v=st.floats(0.2, 2.0) | st.floats(-2.0, -0.2))
@pytest.mark.parametrize("call,kind", _cases())
def test_a_scalar_through_array_rules(call: str, kind: str, v: float) -> None:
    x = KINDS[kind](v)
    f = _f(call)
    want = f(x)
    single = kind == "float32"  # (a float32 input has a float32 gradient, astype or not)
    tol = 1e-4 if single else 1e-7
    h = 1e-6
    fd = (f(np.float64(v) + h) - f(np.float64(v) - h)) / (2 * h)
    h2 = 1e-4  # (a second difference: error O(h²) + O(ε/h²), about 1e-8 relative here)
    fd2 = (f(np.float64(v) + h2) - 2 * f(np.float64(v)) + f(np.float64(v) - h2)) / h2**2

    vg = rulekit.value_and_grad(f)
    for _ in range(3):  # (the second and third calls: its rules cached)
        y, g = vg(x)
        assert type(y) is type(want) and y == want
        np.testing.assert_allclose(g, fd, rtol=tol)
    y, t = rulekit.jvp(f, (x,), (np.ones_like(x) if kind == "0-d" else type(x)(1.0),))
    assert type(y) is type(want) and y == want
    np.testing.assert_allclose(t, fd, rtol=tol)
    for mode in MODES:
        H = rulekit.hessian(f, mode=mode)(x)
        np.testing.assert_allclose(H, fd2, rtol=1e-3 if single else 1e-6, err_msg=mode)
