"""Cotangent helpers for rule authors: activity, unbroadcasting, accumulation.

The vocabulary every rule needs (the bundled rules' `rules._support.cotangents` builds
on it): `differentiable(arg)` says whether an argument's adjoint must be computed,
`unbroadcast(g, shape)` sums a cotangent over broadcast axes, and `accumulate(arg, g)`
adds a cotangent into an argument, `x̄ += unbroadcast(g)` (in place for an array's
fdata; returned as rdata for a scalar).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit._tangent_types import NoRData

__all__ = ["accumulate", "differentiable", "unbroadcast"]

_nd = np.ndarray
_NO_R = NoRData()
_INEXACT_SCALARS = (float, complex, np.inexact)


def differentiable(cd: Any) -> bool:
    """Whether argument `cd` is active (`dx` is not None) and carries a derivative: a
    float/complex array or scalar (integer and bool operands are constants). Anything
    but a CoDual (a plain keyword value, None) is not."""
    dx = getattr(cd, "dx", None)
    if dx is None:
        return False
    if type(dx) is _nd:
        return dx.dtype.kind in "fc"
    return isinstance(cd.x, _INEXACT_SCALARS)


def unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
    """Sum `g` over the axes along which an operand of `shape` was broadcast to `g.shape`."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, m in enumerate(shape) if m == 1 and g.shape[lead + i] != 1
    )
    return np.sum(g, axis=axes, keepdims=True).reshape(shape) if axes else g.reshape(shape)


def accumulate(cd: Any, g: Any) -> Any:
    """Add cotangent `g` (broadcast shape; None: zero) into argument `cd`; return its rdata.

    Arrays: `cd.dx += unbroadcast(g)` in place (the real part for a real operand), rdata
    NoRData. Scalars: rdata `type(x)(Σg)`. Inactive or integer arguments: NoRData.
    """
    dx = cd.dx
    if dx is None:
        return _NO_R
    if type(dx) is _nd:
        if g is None or dx.dtype.kind not in "fc":
            return _NO_R
        g = np.asarray(g)
        if g.dtype.kind == "c" and dx.dtype.kind != "c":
            g = g.real
        dx += unbroadcast(g, dx.shape)
        return _NO_R
    x = cd.x
    if not isinstance(x, _INEXACT_SCALARS):
        return _NO_R
    total = 0 if g is None else (np.sum(g) if type(g) is _nd else g)
    if not isinstance(x, (complex, np.complexfloating)):
        total = np.real(total)
    return type(x)(total)
