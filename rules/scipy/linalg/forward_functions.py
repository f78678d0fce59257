"""Forward rules and differentiable pullbacks for scipy.linalg's lu_factor → lu_solve and the
matrix functions expm, logm, sqrtm and solve_sylvester (imported by
`rules.scipy.linalg.forward`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg as sl

from rulekit import Dual
from rules._support.forward import register_like
from rules.numpy.linalg.forward_support import (
    cplx,
    inexact,
    like,
    mH,
    outer_h,
    right_solve_h,
    tangent,
    tangent_like,
    tri_solve,
)
from rules.scipy.linalg import basic as w
from rules.scipy.linalg import equations as eq
from rules.scipy.linalg.forward import bind, safe
from rules.scipy.linalg.lu import _perm

__all__: list[str] = []


# -- lu_factor → lu_solve -------------------------------------------------------------------------


def _rows(x: Any, idx: Any) -> Any:
    """x[..., idx, :] per stack entry (idx an integer array, not traced)."""
    return np.take_along_axis(x, idx[..., :, None], axis=-2)


def _parts(lu: Any) -> tuple[Any, Any]:
    """(L, U): unit lower and upper triangles of a packed LU."""
    return np.tril(lu, -1) + np.eye(lu.shape[-1], dtype=bool), np.triu(lu)


def _lu_inv(L: Any, U: Any, M: Any) -> Any:
    """L⁻¹ M U⁻¹."""
    Z = tri_solve(L, M, True)
    return mH(tri_solve(U, mH(Z), False, trans=2))  # (U⁻ᴴ Zᴴ)ᴴ = Z U⁻¹


def lu_factor_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """A = P L U: M = L⁻¹ Pᵀ Ȧ U⁻¹ ⇒ L̇ = L tril(M, −1), U̇ = triu(M) U; lu̇ = L̇ + U̇."""
    res = w.lu_factor(a.x, *[r.x for r in rest], **safe(kw))
    da = tangent(a)
    if da is None:
        return Dual(res, None)
    lu, piv = res
    L, U = _parts(lu)
    M = _lu_inv(L, U, _rows(da, _perm(piv)))
    return Dual(res, type(res)([L @ np.tril(M, -1) + np.triu(M) @ U, None]))


def lu_factor_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Ā = P L⁻ᴴ (tril(LᴴL̄, −1) + triu(ŪUᴴ)) U⁻ᴴ, L̄ = tril(lū, −1), Ū = triu(lū)."""
    res = w.lu_factor(A, *rest, **safe(kw))
    lu, piv = res
    none = (None,) * len(rest)

    def pullback(g: Any) -> tuple[Any, ...]:
        gl = None if g is None else g[0]
        if gl is None:
            return (None, *none)
        L, U = _parts(lu)
        M = np.tril(mH(L) @ gl, -1) + np.triu(gl @ mH(U))
        Z = right_solve_h(tri_solve(L, M, True, trans=2), U, False)  # L⁻ᴴ M U⁻ᴴ
        return (like(_rows(Z, np.argsort(_perm(piv), axis=-1)), A), *none)

    return res, pullback


def _trans(o: dict[str, Any]) -> int:
    t = o["trans"]
    return {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}[t if isinstance(t, str) else int(t)]


def _op(M: Any, trans: int) -> Any:
    return M if trans == 0 else (np.swapaxes(M, -1, -2) if trans == 1 else mH(M))


