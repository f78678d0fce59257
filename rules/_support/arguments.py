"""Reading a rule's arguments: their primals, their fdata, and whether they are differentiated.

A rule receives its positional arguments as CoDuals and its keyword arguments as
given (a plain value, or a CoDual for a traced keyword array). An argument is
**active** when its adjoint is wanted and exists: it is a CoDual, its `dx` is not
None (the engine passes `dx=None` for an argument that is not differentiated), and
its value is inexact (a float/complex array or scalar, or a list/tuple, whose
fdata holds its elements'). Integer and bool values carry `NoFData()` and are
never active: they get no cotangent.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np

from rulekit import CoDual, NoFData
from rulekit._cotangents import is_active as is_active

__all__ = [
    "array_fdata",
    "as_array",
    "fdata",
    "is_active",
    "is_active_array",
    "is_active_scalar",
    "primal",
    "primals",
    "sequence_fdata",
]

_INEXACT_SCALARS = (float, complex, np.floating, np.complexfloating)


def is_active_array(v: Any) -> TypeGuard[CoDual]:
    """Whether `v` is an active array argument (its fdata a float/complex array)."""
    return isinstance(v, CoDual) and type(v.dx) is np.ndarray and v.dx.dtype.kind in "fc"


def is_active_scalar(v: Any) -> TypeGuard[CoDual]:
    """Whether `v` is an active float/complex scalar argument (its adjoint goes to rdata)."""
    return isinstance(v, CoDual) and v.dx is not None and isinstance(v.x, _INEXACT_SCALARS)


def array_fdata(v: Any) -> np.ndarray | None:
    """The fdata array of an active array argument (to increment in place), else None."""
    return v.dx if is_active_array(v) else None


def primal(v: Any) -> Any:
    """The primal of a CoDual, or the value itself (a keyword argument may be plain)."""
    return v.x if isinstance(v, CoDual) else v


def fdata(v: Any) -> Any:
    """The fdata of a CoDual (None when not differentiated), None for a plain value."""
    return v.dx if isinstance(v, CoDual) else None


def as_array(v: Any) -> np.ndarray:
    """`np.asarray` of the primal of `v` (a CoDual or a plain value)."""
    return np.asarray(v.x if isinstance(v, CoDual) else v)


def primals(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The primal values of a call's positional CoDuals and keyword values."""
    return [a.x for a in args], {
        k: (v.x if isinstance(v, CoDual) else v) for k, v in kwargs.items()
    }


def sequence_fdata(seq: CoDual) -> tuple[list[Any], list[Any]]:
    """The primals of a list/tuple argument and each element's fdata (None: inactive)."""
    xs = list(seq.x)
    d = seq.dx
    if d is None:
        return xs, [None] * len(xs)
    if isinstance(d, NoFData):
        return xs, [d] * len(xs)
    return xs, list(d)
