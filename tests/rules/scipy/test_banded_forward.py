"""The forward rule and the differentiable pullback of scipy.linalg.solve_banded
(rules/scipy/banded_forward.py): over (l, u) band widths, a vector and a matrix right-hand
side, complex ab, C/F/negative-stride/strided layouts and float32/float64: `rulekit.jvp`
against central differences, the band helpers against dense algebra, and `rulekit.hessian`
of a scalar function of the solve in the three modes against central differences of the
reverse engine's gradient `rulekit.grad`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.linalg
from forward_rules import HESSIAN_GRID, HESSIAN_IDS, MODES, fd_hessian

import rulekit
import rules.scipy.linalg  # noqa: F401  (routes scipy.linalg's names; defers the module below)
from rules.scipy.banded_forward import band_matmul, band_outer, band_transpose
from testutils._layouts import relayout

LAYOUTS = ("C", "F", "negative", "strided")
DTYPES = (np.float64, np.float32)
BANDS = [(1, 1), (2, 1), (0, 2), (1, 0)]


def _banded(lower: int, upper: int, m: int, seed: int = 0, cplx: bool = False) -> np.ndarray:
    """The band storage of a diagonally dominant m×m matrix."""
    rng = np.random.default_rng(seed)
    ab = rng.normal(size=(lower + upper + 1, m))
    if cplx:
        ab = ab + 1j * rng.normal(size=ab.shape)
    ab[upper] += 2.0 * (lower + upper + 1) * np.sign(ab[upper].real)
    return ab


def _dense(ab: np.ndarray, lower: int, upper: int) -> np.ndarray:
    m = ab.shape[-1]
    A = np.zeros((m, m), ab.dtype)
    for i in range(m):
        for j in range(max(0, i - lower), min(m, i + upper + 1)):
            A[i, j] = ab[upper + i - j, j]
    return A


@pytest.mark.parametrize("band", BANDS, ids=str)
def test_band_helpers_against_dense(band: tuple[int, int]) -> None:
    lower, upper = band
    ab = _banded(lower, upper, 5, cplx=True)
    A = _dense(ab, lower, upper)
    rng = np.random.default_rng(1)
    x, X = rng.normal(size=5), rng.normal(size=(5, 2))
    np.testing.assert_allclose(band_matmul(ab, x, lower, upper, True), A @ x, rtol=1e-14)
    np.testing.assert_allclose(band_matmul(ab, X, lower, upper, False), A @ X, rtol=1e-14)
    np.testing.assert_allclose(_dense(band_transpose(ab, lower, upper), upper, lower),
                               A.conj().T, rtol=1e-14)  # fmt: skip
    g = rng.normal(size=5)
    want = -np.outer(g, x.conj())
    got = _dense(band_outer(g, x, lower, upper, True), lower, upper)
    mask = _dense(np.ones_like(ab.real), lower, upper) != 0
    np.testing.assert_allclose(got, np.where(mask, want, 0), rtol=1e-14)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("vec", [True, False], ids=["vector", "matrix"])
@pytest.mark.parametrize("band", BANDS, ids=str)
def test_jvp(band: tuple[int, int], vec: bool, dtype: Any, layout: str) -> None:
    lower, upper = band
    ab = relayout(_banded(lower, upper, 5).astype(dtype), layout)
    rng = np.random.default_rng(2)
    b = relayout(rng.normal(size=5 if vec else (5, 2)).astype(dtype), layout)
    dab, db = (np.asarray(rng.normal(size=np.shape(v)), dtype) for v in (ab, b))

    def solve(ab: Any, b: Any) -> Any:
        return scipy.linalg.solve_banded((lower, upper), ab, b)

    y, t = rulekit.jvp(solve, (ab, b), (dab, db))
    want = solve(ab, b)
    assert y.dtype == want.dtype == t.dtype and y.shape == t.shape
    np.testing.assert_allclose(y, want, rtol=1e-12)
    eps = 1e-6
    w = [np.asarray(v, np.float64) for v in (ab, b, dab, db)]
    fd = (
        solve(w[0] + eps * w[2], w[1] + eps * w[3]) - solve(w[0] - eps * w[2], w[1] - eps * w[3])
    ) / (2 * eps)
    tol = 1e-4 if dtype == np.float32 else 1e-7
    np.testing.assert_allclose(t, fd, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,layout,mode", HESSIAN_GRID, ids=HESSIAN_IDS)
@pytest.mark.parametrize("band", [(1, 1), (2, 1)], ids=str)
def test_hessian(band: tuple[int, int], dtype: Any, layout: str, mode: str) -> None:
    """Σ x³ for x = solve_banded(ab + P[:, :4], B·P[:, 4:]) (matrix and vector solves) in the
    (l + u + 1, 6) array P."""
    lower, upper = band
    ab0 = _banded(lower, upper, 4, seed=3)
    rows = lower + upper + 1
    rng = np.random.default_rng(4)
    B = rng.normal(size=(4, rows))
    p = relayout((0.3 * rng.normal(size=(rows, 6))).astype(dtype), layout)

    def f(q: Any) -> Any:
        ab = ab0 + q[:, :4]
        X = scipy.linalg.solve_banded((lower, upper), ab, B @ q[:, 4:])
        x = scipy.linalg.solve_banded((lower, upper), ab, q[0, :4] * 2.0)
        return np.sum(X**3) + np.sum(x**3)

    ref = fd_hessian(f, p)
    H = rulekit.hessian(f, mode=mode)(p)
    tol = 1e-3 if dtype == np.float32 else 1e-6
    np.testing.assert_allclose(H, ref, rtol=tol, atol=tol * (1 + np.max(np.abs(ref))))


@pytest.mark.parametrize("mode", MODES)
def test_complex_ab(mode: str) -> None:
    ab0 = _banded(1, 2, 4, seed=5, cplx=True)
    b = np.random.default_rng(6).normal(size=4) + 0j

    def f(p: Any) -> Any:
        x = scipy.linalg.solve_banded((1, 2), ab0 * p[0], b * p[1])
        return np.sum(np.abs(x) ** 2)

    p = np.array([1.1, 0.8])
    np.testing.assert_allclose(rulekit.hessian(f, mode=mode)(p), fd_hessian(f, p),
                               rtol=1e-6, atol=1e-8)  # fmt: skip
