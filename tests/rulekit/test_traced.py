"""`Traced`: numpy functions without a rule are traced through their Python implementation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rulekit
from rulekit import MissingRuleError


def test_fallback_that_reenters_itself_reports_the_missing_rule() -> None:
    # Without a rule for np.max, its Python implementation runs on the traced value and calls
    # x.max(), which is np.max again: that must end in MissingRuleError, not RecursionError.
    saved = [r for r in rulekit.registry.entries() if r.f in (np.max, np.amax)]
    for r in saved:
        rulekit.registry.remove(r)
    try:
        with pytest.raises(MissingRuleError, match=r"np\.max"):
            rulekit.grad(lambda x: np.max(x))(np.ones(3))
    finally:
        for r in saved:
            rulekit.registry.add(r.kind, r.f, r.patterns, r.impl, out=r.out,
                                 examples=r.examples, module=r.module)  # fmt: skip


def test_in_place_operators_on_a_traced_scalar_rebind_it() -> None:
    import rules  # noqa: F401  (ufunc rules)

    def f(s: Any) -> Any:
        s += 2.0
        s *= s  # (s + 2)²
        return s

    value, g = rulekit.value_and_grad(f)(np.float64(1.5))
    assert value == pytest.approx(3.5**2) and g == pytest.approx(2 * 3.5)


def test_operators_with_every_operand_type() -> None:
    import rules  # noqa: F401

    c = np.arange(1.0, 4.0)

    def f(x: Any) -> Any:
        y = 2.0 * x + x * c - c / x + (x @ c) * np.float32(0.5) + 3 ** (x / 4) + abs(-x)
        return np.sum(y * (x > 0.5))

    x = np.array([0.3, 1.2, 2.0])
    _, g = rulekit.value_and_grad(f)(x)
    mask = x > 0.5
    elementwise = (2 + c + c / x**2 + np.log(3) / 4 * 3 ** (x / 4) + 1) * mask
    expect = elementwise + 0.5 * c * np.sum(mask)  # the scalar x@c reaches every element
    np.testing.assert_allclose(g, expect, rtol=1e-12)
