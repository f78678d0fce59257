"""Reductions of a scalar (`np.sum(loss)`, `np.max(s)`, `np.var(s)`): the identity, or zero.

numpy reduces a real or complex scalar (or, with `axis=None`/`0`/`-1`,
`keepdims=False`) to the same value, as a numpy scalar: y = x ⇒ x̄ = ȳ. The
spread of one value, `np.var`/`np.std`, is the constant 0 (NaN for `ddof=1`):
y = 0 ⇒ x̄ = 0. Any other option is left to numpy, which raises for what a scalar
does not have.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

import rulekit
from rulekit import CoDual, Vararg
from rules._support.cotangents import NO_F, NO_R

__all__ = ["scalar_reduction_rrule", "scalar_spread_rrule"]

_FUNCTIONS = (np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.nansum, np.nanmax,
              np.nanmin, np.nanmean)  # fmt: skip
# (not nanvar/nanstd: they have no rule for arrays yet, tests/rulekit/test_primal_only.py)
_SPREADS = (np.var, np.std)
_Real = Union[float, np.floating]
_Complex = Union[complex, np.complexfloating]


def scalar_reduction_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> Any:
    """y = reduce(x) = x for a scalar x ⇒ x̄ = ȳ (NaN-skipping forms: x̄ = 0 at NaN).

    With `keepdims=True` numpy returns a 0-d array: its cotangent is in its fdata.
    """
    y = f.x(x.x, *[a.x for a in args], **kwargs)
    array = isinstance(y, np.ndarray)
    out = CoDual(y, np.zeros_like(y) if array else NO_F)
    nulls = (NO_R,) * (len(args) + 1)
    skip_nan = f.x in (np.nansum, np.nanmax, np.nanmin, np.nanmean) and x.x != x.x

    def scalar_reduction_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is None:
            return (NO_R, *nulls)
        g = out.dx[()] if array else dy
        return (NO_R, type(x.x)(0.0 if skip_nan else g), *nulls[1:])

    return out, scalar_reduction_pullback


def scalar_spread_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> Any:
    """y = var(x) or std(x) = 0 for a scalar x (a constant) ⇒ x̄ = 0.

    The result is real (numpy's var of a complex value is real); with
    `keepdims=True` it is a 0-d array.
    """
    y = f.x(x.x, *[a.x for a in args], **kwargs)
    array = isinstance(y, np.ndarray)
    out = CoDual(y, np.zeros_like(y) if array else NO_F)
    nulls = (NO_R,) * (len(args) + 1)

    def scalar_spread_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is None:
            return (NO_R, *nulls)
        return (NO_R, type(x.x)(0.0), *nulls[1:])

    return out, scalar_spread_pullback


def _examples() -> list[rulekit.Example]:
    return [
        rulekit.example(np.float64(1.5)),
        rulekit.example(-0.25),
        rulekit.example(2.0, None),
        rulekit.example(np.float64(0.5), keepdims=True),
    ]


def _complex_examples() -> list[rulekit.Example]:
    return [
        rulekit.example(np.complex128(0.5 - 2.0j)),
        rulekit.example(1.5 + 0.25j, None),
        rulekit.example(np.complex64(1.5 + 0.25j), keepdims=True),
    ]


for _fn in _FUNCTIONS:
    rulekit.rrule.register(_fn, _Real, Vararg[Any], examples=_examples)(scalar_reduction_rrule)
    rulekit.rrule.register(_fn, _Complex, Vararg[Any], examples=_complex_examples)(
        scalar_reduction_rrule
    )
for _spread in _SPREADS:
    rulekit.rrule.register(_spread, _Real, Vararg[Any], examples=_examples)(scalar_spread_rrule)
    rulekit.rrule.register(_spread, _Complex, Vararg[Any], examples=_complex_examples)(
        scalar_spread_rrule
    )
