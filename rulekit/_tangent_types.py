"""What a tangent is: the empty tangents, `StructTangent`, and which kind each primal has.

Every primal type has a *tangent* (an element of its cotangent space). The
tangent is split in two halves:

* **fdata** (forward data) is the mutable adjoint memory that travels with the
  primal through the forward pass (inside a `CoDual`) and that pullbacks
  *increment in place*: float arrays, lists, dicts, registered user objects.
* **rdata** (reverse data) is the immutable adjoint value a pullback *returns*:
  Python and numpy float/complex scalars.

==========================================  ============================  ====================
primal                                      fdata                         rdata
==========================================  ============================  ====================
float / complex ndarray                     ndarray (same shape, dtype)   ``NoRData()``
``float``, ``complex``, numpy float scalar  ``NoFData()``                 same type as primal
int, bool, str, None, int/bool arrays, fns  ``NoFData()``                 ``NoRData()``
``tuple`` (and NamedTuple)                  tuple of element fdata        tuple of element rdata
``list``, ``dict``                          same container of tangents    ``NoRData()``
registered classes                          ``StructTangent`` of fields   ``NoRData()``
==========================================  ============================  ====================

A tuple's fdata is ``NoFData()`` when every element's is, and its rdata is
``NoRData()`` when every element's is. The full tangent (what
`zero_tangent` and `randn_tangent` return) joins the two halves:
`split_tangent` and `join_tangent` convert between them.

`kind_of(x)` classifies a primal into one row of that table (cached per type);
`register_tangent` adds rows for user classes.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass
from typing import Any

import numpy as np

from rulekit._errors import TangentError

__all__ = [
    "EMPTY",
    "NoFData",
    "NoRData",
    "NoTangent",
    "StructTangent",
    "fields_of",
    "kind_of",
    "register_tangent",
]


class _Empty:
    """Base of the three 'nothing here' singletons: all instances of a class are one object."""

    __slots__ = ()
    _instance: Any = None

    def __new__(cls) -> Any:
        if cls.__dict__.get("_instance") is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __reduce__(self) -> tuple[type, tuple[()]]:
        return (type(self), ())

    def __bool__(self) -> bool:
        return False


class NoTangent(_Empty):
    """The tangent of a non-differentiable value (int, str, an integer array, ...)."""

    __slots__ = ()


class NoFData(_Empty):
    """The fdata of a value that has no mutable adjoint memory (a float, an int, ...)."""

    __slots__ = ()


class NoRData(_Empty):
    """The rdata of a value whose adjoint lives entirely in its fdata (an array, a list)."""

    __slots__ = ()


#: The three "nothing here" types: each instance is a zero.
EMPTY = (NoTangent, NoFData, NoRData)


class StructTangent:
    """The tangent of an instance of a class registered with `register_tangent`.

    Holds one full tangent per differentiable field, readable as attributes
    (`t.weight`). It is mutable, like the object it is the tangent of, so it is
    that object's fdata (its rdata is `NoRData()`).
    """

    __slots__ = ("cls", "fields")

    def __init__(self, cls: type, fields: dict[str, Any]) -> None:
        self.cls = cls
        self.fields = fields

    def __getattr__(self, name: str) -> Any:
        # Only called for names that are not slots; `fields` may be unset (copy, unpickle).
        fields = object.__getattribute__(self, "fields") if name != "fields" else None
        if fields is not None and name in fields:
            return fields[name]
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        # `t.weight += g` in a pullback: arrays are updated in place, scalars replaced.
        if name in StructTangent.__slots__:
            object.__setattr__(self, name, value)
        elif name in self.fields:
            self.fields[name] = value
        else:
            raise AttributeError(f"{self!r} has no field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (StructTangent, (self.cls, self.fields))

    def __repr__(self) -> str:
        inner_repr = ", ".join(f"{k}={v!r}" for k, v in self.fields.items())
        return f"StructTangent[{self.cls.__name__}]({inner_repr})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StructTangent) or other.cls is not self.cls:
            return NotImplemented
        return all(_tangent_equal(v, other.fields[k]) for k, v in self.fields.items())

    __hash__ = None  # type: ignore[assignment]


def _tangent_equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(a == b)


# ---------------------------------------------------------------------------
# classification

#: The rows of the table above, as `kind_of` returns them (`_NDARRAY`: before the dtype test).
ARRAY, SCALAR, NONDIFF, TUPLE, LIST, DICT, STRUCT, _NDARRAY = range(8)

_NONDIFF_TYPES: tuple[type, ...] = (
    bool,
    int,
    str,
    bytes,
    type(None),
    np.integer,
    np.bool_,
    np.str_,
    np.bytes_,
    np.dtype,
    type,
    range,
    slice,
    type(Ellipsis),
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.BuiltinMethodType,
    types.ModuleType,
    np.ufunc,
    _Empty,
)

_kind_cache: dict[type, int] = {}
_struct_fields: dict[type, tuple[str, ...]] = {}


def _is_generator(t: type) -> bool:
    """Whether `t` is a numpy random Generator (looked up only once numpy.random is imported:
    `import rulekit` does not import it)."""
    random = sys.modules.get("numpy.random")
    return random is not None and issubclass(t, random.Generator)


def _kind_of_type(t: type) -> int:
    if issubclass(t, np.ndarray):
        return _NDARRAY
    if issubclass(t, (bool, np.bool_)):
        return NONDIFF
    if t in _struct_fields:
        return STRUCT
    if issubclass(t, (float, complex, np.floating, np.complexfloating)):
        return SCALAR
    if issubclass(t, _NONDIFF_TYPES) or _is_generator(t):
        return NONDIFF
    if issubclass(t, tuple):
        return TUPLE
    if issubclass(t, list):
        return LIST
    if issubclass(t, dict):
        return DICT
    for base in t.__mro__[1:]:
        if base in _struct_fields:
            return STRUCT
    if any("__call__" in vars(b) for b in t.__mro__[:-1]):
        return NONDIFF  # functions and other callables without registered state
    raise TangentError(
        f"rulekit has no tangent type for values of type {t.__module__}.{t.__qualname__}. "
        "Declare one with rulekit.register_tangent(cls) (its differentiable fields), "
        "or pass the value as a non-differentiable constant."
    )


def kind_of(x: Any) -> int:
    """The kind of primal `x` (a row of the table above), or raise `TangentError`."""
    t = type(x)
    k = _kind_cache.get(t)
    if k is None:
        k = _kind_cache[t] = _kind_of_type(t)
    if k == _NDARRAY:
        kind = x.dtype.kind
        if kind in "fc":
            return ARRAY
        if kind == "O":
            raise TangentError(
                "object arrays have no tangent type: convert to a float array first "
                f"(got an object array of shape {x.shape})."
            )
        return NONDIFF
    return k


def fields_of(x: Any) -> tuple[str, ...]:
    """The differentiable fields of an instance of a registered class (kind STRUCT)."""
    for base in type(x).__mro__:
        if base in _struct_fields:
            return _struct_fields[base]
    raise AssertionError("unreachable: STRUCT kind without registration")


# ---------------------------------------------------------------------------
# registration


def register_tangent(cls: type, fields: Iterable[str] | None = None) -> type:
    """Declare the tangent type of a user class: the tangents of its fields.

    `fields` names the attributes that carry derivatives; by default every
    field of a dataclass. The tangent of an instance is a `StructTangent`
    holding one full tangent per field; being mutable, it is the instance's
    fdata (rdata is `NoRData()`). Fields that are not differentiable (ints,
    strings) get `NoTangent()`.

    Returns `cls`, so it can decorate a class::

        @rulekit.register_tangent
        @dataclasses.dataclass
        class Affine:
            weight: np.ndarray
            bias: float
    """
    if not isinstance(cls, type):
        raise TangentError(f"register_tangent expects a class, got {cls!r}")
    if fields is None:
        if not is_dataclass(cls):
            raise TangentError(
                f"register_tangent({cls.__qualname__}) needs fields=[...] "
                "naming its differentiable attributes (only dataclasses have a default)."
            )
        names = tuple(f.name for f in dataclass_fields(cls))
    else:
        names = tuple(fields)
        if not all(isinstance(n, str) for n in names):
            raise TangentError(f"fields must be attribute names, got {names!r}")
    _struct_fields[cls] = names
    _kind_cache.clear()
    return cls
