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

A scalar (Python or numpy number, or 0-d array) operand of np.dot, np.inner, np.kron or
np.tensordot (`axes=0`) makes the call a product, y = a·b with the array's shape
(`scalar_product_rrule`):

    y = a·b  ⇒  ā += Σ ȳ·conj(b),  b̄ += Σ ȳ·conj(a)   (Σ over what the operand was broadcast to)
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from rulekit import Array, CoDual, Example, Vararg, example, rrule
from rules._support.arguments import array_fdata, primal
from rules._support.cotangents import (
    NO_R,
    accumulate,
    add_to_fdata,
    output_cotangent,
    unbroadcast,
    zero_rdata_of,
)
from rules._support.outputs import new_output

__all__ = ["Scalar", "register_generic", "register_scalar_products", "scalar_product_rrule"]

#: A number operand (Python or numpy scalar; a traced scalar is a numpy scalar).
Scalar = Union[int, float, complex, np.number]


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
        return scalar_product_rrule(f, a, b)  # (matmul raises on a 0-d operand, as numpy does)
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
            example(np.array(2.5), c128),  # a 0-d operand: a product
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
    for fn in (np.dot, np.inner):
        register_scalar_products(fn)


# -- a scalar operand: a product ------------------------------------------------------------


def scalar_product_rrule(f: CoDual, a: CoDual, b: CoDual, *rest: CoDual, **kwargs: Any) -> Any:
    """y = f(a, b) = a·b for np.dot / np.inner / np.kron / np.tensordot with a scalar (or 0-d)
    operand ⇒ ā += Σ ȳ·conj(b), b̄ += Σ ȳ·conj(a) (the array operand: reshaped to its shape).

    numpy computes y (and raises where it does: np.tensordot's default `axes=2` with a
    scalar); `rest`/`kwargs` are np.tensordot's `axes`, constant.
    """
    y = f.x(a.x, b.x, *map(primal, rest), **kwargs)
    out = new_output(y)
    shape = np.shape(y)

    def _as_y(v: Any) -> Any:  # an operand with y's shape (its size is y's, or it is a scalar)
        return np.reshape(v, shape) if np.ndim(v) else v

    def scalar_product_pullback(dy: Any) -> tuple[Any, ...]:
        g = output_cotangent(out, dy)
        grads = []
        for v, w in ((a, b), (b, a)):
            if not isinstance(v, CoDual) or v.dx is None:
                grads.append(NO_R)
                continue
            gv = g * np.conj(_as_y(w.x))
            grads.append(accumulate(v, np.reshape(gv, np.shape(v.x)) if np.ndim(v.x) else gv))
        return (NO_R, *grads, *map(zero_rdata_of, rest))

    return out, scalar_product_pullback


def _scalar_examples(fn: Any, side: int) -> list[Example]:
    rng = np.random.default_rng(44)
    x, m = rng.standard_normal(3), rng.standard_normal((2, 3)).astype(np.float32)
    z = rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2))
    kw = {"axes": 0} if fn is np.tensordot else {}
    pairs: list[tuple[Any, Any]]
    if side == 0:  # a scalar first
        pairs = [(2.5, x), (np.float64(-1.5), m), (0.5 - 1.0j, x), (np.float32(2.0), z)]
    elif side == 1:  # a scalar second
        pairs = [(x, 2.5), (m, np.float64(-1.5)), (z, 0.75), (x, np.complex128(1.0 + 2.0j))]
    else:  # two scalars
        pairs = [(2.5, np.float64(-1.5)), (np.complex128(0.5 + 1.0j), 1.5)]
    return [example(p, q, **kw) for p, q in pairs]


def register_scalar_products(fn: Any) -> None:
    """Register `scalar_product_rrule` for `fn` with a scalar operand on either side (and
    both); np.tensordot also takes its `axes`."""
    extra = (Vararg[Any],) if fn is np.tensordot else ()
    sides = ((Scalar, Array[np.number]), (Array[np.number], Scalar), (Scalar, Scalar))
    for side, types in enumerate(sides):
        rrule.register(
            fn, *types, *extra, examples=lambda fn=fn, side=side: _scalar_examples(fn, side)
        )(scalar_product_rrule)
