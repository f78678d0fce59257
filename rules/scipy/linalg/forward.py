"""Forward rules and differentiable pullbacks for scipy.linalg: solve_triangular, cholesky,
cho_factor → cho_solve, inv, solve, det (lu_factor → lu_solve, expm, logm, sqrtm and
solve_sylvester are in `forward_functions`, imported at the bottom).

Registered on the `rulekit.primitive` wrappers of `rules.scipy.linalg` (the names plain scipy
calls are routed to), on the reverse rules' patterns and examples. Rule bodies call only
those wrappers and NumPy, so they are differentiated again by an enclosing transformation.
Routines that read part of A (a triangle, a band, `assume_a`) see only that part of Ȧ, and
their cotangents are restricted to it.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg as sl

from rulekit import Dual
from rules._support.forward import register_like
from rules.numpy.linalg.forward import adj_h, chol_cotangent, chol_tangent
from rules.numpy.linalg.forward_support import (
    cplx,
    fold,
    inexact,
    like,
    mH,
    mT,
    mv,
    outer_h,
    sym_from,
    tangent,
    tangent_like,
)
from rules.scipy.linalg import basic as w

__all__ = ["bind", "safe", "structured", "structured_bar"]


def bind(fn: Any, args: Sequence[Any], kw: dict[str, Any]) -> dict[str, Any]:
    """scipy's parameters of `fn` for this call, defaults filled in."""
    ba = inspect.signature(fn).bind(*args, **kw)
    ba.apply_defaults()
    return dict(ba.arguments)


def safe(kw: dict[str, Any]) -> dict[str, Any]:
    """The keywords without scipy's overwrite_* permissions: a rule never lets scipy write
    into an argument (its value is read again for the tangent/cotangent)."""
    return {k: v for k, v in kw.items() if not k.startswith("overwrite_")}


def _kind(assume_a: Any) -> Any:
    names = {"gen": "general", "symmetric": "sym", "hermitian": "her", "positive definite": "pos"}
    return names.get(assume_a, assume_a)


def structured(dA: Any, assume_a: Any, lower: bool) -> Any:
    """The part of Ȧ that scipy reads for `assume_a`, as a full matrix (applied to A itself:
    the matrix scipy works with)."""
    kind = _kind(assume_a)
    if kind in (None, "general", "banded"):
        return dA
    if kind in ("her", "pos") or (kind == "sym" and not cplx(dA)):
        return sym_from(dA, lower)
    if kind == "sym":  # complex symmetric: tril(Ȧ, −1) + tril(Ȧ, −1)ᵀ + diag(Ȧ)
        T = np.tril(dA, -1) if lower else np.triu(dA, 1)
        return T + mT(T) + dA * np.eye(dA.shape[-1], dtype=bool)
    if kind in ("upper triangular", "lower triangular"):
        return np.triu(dA) if kind.startswith("upper") else np.tril(dA)
    if kind == "diagonal":
        return dA * np.eye(dA.shape[-1], dtype=bool)
    if kind == "tridiagonal":
        return np.triu(np.tril(dA, 1), -1)
    raise NotImplementedError(f"rules.scipy.linalg: assume_a={assume_a!r} has no forward rule")


def structured_bar(G: Any, assume_a: Any, lower: bool, complex_: bool) -> Any:
    """The adjoint of `structured`: a full-matrix cotangent restricted to what is read."""
    kind = _kind(assume_a)
    if kind in ("her", "pos") or (kind == "sym" and not complex_):
        return fold(G, lower)
    if kind == "sym":
        S = G + mT(G)
        return (np.tril(S, -1) if lower else np.triu(S, 1)) + G * np.eye(G.shape[-1], dtype=bool)
    return structured(G, assume_a, lower)


def _op(M: Any, trans: int) -> Any:
    return M if trans == 0 else (mT(M) if trans == 1 else mH(M))


def _trans(t: Any) -> int:
    return {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}[t if isinstance(t, str) else int(t)]


def _apply(M: Any, x: Any, vec: bool) -> Any:
    return mv(M, x) if vec else M @ x


def _rhs(db: Any, dM: Any, x: Any, vec: bool) -> Any:
    """ḃ − Ṁx (either may be absent), of x's shape and dtype."""
    r = np.zeros(np.shape(x), x.dtype)
    if db is not None:
        r = r + db
    if dM is not None:
        r = r - _apply(dM, x, vec)
    return r


