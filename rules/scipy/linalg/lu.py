"""Rules for the LU-based scipy.linalg functions (lu_factor → lu_solve, inv, solve, det)
and the matrix functions expm and logm. Their wrappers are in `rules.scipy.linalg.basic`.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import scipy.linalg

import rulekit
from rulekit import Array, CoDual, Vararg
from rules._support.arguments import array_fdata
from rules._support.cotangents import NO_F, NO_R, accumulate, zero_rdata_of
from rules._support.linalg import LU, adjugate_H, lapack_dtype, mH, tri_solve_right
from rules._support.outputs import new_output
from rules.numpy.linalg.basic import spd, wellcond
from rules.scipy.linalg.basic import (
    _call,
    _kind,
    _op_cotangent,
    _opts,
    _outer_bar,
    _structured,
    _trans_code,
    _tuple_dx,
    det,
    expm,
    inv,
    logm,
    lu_factor,
    lu_solve,
    solve,
)

__all__ = [
    "det_rrule",
    "expm_rrule",
    "inv_rrule",
    "logm_rrule",
    "lu_factor_rrule",
    "lu_solve_rrule",
    "solve_rrule",
]

sl = scipy.linalg


# -- lu_factor → lu_solve ---------------------------------------------------------------------


def _perm(piv: np.ndarray) -> np.ndarray:
    """perm with A[..., perm, :] = L U for LAPACK's 0-based row interchanges `piv`."""
    n = piv.shape[-1]
    perm = np.broadcast_to(np.arange(n), piv.shape).copy()
    for i in range(n):
        p = piv[..., i : i + 1]
        pi = perm[..., i : i + 1].copy()
        perm[..., i : i + 1] = np.take_along_axis(perm, p, -1)
        np.put_along_axis(perm, p, pi, -1)
    return perm


