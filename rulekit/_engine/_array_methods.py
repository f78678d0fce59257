"""`ArrayMethods`: ndarray's methods and view attributes, each routed to its numpy function.

Shared by every value that stands for an array while a transformation runs (the
reverse engine's `Traced`, the forward and nested levels' values), so that
`x.sum()`, `x.T` or `x.reshape(n, -1)` reach the same rules as `np.sum(x)`.
"""

from __future__ import annotations

import operator
from typing import Any, cast

import numpy as np

__all__ = ["ArrayMethods"]


class ArrayMethods:
    """ndarray methods that are numpy functions of the array (mixed into traced values)."""

    __slots__ = ()

    @property
    def T(self: Any) -> Any:
        return np.transpose(self)

    @property
    def mT(self: Any) -> Any:
        return np.swapaxes(self, -1, -2)

    @property
    def real(self: Any) -> Any:
        return np.real(self)

    @property
    def imag(self: Any) -> Any:
        return np.imag(self)

    def sum(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.sum(self, *args, **kwargs)

    def mean(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.mean(self, *args, **kwargs)

    def prod(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.prod(self, *args, **kwargs)

    def max(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.max(self, *args, **kwargs)

    def min(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.min(self, *args, **kwargs)

    def var(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.var(self, *args, **kwargs)

    def std(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.std(self, *args, **kwargs)

    def cumsum(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.cumsum(self, *args, **kwargs)

    def cumprod(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.cumprod(self, *args, **kwargs)

    def reshape(self: Any, *shape: Any, **kwargs: Any) -> Any:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, np.ndarray)):
            shape = tuple(map(operator.index, shape[0]))
        return np.reshape(self, shape, **kwargs)

    def ravel(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.ravel(self, *args, **kwargs)

    def flatten(self: Any) -> Any:
        return np.copy(np.ravel(self))

    def transpose(self: Any, *axes: Any) -> Any:
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            return np.transpose(self, axes[0])
        return np.transpose(self, axes or None)

    def swapaxes(self: Any, a: int, b: int) -> Any:
        return np.swapaxes(self, a, b)

    def squeeze(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.squeeze(self, *args, **kwargs)

    def dot(self: Any, other: Any) -> Any:
        return np.dot(self, other)

    def copy(self: Any, order: str = "C") -> Any:  # (ndarray.copy's default is C; np.copy's is K)
        return np.copy(cast(Any, self), order=cast(Any, order))

    def clip(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.clip(self, *args, **kwargs)

    def conj(self: Any) -> Any:
        return np.conjugate(self)

    conjugate = conj

    def diagonal(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.diagonal(self, *args, **kwargs)

    def trace(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.trace(self, *args, **kwargs)

    def take(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.take(self, *args, **kwargs)

    def repeat(self: Any, *args: Any, **kwargs: Any) -> Any:
        return np.repeat(self, *args, **kwargs)
