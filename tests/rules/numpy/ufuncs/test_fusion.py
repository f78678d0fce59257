"""Fused elementwise chains in compiled programs (`rules.numpy.ufuncs.fusion`).

Random chains of elementwise calls (hypothesis) are compiled with fusion and checked
on several calls against the eager engine and central finite differences; the chain
must really be fused where the rules say it can, and left alone where it cannot
(non-contiguous or float32 operands, values used outside the chain).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from fdcheck import fd_grad
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
from rules.numpy.ufuncs.fusion import ENABLED, FusedStep
from testutils import count_allocations

UNARY = [np.sin, np.cos, np.tanh, np.exp, np.log1p, np.negative, np.square, np.arctan]
BINARY = [np.add, np.subtract, np.multiply]


def _fused(vg: Any) -> int:
    return sum(isinstance(s, FusedStep) for p in vg.tracer.programs for s in p.steps)


@st.composite
def chains(draw: Any) -> tuple[list[tuple[Any, ...]], bool]:
    """A chain program: each step applies a unary or binary function to earlier values
    (by index), the second operand possibly a constant; optionally closed by a sum."""
    steps: list[tuple[Any, ...]] = []
    for n in range(draw(st.integers(2, 9))):
        if draw(st.booleans()):
            steps.append(("u", draw(st.sampled_from(UNARY)), draw(st.integers(0, n))))
        else:
            fn = draw(st.sampled_from(BINARY))
            a = draw(st.integers(0, n))
            b: Any = draw(st.one_of(st.integers(0, n), st.floats(-2, 2).map(lambda v: ("c", v))))
            steps.append(("b", fn, a, b, draw(st.booleans())))
    if draw(st.booleans()):
        steps.append(("pow", draw(st.sampled_from([2.0, 3.0, 0.5, 0.0])), len(steps)))
    return steps, draw(st.booleans())


def program(steps: list[tuple[Any, ...]], summed: bool) -> Any:
    def f(x: Any) -> Any:
        vals = [x * 0.5]
        for s in steps:
            if s[0] == "u":
                v = s[1](vals[s[2]])
            elif s[0] == "pow":  # (|v| + 0.5: away from 0, where √|v| has no derivative)
                v = (np.abs(vals[s[2]]) + 0.5) ** s[1]
            else:
                _, fn, a, b, flip = s
                other = b[1] if isinstance(b, tuple) else vals[b]
                v = fn(other, vals[a]) if flip else fn(vals[a], other)
            vals.append(np.tanh(v) if s[0] != "u" else v)  # (bounded, so chains stay finite)
        out = vals[-1]
        return (
            np.sum(out)
            if summed
            else np.sum(out * np.linspace(0.5, 1.5, out.size).reshape(out.shape))
        )

    return f


@settings(max_examples=30, deadline=None)
@given(chains(), st.sampled_from([(5,), (3, 4), (), (0, 3), (257,)]), st.integers(0, 2**31))
def test_random_chains_agree_with_the_eager_engine_and_differences(
    chain: Any, shape: tuple[int, ...], seed: int
) -> None:
    f = program(*chain)
    rng = np.random.default_rng(seed)
    compiled = rulekit.value_and_grad(f, compile=True)
    eager = rulekit.value_and_grad(f)
    for call in range(3):
        x = rng.uniform(0.1, 1.0, shape)
        (v, g), (v0, g0) = compiled(x), eager(x)
        # fused kernels: numba's libm and a sequential sum, vs NumPy's SIMD loops and pairwise
        # sums: equal up to rounding (measured ≤ 3e-15 relative here; 1e-12 leaves a margin)
        np.testing.assert_allclose(v, v0, rtol=1e-12, atol=1e-300, err_msg=f"value, call {call}")
        np.testing.assert_allclose(g, g0, rtol=1e-12, atol=1e-13, err_msg=f"grad, call {call}")
        if call == 0 and x.size:
            np.testing.assert_allclose(g, fd_grad(f, (x,), 0), rtol=1e-5, atol=1e-7)
    if shape != ():  # (0-d operations return NumPy scalars, which are not fused)
        assert _fused(compiled) >= 1  # (x * 0.5 and the first call at least form a chain)


def test_a_chain_is_fused_and_fast_paths_kept(rng: np.random.Generator) -> None:
    def rosen(x: Any) -> Any:
        return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)

    vg = rulekit.value_and_grad(rosen, compile=True)
    for _ in range(3):
        x = rng.standard_normal(50)
        v, g = vg(x)
        np.testing.assert_allclose(g, fd_grad(rosen, (x,), 0), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(v, rosen(x), rtol=1e-13)
    assert _fused(vg) == 2  # (x[:-1] is taken again in the middle: two chains)


def test_values_used_outside_the_chain_split_it(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        a = np.sin(x)
        b = np.exp(a) * 2.0
        c = np.cos(b) + a  # (a is used again here: the first chain must end at or after a)
        return np.sum(c * c) + np.sum(b)

    vg = rulekit.value_and_grad(f, compile=True)
    for _ in range(3):
        x = rng.standard_normal(7)
        np.testing.assert_allclose(vg(x)[1], fd_grad(f, (x,), 0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind", ["F", "strided", "float32", "complex"])
def test_what_is_not_fused_stays_correct(kind: str, rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        return np.sum(np.abs(np.sin(x) * 2.0 + 1.0) ** 2)

    base = rng.standard_normal((4, 6))
    x = {
        "F": np.asfortranarray(base),
        "strided": base[:, ::2],
        "float32": base.astype(np.float32),
        "complex": base + 1j * rng.standard_normal((4, 6)),
    }[kind]
    vg = rulekit.value_and_grad(f, compile=True)
    eager = rulekit.value_and_grad(f)
    for _ in range(3):
        np.testing.assert_allclose(vg(x)[1], eager(x)[1], rtol=1e-6)


def test_steady_state_allocates_nothing(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        y = np.sin(x) * 2.0 - np.exp(x * 0.1)
        return np.sum(np.tanh(y) ** 2)

    x = rng.standard_normal(100)
    vg = rulekit.value_and_grad(f, compile=True, copy=False)
    for _ in range(3):
        vg(x)
    assert _fused(vg) >= 1
    assert count_allocations(lambda: vg(x)).count == 0


def test_turned_off_the_program_is_not_fused(rng: np.random.Generator) -> None:
    ENABLED[0] = False
    try:
        vg = rulekit.value_and_grad(lambda x: np.sum(np.sin(x) * 2.0), compile=True)
        vg(rng.standard_normal(3))
        vg(rng.standard_normal(3))
    finally:
        ENABLED[0] = True
    assert _fused(vg) == 0


def test_interleaved_derived_rule_calls_keep_their_values(rng: np.random.Generator) -> None:
    def g(x: Any) -> Any:
        return np.sin(x) * 2.0 + np.cos(x)

    rule = rulekit.DerivedRule(g, compile=True)
    fc = rulekit.CoDual(g, rulekit.NoFData())
    xs = [rng.standard_normal(5) for _ in range(3)]
    dxs = [np.zeros(5) for _ in xs]
    outs = [rule(fc, rulekit.CoDual(x, d)) for x, d in zip(xs, dxs, strict=True)]
    for (y, _), x in zip(outs, xs, strict=True):
        np.testing.assert_allclose(y.x, g(x), rtol=1e-14)
    for _, pb in reversed(outs):
        pb(np.ones(5))
    for x, d in zip(xs, dxs, strict=True):
        np.testing.assert_allclose(d, 2.0 * np.cos(x) - np.sin(x), rtol=1e-13)


def test_non_differentiated_operands_and_a_closing_mean(rng: np.random.Generator) -> None:
    def loss(w: Any, X: Any, y: Any) -> Any:
        z = X @ w
        return np.mean(y * z * z - np.tanh(z) * y + 0.5 * z)

    vg = rulekit.value_and_grad(loss, compile=True)
    eager = rulekit.value_and_grad(loss)
    for _ in range(4):
        w, X, y = rng.standard_normal(3), rng.standard_normal((20, 3)), rng.standard_normal(20)
        (v, g), (v0, g0) = vg(w, X, y), eager(w, X, y)
        np.testing.assert_allclose(v, v0, rtol=1e-12)  # (fused: last bits, see above)
        np.testing.assert_allclose(g, g0, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g, fd_grad(loss, (w, X, y), 0), rtol=1e-6, atol=1e-9)
    assert _fused(vg) >= 1


def test_a_tracked_operand_written_after_the_chain_reads_it(rng: np.random.Generator) -> None:
    def f(x: Any, c: Any) -> Any:
        m = c * 2.0  # (tracked: computed from a non-differentiated argument)
        s = np.sum(np.sin(x) * m + x)
        m[0] = 100.0  # (written after the chain read it: the pullback must see the old m)
        return s + np.sum(x * m)

    vg = rulekit.value_and_grad(f, compile=True)
    for _ in range(3):
        x, c = rng.standard_normal(6), rng.standard_normal(6)
        np.testing.assert_allclose(vg(x, c)[1], fd_grad(f, (x, c), 0), rtol=1e-6, atol=1e-8)


def test_the_mean_of_nothing_is_left_to_its_rule() -> None:
    def f(x: Any) -> Any:
        return np.mean(np.sin(x) * 2.0)

    vg = rulekit.value_and_grad(f, compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (NumPy's, as without rulekit)
        for _ in range(2):
            v, g = vg(np.zeros(0))
            assert np.isnan(v) and g.shape == (0,)
    steps = vg.tracer.programs[0].steps
    assert not any(isinstance(s, FusedStep) and s.f is np.mean for s in steps)


@pytest.mark.parametrize("layout", ["F", "negative", "strided"])
def test_non_differentiated_operands_in_any_layout(layout: str, rng: np.random.Generator) -> None:
    def loss(w: Any, y: Any) -> Any:
        return np.mean(y * w * w + np.sin(w) * y)

    def arrange(a: np.ndarray) -> np.ndarray:
        if layout == "F":
            return np.asfortranarray(a)
        if layout == "negative":
            return np.ascontiguousarray(a[::-1, ::-1])[::-1, ::-1]
        return np.repeat(np.repeat(a, 2, axis=0), 2, axis=1)[::2, ::2]

    vg = rulekit.value_and_grad(loss, compile=True)
    rule = rulekit.DerivedRule(loss, compile=True)  # (a derived rule: snapshots, no reuse)
    fc = rulekit.CoDual(loss, rulekit.NoFData())
    for _ in range(3):
        w, y = rng.standard_normal((4, 5)), arrange(rng.standard_normal((4, 5)))
        np.testing.assert_allclose(vg(w, y)[1], fd_grad(loss, (w, y), 0), rtol=1e-6, atol=1e-9)
        dw = np.zeros((4, 5))
        _, pb = rule(fc, rulekit.CoDual(w, dw), rulekit.CoDual(y, None))
        pb(1.0)
        np.testing.assert_allclose(dw, fd_grad(loss, (w, y), 0), rtol=1e-6, atol=1e-9)
    assert vg.tracer.traces == 1 and rule.tracer.traces == 1


def test_an_unused_value_in_a_chain_cannot_turn_the_gradient_into_nan() -> None:
    def f(x: Any) -> Any:
        a = x * 0.0
        b = np.sqrt(a) * 2.0  # (computed, never used: ∂√a/∂a is ∞ at a = 0)
        c = a + x * 3.0
        del b
        return np.sum(c * c)

    x = np.linspace(0.5, 1.5, 6)
    want = rulekit.value_and_grad(f)(x)[1]
    assert np.all(np.isfinite(want))  # (the tape skips pullbacks no cotangent reaches)
    vg = rulekit.value_and_grad(f, compile=True)
    for _ in range(3):
        np.testing.assert_allclose(vg(x)[1], want, rtol=1e-12)
    assert _fused(vg) >= 1
