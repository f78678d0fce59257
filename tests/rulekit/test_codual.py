"""CoDual and zero_codual (rulekit/_codual.py)."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import numpy as np
import pytest

from rulekit import CoDual, NoFData, StructTangent, register_tangent, zero_codual


@register_tangent
@dataclasses.dataclass
class Affine:
    weight: np.ndarray
    bias: float


def test_codual_without_dx_is_inactive() -> None:
    x = np.ones(3)
    c = CoDual(x)
    assert c.x is x and c.dx is None and not c.active


def test_codual_with_dx_is_active() -> None:
    x, dx = np.ones(3), np.zeros(3)
    c = CoDual(x, dx)
    assert c.x is x and c.dx is dx and c.active
    # Any fdata, even "nothing", marks the value active: only None means constant.
    assert CoDual(1.0, NoFData()).active


def test_codual_unpacks_and_reprs() -> None:
    x, dx = np.ones(2), np.zeros(2)
    px, pdx = CoDual(x, dx)
    assert px is x and pdx is dx
    assert repr(CoDual(1.5, None)) == "CoDual(1.5, None)"


def test_codual_is_a_two_slot_object() -> None:
    c = CoDual(1.0)
    assert not hasattr(c, "__dict__")
    with pytest.raises(AttributeError):
        c.other = 1  # type: ignore[attr-defined]
    c.dx = NoFData()  # the slots themselves are writable (the engine may set dx)
    assert c.active
    # generic in its primal type, for annotations
    assert typing.get_origin(CoDual[np.ndarray]) is CoDual
    assert typing.get_args(CoDual[np.ndarray]) == (np.ndarray,)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_zero_codual_of_an_array_has_fresh_zero_fdata(dtype: Any, shape: tuple[int, ...]) -> None:
    x = np.ones(shape, dtype)
    c = zero_codual(x)
    assert c.x is x and c.active
    assert isinstance(c.dx, np.ndarray) and c.dx.shape == shape and c.dx.dtype == dtype
    assert not c.dx.any() and not np.shares_memory(c.dx, x)
    assert zero_codual(x).dx is not c.dx  # fresh every time


@pytest.mark.parametrize("x", [1.5, 2j, np.float32(1), 3, "s", None, np.arange(3), np.sin])
def test_zero_codual_of_values_without_fdata(x: Any) -> None:
    c = zero_codual(x)
    assert c.x is x and c.dx is NoFData() and c.active


def test_zero_codual_of_containers() -> None:
    a = np.ones(2)
    assert zero_codual((1.0, 2.0)).dx is NoFData()
    t = zero_codual((1.0, a)).dx
    assert t[0] is NoFData() and t[1].shape == (2,)
    lst = zero_codual([1.0, a]).dx
    assert lst[0] == 0.0 and lst[1].shape == (2,)  # lists carry full element tangents
    assert set(zero_codual({"a": a}).dx) == {"a"}
    s = zero_codual(Affine(a, 1.0)).dx
    assert isinstance(s, StructTangent) and s.weight.shape == (2,)
