"""The forward rule and the differentiable pullback of scipy.signal.convolve
(rules/scipy/signal.py): over the modes and methods, 1-d and 2-d, in2 larger than in1 ('valid'
swaps them), complex and 0-d operands, C/F/negative-stride/strided layouts and
float32/float64: `rulekit.jvp` against central differences, and `rulekit.hessian` of a
scalar function of the call in the three modes against central differences of the reverse
engine's gradient `rulekit.grad`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.signal
from forward_rules import HESSIAN_GRID, HESSIAN_IDS, MODES, fd_hessian

import rulekit
import rules.scipy.signal  # noqa: F401  (routes scipy.signal.convolve to the rules)
from testutils._layouts import relayout

LAYOUTS = ("C", "F", "negative", "strided")
DTYPES = (np.float64, np.float32)

#: (id, in1 shape, in2 shape, mode, method)
CASES = [
    ("full-1d", (6,), (3,), "full", "auto"),
    ("same-2d", (4, 5), (2, 3), "same", "direct"),
    ("valid-2d", (4, 5), (2, 3), "valid", "fft"),
    ("valid-swapped", (2, 3), (4, 4), "valid", "auto"),
    ("same-larger-in2", (3,), (5,), "same", "direct"),
]
IDS = [c[0] for c in CASES]


def _arrays(shape1: Any, shape2: Any, dtype: Any, layout: str) -> tuple[Any, Any]:
    rng = np.random.default_rng(7)
    return (relayout(np.asarray(rng.normal(size=shape1), dtype), layout),
            relayout(np.asarray(rng.normal(size=shape2), dtype), layout))  # fmt: skip


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jvp(case: Any, dtype: Any, layout: str) -> None:
    _, s1, s2, mode, method = case
    a, b = _arrays(s1, s2, dtype, layout)
    rng = np.random.default_rng(8)
    da, db = (np.asarray(rng.normal(size=np.shape(v)), dtype) for v in (a, b))

    def conv(a: Any, b: Any) -> Any:
        return scipy.signal.convolve(a, b, mode, method)

    y, t = rulekit.jvp(conv, (a, b), (da, db))
    want = conv(a, b)
    assert y.dtype == want.dtype == t.dtype and y.shape == want.shape == t.shape
    np.testing.assert_allclose(y, want, rtol=1e-6 if dtype == np.float32 else 1e-13)
    # (bilinear: the tangent is exact, conv(ȧ, b) + conv(a, ḃ))
    want_t = conv(da.astype(np.float64), b.astype(np.float64)) + conv(
        a.astype(np.float64), db.astype(np.float64)
    )
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(t, want_t, rtol=tol, atol=tol)
    _, t1 = rulekit.jvp(lambda v: conv(v, b), (a,), (da,))  # (one argument constant)
    np.testing.assert_allclose(t1, conv(da, b), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,layout,mode", HESSIAN_GRID, ids=HESSIAN_IDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_hessian(case: Any, dtype: Any, layout: str, mode: str) -> None:
    """Σ conv(a, b²)³ in (a, b) together: a (3, n) array's rows 0–1 hold a, row 2 holds b
    (1-d cases), or a and b are the two halves of a stacked array (2-d)."""
    _, s1, s2, conv_mode, method = case
    a, b = _arrays(s1, s2, dtype, "C")
    n1, n2 = a.size, b.size
    p = relayout(np.concatenate([a.ravel(), b.ravel()]).reshape(1, -1), layout)

    def f(q: Any) -> Any:
        v = q[0]
        y = scipy.signal.convolve(np.reshape(v[:n1], s1), np.reshape(v[n1:], s2) ** 2,
                                  conv_mode, method)  # fmt: skip
        return np.sum(y**3)

    assert n1 + n2 == p.shape[1]
    ref = fd_hessian(f, p)
    H = rulekit.hessian(f, mode=mode)(p)
    tol = 1e-3 if dtype == np.float32 else 1e-6
    np.testing.assert_allclose(H, ref, rtol=tol, atol=tol * (1 + np.max(np.abs(ref))))


@pytest.mark.parametrize("mode", MODES)
def test_complex_and_zero_d(mode: str) -> None:
    """A complex in2 (Re/Im of the result in the objective); 0-d operands (a product) in
    forward mode."""
    rng = np.random.default_rng(9)
    c = rng.normal(size=(2, 2)) + 1j * rng.normal(size=(2, 2))

    def f(p: Any) -> Any:
        y = scipy.signal.convolve(np.reshape(p[:6], (2, 3)), c * np.reshape(p[6:], (2, 2)), "same")
        return np.sum(np.abs(y) ** 2) + np.sum(np.real(y) ** 3)

    p = rng.normal(size=10)
    H = rulekit.hessian(f, mode=mode)(p)
    np.testing.assert_allclose(H, fd_hessian(f, p), rtol=1e-6, atol=1e-6)

    y, t = rulekit.jvp(lambda u, v: scipy.signal.convolve(u, v), (np.array(0.7), np.array(2.0)),
                       (np.array(1.0), np.array(0.5)))  # fmt: skip
    assert y == pytest.approx(1.4) and t == pytest.approx(2.0 + 0.35)
