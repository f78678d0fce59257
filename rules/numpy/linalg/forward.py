"""Forward rules and differentiable pullbacks for numpy.linalg: solve, inv, det, slogdet,
cholesky, pinv, lstsq (the decompositions are in `forward_decomp`, norm, matrix_power and
multi_dot in `forward_products`, both imported at the bottom).

Each rule body is plain NumPy on its (possibly traced) arguments, so it is differentiated
again by an enclosing transformation. Matrices are the last two axes (stacks broadcast as
in numpy); for complex inputs every ᵀ is ᴴ. Registered on the reverse rules' patterns and
examples (`register_like`); import after `rules.numpy.linalg.basic`/`decomp`/`products`.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Dual
from rules._support.forward import register_like
from rules._support.linalg import adjugate_H
from rules.numpy.linalg.forward_support import (
    diag,
    eye,
    fold,
    inexact,
    cplx,
    like,
    mH,
    mv,
    outer_h,
    sym_from,
    tangent,
    tangent_like,
    tri_solve,
)

__all__ = ["adj_h", "chol_cotangent", "chol_tangent", "pinv_bar", "pinv_dot"]


def _solve_vec(A: Any, b: Any) -> Any:
    """A⁻¹b for a (stack of) vector(s) b of A's batch shape."""
    return np.linalg.solve(A, b[..., None])[..., 0]


# -- solve, inv ---------------------------------------------------------------------------------


def solve_frule(f: Dual, a: Dual, b: Dual) -> Dual:
    """x = A⁻¹b ⇒ ẋ = A⁻¹(ḃ − Ȧx) (b a vector or a stack of matrices, as numpy)."""
    x = np.linalg.solve(a.x, b.x)
    da, db = tangent(a), tangent(b)
    if da is None and db is None:
        return Dual(x, None)
    vec = np.ndim(b.x) == 1
    r = 0 if db is None else db
    if da is not None:
        r = r - (mv(da, x) if vec else da @ x)
    r = np.zeros(np.shape(x), x.dtype) + r
    return Dual(x, tangent_like(_solve_vec(a.x, r) if vec else np.linalg.solve(a.x, r), x))


def solve_vjp(active: Sequence[bool], A: Any, b: Any) -> tuple[Any, Any]:
    """b̄ = A⁻ᴴx̄, Ā = −b̄xᴴ (summed over broadcast stack axes)."""
    x = np.linalg.solve(A, b)
    vec = np.ndim(b) == 1

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None:
            return (None, None)
        bb = _solve_vec(mH(A), g) if vec else np.linalg.solve(mH(A), g)
        ga = -(outer_h(bb, x) if vec else bb @ mH(x))
        return (
            like(ga, A) if active[0] and inexact(A) else None,
            like(bb, b) if active[1] and inexact(b) else None,
        )

    return x, pullback


def inv_frule(f: Dual, a: Dual) -> Dual:
    """Y = A⁻¹ ⇒ Ẏ = −Y Ȧ Y."""
    y = np.linalg.inv(a.x)
    da = tangent(a)
    return Dual(y, None if da is None else -(y @ da @ y))


def inv_vjp(active: Sequence[bool], A: Any) -> tuple[Any, Any]:
    """Ā = −Yᴴ Ȳ Yᴴ."""
    y = np.linalg.inv(A)
    return y, lambda g: (None if g is None else like(-(mH(y) @ g @ mH(y)), A),)


# -- det, slogdet -------------------------------------------------------------------------------


def _bcast(w: Any) -> Any:
    """A (stack of) scalar(s) with two trailing unit axes, to scale matrices."""
    return w if np.ndim(w) == 0 else w[..., None, None]


def _tr_inv_dot(A: Any, dA: Any) -> Any:
    """tr(A⁻¹ Ȧ) per matrix."""
    return np.sum(diag(np.linalg.solve(A, dA)), axis=-1)


def adj_h(A: Any, d: Any) -> Any:
    """adj(A)ᴴ = conj(d)·A⁻ᴴ. On a plain (untraced) A that is singular to working precision
    the cofactor matrix is computed from the SVD instead (exact there, as the reverse rule);
    traced values always take conj(d)·A⁻ᴴ (a traced singular A raises LinAlgError)."""
    if isinstance(A, np.ndarray) and A.shape[-1] > 0:
        s = np.linalg.svd(A, compute_uv=False)
        if np.any(s[..., -1] <= A.shape[-1] * np.finfo(s.dtype).eps * s[..., 0]):
            return adjugate_H(A)
    return _bcast(np.conj(d)) * mH(np.linalg.inv(A))


