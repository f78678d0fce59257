"""Rules for more scipy.linalg functions: solve_banded, solve_sylvester, sqrtm.

Like `rules.scipy.linalg`, this module exports `rulekit.primitive` wrappers with scipy's
names and signatures (`rules.scipy.linalg.solve_banded((l, u), ab, b)`, ...): plain
calls go straight to scipy, traced calls dispatch to the rules registered here.
`overwrite_*` flags are permissions in scipy and are not forwarded (no mutation).
Complex values follow the JAX/PyTorch convention (x̄ = conj(∂f/∂x)·ȳ), so each
formula below written with ᴴ is the real one with ᵀ. Conventions (domains, where the
derivatives do not exist) are in docs/conventions-scipy-more.md.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import scipy.linalg

import rulekit
from rulekit import Array, CoDual, Vararg
from rules._support.arguments import array_fdata
from rules._support.cotangents import NO_R, accumulate, zero_rdata_of
from rules._support.linalg import mH
from rules._support.outputs import new_output
from rules.numpy.linalg.basic import spd, wellcond
from rules.scipy.linalg.basic import _call, _opts

__all__ = ["solve_banded", "solve_sylvester", "sqrtm"]

sl = scipy.linalg
solve_banded = rulekit.primitive(sl.solve_banded)


def _solve_sylvester(a: Any, b: Any, q: Any) -> Any:
    """scipy.linalg.solve_sylvester(a, b, q), with real operands made complex when another is
    complex: scipy (1.17) then passes a real quasi-triangular Schur factor to the complex
    ztrsyl, which ignores its 2×2 blocks, so a real A or B with complex eigenvalues gives a
    wrong X (residual of order 1). Calls with all-real or all-complex operands are scipy's."""
    arrays = [np.asarray(v) for v in (a, b, q)]
    kinds = {v.dtype.kind == "c" for v in arrays}
    if len(kinds) == 2:
        ct = np.result_type(*arrays, np.complex64)
        arrays = [v.astype(ct, copy=False) for v in arrays]
    return sl.solve_sylvester(*arrays)


# Named as scipy's function (registry listings, `rulekit coverage`): it is scipy's, with mixed
# real/complex calls promoted.
_solve_sylvester.__name__ = _solve_sylvester.__qualname__ = "solve_sylvester"
_solve_sylvester.__module__ = "scipy.linalg"
solve_sylvester = rulekit.primitive(_solve_sylvester)
sqrtm = rulekit.primitive(sl.sqrtm)


# -- solve_banded -------------------------------------------------------------------------------
#
# Band storage: ab[..., u + i − j, j] = A[i, j] for max(0, j − u) ≤ i ≤ min(M − 1, j + l); the
# corner entries of ab outside that range are never read (their cotangent is zero).


def _band_transpose(ab: np.ndarray, lower: int, upper: int) -> np.ndarray:
    """Band storage (with (upper, lower) diagonals) of Aᴴ, given that of A with (lower, upper).

    Aᴴ[i, j] = conj(A[j, i]) ⇒ abᴴ[k, j] = conj(ab[l + u − k, j + k − l]) where in range."""
    out = np.zeros_like(ab)
    m = ab.shape[-1]
    for k in range(lower + upper + 1):
        s, r = k - lower, lower + upper - k
        if s >= 0:
            out[..., k, : m - s] = ab[..., r, s:]
        else:
            out[..., k, -s:] = ab[..., r, : m + s]
    return np.conj(out) if np.iscomplexobj(out) else out


def _band_outer(bb: np.ndarray, x: np.ndarray, lower: int, upper: int, vec: bool) -> np.ndarray:
    """Band storage of Ā = −b̄ xᴴ restricted to A's band: ab̄[k, j] = Ā[j + k − u, j]."""
    m = x.shape[-1] if vec else x.shape[-2]
    xc = np.conj(x) if np.iscomplexobj(x) else x
    shape = (*np.broadcast_shapes(bb.shape, x.shape)[: -1 if vec else -2], lower + upper + 1, m)
    out = np.zeros(shape, np.result_type(bb, x))
    for k in range(lower + upper + 1):
        t = k - upper  # row offset i − j of this diagonal
        lo, hi = max(0, -t), min(m, m - t)  # columns j with 0 ≤ j + t < m
        if lo >= hi:
            continue
        if vec:
            prod = bb[..., lo + t : hi + t] * xc[..., lo:hi]
        else:
            prod = np.sum(bb[..., lo + t : hi + t, :] * xc[..., lo:hi, :], axis=-1)
        out[..., k, lo:hi] = -prod
    return out


def _banded(rng: np.random.Generator, lower: int, upper: int, m: int, cplx: bool = False) -> Any:
    """Band storage of a diagonally dominant banded m×m matrix."""
    ab = rng.normal(size=(lower + upper + 1, m))
    if cplx:
        ab = ab + 1j * rng.normal(size=ab.shape)
    ab[upper] += 2.0 * (lower + upper + 1) * np.sign(ab[upper].real)
    return ab


