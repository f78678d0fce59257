"""Tangent types, split Mooncake-style into fdata and rdata.

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
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass
from typing import Any

import numpy as np

from rulekit._errors import TangentError

__all__ = [
    "NoFData",
    "NoRData",
    "NoTangent",
    "StructTangent",
    "increment",
    "inner",
    "is_differentiable",
    "join_tangent",
    "randn_tangent",
    "register_tangent",
    "split_tangent",
    "zero_fdata",
    "zero_rdata",
    "zero_tangent",
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


_NO_T, _NO_F, _NO_R = NoTangent(), NoFData(), NoRData()
_EMPTY = (NoTangent, NoFData, NoRData)


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

_ARRAY, _SCALAR, _NONDIFF, _TUPLE, _LIST, _DICT, _STRUCT, _NDARRAY = range(8)

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
    np.random.Generator,
    _Empty,
)

_kind_cache: dict[type, int] = {}
_struct_fields: dict[type, tuple[str, ...]] = {}


def _kind_of_type(t: type) -> int:
    if issubclass(t, np.ndarray):
        return _NDARRAY
    if issubclass(t, (bool, np.bool_)):
        return _NONDIFF
    if t in _struct_fields:
        return _STRUCT
    if issubclass(t, (float, complex, np.floating, np.complexfloating)):
        return _SCALAR
    if issubclass(t, _NONDIFF_TYPES):
        return _NONDIFF
    if issubclass(t, tuple):
        return _TUPLE
    if issubclass(t, list):
        return _LIST
    if issubclass(t, dict):
        return _DICT
    for base in t.__mro__[1:]:
        if base in _struct_fields:
            return _STRUCT
    if any("__call__" in vars(b) for b in t.__mro__[:-1]):
        return _NONDIFF  # functions and other callables without registered state
    raise TangentError(
        f"rulekit has no tangent type for values of type {t.__module__}.{t.__qualname__}. "
        "Declare one with rulekit.register_tangent(cls) (its differentiable fields), "
        "or pass the value as a non-differentiable constant."
    )


def _kind(x: Any) -> int:
    t = type(x)
    k = _kind_cache.get(t)
    if k is None:
        k = _kind_cache[t] = _kind_of_type(t)
    if k == _NDARRAY:
        kind = x.dtype.kind
        if kind in "fc":
            return _ARRAY
        if kind == "O":
            raise TangentError(
                "object arrays have no tangent type: convert to a float array first "
                f"(got an object array of shape {x.shape})."
            )
        return _NONDIFF
    return k


def is_differentiable(x: Any) -> bool:
    """Whether `x` has a non-trivial tangent (anything but `NoTangent()`)."""
    return not isinstance(zero_tangent(x), NoTangent)


def _fields_of(x: Any) -> tuple[str, ...]:
    for base in type(x).__mro__:
        if base in _struct_fields:
            return _struct_fields[base]
    raise AssertionError("unreachable: _STRUCT kind without registration")


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


# ---------------------------------------------------------------------------
# zeros, random tangents


def zero_tangent(x: Any) -> Any:
    """The zero tangent of `x` (full tangent: fdata and rdata joined)."""
    k = _kind(x)
    if k == _ARRAY:
        return np.zeros_like(x)
    if k == _SCALAR:
        return type(x)(0)
    if k == _NONDIFF:
        return _NO_T
    if k == _TUPLE:
        ts = tuple(zero_tangent(e) for e in x)
        return _NO_T if all(t is _NO_T for t in ts) else ts
    if k == _LIST:
        return [zero_tangent(e) for e in x]
    if k == _DICT:
        return {key: zero_tangent(v) for key, v in x.items()}
    return StructTangent(type(x), {n: zero_tangent(getattr(x, n)) for n in _fields_of(x)})


def zeros_like_exact(y: np.ndarray) -> np.ndarray:
    """Zeros with `y`'s shape, dtype and strides: the fdata of a new output or input `y`.

    C- and F-contiguous `y` get `np.zeros_like` (which keeps those layouts). Any
    other layout (a `.real` view of a complex result, negative or gapped strides)
    gets a zeroed buffer spanning `y`'s extent, viewed with `y`'s strides. Only a
    `y` whose elements overlap (a zero stride on a longer axis, as
    `np.broadcast_to` makes) or whose strides are not whole elements gets
    C-ordered fdata: it cannot have memory of its own with those strides
    (`exact_layout_possible` says which).
    """
    f = y.flags
    if f.c_contiguous or f.f_contiguous or y.size == 0:  # (np.zeros: zeros_like fills
        order: Any = "F" if f.f_contiguous and not f.c_contiguous else "C"  # through a 0-d temp)
        return np.zeros(y.shape, y.dtype, order=order)
    item = y.itemsize
    lo = hi = 0
    for n, s in zip(y.shape, y.strides, strict=True):
        if n > 1 and (s == 0 or s % item):
            return np.zeros(y.shape, y.dtype)
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    base = np.zeros((hi - lo) // item + 1, y.dtype)
    return np.ndarray(y.shape, y.dtype, buffer=base, offset=-lo, strides=y.strides)


def exact_layout_possible(y: np.ndarray) -> bool:
    """Whether memory of its own can have `y`'s strides (no overlapping elements)."""
    if y.flags.c_contiguous or y.flags.f_contiguous or y.size == 0:
        return True
    return all(
        n <= 1 or (s != 0 and s % y.itemsize == 0) for n, s in zip(y.shape, y.strides, strict=True)
    )


