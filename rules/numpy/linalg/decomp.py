"""Rules for the numpy.linalg decompositions: qr, eigh, eigvalsh, svd, svdvals.

Outputs that are namedtuples keep numpy's type as the primal; their fdata is a
plain tuple of the elements' fdata. Symmetric/Hermitian routines read one
triangle (UPLO): the cotangent is folded onto it (`fold`), so it is exact for
every perturbation and its symmetric part is the symmetric-gradient convention.
At (near-)repeated eigenvalues or singular values a pullback that would need
1/(λᵢ − λⱼ) raises `DegenerateSpectrumError` (see docs/conventions-linalg.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Vararg
from rules._support.arguments import array_fdata, primal
from rules._support.binding import binder
from rules._support.cotangents import NO_R, accumulate, element_cotangent, zero_rdata_of
from rules._support.linalg import (
    check_gauge,
    diag_view,
    fold,
    mH,
    safe_divide,
    spectral_tol,
    tri_solve_right,
)
from rules._support.outputs import new_output

__all__ = ["eigh_rrule", "eigvalsh_rrule", "qr_rrule", "svd_rrule", "svdvals_rrule"]

_bind_qr = binder(np.linalg.qr)
_bind_eigh = binder(np.linalg.eigh)
_bind_svd = binder(np.linalg.svd)


def _zeros_if_none(g: Any, like: np.ndarray) -> np.ndarray:
    return np.zeros_like(like) if g is None else g


def _rng_sym(seed: int, n: int, batch: tuple[int, ...] = (), complex_: bool = False) -> Any:
    """A symmetric/Hermitian matrix with well-separated eigenvalues 1, 2, …, n (+ rotation)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(*batch, n, n))
    if complex_:
        z = z + 1j * rng.normal(size=(*batch, n, n))
    q, _ = np.linalg.qr(z)
    return (q * np.arange(1.0, n + 1)) @ mH(q)


def _rng_svd(seed: int, shape: tuple[int, ...], complex_: bool = False) -> Any:
    """A matrix with well-separated singular values 1, 2, …, k."""
    rng = np.random.default_rng(seed)
    m, n = shape[-2:]
    k = min(m, n)
    u = rng.normal(size=(*shape[:-2], m, m)) + (1j * rng.normal(size=(m, m)) if complex_ else 0)
    v = rng.normal(size=(*shape[:-2], n, n)) + (1j * rng.normal(size=(n, n)) if complex_ else 0)
    u, v = np.linalg.qr(u)[0][..., :k], np.linalg.qr(v)[0][..., :k]
    return (u * np.arange(1.0, k + 1)) @ mH(v)


# -- qr ---------------------------------------------------------------------------------------


def _qr_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(20)
    return [
        rulekit.example(rng.normal(size=(3, 3)) + 3 * np.eye(3)),
        rulekit.example(rng.normal(size=(5, 3))),
        rulekit.example(rng.normal(size=(3, 5))),
        rulekit.example(rng.normal(size=(2, 4, 3))),
        rulekit.example(rng.normal(size=(4, 3)) + 1j * rng.normal(size=(4, 3))),
        rulekit.example(rng.normal(size=(4, 3)), "r"),
        rulekit.Example((rng.normal(size=(3, 4)),), {"mode": "complete"}),
    ]


def _qr_square_bar(Q: np.ndarray, R: np.ndarray, Qb: np.ndarray, Rb: np.ndarray) -> np.ndarray:
    """A = QR with R square: M = QᵀQ̄ − R̄Rᵀ, Ā = (Q̄ − Q·sym_upper(M)) R⁻ᵀ.

    sym_upper(M) = triu(M, 1) + triu(M, 1)ᵀ + Re diag(M) (Hermitian for complex:
    LAPACK's R has a real diagonal, which fixes the phases of Q).
    """
    M = mH(Q) @ Qb - Rb @ mH(R)
    up = np.triu(M, 1)
    H = up + mH(up)
    diag_view(H)[...] = np.real(np.diagonal(M, axis1=-2, axis2=-1))
    return tri_solve_right(Qb - Q @ H, R, lower=False)


