"""Rules for scipy.linalg: solve_triangular, cho_factor/cho_solve, lu_factor/lu_solve, expm, logm,
inv, solve, det, cholesky.

These are Python functions that numpy's protocols do not reach, so this module
exports `rulekit.primitive` wrappers with scipy's names and signatures
(`rules.scipy.linalg.solve_triangular(a, b, lower=True)`, ...). Plain calls go straight
to scipy; traced calls dispatch to the rules registered for the wrappers.
Factorizations flow through the pipeline as values: the cotangent of
`cho_factor`'s `c` (or `lu_factor`'s `lu`) is the tuple tangent that `cho_solve`
(`lu_solve`) increments, so cho_factor → cho_solve differentiates end to end.
`overwrite_*` flags are permissions in scipy and are not forwarded (no mutation).
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import scipy.linalg

import rulekit
from rulekit import Array, CoDual, Vararg
from rules._support.arguments import array_fdata
from rules._support.binding import Binder, binder
from rules._support.cotangents import NO_R, accumulate, zero_rdata_of
from rules._support.linalg import chol_cotangent, diag_view, fold, mH
from rules._support.outputs import new_output
from rules.numpy.linalg.basic import spd, wellcond

__all__ = [
    "cho_factor",
    "cho_solve",
    "cholesky",
    "det",
    "expm",
    "inv",
    "logm",
    "lu_factor",
    "lu_solve",
    "solve",
    "solve_triangular",
]

sl = scipy.linalg
solve_triangular = rulekit.primitive(sl.solve_triangular)
cho_factor = rulekit.primitive(sl.cho_factor)
cho_solve = rulekit.primitive(sl.cho_solve)
lu_factor = rulekit.primitive(sl.lu_factor)
lu_solve = rulekit.primitive(sl.lu_solve)
expm = rulekit.primitive(sl.expm)
logm = rulekit.primitive(sl.logm)
inv = rulekit.primitive(sl.inv)
solve = rulekit.primitive(sl.solve)
det = rulekit.primitive(sl.det)
cholesky = rulekit.primitive(sl.cholesky)

_NOT_FORWARDED = ("overwrite_a", "overwrite_b")


def _opts(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Primal values of every parameter of `fn` for this call (defaults filled in)."""
    bind = _binders.get(fn)
    if bind is None:
        bind = _binders[fn] = binder(fn)  # (the signature is read once a function)
    return bind(args, kwargs).primal_values()


_binders: dict[Any, Binder] = {}


def _call(fn: Any, opts: dict[str, Any], **over: Any) -> Any:
    kw = {k: v for k, v in opts.items() if k not in _NOT_FORWARDED}
    kw.update(over)
    return fn(**kw)


def _trans_code(t: Any) -> int:
    return {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}[t if isinstance(t, str) else int(t)]


def _op_cotangent(M: np.ndarray, trans: int) -> np.ndarray:
    """Ā from the cotangent M of op(A) (A, Aᵀ or Aᴴ)."""
    return M if trans == 0 else (np.swapaxes(M, -1, -2) if trans == 1 else mH(M))


def _outer_bar(bb: np.ndarray, x: np.ndarray, vec: bool) -> np.ndarray:
    """−b̄ xᴴ, the cotangent of the matrix in x = M⁻¹b (b a vector or matrix)."""
    if vec:
        return -(bb[..., :, None] * np.conj(x)[..., None, :])
    return -(bb @ mH(x))


def _fold_sym(G: np.ndarray, lower: bool) -> np.ndarray:
    """`fold` for complex *symmetric* (not Hermitian) routines: tril(G + Gᵀ, −1) + diag(G)."""
    S = G + np.swapaxes(G, -1, -2)
    S = np.tril(S, -1) if lower else np.triu(S, 1)
    diag_view(S)[...] = np.diagonal(G, axis1=-2, axis2=-1)
    return S


def _kind(assume_a: Any) -> Any:
    """scipy's assume_a, normalized ('gen' → 'general', 'symmetric' → 'sym', ...)."""
    names = {"gen": "general", "symmetric": "sym", "hermitian": "her", "positive definite": "pos"}
    return names.get(assume_a, assume_a)


