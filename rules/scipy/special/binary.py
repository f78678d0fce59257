"""Rules for the two-argument scipy.special functions: the ufuncs `xlogy`, `xlog1py`,
`rel_entr`, `beta`, `betaln`, `owens_t`, and `polygamma` (a Python function: use the wrapper
`rules.scipy.special.polygamma`).

Operands broadcast like numpy's; each gets `x̄ += unbroadcast(conj(∂f/∂x)·ȳ)`.
An integer or boolean operand is a constant (no cotangent). Where a function
is not differentiable the rules follow docs/conventions-special.md: the exact
one-sided derivative where the function is defined on one side only (±inf),
0 for a partial of a function that is identically 0 along that argument
(`xlogy(0, y)`), NaN outside the domain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import numpy as np
import scipy.special as sp

import rulekit
from rulekit import Array, CoDual
from rules._support.cotangents import NO_R, accumulate
from rules._support.outputs import new_output
from rules.scipy.special._common import active, declare, operand_pattern

__all__ = ["beta", "betaln", "owens_t", "polygamma", "rel_entr", "xlog1py", "xlogy"]

xlogy, xlog1py, rel_entr, beta, betaln = sp.xlogy, sp.xlog1py, sp.rel_entr, sp.beta, sp.betaln
owens_t = sp.owens_t
polygamma = rulekit.primitive(sp.polygamma)


def _binary(
    ufunc: np.ufunc,
    d0: Callable[..., Any],
    d1: Callable[..., Any],
    adjoint: str,
    examples: Callable[[], list[rulekit.Example]],
    complex_: bool = False,
) -> None:
    """Declare `ufunc(x, y)` by its two partials `d(x, y, out)`; integer operands are constants."""
    p = operand_pattern(ufunc, complex_=complex_, const=True)
    declare(ufunc, d0, d1, patterns=(p, p), examples=examples, adjoint=adjoint)


def _where0(x: Any, v: Any) -> Any:
    """v, with 0 where x == 0 (a partial of a function that vanishes identically at x = 0)."""
    return np.where(np.asarray(x) == 0, 0, v)


# -- x·log(y), x·log1p(y) -----------------------------------------------------------------------


# xlogy: ∂x = log y (also at x = 0, where xlogy is differentiable in x for y > 0);
# ∂y = x/y, and 0 where x = 0 (xlogy(0, y) = 0 for every y). xlog1py: log1p(y), x/(1 + y).
_xlogy_dy = lambda x, y, out: _where0(x, np.true_divide(x, y))  # noqa: E731
_xlog1py_dy = lambda x, y, out: _where0(x, np.true_divide(x, np.add(y, 1)))  # noqa: E731


def _xlogy_examples(shift: float) -> Callable[[], list[rulekit.Example]]:
    def make() -> list[rulekit.Example]:
        rng = np.random.default_rng(200)
        x = rng.uniform(-1.0, 2.0, (2, 3))
        x[0, 1] = 0.0  # x = 0: still differentiable in x (∂x = log y), ∂y = 0
        y = rng.uniform(0.2, 3.0, 3) + shift
        x32, y32 = x.astype(np.float32), rng.uniform(0.2, 3.0, (2, 1)).astype(np.float32) + shift
        z = rng.uniform(0.5, 2.0, 3) + 1j * rng.uniform(-1.0, 1.0, 3)
        return [
            rulekit.example(x, y),  # broadcast (2, 3) × (3,)
            rulekit.example(x32, y32),
            rulekit.example(1.5, y),  # Python float × array
            rulekit.example(x[0] + 0.5j, z),  # complex
        ]

    return make


# x·log(y)  ⇒  x̄ += conj(log y)·ȳ,  ȳ_y += conj(x/y)·ȳ
_binary(
    xlogy,
    lambda x, y, out: np.log(y),
    _xlogy_dy,
    "x̄ += conj(log y)·z̄, ȳ += conj(x/y)·z̄ (0 where x = 0)",
    _xlogy_examples(0.0),
    complex_=True,
)
# x·log1p(y)  ⇒  x̄ += conj(log1p y)·z̄,  ȳ += conj(x/(1+y))·z̄
_binary(
    xlog1py,
    lambda x, y, out: np.log1p(y),
    _xlog1py_dy,
    "x̄ += conj(log1p y)·z̄, ȳ += conj(x/(1+y))·z̄",
    _xlogy_examples(-0.9),
    complex_=True,
)


# -- relative entropy ---------------------------------------------------------------------------


def _rel_entr_dx(x: Any, y: Any, out: Any) -> Any:
    """Inside (x > 0, y > 0): log(x/y) + 1. At x = 0 < y: −inf (one-sided); at x = 0 = y:
    NaN. Outside the domain (rel_entr = inf): NaN."""
    x, y = np.asarray(x), np.asarray(y)
    dx = np.where((x > 0) & (y > 0), np.log(x) - np.log(y) + 1, np.nan)
    return np.where((x == 0) & (y > 0), -np.inf, dx)


def _rel_entr_dy(x: Any, y: Any, out: Any) -> Any:
    """Inside: −x/y; at x = 0 ≤ y: 0; outside the domain: NaN."""
    x, y = np.asarray(x), np.asarray(y)
    edge = (x == 0) & (y >= 0)
    return np.where((x > 0) & (y > 0), -(x / y), np.where(edge, 0.0, np.nan))


def _rel_entr_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(210)
    p, q = rng.uniform(0.1, 2.0, (2, 3)), rng.uniform(0.1, 2.0, 3)
    return [
        rulekit.example(p, q),
        rulekit.example(p[0].astype(np.float32), q.astype(np.float32)),
        rulekit.example(0.7, q),
        rulekit.example(p, 1),  # an integer constant
    ]


# x·log(x/y)  ⇒  x̄ += (log(x/y) + 1)·z̄,  ȳ += −(x/y)·z̄
_binary(
    rel_entr, _rel_entr_dx, _rel_entr_dy, "x̄ += (log(x/y) + 1)·z̄, ȳ −= (x/y)·z̄", _rel_entr_examples
)


# -- beta function ------------------------------------------------------------------------------


def _d_betaln_a(a: Any, b: Any, out: Any) -> Any:
    """∂a log|B(a, b)| = ψ(a) − ψ(a+b) (∂b: by symmetry, `_d_betaln_b`)."""
    return sp.digamma(a) - sp.digamma(np.add(a, b))


def _d_betaln_b(a: Any, b: Any, out: Any) -> Any:
    return _d_betaln_a(b, a, out)


def _beta_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(220)
    a, b = rng.uniform(0.5, 3.0, (2, 3)), rng.uniform(0.5, 3.0, 3)
    return [
        rulekit.example(a, b),
        rulekit.example(a.astype(np.float32), b.astype(np.float32)),
        rulekit.example(2, b),  # an integer constant
        rulekit.example(1.5, np.float64(2.5)),  # scalars
    ]


# B(a, b) = Γ(a)Γ(b)/Γ(a+b)  ⇒  ā += B·(ψ(a) − ψ(a+b))·ȳ,  b̄ += B·(ψ(b) − ψ(a+b))·ȳ
_binary(
    beta,
    lambda a, b, out: out * _d_betaln_a(a, b, out),
    lambda a, b, out: out * _d_betaln_b(a, b, out),
    "ā += B·(ψ(a) − ψ(a+b))·ȳ, b̄ += B·(ψ(b) − ψ(a+b))·ȳ",
    _beta_examples,
)
# log|B(a, b)|  ⇒  ā += (ψ(a) − ψ(a+b))·ȳ,  b̄ += (ψ(b) − ψ(a+b))·ȳ
_binary(
    betaln,
    _d_betaln_a,
    _d_betaln_b,
    "ā += (ψ(a) − ψ(a+b))·ȳ, b̄ += (ψ(b) − ψ(a+b))·ȳ",
    _beta_examples,
)


# -- Owen's T function ---------------------------------------------------------------------------

_INV_2SQRT_2PI = 0.5 / np.sqrt(2.0 * np.pi)


def _d_owens_t_h(h: Any, a: Any, out: Any) -> Any:
    """∂h T = −(h/2π)∫₀^a e^{−h²(1+t²)/2} dt = −e^{−h²/2}·erf(ha/√2)/(2√(2π)). 0 at h = 0,
    also for a = ±inf, where T(h, ±∞) = ±Φ(−|h|)/2 has a kink: the mean of its one-sided
    derivatives (h·a would be NaN there)."""
    ha = np.where(np.asarray(h) == 0, 0.0, np.multiply(h, a))
    return -_INV_2SQRT_2PI * np.exp(-0.5 * np.square(h)) * sp.erf(ha / np.sqrt(2.0))


def _d_owens_t_a(h: Any, a: Any, out: Any) -> Any:
    """∂a T = the integrand at a: e^{−h²(1+a²)/2}/(2π(1+a²)); 0 at a = ±inf (also for h = 0)."""
    r = 1.0 + np.square(a)
    d = np.exp(-0.5 * np.square(h) * r) / (2.0 * np.pi * r)
    return np.where(np.isinf(r), 0.0, d)


def _owens_t_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(240)
    h, a = rng.uniform(-2.5, 2.5, (2, 3)), rng.uniform(-3.0, 3.0, 3)
    h[0, 0] = 0.0  # h = 0: T is even in h, ∂h = 0
    return [
        rulekit.example(h, a),  # broadcast (2, 3) × (3,)
        rulekit.example(h[1].astype(np.float32), a.astype(np.float32)),
        rulekit.example(0.7, a),  # Python float × array
        rulekit.example(np.float64(-1.2), 2),  # an integer constant a
    ]


# T(h, a) = (1/2π)∫₀^a e^{−h²(1+t²)/2}/(1+t²) dt  ⇒  h̄ += −e^{−h²/2}·erf(ha/√2)/(2√(2π))·ȳ,
# ā += e^{−h²(1+a²)/2}/(2π(1+a²))·ȳ  (smooth everywhere; real only: scipy has no complex loop)
_binary(
    owens_t,
    _d_owens_t_h,
    _d_owens_t_a,
    "h̄ −= e^{−h²/2}·erf(ha/√2)/(2√(2π))·ȳ, ā += e^{−h²(1+a²)/2}/(2π(1+a²))·ȳ",
    _owens_t_examples,
)


# -- polygamma (a Python function: the wrapper) -------------------------------------------------

_ORDER = Union[int, np.integer, Array[np.integer]]
_POLYGAMMA_X = Union[
    Array[np.float16], Array[np.float32], Array[np.float64], float, np.float32, np.float64
]


def _polygamma_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(230)
    return [
        rulekit.example(1, rng.uniform(0.5, 4.0, (2, 3))),
        rulekit.example(np.array([0, 1, 2]), rng.uniform(0.5, 4.0, (2, 1)).astype(np.float32)),
        rulekit.example(0, 1.7),
        rulekit.example(np.int64(2), np.float64(2.5)),
    ]


@rulekit.rrule.register(polygamma, _ORDER, _POLYGAMMA_X, examples=_polygamma_examples)
def polygamma_rrule(f: CoDual, n: CoDual, x: CoDual) -> tuple[CoDual, Any]:
    """y = ψ⁽ⁿ⁾(x) (n ≥ 0 an integer, not differentiable)  ⇒  x̄ += ψ⁽ⁿ⁺¹⁾(x)·ȳ.

    scipy returns a float64 ndarray (0-d for scalar input), so ȳ is the output's fdata."""
    y = sp.polygamma(n.x, x.x)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, Any, Any]:
        if not active(x):
            return NO_R, NO_R, NO_R
        return NO_R, NO_R, accumulate(x, sp.polygamma(np.add(n.x, 1), x.x) * out.dx)

    return out, pullback