def _qr_bar(A: np.ndarray, Q: np.ndarray, R: np.ndarray, Qb: Any, Rb: Any) -> np.ndarray:
    """Reduced QR adjoint. Wide A = [X | Y] (m < n), R = [U | V]: X = QU, Y = QV ⇒
    Ȳ = Q V̄ and X̄ from the square case with Q̄ + Y V̄ᵀ."""
    Qb, Rb = _zeros_if_none(Qb, Q), _zeros_if_none(Rb, R)
    m, n = A.shape[-2:]
    if m >= n:
        return _qr_square_bar(Q, R, Qb, Rb)
    Y, Vb = A[..., m:], Rb[..., m:]
    Xb = _qr_square_bar(Q, R[..., :m], Qb + Y @ mH(Vb), Rb[..., :m])
    return np.concatenate([Xb, Q @ Vb], axis=-1)


@rulekit.rrule.register(np.linalg.qr, Array[np.inexact], Vararg[Any], examples=_qr_examples)
def qr_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """(Q, R) = qr(A), A of full rank, modes 'reduced', 'r' and 'complete' (extra columns of a
    complete Q are not unique: their cotangent must be 0). See `_qr_bar` for the adjoint."""
    mode = primal(_bind_qr((a, *rest), kwargs)["mode"])
    A = a.x
    m, n = A.shape[-2:]
    k = min(m, n)
    if mode not in ("reduced", "r", "complete"):
        raise NotImplementedError(f"np.linalg.qr(mode={mode!r}) has no rule; use 'reduced'.")
    res = np.linalg.qr(A, mode="complete" if mode == "complete" else "reduced")
    out = new_output(res.R if mode == "r" else res)
    Q, R = res

    def pullback(dy: Any) -> tuple[Any, ...]:
        nr = (NO_R, NO_R, *map(zero_rdata_of, rest))
        if array_fdata(a) is None:
            return nr
        if mode == "r":
            Qb, Rb = None, out.dx
        else:
            Qb, Rb = element_cotangent(out, dy, 0), element_cotangent(out, dy, 1)
        Qk, Rk = Q[..., :k], R[..., :k, :]
        if Qb is not None and Qb.shape[-1] > k:
            if np.any(Qb[..., k:]):
                raise NotImplementedError(
                    "np.linalg.qr(mode='complete') of a tall matrix: the last m − n columns of Q "
                    "are not unique, so they have no derivative; use mode='reduced'."
                )
            Qb = Qb[..., :k]
        accumulate(a, _qr_bar(A, Qk, Rk, Qb, None if Rb is None else Rb[..., :k, :]))
        return nr

    return out, pullback


# -- eigh, eigvalsh ---------------------------------------------------------------------------


def _eigh_examples() -> list[rulekit.Example]:
    return [
        rulekit.example(_rng_sym(21, 3)),
        rulekit.example(_rng_sym(22, 4), "U"),
        rulekit.example(_rng_sym(23, 3, batch=(2,))),
    ]


def _eigh_core(A: np.ndarray, w: np.ndarray, V: np.ndarray, wb: Any, Vb: Any) -> np.ndarray:
    """The cotangent of eigh for Hermitian dA: X = V (diag(w̄) + F∘(G − Gᵀ)/2) Vᵀ,
    G = VᵀV̄, Fᵢⱼ = 1/(wⱼ − wᵢ) (0 on the diagonal and, where the numerator vanishes, at
    repeated eigenvalues)."""
    inner = np.zeros(w.shape + w.shape[-1:], dtype=V.dtype)
    if Vb is not None:
        G = mH(V) @ Vb
        if A.dtype.kind == "c":
            check_gauge(np.imag(np.diagonal(G, axis1=-2, axis2=-1)), G, "np.linalg.eigh")
        num = (G - mH(G)) / 2
        inner = safe_divide(num, w[..., None, :] - w[..., :, None], spectral_tol(w), "eigh", w)
    if wb is not None:
        diag_view(inner)[...] += wb
    return V @ inner @ mH(V)


@rulekit.rrule.register(np.linalg.eigh, Array[np.inexact], Vararg[Any], examples=_eigh_examples)
def eigh_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """(w, V) = eigh(A) reads the UPLO triangle of A:
    Ā += fold(V (diag(w̄) + F∘(VᵀV̄ − V̄ᵀV)/2) Vᵀ), Fᵢⱼ = 1/(wⱼ − wᵢ).

    Repeated eigenvalues: raises DegenerateSpectrumError unless V̄ is invariant within the
    repeated eigenspace. Complex: V̄ must be invariant under eigenvector phases (else
    GaugeDependentError)."""
    uplo = primal(_bind_eigh((a, *rest), kwargs)["UPLO"])
    res = np.linalg.eigh(a.x, *map(primal, rest), **kwargs)
    out = new_output(res)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            wb, Vb = element_cotangent(out, dy, 0), element_cotangent(out, dy, 1)
            X = _eigh_core(a.x, res.eigenvalues, res.eigenvectors, wb, Vb)
            accumulate(a, fold(X, lower=str(uplo).upper() == "L"))
        return (NO_R, NO_R, *map(zero_rdata_of, rest))

    return out, pullback


