"""Tests for rules.numpy.linalg.eig: np.linalg.eig and eigvals of general (non-normal) matrices.

Hypothesis draws matrices V·diag(λ)·V⁻¹ with well-separated eigenvalues and a
well-conditioned V. `check_rule` covers eig of real matrices with real spectra
(real eigenvectors: their sign is locally constant) and eigvals of every kind;
complex eigenvectors have an arbitrary phase, so they are checked through the
engine with phase-invariant losses against finite differences, and phase-dependent
cotangents, repeated eigenvalues and defective matrices must raise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.linalg.eig
import rules.numpy.reductions.sums  # np.sum
import rules.numpy.ufuncs.binary  # np.multiply and friends
import rules.numpy.ufuncs.unary  # noqa: F401  (registers np.abs, np.real)
from rulekit import NoRData, zero_codual
from rules._support.linalg import DegenerateSpectrumError, GaugeDependentError
from testutils import check_rule

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
sizes = st.integers(1, 4)
batches = st.sampled_from([(), (2,)])


def matrix(seed: int, n: int, batch: tuple[int, ...] = (), cplx: bool = False,
           pair: bool = False) -> np.ndarray:  # fmt: skip
    """V diag(λ) V⁻¹, λ = 3, 6, …, 3n shuffled (a ±1.5i pair added with `pair`), V a
    perturbed rotation (non-normal, cond(V) small: eigenvalues stay apart under the kit's
    finite-difference steps)."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(*batch, n, n))
    if cplx:
        Z = Z + 1j * rng.normal(size=(*batch, n, n))
    V = np.linalg.qr(Z)[0] + 0.25 * rng.normal(size=(*batch, n, n))
    lam = rng.permutation(3.0 * np.arange(1.0, n + 1))
    D = np.zeros((n, n), dtype=V.dtype) + np.diag(lam)
    if pair and n >= 2:  # λ₀ ± 1.5i
        D[1, 1] = D[0, 0]
        D[:2, :2] += [[0.0, -1.5], [1.5, 0.0]]
    return V @ D @ np.linalg.inv(V)


@SETTINGS
@given(sizes, batches, seeds)
def test_eig_real_spectrum(n: int, batch: tuple[int, ...], seed: int) -> None:
    # (the kit's own smaller input, a leading submatrix, may have complex eigenvalues)
    smaller = (matrix(seed + 1, n - 1, batch),) if n > 1 else None
    check_rule(np.linalg.eig, matrix(seed, n, batch), shape_change=smaller)


@SETTINGS
@given(sizes, batches, st.booleans(), st.booleans(), seeds)
def test_eigvals(n: int, batch: tuple[int, ...], cplx: bool, pair: bool, seed: int) -> None:
    check_rule(np.linalg.eigvals, matrix(seed, n, batch, cplx, pair))


# -- complex eigenvectors: phase-invariant losses through the engine ----------------------------

W = np.random.default_rng(5).normal(size=(4, 4))
C = np.random.default_rng(6).normal(size=4) + 1j * np.random.default_rng(7).normal(size=4)


def invariant_loss(A: Any) -> Any:
    """|V|², a projector-like bilinear form and λ: invariant under each vᵢ → vᵢe^{iθ}."""
    w, V = np.linalg.eig(A)
    n = w.shape[-1]
    v0 = V[..., :, :1]
    P = v0 * np.conj(np.swapaxes(v0, -1, -2))  # the projector-like v₀ v₀ᴴ
    return (np.sum(np.abs(V) ** 2 * W[:n, :n]) + np.sum(np.real(w * C[:n]))
            + np.sum(np.real(P[..., 0, :]) * W[0, :n]))  # fmt: skip


def _engine(f: Any, A: np.ndarray) -> None:
    if not np.iscomplexobj(A):
        check_grads(f, A)
        return
    g = lambda re, im: f(re + 1j * im)  # noqa: E731
    gr, gi = check_grads(g, A.real.copy(), A.imag.copy())
    _, gz = rulekit.value_and_grad(f)(A.copy())  # x̄ = ∂/∂Re + i ∂/∂Im
    np.testing.assert_allclose(gz, gr + 1j * gi, rtol=1e-10, atol=1e-12)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(st.integers(2, 4), st.booleans(), seeds)
def test_eig_complex_vectors_phase_invariant(n: int, cplx: bool, seed: int) -> None:
    _engine(invariant_loss, matrix(seed, n, cplx=cplx, pair=not cplx))


def test_eig_phase_dependent_cotangent_raises() -> None:
    A = matrix(1, 3, pair=True)  # real A, a complex-conjugate pair of eigenvectors
    with pytest.raises(GaugeDependentError, match="phases"):
        rulekit.value_and_grad(lambda a: np.sum(np.real(np.linalg.eig(a)[1])))(A)


def test_eig_repeated_eigenvalues() -> None:
    rng = np.random.default_rng(3)
    V = rng.normal(size=(3, 3)) + 2 * np.eye(3)
    A = V @ np.diag([2.0, 2.0, 5.0]) @ np.linalg.inv(V)  # diagonalizable, λ = 2 twice
    ca = zero_codual(A.copy())
    y, pb = rulekit.rrule(zero_codual(np.linalg.eig), ca)
    y.dx[1][...] = rng.normal(size=(3, 3))
    with pytest.raises(DegenerateSpectrumError, match="repeated"):
        pb(NoRData())
    # values only, equal across the repeated group (a trace): exact
    _engine(lambda a: np.sum(np.real(np.linalg.eigvals(a))), A)


def test_defective_matrix_raises() -> None:
    J = np.array([[1.0, 1.0], [0.0, 1.0]])  # a Jordan block: no eigenvector basis
    with pytest.raises(DegenerateSpectrumError, match="defective"):
        rulekit.value_and_grad(lambda a: np.sum(np.real(np.linalg.eigvals(a))))(J)


def test_eigvals_matches_eig_order_in_the_pullback() -> None:
    A = matrix(8, 4, pair=True)
    ca = zero_codual(A.copy())
    y, pb = rulekit.rrule(zero_codual(np.linalg.eigvals), ca)
    y.dx[...] = np.arange(4) + 1j
    pb(NoRData())
    cb = zero_codual(A.copy())
    y2, pb2 = rulekit.rrule(zero_codual(np.linalg.eig), cb)
    order = [int(np.argmin(np.abs(y2.x.eigenvalues - v))) for v in y.x]
    y2.dx[0][order] = np.arange(4) + 1j
    pb2(NoRData())
    np.testing.assert_allclose(ca.dx, cb.dx, rtol=1e-12)