def _solve_banded_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(400)
    return [
        rulekit.example((1, 1), _banded(rng, 1, 1, 5), rng.normal(size=5)),  # tridiagonal: gtsv
        rulekit.example((2, 1), _banded(rng, 2, 1, 5), rng.normal(size=(5, 2))),  # gbsv
        rulekit.example((0, 2), _banded(rng, 0, 2, 4, cplx=True), rng.normal(size=4) + 0j),
        rulekit.example(
            (1, 0),
            _banded(rng, 1, 0, 4).astype(np.float32),
            rng.normal(size=(4, 1)).astype(np.float32),
        ),
    ]


@rulekit.rrule.register(
    solve_banded,
    Union[tuple, list],
    Array[np.number],
    Array[np.number],
    Vararg[Any],
    examples=_solve_banded_examples,
)
def solve_banded_rrule(
    f: CoDual, lu: CoDual, ab: CoDual, b: CoDual, *rest: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """x = A⁻¹b, A in band storage ab with (l, u) diagonals  ⇒  b̄ += A⁻ᴴ x̄ (a banded solve
    with the band of Aᴴ), ab̄ += band(−b̄ xᴴ)."""
    o = _opts(sl.solve_banded, (lu, ab, b, *rest), kwargs)
    lower, upper = (int(n) for n in o["l_and_u"])
    x = _call(sl.solve_banded, o)
    out = new_output(x)

    def pullback(dy: Any) -> tuple[Any, ...]:
        nr = (NO_R, NO_R, NO_R, NO_R, *map(zero_rdata_of, rest))
        if array_fdata(ab) is None and array_fdata(b) is None:
            return nr
        abh = _band_transpose(np.asarray(ab.x, x.dtype), lower, upper)
        bb = sl.solve_banded((upper, lower), abh, out.dx, check_finite=False)
        accumulate(b, bb)
        if array_fdata(ab) is not None:
            accumulate(ab, _band_outer(bb, x, lower, upper, b.x.ndim == 1))
        return nr

    return out, pullback


# -- solve_sylvester ----------------------------------------------------------------------------


def _solve_sylvester_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(401)
    return [
        rulekit.example(wellcond(rng, (3, 3)), wellcond(rng, (2, 2)), rng.normal(size=(3, 2))),
        rulekit.example(
            wellcond(rng, (2, 2), True), wellcond(rng, (2, 2), True), rng.normal(size=(2, 2)) + 0j
        ),
        rulekit.example(
            wellcond(rng, (2, 3, 3)), wellcond(rng, (2, 3, 3)), rng.normal(size=(2, 3, 3))
        ),
        rulekit.example(
            wellcond(rng, (2, 2)).astype(np.float32),
            wellcond(rng, (3, 3)).astype(np.float32),
            rng.normal(size=(2, 3)).astype(np.float32),
        ),
    ]


@rulekit.rrule.register(
    solve_sylvester,
    Array[np.number],
    Array[np.number],
    Array[np.number],
    examples=_solve_sylvester_examples,
)
def solve_sylvester_rrule(f: CoDual, a: CoDual, b: CoDual, q: CoDual) -> tuple[CoDual, Any]:
    """AX + XB = Q  ⇒  solve the adjoint equation Aᴴ Y + Y Bᴴ = X̄;  Q̄ += Y,  Ā −= Y Xᴴ,
    B̄ −= Xᴴ Y. (Unique when no λᵢ(A) + μⱼ(B) = 0; scipy then solves it too.) Mixed real and
    complex operands are computed in complex (see `_solve_sylvester`)."""
    x = _solve_sylvester(a.x, b.x, q.x)
    out = new_output(x)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is None and array_fdata(b) is None and array_fdata(q) is None:
            return NO_R, NO_R, NO_R, NO_R
        y = _solve_sylvester(mH(a.x), mH(b.x), out.dx)
        accumulate(q, y)
        if array_fdata(a) is not None:
            accumulate(a, -(y @ mH(x)))
        if array_fdata(b) is not None:
            accumulate(b, -(mH(x) @ y))
        return NO_R, NO_R, NO_R, NO_R

    return out, pullback


# -- sqrtm --------------------------------------------------------------------------------------


def _sqrtm_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(402)
    return [
        rulekit.example(spd(rng, (3, 3))),
        rulekit.example(np.eye(3) + 0.4 * rng.normal(size=(3, 3))),  # non-symmetric
        rulekit.example(spd(rng, (2, 2, 2), True)),  # a stack, complex Hermitian
        rulekit.example(np.array([[-2.0, 1.0], [0.5, 3.0]])),  # a negative eigenvalue: complex Y
    ]


@rulekit.rrule.register(sqrtm, Array[np.inexact], Vararg[Any], examples=_sqrtm_examples)
def sqrtm_rrule(f: CoDual, a: CoDual, *rest: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """Y = sqrtm(A) (principal root), Y² = A ⇒ dY·Y + Y·dY = dA, so Ā solves the adjoint
    Sylvester equation Yᴴ Ā + Ā Yᴴ = Ȳ (its real part for real A with a complex root). With
    scipy's deprecated disp=False the error estimate is returned too; it is a constant."""
    res = sl.sqrtm(a.x, *[r.x for r in rest], **kwargs)
    y = res[0] if isinstance(res, tuple) else res
    out = new_output(res)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is not None:
            g = out.dx[0] if isinstance(out.dx, tuple) else out.dx
            yh = mH(y)
            accumulate(a, _solve_sylvester(yh, yh, g))
        return (NO_R, NO_R, *map(zero_rdata_of, rest))

    return out, pullback
