"""Helpers of the forward rules and differentiable pullbacks of the reductions (and products).

Everything here is plain NumPy on possibly traced values: shapes, dtypes and static
options are read, values are only computed with (reshape, broadcast_to, sums, where).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import rulekit
from rulekit import Dual
from rules.numpy.reductions._common import NOVALUE, axes_of, kept_shape

__all__ = [
    "cot_like",
    "kept",
    "kind",
    "options",
    "reduction_plan",
    "safe_ratio",
    "spread",
    "tangent_of",
]


def kind(v: Any) -> str:
    """The dtype kind of a (possibly traced) value: "f", "c", "i", "b", ..."""
    dt = getattr(v, "dtype", None)
    if dt is not None:
        return str(dt.kind)
    if isinstance(v, bool):
        return "b"
    return "c" if isinstance(v, complex) else "f" if isinstance(v, float) else "i"


def cot_like(g: Any, x: Any) -> Any:
    """Cotangent `g` as the cotangent of operand `x`: x's shape (broadcast axes summed, a
    scalar's sum), the real part for a real x, x's float dtype."""
    if kind(g) == "c" and kind(x) != "c":
        g = np.real(g)
    shape = np.shape(x)
    if np.shape(g) != shape:
        g = np.sum(g) if not shape else rulekit.unbroadcast(g, shape)
        if np.shape(g) != shape:
            g = np.reshape(g, shape)
    dt = getattr(x, "dtype", None)
    gdt = getattr(g, "dtype", None)
    if dt is not None and gdt is not None and dt.kind in "fc" and gdt != dt:
        g = g.astype(dt)
    return g


def options(names: Sequence[str], args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's options by name (positional values after x, then keywords), numpy's
    `<no value>` dropped; Duals (frule arguments) are unwrapped to their primals."""
    o = {n: (a.x if isinstance(a, Dual) else a) for n, a in zip(names, args, strict=False)}
    o.update({k: (v.x if isinstance(v, Dual) else v) for k, v in kwargs.items()})
    if o.get("out") is not None and o.get("out") is not NOVALUE:
        raise NotImplementedError(
            "a reduction's forward rule / differentiable pullback was called with out=: "
            "call it without out= (the engine records out= as a copy into the destination)."
        )
    return {k: v for k, v in o.items() if v is not NOVALUE}


_Plan = tuple[tuple[int, ...], tuple[int, ...]]


def reduction_plan(o: dict[str, Any], shape: tuple[int, ...], default_axis: Any = None) -> _Plan:
    """`(axes, kept_shape)` of a reduction with options `o` of an array of `shape`."""
    axes = axes_of(o.get("axis", default_axis), len(shape))
    return axes, kept_shape(shape, axes)


def kept(v: Any, kshape: tuple[int, ...]) -> Any:
    """A reduction's output (or ȳ) with its kept dims, to broadcast against the input (a
    number stays a number: it broadcasts, and traced numbers have no reshape rule)."""
    return v if np.ndim(v) == 0 else np.reshape(v, kshape)


def spread(g: Any, kshape: tuple[int, ...], shape: tuple[int, ...]) -> Any:
    """A reduction's ȳ broadcast back to the input's `shape` (kshape: its kept-dims shape)."""
    if np.ndim(g) == 0:
        return g * np.ones(shape, dtype=getattr(g, "dtype", None) or np.result_type(g))
    return np.broadcast_to(np.reshape(g, kshape), shape)


def safe_ratio(a: Any, b: Any) -> Any:
    """a / b, and 0 where b == 0 (no division by zero, so also 0 in every derivative)."""
    nz = b != 0
    return np.where(nz, a / np.where(nz, b, 1), 0)


def tangent_of(v: Any) -> Any:
    """The tangent of a keyword value: a Dual's dx, else None (a constant)."""
    return v.dx if isinstance(v, Dual) else None
