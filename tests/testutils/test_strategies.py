"""`testutils.strategies`: strategies from type patterns, and the one-line fuzzer."""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import pytest
from hypothesis import given, settings

import rulekit
from rulekit import Array, CoDual, NoRData, Vararg, zero_fdata
from testutils import RuleCheckError, strategies

FAST = settings(max_examples=30, deadline=None, derandomize=True, database=None)


@FAST
@given(a=strategies.arrays(np.float32, ndim=2, elements=(-1.0, 1.0)))
def test_arrays_have_the_dtype_ndim_and_bounds(a: np.ndarray) -> None:
    assert a.dtype == np.float32 and a.ndim == 2
    assert np.all(np.abs(a) <= 1.0) and np.all(np.isfinite(a))


@FAST
@given(args=strategies.args_for(np.add, Array[np.floating, 2], Array[np.floating, 2], float))
def test_args_share_a_side_length_and_match_their_patterns(args: tuple[Any, ...]) -> None:
    a, b, s = args
    assert a.dtype.kind == "f" and a.ndim == 2 and b.ndim == 2 and isinstance(s, float)
    sides = {n for n in (*a.shape, *b.shape) if n != 1}
    assert len(sides) <= 1  # every axis is the shared side or a broadcast 1
    np.broadcast_shapes(a.shape, b.shape)


@FAST
@given(args=strategies.args_for(np.add, Array[np.inexact], Vararg[Union[float, int]]))
def test_unions_and_varargs(args: tuple[Any, ...]) -> None:
    assert isinstance(args[0], np.ndarray) and len(args) <= 3
    assert all(isinstance(v, (float, int)) for v in args[1:])


def test_patterns_that_cannot_be_generated_say_so() -> None:
    with pytest.raises(strategies.Unsupported, match="examples"):
        strategies.args_for(np.add, Array[np.float64], Any)


@rulekit.primitive
def cube(x: np.ndarray) -> Any:
    return x**3


def _cube_rule(f: CoDual, x: CoDual) -> Any:
    """y = x³ ⇒ x̄ += 3x²·ȳ."""
    y = CoDual(x.x**3, zero_fdata(x.x**3))

    def pullback(dy: Any) -> tuple[Any, ...]:
        g = y.dx if isinstance(y.dx, np.ndarray) else dy
        if x.dx is not None:
            x.dx += 3 * x.x**2 * g
        return NoRData(), NoRData()

    return y, pullback


def test_fuzz_rule_checks_every_registration_of_a_function() -> None:
    reg = rulekit.registry.add("rrule", cube, (Array[np.floating],), _cube_rule)
    try:
        strategies.fuzz_rule(cube, max_examples=15)()
    finally:
        rulekit.registry.remove(reg)


def test_fuzz_rule_finds_a_broken_rule() -> None:
    def broken(f: CoDual, x: CoDual) -> Any:
        y, pb = _cube_rule(f, x)

        def pullback(dy: Any) -> tuple[Any, ...]:
            if x.dx is not None:
                x.dx += np.where(np.abs(x.x) > 1.5, 1.0, 0.0)  # wrong only for |x| > 1.5
            return pb(dy)

        return y, pullback

    test = strategies.fuzz_rule(cube, Array[np.float64, 1], rule=broken, max_examples=50)
    with pytest.raises(RuleCheckError, match="correctness"):
        test()
