"""Rules for more scipy.special functions: the incomplete gamma and beta functions
(`gammainc`, `gammaincc`, `betainc`), `gammasgn`, `rgamma`, the Bessel functions `jv` (= `jn`),
`j0`, `j1`, `yn`, `y0`, `y1`, `iv`, `ive`, `kv`, `kve`, and `multigammaln` (a Python function:
call the wrapper `rules.scipy.special.multigammaln`).

The ufuncs are reached through `__array_ufunc__`: unchanged user code
(`scipy.special.jv(2, x)` on a traced `x`) dispatches to the rules registered here for
the scipy ufunc objects, which this module re-exports.

Shape and order arguments are constants. An integer (Python, numpy, or integer array)
order is simply not differentiable. A *float* order or shape parameter (`jv(v, x)` with
float `v`, the `a` of `gammainc(a, x)`, the `a, b` of `betainc(a, b, x)`) is accepted as a
constant, but when it is active (something asks for its cotangent) the rule raises
`NotImplementedError`: those derivatives exist but have no closed form, and a silent zero
would be a wrong gradient. Conventions are in docs/conventions-scipy-more.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Union

import numpy as np
import scipy.special as sp

import rulekit
from rulekit import Array, CoDual
from rules._support.cotangents import NO_R, accumulate
from rules._support.outputs import new_output
from rules.scipy.special._common import (
    CONST,
    active,
    check_ufunc_kwargs,
    cot,
    declare,
    no_partial,
    operand_pattern,
    refuse_active,
)

__all__ = [
    "betainc",
    "gammainc",
    "gammaincc",
    "gammasgn",
    "iv",
    "ive",
    "j0",
    "j1",
    "jn",
    "jv",
    "kv",
    "kve",
    "multigammaln",
    "rgamma",
    "y0",
    "y1",
    "yn",
]

betainc, gammainc, gammaincc, gammasgn, rgamma = (
    sp.betainc, sp.gammainc, sp.gammaincc, sp.gammasgn, sp.rgamma
)  # fmt: skip
jv, jn, j0, j1, yn, y0, y1, iv, ive = sp.jv, sp.jn, sp.j0, sp.j1, sp.yn, sp.y0, sp.y1, sp.iv, sp.ive
kv, kve = sp.kv, sp.kve
multigammaln = rulekit.primitive(sp.multigammaln)

Examples = Callable[[], list[rulekit.Example]]

#: An order or shape parameter: integers are constants; a float one must not be active.
ORDER: Any = Union[CONST, float, np.floating, Array[np.floating]]
#: Complex operands of the Bessel functions that have a complex loop (jv, iv, ive, kv, kve).
_COMPLEX: Any = Union[
    Array[np.complex64], Array[np.complex128], np.complex64, np.complex128, complex
]


def _register(
    ufunc: np.ufunc,
    patterns: Sequence[Any],
    deriv: Callable[..., Any],
    adjoint: str,
    examples: Examples,
    constant: dict[int, str],
    why: str,
) -> None:
    """Declare `ufunc` whose last operand is the only differentiable one, ∂ = deriv(*xs, y);
    the operands in `constant` get no cotangent and raise NotImplementedError when active."""
    consts = (no_partial,) * (len(patterns) - 1)
    declare(ufunc, *consts, deriv, patterns=patterns, examples=examples, adjoint=adjoint,
            constant=constant, why=why)  # fmt: skip


def _rng_examples(seed: int, make: Callable[[np.random.Generator], list[Any]]) -> Examples:
    def examples() -> list[rulekit.Example]:
        return make(np.random.default_rng(seed))

    return examples


# -- incomplete gamma and beta functions --------------------------------------------------------

_SHAPE_WHY = "the derivative in the shape parameter has no closed form"


def _d_gammainc(a: Any, x: Any, y: Any) -> Any:
    """∂P(a, x)/∂x = x^{a−1} e^{−x} / Γ(a), in log space (no overflow for large a, x).
    At x = 0: +inf for a < 1, 1 for a = 1, 0 for a > 1 (one-sided)."""
    return np.exp(sp.xlogy(np.subtract(a, 1), x) - x - sp.gammaln(a))


def _d_betainc(a: Any, b: Any, x: Any, y: Any) -> Any:
    """∂I_x(a, b)/∂x = x^{a−1} (1−x)^{b−1} / B(a, b), in log space."""
    return np.exp(
        sp.xlogy(np.subtract(a, 1), x) + sp.xlog1py(np.subtract(b, 1), np.negative(x))
        - sp.betaln(a, b)
    )  # fmt: skip


def _gammainc_examples(rng: np.random.Generator) -> list[Any]:
    x = rng.uniform(0.2, 4.0, (2, 3))
    return [
        rulekit.example(np.array([1, 2, 3]), x),  # integer shape array, broadcast
        rulekit.example(2, x[0].astype(np.float32)),
        rulekit.example(3, 1.7),  # scalars
        rulekit.example(1, np.float64(0.6)),
    ]


def _betainc_examples(rng: np.random.Generator) -> list[Any]:
    x = rng.uniform(0.05, 0.95, (2, 3))
    return [
        rulekit.example(np.array([1, 2, 3]), 2, x),
        rulekit.example(2, np.array([[1], [4]]), x.astype(np.float32)),
        rulekit.example(3, 2, 0.4),
        rulekit.example(1, 1, np.float64(0.3)),  # uniform: I_x(1, 1) = x
    ]


_P_GI = operand_pattern(gammainc, const=True)
# P(a, x)  ⇒  x̄ += x^{a−1} e^{−x}/Γ(a)·ȳ;   Q(a, x) = 1 − P(a, x)
_register(gammainc, (_P_GI, _P_GI), _d_gammainc, "x̄ += x^{a−1}e^{−x}/Γ(a)·ȳ",
          _rng_examples(300, _gammainc_examples), {0: "a"}, _SHAPE_WHY)  # fmt: skip
_register(gammaincc, (_P_GI, _P_GI), lambda a, x, y: -_d_gammainc(a, x, y),
          "x̄ −= x^{a−1}e^{−x}/Γ(a)·ȳ", _rng_examples(301, _gammainc_examples), {0: "a"},
          _SHAPE_WHY)  # fmt: skip

_P_BI = operand_pattern(betainc, const=True)
# I_x(a, b)  ⇒  x̄ += x^{a−1}(1−x)^{b−1}/B(a, b)·ȳ
_register(betainc, (_P_BI,) * 3, _d_betainc, "x̄ += x^{a−1}(1−x)^{b−1}/B(a,b)·ȳ",
          _rng_examples(302, _betainc_examples), {0: "a", 1: "b"}, _SHAPE_WHY)  # fmt: skip


# -- gammasgn, rgamma ---------------------------------------------------------------------------


def _unary_examples(seed: int, lo: float, hi: float, extra: Any) -> Examples:
    def make(rng: np.random.Generator) -> list[Any]:
        return [
            rulekit.example(rng.uniform(lo, hi, (2, 3))),
            rulekit.example(rng.uniform(lo, hi, 4).astype(np.float32)),
            rulekit.example(float(rng.uniform(lo, hi))),
            rulekit.example(extra),
        ]

    return _rng_examples(seed, make)


def gammasgn_rrule(f: CoDual, x: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = sign Γ(x): piecewise constant (±1, NaN at the poles)  ⇒  x̄ += 0 (no work)."""
    check_ufunc_kwargs(gammasgn, kwargs)
    out = new_output(gammasgn(x.x, **kwargs))
    return out, lambda dy: (NO_R, NO_R)


