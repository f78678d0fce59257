"""The helpers for rules that differentiate a function they are given: pytrees,
`lift_closure`, `DerivedRules`, and a third-party fixed-point rule built on them."""

from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand

import rulekit
from rulekit import CoDual, NoRData
from rulekit._derived import DerivedRules
from rulekit._lifting import MAX_ITEMS, Lifted, flatten, lift_closure, unflatten

P = namedtuple("P", ["a", "b"])


# -- pytrees -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tree",
    [1.0, None, (), [np.ones(2), (3, None)], {"a": P(1, [2.0]), "b": {}}, (np.zeros(1),)],
)
def test_flatten_unflatten_round_trip(tree: Any) -> None:
    leaves, td = flatten(tree)
    back = unflatten(td, leaves)
    assert flatten(back)[1] == td and len(flatten(back)[0]) == len(leaves)
    assert type(back) is type(tree)
    hash(td)


def test_unflatten_refuses_extra_leaves() -> None:
    with pytest.raises(ValueError, match="more leaves"):
        unflatten(flatten((1, 2))[1], [1, 2, 3])


# -- lift_closure ------------------------------------------------------------------------------


def _factory(W: Any, s: float, n: int) -> Any:
    helper = lambda v: v * s  # noqa: E731
    cfg = {"W": W, "tags": ("x", n)}

    def fn(x: Any, shift: Any = W[0]) -> Any:
        return helper(cfg["W"] @ x) + shift * cfg["tags"][1]

    return fn


def test_lifted_values_and_rebuild() -> None:
    W = rand(0, (3, 3))
    fn = _factory(W, 2.0, 4)
    lifted, values = lift_closure(fn)
    kinds = sorted(type(v).__name__ for v in values)
    assert kinds == ["float", "int", "ndarray", "ndarray"]  # s (helper's), n and W (cfg's), W[0]
    x = rand(1, (3,))
    np.testing.assert_array_equal(lifted.rebuild(values)(x), fn(x))
    other = [v * 2 if isinstance(v, (np.ndarray, float)) else v for v in values]
    np.testing.assert_allclose(lifted.rebuild(other)(x), _factory(2 * W, 4.0, 4)(x))
    assert lifted.rebuild(values) is not fn and lifted.fn is fn


def test_keys_equal_for_closures_of_the_same_code_and_differ_otherwise() -> None:
    a, _ = lift_closure(_factory(rand(0, (3, 3)), 2.0, 4))
    b, _ = lift_closure(_factory(rand(1, (3, 3)), 5.0, 7))
    c, _ = lift_closure(lambda x: x)
    assert a.key == b.key and hash(a.key) == hash(b.key)
    assert a.key != c.key
    obj1, obj2 = object(), object()
    k1, _ = lift_closure(functools.partial(lambda o, x: x, obj1))
    k2, _ = lift_closure(functools.partial(lambda o, x: x, obj2))
    assert k1.key != k2.key  # (other captured objects: by identity)


def test_partial_kwdefaults_and_nested_functions_are_lifted() -> None:
    W = rand(0, (2, 2))

    def g(x: Any, *, scale: Any = W) -> Any:
        return scale @ x

    fn = functools.partial(g, scale=W * 3)
    lifted, values = lift_closure(fn)
    assert len(values) == 2  # partial's keyword and g's keyword default
    x = rand(1, (2,))
    np.testing.assert_allclose(lifted.rebuild([v + 1 for v in values])(x), (W * 3 + 1) @ x)


def test_cells_a_function_assigns_stay_the_callers() -> None:
    count = 0

    def fn(x: Any) -> Any:
        nonlocal count
        count += 1
        return x

    lifted, values = lift_closure(fn)
    assert values == ()
    lifted.rebuild(values)(1.0)
    assert count == 1


def test_large_containers_cycles_and_objects_are_kept_as_they_are() -> None:
    big = [1.0] * (MAX_ITEMS + 1)

    def rec(x: Any) -> Any:
        return rec(x - 1) if x > 0 else len(big)

    lifted, values = lift_closure(rec)
    assert values == () and lifted.rebuild(()) is rec and rec(2) == MAX_ITEMS + 1
    assert isinstance(lifted, Lifted) and "rec" in repr(lifted)


# -- DerivedRules -------------------------------------------------------------------------------


