"""Helpers shared by the linear-algebra rules (rules.numpy.linalg, rules.scipy.linalg,
rules.numpy.contractions): the matrix identities of their adjoints, kept LU factors, and the
errors for derivatives that do not exist.

Conventions (see docs/conventions-linalg.md): matrices are the last two axes of
a stack; `mH` is the conjugate transpose of those axes; cotangents of complex
values follow the JAX/PyTorch convention, so every formula written with ᵀ for
real inputs holds for complex ones with ᴴ.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import RulekitError

__all__ = [
    "LU",
    "DegenerateSpectrumError",
    "GaugeDependentError",
    "chol_cotangent",
    "diag_view",
    "fold",
    "lapack_dtype",
    "mH",
    "mT",
    "spectral_tol",
    "tri_solve_right",
]


class DegenerateSpectrumError(RulekitError, np.linalg.LinAlgError):
    """A pullback needs 1/(λᵢ − λⱼ) at (near-)repeated eigenvalues or singular values.

    Raised instead of returning inf/NaN when the cotangent of the eigenvectors
    (or singular vectors) is not invariant under rotations inside the
    degenerate subspace, so that the derivative does not exist.
    """


class GaugeDependentError(RulekitError, ValueError):
    """A cotangent of complex eigen/singular vectors depends on their arbitrary phases.

    Complex eigenvectors (and pairs of singular vectors) are defined up to a
    phase e^{iθ} each; only functions invariant under it are differentiable.
    """


def check_gauge(im_diag: np.ndarray, scale: Any, what: str) -> None:
    """Raise GaugeDependentError if Im diag(Vᴴ V̄) (the phase direction) is not ≈ 0."""
    tol = np.sqrt(np.finfo(np.real(im_diag).dtype).eps) * (np.max(np.abs(scale)) + 1e-300)
    if im_diag.size and np.max(np.abs(im_diag)) > tol:
        raise GaugeDependentError(
            f"{what}: the cotangent of the complex vectors is not invariant under their "
            "arbitrary phases (Im diag(Vᴴ V̄) ≠ 0), so the function being differentiated is "
            "not well defined. Differentiate a phase-invariant quantity (|v|², projectors, values)."
        )


def mT(x: np.ndarray) -> np.ndarray:
    """Transpose of the last two axes."""
    return np.swapaxes(x, -1, -2)


def mH(x: np.ndarray) -> np.ndarray:
    """Conjugate transpose of the last two axes (a view for real arrays)."""
    t = np.swapaxes(x, -1, -2)
    return np.conj(t) if np.iscomplexobj(t) else t


def diag_view(x: np.ndarray) -> np.ndarray:
    """A writable view of the diagonals of the last two axes of `x`."""
    n = min(x.shape[-2:])
    st = x.strides
    return np.lib.stride_tricks.as_strided(
        x, (*x.shape[:-2], n), (*st[:-2], st[-2] + st[-1]), writeable=True
    )


def fold(X: np.ndarray, lower: bool) -> np.ndarray:
    """Fold a cotangent valid for Hermitian perturbations onto the triangle a routine reads.

    LAPACK's symmetric/Hermitian routines (potrf, syevd, ...) read one triangle
    and the real part of the diagonal: f(A) = g(tril(A) + tril(A, −1)ᴴ). If X is
    the cotangent of g (for Hermitian dA), the cotangent of f is
    tril(X + Xᴴ, −1) + Re diag(X) — exact for every perturbation, and its
    Hermitian part ½(Ā + Āᴴ) is the symmetric-gradient convention of JAX/PyTorch.
    """
    G = X + mH(X)
    G = np.tril(G, -1) if lower else np.triu(G, 1)
    diag_view(G)[...] = np.real(np.diagonal(X, axis1=-2, axis2=-1))
    return G


def lapack_dtype(*arrays: np.ndarray) -> np.dtype | None:
    """The LAPACK dtype numpy.linalg computes in for these arrays, or None if unsupported."""
    dt = np.result_type(*arrays)
    if dt.kind in "biu":
        dt = np.dtype(np.float64)
    return dt if dt.char in "fdFD" else None


class LU:
    """A kept LU factorization P·L·U of a square 2-D matrix (LAPACK getrf/getrs)."""

    __slots__ = ("getrs", "lu", "nearly_singular", "piv", "singular")

    def __init__(self, a: np.ndarray) -> None:
        from scipy.linalg import get_lapack_funcs  # (not at import: `import rules` stays light)

        getrf, self.getrs = get_lapack_funcs(("getrf", "getrs"), (a,))
        self.lu, self.piv, info = getrf(a)
        self.singular = info > 0
        u = np.abs(np.diagonal(self.lu))
        # pivots at rounding level: A⁻¹ is meaningless, use the adjugate instead (det)
        self.nearly_singular = bool(np.min(u) <= u.shape[0] * np.finfo(u.dtype).eps * np.max(u))

    def solve(self, b: np.ndarray, adjoint: bool = False) -> np.ndarray:
        """A⁻¹b, or A⁻ᴴb when `adjoint`."""
        trans = (2 if self.lu.dtype.kind == "c" else 1) if adjoint else 0
        x, _ = self.getrs(self.lu, self.piv, b, trans=trans)
        return x

    def slogdet(self) -> tuple[Any, Any]:
        """(sign, log|det|) as numpy.linalg.slogdet computes them from the same LU."""
        d = np.diagonal(self.lu)
        swaps = np.count_nonzero(self.piv != np.arange(d.shape[0]))
        ad = np.abs(d)
        if d.dtype.kind == "c":
            with np.errstate(divide="ignore", invalid="ignore"):  # a zero pivot: sign 0
                sign = np.prod(np.where(ad == 0, 0, d / np.where(ad == 0, 1, ad)))
        else:
            sign = np.prod(np.sign(d))
        sign = d.dtype.type(sign * (-1) ** swaps)
        with np.errstate(divide="ignore"):  # a zero pivot: log|det| = −inf, as numpy
            logdet = ad.dtype.type(np.sum(np.log(ad)))
        return sign, logdet


def adjugate_H(a: np.ndarray) -> np.ndarray:
    """adj(A)ᴴ (the cofactor matrix, conjugated) for stacks, via the SVD; exact at singular A.

    A = U S Vᴴ ⇒ adj(A) = det(U Vᴴ) · V adj(S) Uᴴ, adj(S) = diag(∏_{j≠i} sⱼ).
    """
    u, s, vh = np.linalg.svd(a)
    ones = np.ones((*s.shape[:-1], 1), s.dtype)
    left = np.cumprod(np.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, s[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    others = left * right
    phase = np.conj(np.linalg.det(u) * np.linalg.det(vh))  # conj(det(U Vᴴ))
    return phase[..., None, None] * ((u * others[..., None, :]) @ vh)


def tri_solve_right(Z: np.ndarray, R: np.ndarray, lower: bool) -> np.ndarray:
    """Z·R⁻ᴴ for triangular R (stacks allowed): (R⁻¹ Zᴴ)ᴴ."""
    from scipy.linalg import solve_triangular

    return mH(solve_triangular(R, mH(Z), lower=lower, check_finite=False))


def chol_cotangent(L: np.ndarray, Lbar: np.ndarray) -> np.ndarray:
    """X = L⁻ᴴ Φ(Lᴴ L̄) L⁻¹ (Murray 2016): the cotangent of A = LLᴴ for Hermitian dA.

    Φ takes the lower triangle and halves the diagonal. Fold X onto the
    triangle the factorization reads (`fold`) to get Ā.
    """
    P = np.tril(mH(L) @ Lbar)
    diag_view(P)[...] *= 0.5
    from scipy.linalg import solve_triangular

    Y = solve_triangular(L, P, lower=True, trans="C", check_finite=False)
    return mH(solve_triangular(L, mH(Y), lower=True, trans="C", check_finite=False))


def spectral_tol(vals: np.ndarray) -> np.ndarray:
    """The gap below which two eigen/singular values count as repeated (per stack entry).

    10·n·ε·max|λ|: the backward-error size of the computed values, so only gaps
    indistinguishable from rounding are called repeated.
    """
    n = vals.shape[-1]
    eps = np.finfo(vals.dtype).eps
    return 10 * max(n, 1) * eps * np.max(np.abs(vals), axis=-1, keepdims=True)[..., None]


def safe_divide(
    num: np.ndarray, den: np.ndarray, tol: np.ndarray, what: str, values: np.ndarray
) -> np.ndarray:
    """num/den off the diagonal; where |den| ≤ tol the numerator must vanish (else raise)."""
    n = num.shape[-1]
    off = ~np.eye(n, dtype=bool)
    near = (np.abs(den) <= tol) & off
    if np.any(near):
        scale = np.max(np.abs(num), axis=(-2, -1), keepdims=True)
        ntol = np.sqrt(np.finfo(values.dtype).eps) * scale
        if np.any(near & (np.abs(num) > ntol)):
            raise DegenerateSpectrumError(
                f"{what}: the pullback needs 1/(λᵢ − λⱼ) at (near-)repeated values "
                f"(gap ≤ {float(np.max(tol)):.3g}; values {np.round(values, 12)!r}), and the "
                "cotangent of the vectors is not invariant under rotations within the repeated "
                "subspace, so the derivative does not exist. Differentiate only the values, or a "
                "quantity invariant within the degenerate subspace (e.g. its projector)."
            )
    out = np.where(near | ~off, 0, num) / np.where(near | ~off, 1, den)
    return out
