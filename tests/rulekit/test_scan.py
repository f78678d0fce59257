"""`scan`: values and gradients against the unrolled loop and finite differences."""

from __future__ import annotations

from collections import namedtuple
from functools import partial
from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand

import rulekit
from rulekit._scan import _examples as rule_examples
from rulekit._scan import scan, scan_p
from testutils import check_rule

H, D, T = 4, 3, 5


def _rnn_params(seed: int = 0, dtype: Any = np.float64) -> tuple[np.ndarray, ...]:
    W = rand(seed, (H, H), dtype) * 0.5
    U = rand(seed + 1, (H, D), dtype) * 0.5
    h0 = rand(seed + 2, (H,), dtype)
    xs = rand(seed + 3, (T, D), dtype)
    return W, U, h0, xs


def rnn_scan(W: Any, U: Any, h0: Any, xs: Any, checkpoint: bool = False) -> Any:
    h, hs = scan(lambda h, x: (np.tanh(W @ h + U @ x), h), h0, xs, checkpoint=checkpoint)
    return np.sum(h * h) + np.sum(np.sin(hs))


def rnn_loop(W: Any, U: Any, h0: Any, xs: Any) -> Any:
    h, hs = h0, []
    for t in range(xs.shape[0]):
        hs.append(h)
        h = np.tanh(W @ h + U @ xs[t])
    return np.sum(h * h) + sum(np.sum(np.sin(a)) for a in hs)


def _close(a: Any, b: Any, rtol: float = 1e-13) -> None:
    for p, q in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,),
                    strict=True):  # fmt: skip
        np.testing.assert_allclose(p, q, rtol=rtol, atol=1e-14)


# -- the RNN: scan against the unrolled loop, and against finite differences ---------------------


@pytest.mark.parametrize("checkpoint", [False, True])
def test_rnn_scan_equals_the_unrolled_loop(checkpoint: bool) -> None:
    args = _rnn_params()
    f = partial(rnn_scan, checkpoint=checkpoint)
    got = rulekit.value_and_grad(f, argnums=(0, 1, 2, 3))(*args)
    want = rulekit.value_and_grad(rnn_loop, argnums=(0, 1, 2, 3))(*args)
    _close(got[0], want[0])
    _close(got[1], want[1])


@pytest.mark.parametrize("checkpoint", [False, True])
def test_rnn_gradients_against_finite_differences_in_every_layout(checkpoint: bool) -> None:
    f = partial(rnn_scan, checkpoint=checkpoint)
    check_grads(f, *_rnn_params(), layouts=EVERY_LAYOUT, calls=2)


@pytest.mark.parametrize("argnums", [0, 1, 2, 3, (0, 3)])
def test_gradients_with_respect_to_each_argument_alone(argnums: Any) -> None:
    check_grads(rnn_scan, *_rnn_params(1), argnums=argnums, calls=2)
    check_grads(rnn_scan, *_rnn_params(1), argnums=argnums, calls=3, copy=False)


def test_checkpoint_true_equals_false() -> None:
    args = _rnn_params(2)
    a = rulekit.value_and_grad(partial(rnn_scan, checkpoint=True), argnums=(0, 1, 2, 3))(*args)
    b = rulekit.value_and_grad(rnn_scan, argnums=(0, 1, 2, 3))(*args)
    _close(a[0], b[0])
    _close(a[1], b[1])


def test_one_scan_is_one_recorded_rule_call() -> None:
    vg = rulekit.value_and_grad(rnn_scan, argnums=(0, 1))
    vg(*_rnn_params())
    fs = [s.key[0] for s in vg.tracer.sites]
    assert fs.count(scan_p) == 1
    assert np.tanh not in fs and np.matmul not in fs  # (the body's calls are the rule's own)