rulekit.rrule.register(
    gammasgn,
    operand_pattern(gammasgn),
    examples=_unary_examples(310, 0.2, 3.0, np.array([-2.5, -0.5, 0.5, 3.5])),
)(gammasgn_rrule)


def _d_rgamma(x: Any, y: Any) -> Any:
    """d(1/Γ)/dx = −ψ(x)/Γ(x); at x = −n (n = 0, 1, ...), where ψ has a pole and 1/Γ a zero,
    the limit (−1)ⁿ n!."""
    d = -sp.digamma(x) * y
    xa = np.asarray(x)
    pole = (np.real(xa) <= 0) & (np.imag(xa) == 0) & (np.real(xa) == np.floor(np.real(xa)))
    if np.any(pole):
        n = -np.real(xa)
        limit = np.where(n % 2 == 0, 1.0, -1.0) * sp.gamma(n + 1)
        d = np.where(pole, limit.astype(np.result_type(d)), d)
    return d


declare(rgamma, _d_rgamma, patterns=(operand_pattern(rgamma, complex_=True),),
        examples=_unary_examples(311, 0.3, 4.0, np.array([-2.0, -1.0, 0.0, 1.5 + 0.5j])),
        adjoint="x̄ += conj(−ψ(x)/Γ(x))·ȳ")  # fmt: skip


# -- Bessel functions of the first and second kind ----------------------------------------------

_ORDER_WHY = "a derivative in the order has no closed form"


