"""`reduce`/`accumulate` of the declared binary ufuncs without rules of their own
(rules/numpy/ufuncs/folds.py): gradients against finite differences in every layout and on
later calls; a method numpy does not compute as the left fold in every layout is refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads

import rulekit
from rules.numpy.ufuncs import folds  # noqa: F401  (registers the rules)

FOLDS = [
    (np.hypot, "reduce"),
    (np.hypot, "accumulate"),
    (np.subtract, "reduce"),
    (np.subtract, "accumulate"),
    (np.divide, "reduce"),
    (np.power, "accumulate"),
    (np.arctan2, "accumulate"),
    (np.logaddexp, "accumulate"),
    (np.float_power, "reduce"),
]


@pytest.mark.parametrize(("uf", "method"), FOLDS, ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_fold_matches_finite_differences(uf: np.ufunc, method: str, axis: int) -> None:
    x = np.random.default_rng(axis + 5).uniform(0.5, 1.5, (4, 3, 2))
    w = np.random.default_rng(7).normal(size=getattr(uf, method)(x, axis).shape)

    def f(x: Any) -> Any:
        return np.sum(w * getattr(uf, method)(x, axis))

    check_grads(f, x, calls=2, layouts=EVERY_LAYOUT)


def test_reduce_keepdims_and_a_single_element() -> None:
    x = np.random.default_rng(1).uniform(0.5, 1.5, (1, 3))
    check_grads(lambda x: np.sum(np.hypot.reduce(x, 0, keepdims=True) ** 2), x)
    check_grads(lambda x: np.sum(np.subtract.reduce(x, 1, keepdims=True)), x + 1.0)


def test_methods_numpy_reorders_are_refused_not_wrong() -> None:
    """numpy's np.power.reduce of an F-ordered array is not the left fold (another value
    than of the C-ordered one): no rule, a clear MissingRuleError."""
    x = np.asfortranarray(np.random.default_rng(2).uniform(0.5, 1.5, (4, 3)))
    assert not np.allclose(np.power.reduce(x, 0), np.power.accumulate(x, 0)[-1])
    with pytest.raises(rulekit.MissingRuleError, match=r"np\.power\.reduce"):
        rulekit.grad(lambda x: np.sum(np.power.reduce(x, 0)))(x)


def test_unsupported_options_are_refused() -> None:
    x = np.ones((3, 2))
    with pytest.raises(NotImplementedError, match="int `axis`"):
        rulekit.grad(lambda x: np.sum(np.hypot.reduce(x, axis=(0, 1))))(x)
    with pytest.raises(NotImplementedError, match="int `axis`"):
        rulekit.grad(lambda x: np.sum(np.hypot.accumulate(x, 0, dtype=np.float64)))(x)
