"""The fused broadcast kernels of rules.numpy.ufuncs.fused (a row or a column against a matrix)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, check_warm_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules  # noqa: F401  (registers the rules)
from rulekit import CoDual, NoFData, NoRData
from rules.numpy.ufuncs._pool import bcast_plan
from testutils import check_rule

OPS = (np.add, np.subtract, np.multiply, np.divide)


def _operands(
    rng: np.random.Generator, op: Any, full: tuple[int, ...], small: tuple[int, ...], dt: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(F, S): S positive and away from 0 (a divisor), F too when S is divided by it."""
    F = rng.uniform(0.5, 2.0, size=full) if op is np.divide else rng.normal(size=full)
    return F.astype(dt), rng.uniform(0.5, 2.0, size=small).astype(dt)


def _kernel_of(A: np.ndarray, B: np.ndarray) -> Any:
    y = np.empty(np.broadcast_shapes(A.shape, B.shape), A.dtype)
    plan = bcast_plan(A, B, y, np.zeros_like(y))
    return None if plan is None else plan[0]


@pytest.mark.parametrize("op", OPS, ids=lambda u: u.__name__)
@pytest.mark.parametrize(
    ("full", "small", "kernel"),
    [
        ((4, 5), (5,), "row"),
        ((4, 5), (1, 5), "row"),
        ((2, 3, 5), (5,), "row"),
        ((4, 5), (4, 1), "col"),
        ((1, 5), (5,), "row"),
    ],
)
@pytest.mark.parametrize("small_first", [False, True])
@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_kernels_pass_the_kit(
    op: Any, full: Any, small: Any, kernel: str, small_first: bool, dt: Any
) -> None:
    rng = np.random.default_rng(7)
    F, S = _operands(rng, op, full, small, dt)
    A, B = (S, F) if small_first else (F, S)
    assert _kernel_of(A, B) == kernel
    check_rule(op, A, B)  # every activity combination, zero allocations when warm, ...


def test_layouts_without_a_row_or_column_kernel_go_through_scratch() -> None:
    """Odd layouts and outer broadcasts: the operands copied into scratch buffers laid out
    like y, the same-shape kernel, the cotangents reduced into the fdata."""
    rng = np.random.default_rng(8)
    F, S = rng.normal(size=(4, 6)), rng.uniform(0.5, 2, size=(6,))
    assert _kernel_of(F[:, ::2], S[::2]) is None  # strided
    assert _kernel_of(np.asfortranarray(F), S) is None  # F-ordered output
    assert _kernel_of(F[:, :1], S[None, :]) is None  # both broadcast
    for A, B in ((F[:, ::2], S[::2]), (np.asfortranarray(F), S), (F[:, :1], S[None, :])):
        check_rule(np.multiply, A, B)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    m=st.integers(1, 6),
    n=st.integers(1, 6),
    op=st.sampled_from(OPS),
    col=st.booleans(),
    small_first=st.booleans(),
)
def test_kernel_matches_numpy_adjoint(
    m: int, n: int, op: Any, col: bool, small_first: bool
) -> None:
    """Cotangents from the kernel equal numpy's: the output-shaped partials, reduced."""
    rng = np.random.default_rng(m * 31 + n)
    F, S = _operands(rng, op, (m, n), (m, 1) if col else (n,), np.float64)
    A, B = (S, F) if small_first else (F, S)
    g = rng.normal(size=(m, n))
    dA0, dB0 = rng.normal(size=A.shape), rng.normal(size=B.shape)
    rule = rulekit.build_primitive_rrule(rulekit.signature_of(op, A, B))
    dA, dB = dA0.copy(), dB0.copy()
    y, pb = rule(CoDual(op, NoFData()), CoDual(A, dA), CoDual(B, dB))
    y.dx[...] = g
    pb(NoRData())
    assert not y.dx.any()  # the pooled fdata goes back clean
    Y = op(A, B)
    da, db = {
        np.add: (g, g),
        np.subtract: (g, -g),
        np.multiply: (g * B, g * A),
        np.divide: (g / B, -g * Y / B),
    }[op]
    axes_a = tuple(i for i in range(2) if A.shape[i] != Y.shape[i]) if A.ndim == 2 else (0,)
    axes_b = tuple(i for i in range(2) if B.shape[i] != Y.shape[i]) if B.ndim == 2 else (0,)
    np.testing.assert_allclose(dA - dA0, np.sum(da, axis=axes_a).reshape(A.shape), rtol=1e-12)
    np.testing.assert_allclose(dB - dB0, np.sum(db, axis=axes_b).reshape(B.shape), rtol=1e-12)


def test_cached_plan_follows_new_operands() -> None:
    """The rule reuses its kernel arguments only for the very same operand arrays."""
    rng = np.random.default_rng(9)

    def f(x: Any, b: Any, c: Any) -> Any:
        return np.sum((x + b) * (x - c) ** 2)

    vg = rulekit.value_and_grad(f, argnums=(0, 1, 2))
    for k in range(3):  # fresh arrays each time, then the same ones twice
        x, b, c = rng.normal(size=(5, 4)), rng.normal(size=4), rng.normal(size=(5, 1))
        args = (x, b, c) if k < 2 else args  # noqa: F821  (bound in the first iterations)
        _, grads = vg(*args)
        want = check_grads(f, *args)
        for got, exp in zip(grads, want, strict=True):
            np.testing.assert_allclose(got, exp, rtol=1e-12)


def test_softmax_cross_entropy() -> None:
    rng = np.random.default_rng(10)
    z0, Y = rng.normal(size=(6, 4)), np.eye(4)[rng.integers(0, 4, size=6)]

    def loss(z: Any, b: Any) -> Any:
        z = z + b
        z = z - np.max(z, axis=1, keepdims=True)
        return -np.sum(Y * (z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))))

    check_grads(loss, z0, rng.normal(size=4))


def test_bias_and_column_ops_warm_are_allocation_free() -> None:
    rng = np.random.default_rng(11)
    X, col = rng.normal(size=(6, 5)), rng.uniform(0.5, 2.0, size=(6, 1))

    def f(W: Any, b: Any, c: Any) -> Any:
        h = np.tanh(X @ W + b)
        u = (h - c) * (h / col) + b
        return np.vdot(u, u)  # (np.sum's 0-d result would be an 8-byte allocation)

    args = (rng.normal(size=(5, 3)), rng.normal(size=3), rng.normal(size=(6, 1)))
    check_warm_grads(f, *args)


def test_outer_broadcast_and_odd_layouts_warm_are_allocation_free() -> None:
    rng = np.random.default_rng(12)
    a, b = rng.normal(size=(7, 1)), rng.uniform(0.5, 2.0, size=(1, 9))

    def f(a: Any, b: Any) -> Any:
        return np.vdot(np.tanh(a) * b - a, (a + 1.5) / b)  # (7, 1) ∘ (1, 9): no row kernel

    check_warm_grads(f, a, b)
    x = np.asfortranarray(rng.normal(size=(6, 8)))

    def g(x: Any) -> Any:
        v = x[:, ::2]  # a strided view: through scratch copies
        return np.vdot(np.sin(v) ** 2.0 * 3.0 + np.exp(v) / 2.0, 1.5 - v)

    check_warm_grads(g, x)
    check_warm_grads(lambda x: np.vdot(np.cos(x) - x / 2.0, 1.5 - x), x)