def _bessel_examples(seed: int, lo: float, cplx: bool) -> Examples:
    def make(rng: np.random.Generator) -> list[Any]:
        x = rng.uniform(lo, 4.0, (2, 3))
        last = (
            rulekit.example(np.array([0, 1, 2]), x[0] + 1j * rng.uniform(-1.0, 1.0, 3))
            if cplx
            else rulekit.example(np.int64(-1), np.float64(2.5))
        )
        return [
            rulekit.example(np.array([[0], [3]]), x),  # integer orders, broadcast
            rulekit.example(1, x[0].astype(np.float32)),
            rulekit.example(2, 1.7),
            last,
        ]

    return _rng_examples(seed, make)


def _bessel(
    ufunc: np.ufunc, deriv: Callable[[Any, Any, Any], Any], adjoint: str, seed: int,
    lo: float, cplx: bool = True,
) -> None:  # fmt: skip
    """Register `ufunc(v, z)` (v a constant order) with ∂z = deriv(v, z, y)."""
    z = operand_pattern(ufunc)
    if cplx:
        z = Union[z, _COMPLEX]
    _register(ufunc, (ORDER, z), deriv, adjoint,
              _bessel_examples(seed, lo, cplx), {0: "the order v"}, _ORDER_WHY)  # fmt: skip


# J_v' = (J_{v−1} − J_{v+1})/2 (holomorphic in z; also at z = 0 and for negative v)
_bessel(jv, lambda v, z, y: 0.5 * (sp.jv(np.subtract(v, 1), z) - sp.jv(np.add(v, 1), z)),
        "z̄ += conj((J_{v−1}(z) − J_{v+1}(z))/2)·ȳ", 320, 0.0)  # fmt: skip
# I_v' = (I_{v−1} + I_{v+1})/2
_bessel(iv, lambda v, z, y: 0.5 * (sp.iv(np.subtract(v, 1), z) + sp.iv(np.add(v, 1), z)),
        "z̄ += conj((I_{v−1}(z) + I_{v+1}(z))/2)·ȳ", 321, -3.0)  # fmt: skip
# Y_n' = (Y_{n−1} − Y_{n+1})/2 (real x > 0; Y_{−n} = (−1)ⁿ Y_n makes n = 0 work)
_bessel(yn, lambda n, x, y: 0.5 * (sp.yn(np.subtract(n, 1), x) - sp.yn(np.add(n, 1), x)),
        "x̄ += (Y_{n−1}(x) − Y_{n+1}(x))/2·ȳ", 322, 0.5, cplx=False)  # fmt: skip

# K_v' = −(K_{v−1} + K_{v+1})/2 (holomorphic off the cut z ≤ 0; K_{−v} = K_v). x = 0: K_v is
# +inf and so is −K_v' (the derivative is −inf); real x < 0: NaN (scipy's value is NaN).
_bessel(kv, lambda v, z, y: -0.5 * (sp.kv(np.subtract(v, 1), z) + sp.kv(np.add(v, 1), z)),
        "z̄ −= conj((K_{v−1}(z) + K_{v+1}(z))/2)·ȳ", 325, 0.2)  # fmt: skip
# kve = e^{z}·K_v(z) (e^{z}, not e^{|Re z|}: holomorphic)  ⇒  kve' = kve − (kve_{v−1} + kve_{v+1})/2
_bessel(kve, lambda v, z, y: y - 0.5 * (sp.kve(np.subtract(v, 1), z) + sp.kve(np.add(v, 1), z)),
        "z̄ += conj(kve(v, z) − (kve(v−1, z) + kve(v+1, z))/2)·ȳ", 326, 0.2)  # fmt: skip


def _d_ive_real(v: Any, x: Any, y: Any) -> Any:
    """ive = e^{−|x|} I_v(x)  ⇒  ive' = (ive(v−1, x) + ive(v+1, x))/2 − sign(x)·ive(v, x).
    At x = 0 with v = 0 (a kink, one-sided derivatives ∓1) sign(0) = 0 gives their mean."""
    return 0.5 * (sp.ive(np.subtract(v, 1), x) + sp.ive(np.add(v, 1), x)) - np.sign(x) * y


_register(ive, (ORDER, operand_pattern(ive)), _d_ive_real,
          "x̄ += ((ive(v−1) + ive(v+1))/2 − sign(x)·ive(v))·ȳ",
          _bessel_examples(323, -4.0, cplx=False), {0: "the order v"}, _ORDER_WHY)  # fmt: skip


