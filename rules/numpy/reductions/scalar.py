"""Reductions of a real scalar (`np.sum(loss)`, `np.max(s)`): the identity.

numpy reduces a scalar (or, with `axis=None`/`0`/`-1`, `keepdims=False`) to
the same value, as a numpy scalar: y = x ⇒ x̄ = ȳ. Any other option is left to
numpy, which raises for what a scalar does not have.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

import rulekit
from rulekit import CoDual, Vararg
from rules._support.cotangents import NO_F, NO_R

__all__ = ["scalar_reduction_rrule"]

_FUNCTIONS = (np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.nansum, np.nanmax,
              np.nanmin, np.nanmean)  # fmt: skip


def scalar_reduction_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> Any:
    """y = reduce(x) = x for a real scalar x ⇒ x̄ = ȳ (NaN-skipping forms: x̄ = 0 at NaN).

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


def _examples() -> list[rulekit.Example]:
    return [
        rulekit.example(np.float64(1.5)),
        rulekit.example(-0.25),
        rulekit.example(2.0, None),
        rulekit.example(np.float64(0.5), keepdims=True),
    ]


for _fn in _FUNCTIONS:
    rulekit.rrule.register(_fn, Union[float, np.floating], Vararg[Any], examples=_examples)(
        scalar_reduction_rrule
    )
