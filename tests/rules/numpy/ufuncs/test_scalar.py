"""Tests for the scalar ufunc rules of rules.numpy.ufuncs.scalar (unary ufuncs of a real scalar).

`ScalarUnary` is a fast path in front of the plain unary rule of rules.numpy.ufuncs.unary:
its output, cotangent (value and type) and warnings must be the plain rule's,
bit for bit, everywhere — inside the domain it computes them in Python, outside
it (and for non-finite cotangents) it hands the call to the plain rule. The
tests compare the two directly on ordinary and edge inputs, check gradients
with the conformance kit and finite differences, and run `value_and_grad`
through numpy code that ends in scalar arithmetic.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, fd_grad
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.ufuncs.unary  # noqa: F401  (registers the plain unary rules)
from rulekit import CoDual, NoRData, Signature, registry
from rules._support.cotangents import NO_F
from rules.numpy.ufuncs.scalar import SCALAR_UNARY, ScalarUnary
from testutils import check_rule

NAMES = sorted(SCALAR_UNARY)
FAST = settings(max_examples=60, deadline=None, derandomize=True)

#: inputs at and beyond every domain edge of the functions, plus ordinary ones
EDGES = [
    0.0, -0.0, 0.5, -0.5, 1.0, -1.0, math.nextafter(-1.0, 0.0), 2.0, -3.0, 5e-324, -5e-324,
    1e-300, 1e-310, 1e150, -1e150, 1e151, 1e300, 1e301, 1e308, -1e308, 708.9, 709.0, 709.5,
    710.0, 1023.0, 1024.5, -745.2, math.inf, -math.inf, math.nan,
]  # fmt: skip


def _rule(name: str) -> ScalarUnary:
    rule = registry.lookup(Signature(getattr(np, name), (np.float64,))).impl
    assert isinstance(rule, ScalarUnary), name
    return rule


def _run(rule: Any, uf: np.ufunc, x: Any, dy: Any, active: bool = True) -> tuple[Any, ...]:
    """(y, rdata of x, warnings of the forward and the pullback) of `rule` on uf(x)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y, pb = rule(CoDual(uf, NO_F), CoDual(x, NO_F if active else None))
        rdata = pb(dy)
    return y.x, rdata, [(w.category, str(w.message)) for w in caught]


