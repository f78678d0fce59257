"""Fused pullback kernels for the hot elementwise ufuncs (numba, compiled on first use).

Each kernel makes *one* pass over contiguous 1-D views of equally laid-out
arrays: it reads the output cotangent ȳ, adds the input cotangents into their
fdata, and clears ȳ (so the rule's pooled fdata buffer goes back to the pool
already zero, and the next forward pass needs no fill). The numpy equivalent
takes two to four passes and a temporary per pullback.

The derivative of each op code is written next to its loop; they follow
docs/conventions-ufuncs.md (`error_model="numpy"`: x/0 is ±inf or nan, as in
numpy, never an exception). Kernels are module-level functions so that numba's
on-disk cache (`cache=True`) keeps them between processes.
"""

from __future__ import annotations

import math

import numba

__all__ = ["BINARY", "SCALAR", "UNARY", "binary_pullback", "scalar_pullback", "unary_pullback"]

# -- op codes -------------------------------------------------------------------------------

UNARY = {
    name: code
    for code, name in enumerate(
        ["negative", "square", "sqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin",
         "cos", "tan", "tanh", "sinh", "cosh", "arctan", "reciprocal", "absolute"]
    )
}  # fmt: skip
#: array ∘ scalar (and, for the r* codes, scalar ∘ array)
SCALAR = {
    name: code
    for code, name in enumerate(
        ["add", "subtract", "rsubtract", "multiply", "divide", "rdivide", "power"]
    )
}
BINARY = {name: code for code, name in enumerate(["add", "subtract", "multiply", "divide"])}

_LN2, _LN10 = math.log(2.0), math.log(10.0)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _zero(g):
    for i in range(g.size):
        g[i] = 0


@numba.njit(cache=True, nogil=True, error_model="numpy")
def unary_pullback(op, x, y, g, dx, want):
    """y = f(x):  x̄ += f'(x)·ȳ (if `want`), ȳ ← 0."""
    n = x.size
    if not want:
        _zero(g)
    elif op == 0:  # negative: −ȳ
        for i in range(n):
            dx[i] -= g[i]
            g[i] = 0
    elif op == 1:  # square: 2x·ȳ
        for i in range(n):
            dx[i] += 2 * x[i] * g[i]
            g[i] = 0
    elif op == 2:  # sqrt: ȳ/(2y) (+inf·ȳ at x = 0)
        for i in range(n):
            dx[i] += g[i] / (2 * y[i])
            g[i] = 0
    elif op == 3:  # exp: y·ȳ
        for i in range(n):
            dx[i] += y[i] * g[i]
            g[i] = 0
    elif op == 4:  # expm1: (y + 1)·ȳ
        for i in range(n):
            dx[i] += (y[i] + 1) * g[i]
            g[i] = 0
    elif op == 5:  # log: ȳ/x
        for i in range(n):
            dx[i] += g[i] / x[i]
            g[i] = 0
    elif op == 6:  # log1p: ȳ/(1 + x)
        for i in range(n):
            dx[i] += g[i] / (1 + x[i])
            g[i] = 0
    elif op == 7:  # log2: ȳ/(x ln 2)
        for i in range(n):
            dx[i] += g[i] / (x[i] * _LN2)
            g[i] = 0
    elif op == 8:  # log10: ȳ/(x ln 10)
        for i in range(n):
            dx[i] += g[i] / (x[i] * _LN10)
            g[i] = 0
    elif op == 9:  # sin: cos(x)·ȳ
        for i in range(n):
            dx[i] += math.cos(x[i]) * g[i]
            g[i] = 0
    elif op == 10:  # cos: −sin(x)·ȳ
        for i in range(n):
            dx[i] -= math.sin(x[i]) * g[i]
            g[i] = 0
    elif op == 11:  # tan: (1 + y²)·ȳ
        for i in range(n):
            dx[i] += (1 + y[i] * y[i]) * g[i]
            g[i] = 0
    elif op == 12:  # tanh: (1 − y²)·ȳ
        for i in range(n):
            dx[i] += (1 - y[i] * y[i]) * g[i]
            g[i] = 0
    elif op == 13:  # sinh: cosh(x)·ȳ
        for i in range(n):
            dx[i] += math.cosh(x[i]) * g[i]
            g[i] = 0
    elif op == 14:  # cosh: sinh(x)·ȳ
        for i in range(n):
            dx[i] += math.sinh(x[i]) * g[i]
            g[i] = 0
    elif op == 15:  # arctan: ȳ/(1 + x²)
        for i in range(n):
            dx[i] += g[i] / (1 + x[i] * x[i])
            g[i] = 0
    elif op == 16:  # reciprocal: −y²·ȳ
        for i in range(n):
            dx[i] -= y[i] * y[i] * g[i]
            g[i] = 0
    elif op == 17:  # absolute: sign(x)·ȳ (0 at x = 0)
        for i in range(n):
            xi = x[i]
            if xi > 0:
                dx[i] += g[i]
            elif xi < 0:
                dx[i] -= g[i]
            g[i] = 0


