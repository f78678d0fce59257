"""Plain (allocating) rules for the matmul family where `rules.numpy.matmul`'s stateful ones do not
apply: operands of different dtypes (float32 @ float64, int @ float, ...), np.dot and
np.inner beyond 2-D, np.outer of N-D arrays. Numpy formulas, the same adjoints:

    matmul:  Ā += Σ_batch Ȳ·Bᴴ,  B̄ += Σ_batch Aᴴ·Ȳ          (1-D operands promoted)
    dot:     ā[I, k] += Σ_{J,n} Ȳ[I, J, n]·conj(b[J, k, n]),
             b̄[J, k, n] += Σ_I conj(a[I, k])·Ȳ[I, J, n]
    inner:   ā[I, k] += Σ_J Ȳ[I, J]·conj(b[J, k]),            b̄[J, k] += Σ_I Ȳ[I, J]·conj(a[I, k])
    outer:   ā += Ȳ·conj(b) (flattened),  b̄ += Ȳᵀ·conj(a)
    vdot:    ā += conj(ȳ)·b (flattened),  b̄ += ȳ·a

A real operand of a complex product gets the real part; a float32 operand of a
float64 product gets its cotangent rounded to float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import Array, CoDual, Example, example, rrule
from rules._support.arguments import array_fdata
from rules._support.cotangents import NO_R, add_to_fdata, output_cotangent, unbroadcast
from rules._support.outputs import new_output

__all__ = ["register_generic"]


def _mm_cot(g: Any, a: np.ndarray, b: np.ndarray) -> tuple[Any, Any]:
    A = a[None, :] if a.ndim == 1 else a
    B = b[:, None] if b.ndim == 1 else b
    G = np.asarray(g)
    if a.ndim == 1 and b.ndim == 1:  # (a 0-d ȳ: expand_dims(·, -2) would be out of range)
        G = G.reshape(1, 1)
    else:
        if a.ndim == 1:
            G = np.expand_dims(G, -2)
        if b.ndim == 1:
            G = np.expand_dims(G, -1)
    ga = unbroadcast(G @ np.conj(np.swapaxes(B, -1, -2)), A.shape)
    gb = unbroadcast(np.conj(np.swapaxes(A, -1, -2)) @ G, B.shape)
    return ga, gb


def _dot_cot(g: Any, a: np.ndarray, b: np.ndarray) -> tuple[Any, Any]:
    if a.ndim <= 2 and b.ndim <= 2:
        return _mm_cot(g, a, b)
    G, ni = np.asarray(g), a.ndim - 1
    if b.ndim == 1:  # y[I] = Σ_k a[I, k]·b[k]
        ga = G[..., None] * np.conj(b)
        gb = np.tensordot(np.conj(a), G, axes=(list(range(ni)), list(range(ni))))
        return ga, gb
    nj = b.ndim - 2  # y[I, J, n] = Σ_k a[I, k]·b[J, k, n]
    rest = [*list(range(ni, ni + nj)), G.ndim - 1]
    ga = np.tensordot(G, np.conj(b), axes=(rest, [*list(range(nj)), nj + 1]))
    gb = np.tensordot(np.conj(a), G, axes=(list(range(ni)), list(range(ni))))
    return ga, np.moveaxis(gb, 0, -2)


def _inner_cot(g: Any, a: np.ndarray, b: np.ndarray) -> tuple[Any, Any]:
    G, ni, nj = np.asarray(g), a.ndim - 1, b.ndim - 1  # y[I, J] = Σ_k a[I, k]·b[J, k]
    ga = np.tensordot(G, np.conj(b), axes=(list(range(ni, ni + nj)), list(range(nj))))
    gb = np.tensordot(G, np.conj(a), axes=(list(range(ni)), list(range(ni))))
    return ga, gb


def _outer_cot(g: Any, a: np.ndarray, b: np.ndarray) -> tuple[Any, Any]:
    return g @ np.conj(b.ravel()), g.T @ np.conj(a.ravel())


def _vdot_cot(g: Any, a: np.ndarray, b: np.ndarray) -> tuple[Any, Any]:
    return np.conj(g) * b.ravel(), g * a.ravel()


_COT = {np.matmul: _mm_cot, np.dot: _dot_cot, np.inner: _inner_cot, np.outer: _outer_cot,
        np.vdot: _vdot_cot}  # fmt: skip


def generic_rrule(f: CoDual, a: CoDual, b: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = f(a, b) for the matmul family, any dtypes and shapes (see the module docstring)."""
    fn = f.x
    if kwargs:
        raise NotImplementedError(
            f"np.{fn.__name__}: keyword arguments {sorted(kwargs)} have no rule; call it without "
            "them (cast the operands first for dtype=)."
        )
    A, B = a.x, b.x
    if np.ndim(A) == 0 or np.ndim(B) == 0:
        raise NotImplementedError(
            f"{fn.__name__} with a 0-d operand is a product: write it as a * b to differentiate"
        )
    y = fn(A, B)
    out = new_output(y)

    def generic_pullback(dy: Any) -> tuple[Any, ...]:
        da, db = array_fdata(a), array_fdata(b)
        if da is not None or db is not None:
            ga, gb = _COT[fn](output_cotangent(out, dy), A, B)
            for dx, gx in ((da, ga), (db, gb)):
                if dx is not None:  # (vdot's cotangents are flat: back to the operand's shape)
                    add_to_fdata(dx, np.reshape(gx, dx.shape))
        return (NO_R, NO_R, NO_R)

    return out, generic_pullback


def _examples(fn: Any) -> list[Example]:
    rng = np.random.default_rng(43)
    f32 = rng.standard_normal((3, 4)).astype(np.float32)
    f64 = rng.standard_normal((4, 2))
    c128 = rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2))
    ints = np.arange(8).reshape(4, 2)
    if fn is np.matmul:
        return [example(f32, f64), example(f32.astype(np.float64), c128), example(f32, ints)]
    if fn is np.dot:
        return [
            example(f32, f64),
            example(rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 3))),
            example(rng.standard_normal((2, 3, 4)), rng.standard_normal(4)),
        ]
    if fn is np.inner:
        return [
            example(f32, f64.T.copy()),
            example(rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4))),
        ]
    if fn is np.outer:
        return [example(rng.standard_normal((2, 2)), rng.standard_normal(3)), example(f32, c128)]
    return [example(f32, rng.standard_normal((4, 3))), example(rng.standard_normal((2, 4)), c128)]


def register_generic() -> None:
    """Register `generic_rrule` for every function of the family (any numeric operands)."""
    for fn in (np.matmul, np.dot, np.inner, np.outer, np.vdot):
        rrule.register(
            fn, Array[np.number], Array[np.number], examples=lambda fn=fn: _examples(fn)
        )(generic_rrule)
