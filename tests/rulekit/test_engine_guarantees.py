"""What the engine guarantees beyond one correct call: threads, bounded memory, clear refusals.

Issue #11's crashes, leaks and wrong errors, each as a regression test.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import scipy.optimize

import rulekit
import rules
from rulekit import POOL_KEYS, StatefulRRule

W = np.random.default_rng(11).normal(size=(6, 6))  # the program's weights


def _program(x: Any) -> Any:
    h = np.tanh(x @ W) * 2.0 + 1.0
    return np.sum(np.exp(np.cumsum(h, axis=0) * 0.1)) + np.sum(x[::2] * 3.0)


def _hammer(vg_for_thread: Any, xs: list[np.ndarray], expected: list[np.ndarray]) -> list[str]:
    """Four threads, 60 calls each; returns every error or wrong gradient seen."""
    problems: list[str] = []

    def work(k: int) -> None:
        vg = vg_for_thread()
        for it in range(60):
            i = (k + it) % len(xs)
            try:
                g = vg(xs[i])[1]
                if not np.allclose(g, expected[i], rtol=1e-12, atol=1e-12):
                    problems.append(f"thread {k} call {it}: wrong gradient")
            except Exception as e:  # any error is a failure of the guarantee
                problems.append(f"thread {k} call {it}: {e!r}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return problems


@pytest.mark.parametrize("shared", [True, False], ids=["one object", "one object a thread"])
def test_calls_from_several_threads_are_safe(shared: bool, rng: np.random.Generator) -> None:
    xs = [rng.normal(size=(5, 6)) * 0.3 for _ in range(6)]
    reference = rulekit.value_and_grad(_program)
    expected = [reference(x)[1] for x in xs]
    one = rulekit.value_and_grad(_program)
    make = (lambda: one) if shared else (lambda: rulekit.value_and_grad(_program))
    assert _hammer(make, xs, expected) == []


def test_rule_pools_stay_bounded_over_many_shapes(rng: np.random.Generator) -> None:
    vg = rulekit.value_and_grad(_program, copy=False)
    for n in range(1, 60):
        vg(rng.normal(size=(n, 6)))
    for site in vg.tracer.sites:
        if isinstance(site.rule, StatefulRRule):
            assert len(site.rule._pool) <= POOL_KEYS
            assert site.rule.depth == 0


def test_constant_snapshot_pool_is_reused_not_grown(rng: np.random.Generator) -> None:
    c = rng.normal(size=(8, 6))
    vg = rulekit.value_and_grad(lambda x: np.sum(x * c[: len(x)]))
    for n in (2, 5, 8, 3):
        vg(rng.normal(size=(n, 6)))
    assert len(vg.tracer.free_pools) == 1
    assert len(vg.tracer.free_pools[0].buffers) == 1  # one constant in the program: one buffer


# -- output cotangents are checked, not broadcast --------------------------------------------


@pytest.mark.parametrize(
    ("f", "dy", "match"),
    [
        (lambda x: (x * 2, x * 3), (np.ones(3),), "tuple of 2"),
        (lambda x: (x * 2, x * 3), np.ones(3), "structure"),
        (lambda x: x * 2, np.ones(1), r"shape \(3,\)"),
        (lambda x: x * 2, np.ones((3, 1)), r"shape \(3,\)"),
        (lambda x: x * 2, np.ones(3) * 1j, "complex"),
        (lambda x: np.sum(x), np.ones(2), "scalar"),
        (lambda x: {"a": x * 2}, {"b": np.ones(3)}, "keys"),
    ],
)
def test_a_cotangent_of_the_wrong_structure_is_refused(f: Any, dy: Any, match: str) -> None:
    x = np.arange(3.0)
    with pytest.raises(TypeError, match=match):
        rulekit.value_and_pullback(f, dy, x)
    np.testing.assert_array_equal(x, np.arange(3.0))


def test_a_cotangent_of_the_right_structure_works() -> None:
    _, (g,) = rulekit.value_and_pullback(
        lambda x: (x * 2, np.sum(x)), (np.ones(3), 2.0), np.arange(3.0)
    )
    np.testing.assert_array_equal(g, np.full(3, 4.0))


# -- messages name the right thing, the fix first --------------------------------------------


def test_writing_a_traced_value_into_a_plain_array_says_so() -> None:
    def scalar_into_plain(x: Any) -> Any:
        plain = np.zeros(3)
        plain[0] = np.sum(x)
        return np.sum(x)

    def array_into_plain(x: Any) -> Any:
        plain = np.zeros((2, 3))
        plain[0] = x
        return np.sum(x)

    for f in (scalar_into_plain, array_into_plain):
        with pytest.raises(rulekit.TracingError) as err:
            rulekit.grad(f)(np.ones(3))
        msg = str(err.value)
        assert msg.startswith("`plain[i] = x` writes a traced value into an untraced array")
        assert msg.index("Fix:") < msg.index("gradient")  # the fix before the explanation


def test_has_aux_and_output_messages_describe_values_not_classes() -> None:
    with pytest.raises(TypeError, match="got a traced scalar") as err:
        rulekit.value_and_grad(lambda x: np.sum(x), has_aux=True)(np.ones(3))
    assert "rulekit._engine" not in str(err.value) and "Traced(" not in str(err.value)
    with pytest.raises(TypeError, match=r"got a traced array of shape \(3,\)"):
        rulekit.grad(lambda x: x * 2)(np.ones(3))


@pytest.mark.parametrize("argnums", [np.int64(0), np.int32(-2), (np.int64(0), 1)])
def test_numpy_integer_argnums_are_ints(argnums: Any) -> None:
    _, g = rulekit.value_and_grad(lambda x, y: np.sum(x * y), argnums=argnums)(
        np.ones(2), np.full(2, 3.0)
    )
    if isinstance(argnums, tuple):
        np.testing.assert_array_equal(g[0], [3.0, 3.0])
        np.testing.assert_array_equal(g[1], [1.0, 1.0])
    else:
        np.testing.assert_array_equal(g, [3.0, 3.0])


@pytest.mark.parametrize("argnums", [True, np.bool_(False), 0.0, "0"])
def test_non_integer_argnums_are_refused(argnums: Any) -> None:
    with pytest.raises(TypeError, match="argnums"):
        rulekit.value_and_grad(lambda x: np.sum(x), argnums=argnums)(np.ones(2))


# -- refusals that a library catches are not lost ---------------------------------------------


def test_a_refusal_hidden_by_scipy_is_reported() -> None:
    def f(x: Any) -> Any:
        return np.sum(scipy.optimize.root(lambda z: z**3 - x, np.ones(3)).x)

    x = np.full(3, 2.0)
    with pytest.raises(rulekit.TracingError, match="__array__") as err:
        rulekit.grad(f)(x)
    assert "not a proper array of floats" in str(err.value)
    np.testing.assert_array_equal(x, np.full(3, 2.0))


def test_a_refusal_swallowed_by_user_code_is_reported() -> None:
    def f(x: Any) -> Any:
        try:
            scale = float(np.sum(x))  # refused; the except branch takes another route
        except Exception:
            scale = 1.0
        return np.sum(x) * scale

    vg = rulekit.value_and_grad(f)
    for _ in range(2):  # and the object stays usable
        with pytest.raises(rulekit.TracingError, match="caught there"):
            vg(np.ones(3))


@pytest.mark.parametrize("layout", ["C", "F", "negative", "strided"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_an_array_raised_to_a_traced_power(layout: str, dtype: Any) -> None:
    """`plain ** traced`: numpy < 2.3's ndarray power asks the exponent for `__index__` (its
    integer fast path) and, refused, calls np.power, which reaches the rule: no refusal is
    reported for that probe, in the reverse engine, under jvp and nested, on every call.
    (d/dx Σ aˣ = aˣ·log a.)"""
    from testutils._layouts import relayout

    base = relayout(np.linspace(0.5, 2.0, 6).reshape(2, 3).astype(dtype), layout)
    x = relayout(np.linspace(-1.0, 1.0, 6).reshape(2, 3).astype(dtype), layout)

    def f(x: Any) -> Any:
        return np.sum((base**x + np.array(1.5, dtype) ** x).real)

    want = np.conj(base**x * np.log(base) + 1.5**x * np.log(dtype(1.5)))
    tol = 1e-5 if dtype is np.float32 else 1e-12
    vg = rulekit.value_and_grad(f)
    for _ in range(2):
        np.testing.assert_allclose(vg(x)[1], want, rtol=tol)
    _, t = rulekit.jvp(f, (x,), (np.ones_like(x),))
    np.testing.assert_allclose(t, np.sum(want).real, rtol=tol)
    for mode in ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward"):
        h = rulekit.hessian(f, mode=mode)(x)
        d2 = (base**x * np.log(base) ** 2 + 1.5**x * np.log(dtype(1.5)) ** 2).real
        np.testing.assert_allclose(h, np.diag(d2.ravel()).reshape(2, 3, 2, 3), rtol=tol,
                                   atol=tol)  # fmt: skip


def test_a_traced_index_swallowed_by_user_code_is_still_reported() -> None:
    """Only numpy's probe of a `**` exponent is exempt: `operator.index(x)` caught by the
    traced function stays a reported refusal."""
    import operator

    def f(x: Any) -> Any:
        try:
            n = operator.index(np.sum(x))
        except Exception:
            n = 2
        return np.sum(x) * n

    with pytest.raises(rulekit.TracingError, match="caught there"):
        rulekit.grad(f)(np.ones(3))


# -- steady state: nothing allocated beyond the results ----------------------------------------


@pytest.mark.parametrize("layout", ["C", "F"])
def test_a_program_of_stateful_rules_allocates_only_its_results(
    layout: str, rng: np.random.Generator
) -> None:
    from testutils import count_allocations

    a = np.asarray(rng.normal(size=(6, 5)), order=layout)  # type: ignore[call-overload]
    b = rng.normal(size=(5, 4))

    def f(a: Any) -> Any:
        y = rules.blas.dgemm(1.0, a, b)
        return np.sum(np.multiply(np.tanh(y.T), 2.0))

    for copy_, limit in ((False, 0), (True, a.nbytes)):  # copy=True: the gradient it returns
        vg = rulekit.value_and_grad(f, copy=copy_)
        for _ in range(3):
            vg(a)
        n = count_allocations(vg, a)
        assert n.bytes <= limit and n.count <= (0 if limit == 0 else 1), (copy_, str(n))
