"""Forward rules and differentiable pullbacks for the numpy.linalg decompositions: qr, eigh,
eigvalsh, svd, svdvals (imported by `rules.numpy.linalg.forward`).

Symmetric/Hermitian routines read one triangle: the tangent is first replaced by the
Hermitian matrix read (`sym_from`), the cotangent folded onto that triangle (`fold`).
At (near-)repeated eigen/singular values a vector (co)tangent that needs 1/(λᵢ − λⱼ) is NaN
(on plain arrays the pullbacks raise `DegenerateSpectrumError`, as the reverse rules do).
Complex eigen/singular vectors are fixed up to phases: the tangents take the gauge
Im diag(Vᴴ V̇) = 0; cotangents are meaningful for phase-invariant functions.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Dual
from rules._support.forward import register_like
from rules._support.linalg import check_gauge
from rules.numpy.linalg.forward_support import (
    check_degenerate,
    cplx,
    diag,
    diag_matrix,
    fold,
    gap_divide,
    like,
    mH,
    real_diag_matrix,
    right_solve_h,
    sym_from,
    tangent,
    tangent_like,
    tri_solve,
)

__all__: list[str] = []


def _bind(fn: Any, args: Sequence[Any], kw: dict[str, Any]) -> dict[str, Any]:
    ba = inspect.signature(fn).bind(None, *args, **kw)
    ba.apply_defaults()
    return dict(ba.arguments)


def _zeros(x: Any) -> np.ndarray:
    return np.zeros(np.shape(x), x.dtype)


# -- qr -------------------------------------------------------------------------------------------


def _qr_mode(A: Any, rest: Sequence[Any], kw: dict[str, Any]) -> str:
    mode = _bind(np.linalg.qr, rest, kw)["mode"]
    m, n = A.shape[-2:]
    if mode not in ("reduced", "r", "complete") or (mode == "complete" and m > n):
        raise NotImplementedError(
            f"np.linalg.qr(mode={mode!r}) of a {m}×{n} matrix has no forward/nested rule: the "
            "extra columns of a complete Q are not unique; use mode='reduced'."
        )
    return str(mode)


def _qr_square_dot(Q: Any, R: Any, dA: Any) -> tuple[Any, Any]:
    """A = QR, R square (m ≥ n): C = Qᴴ Ȧ R⁻¹, Ω = tril(C, −1) − tril(C, −1)ᴴ + i Im diag C,
    Q̇ = Q(Ω − C) + ȦR⁻¹, Ṙ = (C − Ω) R."""
    dAr = mH(tri_solve(R, mH(dA), False, trans=2))  # Ȧ R⁻¹
    C = mH(Q) @ dAr
    low = np.tril(C, -1)
    om = low - mH(low)
    if cplx(C):
        om = om + diag_matrix(1j * np.imag(diag(C)))
    return Q @ (om - C) + dAr, (C - om) @ R


def _qr_dot(A: Any, Q: Any, R: Any, dA: Any) -> tuple[Any, Any]:
    """Wide A = [X | Y] (m < n), R = [U | V]: (Q̇, U̇) from X, V̇ = Q̇ᴴY + QᴴẎ."""
    m, n = A.shape[-2:]
    if m >= n:
        return _qr_square_dot(Q, R, dA)
    dQ, dU = _qr_square_dot(Q, R[..., :m], dA[..., :m])
    dV = mH(dQ) @ A[..., m:] + mH(Q) @ dA[..., m:]
    return dQ, np.concatenate([dU, dV], axis=-1)


def qr_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """(Q, R) = qr(A), A of full rank (modes 'reduced', 'r'; 'complete' when m ≤ n); see
    `_qr_square_dot` for the tangents (JAX's rule, extended to wide A)."""
    A = a.x
    mode = _qr_mode(A, [r.x for r in rest], kw)
    res = np.linalg.qr(A, mode)  # type: ignore[call-overload]
    Q, R = np.linalg.qr(A) if mode == "r" else res
    da = tangent(a)
    if da is None:
        return Dual(res, None)
    dQ, dR = _qr_dot(A, Q, R, da)
    if mode == "r":
        return Dual(res, dR)
    return Dual(res, (dQ, dR))


def _qr_square_bar(Q: Any, R: Any, Qb: Any, Rb: Any) -> Any:
    """M = QᴴQ̄ − R̄Rᴴ, Ā = (Q̄ − Q·(triu(M, 1) + triu(M, 1)ᴴ + Re diag M)) R⁻ᴴ."""
    M = mH(Q) @ Qb - Rb @ mH(R)
    up = np.triu(M, 1)
    return right_solve_h(Qb - Q @ (up + mH(up) + real_diag_matrix(M)), R, False)


def _qr_bar(A: Any, Q: Any, R: Any, Qb: Any, Rb: Any) -> Any:
    """Wide A = [X | Y]: Ȳ = Q V̄, X̄ from the square case with Q̄ + Y V̄ᴴ."""
    Qb = _zeros(Q) if Qb is None else Qb
    Rb = _zeros(R) if Rb is None else Rb
    m, n = A.shape[-2:]
    if m >= n:
        return _qr_square_bar(Q, R, Qb, Rb)
    Y, Vb = A[..., m:], Rb[..., m:]
    Xb = _qr_square_bar(Q, R[..., :m], Qb + Y @ mH(Vb), Rb[..., :m])
    return np.concatenate([Xb, Q @ Vb], axis=-1)


def qr_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Ā = (Q̄ − Q·sym_upper(QᴴQ̄ − R̄Rᴴ)) R⁻ᴴ (square/tall); wide: see `_qr_bar`."""
    mode = _qr_mode(A, rest, kw)
    res = np.linalg.qr(A, mode)  # type: ignore[call-overload]
    Q, R = np.linalg.qr(A) if mode == "r" else res

    def pullback(g: Any) -> tuple[Any, ...]:
        none = (None,) * len(rest)
        Qb, Rb = (None, g) if mode == "r" else ((None, None) if g is None else g)
        if Qb is None and Rb is None:
            return (None, *none)
        return (like(_qr_bar(A, Q, R, Qb, Rb), A), *none)

    return res, pullback


# -- eigh, eigvalsh --------------------------------------------------------------------------------


def _lower(rest: Sequence[Any], kw: dict[str, Any]) -> bool:
    return str(_bind(np.linalg.eigh, rest, kw)["UPLO"]).upper() == "L"


def eigh_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """(w, V) = eigh(A), M = Vᴴ Ṡ V (Ṡ read from the UPLO triangle of Ȧ):
    ẇ = Re diag M, V̇ = V (F∘M), Fᵢⱼ = 1/(wⱼ − wᵢ) (0 on the diagonal)."""
    rx = [r.x for r in rest]
    res = np.linalg.eigh(a.x, *rx, **kw)
    da = tangent(a)
    if da is None:
        return Dual(res, None)
    w, V = res
    M = mH(V) @ sym_from(da, _lower(rx, kw)) @ V
    dV = V @ gap_divide(M, w[..., None, :] - w[..., :, None], w)
    return Dual(res, (tangent_like(np.real(diag(M)), w), dV))


def eigh_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Ā = fold(V (diag(w̄) + F∘(VᴴV̄ − V̄ᴴV)/2) Vᴴ) onto the UPLO triangle."""
    res = np.linalg.eigh(A, *rest, **kw)
    w, V = res
    lower = _lower(rest, kw)

    def pullback(g: Any) -> tuple[Any, ...]:
        none = (None,) * len(rest)
        wb, Vb = (None, None) if g is None else g
        if wb is None and Vb is None:
            return (None, *none)
        inner: Any = 0
        if Vb is not None:
            G = mH(V) @ Vb
            if cplx(A) and isinstance(G, np.ndarray):
                check_gauge(np.imag(diag(G)), G, "np.linalg.eigh")
            num, den = (G - mH(G)) / 2, w[..., None, :] - w[..., :, None]
            check_degenerate(num, den, w, "np.linalg.eigh")
            inner = gap_divide(num, den, w)
        if wb is not None:
            inner = inner + diag_matrix(wb)
        return (like(fold(V @ inner @ mH(V), lower), A), *none)

    return res, pullback


def eigvalsh_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """ẇ = Re diag(Vᴴ Ṡ V) (V from eigh; finite at repeated eigenvalues)."""
    rx = [r.x for r in rest]
    w = np.linalg.eigvalsh(a.x, *rx, **kw)
    da = tangent(a)
    if da is None:
        return Dual(w, None)
    lower = _lower(rx, kw)
    V = np.linalg.eigh(a.x, "L" if lower else "U")[1]
    dw = np.real(np.sum(np.conj(V) * (sym_from(da, lower) @ V), axis=-2))
    return Dual(w, tangent_like(dw, w))


def eigvalsh_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Ā = fold(V diag(w̄) Vᴴ)."""
    w = np.linalg.eigvalsh(A, *rest, **kw)
    lower = _lower(rest, kw)

    def pullback(g: Any) -> tuple[Any, ...]:
        none = (None,) * len(rest)
        if g is None:
            return (None, *none)
        V = np.linalg.eigh(A, "L" if lower else "U")[1]
        return (like(fold((V * g[..., None, :]) @ mH(V), lower), A), *none)

    return w, pullback


# -- svd, svdvals ----------------------------------------------------------------------------------


def _svd_opts(A: Any, rest: Sequence[Any], kw: dict[str, Any]) -> tuple[bool, bool]:
    o = _bind(np.linalg.svd, rest, kw)
    fm, uv = bool(o["full_matrices"]), bool(o["compute_uv"])
    if bool(o["hermitian"]):
        raise NotImplementedError(
            "np.linalg.svd(hermitian=True) has no forward/nested rule: use np.linalg.eigh."
        )
    m, n = A.shape[-2:]
    if uv and fm and m != n:
        raise NotImplementedError(
            "np.linalg.svd(full_matrices=True) of a non-square matrix: the extra singular "
            "vectors are not unique and have no derivative; pass full_matrices=False."
        )
    return fm, uv


def _f_times(X: Any, s: Any) -> Any:
    """F∘X, Fᵢⱼ = 1/(sⱼ² − sᵢ²) off the diagonal (NaN where sⱼ = sᵢ and Xᵢⱼ ≠ 0)."""
    si, sj = s[..., :, None], s[..., None, :]
    tot = si + sj
    return gap_divide(X / np.where(tot == 0, 1, tot), sj - si, s)


def _svals_dot(A: Any, dA: Any) -> Any:
    u, _, vh = np.linalg.svd(A, full_matrices=False)
    return np.real(diag(mH(u) @ dA @ mH(vh)))


def _svd_dot(A: Any, U: Any, s: Any, Vh: Any, dA: Any) -> tuple[Any, Any, Any]:
    """dS = Uᴴ Ȧ V ⇒ ṡ = Re diag dS, U̇ = U(F∘(dS S + S dSᴴ) + i Im diag(dS)/S)
    + (I − UUᴴ)ȦVS⁻¹, V̇ = V(F∘(S dS + dSᴴ S)) + (I − VVᴴ)ȦᴴUS⁻¹ (JAX's rule)."""
    V = mH(Vh)
    dS = mH(U) @ dA @ V
    ds = np.real(diag(dS))
    sj, si = s[..., None, :], s[..., :, None]
    dSS = dS * sj
    SdS = si * dS
    inner_u = _f_times(dSS + mH(dSS), s)
    if cplx(dS):
        inner_u = inner_u + diag_matrix(1j * np.imag(diag(dS)) / s)
    dU = U @ inner_u
    dV = V @ _f_times(SdS + mH(SdS), s)
    m, n = A.shape[-2:]
    if m > n:
        dAV = dA @ V
        dU = dU + (dAV - U @ (mH(U) @ dAV)) / sj
    if n > m:
        dAhU = mH(dA) @ U
        dV = dV + (dAhU - V @ (Vh @ dAhU)) / sj
    return tangent_like(ds, s), dU, mH(dV)


def svd_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """(U, s, Vh) = svd(A), reduced (or square); compute_uv=False: ṡ = Re diag(UᴴȦV).
    See `_svd_dot`."""
    A = a.x
    fm, uv = _svd_opts(A, [r.x for r in rest], kw)
    da = tangent(a)
    if not uv:
        s = np.linalg.svd(A, compute_uv=False)
        return Dual(s, None if da is None else tangent_like(_svals_dot(A, da), s))
    res = np.linalg.svd(A, full_matrices=fm)
    if da is None:
        return Dual(res, None)
    U, s, Vh = res
    ds, dU, dVh = _svd_dot(A, U, s, Vh, da)
    return Dual(res, (dU, ds, dVh))


def _svd_gauge(U: Any, Vh: Any, Ub: Any, Vhb: Any) -> None:
    """On plain complex arrays: the cotangent must not depend on the pairs' phases,
    Im diag(UᴴŪ + VᴴV̄) = 0 (else GaugeDependentError, as the reverse rule)."""
    plain = all(isinstance(v, np.ndarray) or v is None for v in (U, Vh, Ub, Vhb))
    if not (plain and cplx(U)) or (Ub is None and Vhb is None):
        return
    im = np.zeros(U.shape[:-2] + U.shape[-1:])
    if Ub is not None:
        im = im + np.imag(np.sum(np.conj(U) * Ub, axis=-2))
    if Vhb is not None:
        im = im - np.imag(np.sum(np.conj(Vh) * Vhb, axis=-1))
    check_gauge(im, np.abs(U).max() + np.abs(Ub if Ub is not None else Vhb).max(), "np.linalg.svd")


def _svd_bar(A: Any, U: Any, s: Any, Vh: Any, Ub: Any, sb: Any, Vhb: Any) -> Any:
    """The adjoint of `_svd_dot`: Ā = U G Vᴴ + (I − UUᴴ)ŪS⁻¹Vᴴ + US⁻¹V̄ᴴ(I − VVᴴ),
    G = diag(s̄) + (F∘(UᴴŪ − ŪᴴU))S + S(F∘(VᴴV̄ − V̄ᴴV)) + i Im diag(UᴴŪ)/S (Townsend)."""
    m, n = A.shape[-2:]
    sj, si = s[..., None, :], s[..., :, None]
    G: Any = 0 if sb is None else diag_matrix(sb)
    _svd_gauge(U, Vh, Ub, Vhb)
    if Ub is not None:
        ua = mH(U) @ Ub
        num = ua - mH(ua)
        check_degenerate(num * sj, sj - si, s, "np.linalg.svd")
        G = G + _f_times(num, s) * sj
        if cplx(ua):
            G = G + diag_matrix(1j * np.imag(diag(ua)) / s)
    if Vhb is not None:
        vb = Vh @ mH(Vhb)
        num = vb - mH(vb)
        check_degenerate(si * num, sj - si, s, "np.linalg.svd")
        G = G + si * _f_times(num, s)
    g = U @ G @ Vh if not isinstance(G, int) else 0
    if m > n and Ub is not None:
        g = g + ((Ub - U @ (mH(U) @ Ub)) / sj) @ Vh
    if n > m and Vhb is not None:
        Vb = mH(Vhb)
        g = g + (U / sj) @ mH(Vb - mH(Vh) @ (Vh @ Vb))
    return g


def svd_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """compute_uv=False: Ā = U diag(s̄) Vᴴ; else `_svd_bar`."""
    fm, uv = _svd_opts(A, rest, kw)
    none = (None,) * len(rest)
    if not uv:
        return _svals_vjp(np.linalg.svd(A, compute_uv=False), A, none)
    res = np.linalg.svd(A, full_matrices=fm)
    U, s, Vh = res

    def pullback(g: Any) -> tuple[Any, ...]:
        Ub, sb, Vhb = (None, None, None) if g is None else g
        if Ub is None and sb is None and Vhb is None:
            return (None, *none)
        return (like(_svd_bar(A, U, s, Vh, Ub, sb, Vhb), A), *none)

    return res, pullback


def _svals_vjp(s: Any, A: Any, none: tuple[None, ...]) -> tuple[Any, Any]:
    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None:
            return (None, *none)
        u, _, vh = np.linalg.svd(A, full_matrices=False)
        return (like((u * g[..., None, :]) @ vh, A), *none)

    return s, pullback


def svdvals_frule(f: Dual, a: Dual) -> Dual:
    """ṡ = Re diag(Uᴴ Ȧ V)."""
    s = np.linalg.svdvals(a.x)
    da = tangent(a)
    return Dual(s, None if da is None else tangent_like(_svals_dot(a.x, da), s))


def svdvals_vjp(active: Sequence[bool], A: Any) -> tuple[Any, Any]:
    """Ā = U diag(s̄) Vᴴ."""
    return _svals_vjp(np.linalg.svdvals(A), A, ())


register_like(np.linalg.qr, frule=qr_frule, vjp=qr_vjp)
register_like(np.linalg.eigh, frule=eigh_frule, vjp=eigh_vjp)
register_like(np.linalg.eigvalsh, frule=eigvalsh_frule, vjp=eigvalsh_vjp)
register_like(np.linalg.svd, frule=svd_frule, vjp=svd_vjp)
if hasattr(np.linalg, "svdvals"):
    register_like(np.linalg.svdvals, frule=svdvals_frule, vjp=svdvals_vjp)
