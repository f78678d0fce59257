"""Rules for scipy.special.

Most scipy.special functions are numpy ufuncs: unchanged user code
(`scipy.special.erf(x)` on a traced `x`) reaches the rules registered here for
the scipy ufunc objects through `__array_ufunc__`. This module registers the
one-argument ufuncs; the two-argument ones (`xlogy`, `xlog1py`, `rel_entr`,
`beta`, `betaln`) and `polygamma` are in `rules.scipy.special`, and
`logsumexp`, `softmax`, `log_softmax` in `rules.scipy.special`.

`polygamma`, `logsumexp`, `softmax` and `log_softmax` are Python functions that
convert their input with `np.asarray`, which a traced value refuses: call the
`rulekit.primitive` wrappers exported here under scipy's names
(`rules.scipy.special.logsumexp(x, axis=1)`); plain calls go straight to scipy. The
ufuncs are re-exported too (they are the scipy objects themselves), so
`from rules import special as sp` works for all of them.

Each function is declared by its derivative (`rulekit.elementwise`, through
`rules.scipy.special._common.declare`), whose rule computes `x̄ += conj(f'(x))·ȳ`;
domains, non-differentiable points and complex support are documented in
docs/conventions-special.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special as sp

from rules.scipy.special._common import (
    Sampler,
    declare,
    operand_pattern,
    signed,
    unary_examples,
    uniform,
)

__all__ = [
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcinv",
    "erfcx",
    "erfinv",
    "expit",
    "gamma",
    "gammaln",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "log_expit",
    "log_ndtr",
    "logit",
    "ndtr",
    "ndtri",
    "psi",
]

gammaln, digamma, psi, gamma = sp.gammaln, sp.digamma, sp.psi, sp.gamma
erf, erfc, erfinv, erfcinv, erfcx = sp.erf, sp.erfc, sp.erfinv, sp.erfcinv, sp.erfcx
expit, logit, log_expit = sp.expit, sp.logit, sp.log_expit
ndtr, log_ndtr, ndtri = sp.ndtr, sp.log_ndtr, sp.ndtri
entr, i0, i1, i0e, i1e = sp.entr, sp.i0, sp.i1, sp.i0e, sp.i1e

_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)
_SQRT_PI_OVER_2 = np.sqrt(np.pi) / 2.0
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
_SQRT_2PI = np.sqrt(2.0 * np.pi)


def _unary(
    ufunc: np.ufunc,
    deriv: Callable[[Any, Any], Any],
    adjoint: str,
    seed: int,
    sample: Sampler,
    cplx: Sampler | None = None,
) -> None:
    """Declare `ufunc` by its derivative, x̄ += conj(deriv(x, y))·ȳ, registered for its real
    (and, when `cplx` samples imaginary parts for the examples, complex) loops."""
    pattern = operand_pattern(ufunc, complex_=cplx is not None)
    declare(ufunc, deriv, patterns=(pattern,), examples=unary_examples(seed, sample, cplx),
            adjoint=adjoint)  # fmt: skip


def _ratio(num: Any, x: Any, at0: float) -> Any:
    """num / x, with the value `at0` where x == 0 (the limit the caller knows)."""
    x = np.asarray(x)
    res = np.full(np.broadcast_shapes(np.shape(num), x.shape), at0, np.result_type(num, x))
    np.divide(num, x, out=res, where=x != 0)
    return res


# -- gamma family -------------------------------------------------------------------------------

# y = log|Γ(x)|  ⇒  x̄ += ψ(x)·ȳ  (also for negative non-integer x; ±inf at the poles)
_unary(gammaln, lambda x, y: sp.digamma(x), "x̄ += ψ(x)·ȳ", 100, uniform(0.3, 5.0))

# y = ψ(x)  ⇒  x̄ += ψ₁(x)·ȳ (trigamma). Real only: scipy's polygamma has no complex loop.
_unary(digamma, lambda x, y: sp.polygamma(1, x), "x̄ += ψ₁(x)·ȳ", 101, uniform(0.3, 5.0))

# y = Γ(z)  ⇒  z̄ += conj(Γ(z)·ψ(z))·ȳ  (holomorphic)
_unary(gamma, lambda x, y: y * sp.digamma(x), "x̄ += conj(Γ(x)ψ(x))·ȳ", 102,
       uniform(0.3, 4.0), cplx=uniform(-1.0, 1.0))  # fmt: skip


# -- error functions ----------------------------------------------------------------------------


def _gauss(x: Any) -> Any:
    """(2/√π)·exp(−x²), erf's derivative (holomorphic)."""
    return _TWO_OVER_SQRT_PI * np.exp(-(x * x))