def _identical(a: Any, b: Any) -> bool:
    """Same type and the same value, bit for bit (NaN equals NaN, −0.0 differs from 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (float, np.floating)):
        return bool(np.array_equal(a, b, equal_nan=True) and np.signbit(a) == np.signbit(b))
    return bool(a == b)


def _assert_as_plain(name: str, x: Any, dy: Any, active: bool = True) -> None:
    rule, uf = _rule(name), getattr(np, name)
    fast = _run(rule, uf, x, dy, active)
    plain = _run(rule.fallback, uf, x, dy, active)
    assert _identical(fast[0], plain[0]), (name, x, fast[0], plain[0])
    assert len(fast[1]) == len(plain[1]) == 2 and fast[1][0] == plain[1][0]
    assert _identical(fast[1][1], plain[1][1]), (name, x, dy, fast[1][1], plain[1][1])
    assert fast[2] == plain[2], (name, x, dy, fast[2], plain[2])


# -- the fast path is the plain rule, bit for bit ------------------------------------------


def test_registered_for_float_and_float64_only() -> None:
    for name in NAMES:
        uf = getattr(np, name)
        for t in (float, np.float64):
            assert isinstance(registry.lookup(Signature(uf, (t,))).impl, ScalarUnary)
        for t in (np.float32, complex):
            assert not isinstance(registry.lookup(Signature(uf, (t,))).impl, ScalarUnary)


@pytest.mark.parametrize("name", NAMES)
def test_edges_as_plain_rule(name: str) -> None:
    for x in EDGES:
        for make in (float, np.float64):
            for dy in (np.float64(1.5), np.float64(-1e300), np.float64(0.0), np.float64(np.inf)):
                _assert_as_plain(name, make(x), dy)
    _assert_as_plain(name, np.float64(0.7), np.float64(np.nan))
    _assert_as_plain(name, np.float64(0.7), NoRData())  # nothing flows back
    _assert_as_plain(name, np.float64(0.7), np.float64(2.0), active=False)


@FAST
@given(st.sampled_from(NAMES), st.floats(-20, 20), st.floats(-1e3, 1e3), st.booleans())
def test_random_inputs_as_plain_rule(name: str, x: float, dy: float, numpy_x: bool) -> None:
    _assert_as_plain(name, np.float64(x) if numpy_x else x, np.float64(dy))


def test_outputs_and_types_are_numpys() -> None:
    for name in NAMES:
        uf = getattr(np, name)
        for x in (0.6, np.float64(0.6), -0.6, np.float64(-0.6)):
            if SCALAR_UNARY[name] == "pos" and x < 0:
                continue
            y, (_, dx), _ = _run(_rule(name), uf, x, np.float64(1.0))
            want = uf(x)
            assert type(y) is type(want) is np.float64 and y == want
            assert type(dx) is type(x)


def test_edges_use_the_plain_conventions() -> None:
    rule = _rule("sqrt")
    assert _run(rule, np.sqrt, 0.0, np.float64(1.0))[1][1] == math.inf  # +inf·ȳ
    assert _run(_rule("absolute"), np.absolute, np.float64(-0.0), np.float64(3.0))[1][1] == 0.0
    y, (_, dx), caught = _run(_rule("log"), np.log, np.float64(-1.0), np.float64(1.0))
    assert (
        np.isnan(y)
        and dx == -1.0
        and caught == [(RuntimeWarning, "invalid value encountered in log")]
    )
    y, (_, dx), caught = _run(_rule("exp"), np.exp, 710.0, np.float64(1.0))
    assert y == math.inf and dx == math.inf and len(caught) == 1  # numpy's overflow, once
    _, (_, dx), caught = _run(_rule("exp"), np.exp, 700.0, np.float64(1e300))
    assert dx == math.inf and caught == [(RuntimeWarning, "overflow encountered in multiply")]


# -- gradients -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_conformance_kit(name: str) -> None:
    uf = getattr(np, name)
    x = 0.8 if SCALAR_UNARY[name] == "pos" else -0.8
    check_rule(uf, np.float64(x))
    check_rule(uf, x + 0.35)


@FAST
@given(st.sampled_from(NAMES), st.floats(0.2, 1.2), st.booleans())
def test_finite_differences(name: str, x: float, negative: bool) -> None:
    if negative and SCALAR_UNARY[name] != "pos":
        x = -x
    uf = getattr(np, name)
    _, (_, dx), _ = _run(_rule(name), uf, np.float64(x), np.float64(1.0))
    assert dx == pytest.approx(fd_grad(uf, (x,), 0))


def test_value_and_grad_through_scalar_numpy_code() -> None:
    def f(s: Any) -> Any:
        t = np.tanh(s) * np.exp(-s) + np.log1p(np.square(s)) / np.sqrt(np.abs(s) + 1.0)
        return -np.log(np.cos(t) + 2.0) + np.sin(s) * np.arctan(s) - np.expm1(-np.abs(s))

    for s in (np.float64(0.7), np.float64(-1.3), 0.4):
        g = check_grads(f, s)[0]
        assert type(g) is type(s)
    value, g = rulekit.value_and_grad(lambda s: -np.exp(s))(np.float64(0.5))
    assert type(value) is np.float64 and g == -np.exp(0.5)


def test_scalar_power_overflow_is_inf_as_in_numpy() -> None:
    """x**3 at x = 1e200 overflows to inf (numpy's warning), never Python's OverflowError."""
    with pytest.warns(RuntimeWarning, match="overflow"):
        value, g = rulekit.value_and_grad(lambda x: np.power(x, 3.0))(1e200)
    assert value == np.inf and g == np.inf