def lu_solve_frule(f: Dual, lp: Dual, b: Dual, *rest: Dual, **kw: Any) -> Dual:
    """x = op(A)⁻¹b, A = P L U ⇒ Ȧ = P(L̇U + LU̇), ẋ = op(A)⁻¹(ḃ − op(Ȧ)x)."""
    o = bind(sl.lu_solve, [lp.x, b.x, *[r.x for r in rest]], kw)
    trans, (lu, piv) = _trans(o), lp.x
    x = w.lu_solve(lp.x, b.x, *[r.x for r in rest], **safe(kw))
    dlu = lp.dx[0] if isinstance(lp.dx, (tuple, list)) and inexact(lu) else None
    db = tangent(b)
    if dlu is None and db is None:
        return Dual(x, None)
    vec = np.ndim(b.x) == 1
    r = np.zeros(np.shape(x), x.dtype) + (0 if db is None else db)
    if dlu is not None:
        L, U = _parts(lu)
        dA = _rows(np.tril(dlu, -1) @ U + L @ np.triu(dlu), np.argsort(_perm(piv), axis=-1))
        dA = _op(dA, trans)
        r = r - ((dA @ x[..., None])[..., 0] if vec else dA @ x)
    return Dual(x, tangent_like(w.lu_solve((lu, piv), r, trans=trans, check_finite=False), x))


