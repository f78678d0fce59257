"""Rules for NumPy's unary ufuncs, and `np.sinc`, declared by their derivatives.

Each differentiable ufunc is one `rulekit.elementwise` declaration: `f'(x)` written
from x and y = f(x) with numpy functions, from which the plain rule (x̄ += conj(f'(x))·ȳ,
the JAX/PyTorch convention for complex x), the real-scalar fast path (`.scalar`) and
the numba kernels of the allocation-free rules (`.fused`) all derive. Functions numpy
defines for real inputs only are registered for real inputs only. The non-holomorphic
`conjugate` and complex `absolute` are written by hand below, their adjoints beside
them. Piecewise-constant functions (`floor`, `sign`, comparisons, ...) are in `.misc`.
Conventions at non-differentiable points are in docs/conventions-ufuncs.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import rulekit
from rulekit import CoDual
from rules._support.cotangents import NO_R
from rules._support.select import select
from rules.numpy.ufuncs._common import (
    DOMAINS,
    Inexact,
    Real,
    accumulate,
    complex_values,
    conj,
    cotangent,
    declare,
    output,
    ufunc_kwargs,
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


def _declare(
    uf: Any, *derivs: Any, domain: str, real: bool = False, quiet: bool = False, doc: str = ""
) -> Any:
    """Declare unary `uf` (`doc`: its adjoint) for real, or real and complex, inputs."""
    pattern = Real if real else Inexact
    exs = unary_examples(domain, not real, seed=sum(map(ord, uf.__name__)))
    return declare(uf, *derivs, patterns=[(pattern,)], examples=[exs], quiet=quiet, doc=doc or None)


# -- arithmetic -------------------------------------------------------------------------------
# (`quiet`: the derivative is infinite where f is finite, √x at 0; no numpy warnings there)

_declare(np.negative, lambda x, y: -1.0, domain="any", doc="y = −x ⇒ x̄ += −ȳ")
_declare(np.positive, lambda x, y: 1.0, domain="any", doc="y = +x ⇒ x̄ += ȳ")
_declare(np.reciprocal, lambda x, y: -(y * y), domain="nonzero", doc="y = 1/x ⇒ x̄ += −conj(y²)·ȳ")
_declare(np.square, lambda x, y: 2 * x, domain="any", doc="y = x² ⇒ x̄ += 2·conj(x)·ȳ")
_declare(
    np.sqrt,
    lambda x, y: 1 / (2 * y),
    domain="pos",
    quiet=True,
    doc="y = √x ⇒ x̄ += ȳ / (2·conj(y)); +inf·ȳ at x = 0",
)
_declare(
    np.cbrt,
    lambda x, y: 1 / (3 * (y * y)),
    domain="nonzero",
    real=True,
    quiet=True,
    doc="y = ∛x ⇒ x̄ += ȳ / (3y²); +inf·ȳ at x = 0",
)


def _d_abs(x: Any, y: Any) -> Any:
    """y = |x| (real) ⇒ x̄ += sign(x)·ȳ, 0 at x = 0 (complex x: `absolute_rrule` below)."""
    return np.sign(x)


_declare(np.fabs, _d_abs, domain="nonzero", real=True, doc=_d_abs.__doc__ or "")
_abs = declare(np.absolute, _d_abs, patterns=[], examples=[])  # (registered below)


def conjugate_rrule(f: CoDual, x: CoDual, **kw: Any) -> tuple[CoDual, Any]:
    """y = conj(x) ⇒ x̄ += conj(ȳ) (not holomorphic; real x: x̄ += ȳ)."""
    kw, X = ufunc_kwargs(np.conjugate, kw, x.x)
    out = output(np.conjugate(X, **kw))

    def conjugate_pullback(dy: Any) -> tuple[Any, Any]:
        if x.dx is None:
            return NO_R, NO_R
        g = cotangent(out, dy)
        return NO_R, accumulate(x, None if g is None else conj(g))

    return out, conjugate_pullback


def absolute_rrule(f: CoDual, x: CoDual, **kw: Any) -> tuple[CoDual, Any]:
    """y = |x| ⇒ x̄ += sign(x)·ȳ (real x: the declaration's rule), x̄ += ȳ·x/|x| (complex,
    not holomorphic); 0 at x = 0."""
    X = x.x
    if not np.iscomplexobj(X):
        return _abs.rule(f, x, **kw)
    kw, X = ufunc_kwargs(np.absolute, kw, X)
    out = output(np.absolute(X, **kw))

    def absolute_pullback(dy: Any) -> tuple[Any, Any]:
        g = cotangent(out, dy)
        if x.dx is None or g is None:
            return NO_R, (NO_R if x.dx is None else accumulate(x, None))
        X1 = np.reshape(X, g.shape) if np.ndim(X) == 0 else X
        # x/|x|, scaled first by max(|Re x|, |Im x|): in single precision a subnormal x
        # would otherwise overflow the complex division (inf + nan·i for |x| ~ 1e-40)
        s = np.maximum(np.abs(X1.real), np.abs(X1.imag))
        nz = s != 0
        t = np.zeros_like(X1)
        np.divide(X1.real, s, out=t.real, where=nz)  # (real divisions: no complex overflow)
        np.divide(X1.imag, s, out=t.imag, where=nz)
        np.divide(t, np.abs(t), out=t, where=nz)
        return NO_R, accumulate(x, np.multiply(t, g, out=t))

    return out, absolute_pullback


_uf: Any
for _uf, _rule in ((np.conjugate, conjugate_rrule), (np.absolute, absolute_rrule)):
    _exs = unary_examples("nonzero", True, seed=sum(map(ord, _uf.__name__)))
    rulekit.rrule.register(_uf, Inexact, examples=_exs)(_rule)


# -- exponentials and logarithms ------------------------------------------------------------

_declare(np.exp, lambda x, y: y, domain="any", doc="y = eˣ ⇒ x̄ += conj(y)·ȳ")
_declare(np.exp2, lambda x, y: y * _LN2, domain="any", doc="y = 2ˣ ⇒ x̄ += ln2·conj(y)·ȳ")
_declare(np.expm1, lambda x, y: y + 1, domain="any", doc="y = eˣ − 1 ⇒ x̄ += conj(y + 1)·ȳ")
_declare(np.log, lambda x, y: 1 / x, domain="pos", doc="y = ln x ⇒ x̄ += ȳ / conj(x)")
_declare(
    np.log2, lambda x, y: 1 / (x * _LN2), domain="pos", doc="y = log2(x) ⇒ x̄ += ȳ / (ln2·conj(x))"
)
_declare(
    np.log10,
    lambda x, y: 1 / (x * _LN10),
    domain="pos",
    doc="y = log10(x) ⇒ x̄ += ȳ / (ln10·conj(x))",
)
_declare(
    np.log1p, lambda x, y: 1 / (1 + x), domain="pos", doc="y = log1p(x) ⇒ x̄ += ȳ / conj(1 + x)"
)


# -- trigonometric and hyperbolic functions and their inverses -------------------------------
# (1 − x² as (1 − x)(1 + x): accurate near x = ±1, where 1 − x² cancels)

_declare(np.sin, lambda x, y: np.cos(x), domain="any", doc="y = sin(x) ⇒ x̄ += conj(cos x)·ȳ")
_declare(np.cos, lambda x, y: -np.sin(x), domain="any", doc="y = cos(x) ⇒ x̄ += −conj(sin x)·ȳ")
_declare(np.tan, lambda x, y: 1 + y * y, domain="unit", doc="y = tan(x) ⇒ x̄ += conj(1 + y²)·ȳ")
_d_arcsin = _declare(
    np.arcsin,
    lambda x, y: 1 / np.sqrt((1 - x) * (1 + x)),
    domain="unit",
    quiet=True,
    doc="y = arcsin x ⇒ x̄ += ȳ / conj(√(1 − x²)); ±inf at x = ±1",
).derivs[0]
_declare(
    np.arccos,
    lambda x, y: -_d_arcsin(x, y),
    domain="unit",
    quiet=True,
    doc="y = arccos x ⇒ x̄ += −ȳ / conj(√(1 − x²)); ∓inf at x = ±1",
)
_declare(
    np.arctan,
    lambda x, y: 1 / (1 + x * x),
    domain="any",
    doc="y = arctan(x) ⇒ x̄ += ȳ / conj(1 + x²)",
)
_declare(np.sinh, lambda x, y: np.cosh(x), domain="any", doc="y = sinh(x) ⇒ x̄ += conj(cosh x)·ȳ")
_declare(np.cosh, lambda x, y: np.sinh(x), domain="any", doc="y = cosh(x) ⇒ x̄ += conj(sinh x)·ȳ")
_declare(np.tanh, lambda x, y: 1 - y * y, domain="any", doc="y = tanh(x) ⇒ x̄ += conj(1 − y²)·ȳ")
_declare(
    np.arcsinh,
    lambda x, y: 1 / np.sqrt(x * x + 1),
    domain="any",
    doc="y = arcsinh(x) ⇒ x̄ += ȳ / conj(√(1 + x²))",
)
# (arccosh: √(x − 1)·√(x + 1) is √(x² − 1) without cancellation near 1 for real x, and
# for complex x the branch numpy's arccosh uses)
_declare(
    np.arccosh,
    lambda x, y: 1 / (np.sqrt(x - 1) * np.sqrt(x + 1)),
    domain="gt1",
    quiet=True,
    doc="y = arccosh x ⇒ x̄ += ȳ / conj(√(x − 1)·√(x + 1)); inf at x = 1",
)
_declare(
    np.arctanh,
    lambda x, y: 1 / ((1 - x) * (1 + x)),
    domain="unit",
    quiet=True,
    doc="y = arctanh x ⇒ x̄ += ȳ / conj(1 − x²); ±inf at x = ±1",
)
for _uf in (np.deg2rad, np.radians):  # y = x·π/180 ⇒ x̄ += ȳ·π/180
    _declare(_uf, lambda x, y: _RAD, domain="any", real=True, doc="y = x·π/180 ⇒ x̄ += ȳ·π/180")
for _uf in (np.rad2deg, np.degrees):  # y = x·180/π ⇒ x̄ += ȳ·180/π
    _declare(_uf, lambda x, y: _DEG, domain="any", real=True, doc="y = x·180/π ⇒ x̄ += ȳ·180/π")


# -- np.sinc (a numpy function, reached through __array_function__) ---------------------------

_PI = np.float64(np.pi)  # (a float64 scalar: the derivative is computed in double precision)


def _d_sinc(x: Any, y: Any) -> Any:
    """d/dx sin(u)/u, u = πx: π·(u·cos u − sin u)/u², in double precision; for |u| < 0.1
    from the series π·(−u/3 + u³/30 − u⁵/840 + u⁷/45360), which the direct form loses to
    cancellation (and which is 0 at x = 0, where sinc is smooth)."""
    u = _PI * x
    v = u * u
    series = _PI * u * (-1 / 3 + v * (1 / 30 + v * (-1 / 840 + v / 45360)))
    return select(np.abs(u) < 0.1, series, _PI * (u * np.cos(u) - np.sin(u)) / v)


# y = sin(πx)/(πx) ⇒ x̄ += conj(sinc'(x))·ȳ
_declare(np.sinc, _d_sinc, domain="any", quiet=True, doc=_d_sinc.__doc__ or "")