def det_frule(f: Dual, a: Dual) -> Dual:
    """d = det A ⇒ ḋ = tr(adj(A) Ȧ) = d · tr(A⁻¹Ȧ)."""
    d = np.linalg.det(a.x)
    da = tangent(a)
    if da is None:
        return Dual(d, None)
    t = np.sum(np.conj(adj_h(a.x, d)) * da, axis=(-2, -1))
    return Dual(d, tangent_like(t, d))


def det_vjp(active: Sequence[bool], A: Any) -> tuple[Any, Any]:
    """Ā = d̄ · adj(A)ᴴ = d̄ · conj(d) · A⁻ᴴ."""
    d = np.linalg.det(A)

    def pullback(g: Any) -> tuple[Any, ...]:
        return (None,) if g is None else (like(_bcast(g) * adj_h(A, d), A),)

    return d, pullback


def slogdet_frule(f: Dual, a: Dual) -> Dual:
    """(s, l) = slogdet A, t = tr(A⁻¹Ȧ) ⇒ l̇ = Re t; ṡ = 0 (real), ṡ = i·s·Im t (complex)."""
    res = np.linalg.slogdet(a.x)
    s, logdet = res
    da = tangent(a)
    if da is None:
        return Dual(res, None)
    t = _tr_inv_dot(a.x, da)
    dl = tangent_like(np.real(t), logdet)
    ds = s * (1j * np.imag(t)) if cplx(s) else np.zeros(np.shape(s), s.dtype)
    return Dual(res, (tangent_like(ds, s), dl))


def slogdet_vjp(active: Sequence[bool], A: Any) -> tuple[Any, Any]:
    """Ā = w · A⁻ᴴ, w = l̄ + i·Re(i·conj(s̄)·s) (the sign's term only for complex A)."""
    res = np.linalg.slogdet(A)
    s = res[0]

    def pullback(g: Any) -> tuple[Any, ...]:
        sb, lb = (None, None) if g is None else g
        w: Any = None
        if lb is not None:
            w = lb
        if sb is not None and cplx(A):
            ws = 1j * np.real(1j * np.conj(sb) * s)
            w = ws if w is None else w + ws
        if w is None:
            return (None,)
        return (like(_bcast(w) * mH(np.linalg.inv(A)), A),)

    return res, pullback


# -- cholesky ------------------------------------------------------------------------------------


def chol_tangent(L: Any, dS: Any) -> Any:
    """L̇ = L Φ(L⁻¹ Ṡ L⁻ᴴ) for A = LLᴴ and Hermitian Ṡ; Φ: lower triangle, half diagonal."""
    X = tri_solve(L, mH(tri_solve(L, dS, True)), True)  # L⁻¹ (L⁻¹ Ṡ)ᴴ = L⁻¹ Ṡ L⁻ᴴ
    n = X.shape[-1]
    phi = np.tril(X, -1) + 0.5 * np.real(X) * eye(n, X)
    return L @ phi


def chol_cotangent(L: Any, Lb: Any) -> Any:
    """X = L⁻ᴴ Φ(Lᴴ L̄) L⁻¹ (Murray 2016), the cotangent for Hermitian Ṡ; fold it onto the
    triangle read. (The adjoint of `chol_tangent` with Φ's diagonal taken real.)"""
    P = mH(L) @ Lb
    n = P.shape[-1]
    P = np.tril(P, -1) + 0.5 * np.real(P) * eye(n, P)
    Y = tri_solve(L, P, True, trans=2)  # L⁻ᴴ P
    return mH(tri_solve(L, mH(Y), True, trans=2))  # (L⁻ᴴ (L⁻ᴴ P)ᴴ)ᴴ = L⁻ᴴ P L⁻¹


def cholesky_frule(f: Dual, a: Dual, *, upper: bool = False) -> Dual:
    """L = chol(A) reads tril(A) (upper=True: U = Lᴴ, reads triu(A)):
    L̇ = L Φ(L⁻¹ Ṡ L⁻ᴴ), Ṡ = the Hermitian matrix read from Ȧ's triangle."""
    y = np.linalg.cholesky(a.x, upper=upper)
    da = tangent(a)
    if da is None:
        return Dual(y, None)
    L = mH(y) if upper else y
    dL = chol_tangent(L, sym_from(da, not upper))
    return Dual(y, mH(dL) if upper else dL)


