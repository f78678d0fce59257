"""Rules for NumPy's binary ufuncs (and `divmod`, `ldexp`).

Each binary ufunc is registered twice: `(Inexact, Numeric)` and `(IntLike, Inexact)`,
i.e. for every operand pair with at least one float/complex operand (ints and bools
are constants). Real-only functions (arctan2, hypot, maximum, ...) use the real
variants of those patterns. Each pull adds `ā`, `b̄` (reduced over broadcast axes)
and is written next to its adjoint. Conventions: docs/conventions-ufuncs.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import rulekit
from rulekit import CoDual
from rules._support.util import NO_R
from rules.numpy.ufuncs._common import (
    DOMAINS,
    Inexact,
    IntLike,
    Numeric,
    Real,
    RealNumeric,
    acc,
    acc_masked,
    binary,
    complex_values,
    conj,
    output,
    scale,
    tuple_cotangent,
)

__all__ = [
    "add_rrule",
    "arctan2_rrule",
    "binary_examples",
    "copysign_rrule",
    "divide_rrule",
    "divmod_rrule",
    "float_power_rrule",
    "fmax_rrule",
    "fmin_rrule",
    "fmod_rrule",
    "hypot_rrule",
    "ldexp_rrule",
    "logaddexp2_rrule",
    "logaddexp_rrule",
    "maximum_rrule",
    "minimum_rrule",
    "multiply_rrule",
    "power_rrule",
    "remainder_rrule",
    "subtract_rrule",
]

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


def _register(uf: Any, pull: Any, da: str, db: str, cplx: bool, quiet: bool = False) -> Any:
    first, second = binary_examples(da, db, cplx, seed=sum(map(ord, uf.__name__)))
    rule = binary(uf, pull, quiet)
    if cplx:
        rulekit.rrule.register(uf, Inexact, Numeric, examples=first)(rule)
        rulekit.rrule.register(uf, IntLike, Inexact, examples=second)(rule)
    else:
        rulekit.rrule.register(uf, Real, RealNumeric, examples=first)(rule)
        rulekit.rrule.register(uf, IntLike, Real, examples=second)(rule)
    return rule


def _on(cd: CoDual) -> bool:
    return cd.dx is not None


# -- arithmetic (holomorphic: complex too) ----------------------------------------------------


def _add(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = a + b ⇒ ā += ȳ, b̄ += ȳ."""
    return (acc(a, g) if a.dx is not None else NO_R), (acc(b, g) if b.dx is not None else NO_R)