@pytest.mark.parametrize("checkpoint", [False, True])
def test_length_changes_between_calls_of_one_object(checkpoint: bool) -> None:
    W, U, h0, _ = _rnn_params(3)
    f = partial(rnn_scan, checkpoint=checkpoint)
    vg = rulekit.value_and_grad(f, argnums=(0, 1, 2, 3))
    ref = rulekit.value_and_grad(rnn_loop, argnums=(0, 1, 2, 3))
    rules = []
    for n in (5, 2, 7, 1, 0, 5):
        x = rand(n, (n, D))
        got, want = vg(W, U, h0, x), ref(W, U, h0, x)
        _close(got[0], want[0])
        _close(got[1], want[1])
        site = next(s for s in vg.tracer.sites if s.key[0] is scan_p)
        rules.append((site.rule, *site.rule.rules._cache.values()))
    scan_rule, *derived = rules[0]
    assert all(r[0] is scan_rule for r in rules)  # one rule for the call site ...
    assert all(r[1:] == tuple(derived) for r in rules[1:] if len(r) > 1)  # ... one body rule


def test_body_is_traced_once_per_signature_not_per_length() -> None:
    W, U, h0, xs = _rnn_params()
    vg = rulekit.value_and_grad(rnn_scan, argnums=0)
    vg(W, U, h0, xs)
    vg(W, U, h0, xs[:3])
    site = next(s for s in vg.tracer.sites if s.key[0] is scan_p)
    assert len(site.rule.rules._cache) == 1


# -- structures: xs=None, pytrees, scalars ---------------------------------------------------------


def test_xs_none_with_length() -> None:
    def f(W: Any, b: Any) -> Any:
        c, ys = scan(lambda c, _: (np.tanh(W @ c) + b, np.sum(c)), b, None, length=4)
        return np.sum(c**2) + np.sum(ys * np.arange(4.0))

    W, b = rand(0, (H, H)), rand(1, (H,))
    check_grads(f, W, b, calls=2)
    with pytest.raises(TypeError, match="length= is required"):
        scan(lambda c, x: (c, x), b, None)


Pair = namedtuple("Pair", ["a", "b"])


@pytest.mark.parametrize("checkpoint", [False, True])
def test_pytree_carry_xs_and_ys(checkpoint: bool) -> None:
    def body(c: Any, x: Any) -> Any:
        h, (s, p) = c["h"], c["sp"]
        h2 = np.tanh(h * x["u"] + p.a * x["v"][0])
        p2 = Pair(p.a * 0.9 + np.sum(h2) * 0.01, p.b)  # (p.b: an int counter, not active)
        return {"h": h2, "sp": (s + np.sum(h2 * h), p2)}, [h2, (np.sum(h2), None)]

    def f(h0: Any, s0: Any, u: Any, v: Any) -> Any:
        init = {"h": h0, "sp": (s0, Pair(0.5, 3))}
        c, ys = scan(body, init, {"u": u, "v": [v]}, checkpoint=checkpoint)
        assert isinstance(c["sp"][1], Pair) and c["sp"][1].b == 3 and ys[1][1] is None
        return np.sum(c["h"]) + c["sp"][0] * c["sp"][1].a + np.sum(ys[0] ** 2) + np.sum(ys[1][0])

    check_grads(f, rand(0, (H,)), 0.3, rand(1, (T, H)), rand(2, (T, H)), calls=2)


def test_scalar_carry_and_a_captured_traced_scalar() -> None:
    def f(a: float, xs: Any) -> Any:
        c, ys = scan(lambda c, x: (np.sin(a * c) + x, c * a), 0.5, xs)
        return c + np.sum(ys)

    check_grads(f, 0.7, rand(0, (6,)), calls=2)  # (1-d xs: each x is a scalar)


def test_y_none_gives_ys_none_and_plain_values_run_the_loop() -> None:
    W, U, h0, xs = _rnn_params()
    c, ys = scan(lambda h, x: (np.tanh(W @ h + U @ x), None), h0, xs)
    assert ys is None
    h = h0
    for x in xs:
        h = np.tanh(W @ h + U @ x)
    np.testing.assert_allclose(c, h, rtol=1e-15)
    assert rnn_scan(W, U, h0, xs) == pytest.approx(rnn_loop(W, U, h0, xs), rel=1e-14)


def test_identity_body_and_outputs_that_alias_inputs() -> None:
    def f(c0: Any, xs: Any) -> Any:
        c, ys = scan(lambda c, x: (x, c), c0, xs)  # carry ← x, y ← carry: pure aliasing
        c2, ys2 = scan(lambda c, x: (c, (x, c)), c, xs)
        return np.sum(c * c2) + np.sum(ys * xs) + np.sum(ys2[0] ** 2) + np.sum(ys2[1])

    check_grads(f, rand(0, (H,)), rand(1, (T, H)), calls=2)


