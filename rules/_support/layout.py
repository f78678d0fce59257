"""Memory layout: fdata laid out like its primal, flat views that are never copies.

Two invariants keep fdata and pooled buffers honest from one call to the next
(issue #11: a gradient right on the first call and wrong from the second on):

* **fdata has its primal's strides.** A view operation (reshape, ravel,
  transpose, indexing) then makes a view of the fdata exactly when it makes one
  of the primal (`rules._support.shape.view_or_new`), and kernels that take flat
  views of a primal and its fdata pair the same elements. `zeros_like_exact`
  makes such fdata for a new output of any layout (`np.zeros_like` and
  `np.zeros(shape)` do not: they compact negative or gapped strides, and
  `np.zeros(shape)` makes an F-ordered output's fdata C-ordered).
* **Nothing writes through a reshape that may be a copy.** `reshape`/`ravel`
  silently copy an array that is not contiguous in the order asked for; a
  kernel that writes into such a copy loses its writes (a pooled buffer it was
  meant to clear goes back to the pool dirty, and the *next* call is wrong).
  `flat_view` is the 1-D memory-order view of a C- or F-contiguous array and
  raises instead of copying; `like_scratch` gives a work buffer laid out like a
  given contiguous array, so that the flat views of both pair the same elements.

`filled_0d` keeps a ufunc's scalar operand in a pooled 0-d array (a Python number
operand makes numpy allocate one on every call).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit import (
    NoFData,
    zero_fdata,
    zeros_like_exact,  # (the engine's: one definition)
)

__all__ = [
    "filled_0d",
    "flat_view",
    "fortran",
    "like_scratch",
    "memory_order",
    "new_fdata",
    "zeros_like_exact",
]


def fortran(a: np.ndarray) -> bool:
    """F-ordered and not C-ordered (a 1-D or one-element array counts as C-ordered)."""
    f = a.flags
    return bool(f.f_contiguous and not f.c_contiguous)


def memory_order(a: np.ndarray) -> tuple[int, ...] | None:
    """The axis order in which `a` is C-contiguous (`a.transpose(order)` is), or None.

    C-contiguous `a`: (0, 1, ...); F-contiguous: reversed; a contiguous block with permuted
    axes (numpy's result of an elementwise op on a transposed operand, e.g. strides
    (8, 256, 64)): that permutation. Length-1 axes may go anywhere.
    """
    f = a.flags
    if f.c_contiguous:
        return tuple(range(a.ndim))
    if f.f_contiguous:
        return tuple(range(a.ndim))[::-1]
    order = tuple(sorted(range(a.ndim), key=lambda i: -a.strides[i] if a.shape[i] > 1 else 0))
    return order if a.transpose(order).flags.c_contiguous else None


def flat_view(a: np.ndarray) -> np.ndarray:
    """A 1-D view of contiguous `a` in memory order: always a view, never a copy.

    `a` may be C- or F-contiguous or contiguous with permuted axes (`memory_order`);
    raises ValueError for any other layout (a caller that writes through the result
    would otherwise write into a silent copy).
    """
    f = a.flags
    if f.c_contiguous:
        return a.reshape(-1)  # (a reshape of a C-contiguous array is a view)
    if f.f_contiguous:
        return a.T.reshape(-1)  # (aᵀ is C-contiguous, in a's memory order)
    order = memory_order(a)
    if order is not None:
        return a.transpose(order).reshape(-1)
    raise ValueError(
        f"rulekit internal error: a flat view of an array with strides {a.strides} and shape "
        f"{a.shape} was asked for; it is not contiguous in any axis order, so reshape would copy."
    )


def like_scratch(
    scratch: Callable[[str, tuple[int, ...], Any], np.ndarray], name: str, like: np.ndarray
) -> np.ndarray:
    """A work buffer from `scratch(name, shape, dtype)` (a `StatefulRRule.scratch`) with the
    shape, dtype and memory order of contiguous `like`: F-ordered (or axis-permuted) `like`
    gets the transpose of a C-ordered buffer (kept under its own name), so the flat views
    of the two pair the same elements."""
    if fortran(like):
        return scratch(name + ":F", like.shape[::-1], like.dtype).T
    order = memory_order(like)
    if order is None or order == tuple(range(like.ndim)):
        return scratch(name, like.shape, like.dtype)
    buf = scratch(f"{name}:{order}", tuple(like.shape[i] for i in order), like.dtype)
    return buf.transpose(np.argsort(order))  # (like's axis order, over C-ordered memory)


def filled_0d(store: dict[str, np.ndarray], c: Any, dtype: np.dtype) -> np.ndarray:
    """`c` in a 0-d array of `dtype` kept in `store` (one per dtype): a ufunc operand that
    allocates nothing, where a Python number would be made into a new 0-d array."""
    s = store.get(dtype.char)
    if s is None:
        s = store[dtype.char] = np.empty((), dtype)
    s.fill(c)
    return s


def new_fdata(y: Any) -> Any:
    """`rulekit.zero_fdata(y)` with every array laid out like its primal (`zeros_like_exact`)."""
    if type(y) is np.ndarray:
        return zeros_like_exact(y) if y.dtype.kind in "fc" else zero_fdata(y)
    if isinstance(y, tuple):
        fs = tuple(new_fdata(e) for e in y)
        return _NO_F if all(isinstance(f, NoFData) for f in fs) else fs
    return zero_fdata(y)


_NO_F = NoFData()
