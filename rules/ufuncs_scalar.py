"""Arithmetic on real scalars (`-2.5 * loss`, `total / n`): rules in plain Python arithmetic.

The generic binary rule handles scalars by making 1-element arrays; for the
scalar arithmetic that ends almost every loss function this is most of its
cost. These rules compute the output with numpy itself (so its type is exactly
numpy's: `np.multiply(2.5, np.float64(x))` is a float64) and the cotangents
with scalar arithmetic. Where that arithmetic would divide by zero (a zero
divisor, the base 0 of a power) the call is left to the plain rule, whose
conventions (docs/conventions-ufuncs.md) then apply.
"""

from __future__ import annotations

import math
from typing import Any, Union

import numpy as np

import rulekit
from rulekit import CoDual
from rulekit._registry import Signature, registry
from rules._util import NO_F, NO_R

__all__ = ["ScalarArithmetic"]

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
                da = 0.0 if B == 0 else g * B * A ** (B - 1)
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