# y = erf(z)  ⇒  z̄ += conj((2/√π) e^{−z²})·ȳ;   erfc = 1 − erf
_unary(erf, lambda x, y: _gauss(x), "x̄ += conj(2/√π·exp(−x²))·ȳ", 110,
       uniform(-2.0, 2.0), cplx=uniform(-1.0, 1.0))  # fmt: skip
_unary(erfc, lambda x, y: -_gauss(x), "x̄ −= conj(2/√π·exp(−x²))·ȳ", 111,
       uniform(-2.0, 2.0), cplx=uniform(-1.0, 1.0))  # fmt: skip


def _d_erfcx(x: Any, y: Any) -> Any:
    """erfcx′(z) = 2z·erfcx(z) − 2/√π, in double precision (float32 in: rounded back). For
    |z| ≥ 20 the difference cancels (relative error ≈ ε·2|z|²), so there the asymptotic
    series S(z) = (2/√π)·Σ_{n=1}^{10} (−1)ⁿ(2n−1)!!/(2z²)ⁿ is used (truncation < 1e-18
    relative), plus 4z·e^{z²} for Re z < 0 (from erfcx(z) = 2e^{z²} − erfcx(−z); S is even).
    0 at +inf; −inf where erfcx overflows (x ≲ −26.6)."""
    x = np.asarray(x)
    z = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    d = 2.0 * z * sp.erfcx(z) - _TWO_OVER_SQRT_PI
    big = np.abs(z) >= 20.0
    if np.any(big):
        zb = np.where(big, z, 20.0)
        w = -0.5 / np.square(zb)  # −1/(2z²)
        term, total = np.ones_like(w), np.zeros_like(w)
        for n in range(1, 11):
            term = term * w * (2 * n - 1)
            total = total + term
        reflected = np.where(np.real(zb) < 0, 4.0 * zb * np.exp(np.square(zb)), 0.0)
        d = np.where(big, _TWO_OVER_SQRT_PI * total + reflected, d)
    return d.astype(x.dtype, copy=False)


# y = erfcx(z) = e^{z²} erfc(z)  ⇒  z̄ += conj(2z·y − 2/√π)·ȳ  (holomorphic)
_unary(erfcx, _d_erfcx, "x̄ += conj(2x·erfcx(x) − 2/√π)·ȳ", 114, uniform(-3.0, 30.0),
       cplx=uniform(-1.0, 1.0))  # fmt: skip

# y = erfinv(x)  ⇒  x̄ += (√π/2)·exp(y²)·ȳ  (inf at x = ±1);   erfcinv(x) = erfinv(1 − x)
_unary(erfinv, lambda x, y: _SQRT_PI_OVER_2 * np.exp(y * y), "x̄ += (√π/2)·exp(y²)·ȳ", 112,
       uniform(-0.9, 0.9))  # fmt: skip
_unary(erfcinv, lambda x, y: -_SQRT_PI_OVER_2 * np.exp(y * y), "x̄ −= (√π/2)·exp(y²)·ȳ", 113,
       uniform(0.1, 1.9))  # fmt: skip


# -- logistic -----------------------------------------------------------------------------------

# y = σ(x)  ⇒  x̄ += σ(x)·σ(−x)·ȳ  (σ(−x), not 1 − y: no cancellation for large x)
_unary(expit, lambda x, y: y * sp.expit(-x), "x̄ += σ(x)σ(−x)·ȳ", 120, uniform(-4.0, 4.0))

