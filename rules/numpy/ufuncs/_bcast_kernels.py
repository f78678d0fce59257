"""Fused pullback kernels for `a ∘ b` with one operand broadcast along rows or columns.

The hot broadcasting patterns of numpy code are a bias row `X @ W + b` (b of
shape (n,) against (m, n)) and a keepdims column `z - z.max(axis=1,
keepdims=True)` (shape (m, 1) against (m, n)). With F the full operand (the
output's shape), S the small one and ȳ the output cotangent, one pass does

    F̄ += ∂y/∂F·ȳ   (elementwise),   S̄ += Σ ∂y/∂S·ȳ   (summed over the broadcast axis),

then clears ȳ, like the same-shape kernels in `rules.numpy.ufuncs._kernels`. Ops and
their derivatives (`sf`: S is the first operand, y = S ∘ F):

    add       ∂F = 1                 ∂S = 1
    subtract  ∂F = 1  (sf: −1)       ∂S = −1 (sf: 1)
    multiply  ∂F = S                 ∂S = F
    divide    ∂F = 1/S (sf: −y/F)    ∂S = −y/S (sf: 1/F)

Arrays are 2-D C-contiguous (m, n) views (F, y, ȳ, F̄) and 1-D (S, S̄). The
column kernel sums each row of ∂y/∂S·ȳ in a local accumulator; `reassoc` lets
numba vectorize that sum (the order of a sum, not its terms, may change).
"""

from __future__ import annotations

import numba

__all__ = ["col_pullback", "row_pullback"]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def row_pullback(op, sf, full, small, y, g, dfull, dsmall, want_f, want_s):
    """y[i, j] = F[i, j] ∘ S[j] (sf: S[j] ∘ F[i, j]); see the module docstring."""
    m, n = g.shape
    for i in range(m):
        gi, fi, yi, dfi = g[i], full[i], y[i], dfull[i]
        if want_s:
            if op == 0 or (op == 1 and sf):
                for j in range(n):
                    dsmall[j] += gi[j]
            elif op == 1:
                for j in range(n):
                    dsmall[j] -= gi[j]
            elif op == 2:
                for j in range(n):
                    dsmall[j] += fi[j] * gi[j]
            elif sf:  # S/F: ∂S = 1/F
                for j in range(n):
                    dsmall[j] += gi[j] / fi[j]
            else:  # F/S: ∂S = −y/S
                for j in range(n):
                    dsmall[j] -= gi[j] / small[j] * yi[j]
        if want_f:
            if op == 0 or (op == 1 and not sf):
                for j in range(n):
                    dfi[j] += gi[j]
            elif op == 1:
                for j in range(n):
                    dfi[j] -= gi[j]
            elif op == 2:
                for j in range(n):
                    dfi[j] += small[j] * gi[j]
            elif sf:  # S/F: ∂F = −y/F
                for j in range(n):
                    dfi[j] -= gi[j] / fi[j] * yi[j]
            else:  # F/S: ∂F = 1/S
                for j in range(n):
                    dfi[j] += gi[j] / small[j]
        for j in range(n):
            gi[j] = 0


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})
def col_pullback(op, sf, full, small, y, g, dfull, dsmall, want_f, want_s):
    """y[i, j] = F[i, j] ∘ S[i] (sf: S[i] ∘ F[i, j]); see the module docstring."""
    m, n = g.shape
    for i in range(m):
        gi, fi, yi, dfi = g[i], full[i], y[i], dfull[i]
        s = small[i]
        if want_s:
            acc = 0.0
            if op == 0 or (op == 1 and sf):
                for j in range(n):
                    acc += gi[j]
            elif op == 1:
                for j in range(n):
                    acc -= gi[j]
            elif op == 2:
                for j in range(n):
                    acc += fi[j] * gi[j]
            elif sf:  # S/F: ∂S = 1/F
                for j in range(n):
                    acc += gi[j] / fi[j]
            else:  # F/S: ∂S = −y/S
                for j in range(n):
                    acc -= gi[j] / s * yi[j]
            dsmall[i] += acc
        if want_f:
            if op == 0 or (op == 1 and not sf):
                for j in range(n):
                    dfi[j] += gi[j]
            elif op == 1:
                for j in range(n):
                    dfi[j] -= gi[j]
            elif op == 2:
                for j in range(n):
                    dfi[j] += s * gi[j]
            elif sf:  # S/F: ∂F = −y/F
                for j in range(n):
                    dfi[j] -= gi[j] / fi[j] * yi[j]
            else:  # F/S: ∂F = 1/S
                for j in range(n):
                    dfi[j] += gi[j] / s
        for j in range(n):
            gi[j] = 0
