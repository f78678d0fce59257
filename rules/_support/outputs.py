"""Making a rule's output CoDual: fresh zero fdata laid out like the primal, or none at all."""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import CoDual
from rules._support.cotangents import no_pullback
from rules._support.layout import new_fdata

__all__ = ["inactive_output", "is_inexact_array", "new_output"]


def new_output(y: Any) -> CoDual:
    """A CoDual for a freshly computed output: zero fdata for float/complex arrays (laid out
    like them, `rules._support.layout.new_fdata`, tuples element-wise), NoFData otherwise."""
    return CoDual(y, new_fdata(y))


def inactive_output(y: Any, n: int) -> tuple[CoDual, Any]:
    """`(output, pullback)` of a call whose output carries no derivative (`dx=None`), for a
    rule of `n` positional inputs (f counted): the pullback has nothing to do."""
    return CoDual(y, None), no_pullback(n)


def is_inexact_array(y: Any) -> bool:
    """Whether `y` is a float or complex ndarray (an output that carries fdata)."""
    return isinstance(y, np.ndarray) and y.dtype.kind in "fc"
