"""Helpers shared by the scipy.special rules (`.unary`, `.binary`, `.gamma_bessel`,
`.wrapped`): type patterns derived from a ufunc's loops, `declare` (a `rulekit.elementwise`
declaration with scipy's conventions), cotangent plumbing, and example builders.

See docs/conventions-special.md for the conventions (domains, non-differentiable
points, complex support) that the rules built here follow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Union

import numpy as np

import rulekit
from rulekit import Array, CoDual, Dual
from rulekit._declared_rules import elementwise_frule, elementwise_vjp
from rulekit._elementwise import Elementwise, declaring_module, elementwise
from rulekit._elementwise import operand_pattern as _operand_pattern
from rules._support.arguments import is_active
from rules._support.cotangents import output_cotangent

__all__ = [
    "CONST",
    "active",
    "check_ufunc_kwargs",
    "cot",
    "declare",
    "no_partial",
    "operand_pattern",
    "refuse_active",
    "refusing_forward",
    "signed",
    "unary_examples",
    "uniform",
]

#: Integer and boolean operands: constants of a real function (they get no cotangent).
CONST = Union[int, bool, np.integer, np.bool_, Array[np.integer], Array[np.bool_]]

# ufunc keyword arguments that do not change what is computed (or only the output dtype).
_PASSED_KWARGS = frozenset({"dtype", "casting", "order", "subok"})


def operand_pattern(ufunc: np.ufunc, complex_: bool = False, const: bool = False) -> Any:
    """Pattern for a differentiable operand of `ufunc`: arrays and scalars of its loop types,
    plus Python float (and complex if `complex_`); with `const`, integer/bool constants too."""
    return _operand_pattern(ufunc, complex_, const)


def check_ufunc_kwargs(ufunc: np.ufunc, kwargs: dict[str, Any]) -> None:
    """Refuse ufunc keywords that change which elements are computed (where=, ...)."""
    bad = sorted(set(kwargs) - _PASSED_KWARGS)
    if bad:
        raise NotImplementedError(
            f"scipy.special.{ufunc.__name__}: keyword argument(s) {', '.join(bad)} have no rule. "
            "Fix: compute without them, e.g. with np.where on the result instead of where=. "
            "(The rules take only dtype=, casting=, order=, subok=.)"
        )


#: Old name of `rules._support.arguments.is_active`, until `.unary`, `.binary` and
#: `.gamma_bessel` import that instead.
active = is_active


def cot(out_x: Any, out_dx: Any, dy: Any) -> Any:
    """`rules._support.cotangents.output_cotangent` of the output CoDual `(out_x, out_dx)`
    (its old spelling, until `.unary`, `.binary` and `.gamma_bessel` switch)."""
    return output_cotangent(CoDual(out_x, out_dx), dy)


def declare(
    ufunc: np.ufunc,
    *derivs: Callable[..., Any],
    patterns: Sequence[Any],
    examples: Any,
    adjoint: str,
    constant: dict[int, str] | None = None,
    why: str = "",
) -> Elementwise:
    """`rulekit.elementwise(ufunc, *derivs)` registered for `patterns` (one tuple), its
    partials evaluated without warnings (at poles and domain edges they are ±inf/NaN by
    design, docs/conventions-special.md). The operands in `constant` (index: label) have
    no derivative: their partial is never called, and the rule raises NotImplementedError
    (`why`) when one is active. `adjoint` is the math, for the rule's docstring."""
    module = declaring_module()
    name = ufunc.__name__
    doc = f"scipy.special.{name}: {adjoint}"
    decl = elementwise(ufunc, *derivs, patterns=(), quiet=True, doc=doc, module=module)
    rule = decl.rule
    if constant:
        fixed, inner = constant, decl.rule

        def rule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
            refuse_active(name, args, fixed, why)
            return inner(f, *args, **kwargs)

        rule.__name__ = rule.__qualname__ = inner.__name__
        rule.__doc__ = doc
    rulekit.registry.add("rrule", ufunc, patterns, rule, examples=examples, module=module)
    if constant:
        decl.forward, decl.vjp = refusing_forward(decl, constant, why)
    decl.register_forward(*patterns, examples=examples, module=module)
    return decl


