"""Helpers shared by the scipy.special rules (rules.scipy.special, rules.scipy.special,
rules.scipy.special): type patterns derived from a ufunc's loops, one generic
elementwise rule, cotangent plumbing, and example builders.

See docs/conventions-special.md for the conventions (domains, non-differentiable
points, complex support) that the rules built here follow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Union

import numpy as np

import rulekit
from rulekit import Array, CoDual, NoRData
from rules._support.util import NO_R, accumulate, new_output

__all__ = [
    "CONST",
    "active",
    "check_ufunc_kwargs",
    "cot",
    "operand_pattern",
    "signed",
    "times_conj",
    "ufunc_rule",
    "unary_examples",
    "uniform",
]

#: Integer and boolean operands: constants of a real function (they get no cotangent).
CONST = Union[int, bool, np.integer, np.bool_, Array[np.integer], Array[np.bool_]]

# ufunc keyword arguments that do not change what is computed (or only the output dtype).
_PASSED_KWARGS = frozenset({"dtype", "casting", "order", "subok"})

_REAL_LOOPS: dict[str, tuple[type, ...]] = {
    "f": (np.float16, np.float32),  # float16 runs (exactly) in the float32 loop
    "d": (np.float64,),
    "g": (np.longdouble,),
}
_COMPLEX_LOOPS: dict[str, tuple[type, ...]] = {"F": (np.complex64,), "D": (np.complex128,)}


def _loop_types(ufunc: np.ufunc, complex_: bool) -> list[type]:
    """The numpy scalar types whose arrays `ufunc` evaluates in one of its own loops."""
    chars = {t.split("->")[0][0] for t in ufunc.types}
    table = {**_REAL_LOOPS, **(_COMPLEX_LOOPS if complex_ else {})}
    return [t for c, ts in table.items() if c in chars for t in ts]


def operand_pattern(ufunc: np.ufunc, complex_: bool = False, const: bool = False) -> Any:
    """Pattern for a differentiable operand of `ufunc`: arrays and scalars of its loop types,
    plus Python float (and complex if `complex_`); with `const`, integer/bool constants too."""
    types = _loop_types(ufunc, complex_)
    py: list[Any] = [float, *([complex] if complex_ else [])]
    parts = [*(Array[t] for t in types), *types, *py]
    if const:
        parts.append(CONST)
    return Union[tuple(parts)]


def check_ufunc_kwargs(ufunc: np.ufunc, kwargs: dict[str, Any]) -> None:
    """Refuse ufunc keywords that change which elements are computed (where=, ...)."""
    bad = sorted(set(kwargs) - _PASSED_KWARGS)
    if bad:
        raise NotImplementedError(
            f"scipy.special.{ufunc.__name__}: keyword argument(s) {', '.join(bad)} have no rule. "
            "Fix: compute without them, e.g. with np.where on the result instead of where=. "
            "(The rules take only dtype=, casting=, order=, subok=.)"
        )


def active(cd: Any) -> bool:
    """True if `cd` is a CoDual whose adjoint is wanted and exists (float/complex data)."""
    if not isinstance(cd, CoDual) or cd.dx is None:
        return False
    return isinstance(cd.dx, np.ndarray) or isinstance(
        cd.x, (float, complex, np.floating, np.complexfloating)
    )


def cot(out_x: Any, out_dx: Any, dy: Any) -> Any:
    """The cotangent of an output: its fdata for an array, the pullback's `dy` for a scalar."""
    if isinstance(out_x, np.ndarray):
        return out_dx
    return 0.0 if isinstance(dy, NoRData) or dy is None else dy


def times_conj(d: Any, g: Any) -> Any:
    """conj(d)·g: the cotangent of an input whose partial derivative is `d` (JAX convention)."""
    return (np.conj(d) if np.iscomplexobj(d) else d) * g


Partials = Callable[..., Sequence[Any]]


def ufunc_rule(ufunc: np.ufunc, partials: Partials, nargs: int, adjoint: str) -> Any:
    """The elementwise rule of `ufunc` (the caller registers it, so the registry records the
    caller's module).

    `partials(need, *xs, y)` returns ∂y/∂xᵢ for every i with `need[i]` (None for the
    others): elementwise, broadcastable to y. The pullback does `x̄ᵢ += conj(∂ᵢ)·ȳ`,
    summed over broadcast axes (`accumulate`). `adjoint` is the math, for the docstring.
    """

    def rule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        check_ufunc_kwargs(ufunc, kwargs)
        xs = tuple(a.x for a in args)
        y = ufunc(*xs, **kwargs)
        out = new_output(y)

        def pullback(dy: Any) -> tuple[Any, ...]:
            need = tuple(active(a) for a in args)
            if not any(need):
                return (NO_R,) * (nargs + 1)
            g = cot(y, out.dx, dy)
            # At poles and domain edges the partials are ±inf/NaN by design (see the docs
            # page): no floating-point warnings for them.
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                ds = partials(need, *xs, y)
                grads = [times_conj(d, g) if k else None for d, k in zip(ds, need, strict=True)]
            return (
                NO_R,
                *(
                    NO_R if d is None else accumulate(a, d)
                    for a, d in zip(args, grads, strict=True)
                ),
            )

        return out, pullback

    name = ufunc.__name__
    rule.__name__ = rule.__qualname__ = f"{name}_rrule"
    rule.__doc__ = f"scipy.special.{name}: {adjoint}"
    return rule


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