def _eigvalsh_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(24)
    x = rng.normal(size=(3, 3))
    return [
        rulekit.example(_rng_sym(25, 3)),
        rulekit.example(_rng_sym(26, 3, batch=(2,)), "U"),
        rulekit.example(_rng_sym(27, 3, complex_=True)),
        rulekit.example(x + x.T),
    ]


@rulekit.rrule.register(
    np.linalg.eigvalsh, Array[np.inexact], Vararg[Any], examples=_eigvalsh_examples
)
def eigvalsh_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """w = eigvalsh(A) ⇒ Ā += fold(V diag(w̄) Vᵀ). Never blows up; at repeated eigenvalues
    (where sorted eigenvalues are not differentiable) it is exact when w̄ is equal across
    each repeated group (e.g. traces, sums of functions of w), else one element of the
    generalized gradient.

    The primal is numpy's eigvalsh; the eigenvectors are computed in the pullback."""
    uplo = primal(_bind_eigh((a, *rest), kwargs)["UPLO"])
    out = new_output(np.linalg.eigvalsh(a.x, *map(primal, rest), **kwargs))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            _, V = np.linalg.eigh(a.x, uplo)
            accumulate(a, fold((V * out.dx[..., None, :]) @ mH(V), lower=str(uplo).upper() == "L"))
        return (NO_R, NO_R, *map(zero_rdata_of, rest))

    return out, pullback


# -- svd, svdvals -----------------------------------------------------------------------------


def _svd_examples() -> list[rulekit.Example]:
    ex = rulekit.example
    return [
        ex(_rng_svd(30, (3, 3))),
        rulekit.Example((_rng_svd(31, (5, 3)),), {"full_matrices": False}),
        rulekit.Example((_rng_svd(32, (3, 5)),), {"full_matrices": False}),
        rulekit.Example((_rng_svd(33, (2, 4, 3)),), {"full_matrices": False}),
        rulekit.Example((_rng_svd(34, (4, 3)),), {"compute_uv": False}),
        rulekit.Example((_rng_svd(35, (3, 4), complex_=True),), {"compute_uv": False}),
    ]


def _inv_s(s: np.ndarray, tol: np.ndarray, cols: np.ndarray, what: str) -> np.ndarray:
    """1/s for the projector terms; a (near-)zero s with a nonzero column there raises."""
    small = s <= tol[..., 0]
    if np.any(small & np.any(np.abs(cols) > 0, axis=-2)):
        from rules._support.linalg import DegenerateSpectrumError

        raise DegenerateSpectrumError(
            f"{what}: a singular value is (near) zero and the cotangent of the singular vectors "
            "has a component outside their span, which needs 1/s: the derivative does not exist."
        )
    return np.where(small, 0, 1 / np.where(small, 1, s))


