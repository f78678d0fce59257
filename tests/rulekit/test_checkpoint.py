"""`checkpoint(f)`: same values and gradients as f, f's internals recomputed in the pullback."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand

import rulekit
from rulekit._checkpoint import _examples as rule_examples
from rulekit._checkpoint import checkpoint, checkpoint_p
from rulekit._scan import scan
from testutils import check_rule

H = 4


def layer(W: Any, b: Any, x: Any) -> Any:
    return np.tanh(W @ x + b)


def net(W: Any, b: Any, x: Any, ck: bool) -> Any:
    g = checkpoint(layer) if ck else layer
    h = g(W, b, x)
    h = g(W, b, h)  # (checkpointed twice: two call sites, each with its own rule)
    return np.sum(h**2)


def test_values_and_gradients_equal_those_of_f() -> None:
    args = rand(0, (H, H)), rand(1, (H,)), rand(2, (H,))
    got = rulekit.value_and_grad(lambda *a: net(*a, True), argnums=(0, 1, 2))(*args)
    want = rulekit.value_and_grad(lambda *a: net(*a, False), argnums=(0, 1, 2))(*args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    for g, w in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)


def test_gradients_against_finite_differences_in_every_layout() -> None:
    args = rand(0, (H, H)), rand(1, (H,)), rand(2, (H,))
    check_grads(lambda *a: net(*a, True), *args, layouts=EVERY_LAYOUT, calls=2)


def test_captured_traced_values_scalars_and_keyword_arguments() -> None:
    def f(W: Any, s: float, x: Any) -> Any:
        g = checkpoint(lambda v, scale=1.0: np.sin(W @ v) * s * scale)
        return np.sum(g(g(x), scale=2.0) ** 2)

    check_grads(f, rand(0, (H, H)), 0.7, rand(1, (H,)), calls=2)


def test_the_forward_runs_f_on_plain_values_and_the_pullback_reruns_it_traced() -> None:
    seen: list[bool] = []

    def f(x: Any) -> Any:
        seen.append(isinstance(x, rulekit.Traced))
        return np.exp(x) * 2.0

    def loss(W: Any) -> Any:
        return np.sum(checkpoint(f)(W @ np.ones(H)))

    vg = rulekit.value_and_grad(loss)
    W = rand(0, (H, H))
    vg(W)
    assert seen == [False, True]  # forward: plain; pullback: traced (its rule's first trace)
    fs = [s.key[0] for s in vg.tracer.sites]
    assert fs.count(checkpoint_p) == 1 and np.exp not in fs  # one rule call, f's calls inside it
    _, g = vg(W)
    np.testing.assert_allclose(g, np.outer(2 * np.exp(W @ np.ones(H)), np.ones(H)), rtol=1e-14)


def test_pytree_arguments_and_outputs_and_outputs_aliasing_inputs() -> None:
    def f(a: Any, b: Any) -> Any:
        g = checkpoint(lambda p, q: {"same": p["x"], "pair": (p["x"] * q, q), "k": 3})
        out = g({"x": a}, b)
        assert out["k"] == 3
        return np.sum(out["same"] ** 3) + np.sum(out["pair"][0]) + out["pair"][1]

    check_grads(f, rand(0, (H,)), 1.3, calls=2)


def test_float32_and_complex() -> None:
    check_grads(lambda *a: net(*a, True), *(rand(k, s, np.float32) for k, s in
                                            enumerate([(H, H), (H,), (H,)])), calls=2)  # fmt: skip

    def f(z: Any, W: Any) -> Any:
        return np.sum(np.abs(checkpoint(lambda v: W @ v * v)(z)) ** 2)

    check_grads(f, rand(0, (H,), complex), rand(1, (H, H), complex), calls=2)


def test_scan_inside_checkpoint_and_checkpoint_inside_scan() -> None:
    def f(W: Any, xs: Any) -> Any:
        step = checkpoint(lambda h, x: np.tanh(W @ h + x))
        inner = lambda xs: scan(lambda h, x: (step(h, x), np.sum(h)), np.zeros(H), xs)  # noqa: E731
        h, ys = checkpoint(inner)(xs)
        return np.sum(h) + np.sum(ys**2)

    def unrolled(W: Any, xs: Any) -> Any:
        h, ys = np.zeros(H), []
        for x in xs:
            ys.append(np.sum(h))
            h = np.tanh(W @ h + x)
        return np.sum(h) + sum(y**2 for y in ys)

    args = rand(0, (H, H)) * 0.5, rand(1, (5, H))
    got = rulekit.value_and_grad(f, argnums=(0, 1))(*args)
    want = rulekit.value_and_grad(unrolled, argnums=(0, 1))(*args)
    for g, w in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)
    check_grads(f, *args, calls=2)


def test_plain_values_call_f() -> None:
    W, b, x = rand(0, (H, H)), rand(1, (H,)), rand(2, (H,))
    np.testing.assert_array_equal(checkpoint(layer)(W, b, x), layer(W, b, x))
    assert checkpoint(layer).__wrapped__ is layer


def test_writing_into_an_argument_is_refused() -> None:
    def f(x: Any) -> Any:
        def g(v: Any) -> Any:
            v *= 2.0
            return v

        return np.sum(checkpoint(g)(x * 1.0))

    with pytest.raises(ValueError, match="read-only"):
        rulekit.grad(f)(rand(0, (H,)))


class _Holder:
    def __init__(self, W: Any) -> None:
        self.W = W


def test_a_traced_value_that_cannot_be_lifted_gives_a_clear_error() -> None:
    def f(W: Any, x: Any) -> Any:
        m = _Holder(W)
        return np.sum(checkpoint(lambda v: m.W @ v)(x))

    with pytest.raises(rulekit.TracingError, match="checkpointed function read a value traced"):
        rulekit.grad(f, argnums=(0, 1))(rand(0, (H, H)), rand(1, (H,)))


def test_inside_a_compiled_value_and_grad() -> None:
    vg = rulekit.value_and_grad(lambda *a: net(*a, True), argnums=(0, 1, 2), compile=True)
    ref = rulekit.value_and_grad(lambda *a: net(*a, False), argnums=(0, 1, 2))
    for k in range(4):
        args = rand(k, (H, H)), rand(k + 10, (H,)), rand(k + 20, (H,))
        got, want = vg(*args), ref(*args)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
        for g, w in zip(got[1], want[1], strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def test_the_rule_passes_the_conformance_kit_on_its_examples() -> None:
    for ex in rule_examples():
        check_rule(checkpoint_p, *ex.args)
