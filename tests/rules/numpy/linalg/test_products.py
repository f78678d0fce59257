"""Tests for rules.numpy.linalg.products: multi_dot and matrix_power, through
`testutils.check_rule`, plus numpy's own product chain and the n = 1 alias."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.linalg.products  # noqa: F401  (registers np.linalg.multi_dot, matrix_power)
from rulekit import zero_codual
from testutils import check_rule

FAST = settings(max_examples=25, deadline=None)
seeds = st.integers(0, 2**16)


@FAST
@given(st.lists(st.integers(1, 4), min_size=3, max_size=5), st.booleans(), st.booleans(), seeds)
def test_multi_dot(dims: list[int], vec_first: bool, vec_last: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    mats = [rng.normal(size=(dims[i], dims[i + 1])) for i in range(len(dims) - 1)]
    if vec_first:
        mats[0] = rng.normal(size=dims[1])
    if vec_last and len(mats) > 1:
        mats[-1] = rng.normal(size=dims[-2])
    check_rule(np.linalg.multi_dot, mats)


@FAST
@given(st.integers(1, 4), st.sampled_from([(), (2,)]), st.integers(-4, 9), seeds)
def test_matrix_power(n: int, batch: tuple[int, ...], p: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(*batch, n, n)) / (2 * n) + np.eye(n)
    y, _ = rulekit.rrule(zero_codual(np.linalg.matrix_power), zero_codual(a), zero_codual(p))
    assert np.array_equal(y.x, np.linalg.matrix_power(a, p))  # numpy's own product chain
    check_rule(np.linalg.matrix_power, a, p)


def test_matrix_power_one_returns_the_input() -> None:
    x = zero_codual(np.eye(2))
    y, _ = rulekit.rrule(zero_codual(np.linalg.matrix_power), x, zero_codual(1))
    assert y.x is x.x and y.dx is x.dx