def refusing_forward(
    decl: Elementwise, which: dict[int, str], why: str, name: str | None = None
) -> tuple[Any, Any]:
    """The derived forward rule and differentiable pullback of `decl`, refusing (like the
    reverse rule) an operand listed in `which` that has a tangent / is active."""
    frule, vjp = elementwise_frule(decl), elementwise_vjp(decl)
    name = name or decl.fn.__name__

    def forward(f: Dual, *args: Dual, **kwargs: Any) -> Dual:
        for i, label in which.items():
            if args[i].dx is not None and _inexact(args[i].x):
                _refuse(name, label, why)
        return frule(f, *args, **kwargs)

    def pullback_rule(active: Sequence[bool], *xs: Any, **kwargs: Any) -> tuple[Any, Any]:
        for i, label in which.items():
            if active[i] and _inexact(xs[i]):
                _refuse(name, label, why)
        return vjp(active, *xs, **kwargs)

    forward.__name__ = forward.__qualname__ = frule.__name__
    pullback_rule.__name__ = pullback_rule.__qualname__ = vjp.__name__
    forward.__doc__, pullback_rule.__doc__ = frule.__doc__, vjp.__doc__
    return forward, pullback_rule


def no_partial(*args: Any) -> Any:
    """The partial of an operand declared constant (`declare(..., constant=...)`): never
    evaluated, because the rule refuses that operand when it is active."""
    raise AssertionError("the partial of a constant operand was evaluated")


def refuse_active(name: str, args: Sequence[CoDual], which: dict[int, str], why: str) -> None:
    """Raise NotImplementedError if an argument listed in `which` is active."""
    for i, label in which.items():
        if is_active(args[i]):
            _refuse(name, label, why)


def _refuse(name: str, label: str, why: str) -> None:
    raise NotImplementedError(
        f"scipy.special.{name}: the derivative with respect to {label} is not "
        f"implemented, and {label} is active here. Fix: pass {label} as a constant "
        f"(a plain value, not traced and not in argnums, or an integer). ({why}.)"
    )


def _inexact(x: Any) -> bool:
    """Whether value `x` (possibly traced) is float/complex, so has a derivative."""
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return bool(dt.kind in "fc")
    return isinstance(x, (float, complex, np.inexact))


# -- example data -------------------------------------------------------------------------------

Sampler = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def uniform(lo: float, hi: float) -> Sampler:
    """Uniform samples in (lo, hi)."""
    return lambda rng, shape: rng.uniform(lo, hi, size=shape)


def signed(lo: float, hi: float) -> Sampler:
    """Magnitudes in (lo, hi) with random signs (keeps away from a kink at 0)."""
    return lambda rng, shape: rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], size=shape)


def unary_examples(
    seed: int, sample: Sampler, cplx: Sampler | None = None
) -> Callable[[], list[rulekit.Example]]:
    """Four examples: a float64 (2, 3) array, a float32 (4,) array, a Python float, and a
    complex128 (3,) array (`cplx` samples its imaginary part) or else a numpy float32 scalar."""

    def make() -> list[rulekit.Example]:
        rng = np.random.default_rng(seed)
        ex = [
            rulekit.example(sample(rng, (2, 3))),
            rulekit.example(sample(rng, (4,)).astype(np.float32)),
            rulekit.example(float(sample(rng, ()))),
        ]
        if cplx is not None:
            ex.append(rulekit.example(sample(rng, (3,)) + 1j * cplx(rng, (3,))))
        else:
            ex.append(rulekit.example(np.float32(sample(rng, ()))))
        return ex

    return make