def test_a_constant_and_an_integer_leaf_in_the_body() -> None:
    def f(xs: Any) -> Any:
        (k, s), ys = scan(lambda c, x: ((c[0] + 1, c[1] + np.sum(x) * c[0]), np.ones(2)), (0, 0.0),
                          xs)  # fmt: skip
        assert k == T and ys.shape == (T, 2)
        return s + np.sum(ys)

    check_grads(f, rand(0, (T, H)))


# -- dtypes, layouts, lengths ----------------------------------------------------------------------


def test_float32() -> None:
    def f(W: Any, U: Any, h0: Any, xs: Any) -> Any:
        # (finite differences widen one argument to float64: the carry follows the promotion)
        return rnn_scan(W, U, h0.astype(np.result_type(W, U, h0, xs)), xs)

    args = _rnn_params(0, np.float32)
    check_grads(f, *args, calls=2)
    _, grads = rulekit.value_and_grad(f, argnums=(0, 1, 2, 3))(*args)
    assert all(g.dtype == np.float32 for g in grads)


@pytest.mark.parametrize("checkpoint", [False, True])
def test_complex(checkpoint: bool) -> None:
    def f(W: Any, h0: Any, xs: Any) -> Any:
        h, hs = scan(lambda h, x: (W @ h * 0.5 + x * h, np.abs(h) ** 2), h0, xs,
                     checkpoint=checkpoint)  # fmt: skip
        return np.sum(np.abs(h) ** 2) + np.sum(hs)

    args = rand(0, (H, H), np.complex128), rand(1, (H,), np.complex128), rand(2, (T, H), complex)
    check_grads(f, *args, calls=2)


@pytest.mark.parametrize("n", [0, 1])
@pytest.mark.parametrize("checkpoint", [False, True])
def test_length_0_and_1(n: int, checkpoint: bool) -> None:
    W, U, h0, _ = _rnn_params()
    xs = rand(0, (n, D))
    f = partial(rnn_scan, checkpoint=checkpoint)
    got = rulekit.value_and_grad(f, argnums=(0, 1, 2, 3))(W, U, h0, xs)
    want = rulekit.value_and_grad(rnn_loop, argnums=(0, 1, 2, 3))(W, U, h0, xs)
    _close(got[0], want[0])
    _close(got[1][:3], want[1][:3])
    assert got[1][3].shape == (n, D)
    _, ys = scan(lambda h, x: (h, (h, x.sum())), h0, xs)
    assert ys[0].shape == (n, H) and ys[1].shape == (n,)
    check_grads(f, W, U, h0, xs, calls=2)


def test_negative_strides_and_a_strided_xs_view() -> None:
    W, U, h0, _ = _rnn_params()
    big = rand(5, (2 * T, 2 * D))
    for xs in (big[::2, ::2], big[::-2, 1::2], np.asfortranarray(big[:T, :D])):
        check_grads(rnn_scan, W, U, h0, xs, calls=2)


# -- bodies that mutate, nest, capture -------------------------------------------------------------


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_body_that_mutates_an_internal_temp_and_its_carry_in_place(checkpoint: bool) -> None:
    def body(c: Any, x: Any) -> Any:
        t = W_ @ c  # a temp, then written into
        t += x
        np.tanh(t, out=t)
        c *= 0.5  # the carry (the scan's own copy) written in place
        c += t
        return c, t

    def f(W: Any, h0: Any, xs: Any) -> Any:
        global W_
        W_ = W  # (read through a global: not differentiated, so W stays a constant)
        c, ys = scan(body, h0, xs, checkpoint=checkpoint)
        return np.sum(c**2) + np.sum(ys)

    W, h0, xs = rand(0, (H, H)), rand(1, (H,)), rand(2, (T, H))
    h0_before = h0.copy()
    check_grads(f, W, h0, xs, argnums=(1, 2), calls=2)
    np.testing.assert_array_equal(h0, h0_before)  # init is not written