def test_derived_rules_pull_back_to_args_and_consts_and_are_cached() -> None:
    W, x = rand(0, (3, 3)), rand(1, (3,))
    s = 0.7
    lifted, values = lift_closure(lambda v, t: np.sin(W @ v) * s * t)
    rules = DerivedRules(maxsize=2)
    dW, dx = np.zeros_like(W), np.zeros_like(x)
    consts = [CoDual(W, dW) if isinstance(v, np.ndarray) else CoDual(v, rulekit.NoFData())
              for v in values]  # fmt: skip
    y, pb = rules(lifted, CoDual(x, dx), CoDual(2.0, rulekit.NoFData()), consts=consts)
    np.testing.assert_allclose(y.x, np.sin(W @ x) * s * 2.0)
    ybar = rand(2, (3,))
    r = pb(ybar)  # (an array cotangent, added to the output's fdata)
    c = np.cos(W @ x) * ybar * s * 2.0
    np.testing.assert_allclose(dx, W.T @ c)
    np.testing.assert_allclose(dW, np.outer(c, x))
    assert isinstance(r[0], NoRData)
    assert r[1] == pytest.approx(np.sum(np.sin(W @ x) * s * ybar))  # t̄
    assert isinstance(r[2], NoRData)  # W̄: in its fdata
    assert r[3] == pytest.approx(np.sum(np.sin(W @ x) * 2.0 * ybar))  # s̄ (a lifted scalar)
    (rule1,) = [e[0] for e in rules._cache.values()]
    rules(lifted, CoDual(x, dx), CoDual(3.0, rulekit.NoFData()), consts=consts)[1](NoRData())
    assert [e[0] for e in rules._cache.values()] == [rule1]  # same signature: same rule
    rules(lifted, CoDual(x, None), CoDual(3.0, rulekit.NoFData()), consts=consts)
    rules(lifted, CoDual(x.astype(np.float32), None), CoDual(3.0, rulekit.NoFData()), consts=consts)
    assert len(rules._cache) == 2  # (bounded: the oldest was dropped)


# -- a third-party rule: a fixed point, differentiated by the implicit-function theorem -------


def _iterate(f: Any, x: Any, tol: float = 1e-14, maxiter: int = 2000) -> Any:
    for _ in range(maxiter):
        x_new = f(x)
        if np.max(np.abs(x_new - x)) <= tol * (1.0 + np.max(np.abs(x_new))):
            return x_new
        x = x_new
    raise RuntimeError("fixed_point: no convergence")


def _fixed_point(lifted: Lifted, x0: Any, *consts: Any) -> Any:
    return _iterate(lifted.rebuild(consts), x0)


fixed_point_p = rulekit.primitive(_fixed_point)
TRACED_ACTIVITIES: list[tuple[bool, ...]] = []


def fixed_point(f: Any, x0: Any) -> Any:
    lifted, consts = lift_closure(f, "fixed_point's f")
    return fixed_point_p(lifted, x0, *consts)


@rulekit.build_primitive_rrule.register(
    fixed_point_p, Lifted, rulekit.Array[np.inexact], rulekit.Vararg[Any]
)
def _build(sig: Any) -> Any:
    rules = DerivedRules()

    def rule(fp: CoDual, lifted: CoDual, x0: CoDual, *consts: CoDual) -> Any:
        """x* = f(x*, θ):  w = x̄* + (∂f/∂x)ᵀ w,  θ̄ += (∂f/∂θ)ᵀ w,  x̄₀ = 0."""
        x = _iterate(lifted.x.rebuild([c.x for c in consts]), x0.x)
        y = CoDual(x, np.zeros_like(x))

        def pullback(dy: Any) -> tuple[Any, ...]:
            plain = [CoDual(c.x, None) for c in consts]
            w = y.dx.copy()
            for _ in range(2000):
                jtw = np.zeros_like(x)
                rules(lifted.x, CoDual(x, jtw), consts=plain)[1](w)
                w_new = y.dx + jtw
                done = np.max(np.abs(w_new - w)) <= 1e-14 * (1.0 + np.max(np.abs(w_new)))
                w = w_new
                if done:
                    break
            r = rules(lifted.x, CoDual(x, None), consts=consts)[1](w)
            return (NoRData(), NoRData(), NoRData(), *r[1:])

        return y, pullback

    return rule


def _loss(A: Any, b: Any, s: float) -> Any:
    x = fixed_point(lambda x: s * np.tanh(A @ x) + b, np.zeros(A.shape[0]))
    return np.sum(x**2) + np.sum(x)


def _loss_unrolled(A: Any, b: Any, s: float) -> Any:
    x = np.zeros(A.shape[0])
    for _ in range(300):
        x = s * np.tanh(A @ x) + b
    return np.sum(x**2) + np.sum(x)


def test_fixed_point_rule_against_the_unrolled_iteration_and_finite_differences() -> None:
    args = rand(0, (4, 4)) * 0.4, rand(1, (4,)), 0.6
    got = rulekit.value_and_grad(_loss, argnums=(0, 1, 2))(*args)
    want = rulekit.value_and_grad(_loss_unrolled, argnums=(0, 1, 2))(*args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    for g, w in zip(got[1], want[1], strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
    check_grads(_loss, *args, layouts=EVERY_LAYOUT, calls=2)


def test_fixed_point_rule_is_one_call_and_traces_f_once_per_activity() -> None:
    vg = rulekit.value_and_grad(_loss, argnums=(0, 1))
    args = rand(0, (4, 4)) * 0.4, rand(1, (4,)), 0.6
    for _ in range(3):
        vg(*args)
    (site,) = [s for s in vg.tracer.sites if s.key[0] is fixed_point_p]
    rules = site.rule.__closure__  # (the factory's rule: its DerivedRules cell)
    cache = next(c.cell_contents for c in rules if isinstance(c.cell_contents, DerivedRules))
    assert len(cache._cache) == 2  # x active (the w iteration), θ active (the last pullback)
    assert all(getattr(r.tracer, "traces", 1) == 1 for r, _ in cache._cache.values())
