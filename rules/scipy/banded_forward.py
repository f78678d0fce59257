"""The forward rule and the differentiable pullback of `scipy.linalg.solve_banded` (the
reverse rule is rules.scipy.linalg.equations'; rules.scipy defers this module until
scipy.linalg is imported, and it imports rules.scipy.linalg first).

With x = A⁻¹b, A in band storage ab with (l, u) diagonals (ab[u + i − j, j] = A[i, j]):

    ẋ = A⁻¹(ḃ − Ȧx)                 (Ȧx from the band storage of Ȧ, diagonal by diagonal)
    b̄ = A⁻ᴴx̄  (a banded solve with the band of Aᴴ, (u, l) diagonals),  ab̄ = band(−b̄ xᴴ)

Both bodies call `solve_banded` (the primitive) and NumPy functions with rules on their
arguments — slices, products, np.pad, np.stack instead of writes into a buffer — so an
enclosing transformation differentiates them again through the same rules. The corner
entries of ab that scipy never reads get no tangent effect and a zero cotangent.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rules._support.binding import binder
from rules._support.forward import register_like
from rules.scipy.linalg import solve_banded  # (registers the reverse rule first)

__all__ = ["band_matmul", "band_outer", "band_transpose"]

_bind = binder(solve_banded.fn)


def _conj(v: Any) -> Any:
    return np.conj(v) if np.result_type(v).kind == "c" else v


def _pad_last(v: Any, before: int, after: int, core: int) -> Any:
    """v zero-padded along its axis −core (core = 1: the last axis, 2: the one before)."""
    pad = [(0, 0)] * np.ndim(v)
    pad[-core] = (before, after)
    return np.pad(v, pad)


def band_matmul(abd: Any, x: Any, lower: int, upper: int, vec: bool) -> Any:
    """A·x for A in band storage `abd` ((l, u) diagonals), x a vector (vec) or matrix."""
    m = np.shape(x)[-1] if vec else np.shape(x)[-2]
    out: Any = None
    for k in range(lower + upper + 1):
        t = k - upper  # row offset i − j of this diagonal
        lo, hi = max(0, -t), min(m, m - t)  # columns j with 0 ≤ j + t < m
        if lo >= hi:
            continue
        if vec:
            term = _pad_last(abd[..., k, lo:hi] * x[..., lo:hi], lo + t, m - hi - t, 1)
        else:
            term = _pad_last(abd[..., k, lo:hi, None] * x[..., lo:hi, :], lo + t, m - hi - t, 2)
        out = term if out is None else out + term
    return out


def band_transpose(ab: Any, lower: int, upper: int) -> Any:
    """The band storage ((u, l) diagonals) of Aᴴ: abᴴ[k, j] = conj(ab[l + u − k, j + k − l])."""
    m = np.shape(ab)[-1]
    rows = []
    for k in range(lower + upper + 1):
        s, r = k - lower, lower + upper - k
        row = ab[..., r, s:] if s >= 0 else ab[..., r, : m + s]
        rows.append(_pad_last(row, 0, s, 1) if s >= 0 else _pad_last(row, -s, 0, 1))
    return _conj(np.stack(rows, axis=-2))


def band_outer(bb: Any, x: Any, lower: int, upper: int, vec: bool) -> Any:
    """The band storage of −b̄ xᴴ restricted to A's band: ab̄[k, j] = −(b̄ xᴴ)[j + k − u, j]."""
    m = np.shape(x)[-1] if vec else np.shape(x)[-2]
    xc = _conj(x)
    rows = []
    for k in range(lower + upper + 1):
        t = k - upper
        lo, hi = max(0, -t), min(m, m - t)
        if lo >= hi:  # (a diagonal outside the matrix: never read)
            shape = np.broadcast_shapes(np.shape(bb), np.shape(x))[: -1 if vec else -2]
            rows.append(np.zeros((*shape, m), np.result_type(bb, x)))
            continue
        if vec:
            prod = bb[..., lo + t : hi + t] * xc[..., lo:hi]
        else:
            prod = np.sum(bb[..., lo + t : hi + t, :] * xc[..., lo:hi, :], axis=-1)
        rows.append(_pad_last(-prod, lo, m - hi, 1))
    return np.stack(rows, axis=-2)


def _options(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int, dict[str, Any]]:
    o = _bind(args, kwargs)
    lu = o["l_and_u"]
    lower, upper = (int(n) for n in (lu.x if isinstance(lu, rulekit.Dual) else lu))
    finite = o["check_finite"]
    return lower, upper, {"check_finite": finite.x if isinstance(finite, rulekit.Dual) else finite}


def _like(c: Any, x: Any) -> Any:
    """Cotangent `c` in argument `x`'s dtype (its real part for a real x)."""
    dtype = np.result_type(x)
    if np.result_type(c).kind == "c" and dtype.kind != "c":
        c = np.real(c)
    return c if np.result_type(c) == dtype else np.astype(c, dtype)


def solve_banded_frule(f: Any, lu: Any, ab: Any, b: Any, *rest: Any, **kwargs: Any) -> Any:
    """ẋ = A⁻¹(ḃ − Ȧx)."""
    lower, upper, kw = _options((lu, ab, b, *rest), kwargs)
    x = solve_banded((lower, upper), ab.x, b.x, **kw)
    rhs = b.dx
    if ab.dx is not None:
        ax = band_matmul(ab.dx, x, lower, upper, np.ndim(b.x) == 1)
        rhs = -ax if rhs is None else rhs - ax
    dx = None if rhs is None else solve_banded((lower, upper), ab.x, rhs, **kw)
    return rulekit.Dual(x, dx)


def solve_banded_vjp(active: Any, lu: Any, ab: Any, b: Any, *rest: Any, **kwargs: Any) -> Any:
    """b̄ = A⁻ᴴx̄ (the band of Aᴴ), ab̄ = band(−b̄ xᴴ)."""
    lower, upper, kw = _options((lu, ab, b, *rest), kwargs)
    x = solve_banded((lower, upper), ab, b, **kw)

    def pullback(g: Any) -> tuple[Any, ...]:
        bb = solve_banded((upper, lower), band_transpose(ab, lower, upper), g, **kw)
        cab = _like(band_outer(bb, x, lower, upper, np.ndim(b) == 1), ab) if active[1] else None
        return (None, cab, _like(bb, b) if active[2] else None, *(None for _ in rest))

    return x, pullback


register_like(solve_banded, frule=solve_banded_frule, vjp=solve_banded_vjp)