def _rows(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.take_along_axis(x, idx[..., :, None], axis=-2)


def _lu_parts(lu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    L = np.tril(lu, -1)
    L += np.eye(lu.shape[-1], dtype=lu.dtype)
    return L, np.triu(lu)


def _lu_factor_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(60)
    a = rng.normal(size=(4, 4))  # no diagonal shift: pivoting happens
    return [
        rulekit.example(a),
        rulekit.example(wellcond(rng, (3, 3))),
        rulekit.example(rng.normal(size=(2, 3, 3))),
        rulekit.example(a + 1j * rng.normal(size=(4, 4))),
    ]


@rulekit.rrule.register(lu_factor, Array[np.inexact], Vararg[Any], examples=_lu_factor_examples)
def lu_factor_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """(lu, piv) = lu_factor(A), A = P L U (square): with L̄ = tril(lū, −1), Ū = triu(lū),
    Ā += P L⁻ᴴ (tril(Lᴴ L̄, −1) + triu(Ū Uᴴ)) U⁻ᴴ. piv is an integer array (no tangent)."""
    o = _opts(sl.lu_factor, (a, *rest), kwargs)
    if a.x.shape[-1] != a.x.shape[-2]:
        raise NotImplementedError("rules.scipy.linalg.lu_factor: the rule supports square matrices")
    res = _call(sl.lu_factor, o)  # a tuple; a list for stacks
    lu, piv = res
    out = new_output(res)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None and isinstance(out.dx, (tuple, list)):
            g = out.dx[0]
            L, U = _lu_parts(lu)
            M = np.tril(mH(L) @ g, -1) + np.triu(g @ mH(U))
            Z = sl.solve_triangular(L, M, lower=True, unit_diagonal=True, trans=2)
            Z = tri_solve_right(Z, U, lower=False)
            accumulate(a, _rows(Z, np.argsort(_perm(piv), axis=-1)))
        return (NO_R, NO_R, *map(zero_rdata_of, rest))

    return out, pullback


def _lu_solve_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(61)
    a = rng.normal(size=(3, 3))
    E = rulekit.Example
    return [
        E((sl.lu_factor(a), rng.normal(size=3))),
        E((sl.lu_factor(a), rng.normal(size=(3, 2))), {"trans": 1}),
        E((sl.lu_factor(a + 1j * rng.normal(size=(3, 3))), rng.normal(size=3) + 0j), {"trans": 2}),
        E((sl.lu_factor(a + 1j * rng.normal(size=(3, 3))), rng.normal(size=3) + 0j), {"trans": 1}),
        E((sl.lu_factor(rng.normal(size=(2, 3, 3))), rng.normal(size=(2, 3, 2)))),
    ]


@rulekit.rrule.register(
    lu_solve, Union[tuple, list], Array[np.number], Vararg[Any], examples=_lu_solve_examples
)
def lu_solve_rrule(f: CoDual, lp: CoDual, b: CoDual, *rest: CoDual, **kwargs: Any) -> Any:
    """x = op(A)⁻¹b, A = P L U: b̄ += op(A)⁻ᴴ x̄ (lu_solve on the same factors), Ā = op-adjusted
    −b̄ xᴴ, then through A = PLU: with B̄ = PᵀĀ, lū += tril(B̄ Uᴴ, −1) + triu(Lᴴ B̄)."""
    o = _opts(sl.lu_solve, (lp, b, *rest), kwargs)
    (lu, piv), trans = o["lu_and_piv"], _trans_code(o["trans"])
    x = _call(sl.lu_solve, o)
    out = new_output(x)

    def pullback(dy: Any) -> tuple[Any, ...]:
        ldx = _tuple_dx(lp)
        if ldx is not None or array_fdata(b) is not None:
            g, cplx = out.dx, np.iscomplexobj(lu)
            if trans == 0:
                bb = sl.lu_solve((lu, piv), g, trans=2 if cplx else 1, check_finite=False)
            elif trans == 1 and cplx:
                bb = np.conj(sl.lu_solve((lu, piv), np.conj(g), check_finite=False))
            else:
                bb = sl.lu_solve((lu, piv), g, check_finite=False)
            accumulate(b, bb)
            if ldx is not None:
                Bb = _rows(_op_cotangent(_outer_bar(bb, x, b.x.ndim == 1), trans), _perm(piv))
                L, U = _lu_parts(lu)
                accumulate(CoDual(lu, ldx), np.tril(Bb @ mH(U), -1) + np.triu(mH(L) @ Bb))
        return (NO_R, zero_rdata_of(lp), NO_R, *map(zero_rdata_of, rest))

    return out, pullback


# -- inv, solve, det --------------------------------------------------------------------------


def _inv_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(62)
    E = rulekit.Example
    return [
        E((wellcond(rng, (3, 3)),)),
        E((wellcond(rng, (2, 3, 3)),)),
        E((spd(rng, (3, 3)),), {"assume_a": "pos", "lower": True}),
        E((spd(rng, (3, 3), True),), {"assume_a": "her"}),
        E((np.triu(wellcond(rng, (3, 3))),), {"assume_a": "upper triangular"}),
    ]


@rulekit.rrule.register(inv, Array[np.inexact], Vararg[Any], examples=_inv_examples)
def inv_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """Y = A⁻¹ ⇒ Ā += −Yᴴ Ȳ Yᴴ, restricted to what scipy reads for `assume_a`
    (one triangle for 'pos'/'sym'/'her', folded; the triangle for triangular; the diagonal)."""
    o = _opts(sl.inv, (a, *rest), kwargs)
    y = _call(sl.inv, o)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            yh = mH(y)
            G = _structured(-(yh @ out.dx @ yh), o.get("assume_a"), bool(o.get("lower")), False)
            accumulate(a, G)
        return (NO_R, NO_R, *map(zero_rdata_of, rest))

    return out, pullback


def _solve_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(63)
    E = rulekit.Example
    return [
        E((wellcond(rng, (3, 3)), rng.normal(size=3))),
        E((wellcond(rng, (3, 3)), rng.normal(size=(3, 2))), {"transposed": True}),
        E((wellcond(rng, (3, 3), True), rng.normal(size=(3, 2)) + 0j)),
        E((wellcond(rng, (2, 3, 3)), rng.normal(size=(2, 3, 2)))),
        E((spd(rng, (3, 3)), rng.normal(size=3)), {"assume_a": "pos"}),
        E((spd(rng, (3, 3), True), rng.normal(size=3) + 0j), {"assume_a": "her", "lower": True}),
        E(
            (wellcond(rng, (3, 3), True) * (1 + np.eye(3)), rng.normal(size=3) + 0j),
            {"assume_a": "sym"},
        ),
        E((np.tril(wellcond(rng, (3, 3))), rng.normal(size=3)), {"assume_a": "lower triangular"}),
    ]


@rulekit.rrule.register(
    solve, Array[np.number], Array[np.number], Vararg[Any], examples=_solve_examples
)
def solve_rrule(f: CoDual, a: CoDual, b: CoDual, *rest: CoDual, **kwargs: Any) -> Any:
    """x = op(A)⁻¹b (op = ·ᵀ if transposed): b̄ += op(A)⁻ᴴ x̄, Ā += op-adjusted −b̄ xᴴ,
    restricted to what scipy reads for `assume_a`. 2-D general A: one LU (getrf) serves the
    forward and the pullback; other structures call scipy.linalg.solve again."""
    o = _opts(sl.solve, (a, b, *rest), kwargs)
    A, B = a.x, b.x
    assume, lower, tr = o["assume_a"], bool(o["lower"]), bool(o["transposed"])
    dt = lapack_dtype(A, B)
    cplx = dt is not None and dt.kind == "c"
    lu = None
    general = assume in (None, "gen", "general") and not (tr and cplx)
    square = A.ndim == 2 and A.shape[0] == A.shape[1] > 0
    if general and dt is not None and square and B.ndim in (1, 2) and B.shape[0] == A.shape[0]:
        lu = LU(A.astype(dt, copy=False))
        if lu.singular:
            raise np.linalg.LinAlgError("Matrix is singular.")
    x = lu.solve(B.astype(dt, copy=False), adjoint=tr) if lu is not None else _call(sl.solve, o)
    out = new_output(x)
    kind = _kind(assume)
    herm = kind in ("her", "pos") or (kind == "sym" and not cplx)

    def pullback(dy: Any) -> tuple[Any, ...]:
        nr = (NO_R, NO_R, NO_R, *map(zero_rdata_of, rest))
        if array_fdata(a) is None and array_fdata(b) is None:
            return nr
        g = out.dx
        if lu is not None:
            bb = lu.solve(g, adjoint=not tr)
        elif herm:  # op(A)ᴴ = A, same triangle
            bb = sl.solve(A, g, assume_a=assume, lower=lower)
        elif kind == "sym":  # complex symmetric: Aᴴ = conj(A), same triangle
            bb = sl.solve(np.conj(A), g, assume_a=assume, lower=lower)
        else:  # op(A)ᴴ is Aᴴ (triangles swap) or, transposed, conj(A)
            swap = {"upper triangular": "lower triangular", "lower triangular": "upper triangular"}
            adj = np.conj(A) if tr else mH(A)
            bb = sl.solve(adj, g, assume_a=assume if tr else swap.get(kind, assume), lower=lower)
        accumulate(b, bb)
        if array_fdata(a) is not None:
            G = _op_cotangent(_outer_bar(bb, x, B.ndim == 1), 1 if tr else 0)
            accumulate(a, _structured(G, assume, lower, cplx))
        return nr

    return out, pullback


def _det_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(64)
    return [
        rulekit.example(wellcond(rng, (3, 3))),
        rulekit.example(rng.normal(size=(3, 2)) @ rng.normal(size=(2, 3))),  # singular
        rulekit.example(wellcond(rng, (2, 3, 3))),
        rulekit.example(wellcond(rng, (3, 3), True)),
    ]


@rulekit.rrule.register(det, Array[np.inexact], Vararg[Any], examples=_det_examples)
def det_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """d = det A ⇒ Ā += d̄·conj(d)·A⁻ᴴ (= d̄·adj(A)ᴴ, via the SVD at singular A). 2-D: d is
    the product of the kept LU's pivots (as scipy), A⁻ᴴ by getrs on the same LU."""
    o = _opts(sl.det, (a, *rest), kwargs)
    A = a.x
    lu = LU(A) if A.ndim == 2 and A.shape[0] == A.shape[1] > 0 and lapack_dtype(A) else None
    if lu is not None:
        dg = np.diagonal(lu.lu)
        d: Any = np.prod(dg) * (-1) ** np.count_nonzero(lu.piv != np.arange(dg.shape[0]))
        d = np.promote_types(dg.dtype, np.float64).type(d)  # scipy returns double precision
        out = CoDual(d, NO_F)
    else:
        d = _call(sl.det, o)
        if isinstance(d, np.ndarray) and np.shares_memory(d, A):
            # scipy returns a view of a stack of 1×1 matrices (det = the entry): d̄ is then
            # the same view of Ā, and there is nothing to do in the pullback.
            view = None if a.dx is None else a.dx[..., 0, 0]
            return CoDual(d, view), lambda dy: (NO_R, NO_R, *map(zero_rdata_of, rest))
        out = new_output(d)

    def pullback(dy: Any) -> tuple[Any, ...]:
        nr = (NO_R, NO_R, *map(zero_rdata_of, rest))
        g = out.dx if isinstance(out.dx, np.ndarray) else dy
        if array_fdata(a) is None or not isinstance(g, (np.ndarray, float, complex, np.number)):
            return nr
        if lu is not None and not lu.nearly_singular:
            adj_h = np.conj(d) * lu.solve(np.eye(A.shape[0], dtype=lu.lu.dtype), adjoint=True)
        elif np.all(d != 0):
            adj_h = np.conj(d)[..., None, None] * mH(np.linalg.inv(A))
        else:
            adj_h = adjugate_H(A)
        accumulate(a, np.asarray(g)[..., None, None] * adj_h)
        return nr

    return out, pullback


# -- expm, logm -------------------------------------------------------------------------------


def _block_adjoint(fn: Any, A: np.ndarray, G: np.ndarray) -> np.ndarray:
    """L_f(Aᴴ, G): the upper-right block of f([[Aᴴ, G], [0, Aᴴ]]) (the Fréchet derivative of a
    primary matrix function with real Taylor coefficients is self-adjoint this way)."""
    n = A.shape[-1]
    dt = np.result_type(A, G)
    Ah = mH(A)
    Z = np.zeros((*np.broadcast_shapes(A.shape, G.shape)[:-2], 2 * n, 2 * n), dt)
    Z[..., :n, :n] = Ah
    Z[..., n:, n:] = Ah
    Z[..., :n, n:] = G
    return fn(Z)[..., :n, n:]


def _expm_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(65)
    return [
        rulekit.example(rng.normal(size=(3, 3))),
        rulekit.example(rng.normal(size=(2, 3, 3))),
        rulekit.example(rng.normal(size=(3, 3)) + 1j * rng.normal(size=(3, 3))),
    ]


@rulekit.rrule.register(expm, Array[np.inexact], examples=_expm_examples)
def expm_rrule(f: CoDual, a: CoDual) -> tuple[CoDual, Any]:
    """Y = expm(A) ⇒ Ā += upper-right block of expm([[Aᴴ, Ȳ], [0, Aᴴ]])."""
    out = new_output(sl.expm(a.x))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            accumulate(a, _block_adjoint(sl.expm, a.x, out.dx))
        return (NO_R, NO_R)

    return out, pullback


def _logm_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(66)
    return [
        rulekit.example(np.eye(3) + 0.3 * rng.normal(size=(3, 3))),
        rulekit.example(spd(rng, (3, 3))),
        rulekit.example(np.eye(2) + 0.3 * (rng.normal(size=(2, 2)) + 1j * rng.normal(size=(2, 2)))),
    ]


@rulekit.rrule.register(logm, Array[np.inexact], Vararg[Any], examples=_logm_examples)
def logm_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """Y = logm(A) (principal log) ⇒ Ā += upper-right block of logm([[Aᴴ, Ȳ], [0, Aᴴ]]).
    With disp=False the error estimate is returned too; it is treated as a constant."""
    y = sl.logm(a.x, *[r.x for r in rest], **kwargs)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            g = out.dx[0] if isinstance(out.dx, tuple) else out.dx
            accumulate(a, _block_adjoint(sl.logm, a.x, g))
        return (NO_R, NO_R, *map(zero_rdata_of, rest))

    return out, pullback
