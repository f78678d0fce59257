"""Tests for rules.numpy.assembly: meshgrid, block, insert, delete, apply_along_axis.

Gradients against finite differences (every layout, later calls of one
`value_and_grad`), numpy's values and errors on the traced path, the positions
of insert/delete for indices, slices, booleans and repeats, and the closure
limitation of apply_along_axis.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads, rand
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.assembly  # (registers meshgrid, block, insert, delete, apply_along_axis)
import rules.numpy.selecting  # noqa: F401  (registers np.take, np.sort, ... used by the assembly rules)

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)


def _weighted(parts: Any) -> Any:
    parts = parts if isinstance(parts, (list, tuple)) else [parts]
    return sum(np.sum(np.sin(p + k) * (k + 1)) for k, p in enumerate(parts))


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
@pytest.mark.parametrize("kw", [{}, {"indexing": "ij"}, {"sparse": True}, {"copy": False},
                                {"copy": False, "sparse": True}])  # fmt: skip
def test_meshgrid(layout: str, kw: Any) -> None:
    a, b, c = rand(1, (3,)), rand(2, (4,)), rand(3, (2,))
    check_grads(lambda a, b: _weighted(np.meshgrid(a, b, **kw)), a, b, layouts=(layout,), calls=2)
    check_grads(lambda a, c: _weighted(np.meshgrid(a, b, c, **kw)), a, c)
    check_grads(lambda a: _weighted(np.meshgrid(a, **kw)), a.astype(np.float32))


def test_meshgrid_types_match_numpy() -> None:
    a, b = rand(4, (3,)), rand(5, (2,))
    meshgrid: Any = np.meshgrid
    for kw in ({}, {"sparse": True}, {"copy": False}, {"copy": False, "sparse": True}):
        seen: list[Any] = []

        def f(a: Any, kw: Any = kw, seen: list[Any] = seen) -> Any:
            out = meshgrid(a, b, **kw)
            seen.append(type(out))
            return _weighted(out)

        rulekit.value_and_grad(f)(a)
        assert seen[0] is type(meshgrid(a, b, **kw))


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_block(layout: str) -> None:
    A, B = rand(6, (2, 2)), rand(7, (2, 3))
    check_grads(lambda A, B: _weighted(np.block([A, B])), A, B, layouts=(layout,), calls=2)
    check_grads(lambda A: _weighted(np.block([A, rand(9, (2, 1))])), A)
    check_grads(lambda v: _weighted(np.block([v, 2.0])), rand(11, (3,), np.float32))
    check_grads(lambda v: _weighted(np.block([v, v[1:]])), rand(10, (3,)))


def test_block_of_nested_lists() -> None:
    """Traced arrays inside inner lists: each gets its block's cotangent (the engine keeps
    the fdata of a list nested in a list)."""
    A, B, C = rand(6, (2, 2)), rand(7, (2, 3)), rand(8, (1, 5))
    check_grads(lambda A: _weighted(np.block([[A, B], [C]])), A, calls=2)
    check_grads(lambda A, C: _weighted(np.block([[A, 2 * A], [C[:, :4]]])), A, C, calls=2)


def test_block_errors_are_numpy_s() -> None:
    a = rand(12, (2,))
    with pytest.raises(TypeError, match="tuple"):
        rulekit.grad(lambda a: np.sum(np.block([a, (a, a)])))(a)


@SETTINGS
@given(st.integers(0, 99), st.data())
def test_insert_delete_random(seed: int, data: Any) -> None:
    x = rand(seed, (3, 4))
    axis = data.draw(st.sampled_from([None, 0, 1, -1]))
    n = x.size if axis is None else x.shape[axis]
    obj = data.draw(st.one_of(
        st.integers(-n, n),
        st.lists(st.integers(0, n), min_size=1, max_size=3),
        st.just(slice(0, n, 2)),
    ))  # fmt: skip
    y = np.insert(x, obj, 7.5, axis=axis)
    check_grads(lambda x: _weighted(np.insert(x, obj, 7.5, axis=axis)), x)
    vshape = np.shape(np.insert(np.zeros(x.shape), obj, 0.0, axis=axis))
    del y, vshape
    check_grads(lambda v: _weighted(np.insert(x, obj, v, axis=axis)), 0.25)  # a traced number
    dobj = data.draw(st.one_of(
        st.integers(-n, n - 1),
        st.lists(st.integers(0, n - 1), max_size=3),
        st.just(slice(1, None, 2)),
    ))  # fmt: skip
    check_grads(lambda x: _weighted(np.delete(x, dobj, axis=axis)), x)


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_insert_delete_layouts_values_and_warm(layout: str) -> None:
    x, v = rand(13, (3, 4)), rand(14, (3,))
    check_grads(lambda x, v: _weighted(np.insert(x, 1, v, axis=1)), x, v,
                layouts=(layout,), calls=2)  # fmt: skip
    check_grads(lambda x, v: _weighted(np.insert(x, [0, 2, 2], v, axis=1)), x, v)
    check_grads(lambda v: _weighted(np.insert(x, 2, v[:1], axis=0)), v)  # broadcast value
    check_grads(lambda x: _weighted(np.insert(x, -1, 2.0)), x.astype(np.float32))
    check_grads(lambda x: _weighted(np.insert(x[0], [1, 3], [np.sum(x), 0.5])), x)  # a list
    mask = np.array([True, False, True, False])
    check_grads(lambda x: _weighted(np.delete(x, mask, axis=1)), x, layouts=(layout,), calls=2)


@pytest.mark.parametrize("layout", EVERY_LAYOUT)
def test_apply_along_axis(layout: str) -> None:
    x, w = rand(15, (3, 4)), rand(16, (2,))
    check_grads(lambda x: _weighted(np.apply_along_axis(np.sum, 0, x)), x,
                layouts=(layout,), calls=2)  # fmt: skip
    check_grads(lambda x: _weighted(np.apply_along_axis(np.sort, 1, x)), x)
    check_grads(lambda x, w: _weighted(np.apply_along_axis(np.outer, -1, x, w)), x, w)
    check_grads(lambda x: _weighted(np.apply_along_axis(lambda r: r[1:] * r[:-1], 0, x)), x)
    assert np.apply_along_axis(np.outer, 1, x, w).shape == (3, 4, 2)


def test_apply_along_axis_closure_over_a_traced_value_raises() -> None:
    x = rand(17, (3, 4))
    with pytest.raises(rulekit.TracingError):
        rulekit.grad(lambda x, s: np.sum(np.apply_along_axis(lambda r: r * s, 1, x)), (0, 1))(
            x, 2.0
        )
