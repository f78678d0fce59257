"""Reductions of a traced scalar (rules.numpy.reductions.scalar) through the engine."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads

import rules  # noqa: F401  (registers every bundled rule)


@pytest.mark.parametrize("fn", [np.sum, np.mean, np.prod, np.max, np.min, np.nansum])
def test_reducing_a_traced_scalar_is_the_identity(fn: Any) -> None:
    check_grads(lambda x: fn(np.sum(x * x)) * 3.0, np.array([0.5, -1.5, 2.0]))


def test_keepdims_gives_a_zero_d_array_whose_cotangent_flows_back() -> None:
    check_grads(lambda x: np.sum(np.max(np.sum(x), keepdims=True) * x), np.array([0.5, 2.0]))
