"""Rules for NumPy's unary ufuncs, and `np.sinc`.

Each rule is the generic unary rule of `rules.numpy.ufuncs._common` parameterised by its
pullback, written next to it with its adjoint. Complex inputs follow the JAX/PyTorch
convention `x̄ += conj(f'(x))·ȳ`; functions numpy defines for real inputs only are
registered for real inputs only. Piecewise-constant functions (`floor`, `sign`,
comparisons, ...) pass through with a zero adjoint. Conventions at non-differentiable
points are in docs/conventions-ufuncs.md. Importing this module also imports
`rules.numpy.ufuncs.binary` (binary ufuncs) and `rules.numpy.ufuncs.misc` (`np.real`/`imag`/`angle`,
`modf`, `frexp`, the piecewise-constant ufuncs, `np.clip`, `np.where`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import rulekit
from rules.numpy.ufuncs._common import (
    DOMAINS,
    Inexact,
    Real,
    complex_values,
    conj,
    over,
    scale,
    unary,
)

__all__ = ["unary_examples"]  # the rules are reached through the registry

_LN2, _LN10 = math.log(2.0), math.log(10.0)
_RAD, _DEG = math.pi / 180.0, 180.0 / math.pi


def unary_examples(domain: str, cplx: bool, seed: int) -> Callable[[], list[rulekit.Example]]:
    """f64 matrix, f32 vector, a numpy scalar, and a complex vector when `cplx`."""

    def examples() -> list[rulekit.Example]:
        r = np.random.default_rng(seed)
        d = DOMAINS[domain]
        exs = [
            rulekit.example(d(r, (3, 4))),
            rulekit.example(d(r, (5,)).astype(np.float32)),
            rulekit.example(np.float64(d(r, ()))),
        ]
        if cplx:
            exs.append(rulekit.example(complex_values(r, domain, (4,))))
        return exs

    return examples


def _register(uf: Any, pull: Any, pattern: Any, domain: str, quiet: bool = False) -> None:
    exs = unary_examples(domain, pattern is Inexact, seed=sum(map(ord, uf.__name__)))
    rulekit.rrule.register(uf, pattern, examples=exs)(unary(uf, pull, quiet))


# -- arithmetic -------------------------------------------------------------------------------


def _negative(x: Any, y: Any, g: Any) -> Any:
    """y = −x ⇒ x̄ += −ȳ."""
    return np.negative(g)


def _positive(x: Any, y: Any, g: Any) -> Any:
    """y = +x ⇒ x̄ += ȳ."""
    return g


def _conjugate(x: Any, y: Any, g: Any) -> Any:
    """y = conj(x) ⇒ x̄ += conj(ȳ) (real x: ȳ)."""
    return conj(g)


def _reciprocal(x: Any, y: Any, g: Any) -> Any:
    """y = 1/x ⇒ x̄ += −conj(y²)·ȳ."""
    t = np.square(y)
    return scale(np.negative(t, out=t), g)


def _square(x: Any, y: Any, g: Any) -> Any:
    """y = x² ⇒ x̄ += 2·conj(x)·ȳ."""
    return scale(np.multiply(x, 2), g)


def _sqrt(x: Any, y: Any, g: Any) -> Any:
    """y = √x ⇒ x̄ += ȳ / (2·conj(y)); +inf·ȳ at x = 0 (nan where ȳ = 0)."""
    return over(g, np.multiply(y, 2))


def _cbrt(x: Any, y: Any, g: Any) -> Any:
    """y = ∛x ⇒ x̄ += ȳ / (3y²); +inf·ȳ at x = 0."""
    t = np.square(y)
    t *= 3
    return over(g, t)


def _absolute(x: Any, y: Any, g: Any) -> Any:
    """y = |x| ⇒ x̄ += sign(x)·ȳ (real), x̄ += ȳ·x/|x| (complex); 0 at x = 0."""
    if x.dtype.kind != "c":
        return scale(np.sign(x), g)
    t = np.divide(x, y, out=np.zeros_like(x), where=y != 0)
    return np.multiply(t, g, out=t)


for _uf, _pull, _pat, _dom, _quiet in [
    (np.negative, _negative, Inexact, "any", False),
    (np.positive, _positive, Inexact, "any", False),
    (np.conjugate, _conjugate, Inexact, "any", False),
    (np.reciprocal, _reciprocal, Inexact, "nonzero", False),
    (np.square, _square, Inexact, "any", False),
    (np.sqrt, _sqrt, Inexact, "pos", True),
    (np.cbrt, _cbrt, Real, "nonzero", True),
    (np.absolute, _absolute, Inexact, "nonzero", False),
    (np.fabs, _absolute, Real, "nonzero", False),
]:
    _register(_uf, _pull, _pat, _dom, _quiet)


# -- exponentials and logarithms ------------------------------------------------------------


def _exp(x: Any, y: Any, g: Any) -> Any:
    """y = eˣ ⇒ x̄ += conj(y)·ȳ."""
    return np.multiply(conj(y), g)


def _exp2(x: Any, y: Any, g: Any) -> Any:
    """y = 2ˣ ⇒ x̄ += ln2·conj(y)·ȳ."""
    return scale(np.multiply(y, _LN2), g)


def _expm1(x: Any, y: Any, g: Any) -> Any:
    """y = eˣ − 1 ⇒ x̄ += conj(y + 1)·ȳ."""
    return scale(np.add(y, 1), g)


def _log(x: Any, y: Any, g: Any) -> Any:
    """y = ln x ⇒ x̄ += ȳ / conj(x)."""
    return np.divide(g, conj(x))


def _log2(x: Any, y: Any, g: Any) -> Any:
    """y = log₂ x ⇒ x̄ += ȳ / (ln2·conj(x))."""
    return over(g, np.multiply(x, _LN2))


def _log10(x: Any, y: Any, g: Any) -> Any:
    """y = log₁₀ x ⇒ x̄ += ȳ / (ln10·conj(x))."""
    return over(g, np.multiply(x, _LN10))


def _log1p(x: Any, y: Any, g: Any) -> Any:
    """y = ln(1 + x) ⇒ x̄ += ȳ / conj(1 + x)."""
    return over(g, np.add(x, 1))


for _uf, _pull, _dom in [
    (np.exp, _exp, "any"),
    (np.exp2, _exp2, "any"),
    (np.expm1, _expm1, "any"),
    (np.log, _log, "pos"),
    (np.log2, _log2, "pos"),
    (np.log10, _log10, "pos"),
    (np.log1p, _log1p, "pos"),
]:
    _register(_uf, _pull, Inexact, _dom)


# -- trigonometric and hyperbolic functions and their inverses -------------------------------


def _sin(x: Any, y: Any, g: Any) -> Any:
    """y = sin x ⇒ x̄ += conj(cos x)·ȳ."""
    return scale(np.cos(x), g)


def _cos(x: Any, y: Any, g: Any) -> Any:
    """y = cos x ⇒ x̄ += −conj(sin x)·ȳ."""
    t = np.sin(x)
    return scale(np.negative(t, out=t), g)


def _tan(x: Any, y: Any, g: Any) -> Any:
    """y = tan x ⇒ x̄ += conj(1 + y²)·ȳ."""
    t = np.square(y)
    t += 1
    return scale(t, g)


def _one_minus_square(x: Any) -> Any:
    """1 − x² as (1 − x)(1 + x): accurate near x = ±1, where 1 − x² cancels."""
    t = np.subtract(1, x)
    t *= np.add(1, x)
    return t


def _arcsin(x: Any, y: Any, g: Any) -> Any:
    """y = arcsin x ⇒ x̄ += ȳ / conj(√(1 − x²)); ±inf at x = ±1."""
    t = _one_minus_square(x)
    return over(g, np.sqrt(t, out=t))


def _arccos(x: Any, y: Any, g: Any) -> Any:
    """y = arccos x ⇒ x̄ += −ȳ / conj(√(1 − x²)); ∓inf at x = ±1."""
    t = _arcsin(x, y, g)
    return np.negative(t, out=t)


def _arctan(x: Any, y: Any, g: Any) -> Any:
    """y = arctan x ⇒ x̄ += ȳ / conj(1 + x²)."""
    t = np.square(x)
    t += 1
    return over(g, t)


def _sinh(x: Any, y: Any, g: Any) -> Any:
    """y = sinh x ⇒ x̄ += conj(cosh x)·ȳ."""
    return scale(np.cosh(x), g)


def _cosh(x: Any, y: Any, g: Any) -> Any:
    """y = cosh x ⇒ x̄ += conj(sinh x)·ȳ."""
    return scale(np.sinh(x), g)


def _tanh(x: Any, y: Any, g: Any) -> Any:
    """y = tanh x ⇒ x̄ += conj(1 − y²)·ȳ."""
    t = np.square(y)
    return scale(np.subtract(1, t, out=t), g)


def _arcsinh(x: Any, y: Any, g: Any) -> Any:
    """y = arcsinh x ⇒ x̄ += ȳ / conj(√(1 + x²))."""
    t = np.square(x)
    t += 1
    return over(g, np.sqrt(t, out=t))


def _arccosh(x: Any, y: Any, g: Any) -> Any:
    """y = arccosh x ⇒ x̄ += ȳ / conj(√(x − 1)·√(x + 1)) (= √(x² − 1) for real x); inf at 1."""
    if x.dtype.kind == "c":  # the product of the two roots is the branch numpy's arccosh uses
        t = np.sqrt(x - 1)
        t *= np.sqrt(x + 1)
    else:
        t = np.subtract(x, 1)  # (x − 1)(x + 1): no cancellation near x = 1
        t *= np.add(x, 1)
        np.sqrt(t, out=t)
    return over(g, t)


def _arctanh(x: Any, y: Any, g: Any) -> Any:
    """y = arctanh x ⇒ x̄ += ȳ / conj(1 − x²)."""
    return over(g, _one_minus_square(x))


def _deg2rad(x: Any, y: Any, g: Any) -> Any:
    """y = x·π/180 ⇒ x̄ += ȳ·π/180."""
    return np.multiply(g, _RAD)


def _rad2deg(x: Any, y: Any, g: Any) -> Any:
    """y = x·180/π ⇒ x̄ += ȳ·180/π."""
    return np.multiply(g, _DEG)


for _uf, _pull, _pat, _dom, _quiet in [
    (np.sin, _sin, Inexact, "any", False),
    (np.cos, _cos, Inexact, "any", False),
    (np.tan, _tan, Inexact, "unit", False),
    (np.arcsin, _arcsin, Inexact, "unit", True),
    (np.arccos, _arccos, Inexact, "unit", True),
    (np.arctan, _arctan, Inexact, "any", False),
    (np.sinh, _sinh, Inexact, "any", False),
    (np.cosh, _cosh, Inexact, "any", False),
    (np.tanh, _tanh, Inexact, "any", False),
    (np.arcsinh, _arcsinh, Inexact, "any", False),
    (np.arccosh, _arccosh, Inexact, "gt1", True),
    (np.arctanh, _arctanh, Inexact, "unit", True),
    (np.deg2rad, _deg2rad, Real, "any", False),
    (np.radians, _deg2rad, Real, "any", False),
    (np.rad2deg, _rad2deg, Real, "any", False),
    (np.degrees, _rad2deg, Real, "any", False),
]:
    _register(_uf, _pull, _pat, _dom, _quiet)


# -- np.sinc (a numpy function, reached through __array_function__) ---------------------------


def _sinc(x: Any, y: Any, g: Any) -> Any:
    """y = sin(u)/u, u = πx ⇒ x̄ += conj(π·(u·cos u − sin u)/u²)·ȳ.

    Computed in double precision; for |u| < 0.1 from the series
    π·(−u/3 + u³/30 − u⁵/840 + u⁷/45360), which the direct form loses to cancellation
    (and which is 0 at x = 0, where sinc is smooth).
    """
    u = np.multiply(x, np.pi, dtype=np.result_type(x.dtype, np.float64))
    t = np.cos(u)
    t *= u
    t -= np.sin(u)
    t /= np.square(u)
    t *= np.pi
    small = np.abs(u) < 0.1
    if small.any():
        v = u[small]
        v2 = v * v
        t[small] = np.pi * v * (-1 / 3 + v2 * (1 / 30 + v2 * (-1 / 840 + v2 / 45360)))
    return scale(t, g)


_register(np.sinc, _sinc, Inexact, "any", quiet=True)
