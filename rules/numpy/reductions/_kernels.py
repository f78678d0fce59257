"""Pullback kernels of the max/min reductions (numba, compiled on first use).

A C-contiguous array reduced over one axis is viewed as `(pre, n, post)`: lane
`(p, q)` is `x[p, :, q]` and its result `y[p, q]`. The kernels hand each lane's
cotangent to its maxima (minima) in two passes over the lane, without the
comparison masks and count arrays of the numpy formulation in
`rules.numpy.reductions.extrema.tie_split`, whose convention they follow exactly
(docs/conventions-reductions.md):

* the elements equal to y share ȳ equally: each gets ȳ/k for k ties (JAX);
* a lane whose y is NaN (it holds a NaN) is shared by its NaN elements.

Arithmetic as in numpy's `np.add(x̄, ȳ/k, out=x̄, where=hit)`: ȳ/k in double
precision (ȳ over an integer count), the sum rounded to x̄'s dtype. Kernels are
module-level so that numba's on-disk cache (`cache=True`) keeps them.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["extremum_all", "extremum_lanes"]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def extremum_lanes(x, y, g, dx):
    """x, dx: (pre, n, post); y, g: (pre, post). x̄ += ȳ/#ties on each lane's ties."""
    pre, n, post = x.shape
    if post == 1:  # the lanes are contiguous rows
        for p in range(pre):
            yv = y[p, 0]
            nan = yv != yv
            k = 0
            for j in range(n):
                v = x[p, j, 0]
                if v == yv or (nan and v != v):
                    k += 1
            s = g[p, 0] / np.float64(max(k, 1))
            for j in range(n):
                v = x[p, j, 0]
                if v == yv or (nan and v != v):
                    dx[p, j, 0] += s
        return
    counts = np.empty(post, np.intp)
    scale = np.empty(post, np.float64)
    for p in range(pre):
        counts[:] = 0
        for j in range(n):
            for q in range(post):
                v, yv = x[p, j, q], y[p, q]
                if v == yv or (yv != yv and v != v):
                    counts[q] += 1
        for q in range(post):
            scale[q] = g[p, q] / np.float64(max(counts[q], 1))
        for j in range(n):
            for q in range(post):
                v, yv = x[p, j, q], y[p, q]
                if v == yv or (yv != yv and v != v):
                    dx[p, j, q] += scale[q]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def extremum_all(x, yv, g, dx):
    """x, dx: 1-D; y = max/min of all of x (a float), ȳ = g (a float). As `extremum_lanes`."""
    nan = yv != yv
    k = 0
    for j in range(x.size):
        v = x[j]
        if v == yv or (nan and v != v):
            k += 1
    s = g / np.float64(max(k, 1))
    for j in range(x.size):
        v = x[j]
        if v == yv or (nan and v != v):
            dx[j] += s
