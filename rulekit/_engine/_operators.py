"""Python operators on `Traced` values, dispatched straight to the engine.

`NDArrayOperatorsMixin` would route `x * 2.0` through `np.multiply`, numpy's
override protocol and `__array_ufunc__`; for the common operand types (traced
values, arrays, Python and numpy scalars) these methods call the engine
directly (`self.tape.call`) with the same ufunc, which is what that route ends in. Other operand
types keep the mixin's behaviour. In-place operators on a traced *scalar*
rebind the name (numpy scalars are immutable: `s += 1` makes a new value),
as they do on plain numpy scalars.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

__all__ = ["install"]

_NO_KW: dict[str, Any] = {}
_PLAIN = {float, int, complex, bool, np.ndarray, np.float64, np.float32, np.float16,
          np.complex128, np.complex64, np.int64, np.int32, np.bool_}  # fmt: skip

#: (method name stem, ufunc, has reflected and in-place forms)
_BINARY = [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("matmul", np.matmul),
    ("truediv", np.true_divide), ("floordiv", np.floor_divide), ("mod", np.remainder),
    ("pow", np.power),
]  # fmt: skip
_COMPARE = [("lt", np.less), ("le", np.less_equal), ("eq", np.equal), ("ne", np.not_equal),
            ("gt", np.greater), ("ge", np.greater_equal)]  # fmt: skip
_UNARY = [("neg", np.negative), ("pos", np.positive), ("abs", np.absolute)]


def _forward(ufunc: np.ufunc, name: str, direct: Collection[type]) -> Callable[[Any, Any], Any]:
    fallback = getattr(NDArrayOperatorsMixin, f"__{name}__")

    def op(self: Any, other: Any) -> Any:
        if type(other) in direct:
            return self.tape.call(ufunc, (self, other), _NO_KW)
        return fallback(self, other)

    op.__name__ = f"__{name}__"
    return op


def _reflected(ufunc: np.ufunc, name: str) -> Callable[[Any, Any], Any]:
    fallback = getattr(NDArrayOperatorsMixin, f"__r{name}__")

    def op(self: Any, other: Any) -> Any:
        if type(other) in _PLAIN:
            return self.tape.call(ufunc, (other, self), _NO_KW)
        return fallback(self, other)

    op.__name__ = f"__r{name}__"
    return op


def _inplace(ufunc: np.ufunc, name: str, direct: Collection[type]) -> Callable[[Any, Any], Any]:
    forward = _forward(ufunc, name, direct)

    def op(self: Any, other: Any) -> Any:
        if self.scalar:
            return forward(self, other)  # immutable: rebinds, like a numpy scalar
        return ufunc(self, other, out=(self,))

    op.__name__ = f"__i{name}__"
    return op


def _unary(ufunc: np.ufunc, name: str) -> Callable[[Any], Any]:
    def op(self: Any) -> Any:
        return self.tape.call(ufunc, (self,), _NO_KW)

    op.__name__ = f"__{name}__"
    return op


def install(cls: type, traced: Collection[type]) -> None:
    """Set the operator methods on the traced-value class `cls`; `traced` are the concrete
    traced classes (an operand of one of them goes to the engine directly, too)."""
    direct = frozenset(_PLAIN) | frozenset(traced)
    for name, ufunc in _BINARY:
        setattr(cls, f"__{name}__", _forward(ufunc, name, direct))
        setattr(cls, f"__r{name}__", _reflected(ufunc, name))
        setattr(cls, f"__i{name}__", _inplace(ufunc, name, direct))
    for name, ufunc in _COMPARE:
        setattr(cls, f"__{name}__", _forward(ufunc, name, direct))
    for name, ufunc in _UNARY:
        setattr(cls, f"__{name}__", _unary(ufunc, name))
