"""Ufuncs of real scalars (`-2.5 * loss`, `total / n`, `-loss`, `np.log(s)`) in plain Python.

The generic unary and binary rules handle scalars by making 1-element arrays;
for the scalar arithmetic that ends almost every loss function this is most of
its cost. These rules compute the output with numpy itself (so its type is
exactly numpy's: `np.multiply(2.5, np.float64(x))` and `np.exp(2.0)` are
float64) and the cotangents with scalar arithmetic in double precision, the
same operations in the same order as the plain rules' pulls (so the same
values). Where that arithmetic would divide by zero (a zero divisor, the base 0
of a power) or leave the function's smooth domain (log or sqrt at x ≤ 0, |x| at
0, a non-finite x, an overflowing eˣ) the call is left to the plain rule, whose
conventions (docs/conventions-ufuncs.md) then apply; so is a unary pullback
whose cotangent comes out non-finite, so that numpy's warnings are the same.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any, Union

import numpy as np

import rulekit
from rulekit import CoDual
from rulekit._registry import Signature, registry
from rules._support.util import NO_F, NO_R
from rules.numpy.ufuncs import binary as _binary  # noqa: F401  (the plain rules, looked up below)
from rules.numpy.ufuncs import unary as _unary  # noqa: F401

_F64 = np.float64

__all__ = ["ScalarArithmetic", "ScalarUnary"]

#: real scalars whose arithmetic numpy does in double precision
RealScalar = Union[float, np.float64]


def _rdata(x: CoDual, v: Any) -> Any:
    """v as the rdata of scalar x (its own type), or NoRData for a constant/integer."""
    if x.dx is None or not isinstance(x.x, float):
        return NO_R
    return type(x.x)(v)


class ScalarArithmetic:
    """The rule of `uf(a, b)` for real scalars a, b (float, np.float64, or an int constant)."""

    def __init__(self, uf: np.ufunc, fallback: Any) -> None:
        self.uf, self.fallback = uf, fallback
        self.name = uf.__name__

    def __call__(self, f: CoDual, a: CoDual, b: CoDual, **kw: Any) -> tuple[CoDual, Any]:
        A, B = a.x, b.x
        name = self.name
        if kw or (B == 0 and name == "divide") or (A <= 0 and name == "power"):
            return self.fallback(f, a, b, **kw)
        y = self.uf(A, B)

        def scalar_arithmetic_pullback(dy: Any) -> tuple[Any, Any, Any]:
            g = float(dy)
            if name == "add":  # ā = ȳ, b̄ = ȳ
                da, db = g, g
            elif name == "subtract":  # ā = ȳ, b̄ = −ȳ
                da, db = g, -g
            elif name == "multiply":  # ā = ȳ·b, b̄ = ȳ·a
                da, db = g * B, g * A
            elif name == "divide":  # ā = ȳ/b, b̄ = −ȳ·y/b
                da = g / B
                db = -da * y
            else:  # power, a > 0: ā = ȳ·b·a^(b−1) (0 where b = 0), b̄ = ȳ·y·ln a
                da = 0.0 if B == 0 else g * B * _F64(A) ** (B - 1)  # (inf, not OverflowError)
                db = g * y * math.log(A)
            return NO_R, _rdata(a, da), _rdata(b, db)

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
    _plain = registry.lookup(Signature(_uf, (float, float))).impl
    _rule = ScalarArithmetic(_uf, _plain)
    rulekit.rrule.register(_uf, RealScalar, RealScalar, examples=_examples)(_rule)
    rulekit.rrule.register(_uf, RealScalar, int, examples=_int_examples(True))(_rule)
    if _name != "power":  # (an int base: the plain rule)
        rulekit.rrule.register(_uf, int, RealScalar, examples=_int_examples(False))(_rule)


# -- unary ufuncs of a real scalar -----------------------------------------------------------

_BIG = sys.float_info.max
_POS = math.ulp(0.0)  # the least positive float: `_POS <= x` is `x > 0`
_LN2, _LN10 = (
    math.log(2.0),
    math.log(10.0),
)  # (the constants rules.numpy.ufuncs.unary multiplies by)

Pull = Callable[[float, float, float], float]

#: name -> (lo, hi, of |x|, pull(x, y, ȳ) -> x̄). The pull is the plain rule's, operation
#: for operation; it is used where lo ≤ x ≤ hi (lo ≤ |x| ≤ hi if `of |x|`): there it has
#: no division by zero and no overflowing intermediate, and numpy's y is finite. A NaN
#: or infinite x is outside every domain.
_UNARY: dict[str, tuple[float, float, bool, Pull]] = {
    # y = −x ⇒ x̄ = −ȳ
    "negative": (-_BIG, _BIG, False, lambda x, y, g: -g),
    # y = x² ⇒ x̄ = 2x·ȳ
    "square": (-1e150, 1e150, False, lambda x, y, g: x * 2 * g),
    # y = √x ⇒ x̄ = ȳ/(2y)  (x = 0: the plain rule's +inf·ȳ)
    "sqrt": (_POS, _BIG, False, lambda x, y, g: g / (y * 2)),
    # y = eˣ ⇒ x̄ = y·ȳ  (x > 709: eˣ overflows, the plain rule)
    "exp": (-_BIG, 709.0, False, lambda x, y, g: y * g),
    # y = 2ˣ ⇒ x̄ = ln2·y·ȳ
    "exp2": (-_BIG, 1023.0, False, lambda x, y, g: y * _LN2 * g),
    # y = eˣ − 1 ⇒ x̄ = (y + 1)·ȳ
    "expm1": (-_BIG, 709.0, False, lambda x, y, g: (y + 1) * g),
    # y = ln x ⇒ x̄ = ȳ/x  (x ≤ 0: the plain rule)
    "log": (_POS, _BIG, False, lambda x, y, g: g / x),
    # y = log₂ x ⇒ x̄ = ȳ/(ln2·x)
    "log2": (_POS, 1e300, False, lambda x, y, g: g / (x * _LN2)),
    # y = log₁₀ x ⇒ x̄ = ȳ/(ln10·x)
    "log10": (_POS, 1e300, False, lambda x, y, g: g / (x * _LN10)),
    # y = ln(1 + x) ⇒ x̄ = ȳ/(1 + x)  (x ≤ −1: the plain rule)
    "log1p": (math.nextafter(-1.0, 0.0), _BIG, False, lambda x, y, g: g / (x + 1)),
    # y = 1/x ⇒ x̄ = −y²·ȳ  (|x| < 1e-300: y or y² overflows, the plain rule)
    "reciprocal": (1e-300, _BIG, True, lambda x, y, g: -(y * y) * g),
    # y = |x| ⇒ x̄ = sign(x)·ȳ  (x = 0: the plain rule's 0)
    "absolute": (_POS, _BIG, True, lambda x, y, g: g if x > 0 else -g),
    # y = sin x ⇒ x̄ = cos(x)·ȳ  (math.cos is numpy's float64 cos, to the bit)
    "sin": (-_BIG, _BIG, False, lambda x, y, g: math.cos(x) * g),
    # y = cos x ⇒ x̄ = −sin(x)·ȳ
    "cos": (-_BIG, _BIG, False, lambda x, y, g: -math.sin(x) * g),
    # y = tan x ⇒ x̄ = (1 + y²)·ȳ
    "tan": (-_BIG, _BIG, False, lambda x, y, g: (y * y + 1) * g),
    # y = tanh x ⇒ x̄ = (1 − y²)·ȳ
    "tanh": (-_BIG, _BIG, False, lambda x, y, g: (1 - y * y) * g),
    # y = arctan x ⇒ x̄ = ȳ/(1 + x²)
    "arctan": (-1e150, 1e150, False, lambda x, y, g: g / (x * x + 1)),
}

_NONE_1 = (NO_R, NO_R)


class ScalarUnary:
    """The rule of `uf(x)` for a real scalar x (float or np.float64) without keywords.

    Outside the function's domain (`_UNARY`) the plain rule takes the call; a
    cotangent that comes out non-finite (ȳ = ±inf or nan, an overflow) is
    recomputed by the plain rule, so its values and numpy's warnings are the same.
    """

    def __init__(self, uf: np.ufunc, fallback: Any) -> None:
        self.uf, self.fallback = uf, fallback
        self.lo, self.hi, self.of_abs, self.pull = _UNARY[uf.__name__]

    def __call__(self, f: CoDual, x: CoDual, **kw: Any) -> tuple[CoDual, Any]:
        X = x.x
        xf = float(X)
        if kw or not self.lo <= (abs(xf) if self.of_abs else xf) <= self.hi:
            return self.fallback(f, x, **kw)
        y = self.uf(X)
        if x.dx is None:
            return CoDual(y, NO_F), lambda dy: _NONE_1
        pull = self.pull

        def scalar_unary_pullback(dy: Any) -> tuple[Any, Any]:
            t = type(dy)
            if t is np.float64 or t is float:
                r = pull(xf, float(y), float(dy))
                if r - r == 0:  # finite; + 0.0: −0 becomes +0 as in the plain rule's Σ
                    return NO_R, type(X)(r + 0.0)
            _, plain_pullback = self.fallback(f, x)  # (x in the domain: no forward warnings)
            return plain_pullback(dy)

        return CoDual(y, NO_F), scalar_unary_pullback


def _unary_examples(name: str) -> Any:
    def examples() -> list[rulekit.Example]:
        r = np.random.default_rng(len(name))
        lo, _, of_abs, _ = _UNARY[name]
        x = float(r.uniform(0.3, 0.9))  # inside every domain, and so is −x where x < 0 is
        calls = [rulekit.example(np.float64(x)), rulekit.example(-x if lo < 0 or of_abs else x)]
        if name == "absolute":  # |0|: the plain rule's 0 (= the central difference)
            calls.append(rulekit.example(np.float64(0.0)))
        return calls

    return examples


for _name in _UNARY:
    _uf = getattr(np, _name)
    _plain_unary = registry.lookup(Signature(_uf, (float,))).impl
    rulekit.rrule.register(_uf, RealScalar, examples=_unary_examples(_name))(
        ScalarUnary(_uf, _plain_unary)
    )
