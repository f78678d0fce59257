"""Rules for NumPy's binary ufuncs (and `divmod`, `ldexp`), declared by their partials.

Each binary ufunc is one `rulekit.elementwise` declaration, `∂f/∂a` and `∂f/∂b` written
from a, b and y = f(a, b) with numpy functions; the plain rule (ā += unbroadcast(conj(∂f/∂a)·ȳ),
likewise b̄), the real-scalar fast path (`.scalar`) and the numba kernels of the fused and
in-place rules (`.fused`, `.inplace`) derive from it. Each is registered twice:
`(Inexact, Numeric)` and `(IntLike, Inexact)`, i.e. for every operand pair with at least
one float/complex operand (ints and bools are constants); real-only functions (arctan2,
hypot, maximum, ...) use the real variants of those patterns. `divmod` (two outputs) is
written by hand. Conventions: docs/conventions-ufuncs.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import rulekit
from rulekit import CoDual
from rules._support.cotangents import NO_R
from rules._support.select import select
from rules.numpy.ufuncs._common import (
    DECLARATIONS,
    DOMAINS,
    Inexact,
    IntLike,
    Numeric,
    Real,
    RealNumeric,
    accumulate,
    complex_values,
    declare,
    differentiable,
    output,
    tuple_cotangent,
)

__all__ = ["binary_examples"]  # the rules are reached through the registry

_nd = np.ndarray


# -- example inputs ---------------------------------------------------------------------------

_INT = {"any": [-3, -1, 0, 2, 3], "pos": [1, 2, 3], "nonzero": [-3, -2, -1, 1, 2, 3]}


def binary_examples(
    da: str, db: str, cplx: bool, seed: int
) -> tuple[Callable[[], list[rulekit.Example]], Callable[[], list[rulekit.Example]]]:
    """Examples for the `(Inexact, Numeric)` and the `(IntLike, Inexact)` registrations."""
    fa, fb = DOMAINS[da], DOMAINS[db]

    def first() -> list[rulekit.Example]:
        r = np.random.default_rng(seed)
        f32 = np.float32
        if cplx:
            third = (complex_values(r, da, (3,)), complex_values(r, db, (2, 3)))
        else:
            third = (fa(r, (3, 1)), fb(r, (1, 4)))
        return [
            rulekit.example(fa(r, (3, 4)), fb(r, (3, 4))),
            rulekit.example(fa(r, (2, 3)).astype(f32), fb(r, (3,)).astype(f32)),
            rulekit.example(*third),
            rulekit.example(fa(r, (3,)), float(fb(r, ()))),
        ]

    def second() -> list[rulekit.Example]:
        r = np.random.default_rng(seed + 1)
        ints = np.array(r.choice(_INT[da], size=3), dtype=np.int64)
        return [
            rulekit.example(ints, fb(r, (2, 3))),
            rulekit.example(int(r.choice(_INT[da])), np.float64(fb(r, ()))),
        ]

    return first, second


def _declare(
    uf: Any, da: Any, db: Any, doms: tuple[str, str], cplx: bool, quiet: bool = False, **kw: Any
) -> Any:
    first, second = binary_examples(*doms, cplx, seed=sum(map(ord, uf.__name__)))
    pats = (
        [(Inexact, Numeric), (IntLike, Inexact)] if cplx else [(Real, RealNumeric), (IntLike, Real)]
    )
    return declare(uf, da, db, patterns=pats, examples=[first, second], quiet=quiet, **kw)


def _one(a: Any, b: Any, y: Any) -> Any:
    return 1.0


def _minus_one(a: Any, b: Any, y: Any) -> Any:
    return -1.0


# -- arithmetic (holomorphic: complex too) ----------------------------------------------------

_declare(np.add, _one, _one, ("any", "any"), True, doc="y = a + b ⇒ ā += ȳ, b̄ += ȳ")
_declare(np.subtract, _one, _minus_one, ("any", "any"), True, doc="y = a − b ⇒ ā += ȳ, b̄ += −ȳ")
_declare(
    np.multiply,
    lambda a, b, y: b,
    lambda a, b, y: a,
    ("any", "any"),
    True,
    doc="y = a·b ⇒ ā += conj(b)·ȳ, b̄ += conj(a)·ȳ",
)
_declare(
    np.divide,
    lambda a, b, y: 1 / b,
    lambda a, b, y: -y / b,
    ("any", "nonzero"),
    True,
    doc="y = a/b ⇒ ā += ȳ/conj(b), b̄ += −conj(y/b)·ȳ",
)


def _d_power_base(a: Any, b: Any, y: Any) -> Any:
    """∂(aᵇ)/∂a = b·a^(b−1), taken as 0 where b = 0 (a⁰ ≡ 1, also at a = 0)."""
    return select(b == 0, 0.0, b * a ** (b - 1.0))


def _d_power_exponent(a: Any, b: Any, y: Any) -> Any:
    """∂(aᵇ)/∂b = ln(a)·y, with ln a taken as 0 where a = 0 (0ᵇ ≡ 0 near any b > 0); nan
    for a real a < 0 (aᵇ has no real derivative in b there)."""
    return select(a == 0, 0.0, np.log(a) * y)


def _d_float_power_base(a: Any, b: Any, y: Any) -> Any:
    """`_d_power_base` in float64/complex128, as np.float_power computes."""
    return select(b == 0, 0.0, b * np.float_power(a, b - 1.0))


_POWER_DOC = """y = aᵇ ⇒ ā += conj(b·a^(b−1))·ȳ (0 where b = 0), b̄ += conj(ln(a)·y)·ȳ (0 where
a = 0; nan for a real a < 0)"""
# (`fast_constants`: the kernels specialise x ** 2, numpy's own fast path, to 2·x)
_declare(
    np.power,
    _d_power_base,
    _d_power_exponent,
    ("pos", "any"),
    True,
    quiet=True,
    fast_constants=(2.0,),
    doc=_POWER_DOC,
)
_declare(
    np.float_power,
    _d_float_power_base,
    _d_power_exponent,
    ("pos", "any"),
    True,
    quiet=True,
    doc=_POWER_DOC + " (in float64/complex128)",
)


# -- real-only functions ----------------------------------------------------------------------


def _d_remainder_divisor(a: Any, b: Any, y: Any) -> Any:
    """y = a − q·b with q = ⌊a/b⌋ (fmod: trunc(a/b)) piecewise constant ⇒ ∂y/∂b = −q, q
    recovered as the multiple numpy removed, (a − y)/b rounded. (∂y/∂a = 1.) Almost
    everywhere: at the jumps (a/b an integer) the one-sided derivative is used."""
    return -np.rint((a - y) / b)


def _d_select_first(a: Any, b: Any, y: Any) -> Any:
    """y = max(a, b) (min, fmax, fmin alike) ⇒ ȳ goes to the operand y equals; ties (a = b)
    split it ½/½, as JAX does. Where y is nan (maximum/minimum of a nan) neither operand
    gets anything; fmax/fmin ignore a nan operand, so ȳ goes to the other."""
    return select(y == a, select(y == b, 0.5, 1.0), 0.0)


def _d_select_second(a: Any, b: Any, y: Any) -> Any:
    """`_d_select_first` for b (max, min, fmax and fmin are symmetric in a and b)."""
    return _d_select_first(b, a, y)


_uf: Any
for _uf in (np.remainder, np.fmod):
    _declare(
        _uf,
        _one,
        _d_remainder_divisor,
        ("any", "nonzero"),
        False,
        quiet=True,
        doc="y = a − q·b, q = ⌊a/b⌋ (fmod: trunc) ⇒ ā += ȳ, b̄ += −q·ȳ (a.e.)",
    )
_declare(
    np.arctan2,
    lambda a, b, y: b / (a * a + b * b),
    lambda a, b, y: -a / (a * a + b * b),
    ("nonzero", "nonzero"),
    False,
    quiet=True,
    doc="y = atan2(a, b) ⇒ ā += ȳ·b/(a² + b²), b̄ += −ȳ·a/(a² + b²); nan at a = b = 0",
)
_declare(
    np.hypot,
    lambda a, b, y: select(y == 0, 0.0, a / y),
    lambda a, b, y: select(y == 0, 0.0, b / y),
    ("nonzero", "any"),
    False,
    quiet=True,
    doc="y = √(a² + b²) ⇒ ā += ȳ·a/y, b̄ += ȳ·b/y; 0 at a = b = 0 (like |x| at 0)",
)
_declare(
    np.logaddexp,
    lambda a, b, y: np.exp(a - y),
    lambda a, b, y: np.exp(b - y),
    ("any", "any"),
    False,
    doc="y = ln(eᵃ + eᵇ) ⇒ ā += ȳ·e^(a−y), b̄ += ȳ·e^(b−y)",
)
_declare(
    np.logaddexp2,
    lambda a, b, y: np.exp2(a - y),
    lambda a, b, y: np.exp2(b - y),
    ("any", "any"),
    False,
    doc="y = log₂(2ᵃ + 2ᵇ) ⇒ ā += ȳ·2^(a−y), b̄ += ȳ·2^(b−y)",
)
for _uf in (np.maximum, np.minimum, np.fmax, np.fmin):
    _declare(
        _uf,
        _d_select_first,
        _d_select_second,
        ("any", "any"),
        False,
        doc=_d_select_first.__doc__ or "",
    )
# (sign(y) is sign(b), but 0 where a = 0)
_declare(
    np.copysign,
    lambda a, b, y: np.sign(y) * np.sign(a),
    lambda a, b, y: 0.0,
    ("nonzero", "nonzero"),
    False,
    doc="y = |a|·sign(b) ⇒ ā += sign(a)·sign(b)·ȳ (0 at a = 0, like |x|), b̄ += 0",
)


def _ldexp_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(50)
    return [
        rulekit.example(r.normal(size=(2, 3)), np.array([-1, 0, 2])),
        rulekit.example(r.normal(size=3).astype(np.float32), 3),
        rulekit.example(np.float64(0.7), np.int32(-2)),
    ]


declare(
    np.ldexp,
    lambda a, i, y: np.ldexp(1.0, i),
    lambda a, i, y: 0.0,
    patterns=[(Real, IntLike)],
    examples=[_ldexp_examples],
    doc="y = a·2ⁱ ⇒ ā += ȳ·2ⁱ (i an integer: a constant)",
)
_remainder = DECLARATIONS[np.remainder]


def _divmod_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(51)
    return [
        rulekit.example(r.uniform(-5, 5, size=(2, 3)), r.uniform(0.6, 2.0, size=3)),
        rulekit.example(r.uniform(-5, 5, size=3).astype(np.float32), 1.5),
        rulekit.example(7, np.float64(-2.3)),
    ]


@rulekit.rrule.register(np.divmod, Real, RealNumeric, examples=_divmod_examples)
@rulekit.rrule.register(np.divmod, IntLike, Real, examples=_divmod_examples)
def divmod_rrule(f: CoDual, a: CoDual, b: CoDual) -> tuple[CoDual, Any]:
    """(q, r) = divmod(a, b), r = a − q·b, q = ⌊a/b⌋ piecewise constant ⇒ ā += r̄, b̄ += −q·r̄
    (the adjoint of `np.remainder`, whose declaration gives it)."""
    q, r = np.divmod(a.x, b.x)
    out = output((q, r))
    need = [differentiable(a), differentiable(b)]

    def divmod_pullback(dy: Any) -> tuple[Any, Any, Any]:
        g = tuple_cotangent(out, dy, 1)
        if g is None or not any(need):
            return NO_R, accumulate(a, None), accumulate(b, None)
        xs, R = [a.x, b.x], r
        if type(r) is not _nd:
            xs, R = [np.reshape(v, 1) for v in xs], np.reshape(R, 1)
        ga, gb = _remainder.cotangents(xs, R, g, need)
        return NO_R, accumulate(a, ga), accumulate(b, gb)

    return out, divmod_pullback
