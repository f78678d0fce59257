"""StatefulRRule (rulekit/_stateful.py): the save/restore stack, pooled and scratch buffers."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulekit import CoDual, NoFData, NoRData, SaveToken, StatefulRRule, zero_codual

SETTINGS = settings(derandomize=True, max_examples=60, deadline=None, database=None)


def scale_(x: np.ndarray, alpha: float) -> np.ndarray:
    """x ← αx, in place."""
    x *= alpha
    return x


class ScaleRule(StatefulRRule):
    """`x ← αx`  ⇒  `ᾱ = ⟨x̄, x_old⟩`, `x̄ ← α x̄`, `x ← x_old` (the output is x itself)."""

    def __call__(self, f: CoDual, x: CoDual, alpha: CoDual) -> tuple[CoDual, Any]:
        token = self.save(x.x)
        a = self.scratch("alpha", (), x.x.dtype)  # a 0-d operand: a scalar one would allocate
        a.fill(alpha.x)
        np.multiply(x.x, a, out=x.x)

        def scale_pullback(dy: Any) -> tuple[Any, Any, Any]:
            dalpha: Any = NoRData()
            if alpha.dx is not None:
                dalpha = float(np.vdot(x.dx, token.buffer))  # read before restore recycles it
            if x.dx is not None:
                a.fill(alpha.x)  # (the scratch is shared by interleaved calls: refill it)
                np.multiply(x.dx, a, out=x.dx)
            self.restore(token, into=x.x)
            return NoRData(), NoRData(), dalpha

        return x, scale_pullback  # the output aliases x: it shares x's fdata


F = CoDual(scale_, NoFData())


def run(rule: ScaleRule, x: CoDual, alpha: float) -> Any:
    return rule(F, x, CoDual(alpha, NoFData()))[1]


# -- LIFO discipline ----------------------------------------------------------------------


def test_forward_and_pullback_restore_and_propagate() -> None:
    rule = ScaleRule()
    x0 = np.arange(1.0, 4.0)
    x = zero_codual(x0.copy())
    pb = run(rule, x, 2.0)
    np.testing.assert_array_equal(x.x, 2 * x0)
    x.dx[:] = [1.0, 1.0, 2.0]  # the cotangent of the post-call state
    _, _, dalpha = pb(NoRData())
    assert dalpha == pytest.approx(1 + 2 + 6)
    np.testing.assert_array_equal(x.dx, [2.0, 2.0, 4.0])  # now the pre-call cotangent
    np.testing.assert_array_equal(x.x, x0)
    assert rule.depth == 0


def test_interleaved_calls_on_different_arrays() -> None:
    """forward a, forward b, pullback b, pullback a."""
    rule = ScaleRule()
    a0, b0 = np.array([1.0, 2.0]), np.array([[3.0, 4.0, 5.0]])
    a, b = zero_codual(a0.copy()), zero_codual(b0.copy())
    pa = run(rule, a, 2.0)
    pb = run(rule, b, -3.0)
    assert rule.depth == 2
    a.dx[:], b.dx[:] = 1.0, 1.0
    assert pb(NoRData())[2] == pytest.approx(b0.sum())
    np.testing.assert_array_equal(b.x, b0)
    np.testing.assert_array_equal(b.dx, -3.0)
    assert pa(NoRData())[2] == pytest.approx(a0.sum())
    np.testing.assert_array_equal(a.x, a0)
    np.testing.assert_array_equal(a.dx, 2.0)
    assert rule.depth == 0


def test_interleaved_calls_on_the_same_array() -> None:
    """x ← α₁x, then x ← α₂x: each pullback restores exactly its own call's input."""
    rule = ScaleRule()
    x0 = np.array([1.0, -2.0, 0.5])
    x = zero_codual(x0.copy())
    p1 = run(rule, x, 2.0)
    p2 = run(rule, x, 5.0)
    np.testing.assert_array_equal(x.x, 10 * x0)
    x.dx[:] = 1.0
    assert p2(NoRData())[2] == pytest.approx(np.sum(2 * x0))  # ᾱ₂ = ⟨x̄, α₁x₀⟩
    np.testing.assert_array_equal(x.x, 2 * x0)
    assert p1(NoRData())[2] == pytest.approx(np.sum(5 * x0))  # ᾱ₁ = ⟨α₂x̄, x₀⟩
    np.testing.assert_array_equal(x.x, x0)
    np.testing.assert_array_equal(x.dx, 10.0)


