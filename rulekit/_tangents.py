"""Making and combining tangents: zeros, random tangents, the fdata/rdata halves, algebra.

The table of tangent types is in `rulekit._tangent_types` (and in docs/concepts.md):
arrays carry their adjoint in fdata, scalars in rdata, containers element by element.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit._errors import TangentError
from rulekit._layout import zeros_like_exact
from rulekit._tangent_types import (
    ARRAY,
    DICT,
    EMPTY,
    LIST,
    NONDIFF,
    SCALAR,
    TUPLE,
    NoFData,
    NoRData,
    NoTangent,
    StructTangent,
    fields_of,
    kind_of,
)

__all__ = [
    "increment",
    "inner",
    "join_tangent",
    "randn_tangent",
    "split_tangent",
    "zero_fdata",
    "zero_rdata",
    "zero_tangent",
]

_NO_T, _NO_F, _NO_R = NoTangent(), NoFData(), NoRData()


# ---------------------------------------------------------------------------
# zeros, random tangents


def zero_tangent(x: Any) -> Any:
    """The zero tangent of `x` (full tangent: fdata and rdata joined)."""
    k = kind_of(x)
    if k == ARRAY:
        return np.zeros_like(x)
    if k == SCALAR:
        return type(x)(0)
    if k == NONDIFF:
        return _NO_T
    if k == TUPLE:
        ts = tuple(zero_tangent(e) for e in x)
        return _NO_T if all(t is _NO_T for t in ts) else ts
    if k == LIST:
        return [zero_tangent(e) for e in x]
    if k == DICT:
        return {key: zero_tangent(v) for key, v in x.items()}
    return StructTangent(type(x), {n: zero_tangent(getattr(x, n)) for n in fields_of(x)})


def zero_fdata(x: Any) -> Any:
    """Fresh zero fdata for `x`: what a `CoDual` of `x` carries as `dx` (arrays: with x's
    strides, so that views of x and of its fdata pair the same elements)."""
    k = kind_of(x)
    if k == ARRAY:
        return zeros_like_exact(x)
    if k in (SCALAR, NONDIFF):
        return _NO_F
    if k == TUPLE:
        fs = tuple(zero_fdata(e) for e in x)
        return _NO_F if all(f is _NO_F for f in fs) else fs
    return zero_tangent(x)  # list, dict, struct: the full tangent is the fdata


def zero_rdata(x: Any) -> Any:
    """The zero rdata for `x`: what a pullback returns for `x` when nothing flows back."""
    k = kind_of(x)
    if k == SCALAR:
        return type(x)(0)
    if k == TUPLE:
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
    k = kind_of(x)
    if k == ARRAY:
        return _randn_array(x.shape, x.dtype, rng)
    if k == SCALAR:
        if isinstance(x, (complex, np.complexfloating)):
            return type(x)(complex(rng.standard_normal(), rng.standard_normal()))
        return type(x)(rng.standard_normal())
    if k == NONDIFF:
        return _NO_T
    if k == TUPLE:
        ts = tuple(randn_tangent(e, rng) for e in x)
        return _NO_T if all(t is _NO_T for t in ts) else ts
    if k == LIST:
        return [randn_tangent(e, rng) for e in x]
    if k == DICT:
        return {key: randn_tangent(v, rng) for key, v in x.items()}
    return StructTangent(type(x), {n: randn_tangent(getattr(x, n), rng) for n in fields_of(x)})


# ---------------------------------------------------------------------------
# split and join


def split_tangent(x: Any, t: Any) -> tuple[Any, Any]:
    """Split a full tangent `t` of `x` into `(fdata, rdata)`."""
    k = kind_of(x)
    if k == ARRAY:
        return t, _NO_R
    if k == SCALAR:
        return _NO_F, t
    if k == NONDIFF:
        return _NO_F, _NO_R
    if k == TUPLE:
        ts = (_NO_T,) * len(x) if isinstance(t, EMPTY) else t
        parts = [split_tangent(e, te) for e, te in zip(x, ts, strict=True)]
        fs = tuple(p[0] for p in parts)
        rs = tuple(p[1] for p in parts)
        f = _NO_F if all(e is _NO_F for e in fs) else fs
        r = _NO_R if all(e is _NO_R for e in rs) else rs
        return f, r
    return t, _NO_R


def join_tangent(x: Any, fdata: Any, rdata: Any) -> Any:
    """Join the halves `(fdata, rdata)` of `x`'s tangent into a full tangent."""
    k = kind_of(x)
    if k == ARRAY:
        return fdata
    if k == SCALAR:
        return rdata
    if k == NONDIFF:
        return _NO_T
    if k == TUPLE:
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
    if isinstance(s, EMPTY):
        return t
    if isinstance(t, EMPTY):
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
    if isinstance(a, EMPTY) or isinstance(b, EMPTY):
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
