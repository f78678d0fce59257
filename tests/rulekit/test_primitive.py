"""rulekit.primitive (rulekit/_primitive.py): direct calls, wrapper metadata, rules for it."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

import rulekit
from rulekit import Array, CoDual, NoFData, NoRData, Primitive, primitive, registry, zero_codual
from rulekit import _primitive as primitive_module

pytestmark = pytest.mark.usefixtures("registrations")  # (tests/conftest.py)


def _cube(x: Any, *, scale: float = 1.0) -> Any:
    """Scaled cube: scale · x³."""
    return scale * x**3


cube = primitive(_cube)


def _cube_rrule(f: CoDual, x: CoDual, *, scale: float = 1.0) -> tuple[CoDual, Any]:
    """y = s·x³  ⇒  x̄ += 3s·x²·ȳ."""
    y = CoDual(_cube(x.x, scale=scale), np.zeros_like(x.x))

    def cube_pullback(dy: Any) -> tuple[Any, Any]:
        if x.dx is not None:
            x.dx += 3 * scale * x.x**2 * y.dx
        return NoRData(), NoRData()

    return y, cube_pullback


def test_plain_calls_go_straight_to_the_function(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(primitive_module.trace_state, "hook", lambda *a: calls.append(a))
    x = np.arange(3.0)
    np.testing.assert_array_equal(cube(x, scale=2.0), 2 * x**3)  # no trace running
    assert cube(2.0) == 8.0
    assert calls == []


def test_traced_calls_go_to_the_engine_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(primitive_module.trace_state, "active", 1)
    monkeypatch.setattr(
        primitive_module.trace_state, "hook", lambda *a: calls.append(a) or "hooked"
    )
    assert cube(2.0, scale=3.0) == "hooked"
    assert calls == [(cube, (2.0,), {"scale": 3.0})]


def test_wrapper_keeps_name_and_docs() -> None:
    assert isinstance(cube, Primitive)
    assert cube.__name__ == "_cube" and cube.__qualname__ == "_cube"
    assert cube.__doc__ == _cube.__doc__ and cube.__module__ == _cube.__module__
    assert cube.__wrapped__ is _cube and cube.fn is _cube
    assert "_cube" in repr(cube)


def test_primitive_is_idempotent_and_checks_its_argument() -> None:
    assert primitive(cube) is cube
    with pytest.raises(TypeError, match="expects a callable"):
        primitive(3)  # type: ignore[arg-type]


def test_primitive_as_a_decorator_and_pickling() -> None:
    @primitive
    def double(x: Any) -> Any:
        return 2 * x

    assert double(3) == 6 and double.__name__ == "double"
    wrapped_np = pickle.loads(pickle.dumps(primitive(np.linalg.norm)))
    assert isinstance(wrapped_np, Primitive) and wrapped_np.fn is np.linalg.norm


def test_rules_registered_for_the_wrapper_are_found() -> None:
    rulekit.rrule.register(cube, Array[np.floating])(_cube_rrule)
    x = np.array([1.0, 2.0])
    assert registry.which(cube, x).impl is _cube_rrule
    assert rulekit.is_primitive(rulekit.signature_of(cube, x))
    assert not rulekit.is_primitive(rulekit.signature_of(_cube, x))  # the wrapper, not fn
    xc = zero_codual(x)
    y, pb = rulekit.rrule(zero_codual(cube), xc, scale=2.0)
    np.testing.assert_array_equal(y.x, 2 * x**3)
    y.dx[:] = 1.0
    assert pb(NoRData()) == (NoRData(), NoRData())
    np.testing.assert_array_equal(xc.dx, 6 * x**2)


def _sum_cubes(x: Any) -> Any:
    return float(np.sum(x**3))


sum_cubes = primitive(_sum_cubes)


def _sum_cubes_rrule(f: CoDual, x: CoDual) -> tuple[CoDual, Any]:
    """y = Σx³ (a scalar)  ⇒  x̄ += 3x²·ȳ, with ȳ the pullback's argument."""

    def sum_cubes_pullback(dy: float) -> tuple[Any, Any]:
        if x.dx is not None:
            x.dx += 3 * x.x**2 * dy
        return NoRData(), NoRData()

    return CoDual(_sum_cubes(x.x), NoFData()), sum_cubes_pullback


def test_the_engine_dispatches_traced_calls_to_the_wrappers_rule() -> None:
    rulekit.rrule.register(cube, Array[np.floating])(_cube_rrule)
    rulekit.rrule.register(sum_cubes, Array[np.floating])(_sum_cubes_rrule)
    x = np.array([0.5, -1.0, 2.0])
    value, g = rulekit.value_and_grad(lambda x: sum_cubes(cube(x, scale=2.0)))(x)
    assert value == pytest.approx(np.sum((2 * x**3) ** 3))
    np.testing.assert_allclose(g, 3 * (2 * x**3) ** 2 * 6 * x**2)


def test_a_traced_call_without_a_rule_names_the_wrapper() -> None:
    with pytest.raises(rulekit.MissingRuleError, match="_sum_cubes"):
        rulekit.grad(sum_cubes)(np.ones(2))