def zero_fdata(x: Any) -> Any:
    """Fresh zero fdata for `x`: what a `CoDual` of `x` carries as `dx` (arrays: with x's
    strides, so that views of x and of its fdata pair the same elements)."""
    k = _kind(x)
    if k == _ARRAY:
        return zeros_like_exact(x)
    if k in (_SCALAR, _NONDIFF):
        return _NO_F
    if k == _TUPLE:
        fs = tuple(zero_fdata(e) for e in x)
        return _NO_F if all(f is _NO_F for f in fs) else fs
    return zero_tangent(x)  # list, dict, struct: the full tangent is the fdata


def zero_rdata(x: Any) -> Any:
    """The zero rdata for `x`: what a pullback returns for `x` when nothing flows back."""
    k = _kind(x)
    if k == _SCALAR:
        return type(x)(0)
    if k == _TUPLE:
        rs = tuple(zero_rdata(e) for e in x)
        return _NO_R if all(r is _NO_R for r in rs) else rs
    return _NO_R


def _randn_array(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> Any:
    if dtype.kind == "c":
        out = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    else:
        out = rng.standard_normal(shape)
    return np.asarray(out, dtype=dtype)


def randn_tangent(x: Any, rng: np.random.Generator) -> Any:
    """A random (standard normal) tangent of `x`, of exactly `x`'s tangent type."""
    k = _kind(x)
    if k == _ARRAY:
        return _randn_array(x.shape, x.dtype, rng)
    if k == _SCALAR:
        if isinstance(x, (complex, np.complexfloating)):
            return type(x)(complex(rng.standard_normal(), rng.standard_normal()))
        return type(x)(rng.standard_normal())
    if k == _NONDIFF:
        return _NO_T
    if k == _TUPLE:
        ts = tuple(randn_tangent(e, rng) for e in x)
        return _NO_T if all(t is _NO_T for t in ts) else ts
    if k == _LIST:
        return [randn_tangent(e, rng) for e in x]
    if k == _DICT:
        return {key: randn_tangent(v, rng) for key, v in x.items()}
    return StructTangent(type(x), {n: randn_tangent(getattr(x, n), rng) for n in _fields_of(x)})


# ---------------------------------------------------------------------------
# split and join


def split_tangent(x: Any, t: Any) -> tuple[Any, Any]:
    """Split a full tangent `t` of `x` into `(fdata, rdata)`."""
    k = _kind(x)
    if k == _ARRAY:
        return t, _NO_R
    if k == _SCALAR:
        return _NO_F, t
    if k == _NONDIFF:
        return _NO_F, _NO_R
    if k == _TUPLE:
        ts = (_NO_T,) * len(x) if isinstance(t, _EMPTY) else t
        parts = [split_tangent(e, te) for e, te in zip(x, ts, strict=True)]
        fs = tuple(p[0] for p in parts)
        rs = tuple(p[1] for p in parts)
        f = _NO_F if all(e is _NO_F for e in fs) else fs
        r = _NO_R if all(e is _NO_R for e in rs) else rs
        return f, r
    return t, _NO_R


def join_tangent(x: Any, fdata: Any, rdata: Any) -> Any:
    """Join the halves `(fdata, rdata)` of `x`'s tangent into a full tangent."""
    k = _kind(x)
    if k == _ARRAY:
        return fdata
    if k == _SCALAR:
        return rdata
    if k == _NONDIFF:
        return _NO_T
    if k == _TUPLE:
        n = len(x)
        fs = (_NO_F,) * n if isinstance(fdata, NoFData) else fdata
        rs = (_NO_R,) * n if isinstance(rdata, NoRData) else rdata
        ts = tuple(join_tangent(e, f, r) for e, f, r in zip(x, fs, rs, strict=True))
        return _NO_T if all(t is _NO_T for t in ts) else ts
    return fdata


# ---------------------------------------------------------------------------
# algebra


def increment(t: Any, s: Any) -> Any:
    """Return `t + s`, adding into `t` in place where `t` is mutable.

    Arrays, lists, dicts and struct tangents are updated in place and the same
    object is returned; immutable tangents (floats, tuples) are returned anew.
    An array reached twice through a container (the same object, or another
    view of the same memory) is incremented once. `NoTangent`/`NoFData`/
    `NoRData` are zeros.
    """
    return _increment(t, s, set())


def _array_key(a: np.ndarray) -> tuple[int, int, int, str]:
    """The memory an array covers: first and last byte, element count, dtype.

    Views of the same elements (`a`, `a[:]`, `a.reshape(2, 3)`, `a.T`) have one key.
    """
    start = a.__array_interface__["data"][0]
    lo = sum(s * (n - 1) for s, n in zip(a.strides, a.shape, strict=True) if s < 0)
    hi = sum(s * (n - 1) for s, n in zip(a.strides, a.shape, strict=True) if s > 0)
    return (start + lo, start + hi, a.size, a.dtype.str)


def _increment(t: Any, s: Any, seen: set[Any]) -> Any:
    if isinstance(s, _EMPTY):
        return t
    if isinstance(t, _EMPTY):
        return s
    if isinstance(t, np.ndarray):
        key = _array_key(t)
        if key not in seen:
            seen.add(key)
            np.add(t, s, out=t)
        return t
    if isinstance(t, tuple):
        return tuple(_increment(a, b, seen) for a, b in zip(t, s, strict=True))
    if isinstance(t, list):
        for i, b in enumerate(s):
            t[i] = _increment(t[i], b, seen)
        return t
    if isinstance(t, dict):
        for key, b in s.items():
            t[key] = _increment(t[key], b, seen)
        return t
    if isinstance(t, StructTangent):
        for key, b in s.fields.items():
            t.fields[key] = _increment(t.fields[key], b, seen)
        return t
    if isinstance(t, (float, complex, np.number)):
        return t + s
    raise TangentError(f"cannot increment a tangent of type {type(t).__name__}")


def inner(a: Any, b: Any) -> float:
    """The real inner product ⟨a, b⟩ of two tangents of the same primal.

    For complex values this is Re(Σ conj(a)·b), the inner product of ℂⁿ seen as
    ℝ²ⁿ. Arrays of half or single precision are accumulated in double.
    """
    if isinstance(a, _EMPTY) or isinstance(b, _EMPTY):
        return 0.0
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a64 = np.asarray(a)
        b64 = np.asarray(b)
        if _single(a64.dtype) or _single(b64.dtype):
            a64 = a64.astype(np.promote_types(a64.dtype, np.float64))
            b64 = b64.astype(np.promote_types(b64.dtype, np.float64))
        return float(np.real(np.vdot(a64, b64)))
    if isinstance(a, (tuple, list)):
        return sum((inner(x, y) for x, y in zip(a, b, strict=True)), 0.0)
    if isinstance(a, dict):
        return sum((inner(a[k], b[k]) for k in a), 0.0)
    if isinstance(a, StructTangent):
        return sum((inner(v, b.fields[k]) for k, v in a.fields.items()), 0.0)
    if isinstance(a, (float, complex, np.number)):
        return float(np.real(np.conj(complex(a)) * complex(b)))
    raise TangentError(f"cannot take the inner product of tangents of type {type(a).__name__}")


def _single(dt: np.dtype) -> bool:
    """Less than double precision (float16/32, complex64): accumulate in double."""
    return dt.itemsize < (16 if dt.kind == "c" else 8)


def tangent_map(fn: Callable[[Any], Any], t: Any) -> Any:
    """Apply `fn` to every array/scalar leaf of a tangent (structure preserved)."""
    if isinstance(t, _EMPTY):
        return t
    if isinstance(t, tuple):
        return tuple(tangent_map(fn, e) for e in t)
    if isinstance(t, list):
        return [tangent_map(fn, e) for e in t]
    if isinstance(t, dict):
        return {k: tangent_map(fn, v) for k, v in t.items()}
    if isinstance(t, StructTangent):
        return StructTangent(t.cls, {k: tangent_map(fn, v) for k, v in t.fields.items()})
    return fn(t)