def _structured(G: np.ndarray, assume_a: Any, lower: bool, complex_: bool) -> np.ndarray:
    """Restrict the cotangent of a general matrix to what scipy reads for `assume_a`."""
    kind = _kind(assume_a)
    if kind in (None, "general", "banded"):  # None: detected structure, same function A⁻¹
        return G
    if kind in ("her", "pos") or (kind == "sym" and not complex_):
        return fold(G, lower)
    if kind == "sym":
        return _fold_sym(G, lower)
    if kind in ("upper triangular", "lower triangular"):
        return np.triu(G) if kind.startswith("upper") else np.tril(G)
    if kind == "diagonal":
        return np.eye(G.shape[-1], dtype=bool) * G
    if kind == "tridiagonal":
        return np.triu(np.tril(G, 1), -1)
    raise NotImplementedError(f"rules.scipy.linalg: assume_a={assume_a!r} has no rule")


# -- solve_triangular -------------------------------------------------------------------------


def _tri(rng: np.random.Generator, shape: tuple[int, ...], lower: bool) -> Any:
    a = wellcond(rng, shape)
    return np.tril(a) if lower else np.triu(a)


def _solve_triangular_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(50)
    E = rulekit.Example
    return [
        E((_tri(rng, (3, 3), True), rng.normal(size=3)), {"lower": True}),
        E((_tri(rng, (3, 3), False), rng.normal(size=(3, 2)))),
        E((_tri(rng, (3, 3), True), rng.normal(size=(3, 2))), {"lower": True, "trans": "T"}),
        E((rng.normal(size=(3, 3)) + 3 * np.eye(3), rng.normal(size=3)), {"trans": 1}),
        E((rng.normal(size=(3, 3)) + 3 * np.eye(3), rng.normal(size=3)), {"unit_diagonal": True}),
        E((_tri(rng, (2, 3, 3), True), rng.normal(size=(2, 3, 2))), {"lower": True}),
        E((wellcond(rng, (3, 3), True), rng.normal(size=3) + 0j), {"trans": "C", "lower": True}),
        E((wellcond(rng, (3, 3), True), rng.normal(size=3) + 1j), {"trans": 1}),
    ]


@rulekit.rrule.register(
    solve_triangular,
    Array[np.number],
    Array[np.number],
    Vararg[Any],
    examples=_solve_triangular_examples,
)
def solve_triangular_rrule(f: CoDual, a: CoDual, b: CoDual, *rest: CoDual, **kwargs: Any) -> Any:
    """x = op(T)⁻¹ b, T = tril/triu(A) (unit diagonal: diag ignored), op ∈ {·, ·ᵀ, ·ᴴ}:
    b̄ += op(T)⁻ᴴ x̄ (one triangular solve), M = −b̄ xᴴ ⇒ Ā += mask(M, Mᵀ or Mᴴ per trans)."""
    o = _opts(sl.solve_triangular, (a, b, *rest), kwargs)
    trans, lower, unit = _trans_code(o["trans"]), bool(o["lower"]), bool(o["unit_diagonal"])
    x = _call(sl.solve_triangular, o)
    out = new_output(x)

    def pullback(dy: Any) -> tuple[Any, ...]:
        nr = (NO_R, NO_R, NO_R, *map(zero_rdata_of, rest))
        if array_fdata(a) is None and array_fdata(b) is None:
            return nr
        A, g = a.x, out.dx
        kw = dict(lower=lower, unit_diagonal=unit, check_finite=False)
        if trans == 0:
            bb = sl.solve_triangular(A, g, trans=2, **kw)
        elif trans == 1 and np.iscomplexobj(A):
            bb = np.conj(sl.solve_triangular(A, np.conj(g), **kw))
        else:
            bb = sl.solve_triangular(A, g, **kw)
        accumulate(b, bb)
        if array_fdata(a) is not None:
            G = _op_cotangent(_outer_bar(bb, x, b.x.ndim == 1), trans)
            G = np.tril(G, -1 if unit else 0) if lower else np.triu(G, 1 if unit else 0)
            accumulate(a, G)
        return nr

    return out, pullback


# -- Cholesky: cho_factor → cho_solve, cholesky -----------------------------------------------


def _cho_factor_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(51)
    return [
        rulekit.example(spd(rng, (3, 3))),
        rulekit.Example((spd(rng, (3, 3)),), {"lower": True}),
        rulekit.example(spd(rng, (3, 3), complex_=True), True),
        rulekit.example(spd(rng, (2, 3, 3))),
    ]


def _chol_bar(c: np.ndarray, cb: np.ndarray, lower: bool) -> np.ndarray:
    """Ā for A ↦ factor (the `lower` triangle of c): fold(Murray's X) onto that triangle."""
    if lower:
        X = chol_cotangent(np.tril(c), np.tril(cb))
    else:
        X = chol_cotangent(mH(np.triu(c)), mH(np.triu(cb)))
    return fold(X, lower)


