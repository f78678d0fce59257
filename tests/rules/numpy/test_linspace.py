"""Tests for rules.numpy.linspace: linspace with traced start/stop.

Hypothesis draws scalar and array endpoints (broadcast against each other),
num, endpoint, retstep, dtype and axis and runs the rule through
`testutils.check_rule`; engine tests differentiate code that builds grids from
traced values. `np.full(shape, v)` and `np.array([v, w])` are not dispatched by
numpy on a traced `v`, so they have no rule: they raise TracingError.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.indexing.subscript
import rules.numpy.linspace
import rules.numpy.reductions.sums  # np.sum
import rules.numpy.ufuncs.binary  # np.multiply and friends
import rules.numpy.ufuncs.unary  # noqa: F401  (registers np.sin)
from testutils import check_rule

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)


def _endpoint(data: Any, seed: int) -> Any:
    kind = data.draw(st.sampled_from(["float", "np", "array", "list", "complex"]))
    if kind == "float":
        return data.draw(st.floats(-3, 3))
    if kind == "np":
        return np.float64(data.draw(st.floats(-3, 3)))
    if kind == "complex":
        return np.complex128(complex(data.draw(st.floats(-3, 3)), 1.0))
    shape = tuple(data.draw(st.lists(st.integers(1, 2), min_size=1, max_size=2)))
    x = rand(seed, shape, data.draw(st.sampled_from([np.float64, np.float32])))
    return [np.float64(v) for v in x.reshape(-1)] if kind == "list" else x


@SETTINGS
@given(st.data(), seeds)
def test_linspace_random(data: Any, seed: int) -> None:
    start, stop = _endpoint(data, seed), _endpoint(data, seed + 1)
    try:
        nd = np.broadcast(np.asarray(start), np.asarray(stop)).ndim
    except ValueError:
        return  # shapes that do not broadcast
    kwargs = {
        "num": data.draw(st.integers(0, 5)),
        "endpoint": data.draw(st.booleans()),
        "retstep": data.draw(st.booleans()),
        "axis": data.draw(st.integers(-nd - 1, nd)),
        "dtype": data.draw(st.sampled_from([None, np.float32, np.complex128])),
    }
    if kwargs["dtype"] is not None and np.iscomplexobj(start) | np.iscomplexobj(stop):
        kwargs["dtype"] = np.complex128
    check_rule(np.linspace, start, stop, kwargs=kwargs)


def test_integer_dtype_output_is_inactive() -> None:
    y, _ = rulekit.rrule(
        rulekit.zero_codual(np.linspace), rulekit.zero_codual(0.0), rulekit.zero_codual(3.7),
        rulekit.CoDual(4), dtype=np.int64,
    )  # fmt: skip
    assert y.dx is None and y.x.dtype == np.int64


# -- through the engine -------------------------------------------------------------------------


def grids(x: Any) -> Any:
    a = np.linspace(x[0], x[1], 7)  # traced scalars
    b = np.linspace(x[:2], 2.0, 3, axis=1)  # a traced array start
    c, step = np.linspace(x[2], x[3] * 2.0, 4, endpoint=False, retstep=True)
    return np.sum(np.sin(a)) + np.sum(b * b) + np.sum(c * c) + step * 5.0


def test_engine_gradients() -> None:
    check_grads(grids, rand(3, (4,)))


@pytest.mark.parametrize(
    "f",
    [lambda x: np.sum(np.full((2,), x[0])), lambda x: np.sum(np.array([x[0], x[1]]))],
    ids=["full", "array"],
)
def test_full_and_array_of_traced_values_raise(f: Any) -> None:
    """numpy converts `v` itself (no __array_function__ dispatch): the engine refuses."""
    with pytest.raises(rulekit.TracingError):
        rulekit.value_and_grad(f)(rand(0, (2,)))