def test_push_and_pop() -> None:
    rule = StatefulRRule()
    t1 = rule.push((2, 3), np.float32)
    t2 = rule.push([4], "complex128")  # any shape sequence, any dtype spelling
    assert isinstance(t1, SaveToken) and (t1.depth, t2.depth) == (0, 1)
    assert t1.buffer.shape == (2, 3) and t1.buffer.dtype == np.float32
    assert t2.buffer.shape == (4,) and t2.buffer.dtype == np.complex128
    assert rule.depth == 2
    assert rule.pop(t2) is t2.buffer
    assert rule.pop(t1) is t1.buffer
    assert rule.depth == 0


def test_save_copies_any_layout() -> None:
    rule = StatefulRRule()
    x = np.arange(24.0).reshape(4, 6)[::2, 1::2].T
    token = rule.save(x)
    assert token.buffer.shape == x.shape and not np.shares_memory(token.buffer, x)
    into = np.zeros_like(x)
    rule.restore(token, into=into)
    np.testing.assert_array_equal(into, x)


def test_the_base_class_must_be_subclassed_to_be_called() -> None:
    with pytest.raises(NotImplementedError, match="StatefulRRule must implement __call__"):
        StatefulRRule()(F)


# -- abandoned forward passes, double pullbacks ---------------------------------------------


def test_pullback_of_an_earlier_call_discards_abandoned_later_entries() -> None:
    rule = ScaleRule()
    a0 = np.array([1.0, 2.0])
    a, b = zero_codual(a0.copy()), zero_codual(np.ones(2))
    pa = run(rule, a, 3.0)
    pb_abandoned = run(rule, b, 4.0)  # its pullback never runs (e.g. an error later on)
    run(rule, b, 5.0)  # nor this one
    assert rule.depth == 3
    pa(NoRData())
    np.testing.assert_array_equal(a.x, a0)
    assert rule.depth == 0
    with pytest.raises(RuntimeError, match="saved state is gone"):
        pb_abandoned(NoRData())


def test_reset_discards_everything_and_keeps_buffers() -> None:
    rule = ScaleRule()
    x = zero_codual(np.ones(3))
    pb = run(rule, x, 2.0)
    buffer = rule._stack[-1]
    rule.reset()
    assert rule.depth == 0
    with pytest.raises(RuntimeError, match="after reset"):
        pb(NoRData())
    assert rule.push((3,), np.float64).buffer is buffer  # the buffer went back to the pool


def test_double_pullback_raises() -> None:
    rule = ScaleRule()
    x = zero_codual(np.ones(3))
    pb = run(rule, x, 2.0)
    pb(NoRData())
    with pytest.raises(RuntimeError, match="twice"):
        pb(NoRData())


def test_double_pullback_raises_after_a_later_call_reused_the_buffer() -> None:
    # The pooled buffer of call 1 is handed to call 2 at the same stack depth; a
    # second pullback of call 1 must still be detected, not pop call 2's entry.
    rule = ScaleRule()
    x, y = zero_codual(np.ones(3)), zero_codual(np.full(3, 7.0))
    pb1 = run(rule, x, 2.0)
    pb1(NoRData())
    run(rule, y, 3.0)
    with pytest.raises(RuntimeError, match="twice"):
        pb1(NoRData())
    assert rule.depth == 1  # call 2's saved state is still there


# -- pooled buffers ----------------------------------------------------------------------


def test_pool_reuses_buffers_of_the_same_shape_and_dtype() -> None:
    rule = StatefulRRule()
    x = np.ones((3, 4))
    t = rule.save(x)
    first = t.buffer
    rule.restore(t)
    assert rule.save(2 * x).buffer is first


