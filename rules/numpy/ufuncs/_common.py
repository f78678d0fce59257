"""Machinery shared by the ufunc rules: operand patterns, declarations, cotangent helpers.

Differentiable ufuncs are declared once with `rulekit.elementwise` (their partials, see
`rulekit._elementwise`): `declare` registers the plain rule and keeps the declaration in
`DECLARATIONS`, where the fast paths (`rules.numpy.ufuncs.scalar`, `.fused`, `.inplace`)
find the partials they compile or evaluate. The helpers below serve the hand-written rules
(conjugate, complex |x|, divmod, modf, frexp, clip, where, ...): `accumulate` (x̄ += g,
unbroadcast) and `differentiable` (the activity test) are the declarations' own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit import CoDual, NoRData
from rulekit._elementwise import (
    Elementwise,
    accumulate,
    declaring_module,
    differentiable,
    elementwise,
)
from rules._support.cotangents import NO_R
from rules._support.cotangents import zero_rdata_of as _zero_rdata_of
from rules._support.outputs import new_output
from rules._support.patterns import Complex, Inexact, IntLike, Numeric, Real, RealNumeric

__all__ = [
    "DECLARATIONS",
    "DOMAINS",
    "Complex",
    "Inexact",
    "IntLike",
    "Numeric",
    "Real",
    "RealNumeric",
    "accumulate",
    "accumulate_masked",
    "complex_values",
    "conj",
    "cotangent",
    "declare",
    "differentiable",
    "nondiff",
    "output",
    "over",
    "scale",
    "tuple_cotangent",
    "ufunc_kwargs",
    "zero_rdata_of",
]

_nd = np.ndarray

Pullback = Callable[[Any], tuple[Any, ...]]


#: A new output: zero fdata laid out like `y` for float/complex arrays (tuples element-wise),
#: else NoFData (`rules._support.outputs.new_output`).
output = new_output


def conj(v: Any) -> Any:
    """conj(v) for complex values; real values as they are (no copy)."""
    if type(v) is _nd:
        return np.conjugate(v) if v.dtype.kind == "c" else v
    return v.conjugate() if isinstance(v, (complex, np.complexfloating)) else v


def scale(t: np.ndarray, g: np.ndarray) -> np.ndarray:
    """conj(t)·g, in place in `t` (a temporary of g's shape the caller owns)."""
    if t.dtype.kind == "c":
        np.conjugate(t, out=t)
    elif g.dtype.kind == "c":  # a real derivative of a complex output: cannot go in place
        return t * g
    np.multiply(t, g, out=t)
    return t


def over(g: Any, t: np.ndarray) -> Any:
    """ȳ / conj(t), in place in `t` (a temporary of ȳ's shape the caller owns)."""
    if t.dtype.kind == "c":
        np.conjugate(t, out=t)
    elif g.dtype.kind == "c":
        return g / t
    return np.divide(g, t, out=t)


def accumulate_masked(cd: CoDual, g: np.ndarray, mask: np.ndarray) -> Any:
    """`accumulate(cd, g·mask)` for a boolean `mask` broadcastable to `g`."""
    t = np.asarray(mask).astype(g.dtype)
    if t.shape != g.shape:
        t = t * g
    else:
        np.multiply(t, g, out=t)
    return accumulate(cd, t)


def ufunc_kwargs(f: Any, kw: dict[str, Any], *vals: Any) -> tuple[Any, ...]:
    """`(kwargs, *operands)` for a ufunc call with keywords.

    `dtype=d` is applied by casting the operands to `d` first (what numpy's loop does),
    so the pullback differentiates the cast values and `acc` casts cotangents back.
    `where=` and `signature=` have no rule: they raise, saying what to do instead.
    """
    for k in ("where", "signature"):
        if k in kw:
            name = getattr(f, "__name__", repr(f))
            hint = (
                f"Use np.where(mask, np.{name}(...), other) instead."
                if k == "where"
                else "Cast the inputs with .astype(...) before the call instead."
            )
            raise NotImplementedError(
                f"rulekit: np.{name}(..., {k}=...) on traced values has no rule. {hint}"
            )
    if kw.get("dtype") is None:
        return (kw, *vals)
    kw = dict(kw)
    d = np.dtype(kw.pop("dtype"))
    return (kw, *(np.asarray(v, dtype=d) if type(v) is _nd else d.type(v) for v in vals))


def _scalar_g(dy: Any) -> Any:
    """The cotangent of a scalar output as a 1-element array (None if there is none)."""
    if isinstance(dy, NoRData):
        return None
    return np.reshape(dy, (1,))


def cotangent(out: CoDual, dy: Any) -> Any:
    """ȳ as an array: an array output's fdata, a scalar output's rdata as a 1-element array
    (None if it has none)."""
    return out.dx if type(out.x) is _nd else _scalar_g(dy)


def tuple_cotangent(out: CoDual, dy: Any, i: int) -> Any:
    """The cotangent of element `i` of a tuple output, as `cotangent` (None if it has none)."""
    if isinstance(out.dx, tuple) and type(out.dx[i]) is _nd:
        return out.dx[i]
    if isinstance(dy, tuple) and not isinstance(dy[i], NoRData):
        return np.reshape(dy[i], (1,))
    return None


#: the declaration of every differentiable ufunc, by ufunc (the fast paths derive from them)
DECLARATIONS: dict[Any, Elementwise] = {}


def declare(
    uf: Any, *derivs: Any, patterns: Any, examples: Any, quiet: bool = False, **kw: Any
) -> Elementwise:
    """`rulekit.elementwise(uf, *derivs, ...)` registered for each tuple of `patterns` with
    the matching `examples` (a list parallel to `patterns`); kept in `DECLARATIONS`."""
    module = declaring_module()
    decl = elementwise(uf, *derivs, holomorphic=True, patterns=(), quiet=quiet, module=module, **kw)
    for ps, ex in zip(patterns, examples, strict=True):
        decl.register(*ps, examples=ex, module=module)
    DECLARATIONS[uf] = decl
    return decl


def zero_rdata_of(cd: CoDual) -> Any:
    """The zero rdata of an operand: a zero of an active scalar's type, else NoRData (an
    inactive operand's too: `rules._support.cotangents.zero_rdata_of` of an active one)."""
    return NO_R if cd.dx is None else _zero_rdata_of(cd)


def nondiff(f: CoDual, *args: CoDual, **kw: Any) -> tuple[CoDual, Pullback]:
    """A piecewise-constant function (floor, sign, comparisons...): every x̄ += 0.

    Float outputs get zero fdata (they can be written into later) and send nothing
    back; bool/int outputs are not differentiable (NoFData).
    """
    if kw:
        kw = {k: (v.x if isinstance(v, CoDual) else v) for k, v in kw.items()}
    y = f.x(*[a.x for a in args], **kw)

    def nondiff_pullback(dy: Any) -> tuple[Any, ...]:
        return (NO_R, *map(zero_rdata_of, args))

    return output(y), nondiff_pullback


# -- example inputs: small, fixed seeds, inside each function's domain ------------------------

DOMAINS: dict[str, Callable[[np.random.Generator, Any], Any]] = {
    "any": lambda r, s: r.normal(size=s),
    "pos": lambda r, s: r.uniform(0.5, 2.0, size=s),
    "unit": lambda r, s: r.uniform(-0.8, 0.8, size=s),  # arcsin, arctanh: (-1, 1)
    "gt1": lambda r, s: r.uniform(1.3, 3.0, size=s),  # arccosh: (1, ∞)
    "nonzero": lambda r, s: r.choice([-1.0, 1.0], size=s) * r.uniform(0.4, 2.0, size=s),
}


def complex_values(r: np.random.Generator, domain: str, shape: Any) -> Any:
    """Complex values off every branch cut (the cuts lie on the real axis)."""
    re = DOMAINS[domain](r, shape)
    return re + 1j * r.choice([-1.0, 1.0], size=shape) * r.uniform(0.3, 0.8, size=shape)
