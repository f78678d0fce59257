"""Rules for the general eigendecomposition: numpy.linalg.eig and eigvals.

A = V Λ V⁻¹ with numpy's conventions: eigenvalues in LAPACK's order (not
sorted), eigenvectors normalized to unit 2-norm; the outputs are complex unless
every eigenvalue of a real A is real. With P = V⁻¹ dA V, first-order
perturbation theory gives dλ = diag(P) and dV = V C with Cᵢⱼ = Pᵢⱼ/(λⱼ − λᵢ)
(i ≠ j) and Re Cⱼⱼ fixed by ‖vⱼ‖ = 1. Its adjoint (x̄ = Jᴴȳ):

    G = VᴴV̄,   K = G − VᴴV·diag(Re diag G),   Eᵢⱼ = conj(λⱼ − λᵢ)
    Ā = V⁻ᴴ (diag(λ̄) + K/E off the diagonal) Vᴴ        (a real A takes Re Ā)

(the K term is the normalization's: PyTorch's linalg_eig_backward). The phase of
each complex eigenvector is arbitrary (numpy: LAPACK's "largest component
real"); only phase-invariant functions of V are differentiable, so a cotangent
with Im diag(VᴴV̄) ≠ 0 raises `GaugeDependentError`. Repeated eigenvalues
(gap ≤ 10·n·ε·max|λ|) with a V̄ that is not invariant within their eigenspace
raise `DegenerateSpectrumError`, as does a defective A (V numerically singular:
no eigenvector basis, the eigenvalues are not differentiable). Values only
(`eigvals`, or λ̄ alone): Ā = V⁻ᴴ diag(λ̄) Vᴴ, see docs/conventions-linalg.md for
the meaning at repeated values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual
from rules._support.arguments import array_fdata
from rules._support.cotangents import NO_R, accumulate, element_cotangent
from rules._support.linalg import (
    DegenerateSpectrumError,
    check_gauge,
    diag_view,
    mH,
    safe_divide,
    spectral_tol,
)
from rules._support.outputs import new_output

__all__ = ["eig_rrule", "eigvals_rrule"]


def _distinct(seed: int, n: int, batch: tuple[int, ...] = (), cplx: bool = False,
              real_spectrum: bool = True) -> np.ndarray:  # fmt: skip
    """V diag(λ) V⁻¹ with λ = 3, 6, …, 3n (or λ₀ ± 1.5i for the first two) and V a perturbed
    rotation: non-normal, well-separated eigenvalues, a well-conditioned V."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(*batch, n, n))
    if cplx:
        Z = Z + 1j * rng.normal(size=(*batch, n, n))
    V = np.linalg.qr(Z)[0] + 0.25 * rng.normal(size=(*batch, n, n))
    D = np.zeros((n, n), dtype=V.dtype) + np.diag(3.0 * np.arange(1.0, n + 1))
    if not real_spectrum and n >= 2:  # a rotation block: a complex-conjugate pair
        D[:2, :2] = [[3.0, -1.5], [1.5, 3.0]]
    return V @ D @ np.linalg.inv(V)


def _check_basis(V: np.ndarray, what: str) -> None:
    """Raise if the eigenvectors do not form a basis (A defective to working precision)."""
    s = np.linalg.svd(V, compute_uv=False)
    n = V.shape[-1]
    if np.any(s[..., -1] <= n * np.finfo(s.dtype).eps * s[..., 0]):
        raise DegenerateSpectrumError(
            f"{what}: the eigenvectors are linearly dependent to working precision (A is "
            "defective: it has no eigenvector basis), so its eigenvalues and eigenvectors are "
            "not differentiable there. Perturb A, or differentiate a smooth function of it "
            "(trace, det, a matrix function) instead."
        )