# -- solve_triangular ---------------------------------------------------------------------------


def _tri_opts(args: Sequence[Any], kw: dict[str, Any]) -> tuple[int, bool, bool]:
    o = bind(sl.solve_triangular, args, kw)
    return _trans(o["trans"]), bool(o["lower"]), bool(o["unit_diagonal"])


def _mask(M: Any, lower: bool, unit: bool) -> Any:
    return np.tril(M, -1 if unit else 0) if lower else np.triu(M, 1 if unit else 0)


def solve_triangular_frule(f: Dual, a: Dual, b: Dual, *rest: Dual, **kw: Any) -> Dual:
    """x = op(T)⁻¹b, T = tril/triu(A) (unit: diagonal 1) ⇒ ẋ = op(T)⁻¹(ḃ − op(Ṫ)x)."""
    args = [a.x, b.x, *[r.x for r in rest]]
    trans, lower, unit = _tri_opts(args, kw)
    x = w.solve_triangular(*args, **safe(kw))
    da, db = tangent(a), tangent(b)
    if da is None and db is None:
        return Dual(x, None)
    dT = None if da is None else _op(_mask(da, lower, unit), trans)
    r = _rhs(db, dT, x, np.ndim(b.x) == 1)
    opts = dict(trans=trans, lower=lower, unit_diagonal=unit, check_finite=False)
    return Dual(x, tangent_like(w.solve_triangular(a.x, r, **opts), x))


def solve_triangular_vjp(
    active: Sequence[bool], A: Any, B: Any, *rest: Any, **kw: Any
) -> tuple[Any, Any]:
    """b̄ = op(T)⁻ᴴx̄, Ā = mask(op-adjusted −b̄xᴴ)."""
    trans, lower, unit = _tri_opts([A, B, *rest], kw)
    x = w.solve_triangular(A, B, *rest, **safe(kw))

    def pullback(g: Any) -> tuple[Any, ...]:
        none = (None,) * len(rest)
        if g is None:
            return (None, None, *none)
        opts = dict(lower=lower, unit_diagonal=unit, check_finite=False)
        if trans == 0:
            bb = w.solve_triangular(A, g, trans=2, **opts)
        elif trans == 1 and cplx(A):
            bb = np.conj(w.solve_triangular(A, np.conj(g), **opts))
        else:
            bb = w.solve_triangular(A, g, **opts)
        ga = None
        if active[0] and inexact(A):
            M = -(outer_h(bb, x) if np.ndim(B) == 1 else bb @ mH(x))
            ga = like(_mask(_op(M, trans), lower, unit), A)
        return (ga, like(bb, B) if active[1] and inexact(B) else None, *none)

    return x, pullback


# -- cholesky, cho_factor, cho_solve ----------------------------------------------------------


def _chol_dot(F: Any, dA: Any, lower: bool) -> Any:
    """The factor's tangent (F = L, or U = Lᴴ), from the `lower` triangle of Ȧ."""
    L = F if lower else mH(F)
    dL = chol_tangent(L, sym_from(dA, lower))
    return dL if lower else mH(dL)


def _chol_bar(F: Any, Fb: Any, lower: bool) -> Any:
    """Ā (folded onto the triangle read) from the factor's cotangent."""
    X = chol_cotangent(F, Fb) if lower else chol_cotangent(mH(F), mH(Fb))
    return fold(X, lower)


def cholesky_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """U = cholesky(A) (lower=True: L), reading that triangle: L̇ = L Φ(L⁻¹ṠL⁻ᴴ)."""
    rx = [r.x for r in rest]
    lower = bool(bind(sl.cholesky, [a.x, *rx], kw)["lower"])
    y = w.cholesky(a.x, *rx, **safe(kw))
    da = tangent(a)
    return Dual(y, None if da is None else _chol_dot(y, da, lower))


def cholesky_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Ā = fold(L⁻ᴴ Φ(LᴴL̄) L⁻¹)."""
    lower = bool(bind(sl.cholesky, [A, *rest], kw)["lower"])
    y = w.cholesky(A, *rest, **safe(kw))
    none = (None,) * len(rest)
    return y, lambda g: (None if g is None else like(_chol_bar(y, g, lower), A), *none)


def _other(M: Any, lower: bool) -> Any:
    """The triangle cho_factor leaves as A's (strictly upper for lower=True)."""
    return np.triu(M, 1) if lower else np.tril(M, -1)