def _ive_complex_examples(rng: np.random.Generator) -> list[Any]:
    z = rng.uniform(0.3, 3.0, (2, 3)) * rng.choice([-1.0, 1.0], (2, 3))
    w = z + 1j * rng.uniform(-2.0, 2.0, (2, 3))
    return [
        rulekit.example(np.array([0, 1, 2]), w),
        rulekit.example(1, w[0].astype(np.complex64)),
        rulekit.example(2, complex(w[1, 1])),
    ]


@rulekit.rrule.register(ive, ORDER, _COMPLEX, examples=_rng_examples(324, _ive_complex_examples))
def ive_complex_rrule(f: CoDual, v: CoDual, z: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = ive(v, z) = I_v(z)·e^{−s·Re z}, s = sign(Re z): not holomorphic. With
    dy = A dz + B dz̄, A = (ive(v−1) + ive(v+1))/2 − s·y/2, B = −s·y/2, the real-inner-product
    cotangent is z̄ += conj(A)·ȳ + B·conj(ȳ) (for real z this is the real rule)."""
    check_ufunc_kwargs(ive, kwargs)
    refuse_active("ive", (v, z), {0: "the order v"}, _ORDER_WHY)
    y = ive(v.x, z.x, **kwargs)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, Any, Any]:
        if not active(z):
            return NO_R, NO_R, NO_R
        g = cot(y, out.dx, dy)
        half = 0.5 * np.sign(np.real(z.x)) * y
        A = 0.5 * (sp.ive(np.subtract(v.x, 1), z.x) + sp.ive(np.add(v.x, 1), z.x)) - half
        return NO_R, NO_R, accumulate(z, np.conj(A) * g - half * np.conj(g))

    return out, pullback


def _real_unary(ufunc: np.ufunc, deriv: Callable[[Any, Any], Any], adjoint: str,
                examples: Examples) -> None:  # fmt: skip
    declare(ufunc, deriv, patterns=(operand_pattern(ufunc),), examples=examples, adjoint=adjoint)


# J₀' = −J₁,  J₁' = (J₀ − J₂)/2,  Y₀' = −Y₁,  Y₁' = (Y₀ − Y₂)/2
_real_unary(j0, lambda x, y: -sp.j1(x), "x̄ −= J₁(x)·ȳ",
            _unary_examples(330, -5.0, 5.0, np.float32(0.0)))  # fmt: skip
_real_unary(j1, lambda x, y: 0.5 * (sp.j0(x) - sp.jv(2, x)), "x̄ += (J₀(x) − J₂(x))/2·ȳ",
            _unary_examples(331, -5.0, 5.0, np.float64(0.0)))  # fmt: skip
_real_unary(y0, lambda x, y: -sp.y1(x), "x̄ −= Y₁(x)·ȳ",
            _unary_examples(332, 0.5, 5.0, np.float32(3.0)))  # fmt: skip
_real_unary(y1, lambda x, y: 0.5 * (sp.y0(x) - sp.yn(2, x)), "x̄ += (Y₀(x) − Y₂(x))/2·ȳ",
            _unary_examples(333, 0.5, 5.0, np.float64(3.0)))  # fmt: skip


# -- multigammaln (a Python function: the wrapper) ----------------------------------------------


def _multigammaln_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(340)
    return [
        rulekit.example(rng.uniform(2.0, 5.0, (2, 3)), 3),
        rulekit.example(rng.uniform(1.0, 5.0, 4).astype(np.float32), 2),
        rulekit.example(2.5, 4),
        rulekit.example(np.float64(0.7), 1),  # d = 1: gammaln
    ]


@rulekit.rrule.register(
    multigammaln,
    Union[Array[np.floating], float, np.floating],
    Union[int, np.integer],
    examples=_multigammaln_examples,
)
def multigammaln_rrule(f: CoDual, a: CoDual, d: CoDual) -> tuple[CoDual, Any]:
    """y = log Γ_d(a) = d(d−1)/4·log π + Σ_{j<d} log Γ(a − j/2) (d a constant integer)
    ⇒  ā += Σ_{j<d} ψ(a − j/2)·ȳ."""
    y = sp.multigammaln(a.x, d.x)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, Any, Any]:
        if not active(a):
            return NO_R, NO_R, NO_R
        half = np.arange(int(d.x)) / 2.0
        psi = sp.digamma(np.expand_dims(a.x, -1) - half.astype(np.result_type(a.x, np.float32)))
        return NO_R, accumulate(a, np.sum(psi, axis=-1) * cot(y, out.dx, dy)), NO_R

    return out, pullback
