"""Calls on traced scalars that have no rule for them: retried on 0-d arrays.

Most rules take arrays (`Array[np.inexact]`), and NumPy hands them NumPy or Python
float scalars too (`np.squeeze(x)`, `np.cumsum(x)`, `np.reshape(x, ())` on the result
of a reduction). With no rule for a scalar, the call runs on the scalar as a 0-d array
`reshape(x·ones(1), ())` (exact, and differentiated by the multiply and reshape rules),
and its result is turned back into a scalar (`y[()]`) where numpy returns one for a
scalar (np.squeeze, np.transpose, np.real, np.reshape to ()), so that values and types
are numpy's. The reverse engine (`Traced`) and the levels (`LevelValue`) both use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._functions import call

__all__ = ["scalars_as_arrays"]


def scalars_as_arrays(
    f: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    traced: Callable[[Any], bool],
    value_of: Callable[[Any], Any],
) -> Callable[[], Any] | None:
    """The retry of `f(*args, **kwargs)` with the traced scalars among `args` (`traced(a)`
    and `value_of(a)`, its plain value, not an array) as 0-d arrays, or None when there is
    none (or an `out=`). `f` runs once more on the plain values to learn whether numpy
    returns a scalar (only when the retry returns a 0-d array)."""

    def is_scalar(a: Any) -> bool:
        return traced(a) and not isinstance(value_of(a), np.ndarray)

    if "out" in kwargs or not any(is_scalar(a) for a in args):
        return None

    def retry() -> Any:
        arrays = [
            np.reshape(a * np.ones(1, np.result_type(value_of(a))), ()) if is_scalar(a) else a
            for a in args
        ]
        y = call(f, arrays, kwargs)
        v = value_of(y)
        if isinstance(v, np.ndarray) and v.ndim == 0:
            plain = call(
                f, [value_of(a) for a in args], {k: value_of(e) for k, e in kwargs.items()}
            )
            if isinstance(plain, np.generic):
                return y[()]
        return y

    return retry