def cho_factor_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """(c, lower) = cho_factor(A): ċ = the factor's tangent + Ȧ's other triangle."""
    rx = [r.x for r in rest]
    res = w.cho_factor(a.x, *rx, **safe(kw))
    da = tangent(a)
    if da is None:
        return Dual(res, None)
    c, lower = res[0], bool(bind(sl.cho_factor, [a.x, *rx], kw)["lower"])
    F = np.tril(c) if lower else np.triu(c)
    dc = _chol_dot(F, da, lower) + _other(da, lower)
    return Dual(res, type(res)([dc, None]))


def cho_factor_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Ā = fold(X) of the factor's triangle of c̄ + c̄'s other triangle."""
    res = w.cho_factor(A, *rest, **safe(kw))
    c, lower = res[0], bool(bind(sl.cho_factor, [A, *rest], kw)["lower"])
    none = (None,) * len(rest)

    def pullback(g: Any) -> tuple[Any, ...]:
        cb = None if g is None else g[0]
        if cb is None:
            return (None, *none)
        F, Fb = (np.tril(c), np.tril(cb)) if lower else (np.triu(c), np.triu(cb))
        return (like(_chol_bar(F, Fb, lower) + _other(cb, lower), A), *none)

    return res, pullback


def _cl(cl: Any) -> tuple[Any, bool]:
    c, low = cl
    return c, bool(np.ravel(low)[0]) if isinstance(low, np.ndarray) else bool(low)


def cho_solve_frule(f: Dual, cl: Dual, b: Dual, *rest: Dual, **kw: Any) -> Dual:
    """x = A⁻¹b, A = LLᴴ (L = tril c) or UᴴU (U = triu c): Ȧ = L̇Lᴴ + LL̇ᴴ (or U̇ᴴU + UᴴU̇),
    ẋ = A⁻¹(ḃ − Ȧx)."""
    c, low = _cl(cl.x)
    x = w.cho_solve(cl.x, b.x, *[r.x for r in rest], **safe(kw))
    dc = cl.dx[0] if isinstance(cl.dx, (tuple, list)) and inexact(c) else None
    db = tangent(b)
    if dc is None and db is None:
        return Dual(x, None)
    dA = None
    if dc is not None:
        F, dF = (np.tril(c), np.tril(dc)) if low else (mH(np.triu(c)), mH(np.triu(dc)))
        dA = dF @ mH(F)
        dA = dA + mH(dA)
    r = _rhs(db, dA, x, np.ndim(b.x) == 1)
    return Dual(x, tangent_like(w.cho_solve((c, low), r, check_finite=False), x))


def cho_solve_vjp(
    active: Sequence[bool], cl: Any, B: Any, *rest: Any, **kw: Any
) -> tuple[Any, Any]:
    """b̄ = A⁻¹x̄, Ā = −b̄xᴴ ⇒ c̄ = tril((Ā + Āᴴ)L) (lower) or triu(U(Ā + Āᴴ))."""
    c, low = _cl(cl)
    x = w.cho_solve(cl, B, *rest, **safe(kw))

    def pullback(g: Any) -> tuple[Any, ...]:
        none = (None,) * len(rest)
        if g is None:
            return (None, None, *none)
        bb = w.cho_solve((c, low), g, check_finite=False)
        gc = None
        if active[0] and inexact(c):
            Ab = -(outer_h(bb, x) if np.ndim(B) == 1 else bb @ mH(x))
            S = Ab + mH(Ab)
            gc = like(np.tril(S @ np.tril(c)) if low else np.triu(np.triu(c) @ S), c)
            gc = type(cl)([gc, None])
        return (gc, like(bb, B) if active[1] and inexact(B) else None, *none)

    return x, pullback


# -- inv, solve, det -----------------------------------------------------------------------------


def inv_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """Y = A⁻¹ ⇒ Ẏ = −Y Ṡ Y, Ṡ the part of Ȧ read for `assume_a`."""
    rx = [r.x for r in rest]
    o = bind(sl.inv, [a.x, *rx], kw)
    y = w.inv(a.x, *rx, **safe(kw))
    da = tangent(a)
    if da is None:
        return Dual(y, None)
    return Dual(y, -(y @ structured(da, o.get("assume_a"), bool(o.get("lower"))) @ y))


def inv_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Ā = restrict(−YᴴȲYᴴ)."""
    o = bind(sl.inv, [A, *rest], kw)
    y = w.inv(A, *rest, **safe(kw))
    none = (None,) * len(rest)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None:
            return (None, *none)
        G = -(mH(y) @ g @ mH(y))
        return (like(structured_bar(G, o.get("assume_a"), bool(o.get("lower")), cplx(A)), A), *none)

    return y, pullback


