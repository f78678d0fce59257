"""Rules for the two-argument scipy.special functions: the ufuncs `xlogy`, `xlog1py`,
`rel_entr`, `beta`, `betaln`, and `polygamma` (a Python function: use the wrapper
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
from rules._support.util import NO_R, accumulate, new_output
from rules.scipy.special._common import (
    Partials,
    active,
    operand_pattern,
    ufunc_rule,
)

__all__ = ["beta", "betaln", "polygamma", "rel_entr", "xlog1py", "xlogy"]

xlogy, xlog1py, rel_entr, beta, betaln = sp.xlogy, sp.xlog1py, sp.rel_entr, sp.beta, sp.betaln
polygamma = rulekit.primitive(sp.polygamma)


def _binary(
    ufunc: np.ufunc,
    partials: Partials,
    adjoint: str,
    examples: Callable[[], list[rulekit.Example]],
    complex_: bool = False,
) -> None:
    rule = ufunc_rule(ufunc, partials, 2, adjoint)
    p = operand_pattern(ufunc, complex_=complex_, const=True)
    rulekit.rrule.register(ufunc, p, p, examples=examples)(rule)


def _where0(x: Any, v: Any) -> Any:
    """v, with 0 where x == 0 (a partial of a function that vanishes identically at x = 0)."""
    return np.where(np.asarray(x) == 0, 0, v)


# -- x·log(y), x·log1p(y) -----------------------------------------------------------------------


def _xlogy_partials(need: tuple[bool, ...], x: Any, y: Any, out: Any) -> tuple[Any, Any]:
    """∂x = log y (also at x = 0, where xlogy is differentiable in x for y > 0);
    ∂y = x/y, and 0 where x = 0 (xlogy(0, y) = 0 for every y)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = np.log(y) if need[0] else None
        dy = _where0(x, np.true_divide(x, y)) if need[1] else None
    return dx, dy


def _xlog1py_partials(need: tuple[bool, ...], x: Any, y: Any, out: Any) -> tuple[Any, Any]:
    """∂x = log1p(y); ∂y = x/(1 + y), and 0 where x = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = np.log1p(y) if need[0] else None
        dy = _where0(x, np.true_divide(x, np.add(y, 1))) if need[1] else None
    return dx, dy


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
_binary(xlogy, _xlogy_partials, "x̄ += conj(log y)·z̄, ȳ += conj(x/y)·z̄ (0 where x = 0)",
        _xlogy_examples(0.0), complex_=True)  # fmt: skip
# x·log1p(y)  ⇒  x̄ += conj(log1p y)·z̄,  ȳ += conj(x/(1+y))·z̄
_binary(xlog1py, _xlog1py_partials, "x̄ += conj(log1p y)·z̄, ȳ += conj(x/(1+y))·z̄",
        _xlogy_examples(-0.9), complex_=True)  # fmt: skip


# -- relative entropy ---------------------------------------------------------------------------


def _rel_entr_partials(need: tuple[bool, ...], x: Any, y: Any, out: Any) -> tuple[Any, Any]:
    """Inside (x > 0, y > 0): ∂x = log(x/y) + 1, ∂y = −x/y. At x = 0 < y: ∂x = −inf (one-sided),
    ∂y = 0; at x = 0 = y: ∂x = NaN, ∂y = 0. Outside the domain (rel_entr = inf): NaN."""
    x, y = np.asarray(x), np.asarray(y)
    inside = (x > 0) & (y > 0)
    edge = (x == 0) & (y >= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = dy = None
        if need[0]:
            dx = np.where(inside, np.log(x) - np.log(y) + 1, np.nan)
            dx = np.where(edge & (y > 0), -np.inf, dx)
        if need[1]:
            dy = np.where(inside, -(x / y), np.where(edge, 0.0, np.nan))
    return dx, dy


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
_binary(rel_entr, _rel_entr_partials, "x̄ += (log(x/y) + 1)·z̄, ȳ −= (x/y)·z̄",
        _rel_entr_examples)  # fmt: skip


# -- beta function ------------------------------------------------------------------------------


def _betaln_partials(need: tuple[bool, ...], a: Any, b: Any, out: Any) -> tuple[Any, Any]:
    """∂a log|B| = ψ(a) − ψ(a+b), ∂b log|B| = ψ(b) − ψ(a+b)."""
    psi_ab = sp.digamma(np.add(a, b))
    return (
        sp.digamma(a) - psi_ab if need[0] else None,
        sp.digamma(b) - psi_ab if need[1] else None,
    )


def _beta_partials(need: tuple[bool, ...], a: Any, b: Any, out: Any) -> tuple[Any, Any]:
    """∂a B = B·(ψ(a) − ψ(a+b)), ∂b B = B·(ψ(b) − ψ(a+b))."""
    da, db = _betaln_partials(need, a, b, out)
    return (None if da is None else out * da, None if db is None else out * db)


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
_binary(beta, _beta_partials, "ā += B·(ψ(a) − ψ(a+b))·ȳ, b̄ += B·(ψ(b) − ψ(a+b))·ȳ",
        _beta_examples)  # fmt: skip
# log|B(a, b)|  ⇒  ā += (ψ(a) − ψ(a+b))·ȳ,  b̄ += (ψ(b) − ψ(a+b))·ȳ
_binary(betaln, _betaln_partials, "ā += (ψ(a) − ψ(a+b))·ȳ, b̄ += (ψ(b) − ψ(a+b))·ȳ",
        _beta_examples)  # fmt: skip


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
