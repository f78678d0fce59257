"""Tests for rules.numpy.indexing.writes: np.fill_diagonal, np.put, np.place, np.putmask
writing into a traced destination (the kit runs the rules' examples in test_rule_examples.py).

Engine gradients against finite differences for destinations of every layout (a view
of a larger traced array, transposed, strided; the wrapped diagonals of a tall array
that is not C-contiguous take the fancy-index path), values repeated cyclically, a value
that aliases the destination, and numpy's argument errors raised before anything is
written. Refusals of a traced value written into a plain destination are in
test_messages.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, rand

import rulekit
import rules  # noqa: F401  (registers every bundled rule: np.sum, np.multiply, slicing)

W = rand(99, (12, 12))  # the weights of the losses (a constant)


def _dest(x: Any, layout: str) -> Any:
    """A traced destination made from x: itself, its transpose, or a strided view."""
    return {"C": x, "T": x.T, "S": x[::2, ::2]}[layout]


def _loss(z: Any) -> Any:
    return np.sum(W[: z.shape[0], : z.shape[1]] * z)


@pytest.mark.parametrize("layout", ["C", "T", "S"])
@pytest.mark.parametrize(
    ("shape", "vshape", "wrap"),
    [
        ((4, 4), (), False),  # a scalar
        ((4, 6), (2,), False),  # v repeated cyclically
        ((6, 2), (3,), True),  # wrapped diagonals of a tall array (transposed: not C-contig.)
        ((5, 3), (2, 4), False),  # v longer than the diagonal
    ],
)
def test_fill_diagonal(layout: str, shape: tuple[int, ...], vshape: tuple[int, ...],
                       wrap: bool) -> None:  # fmt: skip
    base = shape[::-1] if layout == "T" else shape
    base = tuple(2 * n for n in base) if layout == "S" else base

    def f(x: Any, v: Any) -> Any:
        z = x * 1.0
        np.fill_diagonal(_dest(z, layout), v, wrap=wrap)
        return _loss(z)

    v = rand(2, vshape) if vshape else 1.5
    check_grads(f, rand(1, base), v)


def test_fill_diagonal_3d_and_value_aliasing_destination() -> None:
    def f3(x: Any, v: Any) -> Any:
        z = x * 1.0
        np.fill_diagonal(z, v)
        return np.sum(np.sin(z))

    check_grads(f3, rand(3, (3, 3, 3)), rand(4, (2,)))

    def alias(x: Any) -> Any:
        z = x * 1.0
        np.fill_diagonal(z, z[0])  # the value is the first row of the destination
        return _loss(z)

    check_grads(alias, rand(5, (3, 3)))


def test_fill_diagonal_argument_errors_write_nothing() -> None:
    def f(x: Any, ndim: int) -> Any:
        z = x * 1.0
        np.fill_diagonal(z if ndim == 3 else z[0, 0], 2.0)
        return np.sum(z)

    with pytest.raises(ValueError, match="at least 2-d"):
        rulekit.grad(lambda x: f(x, 1))(np.ones((2, 2, 3)))
    with pytest.raises(ValueError, match="equal length"):
        rulekit.grad(lambda x: f(x, 3))(np.ones((2, 2, 3)))


@pytest.mark.parametrize("layout", ["C", "T", "S"])
def test_put(layout: str) -> None:
    def f(x: Any, v: Any, s: float) -> Any:
        z = x * 1.0
        y = _dest(z, layout)
        np.put(y, [0, 5, 0, -1], v)  # a repeated index: the last write wins
        np.put(y, [2, 30], s, mode="wrap")  # a traced scalar
        np.put(y, [-4, 99], v[:1], mode="clip")
        return _loss(z)

    base = (8, 6) if layout == "S" else ((3, 4) if layout == "T" else (4, 3))
    check_grads(f, rand(1, base), rand(2, (3,)), 0.7)


def test_put_out_of_bounds_writes_nothing() -> None:
    def f(x: Any) -> Any:
        np.put(x, [1, 9], [7.0, 8.0])
        return np.sum(x)

    x = np.zeros(5)
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        rulekit.grad(f)(x)
    assert not x.any()


@pytest.mark.parametrize("layout", ["C", "T", "S"])
def test_place_and_putmask(layout: str) -> None:
    def f(x: Any, v: Any, u: Any) -> Any:
        z = x * 1.0
        y = _dest(z, layout)
        mask = (np.arange(y.size) % 3 != 1).reshape(y.shape)
        np.place(y, mask, v)  # the k-th True gets v[k % 2]
        np.putmask(y, ~mask, u)  # position p gets u[p % 3]
        return _loss(z)

    base = (8, 6) if layout == "S" else ((3, 4) if layout == "T" else (4, 3))
    check_grads(f, rand(1, base), rand(2, (2,)), rand(3, (3,)))


def test_place_mask_of_another_size_writes_nothing() -> None:
    def f(x: Any) -> Any:
        z = x * 1.0
        np.place(z, np.ones(3, bool), 2.0)
        return np.sum(z)

    with pytest.raises(ValueError, match="same size"):
        rulekit.grad(f)(np.ones(4))


def test_a_list_of_traced_values_is_refused_before_writing() -> None:
    def f(x: Any, s: float) -> Any:
        z = x * 1.0
        np.put(z, [0, 1], [s, 2 * s])
        return np.sum(z)

    with pytest.raises(NotImplementedError, match=r"Fix: pass np\.stack"):
        rulekit.grad(f, argnums=(0, 1))(np.ones(3), 0.5)