def solve_frule(f: Dual, a: Dual, b: Dual, *rest: Dual, **kw: Any) -> Dual:
    """x = op(A)⁻¹b (op = ·ᵀ if transposed) ⇒ ẋ = op(A)⁻¹(ḃ − op(Ṡ)x)."""
    args = [a.x, b.x, *[r.x for r in rest]]
    o = bind(sl.solve, args, kw)
    x = w.solve(*args, **safe(kw))
    da, db = tangent(a), tangent(b)
    if da is None and db is None:
        return Dual(x, None)
    dS = None if da is None else structured(da, o["assume_a"], bool(o["lower"]))
    if dS is not None and o["transposed"]:
        dS = mT(dS)
    r = _rhs(db, dS, x, np.ndim(b.x) == 1)
    opts = {k: o[k] for k in ("assume_a", "lower", "transposed")}
    return Dual(x, tangent_like(w.solve(a.x, r, check_finite=False, **opts), x))


def solve_vjp(active: Sequence[bool], A: Any, B: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """b̄ = op(M)⁻ᴴx̄ (M the matrix read), Ā = restrict(op-adjusted −b̄xᴴ)."""
    o = bind(sl.solve, [A, B, *rest], kw)
    x = w.solve(A, B, *rest, **safe(kw))
    assume, lower, tr = o["assume_a"], bool(o["lower"]), bool(o["transposed"])

    def pullback(g: Any) -> tuple[Any, ...]:
        none = (None,) * len(rest)
        if g is None:
            return (None, None, *none)
        M = structured(A, assume, lower)
        bb = w.solve(np.conj(M) if tr else mH(M), g, check_finite=False)
        ga = None
        if active[0] and inexact(A):
            G = -(outer_h(bb, x) if np.ndim(B) == 1 else bb @ mH(x))
            ga = like(structured_bar(mT(G) if tr else G, assume, lower, cplx(A)), A)
        return (ga, like(bb, B) if active[1] and inexact(B) else None, *none)

    return x, pullback


def det_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """ḋ = tr(adj(A) Ȧ) = d · tr(A⁻¹Ȧ) (the SVD's cofactors at a plain singular A)."""
    d = w.det(a.x, *[r.x for r in rest], **safe(kw))
    da = tangent(a)
    if da is None:
        return Dual(d, None)
    return Dual(d, tangent_like(np.sum(np.conj(adj_h(a.x, d)) * da, axis=(-2, -1)), d))


def det_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Ā = d̄·adj(A)ᴴ = d̄·conj(d)·A⁻ᴴ."""
    d = w.det(A, *rest, **safe(kw))
    none = (None,) * len(rest)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None:
            return (None, *none)
        return (like((g if np.ndim(g) == 0 else g[..., None, None]) * adj_h(A, d), A), *none)

    return d, pullback


register_like(w.solve_triangular, frule=solve_triangular_frule, vjp=solve_triangular_vjp)
register_like(w.cholesky, frule=cholesky_frule, vjp=cholesky_vjp)
register_like(w.cho_factor, frule=cho_factor_frule, vjp=cho_factor_vjp)
register_like(w.cho_solve, frule=cho_solve_frule, vjp=cho_solve_vjp)
register_like(w.inv, frule=inv_frule, vjp=inv_vjp)
register_like(w.solve, frule=solve_frule, vjp=solve_vjp)
register_like(w.det, frule=det_frule, vjp=det_vjp)

# ruff: noqa: E402  (after the registrations above)
from rules.scipy.linalg import forward_functions as forward_functions
