"""Rules for numpy.linalg: inv, solve, det, slogdet, cholesky, pinv, lstsq.

The decompositions (qr, eigh, eigvalsh, svd, svdvals) are in `rules.numpy.linalg.decomp`
(imported at the bottom, so importing this module registers all of numpy.linalg).
Matrices are the last two axes (stacks broadcast like numpy); for complex inputs
every ᵀ below is ᴴ (see docs/conventions-linalg.md). 2-D square inputs keep the
LAPACK LU factorization from the forward pass and reuse it in the pullback.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Vararg
from rules._support.arguments import array_fdata, primal
from rules._support.binding import binder
from rules._support.cotangents import NO_F, NO_R, accumulate, element_cotangent, zero_rdata_of
from rules._support.linalg import LU, adjugate_H, chol_cotangent, diag_view, fold, lapack_dtype, mH
from rules._support.outputs import new_output

__all__ = [
    "cholesky_rrule",
    "det_rrule",
    "inv_rrule",
    "lstsq_rrule",
    "pinv_rrule",
    "slogdet_rrule",
    "solve_rrule",
]

_SlogdetResult = type(np.linalg.slogdet(np.eye(1)))
_bind_pinv = binder(np.linalg.pinv)


# -- example data (fixed seeds, small, well conditioned) -------------------------------------


def wellcond(rng: np.random.Generator, shape: tuple[int, ...], complex_: bool = False) -> Any:
    """A (stack of) well-conditioned square matrices: N(0,1) entries + n·I."""
    n = shape[-1]
    a = rng.normal(size=shape)
    if complex_:
        a = a + 1j * rng.normal(size=shape)
    return a + n * np.eye(n)


def spd(rng: np.random.Generator, shape: tuple[int, ...], complex_: bool = False) -> Any:
    """A (stack of) Hermitian positive definite matrices B Bᴴ + n·I."""
    b = wellcond(rng, shape, complex_) - shape[-1] * np.eye(shape[-1])
    return b @ mH(b) + shape[-1] * np.eye(shape[-1])


def _square_2d(a: np.ndarray) -> bool:
    return a.ndim == 2 and a.shape[0] == a.shape[1] > 0 and lapack_dtype(a) == a.dtype


# -- inv, solve -------------------------------------------------------------------------------


def _inv_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(10)
    return [
        rulekit.example(wellcond(rng, (3, 3))),
        rulekit.example(wellcond(rng, (2, 3, 3))),
        rulekit.example(wellcond(rng, (3, 3), complex_=True)),
        rulekit.example(wellcond(rng, (3, 3)).astype(np.float32)),
    ]


@rulekit.rrule.register(np.linalg.inv, Array[np.inexact], examples=_inv_examples)
def inv_rrule(f: CoDual, a: CoDual) -> tuple[CoDual, Any]:
    """Y = A⁻¹ ⇒ Ā += −Yᵀ Ȳ Yᵀ (per matrix of a stack). Y itself is what the pullback keeps."""
    y = np.linalg.inv(a.x)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            yh = mH(y)
            accumulate(a, -(yh @ out.dx @ yh))
        return (NO_R, NO_R)

    return out, pullback


def _solve_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(11)
    return [
        rulekit.example(wellcond(rng, (3, 3)), rng.normal(size=3)),
        rulekit.example(wellcond(rng, (3, 3)), rng.normal(size=(3, 2))),
        rulekit.example(wellcond(rng, (2, 3, 3)), rng.normal(size=(2, 3, 2))),
        rulekit.example(wellcond(rng, (2, 3, 3)), rng.normal(size=3)),  # vector b, stacked A
        rulekit.example(wellcond(rng, (3, 3), True), rng.normal(size=3) + 1j),
    ]


@rulekit.rrule.register(
    np.linalg.solve, Array[np.number], Array[np.number], examples=_solve_examples
)
def solve_rrule(f: CoDual, a: CoDual, b: CoDual) -> tuple[CoDual, Any]:
    """x = A⁻¹b ⇒ b̄ += A⁻ᵀ x̄, Ā += −b̄ xᵀ (b a vector or a stack of matrices, as numpy).

    2-D A: LU-factorized once (getrf); the forward and the pullback's A⁻ᵀ solve
    both use it (getrs). Stacks go through numpy.linalg.solve in both passes.
    """
    A, B = a.x, b.x
    dt = lapack_dtype(A, B)
    vec = B.ndim == 1
    lu = None
    square = A.ndim == 2 and A.shape[0] == A.shape[1] > 0
    if dt is not None and square and B.ndim in (1, 2) and B.shape[0] == A.shape[0]:
        lu = LU(A.astype(dt, copy=False))
        if lu.singular:
            raise np.linalg.LinAlgError("Singular matrix")
    x = lu.solve(B.astype(dt, copy=False)) if lu is not None else np.linalg.solve(A, B)
    out = new_output(x)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is None and array_fdata(b) is None:
            return (NO_R, NO_R, NO_R)
        g = out.dx
        if lu is not None:
            bb = lu.solve(g, adjoint=True)
        else:
            bb = np.linalg.solve(mH(A), g[..., None] if vec else g)
            bb = bb[..., 0] if vec else bb
        accumulate(b, bb)
        if array_fdata(a) is not None:
            if vec:
                accumulate(a, -(bb[..., :, None] * np.conj(x)[..., None, :]))
            else:
                accumulate(a, -(bb @ mH(x)))
        return (NO_R, NO_R, NO_R)

    return out, pullback


# -- det, slogdet -----------------------------------------------------------------------------


def _det_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(12)
    sing = rng.normal(size=(3, 2)) @ rng.normal(size=(2, 3))  # rank 2: exercises the adjugate
    return [
        rulekit.example(wellcond(rng, (3, 3))),
        rulekit.example(wellcond(rng, (2, 3, 3))),
        rulekit.example(wellcond(rng, (3, 3), complex_=True)),
        rulekit.example(sing),
        rulekit.example(np.stack([sing, wellcond(rng, (3, 3))])),
    ]


@rulekit.rrule.register(np.linalg.det, Array[np.inexact], examples=_det_examples)
def det_rrule(f: CoDual, a: CoDual) -> tuple[CoDual, Any]:
    """d = det A ⇒ Ā += d̄·d·A⁻ᵀ (= d̄·adj(A)ᵀ; complex: d̄·conj(d)·A⁻ᴴ).

    2-D: d from the kept LU (sign·exp(Σ log|uᵢᵢ|), as numpy), A⁻ᵀ by getrs on
    it. At a singular A the adjugate (cofactor matrix) is computed from the SVD,
    so the gradient stays exact there.
    """
    A = a.x
    lu = LU(A) if _square_2d(A) else None
    if lu is not None:
        sign, logdet = lu.slogdet()
        d: Any = sign * np.exp(logdet)
        out = CoDual(d, NO_F)
    else:
        d = np.linalg.det(A)
        out = new_output(d)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is None:
            return (NO_R, NO_R)
        g = out.dx if isinstance(out.dx, np.ndarray) else dy
        if not isinstance(g, (np.ndarray, float, complex, np.number)):
            return (NO_R, NO_R)
        g = np.asarray(g)
        if lu is not None and not lu.nearly_singular:
            adj_h = np.conj(d) * lu.solve(np.eye(A.shape[0], dtype=A.dtype), adjoint=True)
        elif np.all(d != 0):
            adj_h = np.conj(d)[..., None, None] * mH(np.linalg.inv(A))
        else:
            adj_h = adjugate_H(A)
        accumulate(a, g[..., None, None] * adj_h)
        return (NO_R, NO_R)

    return out, pullback


def _slogdet_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(13)
    neg = wellcond(rng, (3, 3))
    neg[0] *= -1  # negative determinant
    return [
        rulekit.example(wellcond(rng, (3, 3))),
        rulekit.example(neg),
        rulekit.example(wellcond(rng, (2, 3, 3))),
        rulekit.example(wellcond(rng, (3, 3), complex_=True)),
        rulekit.example(wellcond(rng, (2, 3, 3), complex_=True)),
    ]


@rulekit.rrule.register(np.linalg.slogdet, Array[np.inexact], examples=_slogdet_examples)
def slogdet_rrule(f: CoDual, a: CoDual) -> tuple[CoDual, Any]:
    """(s, l) = slogdet A ⇒ Ā += l̄·A⁻ᵀ. Real A: the sign is piecewise constant (no adjoint).

    Complex A: s = e^{iθ} with dθ = Im tr(A⁻¹dA), dl = Re tr(A⁻¹dA), so
    Ā += w·A⁻ᴴ with w = l̄ + i·Re(i·conj(s̄)·s). The output is numpy's namedtuple;
    for 2-D A its elements are numpy scalars (dy = (s̄, l̄)), for stacks arrays.
    """
    A = a.x
    lu = LU(A) if _square_2d(A) else None
    if lu is not None:
        out = new_output(_SlogdetResult(*lu.slogdet()))
    else:
        out = new_output(np.linalg.slogdet(A))
    sign, logdet = out.x

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is None:
            return (NO_R, NO_R)
        lb, sb = element_cotangent(out, dy, 1), element_cotangent(out, dy, 0)
        w = np.zeros(np.shape(logdet), np.result_type(A.dtype, np.float32))
        if lb is not None:
            w = w + lb
        if sb is not None and A.dtype.kind == "c":
            w = w + 1j * np.real(1j * np.conj(sb) * sign)
        if not np.any(w):
            return (NO_R, NO_R)
        if np.any(np.isneginf(logdet)):
            raise np.linalg.LinAlgError(
                "slogdet: log|det A| = -inf at a singular matrix; its gradient does not exist."
            )
        if lu is not None:
            inv_h = lu.solve(np.eye(A.shape[0], dtype=A.dtype), adjoint=True)
        else:
            inv_h = mH(np.linalg.inv(A))
        accumulate(a, np.asarray(w)[..., None, None] * inv_h)
        return (NO_R, NO_R)

    return out, pullback


# -- cholesky ---------------------------------------------------------------------------------


def _cholesky_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(14)
    return [
        rulekit.example(spd(rng, (3, 3))),
        rulekit.Example((spd(rng, (4, 4)),), {"upper": True}),
        rulekit.example(spd(rng, (2, 3, 3))),
        rulekit.example(spd(rng, (3, 3), complex_=True)),
    ]


@rulekit.rrule.register(np.linalg.cholesky, Array[np.inexact], examples=_cholesky_examples)
def cholesky_rrule(f: CoDual, a: CoDual, *, upper: bool = False) -> tuple[CoDual, Any]:
    """L = chol(A) (reads tril(A); upper=True: U = Lᴴ, reads triu(A)).

    Murray (2016): X = L⁻ᵀ Φ(Lᵀ L̄) L⁻¹ with Φ = lower triangle, halved diagonal,
    is the cotangent for symmetric dA; folded onto the triangle read:
    Ā += tril(X + Xᵀ, −1) + diag(X) (its symmetric part is the symmetric gradient).
    """
    y = np.linalg.cholesky(a.x, upper=upper)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            X = chol_cotangent(mH(y), mH(out.dx)) if upper else chol_cotangent(y, out.dx)
            accumulate(a, fold(X, lower=not upper))
        return (NO_R, NO_R)

    return out, pullback


# -- pinv, lstsq ------------------------------------------------------------------------------


def _pinv_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(15)
    tall = rng.normal(size=(4, 3)) + np.eye(4, 3) * 3
    return [
        rulekit.example(tall),
        rulekit.example(tall.T.copy()),
        rulekit.example(wellcond(rng, (2, 3, 3))),
        rulekit.example(tall + 1j * rng.normal(size=(4, 3))),
        rulekit.Example((spd(rng, (3, 3)),), {"hermitian": True}),
    ]


def _pinv_bar(A: np.ndarray, P: np.ndarray, Yb: np.ndarray) -> np.ndarray:
    """Y = A⁺ (constant rank) ⇒ Ā = −Yᵀ Ȳ Yᵀ + (I − AY) Ȳᵀ Y Yᵀ + Yᵀ Y Ȳᵀ (I − YA)."""
    Ph, Ybh = mH(P), mH(Yb)
    g = -(Ph @ Yb @ Ph)
    g += (Ybh - A @ (P @ Ybh)) @ (P @ Ph)
    g += (Ph @ P) @ (Ybh - (Ybh @ P) @ A)
    return g


@rulekit.rrule.register(np.linalg.pinv, Array[np.inexact], Vararg[Any], examples=_pinv_examples)
def pinv_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """Y = A⁺ (Golub–Pereyra, valid where the rank is locally constant, e.g. full rank):
    Ā += −Yᵀ Ȳ Yᵀ + (I − AY) Ȳᵀ Y Yᵀ + Yᵀ Y Ȳᵀ (I − YA).

    hermitian=True reads tril(A) (numpy uses eigh): the cotangent is folded onto it.
    """
    args = _bind_pinv((a, *rest), kwargs)
    hermitian = bool(primal(args["hermitian"]))
    y = np.linalg.pinv(a.x, *[primal(r) for r in rest], **kwargs)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            A = a.x
            if hermitian:  # numpy used H = tril(A, −1) + tril(A, −1)ᴴ + Re diag(A)
                low = np.tril(A, -1)
                H = low + mH(low)
                diag_view(H)[...] = np.real(np.diagonal(A, axis1=-2, axis2=-1))
                accumulate(a, fold(_pinv_bar(H, y, out.dx), lower=True))
            else:
                accumulate(a, _pinv_bar(A, y, out.dx))
        return (NO_R, NO_R, *map(zero_rdata_of, rest))

    return out, pullback


def _lstsq_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(16)
    tall = rng.normal(size=(5, 3)) + np.eye(5, 3) * 3
    return [
        rulekit.example(tall, rng.normal(size=5)),
        rulekit.example(tall, rng.normal(size=(5, 2))),
        rulekit.example(wellcond(rng, (3, 3)), rng.normal(size=3)),  # square: no residuals
        rulekit.example(tall.T.copy(), rng.normal(size=3)),  # wide: minimum-norm solution
    ]


@rulekit.rrule.register(
    np.linalg.lstsq, Array[np.inexact, 2], Array[np.number], Vararg[Any], examples=_lstsq_examples
)
def lstsq_rrule(f: CoDual, a: CoDual, b: CoDual, *rest: CoDual, **kwargs: Any) -> Any:
    """(x, res, rank, s) = lstsq(A, b), A of full rank; x = A⁺b, res = ‖b − Ax‖², s = σ(A).

    x: b̄ += A⁺ᵀ x̄, Ā += pinv adjoint with Ȳ = x̄ bᵀ. res (tall A): r = b − Ax ⇒
    b̄ += 2 r·res̄, Ā += −2 r·res̄ xᵀ. s: Ā += U diag(s̄) Vᵀ. rank: not differentiable.
    """
    res = np.linalg.lstsq(a.x, b.x, *[primal(r) for r in rest], **kwargs)
    out = new_output(res)

    def pullback(dy: Any) -> tuple[Any, ...]:
        nr = (NO_R, NO_R, NO_R, *map(zero_rdata_of, rest))
        if array_fdata(a) is None and array_fdata(b) is None:
            return nr
        A, B = a.x, b.x
        x, resid, rank, _ = res
        m, n = A.shape
        if rank < min(m, n):
            raise np.linalg.LinAlgError(
                f"lstsq: A has rank {rank} < {min(m, n)}; the rule differentiates full-rank "
                "least squares only."
            )
        xb, rb, sb = out.dx[0], out.dx[1], out.dx[3]
        vec = B.ndim == 1
        Bm, Xm, Xbm = (B[:, None], x[:, None], xb[:, None]) if vec else (B, x, xb)
        u, s, vh = np.linalg.svd(A, full_matrices=False)
        P = mH(vh) @ (mH(u) / s[:, None])
        gb = mH(P) @ Xbm
        ga = _pinv_bar(A, P, Xbm @ mH(Bm))
        if resid.size:
            r = Bm - A @ Xm
            gr = 2 * r * rb[None, :]
            gb = gb + gr
            ga = ga - gr @ mH(Xm)
        ga = ga + (u * sb) @ vh
        accumulate(b, gb[:, 0] if vec else gb)
        accumulate(a, ga)
        return nr

    return out, pullback
