"""Concrete call signatures: what dispatch looks at in a call.

A `Signature` is the function and each argument's *type key* (`(dtype.type,
ndim)` for an ndarray, `type(x)` otherwise; see `rulekit._patterns`), plus the
type key of an `out=` array. `fast_key` is the same information as one flat
tuple, cheap enough to build on every traced call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from rulekit._codual import CoDual
from rulekit._functions import function_name
from rulekit._patterns import type_key

__all__ = ["Signature", "fast_key", "key_repr", "out_value", "signature_of", "unwrap"]


def key_repr(k: Any) -> str:
    """A type key as the pattern that matches exactly it (`Array[np.float64, 2]`, `float`)."""
    if isinstance(k, tuple):
        return f"Array[np.{k[0].__name__}, {k[1]}]"
    return k.__qualname__ if isinstance(k, type) else repr(k)


class Signature(NamedTuple):
    """The concrete signature of a call: the function and each argument's type key.

    `args[i]` is `(dtype.type, ndim)` for an ndarray and `type(x)` otherwise;
    `out` is the type key of an `out=` array, or None.
    """

    f: Any
    args: tuple[Any, ...]
    out: Any = None

    def __repr__(self) -> str:
        parts = [key_repr(k) for k in self.args]
        if self.out is not None:
            parts.append(f"out={key_repr(self.out)}")
        return f"{function_name(self.f)}({', '.join(parts)})"


def unwrap(x: Any) -> Any:
    """The primal of a CoDual; any other value as it is."""
    return x.x if isinstance(x, CoDual) else x


def out_value(kwargs: dict[str, Any]) -> Any:
    """The `out=` array of a call's keyword arguments (numpy's 1-tuple form unpacked)."""
    out = kwargs.get("out")
    if isinstance(out, tuple):
        if len(out) != 1:
            return None if all(o is None for o in out) else out
        out = out[0]
    return unwrap(out)


def signature_of(f: Any, *args: Any, **kwargs: Any) -> Signature:
    """The concrete `Signature` of the call `f(*args, **kwargs)` (CoDuals are unwrapped)."""
    out = out_value(kwargs)
    return Signature(
        unwrap(f),
        tuple(type_key(unwrap(a)) for a in args),
        None if out is None else type_key(out),
    )


_ndarray = np.ndarray


def _flat(key: list[Any], x: Any) -> None:
    t = type(x)
    if t is not _ndarray:
        key.append(t)  # a subclass of ndarray is then followed by its dtype and ndim
        if not issubclass(t, _ndarray):
            return
    key.append(x.dtype)
    key.append(x.ndim)


def fast_key(f: Any, args: Sequence[Any], out: Any = None) -> tuple[Any, ...]:
    """A cheap hashable key for a call on primal values (the hot path of dispatch).

    It identifies the concrete signature as one flat tuple: an array contributes
    its dtype and ndim, any other value its type (a dtype is never a type, so the
    tuple reads back unambiguously). `out` is the `out=` array or None.
    """
    n = len(args)
    if n == 1 and out is None:
        a = args[0]
        if type(a) is _ndarray:
            return (f, a.dtype, a.ndim)
    elif n == 2 and out is None:  # the common cases, without building a list
        a, b = args
        ta, tb = type(a), type(b)
        if ta is _ndarray:
            if tb is _ndarray:
                return (f, a.dtype, a.ndim, b.dtype, b.ndim)
            if not issubclass(tb, _ndarray):
                return (f, a.dtype, a.ndim, tb)
        elif tb is _ndarray and not issubclass(ta, _ndarray):
            return (f, ta, b.dtype, b.ndim)
    key: list[Any] = [f]
    for x in args:
        _flat(key, x)
    if out is not None:
        key.append("out")
        _flat(key, out)
    return tuple(key)
