"""fdata laid out like its primal: zeros with an array's shape, dtype and strides.

A view of a primal and the same view of its fdata must pair the same elements
(`x.T` with `dx.T`, `x[::-1]` with `dx[::-1]`), so an array's fdata has the
array's own strides, not C order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["exact_layout_possible", "zeros_like_exact"]


def zeros_like_exact(y: np.ndarray) -> np.ndarray:
    """Zeros with `y`'s shape, dtype and strides: the fdata of a new output or input `y`.

    C- and F-contiguous `y` get `np.zeros` in that order. Any other layout (a
    `.real` view of a complex result, negative or gapped strides) gets a zeroed
    buffer spanning `y`'s extent, viewed with `y`'s strides. Only a `y` whose
    elements overlap (a zero stride on a longer axis, as `np.broadcast_to`
    makes) or whose strides are not whole elements gets C-ordered zeros: it
    cannot have memory of its own with those strides (`exact_layout_possible`
    says which). Works for any dtype; `rulekit.zero_fdata` uses it for float
    arrays.
    """
    f = y.flags
    if f.c_contiguous or f.f_contiguous or y.size == 0:  # (np.zeros: zeros_like fills
        order: Any = "F" if f.f_contiguous and not f.c_contiguous else "C"  # through a 0-d temp)
        return np.zeros(y.shape, y.dtype, order=order)
    item = y.itemsize
    lo = hi = 0
    for n, s in zip(y.shape, y.strides, strict=True):
        if n > 1 and (s == 0 or s % item):
            return np.zeros(y.shape, y.dtype)
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    base = np.zeros((hi - lo) // item + 1, y.dtype)
    return np.ndarray(y.shape, y.dtype, buffer=base, offset=-lo, strides=y.strides)


def exact_layout_possible(y: np.ndarray) -> bool:
    """Whether memory of its own can have `y`'s strides (no overlapping elements)."""
    if y.flags.c_contiguous or y.flags.f_contiguous or y.size == 0:
        return True
    return all(
        n <= 1 or (s != 0 and s % y.itemsize == 0) for n, s in zip(y.shape, y.strides, strict=True)
    )