@pytest.mark.parametrize("checkpoint", [False, True])
def test_nested_scan(checkpoint: bool) -> None:
    def f(W: Any, xs: Any) -> Any:
        def outer(c: Any, x: Any) -> Any:
            inner = lambda h, z: (np.tanh(W @ h + z), np.sum(h))  # noqa: E731
            c2, s = scan(inner, c, np.stack([x, 2 * x]), checkpoint=checkpoint)
            return c2, np.sum(s) * c2

        h, ys = scan(outer, np.zeros(H), xs)
        return np.sum(h) + np.sum(ys**2)

    check_grads(f, rand(0, (H, H)) * 0.5, rand(1, (3, H)), calls=2)


def test_captured_closure_values_are_lifted_from_containers_partials_and_helpers() -> None:
    def f(W: Any, b: Any, xs: Any) -> Any:
        params = {"W": W, "bs": [b, 2.0]}
        act = lambda v: np.tanh(v + params["bs"][0])  # noqa: E731 (a helper capturing b)

        def step(scale: Any, c: Any, x: Any, offset: Any = b) -> Any:
            return act(params["W"] @ c * scale) + x + offset * params["bs"][1], c

        c, ys = scan(partial(step, 0.8), np.zeros(H), xs)
        return np.sum(c**2) + np.sum(ys)

    check_grads(f, rand(0, (H, H)), rand(1, (H,)), rand(2, (T, H)), calls=2)


def test_captured_constants_are_read_afresh_on_every_call() -> None:
    W, U, h0, xs = _rnn_params()
    vg = rulekit.value_and_grad(lambda h0, W, s: rnn_scan(W * s, U, h0, xs), argnums=0)
    for k in range(3):
        W2, s = W + 0.1 * k, 1.0 - 0.2 * k  # a new array and a new scalar, each call
        got = vg(h0, W2, s)
        want = rulekit.value_and_grad(rnn_loop, argnums=2)(W2 * s, U, h0, xs)
        _close(got, want)


# -- errors ----------------------------------------------------------------------------------------


def test_a_carry_that_changes_shape_or_dtype_is_refused() -> None:
    x = rand(0, (T, H))
    for body in (lambda c, x: (np.concatenate([c, c]), None),
                 lambda c, x: (c.astype(np.float32), None),
                 lambda c, x: ((c, c), None)):  # fmt: skip
        with pytest.raises(TypeError, match="carry"):
            scan(body, np.zeros(H), x)
        with pytest.raises(TypeError, match="carry"):
            rulekit.grad(lambda x, body=body: np.sum(scan(body, x[0], x)[0]))(x)
    with pytest.raises(TypeError, match="pair"):
        rulekit.grad(lambda x: np.sum(scan(lambda c, x: c, x[0], x)[0]))(x)


def test_bad_xs_are_refused() -> None:
    with pytest.raises(ValueError, match="leading axes"):
        scan(lambda c, x: (c, None), 0.0, (np.zeros(3), np.zeros(4)))
    with pytest.raises(ValueError, match="length=2"):
        scan(lambda c, x: (c, None), 0.0, np.zeros(3), length=2)
    with pytest.raises(TypeError, match="must be an array"):
        scan(lambda c, x: (c, None), 0.0, [1.0, 2.0])


def test_writing_into_x_is_refused() -> None:
    def f(xs: Any) -> Any:
        def body(c: Any, x: Any) -> Any:
            x += 1.0
            return c + x, None

        return np.sum(scan(body, np.zeros(H), xs)[0])

    xs = rand(0, (T, H))
    with pytest.raises(ValueError, match="read-only"):
        f(xs.copy())
    with pytest.raises(ValueError, match="read-only"):
        rulekit.grad(f)(xs)


class _Model:
    def __init__(self, W: Any) -> None:
        self.W = W


def test_a_traced_value_that_cannot_be_lifted_gives_a_clear_error() -> None:
    def f(W: Any, xs: Any, checkpoint: bool) -> Any:
        m = _Model(W)  # held in an attribute: not liftable
        return np.sum(scan(lambda c, x: (m.W @ c + x, None), xs[0], xs, checkpoint=checkpoint)[0])

    args = rand(0, (H, H)), rand(1, (T, H))
    for ck in (False, True):
        with pytest.raises(rulekit.TracingError, match="carry or xs"):
            rulekit.grad(f, argnums=(0, 1))(*args, ck)
        with pytest.raises(rulekit.TracingError, match="carry or xs"):
            rulekit.grad(f, argnums=0)(*args, ck)  # (xs constant: W alone is traced)


