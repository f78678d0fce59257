"""Fused pullback kernels for in-place arithmetic `z ∘= w` (`z += w`, `np.multiply(z, w, out=z)`).

With z₀ the saved old value of z, z the new one and z̄ its cotangent (the fdata of z,
on entry the cotangent of the new value), one pass turns z̄ into the cotangent of
z₀, adds w's share and writes z₀ back into z (the mutation convention, docs/concepts.md):

    add       w̄ += z̄               z̄ ← z̄
    subtract  w̄ −= z̄               z̄ ← z̄
    multiply  w̄ += z̄·z₀            z̄ ← z̄·w
    divide    w̄ −= z̄·z/w           z̄ ← z̄/w

For a scalar w = c, c̄ is the sum of its share. Arrays are 1-D flat views of equally
laid-out contiguous arrays.
"""

from __future__ import annotations

import numba

__all__ = ["inplace_array_pullback", "inplace_scalar_pullback"]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def inplace_array_pullback(op, z, z0, w, g, dw, want_w):
    """z ∘= w for an array w (not overlapping z); see the module docstring."""
    n = z.size
    if op == 0 or op == 1:
        if want_w:
            if op == 0:
                for i in range(n):
                    dw[i] += g[i]
            else:
                for i in range(n):
                    dw[i] -= g[i]
    elif op == 2:
        for i in range(n):
            gi = g[i]
            if want_w:
                dw[i] += gi * z0[i]
            g[i] = gi * w[i]
    else:
        for i in range(n):
            gi = g[i] / w[i]
            if want_w:
                dw[i] -= gi * z[i]
            g[i] = gi
    for i in range(n):
        z[i] = z0[i]


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})
def inplace_scalar_pullback(op, z, z0, c, g, want_c):
    """z ∘= c for a scalar c; returns c̄ (0 unless `want_c`); see the module docstring.

    `reassoc` lets numba vectorize the c̄ sums (their order, not their terms, may change).
    """
    n = z.size
    dc = 0.0
    if want_c:
        if op == 0 or op == 1:
            for i in range(n):
                dc += g[i]
            if op == 1:
                dc = -dc
        elif op == 2:
            for i in range(n):
                dc += g[i] * z0[i]
        else:
            for i in range(n):
                dc -= g[i] / c * z[i]
    if op == 2:
        for i in range(n):
            g[i] = g[i] * c
    elif op == 3:
        for i in range(n):
            g[i] = g[i] / c
    for i in range(n):
        z[i] = z0[i]
    return dc
