"""Ufuncs of real scalars (`-2.5 * loss`, `total / n`, `-loss`, `np.log(s)`) in plain Python.

The plain elementwise rules handle scalars through 1-element arrays; for the scalar
arithmetic that ends almost every loss function this is most of its cost. These rules
compute the output with numpy itself (so its type is exactly numpy's:
`np.multiply(2.5, np.float64(x))` and `np.exp(2.0)` are float64) and the cotangents in
Python floats from the ufunc's declaration (`Elementwise.scalar_partials`: the declared
partials with math's sin/cos/sqrt for numpy's, the same operations in the same order as
the plain rule, so the same values). Where that arithmetic fails (a division by zero,
a domain error, an overflow) or gives a cotangent that is inf, nan or 0 (the trace of
an overflowing intermediate, which numpy would warn about), the plain rule's pullback
computes it instead, so its conventions (docs/conventions-ufuncs.md), values and numpy
warnings are the plain rule's.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

import rulekit
from rulekit import CoDual, Elementwise, differentiable
from rules._support.cotangents import NO_F, NO_R
from rules.numpy.ufuncs import binary as _binary  # noqa: F401  (the declarations used below)
from rules.numpy.ufuncs import unary as _unary  # noqa: F401
from rules.numpy.ufuncs._common import DECLARATIONS

__all__ = ["SCALAR_UNARY", "ScalarArithmetic", "ScalarUnary"]

#: real scalars whose arithmetic numpy does in double precision
RealScalar = Union[float, np.float64]
#: ZeroDivisionError, OverflowError, math domain errors, a complex power of a negative float
_FAILS = (ArithmeticError, ValueError, TypeError)


class _ScalarRule:
    """`uf(*xs)` for real scalars: y by numpy, the cotangents in Python floats."""

    def __init__(self, decl: Elementwise) -> None:
        self.decl, self.uf = decl, decl.fn
        self.partials = decl.scalar_partials()
        self.fallback = decl.rule

    def _fast(self, xs: list[float], y: float, g: float) -> list[float] | None:
        """[∂ᵢf·ȳ] in Python floats, or None where the plain rule must compute them."""
        try:
            if self.decl.quiet:
                with np.errstate(all="ignore"):
                    rs = [float(d(*xs, y)) * g for d in self.partials]
            else:
                rs = [float(d(*xs, y)) * g for d in self.partials]
        except _FAILS:
            return None
        for r in rs:
            # inf or nan, or 0 (where an intermediate may have overflowed, 1/(1 + x²) at
            # x = 1e300, which numpy warns about): the plain rule, its values and warnings
            if r - r != 0 or r == 0:
                return None
        return rs


class ScalarUnary(_ScalarRule):
    """The rule of `uf(x)` for a real scalar x (float or np.float64) without keywords."""

    def __call__(self, f: CoDual, x: CoDual, **kw: Any) -> tuple[CoDual, Any]:
        if kw:
            return self.fallback(f, x, **kw)
        X = x.x
        y = self.uf(X)
        if x.dx is None:
            return CoDual(y, NO_F), lambda dy: (NO_R, NO_R)

        def scalar_unary_pullback(dy: Any) -> tuple[Any, Any]:
            t = type(dy)
            if t is np.float64 or t is float:
                rs = self._fast([float(X)], float(y), float(dy))
                if rs is not None:  # + 0.0: −0 becomes +0 as in the plain rule's Σ
                    return NO_R, type(X)(rs[0] + 0.0)
            return self.decl.scalar_pullback((x,), (X,), y, dy, (True,))

        return CoDual(y, NO_F), scalar_unary_pullback


class ScalarArithmetic(_ScalarRule):
    """The rule of `uf(a, b)` for real scalars a, b (float, np.float64, or an int constant)."""

    def __call__(self, f: CoDual, a: CoDual, b: CoDual, **kw: Any) -> tuple[CoDual, Any]:
        if kw:
            return self.fallback(f, a, b, **kw)
        A, B = a.x, b.x
        y = self.uf(A, B)
        need = (differentiable(a), differentiable(b))

        def scalar_arithmetic_pullback(dy: Any) -> tuple[Any, Any, Any]:
            t = type(dy)
            if t is np.float64 or t is float:
                rs = self._fast([float(A), float(B)], float(y), float(dy))
                if rs is not None:
                    ra = type(A)(rs[0] + 0.0) if need[0] else NO_R
                    return NO_R, ra, (type(B)(rs[1] + 0.0) if need[1] else NO_R)
            return self.decl.scalar_pullback((a, b), (A, B), y, dy, need)

        return CoDual(y, NO_F), scalar_arithmetic_pullback


def _examples() -> list[rulekit.Example]:
    return [
        rulekit.example(2.5, np.float64(1.3)),
        rulekit.example(np.float64(0.7), -3.0),
        rulekit.example(np.float64(1.5), np.float64(-0.4)),
    ]


def _int_examples(first: bool) -> Any:
    def examples() -> list[rulekit.Example]:
        calls = [(np.float64(1.3), 3), (2.5, 2)]
        return [rulekit.example(*(c if first else c[::-1])) for c in calls]

    return examples


for _name in ("add", "subtract", "multiply", "divide", "power"):
    _uf = getattr(np, _name)
    _rule = ScalarArithmetic(DECLARATIONS[_uf])
    rulekit.rrule.register(_uf, RealScalar, RealScalar, examples=_examples)(_rule)
    rulekit.rrule.register(_uf, RealScalar, int, examples=_int_examples(True))(_rule)
    if _name != "power":  # (an int base: the plain rule)
        rulekit.rrule.register(_uf, int, RealScalar, examples=_int_examples(False))(_rule)


# -- unary ufuncs of a real scalar -----------------------------------------------------------

#: the unary ufuncs with a scalar fast path, and the x where their examples are drawn:
#: "pos" (defined for x > 0 only), "nonzero" or "any"
SCALAR_UNARY = {
    "negative": "any", "square": "any", "sqrt": "pos", "exp": "any", "exp2": "any",
    "expm1": "any", "log": "pos", "log2": "pos", "log10": "pos", "log1p": "pos",
    "reciprocal": "nonzero", "absolute": "nonzero", "sin": "any", "cos": "any",
    "tan": "any", "tanh": "any", "arctan": "any",
}  # fmt: skip


def _unary_examples(name: str) -> Any:
    def examples() -> list[rulekit.Example]:
        r = np.random.default_rng(len(name))
        x = float(r.uniform(0.3, 0.9))
        calls = [
            rulekit.example(np.float64(x)),
            rulekit.example(x if SCALAR_UNARY[name] == "pos" else -x),
        ]
        if name == "absolute":  # |0|: the plain rule's 0 (= the central difference)
            calls.append(rulekit.example(np.float64(0.0)))
        return calls

    return examples


for _name in SCALAR_UNARY:
    _uf = getattr(np, _name)
    rulekit.rrule.register(_uf, RealScalar, examples=_unary_examples(_name))(
        ScalarUnary(DECLARATIONS[_uf])
    )
