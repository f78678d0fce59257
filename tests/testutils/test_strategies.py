"""`testutils.strategies`: strategies from type patterns, and the one-line fuzzer."""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis.errors import NoSuchExample

import rulekit
from rulekit import Array, CoDual, NoFData, NoRData, Vararg, zero_fdata
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


# -- values a rule meets in practice; edge cases only on request (issue #12) ------------------


def _practical(a: Any) -> bool:
    parts = np.concatenate([np.ravel(np.real(a)), np.ravel(np.imag(a))]).astype(np.float64)
    mag = np.abs(parts)
    return bool(np.all((mag == 0) | ((mag >= 1e-3 * (1 - 1e-3)) & (mag <= 1e3))))


@FAST
@given(
    args=strategies.args_for(
        np.add, Array[np.inexact], Array[np.float32], float, np.complex128, max_side=5
    )
)
def test_generated_values_are_zero_or_of_a_practical_magnitude(args: tuple[Any, ...]) -> None:
    """No -3.6e-280, no subnormals: |x| in [1e-3, 1e3] or exactly 0, either sign."""
    for a in args:
        assert np.all(np.isfinite(a)) and _practical(a), a


def test_generated_values_span_the_magnitudes_and_both_signs() -> None:
    seen: list[np.ndarray] = []

    @settings(max_examples=60, deadline=None, derandomize=True, database=None)
    @given(a=strategies.arrays(np.float64, ndim=1, side=4))
    def collect(a: np.ndarray) -> None:
        seen.append(a)

    collect()
    values = np.concatenate(seen)
    mag = np.abs(values[values != 0])
    assert (values == 0).any() and (values < 0).any() and (values > 0).any()
    assert mag.min() < 1e-2 and mag.max() > 1e2


def test_edge_cases_are_an_explicit_opt_in() -> None:
    def edgy(a: np.ndarray) -> bool:
        with np.errstate(invalid="ignore"):
            tiny = (a != 0) & (np.abs(a) < np.finfo(a.dtype).tiny)
        return bool(tiny.any() or np.isinf(a).any() or np.isnan(a).any())

    strategy = strategies.arrays(np.float32, ndim=1, side=4, edge_cases=True)
    found = find(strategy, edgy, settings=settings(database=None, derandomize=True))
    assert edgy(found)
    with pytest.raises(NoSuchExample):
        find(strategies.arrays(np.float32, ndim=1, side=4), edgy,
             settings=settings(database=None, derandomize=True, max_examples=200))  # fmt: skip
    values = [find(strategies.edge_values(np.float64), lambda v, t=t: t(v)) for t in (
        lambda v: 0 < abs(v) < 2.3e-308, np.isinf, np.isnan)]  # fmt: skip
    assert len(values) == 3


def test_fuzz_rule_shows_every_distinct_failure() -> None:
    """Two defects on different inputs: each is shown with its check, argument and input."""

    def broken(f: CoDual, x: CoDual) -> Any:
        y, pb = _cube_rule(f, x)
        if x.x.ndim == 0:  # defect 1: a 0-d input gives a float32 output
            return CoDual(np.float32(y.x), NoFData()), pb

        def pullback(dy: Any) -> tuple[Any, ...]:
            if x.dx is not None and x.x.ndim == 2:
                x.dx += 1.0  # defect 2: a wrong cotangent for matrices
            return pb(dy)

        return y, pullback

    test = strategies.fuzz_rule(cube, Array[np.float64], rule=broken, max_examples=60)
    with pytest.raises(RuleCheckError) as info:
        test()
    message = str(info.value)
    assert "hypothesis found 2 distinct failures" in message, message
    assert "[1 of 2]" in message and "[2 of 2]" in message
    assert (
        "interface check failed" in message and "correctness check failed (argument 0)" in message
    )
    assert message.count("\ninput: argument 0:") == 2  # each failure names its input
