"""np.column_stack of one array (the sequence of its slices) and np.real_if_close of traced real
and complex arrays (issue 14), against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads

import rules  # noqa: F401  (registers every bundled rule)


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 3, 2)])
def test_column_stack_of_one_array(shape: tuple[int, ...], rng: np.random.Generator) -> None:
    x = rng.normal(size=shape)
    w = rng.normal(size=np.column_stack(list(x)).shape)  # every element weighted differently
    check_grads(lambda x: np.sum(np.sin(np.column_stack(x)) * w), x, layouts=EVERY_LAYOUT)


def test_column_stack_of_one_complex_array(rng: np.random.Generator) -> None:
    z = rng.normal(size=(3, 2)) + 1j * rng.normal(size=(3, 2))
    check_grads(lambda z: np.sum(np.abs(np.column_stack(z) - 0.5j) ** 2), z)


def test_real_if_close_of_a_real_array(rng: np.random.Generator) -> None:
    check_grads(lambda x: np.sum(np.real_if_close(x) ** 3), rng.normal(size=(2, 3)))


def test_real_if_close_of_a_complex_array_with_negligible_imaginary_parts(
    rng: np.random.Generator,
) -> None:
    x = rng.normal(size=4)
    assert np.isrealobj(np.real_if_close(x + 0j))
    check_grads(lambda x: np.sum(np.real_if_close(x * (1 + 0j)) ** 2), x)


def test_real_if_close_of_a_complex_array_kept_complex(rng: np.random.Generator) -> None:
    z = rng.normal(size=4) + 1j * rng.normal(size=4)
    assert np.iscomplexobj(np.real_if_close(z))
    check_grads(lambda z: np.sum(np.abs(np.real_if_close(z)) ** 2 * np.arange(1.0, 5.0)), z)
