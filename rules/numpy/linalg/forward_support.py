"""Traceable helpers of the linear-algebra forward rules and differentiable pullbacks.

Everything here is plain functional NumPy/SciPy on its arguments (which may be values
traced by an enclosing transformation): no conversions, no in-place writes, no branch on
values. Matrices are the last two axes; `mH` is the conjugate transpose of those axes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Dual
from rules._support.linalg import DegenerateSpectrumError

__all__ = [
    "check_degenerate",
    "cplx",
    "diag",
    "diag_matrix",
    "fold",
    "gap_divide",
    "inexact",
    "like",
    "mH",
    "mT",
    "mv",
    "outer_h",
    "real_diag_matrix",
    "right_solve_h",
    "sym_from",
    "tangent",
    "tangent_like",
    "tri_solve",
]


def dtype_of(x: Any) -> np.dtype:
    """The dtype of an array or number (object for anything else: strings, None, ...)."""
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return np.dtype(dt)
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return np.result_type(x)
    return np.dtype(object)


def inexact(x: Any) -> bool:
    """Whether `x` is float or complex (has a derivative)."""
    return dtype_of(x).kind in "fc"


def cplx(x: Any) -> bool:
    return dtype_of(x).kind == "c"


def tangent(d: Dual) -> Any:
    """The tangent of Dual `d`, or None for a constant or a non-float value."""
    return d.dx if d.dx is not None and inexact(d.x) else None


def mT(x: Any) -> Any:
    """Transpose of the last two axes."""
    return np.swapaxes(x, -1, -2)


def mH(x: Any) -> Any:
    """Conjugate transpose of the last two axes."""
    t = np.swapaxes(x, -1, -2)
    return np.conj(t) if cplx(t) else t


def mv(M: Any, v: Any) -> Any:
    """M v for a (stack of) vector(s) v, without numpy's 1-D matmul ambiguity for stacks."""
    return (M @ v[..., None])[..., 0]


def outer_h(a: Any, b: Any) -> Any:
    """a bᴴ for (stacks of) vectors."""
    return a[..., :, None] * np.conj(b)[..., None, :]


def _real_dtype(x: Any) -> np.dtype:
    dt = dtype_of(x)
    return np.dtype(dt.char.lower()) if dt.kind == "c" else dt


def eye(n: int, x: Any) -> np.ndarray:
    """The n×n identity in the real dtype of `x` (so float32 stays float32)."""
    return np.eye(n, dtype=_real_dtype(x))


def diag(X: Any) -> Any:
    """The diagonals of the last two axes."""
    return np.diagonal(X, axis1=-2, axis2=-1)


def diag_matrix(v: Any) -> Any:
    """diag(v) for a (stack of) vector(s)."""
    return v[..., :, None] * eye(v.shape[-1], v)


def real_diag_matrix(X: Any) -> Any:
    """diag(Re diag X), in X's real dtype."""
    return np.real(X) * eye(X.shape[-1], X)


def sym_from(dA: Any, lower: bool) -> Any:
    """The Hermitian matrix a symmetric/Hermitian routine reads from one triangle of dA:
    tril(dA, −1) + tril(dA, −1)ᴴ + Re diag(dA) (triu for lower=False)."""
    T = np.tril(dA, -1) if lower else np.triu(dA, 1)
    return T + mH(T) + real_diag_matrix(dA)


def fold(X: Any, lower: bool) -> Any:
    """The adjoint of `sym_from`: tril(X + Xᴴ, −1) + Re diag(X) (triu for lower=False)."""
    G = X + mH(X)
    G = np.tril(G, -1) if lower else np.triu(G, 1)
    return G + real_diag_matrix(X)


def like(g: Any, x: Any) -> Any:
    """Cotangent `g` as one of argument `x`: broadcasting summed out, Re for a real `x`,
    `x`'s dtype."""
    if g is None:
        return None
    if np.shape(g) != np.shape(x):
        g = rulekit.unbroadcast(g, np.shape(x))
    if cplx(g) and not cplx(x):
        g = np.real(g)
    dt = dtype_of(x)
    if dtype_of(g) != dt:
        g = g.astype(dt)
    return g


def tangent_like(t: Any, y: Any) -> Any:
    """Tangent `t` as one of output `y`: Re for a real `y`, `y`'s dtype."""
    if cplx(t) and not cplx(y):
        t = np.real(t)
    dt = dtype_of(y)
    if dtype_of(t) != dt:
        t = t.astype(dt)
    return t


def tri_solve(T: Any, B: Any, lower: bool, trans: int = 0) -> Any:
    """op(T)⁻¹ B for a triangular (stack of) T (scipy's solve_triangular, traceable)."""
    from rules.scipy.linalg.basic import solve_triangular

    if 0 in np.shape(T) or 0 in np.shape(B):  # scipy refuses zero-size batches
        shape = np.broadcast_shapes(np.shape(T)[:-2], np.shape(B)[:-2]) + np.shape(B)[-2:]
        return np.zeros(shape, np.result_type(dtype_of(T), dtype_of(B), np.float32))
    return solve_triangular(T, B, trans=trans, lower=lower, check_finite=False)


def right_solve_h(Z: Any, R: Any, lower: bool) -> Any:
    """Z R⁻ᴴ for a triangular R: (R⁻¹ Zᴴ)ᴴ."""
    return mH(tri_solve(R, mH(Z), lower))


# -- divided differences of eigen/singular values ---------------------------------------------


def _near(den: Any, vals: Any) -> Any:
    """Off-diagonal pairs whose gap is at rounding level (10·n·ε·max|λ|), as a bool mask."""
    n = vals.shape[-1]
    eps = np.finfo(_real_dtype(vals)).eps
    tol = 10 * max(n, 1) * eps * np.max(np.abs(vals), axis=-1, keepdims=True)[..., None]
    return (np.abs(den) <= tol) & ~np.eye(n, dtype=bool)


def gap_divide(num: Any, den: Any, vals: Any) -> Any:
    """num/den off the diagonal (0 on it). At (near-)repeated values (|den| at rounding
    level) the entry is 0 where the numerator vanishes and NaN where it does not: the
    derivative does not exist there (never a finite wrong value)."""
    n = vals.shape[-1]
    near = _near(den, vals)
    skip = near | np.eye(n, dtype=bool)
    q = np.where(skip, 0, num) / np.where(skip, 1, den)
    eps = np.finfo(_real_dtype(vals)).eps
    scale = np.max(np.abs(num), axis=(-2, -1), keepdims=True)
    bad = near & (np.abs(num) > np.sqrt(eps) * scale)
    return np.where(bad, np.nan, q)


def check_degenerate(num: Any, den: Any, vals: Any, what: str) -> None:
    """On plain arrays, raise DegenerateSpectrumError where `gap_divide` would give NaN (as
    the reverse rules do). Traced values are not read (the NaN stands)."""
    if not all(isinstance(v, np.ndarray) for v in (num, den, vals)):
        return
    n = vals.shape[-1]
    near = _near(den, vals)
    eps = np.finfo(_real_dtype(vals)).eps
    scale = np.max(np.abs(num), axis=(-2, -1), keepdims=True)
    if np.any(near & (np.abs(num) > np.sqrt(eps) * scale)) and n > 1:
        raise DegenerateSpectrumError(
            f"{what}: the derivative needs 1/(λᵢ − λⱼ) at (near-)repeated values and the "
            "(co)tangent of the vectors is not invariant within the repeated subspace, so the "
            "derivative does not exist. Differentiate only the values, or a quantity "
            "invariant within the degenerate subspace."
        )
