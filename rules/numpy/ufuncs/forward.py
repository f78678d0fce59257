"""Forward rules and differentiable pullbacks for the ufuncs with hand-written reverse rules
(`rules.numpy.ufuncs.unary`, `.misc`): the piecewise-constant and comparison functions,
`np.absolute`, `np.conjugate`, `np.real`, `np.imag`, `np.angle`, `np.modf`, `np.frexp`,
`np.divmod`; `np.clip` and `np.where` are in `.forward_select` (imported at the end).

    piecewise constant (floor, sign, round, ...):  ẏ = 0,  x̄ = 0  (float outputs)
    comparisons, isnan, logical_* (bool outputs):   ẏ = None, x̄ = None
    |x|:      ẏ = sign(x)·ẋ (real), Re(conj(z)·ż)/|z| (complex);  x̄ = sign(x)·ȳ, z/|z|·ȳ
    conj:     ẏ = conj(ẋ);  x̄ = conj(ȳ)
    Re, Im:   ẏ = Re ẋ, Im ẋ;  x̄ = ȳ, i·ȳ (complex x; Im of a real x: 0)
    angle:    ẏ = Im(conj(z)·ż)/|z|² (·180/π);  z̄ = i·z/|z|²·ȳ  (real x: 0)
    modf:     (ṗ, ṅ) = (ẋ, 0);  frexp: ṁ = ldexp(ẋ, −e);  divmod: (q̇, ṙ) = (0, ȧ − q·ḃ)

Everything is plain numpy on the arguments (masks from comparisons), so the rules trace.
The helpers `inexact`, `zeros_of` and `to_arg` are shared with the other forward modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import rulekit
from rulekit import Dual, Vararg, unbroadcast
from rulekit._declared_rules import shaped_like
from rules._support.forward import register_like
from rules.numpy.ufuncs._common import nondiff

__all__ = ["index_rules", "inexact", "to_arg", "zeros_of"]


# -- helpers ------------------------------------------------------------------------------------


def inexact(x: Any) -> bool:
    """Whether value `x` (possibly traced; or a tuple of values) is float/complex."""
    if isinstance(x, (tuple, list)):
        return any(inexact(e) for e in x)
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return bool(dt.kind in "fc")
    return isinstance(x, (float, complex, np.inexact))


def zeros_of(y: Any) -> Any:
    """Zeros of `y`'s shape and dtype (a tuple: per element; None for a non-float element)."""
    if isinstance(y, tuple):
        return tuple(zeros_of(e) if inexact(e) else None for e in y)
    dt = getattr(y, "dtype", None)
    if dt is None:
        return type(y)(0)
    if isinstance(y, np.generic):
        return dt.type(0)
    return np.zeros(np.shape(y), dt)


def to_arg(g: Any, x: Any) -> Any:
    """Cotangent `g` for argument `x`: x's shape (broadcasting summed), the real part for a
    real x, x's float dtype, 0-d for a scalar x; None when x is not float/complex."""
    if g is None or not inexact(x):
        return None
    if np.shape(g) != np.shape(x):
        g = unbroadcast(g, np.shape(x))
    if np.iscomplexobj(g) and not np.iscomplexobj(x):
        g = np.real(g)
    dt = getattr(x, "dtype", None)
    gdt = getattr(g, "dtype", None)
    if dt is not None and gdt is not None and gdt != dt:
        g = g.astype(dt)
    if np.ndim(x) == 0 and np.ndim(g) != 0:
        g = np.reshape(g, ())
    return g


def index_rules(prim: Any, fn: Any, examples: Any) -> None:
    """Register the three rules of `prim = rulekit.primitive(fn)`, whose output is integer
    indices computed from its arguments' values (argsort, searchsorted, ...): no derivative,
    to any order. Rules call it to get value-dependent indices of traced values; `examples`
    are the calls the kit checks the reverse rule on."""

    def index_frule(f: Dual, *args: Dual, **kw: Any) -> Dual:
        return Dual(fn(*[a.x for a in args], **kw), None)

    def index_vjp(active: Sequence[bool], *args: Any, **kw: Any) -> tuple[Any, Any]:
        return prim(*args, **kw), lambda g: (None,) * len(args)

    rulekit.rrule.register(prim, Any, Vararg[Any], examples=examples)(nondiff)
    rulekit.frule.register(prim, Any, Vararg[Any], examples=examples)(index_frule)
    rulekit.vjp_rule.register(prim, Any, Vararg[Any], examples=examples)(index_vjp)


def _plain(kw: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.x if isinstance(v, Dual) else v) for k, v in kw.items()}


# -- piecewise-constant and comparison functions ----------------------------------------------


