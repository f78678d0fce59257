"""value_and_grad / grad / value_and_pullback / build_rrule on plain NumPy code."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import fd_grad
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules
import rules.blas
from rulekit import Array, MissingRuleError, TracingError

assert rules  # the bundled rules are registered on import


def seed_example(A: np.ndarray, B: np.ndarray) -> Any:
    return -2.5 * np.sum(np.log1p(0.25 * (A @ B - 18) ** 2))


def softmax_xent(W1: np.ndarray, b1: np.ndarray, W2: np.ndarray, X: np.ndarray, Y: np.ndarray):
    h = np.tanh(X @ W1 + b1)
    logits = h @ W2
    m = np.max(logits, axis=1, keepdims=True)
    z = logits - m
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.sum(Y * logp) / X.shape[0]


def rnn(Wh: np.ndarray, Wx: np.ndarray, xs: np.ndarray) -> Any:
    h = np.zeros(Wh.shape[0])
    for t in range(xs.shape[0]):
        h = np.tanh(Wh @ h + Wx @ xs[t])
    return np.sum(h**2)


def inplace_code(x: np.ndarray, y: np.ndarray) -> Any:
    z = np.zeros_like(x)
    z += x * y
    z[1:] = z[1:] * 2.0
    np.multiply(z, x, out=z)
    z[0] = y[0] ** 2
    z *= 3.0
    return np.sum(z)


def gemm_code(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> Any:
    C = C.copy()
    # C ← 1.5·A·B + 0.5·C, overwriting C in place (C-contiguous: transposed views, no copy).
    rules.blas.dgemm(1.5, B.T, A.T, beta=0.5, c=C.T, overwrite_c=1)
    return np.sum(np.sin(C))


RNG = np.random.default_rng(0)


def _check(f: Any, args: tuple[Any, ...], argnums: tuple[int, ...], rtol: float = 1e-6) -> None:
    value, grads = rulekit.value_and_grad(f, argnums=argnums)(*args)
    np.testing.assert_allclose(value, f(*args), rtol=1e-12)
    for i, g in zip(argnums, grads, strict=True):
        np.testing.assert_allclose(g, fd_grad(f, args, i), rtol=rtol, atol=1e-7)


def test_seed_example() -> None:
    A, B = RNG.normal(size=(4, 5)), RNG.normal(size=(5, 3))
    _check(seed_example, (A, B), (0, 1))


def test_mlp_softmax_cross_entropy() -> None:
    X = RNG.normal(size=(6, 4))
    Y = np.eye(3)[RNG.integers(0, 3, size=6)]
    W1, b1, W2 = RNG.normal(size=(4, 5)), RNG.normal(size=5), RNG.normal(size=(5, 3))
    _check(softmax_xent, (W1, b1, W2, X, Y), (0, 1, 2))


def test_rnn_python_loop() -> None:
    Wh, Wx, xs = RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=(3, 2)), RNG.normal(size=(4, 2))
    _check(rnn, (Wh, Wx, xs), (0, 1, 2))


def test_inplace_out_and_setitem() -> None:
    x, y = RNG.normal(size=5), RNG.normal(size=5)
    _check(inplace_code, (x, y), (0, 1))


def test_blas_dgemm_overwrite_c() -> None:
    A, B, C = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2)), RNG.normal(size=(3, 2))
    _check(gemm_code, (A, B, C), (0, 1, 2))


def test_inputs_unchanged_after_inplace_code() -> None:
    x = RNG.normal(size=4)
    x0 = x.copy()

    def f(x: Any) -> Any:
        x *= 2.0
        x[0] = 1.0
        return np.sum(x**2)

    value, g = rulekit.value_and_grad(f)(x)
    np.testing.assert_array_equal(x, x0)  # the reverse pass restored the mutated input
    assert value == pytest.approx(1.0 + np.sum((2 * x0[1:]) ** 2))
    np.testing.assert_allclose(g, np.r_[0.0, 8 * x0[1:]])


def test_argnums_conventions_and_has_aux() -> None:
    x, y = RNG.normal(size=3), 2.0

    def f(x: Any, y: float) -> Any:
        s = np.sum(x * y)
        return s, {"s": s, "x": x}

    (value, aux), g = rulekit.value_and_grad(f, argnums=1, has_aux=True)(x, y)
    assert value == pytest.approx(np.sum(x * y))
    assert isinstance(aux["x"], np.ndarray) and aux["s"] == pytest.approx(value)
    assert g == pytest.approx(np.sum(x))
    _, (gx, gy) = rulekit.value_and_grad(lambda x, y: np.sum(x * y), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, np.full(3, y))
    assert isinstance(gy, float)
    gx2 = rulekit.grad(lambda x: np.sum(np.sin(x)))(x)
    np.testing.assert_allclose(gx2, np.cos(x))


def test_containers_as_inputs() -> None:
    params = {"w": RNG.normal(size=3), "b": 0.5}

    def f(p: Any, x: Any) -> Any:
        return np.sum(np.tanh(x * p["w"] + p["b"]))

    x = RNG.normal(size=3)
    _, g = rulekit.value_and_grad(f)(params, x)
    t = 1 - np.tanh(x * params["w"] + 0.5) ** 2
    np.testing.assert_allclose(g["w"], t * x)
    assert g["b"] == pytest.approx(np.sum(t))


def test_control_flow_on_traced_values() -> None:
    def f(x: Any) -> Any:
        if np.sum(x) > 0:
            return np.sum(x**2)
        return np.sum(-x)

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(rulekit.grad(f)(x), 2 * x)
    np.testing.assert_allclose(rulekit.grad(f)(-x), [-1.0, -1.0])


def test_constant_output_gives_zero_gradient() -> None:
    _, g = rulekit.value_and_grad(lambda x: 3.0)(np.ones(2))
    np.testing.assert_array_equal(g, np.zeros(2))


def test_value_and_pullback_array_output() -> None:
    A, x = RNG.normal(size=(3, 3)), RNG.normal(size=3)
    dy = RNG.normal(size=3)
    value, (gA, gx) = rulekit.value_and_pullback(lambda A, x: np.sin(A @ x), dy, A, x)
    np.testing.assert_allclose(value, np.sin(A @ x))
    c = np.cos(A @ x) * dy
    np.testing.assert_allclose(gA, np.outer(c, x))
    np.testing.assert_allclose(gx, A.T @ c)


# -- reuse and allocation ------------------------------------------------------------


def test_rules_reused_per_call_site_and_rebuilt_on_signature_change() -> None:
    vg = rulekit.value_and_grad(seed_example, argnums=(0, 1))
    A, B = RNG.normal(size=(4, 5)), RNG.normal(size=(5, 3))
    vg(A, B)
    rules_1 = [s.rule for s in vg.tracer.sites]
    vg(A * 2, B)
    assert [s.rule for s in vg.tracer.sites] == rules_1
    assert all(a is b for a, b in zip(rules_1, [s.rule for s in vg.tracer.sites], strict=True))
    _, g32 = vg(A.astype(np.float32), B.astype(np.float32))
    assert g32[0].dtype == np.float32
    sig0 = vg.tracer.sites[0].sig
    assert "float32" in repr(sig0)


def test_copy_semantics() -> None:
    x = RNG.normal(size=(3, 3))
    f = lambda x: np.sum(x @ x)  # noqa: E731
    fresh = rulekit.value_and_grad(f, copy=True)
    _, g1 = fresh(x)
    _, g2 = fresh(x)
    assert g1 is not g2 and not np.shares_memory(g1, g2)
    shared = rulekit.value_and_grad(f, copy=False)
    _, h1 = shared(x)
    h1_value = h1.copy()
    _, h2 = shared(x * 2)
    assert h1 is h2  # an internal buffer, valid until the next call
    np.testing.assert_allclose(h2, 2 * h1_value)


def test_steady_state_allocates_nothing_with_stateful_rules() -> None:
    from testutils import count_allocations

    A, B, C = RNG.normal(size=(8, 8)), RNG.normal(size=(8, 8)), RNG.normal(size=(8, 8))

    def f(A: Any, B: Any, C: Any) -> Any:
        rules.blas.dgemm(1.0, B.T, A.T, beta=1.0, c=C.T, overwrite_c=1)
        D = np.matmul(C, A)
        return rules.blas.ddot(D.reshape(-1), D.reshape(-1))

    vg = rulekit.value_and_grad(f, argnums=(0, 1, 2), copy=False)
    for _ in range(3):
        vg(A, B, C)
    assert count_allocations(vg, A, B, C).count == 0
    _, grads = vg(A, B, C)
    ref = [fd_grad(f, (A, B, C), i) for i in range(3)]
    for g, r in zip(grads, ref, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


# -- errors ------------------------------------------------------------------------------


def test_wrong_argnums_raise_before_calling_f() -> None:
    calls = []

    def f(x: Any) -> Any:
        calls.append(1)
        return np.sum(x)

    with pytest.raises(ValueError, match="argnums"):
        rulekit.value_and_grad(f, argnums=1)(np.ones(2))
    with pytest.raises(TypeError, match="argnums"):
        rulekit.value_and_grad(f, argnums="0")(np.ones(2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not differentiable"):
        rulekit.value_and_grad(f)(np.ones(2, dtype=np.int64))
    assert calls == []


def test_non_scalar_output_for_grad() -> None:
    with pytest.raises(TypeError, match="value_and_pullback"):
        rulekit.grad(lambda x: np.sin(x))(np.ones(3))


@pytest.mark.parametrize(
    "leak",
    [
        lambda x: float(np.sum(x)),
        lambda x: np.sum(x).item(),
        lambda x: np.asarray(x),
        lambda x: int(x[0]),
    ],
    ids=["float", "item", "asarray", "int"],
)
def test_leaks_raise_tracing_error(leak: Any) -> None:
    with pytest.raises(TracingError, match="trace"):
        rulekit.grad(leak)(np.ones(3))


def test_writing_into_untraced_array_raises() -> None:
    plain = np.zeros(3)

    def setitem(x: Any) -> Any:
        plain[0] = x[0]
        return np.sum(x)

    def out_kw(x: Any) -> Any:
        np.add(x, 1.0, out=plain)
        return np.sum(x)

    for f in (setitem, out_kw):
        with pytest.raises(TracingError):
            rulekit.grad(f)(np.ones(3))
    np.testing.assert_array_equal(plain, np.zeros(3))


def test_c_extension_receiving_traced_value_raises() -> None:
    import scipy.linalg.blas as blas

    with pytest.raises(TracingError):
        rulekit.grad(lambda x: blas.ddot(x, x))(np.ones(3))


def test_missing_rule_names_signature() -> None:
    with pytest.raises(MissingRuleError, match=r"np\.interp\(Array\[np\.float64, 1\]"):
        rulekit.grad(lambda x: np.sum(np.interp(x, [0.0, 1.0], [1.0, 2.0])))(np.ones(4))


def test_inputs_unchanged_after_error() -> None:
    x = np.arange(3.0)

    def f(x: Any) -> Any:
        x *= 10.0
        x[0] = 5.0
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        rulekit.grad(f)(x)
    np.testing.assert_array_equal(x, np.arange(3.0))


def test_mutating_a_used_constant_keeps_the_gradient_of_the_value_used() -> None:
    c = np.ones(3)

    def f(x: Any) -> Any:
        y = np.sum(x * c)
        c[0] = 5.0  # the pullback of x*c must still see the value c had when it was used
        return y

    vg = rulekit.value_and_grad(f)
    for _ in range(3):
        c[:] = 1.0
        value, g = vg(np.full(3, 2.0))
        assert value == 6.0
        np.testing.assert_array_equal(g, np.ones(3))
        assert c[0] == 5.0 and c.flags.writeable  # the user's write happened; nothing locked


# -- derived rules -------------------------------------------------------------------------


def _logistic_loss(w: np.ndarray, x: np.ndarray) -> Any:
    return np.sum(np.log1p(np.exp(-(x @ w))))


logistic_loss = rulekit.primitive(_logistic_loss)


def test_build_rrule_as_registered_rule_of_a_primitive() -> None:
    w, x = RNG.normal(size=3), RNG.normal(size=(4, 3))
    derived = rulekit.build_rrule(_logistic_loss, w, x)
    reg = rulekit.registry.add(
        "rrule", logistic_loss, (Array[np.float64, 1], Array[np.float64, 2]), derived
    )
    try:
        from testutils import check_rule

        check_rule(logistic_loss, w, x)
        f = lambda w, x: logistic_loss(w, x) * 2.0  # noqa: E731
        _, g = rulekit.value_and_grad(f)(w, x)
        np.testing.assert_allclose(g, fd_grad(f, (w, x), 0), rtol=1e-6)
    finally:
        rulekit.registry.remove(reg)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(n=st.integers(1, 6), m=st.integers(1, 6), k=st.integers(1, 6))
def test_seed_example_random_shapes(n: int, m: int, k: int) -> None:
    rng = np.random.default_rng(n * 100 + m * 10 + k)
    A, B = rng.normal(size=(n, m)), rng.normal(size=(m, k))
    _check(seed_example, (A, B), (0, 1), rtol=1e-5)