def cholesky_vjp(active: Sequence[bool], A: Any, *, upper: bool = False) -> tuple[Any, Any]:
    """Ā = fold(L⁻ᴴ Φ(Lᴴ L̄) L⁻¹) onto the triangle read."""
    y = np.linalg.cholesky(A, upper=upper)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None:
            return (None,)
        X = chol_cotangent(mH(y), mH(g)) if upper else chol_cotangent(y, g)
        return (like(fold(X, not upper), A),)

    return y, pullback


# -- pinv, lstsq ----------------------------------------------------------------------------------


def pinv_dot(A: Any, P: Any, dA: Any) -> Any:
    """d(A⁺) = −PȦP + PPᴴȦᴴ(I − AP) + (I − PA)ȦᴴPᴴP (constant rank; Golub–Pereyra)."""
    dAh = mH(dA)
    t = -(P @ dA @ P)
    t = t + (P @ mH(P)) @ (dAh - (dAh @ A) @ P)
    return t + (dAh - P @ (A @ dAh)) @ (mH(P) @ P)


def pinv_bar(A: Any, P: Any, Yb: Any) -> Any:
    """The adjoint of `pinv_dot`: −PᴴȲPᴴ + (I − AP)ȲᴴPPᴴ + PᴴPȲᴴ(I − PA)."""
    Ph, Ybh = mH(P), mH(Yb)
    g = -(Ph @ Yb @ Ph)
    g = g + (Ybh - A @ (P @ Ybh)) @ (P @ Ph)
    return g + (Ph @ P) @ (Ybh - (Ybh @ P) @ A)


_PINV = inspect.signature(np.linalg.pinv)


def _hermitian(rest: Sequence[Any], kw: dict[str, Any]) -> bool:
    ba = _PINV.bind(None, *rest, **kw)
    ba.apply_defaults()
    return bool(ba.arguments["hermitian"])


def pinv_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """Y = A⁺ ⇒ Ẏ = −YȦY + YYᴴȦᴴ(I − AY) + (I − YA)ȦᴴYᴴY (where the rank is locally
    constant). hermitian=True reads tril(A): Ȧ is replaced by the Hermitian Ṡ read."""
    rx = [r.x for r in rest]
    y = np.linalg.pinv(a.x, *rx, **kw)
    da = tangent(a)
    if da is None:
        return Dual(y, None)
    if _hermitian(rx, kw):
        return Dual(y, pinv_dot(sym_from(a.x, True), y, sym_from(da, True)))
    return Dual(y, pinv_dot(a.x, y, da))