def flat_frule(f: Dual, *args: Dual, **kw: Any) -> Dual:
    """ẏ = 0 for a float output (None for bool/int outputs, or all-constant arguments)."""
    y = f.x(*[a.x for a in args], **_plain(kw))
    if not any(a.dx is not None for a in args) or not inexact(y):
        return Dual(y, None)
    return Dual(y, zeros_of(y))


def flat_vjp(f: Any) -> Any:
    def rule(active: Sequence[bool], *xs: Any, **kw: Any) -> tuple[Any, Any]:
        """x̄ = 0 (float outputs) or None (bool/int outputs)."""
        y = f(*xs, **kw)
        zero = inexact(y)

        def pullback(g: Any) -> tuple[Any, ...]:
            return tuple(
                zeros_of(x) if zero and k and inexact(x) else None
                for k, x in zip(active, xs, strict=True)
            )

        return y, pullback

    return rule


_FLAT = [
    np.floor, np.ceil, np.trunc, np.fix, np.spacing, np.sign, np.signbit, np.rint, np.isnan,
    np.isinf, np.isfinite, np.logical_not, np.round, np.around, np.greater, np.greater_equal,
    np.less, np.less_equal, np.equal, np.not_equal, np.logical_and, np.logical_or,
    np.logical_xor, np.floor_divide, np.where,  # (np.where(c): the one-argument form)
]  # fmt: skip
for _fn in _FLAT:
    if _fn is not np.where:
        register_like(_fn, frule=flat_frule, vjp=flat_vjp(_fn))


# -- |x|, conj, Re, Im, angle -------------------------------------------------------------------


def _safe(m: Any) -> Any:
    """|z| with 1 where it is 0 (the divisor of a derivative that is 0 there)."""
    return np.where(np.equal(m, 0), 1.0, m)


def absolute_frule(f: Dual, x: Dual, **kw: Any) -> Dual:
    """ẏ = sign(x)·ẋ (real), Re(conj(z)·ż)/|z| (complex; 0 at z = 0)."""
    y = np.absolute(x.x, **kw)
    if x.dx is None:
        return Dual(y, None)
    if np.iscomplexobj(x.x):
        t = np.real(np.conjugate(x.x) * x.dx) / _safe(y)
    else:
        t = np.sign(x.x) * x.dx
    return Dual(y, shaped_like(t, y))


def absolute_vjp(active: Sequence[bool], x: Any, **kw: Any) -> tuple[Any, Any]:
    """x̄ = sign(x)·ȳ (real), z/|z|·ȳ (complex; 0 at z = 0)."""
    y = np.absolute(x, **kw)

    def pullback(g: Any) -> tuple[Any]:
        if g is None or not active[0]:
            return (None,)
        if np.iscomplexobj(x):
            return (to_arg(x / _safe(y) * g, x),)
        return (to_arg(np.sign(x) * g, x),)

    return y, pullback


def conjugate_frule(f: Dual, x: Dual, **kw: Any) -> Dual:
    """ẏ = conj(ẋ)."""
    y = np.conjugate(x.x, **kw)
    return Dual(y, None if x.dx is None else shaped_like(np.conjugate(x.dx), y))


def conjugate_vjp(active: Sequence[bool], x: Any, **kw: Any) -> tuple[Any, Any]:
    """x̄ = conj(ȳ)."""
    y = np.conjugate(x, **kw)
    return y, lambda g: (None if g is None or not active[0] else to_arg(np.conjugate(g), x),)


def real_frule(f: Dual, x: Dual) -> Dual:
    """ẏ = Re ẋ."""
    y = np.real(x.x)
    return Dual(y, None if x.dx is None else shaped_like(np.real(x.dx), y))


def real_vjp(active: Sequence[bool], x: Any) -> tuple[Any, Any]:
    """x̄ = ȳ (as x's dtype)."""
    y = np.real(x)

    def pullback(g: Any) -> tuple[Any]:
        if g is None or not active[0]:
            return (None,)
        return (to_arg(g * (1 + 0j) if np.iscomplexobj(x) else g, x),)

    return y, pullback


def imag_frule(f: Dual, x: Dual) -> Dual:
    """ẏ = Im ẋ (0 for a real x)."""
    y = np.imag(x.x)
    if x.dx is None:
        return Dual(y, None)
    return Dual(y, shaped_like(np.imag(x.dx), y) if np.iscomplexobj(x.x) else zeros_of(y))


def imag_vjp(active: Sequence[bool], x: Any) -> tuple[Any, Any]:
    """x̄ = i·ȳ (complex x), 0 (real x)."""
    y = np.imag(x)

    def pullback(g: Any) -> tuple[Any]:
        if g is None or not active[0]:
            return (None,)
        return (to_arg(1j * g, x) if np.iscomplexobj(x) else zeros_of(x),)

    return y, pullback


def _angle_deg(rest: Sequence[Any], kw: dict[str, Any]) -> bool:
    return bool(rest[0]) if rest else bool(kw.get("deg", False))


