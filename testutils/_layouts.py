"""Memory layouts: copies of a call's arrays in other layouts, and how to name a layout.

Memory layout (C, F, strided, negative strides) never changes a result
(docs/guarantees.md). `check_rule` tries every call again with every array
argument copied into each layout of `VARIANTS` (same values, dtype and writeable
flag; an array passed twice stays one object), so that a rule which only works
on C-contiguous memory is caught on the caller's C-ordered examples too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from testutils._trees import clone, leaves, tree_map

__all__ = ["LAYOUTS", "VARIANTS", "describe_layout", "layout_key", "relayout", "relayout_values"]

LAYOUTS = ("C", "F", "negative", "strided")
VARIANTS = (*LAYOUTS, "mixed")  # "mixed": the k-th array of the call in LAYOUTS[(k + 1) % 4]

#: How a failure message names each variant.
VARIANT_NAMES = {
    "C": "C-ordered copies of every array argument",
    "F": "F-ordered copies of every array argument",
    "negative": "copies of every array argument with negative strides (every axis reversed)",
    "strided": "strided views (every other element of a larger buffer) of every array argument",
    "mixed": "array arguments in a mix of C, F, negative-stride and strided layouts",
}


def relayout(a: np.ndarray, layout: str) -> np.ndarray:
    """A copy of `a` (same values, dtype, writeable flag) in `layout` (one of `LAYOUTS`)."""
    if layout == "C" or a.ndim == 0:
        out = np.array(a, order="C", copy=True)
    elif layout == "F":
        out = np.array(a, order="F", copy=True)
    elif layout == "negative":  # every axis reversed in memory: all strides negative
        out = np.flip(np.array(np.flip(a), order="C", copy=True))
    else:  # a view of every other element of a larger buffer, along every axis
        big = np.zeros(tuple(2 * n for n in a.shape), a.dtype)
        every_other: Any = (*(slice(None, None, 2) for _ in a.shape), ...)
        out = big[every_other]
        out[...] = a
    if not a.flags.writeable:
        out.flags.writeable = False
    return out


def relayout_values(values: Any, variant: str) -> Any:
    """Every array leaf of `values` (a list or tuple of arguments, or a dict) in `variant`.

    An array object that appears twice stays one object (`f(x, out=x)`); other
    leaves are cloned.
    """
    done: dict[int, np.ndarray] = {}

    def leaf(v: Any) -> Any:
        if not isinstance(v, np.ndarray):
            return clone(v)
        if id(v) not in done:
            k = len(done)
            done[id(v)] = relayout(v, LAYOUTS[(k + 1) % 4] if variant == "mixed" else variant)
        return done[id(v)]

    if isinstance(values, dict):
        return {k: tree_map(v, leaf) for k, v in values.items()}
    return type(values)(tree_map(v, leaf) for v in values)


def layout_key(values: Any) -> tuple[Any, ...]:
    """The strides and contiguity of every array leaf: equal keys are equal layouts."""
    return tuple(
        (path, v.strides, v.flags.c_contiguous, v.flags.f_contiguous, _offset_sign(v))
        for path, v in leaves(values)
        if isinstance(v, np.ndarray)
    )


def _offset_sign(a: np.ndarray) -> bool:
    return any(s < 0 for s in a.strides)


def describe_layout(a: np.ndarray) -> str:
    """`C-contiguous`, `F-contiguous`, `negative strides`, `strided`, `0-d`, ..."""
    if a.ndim == 0:
        return "0-d"
    if any(s < 0 for s, n in zip(a.strides, a.shape, strict=True) if n > 1):
        return f"negative strides {a.strides}"
    if a.flags.c_contiguous and a.flags.f_contiguous:
        return "contiguous"
    if a.flags.c_contiguous:
        return "C-contiguous"
    if a.flags.f_contiguous:
        return "F-contiguous"
    return f"strided {a.strides}"