@numba.njit(cache=True, nogil=True, error_model="numpy")
def scalar_pullback(op, x, c, y, g, dx, want_x, want_c):
    """y = x ∘ c (x an array, c a scalar): x̄ += ∂y/∂x·ȳ, returns c̄ = Σ ∂y/∂c·ȳ; ȳ ← 0.

    The c̄ sums run first (they only read ȳ); the x̄ loops then clear ȳ. Every loop is
    branch-free, so numba vectorizes the x̄ ones.
    """
    n = x.size
    dc = 0.0
    if want_c:
        if op == 0 or op == 2:  # x + c, c − x: ∂c = 1
            for i in range(n):
                dc += g[i]
        elif op == 1:  # x − c: ∂c = −1
            for i in range(n):
                dc -= g[i]
        elif op == 3:  # x·c: ∂c = x
            for i in range(n):
                dc += x[i] * g[i]
        elif op == 4:  # x/c: ∂c = −y/c
            for i in range(n):
                dc -= g[i] * y[i] / c
        elif op == 5:  # c/x: ∂c = 1/x
            for i in range(n):
                dc += g[i] / x[i]
        elif op == 6:  # xᶜ: ∂c = y·ln x (ln 0 ≡ 0; x < 0: nan)
            for i in range(n):
                xi = x[i]
                if xi > 0:
                    dc += g[i] * y[i] * math.log(xi)
                elif xi < 0:
                    dc += math.nan
    if not want_x or (op == 6 and c == 0):  # (x⁰ ≡ 1: ∂x = 0)
        _zero(g)
    elif op == 0 or op == 1:  # x ± c: ∂x = 1
        for i in range(n):
            dx[i] += g[i]
            g[i] = 0
    elif op == 2:  # c − x: ∂x = −1
        for i in range(n):
            dx[i] -= g[i]
            g[i] = 0
    elif op == 3:  # x·c: ∂x = c
        for i in range(n):
            dx[i] += c * g[i]
            g[i] = 0
    elif op == 4:  # x/c: ∂x = 1/c
        for i in range(n):
            dx[i] += g[i] / c
            g[i] = 0
    elif op == 5:  # c/x: ∂x = −y/x
        for i in range(n):
            dx[i] -= g[i] * y[i] / x[i]
            g[i] = 0
    elif c == 2:  # x²: ∂x = 2x
        for i in range(n):
            dx[i] += 2 * x[i] * g[i]
            g[i] = 0
    elif c == 1:
        for i in range(n):
            dx[i] += g[i]
            g[i] = 0
    else:  # xᶜ: ∂x = c·x^(c−1)
        for i in range(n):
            dx[i] += c * x[i] ** (c - 1) * g[i]
            g[i] = 0
    return dc


@numba.njit(cache=True, nogil=True, error_model="numpy")
def binary_pullback(op, a, b, y, g, da, db, want_a, want_b):
    """y = a ∘ b (arrays of one shape): ā += ∂y/∂a·ȳ, b̄ += ∂y/∂b·ȳ; ȳ ← 0 (branch-free loops)."""
    n = a.size
    if want_b:
        if op == 0:  # a + b: ∂b = 1
            for i in range(n):
                db[i] += g[i]
        elif op == 1:  # a − b: ∂b = −1
            for i in range(n):
                db[i] -= g[i]
        elif op == 2:  # a·b: ∂b = a
            for i in range(n):
                db[i] += a[i] * g[i]
        elif op == 3:  # a/b: ∂b = −y/b
            for i in range(n):
                db[i] -= g[i] / b[i] * y[i]
    if not want_a:
        _zero(g)
    elif op == 0 or op == 1:  # ∂a = 1
        for i in range(n):
            da[i] += g[i]
            g[i] = 0
    elif op == 2:  # ∂a = b
        for i in range(n):
            da[i] += b[i] * g[i]
            g[i] = 0
    elif op == 3:  # ∂a = 1/b
        for i in range(n):
            da[i] += g[i] / b[i]
            g[i] = 0
