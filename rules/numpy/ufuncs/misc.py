"""Rules for the rest of the ufunc family: `np.real`/`imag`/`angle`, `modf`, `frexp`,
the piecewise-constant ufuncs (zero adjoint), `np.clip` and `np.where`.

Conventions at non-differentiable points (clip at its bounds, where's condition, a
zero angle) are in docs/conventions-ufuncs.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import numpy as np

import rulekit
from rulekit import CoDual, NoRData, Vararg
from rules._support.cotangents import NO_R, scalar_rdata
from rules.numpy.ufuncs._common import (
    Inexact,
    Numeric,
    Real,
    RealNumeric,
    accumulate,
    accumulate_masked,
    complex_values,
    cotangent,
    declare,
    nondiff,
    output,
    tuple_cotangent,
    zero_rdata_of,
)

__all__ = [
    "angle_rrule",
    "clip_rrule",
    "frexp_rrule",
    "heaviside_rrule",
    "imag_rrule",
    "modf_rrule",
    "real_rrule",
    "where_rrule",
]

_nd = np.ndarray


def _on(cd: CoDual) -> bool:
    return cd.dx is not None


# -- real, imag, angle ------------------------------------------------------------------------


def _part_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(40)
    return [
        rulekit.example(complex_values(r, "any", (3, 2))),
        rulekit.example(complex_values(r, "any", (4,)).astype(np.complex64)),
        rulekit.example(np.complex128(1.5 - 0.5j)),
        rulekit.example(r.normal(size=(2, 3))),
    ]


def _part_rule(fn: Any, part: str) -> Any:
    def rule(f: CoDual, x: CoDual) -> tuple[CoDual, Any]:
        X = x.x
        y = fn(X)
        if type(X) is np.ndarray:
            if np.may_share_memory(y, X):  # a view of x: its fdata is the same view of x̄
                return CoDual(y, None if x.dx is None else getattr(x.dx, part)), _none2
            return output(y), _none2  # the imaginary part of a real array: constant zeros
        out = output(y)

        def scalar_pullback(dy: Any) -> tuple[Any, Any]:
            if x.dx is None:
                return (NO_R, NO_R)
            g = 0 if isinstance(dy, NoRData) else dy
            return (NO_R, scalar_rdata(X, 1j * g if part == "imag" else g))

        return out, scalar_pullback

    return rule


def _none2(dy: Any) -> tuple[Any, Any]:
    return (NO_R, NO_R)


real_rrule = rulekit.rrule.register(np.real, Inexact, examples=_part_examples)(
    _part_rule(np.real, "real")
)
real_rrule.__doc__ = "y = Re x ⇒ x̄ += ȳ. An array's y is a view of x; its fdata is Re x̄."
imag_rrule = rulekit.rrule.register(np.imag, Inexact, examples=_part_examples)(
    _part_rule(np.imag, "imag")
)
imag_rrule.__doc__ = "y = Im x ⇒ x̄ += i·ȳ. A complex array's y is a view; its fdata is Im x̄."


def _angle_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(41)
    return [
        rulekit.example(complex_values(r, "any", (3, 2))),
        rulekit.Example((complex_values(r, "any", (4,)).astype(np.complex64),), {"deg": True}),
        rulekit.example(np.complex128(-1.0 + 0.5j), True),
        rulekit.example(r.normal(size=3)),
    ]


@rulekit.rrule.register(np.angle, Inexact, Vararg[bool], examples=_angle_examples)
def angle_rrule(f: CoDual, z: CoDual, *rest: CoDual, **kw: Any) -> tuple[CoDual, Any]:
    """y = arg z ⇒ z̄ += ȳ·i·z/|z|² (·180/π with deg=True); nan at z = 0. Real z: 0 or π, x̄ += 0."""
    Z = z.x
    deg = bool(rest[0].x) if rest else bool(kw.get("deg", False))
    y = np.angle(Z, *[r.x for r in rest], **kw)
    out = output(y)
    nulls = (NO_R,) * len(rest)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if z.dx is None or np.isrealobj(Z):
            return (NO_R, accumulate(z, None) if z.dx is not None else NO_R, *nulls)
        g = cotangent(out, dy)
        if g is None:
            return (NO_R, accumulate(z, None), *nulls)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.multiply(Z, 1j * (180.0 / np.pi if deg else 1.0))
            t = t / np.square(np.abs(Z))
        return (NO_R, accumulate(z, t * g), *nulls)

    return out, pullback


# -- modf, frexp: two outputs -----------------------------------------------------------------


def _two_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(42)
    return [
        rulekit.example(r.uniform(-4, 4, size=(3, 2)) + 0.25),
        rulekit.example(r.uniform(0.3, 5, size=4).astype(np.float32)),
        rulekit.example(np.float64(-2.7)),
    ]


@rulekit.rrule.register(np.modf, Real, examples=_two_examples)
def modf_rrule(f: CoDual, x: CoDual) -> tuple[CoDual, Any]:
    """(p, n) = modf x (fractional and integral parts) ⇒ x̄ += p̄ (n is piecewise constant)."""
    out = output(np.modf(x.x))

    def pullback(dy: Any) -> tuple[Any, Any]:
        if x.dx is None:
            return (NO_R, NO_R)
        return (NO_R, accumulate(x, tuple_cotangent(out, dy, 0)))

    return out, pullback


@rulekit.rrule.register(np.frexp, Real, examples=_two_examples)
def frexp_rrule(f: CoDual, x: CoDual) -> tuple[CoDual, Any]:
    """(m, e) = frexp x, x = m·2ᵉ ⇒ x̄ += ldexp(m̄, −e) (e is an integer: no cotangent)."""
    m, e = np.frexp(x.x)
    out = output((m, e))  # e is an integer: m̄ only

    def pullback(dy: Any) -> tuple[Any, Any]:
        if x.dx is None:
            return (NO_R, NO_R)
        g = tuple_cotangent(out, dy, 0)
        return (NO_R, accumulate(x, None if g is None else np.ldexp(g, np.negative(e))))

    return out, pullback


# -- piecewise-constant functions: zero adjoint -----------------------------------------------


def _flat1_examples(cplx: bool) -> Callable[[], list[rulekit.Example]]:
    def examples() -> list[rulekit.Example]:
        r = np.random.default_rng(43)
        exs = [
            rulekit.example(r.uniform(-3, 3, size=(3, 2)) + 0.1),
            rulekit.example(np.float32(1.7)),
        ]
        if cplx:
            exs.append(rulekit.example(complex_values(r, "any", (3,))))
        return exs

    return examples


for _uf, _pat in [
    (np.floor, Real),
    (np.ceil, Real),
    (np.trunc, Real),
    (np.fix, Real),
    (np.spacing, Real),
    (np.sign, Real),  # complex sign(z) = z/|z| is differentiable: not registered
    (np.signbit, Real),
    (np.rint, Inexact),
    (np.isnan, Inexact),
    (np.isinf, Inexact),
    (np.isfinite, Inexact),
    (np.logical_not, Numeric),
]:
    rulekit.rrule.register(_uf, _pat, examples=_flat1_examples(_pat is not Real))(nondiff)


def _round_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(44)
    return [
        rulekit.example(r.uniform(-3, 3, size=(3, 2)) + 0.013),
        rulekit.example(r.uniform(-3, 3, size=4) + 0.013, 1),
        rulekit.Example((r.uniform(-3, 3, size=2) + 0.013,), {"decimals": 2}),
    ]


for _fn in (np.round, np.around):
    rulekit.rrule.register(_fn, Inexact, Vararg[int], examples=_round_examples)(nondiff)


# -- piecewise-constant binary functions: zero adjoint ----------------------------------------


def _flat2_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(52)
    return [
        rulekit.example(r.normal(size=(2, 3)), r.normal(size=3)),
        rulekit.example(r.normal(size=3).astype(np.float32), 0.5),
        rulekit.example(np.arange(3), np.float64(1.5)),
    ]


for _uf in (np.greater, np.greater_equal, np.less, np.less_equal, np.equal, np.not_equal):
    rulekit.rrule.register(_uf, Numeric, Numeric, examples=_flat2_examples)(nondiff)
for _uf in (np.logical_and, np.logical_or, np.logical_xor):
    rulekit.rrule.register(_uf, Numeric, Numeric, examples=_flat2_examples)(nondiff)
rulekit.rrule.register(np.floor_divide, RealNumeric, RealNumeric, examples=_flat2_examples)(nondiff)


def _heaviside_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(55)
    return [
        rulekit.example(np.array([0, 1, 0, -2]), r.normal(size=(2, 4))),  # b̄ where a = 0
        rulekit.example(r.normal(size=(2, 3)).astype(np.float32), np.float32(0.5)),
        rulekit.example(np.array([-1.5, 0.5, 2.0]), 0.25),
    ]


heaviside_rrule = declare(
    np.heaviside,
    lambda a, b, y: 0.0,
    lambda a, b, y: np.where(a == 0, 1.0, 0.0),
    patterns=[(RealNumeric, RealNumeric)],
    examples=[_heaviside_examples],
    doc="y = H(a) with y = b where a = 0 ⇒ ā += 0 (a.e.), b̄ += ȳ·[a = 0]",
).rule


# -- np.clip ----------------------------------------------------------------------------------

_Bound = Union[RealNumeric, None]


def _clip_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(53)
    x = r.uniform(-2, 2, size=(3, 4))
    return [
        rulekit.example(x, -0.5, 0.7),
        rulekit.example(x.astype(np.float32), r.uniform(-1.5, -0.5, size=4), None),
        rulekit.example(x, r.uniform(-1, 0, size=(3, 1)), r.uniform(0.1, 1, size=4)),
        rulekit.Example((np.float64(1.3),), {"max": 0.4}),
    ]


@rulekit.rrule.register(np.clip, RealNumeric, Vararg[_Bound], examples=_clip_examples)
def clip_rrule(f: CoDual, a: CoDual, *bounds: CoDual, **kw: Any) -> tuple[CoDual, Any]:
    """y = min(max(a, lo), hi) ⇒ ȳ goes to a where lo ≤ a ≤ hi (bounds included), to lo where
    a < lo, to hi where y = hi otherwise (lo > hi: numpy returns hi everywhere)."""
    lo_cd = bounds[0] if len(bounds) > 0 else _kw_bound(kw, "a_min", "min")
    hi_cd = bounds[1] if len(bounds) > 1 else _kw_bound(kw, "a_max", "max")
    kw = {k: (v.x if isinstance(v, CoDual) else v) for k, v in kw.items()}
    y = np.clip(a.x, *[c.x for c in bounds], **kw)
    out = output(y)
    if not any(_on(c) for c in (a, lo_cd, hi_cd)):
        return out, lambda dy: (NO_R,) * (2 + len(bounds))

    def pullback(dy: Any) -> tuple[Any, ...]:
        g = cotangent(out, dy)
        A, lo, hi = a.x, lo_cd.x, hi_cd.x
        ra = rlo = rhi = NO_R
        if g is None:
            g = np.zeros(1)
        in_a: Any = True  # lo ≤ a ≤ hi: y = a
        if lo is not None:
            in_a = np.greater_equal(A, lo)
        if hi is not None:
            in_a = np.logical_and(in_a, np.less_equal(A, hi))
        if _on(a):
            ra = accumulate_masked(a, g, in_a)
        below: Any = False  # a < lo ≤ hi: y = lo
        if lo is not None and (_on(lo_cd) or _on(hi_cd)):
            below = np.less(A, lo)
            if hi is not None:
                below = np.logical_and(below, np.less_equal(lo, hi))
            if _on(lo_cd):
                rlo = accumulate_masked(lo_cd, g, below)
        if _on(hi_cd):  # y = hi otherwise (nan: nowhere)
            at_hi = np.logical_and(np.equal(y, hi), np.logical_not(np.logical_or(in_a, below)))
            rhi = accumulate_masked(hi_cd, g, at_hi)
        return (NO_R, *[ra, rlo, rhi][: 1 + len(bounds)])

    return out, pullback


_NONE_BOUND = CoDual(None, None)


def _kw_bound(kw: dict[str, Any], *names: str) -> CoDual:
    for n in names:
        v = kw.get(n)
        if v is not None:
            return v if isinstance(v, CoDual) else CoDual(v, None)
    return _NONE_BOUND


# -- np.where ---------------------------------------------------------------------------------


def _where_examples() -> list[rulekit.Example]:
    r = np.random.default_rng(54)
    c = r.normal(size=(3, 4)) > 0
    return [
        rulekit.example(c, r.normal(size=(3, 4)), r.normal(size=(3, 4))),
        rulekit.example(c, r.normal(size=4).astype(np.float32), 0.0),
        rulekit.example(c[:, :1], np.float64(2.5), r.normal(size=(3, 4)) + 1j),
        rulekit.example(np.float64(-1.0), 2, np.float64(3.5)),
    ]


@rulekit.rrule.register(np.where, Numeric, Numeric, Numeric, examples=_where_examples)
def where_rrule(f: CoDual, c: CoDual, x: CoDual, y: CoDual) -> tuple[CoDual, Any]:
    """z = where(c, x, y) ⇒ x̄ += ȳ where c, ȳ̄ += ȳ where not c (c: no adjoint)."""
    C = c.x
    z = np.where(C, x.x, y.x)
    out = output(z)
    if not (_on(x) or _on(y)):
        return out, lambda dy: (NO_R, zero_rdata_of(c), zero_rdata_of(x), zero_rdata_of(y))

    def pullback(dy: Any) -> tuple[Any, ...]:
        g = out.dx
        m = C if type(C) is _nd and C.dtype == np.bool_ else np.not_equal(C, 0)
        rx = accumulate_masked(x, g, m) if _on(x) else NO_R
        ry = accumulate_masked(y, g, np.logical_not(m)) if _on(y) else NO_R
        return (NO_R, zero_rdata_of(c), rx, ry)

    return out, pullback


def _where1_examples() -> list[rulekit.Example]:
    return [rulekit.example(np.array([0.0, 1.5, 0.0, -2.0]))]


rulekit.rrule.register(np.where, Numeric, examples=_where1_examples)(nondiff)