def lu_solve_vjp(active: Sequence[bool], lp: Any, B: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """b̄ = op(A)⁻ᴴx̄; Ā = op-adjusted −b̄xᴴ; B̄ = PᵀĀ ⇒ lū = tril(B̄Uᴴ, −1) + triu(LᴴB̄)."""
    o = bind(sl.lu_solve, [lp, B, *rest], kw)
    trans, (lu, piv) = _trans(o), lp
    x = w.lu_solve(lp, B, *rest, **safe(kw))

    def pullback(g: Any) -> tuple[Any, ...]:
        none = (None,) * len(rest)
        if g is None:
            return (None, None, *none)
        c = cplx(lu)
        opts: dict[str, Any] = {"check_finite": False}
        if trans == 0:
            bb = w.lu_solve((lu, piv), g, trans=2 if c else 1, **opts)
        elif trans == 1 and c:
            bb = np.conj(w.lu_solve((lu, piv), np.conj(g), **opts))
        else:
            bb = w.lu_solve((lu, piv), g, **opts)
        glp = None
        if active[0] and inexact(lu):
            G = -(outer_h(bb, x) if np.ndim(B) == 1 else bb @ mH(x))
            Bb = _rows(_op(G, trans), _perm(piv))
            L, U = _parts(lu)
            glp = type(lp)([like(np.tril(Bb @ mH(U), -1) + np.triu(mH(L) @ Bb), lu), None])
        return (glp, like(bb, B) if active[1] and inexact(B) else None, *none)

    return x, pullback


# -- expm, logm (block-triangular Fréchet derivatives), sqrtm, solve_sylvester ---------------------


def _block(A: Any, E: Any) -> Any:
    """[[A, E], [0, A]] (stacks broadcast)."""
    shape = np.broadcast_shapes(np.shape(A), np.shape(E))
    A = np.broadcast_to(A, shape) if np.shape(A) != shape else A
    E = np.broadcast_to(E, shape) if np.shape(E) != shape else E
    top = np.concatenate([A, E], axis=-1)
    bottom = np.concatenate([np.zeros(shape, np.result_type(A, E)), A], axis=-1)
    return np.concatenate([top, bottom], axis=-2)


def _frechet(fn: Any, A: Any, E: Any) -> Any:
    """L_f(A, E): the upper-right block of f([[A, E], [0, A]])."""
    n = A.shape[-1]
    return fn(_block(A, E))[..., :n, n:]


def expm_frule(f: Dual, a: Dual) -> Dual:
    """Ẏ = L_exp(A, Ȧ), the upper-right block of expm([[A, Ȧ], [0, A]])."""
    y = w.expm(a.x)
    da = tangent(a)
    return Dual(y, None if da is None else tangent_like(_frechet(w.expm, a.x, da), y))


def expm_vjp(active: Sequence[bool], A: Any) -> tuple[Any, Any]:
    """Ā = L_exp(Aᴴ, Ȳ)."""
    y = w.expm(A)
    return y, lambda g: (None if g is None else like(_frechet(w.expm, mH(A), g), A),)


def _first(res: Any) -> Any:
    return res[0] if isinstance(res, tuple) else res


def logm_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """Ẏ = L_log(A, Ȧ) (disp=False: the error estimate gets no tangent)."""
    res = w.logm(a.x, *[r.x for r in rest], **safe(kw))
    da = tangent(a)
    if da is None:
        return Dual(res, None)
    t = tangent_like(_frechet(w.logm, a.x, da), _first(res))
    return Dual(res, (t, None) if isinstance(res, tuple) else t)


def logm_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Ā = L_log(Aᴴ, Ȳ)."""
    res = w.logm(A, *rest, **safe(kw))
    none = (None,) * len(rest)

    def pullback(g: Any) -> tuple[Any, ...]:
        g = _first(g) if isinstance(res, tuple) and g is not None else g
        return (None if g is None else like(_frechet(w.logm, mH(A), g), A), *none)

    return res, pullback


def sqrtm_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """Y² = A ⇒ YẎ + ẎY = Ȧ (a Sylvester equation)."""
    res = eq.sqrtm(a.x, *[r.x for r in rest], **safe(kw))
    da = tangent(a)
    if da is None:
        return Dual(res, None)
    y = _first(res)
    t = tangent_like(eq.solve_sylvester(y, y, da), y)
    return Dual(res, (t, None) if isinstance(res, tuple) else t)


def sqrtm_vjp(active: Sequence[bool], A: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """Yᴴ Ā + Ā Yᴴ = Ȳ (Re for a real A)."""
    res = eq.sqrtm(A, *rest, **safe(kw))
    y = _first(res)
    none = (None,) * len(rest)

    def pullback(g: Any) -> tuple[Any, ...]:
        g = _first(g) if isinstance(res, tuple) and g is not None else g
        if g is None:
            return (None, *none)
        return (like(eq.solve_sylvester(mH(y), mH(y), g), A), *none)

    return res, pullback


def solve_sylvester_frule(f: Dual, a: Dual, b: Dual, q: Dual) -> Dual:
    """AX + XB = Q ⇒ AẊ + ẊB = Q̇ − ȦX − XḂ."""
    x = eq.solve_sylvester(a.x, b.x, q.x)
    da, db, dq = tangent(a), tangent(b), tangent(q)
    if da is None and db is None and dq is None:
        return Dual(x, None)
    r = np.zeros(np.shape(x), x.dtype)
    if dq is not None:
        r = r + dq
    if da is not None:
        r = r - da @ x
    if db is not None:
        r = r - x @ db
    return Dual(x, tangent_like(eq.solve_sylvester(a.x, b.x, r), x))


def solve_sylvester_vjp(active: Sequence[bool], A: Any, B: Any, Q: Any) -> tuple[Any, Any]:
    """AᴴY + YBᴴ = X̄ ⇒ Q̄ = Y, Ā = −YXᴴ, B̄ = −XᴴY."""
    x = eq.solve_sylvester(A, B, Q)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None:
            return (None, None, None)
        y = eq.solve_sylvester(mH(A), mH(B), g)
        return (
            like(-(y @ mH(x)), A) if active[0] and inexact(A) else None,
            like(-(mH(x) @ y), B) if active[1] and inexact(B) else None,
            like(y, Q) if active[2] and inexact(Q) else None,
        )

    return x, pullback


register_like(w.lu_factor, frule=lu_factor_frule, vjp=lu_factor_vjp)
register_like(w.lu_solve, frule=lu_solve_frule, vjp=lu_solve_vjp)
register_like(w.expm, frule=expm_frule, vjp=expm_vjp)
register_like(w.logm, frule=logm_frule, vjp=logm_vjp)
register_like(eq.sqrtm, frule=sqrtm_frule, vjp=sqrtm_vjp)
register_like(eq.solve_sylvester, frule=solve_sylvester_frule, vjp=solve_sylvester_vjp)
