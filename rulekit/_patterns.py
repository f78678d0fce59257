"""Type patterns for rule registration: `Array[dtype, ndim]`, classes, `Union`, `Any`, `Vararg`.

A *pattern* describes a set of argument values; a *type key* is the concrete
description of one value that dispatch looks at: `(dtype.type, ndim)` for an
ndarray, `type(x)` for anything else. Patterns are partially ordered by set
inclusion (`is_subpattern`), using numpy's scalar class hierarchy for dtypes
(`np.float64 < np.floating < np.inexact < np.number < np.generic`).
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from rulekit._errors import RuleRegistrationError

__all__ = [
    "Array",
    "ArrayPattern",
    "Pattern",
    "Vararg",
    "as_pattern",
    "is_subpattern",
    "matches",
    "type_key",
]

TypeKey = Union[type, tuple[type, int]]


@dataclass(frozen=True)
class ArrayPattern:
    """ndarrays whose scalar type is a subclass of `dtype` and whose ndim is `ndim` (any if None).

    Write it as `Array[np.float64, 2]`, `Array[np.floating]` or plain `Array`.
    """

    dtype: type = np.generic
    ndim: int | None = None

    def __getitem__(self, item: Any) -> ArrayPattern:
        dtype, ndim = item, None
        if isinstance(item, tuple):
            if len(item) != 2:
                raise RuleRegistrationError(f"Array[...] takes a dtype and an ndim, got {item!r}")
            dtype, ndim = item
        if isinstance(dtype, np.dtype):
            dtype = dtype.type
        if not (isinstance(dtype, type) and issubclass(dtype, np.generic)):
            raise RuleRegistrationError(
                f"Array[dtype, ndim]: dtype must be a numpy scalar type such as np.float64 or "
                f"np.floating, got {dtype!r}"
            )
        if ndim is not None and (not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < 0):
            raise RuleRegistrationError(
                f"Array[dtype, ndim]: ndim must be a non-negative int, got {ndim!r}"
            )
        return ArrayPattern(dtype, ndim)

    def __repr__(self) -> str:
        if self.dtype is np.generic and self.ndim is None:
            return "Array"
        nd = "" if self.ndim is None else f", {self.ndim}"
        return f"Array[np.{self.dtype.__name__}{nd}]"


#: (typed Any: patterns are values, used as in `Union[Array[np.float64], float]`)
Array: Any = ArrayPattern()


@dataclass(frozen=True)
class ClassPattern:
    """Values that are instances of `cls` (exact Python class hierarchy)."""

    cls: type

    def __repr__(self) -> str:
        return self.cls.__qualname__


@dataclass(frozen=True)
class AnyPattern:
    """Every value."""

    def __repr__(self) -> str:
        return "Any"


@dataclass(frozen=True)
class UnionPattern:
    """Values matched by any of `members`."""

    members: frozenset[Pattern]

    def __repr__(self) -> str:
        return "Union[" + ", ".join(sorted(map(repr, self.members))) + "]"


@dataclass(frozen=True)
class VarargPattern:
    """Zero or more trailing arguments, each matching `element`. Only valid last."""

    element: Pattern

    def __repr__(self) -> str:
        return f"Vararg[{self.element!r}]"


class _VarargFactory:
    """`Vararg[T]`: zero or more trailing arguments, each matching `T` (only valid last)."""

    def __getitem__(self, item: Any) -> VarargPattern:
        element = as_pattern(item)
        if isinstance(element, VarargPattern):
            raise RuleRegistrationError("Vararg[Vararg[...]] is not a pattern")
        return VarargPattern(element)

    def __repr__(self) -> str:
        return "Vararg"


Vararg = _VarargFactory()

Pattern = Union[ArrayPattern, ClassPattern, AnyPattern, UnionPattern, VarargPattern]
_ANY = AnyPattern()


def as_pattern(p: Any) -> Pattern:
    """Normalise what a user wrote in a registration into a pattern, or raise."""
    if isinstance(p, (ArrayPattern, ClassPattern, AnyPattern, UnionPattern, VarargPattern)):
        return p
    if p is Any or p is object:
        return _ANY
    origin = typing.get_origin(p)
    if origin is Union or isinstance(p, types.UnionType):
        members = frozenset(as_pattern(m) for m in typing.get_args(p))
        if any(isinstance(m, VarargPattern) for m in members):
            raise RuleRegistrationError(f"Vararg cannot appear inside a Union: {p!r}")
        if _ANY in members:
            return _ANY  # Union[Any, X] is every value
        return next(iter(members)) if len(members) == 1 else UnionPattern(members)
    if isinstance(p, type):
        return Array if issubclass(p, np.ndarray) else ClassPattern(p)
    raise RuleRegistrationError(
        f"{p!r} is not a type pattern: use a class, Array[dtype, ndim], Union[...], Any "
        "or Vararg[...] (last)."
    )


def type_key(x: Any) -> TypeKey:
    """The concrete type key of a value: `(dtype.type, ndim)` for an ndarray, else `type(x)`."""
    if isinstance(x, np.ndarray):
        return (x.dtype.type, x.ndim)
    return type(x)


def matches(p: Pattern, key: TypeKey) -> bool:
    """Whether a value with type key `key` is in pattern `p`."""
    if isinstance(p, AnyPattern):
        return True
    if isinstance(p, ArrayPattern):
        return (
            isinstance(key, tuple)
            and issubclass(key[0], p.dtype)
            and (p.ndim is None or p.ndim == key[1])
        )
    if isinstance(p, ClassPattern):
        return issubclass(np.ndarray if isinstance(key, tuple) else key, p.cls)
    if isinstance(p, UnionPattern):
        return any(matches(m, key) for m in p.members)
    raise TypeError(f"matches() on {p!r}")  # Vararg is expanded before matching


def is_subpattern(p: Pattern, q: Pattern) -> bool:
    """Whether every value in `p` is also in `q` (p ⊆ q)."""
    if isinstance(q, AnyPattern):
        return True
    if isinstance(p, AnyPattern):
        return False
    if isinstance(p, UnionPattern):
        return all(is_subpattern(m, q) for m in p.members)
    if isinstance(q, UnionPattern):
        return any(is_subpattern(p, m) for m in q.members)
    if isinstance(p, VarargPattern) or isinstance(q, VarargPattern):
        pe = p.element if isinstance(p, VarargPattern) else p
        qe = q.element if isinstance(q, VarargPattern) else q
        return is_subpattern(pe, qe)
    if isinstance(p, ArrayPattern):
        if isinstance(q, ArrayPattern):
            return issubclass(p.dtype, q.dtype) and (q.ndim is None or q.ndim == p.ndim)
        return isinstance(q, ClassPattern) and issubclass(np.ndarray, q.cls)
    if isinstance(p, ClassPattern):
        if isinstance(q, ClassPattern):
            return issubclass(p.cls, q.cls)
        return False
    return False
