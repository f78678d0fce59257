"""rulekit.primitive (rulekit/_engine/_primitive.py): direct calls, metadata, rules for it."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

import rulekit
from rulekit import Array, CoDual, NoFData, NoRData, Primitive, primitive, registry, zero_codual
from rulekit._engine._state import trace_state
from rulekit._engine._tape import Tape
from rulekit._engine._traced import TracedScalar

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


def test_plain_calls_go_straight_to_the_function() -> None:
    x = np.arange(3.0)
    np.testing.assert_array_equal(cube(x, scale=2.0), 2 * x**3)  # no trace running
    assert cube(2.0) == 8.0
    seen: list[Any] = []

    def f(x: Any) -> Any:
        seen.append(cube(2.0))  # inside a trace, but no argument is traced
        return np.sum(x)

    rulekit.grad(f)(np.ones(2))
    assert seen == [8.0]


class _SpyTape(Tape):
    """A tape that only notes the calls recorded on it."""

    def __init__(self) -> None:
        super().__init__([])
        self.calls: list[Any] = []

    def call(self, f: Any, args: Any, kwargs: Any, fallback: Any = None) -> Any:
        self.calls.append((f, args, kwargs))
        return "recorded"


def test_traced_calls_are_recorded_on_the_tape_of_their_argument(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(trace_state, "active", 1)
    tape = _SpyTape()
    t = TracedScalar(CoDual(2.0, NoFData()), tape, tape.new_slot(), True)
    assert cube(t, scale=3.0) == "recorded"
    assert cube([1.0, t]) == "recorded"  # (inside a list too)
    assert tape.calls == [(cube, (t,), {"scale": 3.0}), (cube, ([1.0, t],), {})]


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