# y = log(x/(1−x))  ⇒  x̄ += ȳ / (x(1−x))
_unary(logit, lambda x, y: 1.0 / (x * (1.0 - x)), "x̄ += ȳ/(x(1−x))", 121, uniform(0.05, 0.95))

# y = log σ(x)  ⇒  x̄ += σ(−x)·ȳ
_unary(log_expit, lambda x, y: sp.expit(-x), "x̄ += σ(−x)·ȳ", 122, uniform(-6.0, 6.0))


# -- normal distribution ------------------------------------------------------------------------


def _log_phi(x: Any) -> Any:
    """log φ(x) = −x²/2 − log √(2π)."""
    return -0.5 * (x * x) - _LOG_SQRT_2PI


# y = Φ(z)  ⇒  z̄ += conj(φ(z))·ȳ
_unary(ndtr, lambda x, y: np.exp(_log_phi(x)), "x̄ += conj(φ(x))·ȳ", 130,
       uniform(-3.0, 3.0), cplx=uniform(-0.5, 0.5))  # fmt: skip

# y = log Φ(z)  ⇒  z̄ += conj(exp(log φ(z) − y))·ȳ: the ratio φ/Φ in log space, finite where
# φ and Φ both underflow (x = −40: −x²/2 − log√2π − y ≈ log 40, so the derivative ≈ 40).
_unary(log_ndtr, lambda x, y: np.exp(_log_phi(x) - y), "x̄ += conj(exp(log φ(x) − y))·ȳ",
       131, uniform(-8.0, 3.0), cplx=uniform(-0.5, 0.5))  # fmt: skip

# y = Φ⁻¹(p)  ⇒  p̄ += √(2π)·exp(y²/2)·ȳ  (inf at p = 0, 1)
_unary(ndtri, lambda x, y: _SQRT_2PI * np.exp(0.5 * (y * y)), "x̄ += √(2π)·exp(y²/2)·ȳ", 132,
       uniform(0.05, 0.95))  # fmt: skip


# -- entropy ------------------------------------------------------------------------------------


def _d_entr(x: Any, y: Any) -> Any:
    """−(log x + 1) for x > 0; +inf at x = 0 (the one-sided derivative); NaN for x < 0,
    outside the domain, where entr is −inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -(np.log(x) + 1.0)


# y = −x log x  ⇒  x̄ += −(log x + 1)·ȳ
_unary(entr, _d_entr, "x̄ += −(log x + 1)·ȳ (+inf at 0, NaN for x < 0)", 140, uniform(0.05, 2.0))


# -- modified Bessel functions ------------------------------------------------------------------

# y = I₀(x)  ⇒  x̄ += I₁(x)·ȳ
_unary(i0, lambda x, y: sp.i1(x), "x̄ += I₁(x)·ȳ", 150, uniform(-3.0, 3.0))

# y = I₁(x)  ⇒  x̄ += (I₀(x) − I₁(x)/x)·ȳ  (I₁(x)/x → 1/2 at 0)
_unary(i1, lambda x, y: sp.i0(x) - _ratio(y, x, 0.5), "x̄ += (I₀ − I₁/x)·ȳ", 151,
       uniform(-3.0, 3.0))  # fmt: skip

# y = e^{−|x|} I₀(x)  ⇒  x̄ += (i1e(x) − sign(x)·y)·ȳ. Not differentiable at 0 (one-sided
# derivatives ∓1): sign(0) = 0 gives their mean, 0.
_unary(i0e, lambda x, y: sp.i1e(x) - np.sign(x) * y, "x̄ += (i1e − sign(x)·i0e)·ȳ", 152,
       signed(0.2, 4.0))  # fmt: skip

# y = e^{−|x|} I₁(x)  ⇒  x̄ += (i0e(x) − y·(sign(x) + 1/x))·ȳ  (differentiable at 0: 1/2)
_unary(i1e, lambda x, y: sp.i0e(x) - np.sign(x) * y - _ratio(y, x, 0.5),
       "x̄ += (i0e − i1e·(sign(x) + 1/x))·ȳ", 153, uniform(-4.0, 4.0))  # fmt: skip


# The two-argument ufuncs, polygamma, and the logsumexp/softmax wrappers.
