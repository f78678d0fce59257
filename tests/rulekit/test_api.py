"""value_and_grad / grad / value_and_pullback / build_rrule on plain NumPy code."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, check_warm_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules
import rules.blas.routines
from rulekit import Array, MissingRuleError, TracingError


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


def _check(f: Any, args: tuple[Any, ...], argnums: tuple[int, ...]) -> None:
    """Two calls of one value_and_grad object, in every memory layout, against central
    differences (fdcheck's default tolerances)."""
    check_grads(f, *args, argnums=argnums, layouts=EVERY_LAYOUT, calls=2)


def test_seed_example(rng: np.random.Generator) -> None:
    A, B = rng.normal(size=(4, 5)), rng.normal(size=(5, 3))
    _check(seed_example, (A, B), (0, 1))


def test_mlp_softmax_cross_entropy(rng: np.random.Generator) -> None:
    X = rng.normal(size=(6, 4))
    Y = np.eye(3)[rng.integers(0, 3, size=6)]
    W1, b1, W2 = rng.normal(size=(4, 5)), rng.normal(size=5), rng.normal(size=(5, 3))
    _check(softmax_xent, (W1, b1, W2, X, Y), (0, 1, 2))


def test_rnn_python_loop(rng: np.random.Generator) -> None:
    Wh, Wx, xs = rng.normal(size=(3, 3)) * 0.5, rng.normal(size=(3, 2)), rng.normal(size=(4, 2))
    _check(rnn, (Wh, Wx, xs), (0, 1, 2))


def test_inplace_out_and_setitem(rng: np.random.Generator) -> None:
    x, y = rng.normal(size=5), rng.normal(size=5)
    _check(inplace_code, (x, y), (0, 1))


def test_blas_dgemm_overwrite_c(rng: np.random.Generator) -> None:
    A, B, C = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    _check(gemm_code, (A, B, C), (0, 1, 2))


def test_inputs_unchanged_after_inplace_code(rng: np.random.Generator) -> None:
    x = rng.normal(size=4)
    x0 = x.copy()

    def f(x: Any) -> Any:
        x *= 2.0
        x[0] = 1.0
        return np.sum(x**2)

    value, g = rulekit.value_and_grad(f)(x)
    np.testing.assert_array_equal(x, x0)  # the reverse pass restored the mutated input
    assert value == pytest.approx(1.0 + np.sum((2 * x0[1:]) ** 2))
    np.testing.assert_allclose(g, np.r_[0.0, 8 * x0[1:]])


def test_argnums_conventions_and_has_aux(rng: np.random.Generator) -> None:
    x, y = rng.normal(size=3), 2.0

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


def test_containers_as_inputs(rng: np.random.Generator) -> None:
    params = {"w": rng.normal(size=3), "b": 0.5}

    def f(p: Any, x: Any) -> Any:
        return np.sum(np.tanh(x * p["w"] + p["b"]))

    x = rng.normal(size=3)
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


def test_value_and_pullback_array_output(rng: np.random.Generator) -> None:
    A, x = rng.normal(size=(3, 3)), rng.normal(size=3)
    dy = rng.normal(size=3)
    value, (gA, gx) = rulekit.value_and_pullback(lambda A, x: np.sin(A @ x), dy, A, x)
    np.testing.assert_allclose(value, np.sin(A @ x))
    c = np.cos(A @ x) * dy
    np.testing.assert_allclose(gA, np.outer(c, x))
    np.testing.assert_allclose(gx, A.T @ c)


# -- reuse and allocation ------------------------------------------------------------


def test_rules_reused_per_call_site_and_rebuilt_on_signature_change(
    rng: np.random.Generator,
) -> None:
    vg = rulekit.value_and_grad(seed_example, argnums=(0, 1))
    A, B = rng.normal(size=(4, 5)), rng.normal(size=(5, 3))
    vg(A, B)
    rules_1 = [s.rule for s in vg.tracer.sites]
    vg(A * 2, B)
    assert [s.rule for s in vg.tracer.sites] == rules_1
    assert all(a is b for a, b in zip(rules_1, [s.rule for s in vg.tracer.sites], strict=True))
    _, g32 = vg(A.astype(np.float32), B.astype(np.float32))
    assert g32[0].dtype == np.float32
    sig0 = vg.tracer.sites[0].sig
    assert "float32" in repr(sig0)


def test_copy_semantics(rng: np.random.Generator) -> None:
    x = rng.normal(size=(3, 3))
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


def test_steady_state_allocates_nothing_with_stateful_rules(rng: np.random.Generator) -> None:
    A, B, C = rng.normal(size=(8, 8)), rng.normal(size=(8, 8)), rng.normal(size=(8, 8))

    def f(A: Any, B: Any, C: Any) -> Any:
        rules.blas.dgemm(1.0, B.T, A.T, beta=1.0, c=C.T, overwrite_c=1)
        D = np.matmul(C, A)
        return rules.blas.ddot(D.reshape(-1), D.reshape(-1))

    check_warm_grads(f, A, B, C)  # allocation-free once warm, and right


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

    assert getattr(blas.drot, "__rulekit_primitive__", None) is None  # (no bundled rule)
    with pytest.raises(TracingError, match="convert"):
        rulekit.grad(lambda x: blas.drot(x, x, 0.6, 0.8)[0][0])(np.ones(3))


def test_c_extension_with_a_bundled_rule_is_routed_to_it(rng: np.random.Generator) -> None:
    import scipy.linalg.blas as blas

    check_grads(lambda x: blas.ddot(x, np.sin(x)), rng.normal(size=3), calls=2)


def test_missing_rule_names_signature() -> None:
    with pytest.raises(MissingRuleError, match=r"np\.fft\.hfft\(Array\[np\.float64, 1\]"):
        rulekit.grad(lambda x: np.sum(np.fft.hfft(x)))(np.ones(4))


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


def test_build_rrule_as_registered_rule_of_a_primitive(
    rng: np.random.Generator, registrations: None
) -> None:
    w, x = rng.normal(size=3), rng.normal(size=(4, 3))
    derived = rulekit.build_rrule(_logistic_loss, w, x)
    rulekit.registry.add(
        "rrule", logistic_loss, (Array[np.float64, 1], Array[np.float64, 2]), derived
    )
    from testutils import check_rule

    check_rule(logistic_loss, w, x)
    check_grads(lambda w, x: logistic_loss(w, x) * 2.0, w, x, calls=2)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(n=st.integers(1, 6), m=st.integers(1, 6), k=st.integers(1, 6))
def test_seed_example_random_shapes(n: int, m: int, k: int) -> None:
    rng = np.random.default_rng(n * 100 + m * 10 + k)
    A, B = rng.normal(size=(n, m)), rng.normal(size=(m, k))
    check_grads(seed_example, A, B)


def test_derived_rule_of_a_list_of_traced_scalars(registrations: Any) -> None:
    """A derived rule whose input is a list holding traced numbers puts their cotangents
    into the list's fdata (a list is a mutable container: its rdata is NoRData)."""

    def poly(coeffs: list[Any], x: Any) -> Any:
        return coeffs[0] * x**2 + coeffs[1] * x + coeffs[2]

    inner = rulekit.primitive(lambda coeffs, x: poly(coeffs, x))
    rule = rulekit.build_rrule(poly, [1.0, 2.0, 3.0], np.ones(2))
    rulekit.rrule.register(inner, list, rulekit.Array[np.float64])(rule)
    f = lambda st, x: np.sum(inner([st[0], st[1] * 2.0, 1.0], x))  # noqa: E731
    check_grads(f, np.array([2.0, 3.0]), np.array([1.5, 2.5]), calls=2)


def test_rule_receiving_a_list_of_lists_keeps_inner_fdata(registrations: Any) -> None:
    """The fdata of a list nested in a list argument is the caller's, not fresh zeros."""

    def total(parts: list[Any]) -> Any:
        return sum(np.sum(p**2) for row in parts for p in row)

    wrapped = rulekit.primitive(total)
    rulekit.rrule.register(wrapped, list)(rulekit.build_rrule(total, [[np.ones(2)], [np.ones(3)]]))
    f = lambda a, b: wrapped([[a], [b, 2.0 * a]])  # noqa: E731
    check_grads(f, np.array([1.0, -2.0]), np.array([0.5, 1.5, -1.0]), calls=2)


def test_copies_of_a_warm_derived_rule_are_independent_and_right() -> None:
    """copy/deepcopy of a derived rule that already ran (cached rules, pooled buffers)
    give a fresh rule of the same function (the kit copies rules it is handed)."""
    import copy

    from testutils import check_rule

    f = lambda x: np.tanh(x) * x  # noqa: E731
    x = np.linspace(-1.0, 1.0, 5)
    rule = rulekit.build_rrule(f, x)
    check_rule(f, x, rule=rule)  # (warms it up)
    for c in (copy.copy(rule), copy.deepcopy(rule)):
        assert isinstance(c, rulekit.DerivedRule) and c is not rule and c.f is f
        check_rule(f, x, rule=c)