def _svd_bar(U: Any, s: Any, Vh: Any, Ub: Any, sb: Any, Vhb: Any) -> np.ndarray:
    """Reduced SVD adjoint (Townsend 2016), A = U S Vᵀ:
    Ā = U K Vᵀ + (I − UUᵀ)Ū S⁻¹ Vᵀ + U S⁻¹ V̄ᵀ(I − VVᵀ), with a = UᵀŪ − ŪᵀU,
    b = VᵀV̄ − V̄ᵀV, Kᵢⱼ = ½(a+b)ᵢⱼ/(sⱼ − sᵢ) + ½(a−b)ᵢⱼ/(sⱼ + sᵢ), Kᵢᵢ = s̄ᵢ
    (complex: + i·Im(UᴴŪ − VᴴV̄)ᵢᵢ/(2sᵢ)). The split form has a finite limit at repeated
    values whenever the cotangent is invariant within the repeated subspace."""
    m, k, n = U.shape[-2], s.shape[-1], Vh.shape[-1]
    V = mH(Vh)
    inner = np.zeros(s.shape + s.shape[-1:], dtype=U.dtype)
    tol = spectral_tol(s)
    Ub = None if Ub is None or not np.any(Ub) else Ub
    Vb = None if Vhb is None or not np.any(Vhb) else mH(Vhb)
    if Ub is not None or Vb is not None:
        ua = mH(U) @ Ub if Ub is not None else np.zeros_like(inner)
        vb = mH(V) @ Vb if Vb is not None else np.zeros_like(inner)
        sa, sb_ = ua - mH(ua), vb - mH(vb)
        if U.dtype.kind == "c":
            im = np.imag(np.diagonal(ua + vb, axis1=-2, axis2=-1))
            check_gauge(im, np.concatenate([ua, vb], axis=-1), "np.linalg.svd")
        si, sj = s[..., :, None], s[..., None, :]
        inner = safe_divide((sa + sb_) / 2, sj - si, tol, "svd", s)
        inner = inner + safe_divide((sa - sb_) / 2, sj + si, tol, "svd (zero singular values)", s)
        if U.dtype.kind == "c":
            d = np.imag(np.diagonal(ua - vb, axis1=-2, axis2=-1))
            diag_view(inner)[...] += 1j * d * _inv_s(s, tol, d[..., None, :], "svd") / 2
    if sb is not None:
        diag_view(inner)[...] += sb
    g = U @ inner @ Vh
    if m > k and Ub is not None:
        proj = Ub - U @ (mH(U) @ Ub)
        g = g + (proj * _inv_s(s, tol, proj, "svd")[..., None, :]) @ Vh
    if n > k and Vb is not None:
        proj = Vb - V @ (mH(V) @ Vb)
        g = g + (U * _inv_s(s, tol, proj, "svd")[..., None, :]) @ mH(proj)
    return g


@rulekit.rrule.register(np.linalg.svd, Array[np.inexact], Vararg[Any], examples=_svd_examples)
def svd_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """(U, s, Vh) = svd(A) (see `_svd_bar`); compute_uv=False: Ā += U diag(s̄) Vᵀ.

    full_matrices=True of a non-square A: the extra columns of U (or rows of Vh) are not
    unique, their cotangent must be 0. hermitian=True is not supported (use eigh)."""
    args = _bind_svd((a, *rest), kwargs)
    fm, uv, herm = (bool(primal(args[k])) for k in ("full_matrices", "compute_uv", "hermitian"))
    if herm:
        raise NotImplementedError(
            "np.linalg.svd(hermitian=True) has no rule: use hermitian=False or np.linalg.eigh."
        )
    A = a.x
    if not uv:
        return _values_rule(np.linalg.svd(A, compute_uv=False), a, len(rest))
    res = np.linalg.svd(A, full_matrices=fm)
    out = new_output(res)
    U, s, Vh = res
    k = s.shape[-1]

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            Ub, sb, Vhb = (element_cotangent(out, dy, i) for i in range(3))
            extra_u = Ub is not None and Ub.shape[-1] > k and np.any(Ub[..., k:])
            if extra_u or (Vhb is not None and Vhb.shape[-2] > k and np.any(Vhb[..., k:, :])):
                raise NotImplementedError(
                    "np.linalg.svd(full_matrices=True) of a non-square matrix: the extra "
                    "singular vectors are not unique and have no derivative; pass "
                    "full_matrices=False."
                )
            Ub = None if Ub is None else Ub[..., :k]
            Vhb = None if Vhb is None else Vhb[..., :k, :]
            accumulate(a, _svd_bar(U[..., :k], s, Vh[..., :k, :], Ub, sb, Vhb))
        return (NO_R, NO_R, *map(zero_rdata_of, rest))

    return out, pullback


def _values_rule(s: np.ndarray, a: CoDual, nrest: int) -> tuple[CoDual, Any]:
    out = new_output(s)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            u, _, vh = np.linalg.svd(a.x, full_matrices=False)
            accumulate(a, (u * out.dx[..., None, :]) @ vh)
        return (NO_R, NO_R) + (NO_R,) * nrest

    return out, pullback


def _svdvals_examples() -> list[rulekit.Example]:
    return [
        rulekit.example(_rng_svd(36, (4, 3))),
        rulekit.example(_rng_svd(37, (2, 3, 3))),
        rulekit.example(_rng_svd(38, (3, 3), complex_=True)),
    ]


@rulekit.rrule.register(np.linalg.svdvals, Array[np.inexact], examples=_svdvals_examples)
def svdvals_rrule(f: CoDual, a: CoDual) -> tuple[CoDual, Any]:
    """s = svdvals(A) ⇒ Ā += U diag(s̄) Vᵀ (finite at repeated values; exact there when s̄ is
    equal across each repeated group, as for eigvalsh)."""
    return _values_rule(np.linalg.svdvals(a.x), a, 0)