@pytest.mark.parametrize(
    "other",
    [
        np.ones((4, 3)),
        np.ones(12),
        np.ones((3, 4), np.float32),
        np.ones((3, 4), np.complex128),
        np.ones((3, 4), ">f8"),
    ],
    ids=["transposed shape", "same size", "float32", "complex128", "big-endian"],
)
def test_pool_never_returns_a_buffer_of_another_shape_or_dtype(other: np.ndarray) -> None:
    rule = StatefulRRule()
    t = rule.save(np.ones((3, 4)))
    rule.restore(t)
    t2 = rule.save(other)
    assert t2.buffer.shape == other.shape and t2.buffer.dtype == other.dtype
    np.testing.assert_array_equal(t2.buffer, other)


SPECS = [
    ((3,), np.float64),
    ((3,), np.float32),
    ((1, 3), np.float64),
    ((), np.complex64),
    ((2, 2), np.float64),
    ((4,), np.float64),
]


@SETTINGS
@given(ops=st.lists(st.one_of(st.sampled_from(SPECS), st.just("pop")), max_size=40))
def test_pool_under_any_push_pop_sequence(ops: list[Any]) -> None:
    """Live buffers have the requested shape/dtype, are distinct, and keep their contents."""
    rule = StatefulRRule()
    live: list[tuple[SaveToken, np.ndarray]] = []
    for i, op in enumerate(ops):
        if op == "pop":
            if live:
                token, value = live.pop()
                out = np.empty_like(value)
                rule.restore(token, into=out)
                np.testing.assert_array_equal(out, value)
            continue
        shape, dtype = op
        value = np.full(shape, i, dtype)
        token = rule.save(value)
        assert token.buffer.shape == shape and token.buffer.dtype == dtype
        live.append((token, value))
        assert len({id(t.buffer) for t, _ in live}) == len(live)
        assert rule.depth == len(live)


# -- scratch buffers ------------------------------------------------------------------------


def test_scratch_is_reused_until_shape_or_dtype_changes() -> None:
    rule = StatefulRRule()
    w = rule.scratch("w", (2, 3), np.float64)
    assert w.shape == (2, 3) and w.dtype == np.float64
    assert rule.scratch("w", (2, 3), np.float64) is w
    assert rule.scratch("w", (2, 3), "float64") is w
    assert rule.scratch("v", (2, 3), np.float64) is not w  # names are separate buffers
    w2 = rule.scratch("w", (3, 2), np.float64)
    assert w2 is not w and w2.shape == (3, 2)
    w3 = rule.scratch("w", (3, 2), np.float32)
    assert w3 is not w2 and w3.dtype == np.float32
    assert rule.scratch("w", (3, 2), np.float32) is w3


# -- steady state: no allocation ---------------------------------------------------------------


def _count_allocations() -> Any:
    try:
        return importlib.import_module("testutils").count_allocations
    except AttributeError:
        return importlib.import_module("testutils._alloc").count_allocations


def test_save_restore_allocate_nothing_once_warm() -> None:
    count_allocations = _count_allocations()
    rule = StatefulRRule()
    x = np.random.default_rng(0).standard_normal((16, 16))
    into = np.empty_like(x)

    def step() -> None:
        t1 = rule.save(x)
        t2 = rule.save(x.T)
        t3 = rule.push((16,), np.float32)
        rule.pop(t3)
        rule.restore(t2, into=into)
        rule.restore(t1, into=into)

    step()  # warm-up fills the pool
    assert count_allocations(step).count == 0


def test_a_warm_mutation_rule_allocates_nothing() -> None:
    count_allocations = _count_allocations()
    rule = ScaleRule()
    x = zero_codual(np.random.default_rng(0).standard_normal(64))
    alpha = CoDual(np.float64(1.5), None)  # a constant α: its adjoint is not computed

    def forward_and_pullback() -> None:
        _, pb = rule(F, x, alpha)
        pb(NoRData())

    forward_and_pullback()
    assert count_allocations(forward_and_pullback).count == 0