def _eig_bar(w: np.ndarray, V: np.ndarray, wb: Any, Vb: Any, what: str) -> np.ndarray:
    """Ā = V⁻ᴴ (diag(λ̄) + K/conj(E)) Vᴴ (see the module docstring)."""
    _check_basis(V, what)
    n = w.shape[-1]
    inner = np.zeros((*w.shape, n), dtype=np.result_type(V.dtype, w.dtype))
    if Vb is not None:
        G = mH(V) @ Vb
        d = np.diagonal(G, axis1=-2, axis2=-1)
        if np.iscomplexobj(G):
            check_gauge(np.imag(d), G, what)
        K = G - (mH(V) @ V) * np.real(d)[..., None, :]
        E = np.conj(w[..., None, :] - w[..., :, None])
        inner = safe_divide(K, E, spectral_tol(np.abs(w)), what, w)
    if wb is not None:
        diag_view(inner)[...] += wb
    return np.linalg.solve(mH(V), inner @ mH(V))


def _eig_examples() -> list[rulekit.Example]:
    return [
        rulekit.example(_distinct(40, 3)),
        rulekit.example(_distinct(41, 4, batch=(2,))),
        rulekit.example(_distinct(42, 2).astype(np.float32)),
        rulekit.example(_distinct(47, 1, batch=(2,))),
    ]


@rulekit.rrule.register(np.linalg.eig, Array[np.inexact], examples=_eig_examples)
def eig_rrule(f: CoDual, a: CoDual) -> tuple[CoDual, Any]:
    """(λ, V) = eig(A)  ⇒  Ā += V⁻ᴴ (diag(λ̄) + K/conj(E)) Vᴴ (see the module docstring)."""
    res = np.linalg.eig(a.x)
    if array_fdata(a) is None:
        return CoDual(res, None), lambda dy: (NO_R, NO_R)
    out = new_output(res)

    def eig_pullback(dy: Any) -> tuple[Any, ...]:
        wb, Vb = element_cotangent(out, dy, 0), element_cotangent(out, dy, 1)
        if wb is not None or Vb is not None:
            accumulate(a, _eig_bar(res.eigenvalues, res.eigenvectors, wb, Vb, "np.linalg.eig"))
        return NO_R, NO_R

    return out, eig_pullback


def _match(w: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """perm with w2[..., perm] ≈ w (the same eigenvalues, possibly in another order)."""
    d = np.abs(w[..., :, None] - w2[..., None, :])
    perm = np.argmin(d, axis=-1)
    ok = np.all(np.sort(perm, axis=-1) == np.arange(w.shape[-1]), axis=-1)
    if np.all(ok):
        return perm
    flat_d = d.reshape(-1, *d.shape[-2:])
    flat_p = perm.reshape(-1, w.shape[-1])
    for k in np.flatnonzero(~ok.reshape(-1)):  # repeated values: a greedy assignment
        free = np.ones(w.shape[-1], dtype=bool)
        for i in range(w.shape[-1]):
            j = int(np.argmin(np.where(free, flat_d[k, i], np.inf)))
            flat_p[k, i], free[j] = j, False
    return flat_p.reshape(perm.shape)


def _eigvals_examples() -> list[rulekit.Example]:
    return [
        rulekit.example(_distinct(43, 3)),
        rulekit.example(_distinct(44, 3, batch=(2,), real_spectrum=False)),
        rulekit.example(_distinct(45, 3, cplx=True).astype(np.complex64)),
        rulekit.example(_distinct(46, 4, real_spectrum=False)),
    ]


@rulekit.rrule.register(np.linalg.eigvals, Array[np.inexact], examples=_eigvals_examples)
def eigvals_rrule(f: CoDual, a: CoDual) -> tuple[CoDual, Any]:
    """λ = eigvals(A)  ⇒  Ā += V⁻ᴴ diag(λ̄) Vᴴ. The primal is numpy's eigvals; V comes from
    eig in the pullback, its eigenvalues matched to λ's order."""
    w = np.linalg.eigvals(a.x)
    if array_fdata(a) is None:
        return CoDual(w, None), lambda dy: (NO_R, NO_R)
    out = new_output(w)

    def eigvals_pullback(dy: Any) -> tuple[Any, ...]:
        w2, V = np.linalg.eig(a.x)
        V = np.take_along_axis(V, _match(w, w2)[..., None, :], axis=-1)
        accumulate(a, _eig_bar(w, V, out.dx, None, "np.linalg.eigvals"))
        return NO_R, NO_R

    return out, eigvals_pullback
