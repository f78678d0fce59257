"""Numpy functions differentiated without a rule of their own, and two that cannot be.

`TRACED_THROUGH` lists numpy functions written in Python on top of functions
that have rules: with no rule registered, the engine runs their implementation
on traced values (the engine's traced arrays), which differentiates them exactly. Each
entry carries a call example; `tests/rules/numpy/test_traced_through.py` checks every
one against finite differences, and docs/coverage.md lists them.

`NOT_DISPATCHED` lists functions numpy does not dispatch to traced values at all
(they take no array-like argument numpy would look at): numpy converts the traced
items with `__array__`, which the engine refuses with a TracingError naming the
alternative given here (docs/coverage.md lists them). `np.r_[...]` and `np.c_[...]`
(index objects, not functions) convert their items the same way: the fix is
np.concatenate (np.r_) or np.column_stack / np.stack(..., axis=-1) (np.c_).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["NOT_DISPATCHED", "TRACED_THROUGH"]


def _x(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).normal(size=shape)


#: function → a zero-argument callable giving (args, kwargs) for an example call
TRACED_THROUGH: dict[Any, Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]] = {
    np.hsplit: lambda: ((_x(3, 4), 2), {}),
    np.vsplit: lambda: ((_x(4, 3), 2), {}),
    np.dsplit: lambda: ((_x(2, 3, 4), 2), {}),
    np.rollaxis: lambda: ((_x(2, 3, 4), 2), {}),
    np.row_stack: lambda: (([_x(3), _x(3)],), {}),  # (deprecated by numpy: np.vstack)
    # on np.add.accumulate / np.multiply.accumulate (rules.numpy.ufuncs.methods)
    np.cumulative_sum: lambda: ((_x(3, 4),), {"axis": 1, "include_initial": True}),
    np.cumulative_prod: lambda: ((_x(3, 4),), {"axis": 0}),
}

#: function → what to call instead on traced values
NOT_DISPATCHED: dict[Any, str] = {
    np.array: (
        "np.stack([a, b]) or np.concatenate([a, b]) (np.array, np.r_ and np.c_ do not dispatch "
        "to traced values: they convert each item to a plain array)"
    ),
    np.full: "np.full_like(x, v) or v * np.ones(shape) (np.full does not dispatch on its value)",
}