@rulekit.rrule.register(cho_factor, Array[np.inexact], Vararg[Any], examples=_cho_factor_examples)
def cho_factor_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """(c, lower) = cho_factor(A): c's `lower` triangle is the factor (see `_chol_bar`); its
    other triangle is a copy of A's (scipy does not clean it), so that part of c̄ goes to Ā
    unchanged. Output fdata: (c̄, NoFData())."""
    o = _opts(sl.cho_factor, (a, *rest), kwargs)
    res = _call(sl.cho_factor, o)  # a tuple; a list [c, lower array] for stacks
    c, low = res[0], bool(np.ravel(res[1])[0])
    out = new_output(res)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None and isinstance(out.dx, (tuple, list)):
            cb = out.dx[0]
            G = _chol_bar(c, cb, low)
            accumulate(a, G + (np.triu(cb, 1) if low else np.tril(cb, -1)))
        return (NO_R, NO_R, *map(zero_rdata_of, rest))

    return out, pullback


def _cho_solve_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(52)
    return [
        rulekit.example(sl.cho_factor(spd(rng, (3, 3))), rng.normal(size=3)),
        rulekit.example(sl.cho_factor(spd(rng, (3, 3)), lower=True), rng.normal(size=(3, 2))),
        rulekit.example(sl.cho_factor(spd(rng, (3, 3), True)), rng.normal(size=3) + 0j),
        rulekit.example(sl.cho_factor(spd(rng, (2, 3, 3))), rng.normal(size=(2, 3, 1))),
    ]


def _tuple_dx(cd: CoDual) -> np.ndarray | None:
    """The fdata of the array in a factorization tuple argument, or None if inactive."""
    dx = cd.dx
    ok = isinstance(dx, (tuple, list)) and isinstance(dx[0], np.ndarray)
    return dx[0] if ok else None


@rulekit.rrule.register(
    cho_solve, Union[tuple, list], Array[np.number], Vararg[Any], examples=_cho_solve_examples
)
def cho_solve_rrule(f: CoDual, cl: CoDual, b: CoDual, *rest: CoDual, **kwargs: Any) -> Any:
    """x = A⁻¹b, A = LLᴴ (L = tril(c)) or UᴴU (U = triu(c)): b̄ += A⁻¹x̄ (same factor),
    Ā = −b̄ xᴴ ⇒ c̄ += tril((Ā + Āᴴ) L) (lower) or triu(U (Ā + Āᴴ)) (upper)."""
    o = _opts(sl.cho_solve, (cl, b, *rest), kwargs)
    (c, low), vec = o["c_and_lower"], b.x.ndim == 1
    low = bool(np.ravel(low)[0])
    x = _call(sl.cho_solve, o)
    out = new_output(x)

    def pullback(dy: Any) -> tuple[Any, ...]:
        cdx = _tuple_dx(cl)
        if cdx is not None or array_fdata(b) is not None:
            bb = sl.cho_solve((c, low), out.dx, check_finite=False)
            accumulate(b, bb)
            if cdx is not None:
                Ab = _outer_bar(bb, x, vec)
                S = Ab + mH(Ab)
                g = np.tril(S @ np.tril(c)) if low else np.triu(np.triu(c) @ S)
                accumulate(CoDual(c, cdx), g)
        return (NO_R, zero_rdata_of(cl), NO_R, *map(zero_rdata_of, rest))

    return out, pullback


def _cholesky_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(53)
    return [
        rulekit.example(spd(rng, (3, 3))),
        rulekit.example(spd(rng, (3, 3)), True),
        rulekit.example(spd(rng, (2, 3, 3), True)),
    ]


@rulekit.rrule.register(cholesky, Array[np.inexact], Vararg[Any], examples=_cholesky_examples)
def cholesky_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """U = cholesky(A) (upper by default, reads that triangle; lower=True: L): as numpy's
    cholesky rule, Ā += fold(L⁻ᵀ Φ(Lᵀ L̄) L⁻¹)."""
    o = _opts(sl.cholesky, (a, *rest), kwargs)
    y = _call(sl.cholesky, o)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            accumulate(a, _chol_bar(y, out.dx, bool(o["lower"])))
        return (NO_R, NO_R, *map(zero_rdata_of, rest))

    return out, pullback