def angle_frule(f: Dual, z: Dual, *rest: Dual, **kw: Any) -> Dual:
    """ẏ = Im(conj(z)·ż)/|z|² (·180/π with deg); 0 for a real z."""
    rx = [r.x for r in rest]
    y = np.angle(z.x, *rx, **kw)
    if z.dx is None:
        return Dual(y, None)
    if not np.iscomplexobj(z.x):
        return Dual(y, zeros_of(y))
    scale = 180.0 / np.pi if _angle_deg(rx, kw) else 1.0
    t = np.imag(np.conjugate(z.x) * z.dx) / _safe(np.square(np.absolute(z.x))) * scale
    return Dual(y, shaped_like(t, y))


def angle_vjp(active: Sequence[bool], z: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """z̄ = i·z/|z|²·ȳ (·180/π with deg); 0 for a real z."""
    y = np.angle(z, *rest, **kw)
    nulls = (None,) * len(rest)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None or not active[0]:
            return (None, *nulls)
        if not np.iscomplexobj(z):
            return (zeros_of(z), *nulls)
        scale = 180.0 / np.pi if _angle_deg(rest, kw) else 1.0
        t = (1j * scale) * z / _safe(np.square(np.absolute(z))) * g
        return (to_arg(t, z), *nulls)

    return y, pullback


register_like(np.absolute, frule=absolute_frule, vjp=absolute_vjp)
register_like(np.conjugate, frule=conjugate_frule, vjp=conjugate_vjp)
register_like(np.real, frule=real_frule, vjp=real_vjp)
register_like(np.imag, frule=imag_frule, vjp=imag_vjp)
register_like(np.angle, frule=angle_frule, vjp=angle_vjp)


# -- modf, frexp, divmod: two outputs -----------------------------------------------------------


def modf_frule(f: Dual, x: Dual) -> Dual:
    """(p, n) = modf x ⇒ (ṗ, ṅ) = (ẋ, 0)."""
    p, n = np.modf(x.x)
    if x.dx is None:
        return Dual((p, n), None)
    return Dual((p, n), (shaped_like(x.dx, p), zeros_of(n)))


def modf_vjp(active: Sequence[bool], x: Any) -> tuple[Any, Any]:
    """x̄ = p̄."""
    y = np.modf(x)

    def pullback(g: Any) -> tuple[Any]:
        gp = g[0] if g is not None else None
        return (None if gp is None or not active[0] else to_arg(gp, x),)

    return y, pullback


def frexp_frule(f: Dual, x: Dual) -> Dual:
    """(m, e) = frexp x, x = m·2ᵉ ⇒ ṁ = ldexp(ẋ, −e) (e: an integer)."""
    m, e = np.frexp(x.x)
    if x.dx is None:
        return Dual((m, e), None)
    return Dual((m, e), (shaped_like(x.dx * np.ldexp(1.0, np.negative(e)), m), None))


def frexp_vjp(active: Sequence[bool], x: Any) -> tuple[Any, Any]:
    """x̄ = ldexp(m̄, −e)."""
    m, e = np.frexp(x)

    def pullback(g: Any) -> tuple[Any]:
        gm = g[0] if g is not None else None
        if gm is None or not active[0]:
            return (None,)
        return (to_arg(gm * np.ldexp(1.0, np.negative(e)), x),)

    return (m, e), pullback


def divmod_frule(f: Dual, a: Dual, b: Dual) -> Dual:
    """(q, r) = divmod(a, b), r = a − q·b ⇒ (q̇, ṙ) = (0, ȧ − q·ḃ)."""
    q, r = np.divmod(a.x, b.x)
    if (a.dx is None and b.dx is None) or not inexact(r):
        return Dual((q, r), None)
    t: Any = 0.0
    if a.dx is not None:
        t = t + a.dx
    if b.dx is not None:
        t = t - q * b.dx
    return Dual((q, r), (zeros_of(q), shaped_like(t, r)))


def divmod_vjp(active: Sequence[bool], a: Any, b: Any) -> tuple[Any, Any]:
    """ā = r̄, b̄ = −q·r̄ (q is piecewise constant)."""
    q, r = np.divmod(a, b)

    def pullback(g: Any) -> tuple[Any, Any]:
        gr = g[1] if g is not None else None
        if gr is None:
            return (zeros_of(a) if active[0] else None, zeros_of(b) if active[1] else None)
        return (
            to_arg(gr, a) if active[0] else None,
            to_arg(-(q * gr), b) if active[1] else None,
        )

    return (q, r), pullback


register_like(np.modf, frule=modf_frule, vjp=modf_vjp)
register_like(np.frexp, frule=frexp_frule, vjp=frexp_vjp)
register_like(np.divmod, frule=divmod_frule, vjp=divmod_vjp)


from rules.numpy.ufuncs import forward_select as forward_select  # noqa: E402  (clip, where)