def pinv_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Ā = −YᴴȲYᴴ + (I − AY)ȲᴴYYᴴ + YᴴYȲᴴ(I − YA) (folded onto tril(A) if hermitian)."""
    y = np.linalg.pinv(A, *rest, **kw)
    herm = _hermitian(rest, kw)

    def pullback(g: Any) -> tuple[Any, ...]:
        none = (None,) * len(rest)
        if g is None:
            return (None, *none)
        if herm:
            return (like(fold(pinv_bar(sym_from(A, True), y, g), True), A), *none)
        return (like(pinv_bar(A, y, g), A), *none)

    return y, pullback


def _full_rank(rank: Any, A: Any) -> None:
    if isinstance(rank, (int, np.integer, np.ndarray)) and int(rank) < min(A.shape[-2:]):
        raise np.linalg.LinAlgError(
            f"lstsq: A has rank {int(rank)} < {min(A.shape[-2:])}; the rule differentiates "
            "full-rank least squares only."
        )


def lstsq_frule(f: Dual, a: Dual, b: Dual, *rest: Dual, **kw: Any) -> Dual:
    """(x, res, rank, s) = lstsq(A, b), A of full rank, P = A⁺, r = b − Ax:
    ẋ = P(ḃ − Ȧx) + PPᴴȦᴴr + (I − PA)ȦᴴPᴴx; rės = 2 Re Σ conj(r)(ḃ − Ȧx) (tall A);
    ṡ = Re diag(UᴴȦV); rank: no tangent."""
    A, B = a.x, b.x
    res = np.linalg.lstsq(A, B, *[r.x for r in rest], **kw)
    x, resid, rank, s = res
    da, db = tangent(a), tangent(b)
    if da is None and db is None:
        return Dual(res, None)
    _full_rank(rank, A)
    vec = np.ndim(B) == 1
    Bm, Xm = (B[:, None], x[:, None]) if vec else (B, x)
    P = np.linalg.pinv(A)
    e = np.zeros((A.shape[0], Xm.shape[-1]), x.dtype)  # ḃ − Ȧx
    if db is not None:
        e = e + (db[:, None] if vec else db)
    m, n = A.shape
    if da is not None:
        e = e - da @ Xm
    dx = P @ e
    if da is not None:
        if m > n:
            dx = dx + (P @ mH(P)) @ (mH(da) @ (Bm - A @ Xm))
        if n > m:
            z = mH(da) @ (mH(P) @ Xm)
            dx = dx + z - P @ (A @ z)
    dres = None
    if int(np.prod(np.shape(resid))) > 0:
        r = Bm - A @ Xm
        dres = tangent_like(2 * np.sum(np.real(np.conj(r) * e), axis=0), resid)
    ds = None
    if da is not None:
        u, _, vh = np.linalg.svd(A, full_matrices=False)
        ds = tangent_like(np.real(diag(mH(u) @ da @ mH(vh))), s)
    else:
        ds = np.zeros(np.shape(s), s.dtype)
    if dres is None:
        dres = np.zeros(np.shape(resid), resid.dtype)
    dx = tangent_like(dx[:, 0] if vec else dx, x)
    return Dual(res, (dx, dres, None, ds))


def lstsq_vjp(active: Sequence[bool], A: Any, B: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """x̄ ⇒ b̄ = Pᴴx̄, Ā = −b̄xᴴ + r(PPᴴx̄)ᴴ + (Pᴴx)((I − PA)x̄)ᴴ; rės̄ ⇒ b̄ += 2r·rės̄,
    Ā −= 2r·rės̄ xᴴ; s̄ ⇒ Ā += U diag(s̄) Vᴴ."""
    res = np.linalg.lstsq(A, B, *rest, **kw)
    x, resid, rank, _ = res

    def pullback(g: Any) -> tuple[Any, ...]:
        xb, rb, _, sb = (None,) * 4 if g is None else g
        none = (None,) * len(rest)
        if xb is None and rb is None and sb is None:
            return (None, None, *none)
        _full_rank(rank, A)
        vec = np.ndim(B) == 1
        Bm, Xm = (B[:, None], x[:, None]) if vec else (B, x)
        r = Bm - A @ Xm
        gb: Any = 0
        ga: Any = 0
        if xb is not None:
            Xb = xb[:, None] if vec else xb
            P = np.linalg.pinv(A)
            gb = mH(P) @ Xb
            ga = -(gb @ mH(Xm))
            if A.shape[0] > A.shape[1]:
                ga = ga + r @ mH(P @ (mH(P) @ Xb))
            if A.shape[1] > A.shape[0]:
                ga = ga + (mH(P) @ Xm) @ mH(Xb - P @ (A @ Xb))
        if rb is not None and int(np.prod(np.shape(resid))) > 0:
            gr = 2 * r * rb
            gb = gb + gr
            ga = ga - gr @ mH(Xm)
        if sb is not None:
            u, _, vh = np.linalg.svd(A, full_matrices=False)
            ga = ga + (u * sb) @ vh
        gbv = None
        if active[1] and not isinstance(gb, int):
            gbv = like(gb[:, 0] if vec else gb, B)
        gav = like(ga, A) if active[0] and not isinstance(ga, int) else None
        return (gav, gbv, *none)

    return res, pullback


register_like(np.linalg.solve, frule=solve_frule, vjp=solve_vjp)
register_like(np.linalg.inv, frule=inv_frule, vjp=inv_vjp)
register_like(np.linalg.det, frule=det_frule, vjp=det_vjp)
register_like(np.linalg.slogdet, frule=slogdet_frule, vjp=slogdet_vjp)
register_like(np.linalg.cholesky, frule=cholesky_frule, vjp=cholesky_vjp)
register_like(np.linalg.pinv, frule=pinv_frule, vjp=pinv_vjp)
register_like(np.linalg.lstsq, frule=lstsq_frule, vjp=lstsq_vjp)

# ruff: noqa: E402, I001  (registration order: the basic rules above first)
from rules.numpy.linalg import forward_decomp as forward_decomp
from rules.numpy.linalg import forward_products as forward_products