def test_a_body_assigning_a_nonlocal_traced_value_is_refused() -> None:
    def f(W: Any) -> Any:
        def body(c: Any, x: Any) -> Any:
            nonlocal W
            W = W * 1.0
            return W @ c, None

        return np.sum(scan(body, np.ones(H), None, length=2)[0])

    with pytest.raises(rulekit.TracingError, match="nonlocal W"):
        rulekit.grad(f)(rand(0, (H, H)))


# -- compiled replay, pullbacks of the outputs themselves, abandoned passes ------------------------


@pytest.mark.parametrize("checkpoint", [False, True])
def test_inside_a_compiled_value_and_grad(checkpoint: bool) -> None:
    W, U, h0, _ = _rnn_params(4)
    f = partial(rnn_scan, checkpoint=checkpoint)
    vg = rulekit.value_and_grad(f, argnums=(0, 1, 2, 3), compile=True)
    ref = rulekit.value_and_grad(rnn_loop, argnums=(0, 1, 2, 3))
    for k, n in enumerate((5, 5, 3, 5, 3, 0, 1)):
        args = W * (1 + 0.1 * k), U, h0 + 0.1 * k, rand(10 + k, (n, D))
        got, want = vg(*args), ref(*args)
        _close(got[0], want[0], rtol=1e-12)
        _close(got[1], want[1], rtol=1e-12)


def test_the_body_is_traced_once_and_replayed_at_every_step() -> None:
    W, U, h0, xs = _rnn_params()
    runs = []

    def f(W: Any, h0: Any, xs: Any) -> Any:
        def body(h: Any, x: Any) -> Any:
            runs.append(1)
            return np.tanh(W @ h + U @ x), h

        h, hs = scan(body, h0, xs)
        return np.sum(h) + np.sum(hs)

    vg = rulekit.value_and_grad(f, argnums=(0, 1, 2))
    ref = rulekit.value_and_grad(rnn_free, argnums=(0, 1, 2))
    for n in (5, 3, 5):
        _close(vg(W, h0, xs[:n])[1], ref(W, h0, xs[:n])[1])
    assert len(runs) == 1  # (5 + 3 + 5 steps: traced on the first, replayed after)


def rnn_free(W: Any, h0: Any, xs: Any) -> Any:
    U = _rnn_params()[1]
    h, total = h0, 0.0
    for x in xs:
        total = total + np.sum(h)
        h = np.tanh(W @ h + U @ x)
    return np.sum(h) + total


def test_pullback_of_carry_and_ys_as_outputs() -> None:
    from fdcheck import check_pullback

    def f(W: Any, h0: Any, xs: Any, k: int) -> Any:
        c, ys = scan(lambda h, x: (np.tanh(W @ h + x), (h * 2.0, np.sum(x * h))), h0, xs)
        return (c, *ys)[k]  # (the rule's outputs returned as they are: seeded directly)

    for k in range(3):
        check_pullback(partial(f, k=k), rand(0, (H, H)), rand(1, (H,)), rand(2, (T, H)))


def test_an_error_in_a_step_leaves_the_object_usable() -> None:
    def f(W: Any, xs: Any) -> Any:
        def body(h: Any, x: Any) -> Any:
            if np.sum(x) > 100:  # (a data-dependent refusal)
                raise ValueError("too large")
            return np.tanh(W @ h + x), None

        return np.sum(scan(body, np.zeros(H), xs)[0] ** 2)

    W, xs = rand(0, (H, H)), rand(1, (T, H))
    vg = rulekit.value_and_grad(f, argnums=(0, 1))
    bad = xs.copy()
    bad[3] = 1000.0
    first = vg(W, xs)
    with pytest.raises(ValueError, match="too large"):
        vg(W, bad)
    _close(vg(W, xs)[1], first[1])
    check_grads(f, W, xs, calls=2)


def test_the_rule_passes_the_conformance_kit_on_its_examples() -> None:
    for ex in rule_examples():
        check_rule(scan_p, *ex.args)  # (every activity combination, interleaved calls, ...)