def _subtract(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = a − b ⇒ ā += ȳ, b̄ += −ȳ."""
    ra = acc(a, g) if a.dx is not None else NO_R
    return ra, (acc(b, np.negative(g)) if b.dx is not None else NO_R)


def _multiply(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = a·b ⇒ ā += conj(b)·ȳ, b̄ += conj(a)·ȳ."""
    ra = acc(a, np.multiply(g, conj(B))) if a.dx is not None else NO_R
    rb = acc(b, np.multiply(g, conj(A))) if b.dx is not None else NO_R
    return ra, rb


def _divide(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = a/b ⇒ ā += ȳ/conj(b), b̄ += −conj(y)·ȳ/conj(b)."""
    t = np.divide(g, conj(B))
    ra = acc(a, t) if a.dx is not None else NO_R
    if not b.dx is not None:
        return ra, NO_R
    np.multiply(t, conj(Y), out=t)
    return ra, acc(b, np.negative(t, out=t))


def _power_da(A: Any, B: Any, g: Any, pw: Any) -> Any:
    """∂y/∂a = b·a^(b−1), taken as 0 where b = 0 (a⁰ ≡ 1, also at a = 0)."""
    if type(B) is not _nd:
        if B == 0:
            return None
        if B == 1:
            return g
        if B == 2 and pw is np.power:
            return scale(np.multiply(A, 2), g)
    with np.errstate(divide="ignore", invalid="ignore"):  # a = 0, b < 1: inf
        if type(B) is not _nd:
            t = pw(A, B - 1)
            t *= B
            return scale(t, g)
        B1 = B.astype(np.int64) if B.dtype == np.bool_ else B
        t = pw(A, np.subtract(B1, 1))
        t *= B1
        zero = B1 == 0
        if zero.any():
            t[np.broadcast_to(zero, t.shape)] = 0
        return scale(t, g)


def _power_db(A: Any, Y: Any, g: Any) -> Any:
    """∂y/∂b = ln(a)·y, with ln a taken as 0 where a = 0 (0ᵇ ≡ 0 near any b > 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # a = 0: −inf; a < 0: nan
        la = np.log(A)
        zero = np.equal(A, 0)
        if type(la) is _nd:
            if zero.any():
                la[zero] = 0
        elif zero:
            la = 0.0
        return scale(np.multiply(la, Y), g)


def _power(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = aᵇ ⇒ ā += conj(b·a^(b−1))·ȳ, b̄ += conj(ln(a)·y)·ȳ (see _power_da/_power_db).

    Real a < 0: b̄ is nan (aᵇ has no real derivative in b there).
    """
    ra = acc(a, _power_da(A, B, g, np.power)) if a.dx is not None else NO_R
    rb = acc(b, _power_db(A, Y, g)) if b.dx is not None else NO_R
    return ra, rb


def _float_power(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = aᵇ in float64/complex128: the adjoint of `power`."""
    ra = acc(a, _power_da(A, B, g, np.float_power)) if a.dx is not None else NO_R
    rb = acc(b, _power_db(A, Y, g)) if b.dx is not None else NO_R
    return ra, rb


add_rrule = _register(np.add, _add, "any", "any", cplx=True)
subtract_rrule = _register(np.subtract, _subtract, "any", "any", cplx=True)
multiply_rrule = _register(np.multiply, _multiply, "any", "any", cplx=True)
divide_rrule = _register(np.divide, _divide, "any", "nonzero", cplx=True)
power_rrule = _register(np.power, _power, "pos", "any", cplx=True)
float_power_rrule = _register(np.float_power, _float_power, "pos", "any", cplx=True)


# -- real-only functions ----------------------------------------------------------------------


def _remainder(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = a − q·b, q = ⌊a/b⌋ (fmod: trunc(a/b)) piecewise constant ⇒ ā += ȳ, b̄ += −q·ȳ.

    Almost everywhere: at the jumps (a/b an integer) the one-sided derivative is used.
    """
    ra = acc(a, g) if _on(a) else NO_R
    if not _on(b):
        return ra, NO_R
    q = np.subtract(A, Y)  # q·b, exactly the multiple numpy removed
    np.divide(q, B, out=q)
    np.rint(q, out=q)
    np.negative(q, out=q)
    return ra, acc(b, np.multiply(q, g, out=q))


def _arctan2(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = atan2(a, b) ⇒ ā += ȳ·b/(a² + b²), b̄ += −ȳ·a/(a² + b²); nan at a = b = 0."""
    r = np.add(np.square(A), np.square(B))
    np.divide(g, r, out=r)
    ra = acc(a, np.multiply(r, B)) if _on(a) else NO_R
    if not _on(b):
        return ra, NO_R
    np.multiply(r, A, out=r)
    return ra, acc(b, np.negative(r, out=r))


def _hypot(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = √(a² + b²) ⇒ ā += ȳ·a/y, b̄ += ȳ·b/y; 0 at a = b = 0 (like |x| at 0)."""
    r = np.divide(g, Y)
    zero = Y == 0
    if zero.any():
        r[zero] = 0
    ra = acc(a, np.multiply(r, A)) if _on(a) else NO_R
    rb = acc(b, np.multiply(r, B, out=r)) if _on(b) else NO_R
    return ra, rb


def _logaddexp_with(ex: Any) -> Any:
    def pull(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
        res = []
        for cd, V in ((a, A), (b, B)):
            if not _on(cd):
                res.append(NO_R)
                continue
            t = np.subtract(V, Y)
            ex(t, out=t)
            res.append(acc(cd, np.multiply(t, g, out=t)))
        return res[0], res[1]

    return pull


_logaddexp = _logaddexp_with(np.exp)
_logaddexp.__doc__ = "y = ln(eᵃ + eᵇ) ⇒ ā += ȳ·e^(a−y), b̄ += ȳ·e^(b−y)."
_logaddexp2 = _logaddexp_with(np.exp2)
_logaddexp2.__doc__ = "y = log₂(2ᵃ + 2ᵇ) ⇒ ā += ȳ·2^(a−y), b̄ += ȳ·2^(b−y)."


def _select(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = max(a, b) (min, fmax, fmin alike) ⇒ ȳ goes to the operand y equals.

    Ties (a = b) split it ½/½, as JAX does; where y is nan (maximum/minimum of a nan)
    neither operand gets anything. fmax/fmin ignore a nan operand, so ȳ goes to the other.
    """
    ma, mb = np.equal(Y, A), np.equal(Y, B)
    tie = np.logical_and(ma, mb)
    if not tie.any():
        ra = acc_masked(a, g, ma) if _on(a) else NO_R
        rb = acc_masked(b, g, mb) if _on(b) else NO_R
        return ra, rb
    res = []
    for cd, m in ((a, ma), (b, mb)):
        if not _on(cd):
            res.append(NO_R)
            continue
        w = m.astype(g.dtype)
        w[tie] = 0.5
        res.append(acc(cd, np.multiply(w, g, out=w)))
    return res[0], res[1]


def _copysign(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = |a|·sign(b) ⇒ ā += sign(a)·sign(b)·ȳ (0 at a = 0, like |x|), b̄ += 0."""
    if not _on(a):
        return NO_R, (acc(b, None) if _on(b) else NO_R)
    t = np.sign(Y)  # sign(b), and 0 where a = 0
    np.multiply(t, np.sign(A), out=t)
    return acc(a, np.multiply(t, g, out=t)), (acc(b, None) if _on(b) else NO_R)


remainder_rrule = _register(np.remainder, _remainder, "any", "nonzero", False, quiet=True)
fmod_rrule = _register(np.fmod, _remainder, "any", "nonzero", False, quiet=True)
arctan2_rrule = _register(np.arctan2, _arctan2, "nonzero", "nonzero", False, quiet=True)
hypot_rrule = _register(np.hypot, _hypot, "nonzero", "any", False, quiet=True)
logaddexp_rrule = _register(np.logaddexp, _logaddexp, "any", "any", False)
logaddexp2_rrule = _register(np.logaddexp2, _logaddexp2, "any", "any", False)
maximum_rrule = _register(np.maximum, _select, "any", "any", False)
minimum_rrule = _register(np.minimum, _select, "any", "any", False)
fmax_rrule = _register(np.fmax, _select, "any", "any", False)
fmin_rrule = _register(np.fmin, _select, "any", "any", False)
copysign_rrule = _register(np.copysign, _copysign, "nonzero", "nonzero", False)


def _ldexp(a: CoDual, b: CoDual, A: Any, B: Any, Y: Any, g: Any) -> tuple[Any, Any]:
    """y = a·2ⁱ ⇒ ā += ȳ·2ⁱ (exactly: ldexp(ȳ, i)); i is an integer."""
    return (acc(a, np.ldexp(g, B)) if _on(a) else NO_R), NO_R


def _ldexp_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(50)
    return [
        rulekit.example(r.normal(size=(2, 3)), np.array([-1, 0, 2])),
        rulekit.example(r.normal(size=3).astype(np.float32), 3),
        rulekit.example(np.float64(0.7), np.int32(-2)),
    ]


ldexp_rrule = rulekit.rrule.register(np.ldexp, Real, IntLike, examples=_ldexp_examples)(
    binary(np.ldexp, _ldexp)
)


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
    """(q, r) = divmod(a, b), r = a − q·b, q = ⌊a/b⌋ piecewise constant ⇒ ā += r̄, b̄ += −q·r̄."""
    q, r = np.divmod(a.x, b.x)
    out = output((q, r))
    rule_r = _remainder

    def pullback(dy: Any) -> tuple[Any, Any, Any]:
        g = tuple_cotangent(out, dy, 1)
        if g is None:
            zero = (acc(a, None) if _on(a) else NO_R), (acc(b, None) if _on(b) else NO_R)
            return (NO_R, *zero)
        A, B, R = a.x, b.x, r
        if type(r) is not _nd:
            A, B, R = np.reshape(A, 1), np.reshape(B, 1), np.reshape(R, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (NO_R, *rule_r(a, b, A, B, R, g))

    return out, pullback
