"""Values as trees of leaves: cloning with exact memory layout, perturbing, comparing.

The kit treats every argument as a tree (tuples, lists, dicts of arrays and
scalars). It clones arguments so that each run of the rule or the primal works
on fresh memory with the *same strides* as the caller's (F-ordered, transposed
and negatively strided inputs stay so), perturbs them along a tangent for
finite differences, and compares values and memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from rulekit import NoFData, NoRData, NoTangent

__all__ = [
    "clone",
    "clone_array",
    "differentiable_leaf",
    "fd_tangent",
    "leaves",
    "match_tangent",
    "perturb",
    "same_value",
    "shares",
    "tree_close",
    "tree_map",
]

_EMPTY = (NoTangent, NoFData, NoRData)
_FLOAT_SCALARS = (float, complex, np.floating, np.complexfloating)
_WIDE: dict[Any, Any] = {np.dtype(np.float16): np.float64, np.dtype(np.float32): np.float64,
         np.dtype(np.complex64): np.complex128}  # fmt: skip


def differentiable_leaf(x: Any) -> bool:
    """A float/complex array or a float/complex scalar (not bool)."""
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "fc"
    return isinstance(x, _FLOAT_SCALARS)


def leaves(x: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, leaf) of a value: arrays and scalars inside tuples, lists and dicts."""
    if isinstance(x, (tuple, list)):
        for i, e in enumerate(x):
            yield from leaves(e, (*path, i))
    elif isinstance(x, dict):
        for k, e in x.items():
            yield from leaves(e, (*path, k))
    else:
        yield path, x


def tree_map(x: Any, fn: Callable[[Any], Any]) -> Any:
    """`fn` applied to every leaf of a value tree (tuples, NamedTuples, lists, dicts kept)."""
    if isinstance(x, tuple):
        vals = [tree_map(e, fn) for e in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [tree_map(e, fn) for e in x]
    if isinstance(x, dict):
        return {k: tree_map(e, fn) for k, e in x.items()}
    return fn(x)


def _extent(a: np.ndarray) -> tuple[int, int]:
    """Byte offsets (lowest, one past highest) of `a`'s elements relative to its data pointer."""
    lo = sum(s * (n - 1) for s, n in zip(a.strides, a.shape, strict=True) if s < 0)
    hi = sum(s * (n - 1) for s, n in zip(a.strides, a.shape, strict=True) if s > 0)
    return lo, hi + a.itemsize


def clone_array(a: np.ndarray, dtype: Any = None, fill: str = "copy") -> np.ndarray:
    """A fresh array with `a`'s shape and strides (compact if `a` overlaps itself).

    `fill` is "copy" (a's values), "zeros" or "empty". A new `dtype` keeps the
    element order but not the byte strides. Read-only arrays give read-only clones.
    """
    dt = a.dtype if dtype is None else np.dtype(dtype)
    overlapping = any(s == 0 and n > 1 for s, n in zip(a.strides, a.shape, strict=True))
    if a.size == 0 or overlapping or dt != a.dtype:
        order: Any = "F" if (a.flags.f_contiguous and not a.flags.c_contiguous) else "C"
        maker: Any = np.zeros if fill == "zeros" else np.empty
        out = maker(a.shape, dt, order=order)
    else:
        lo, hi = _extent(a)
        buf = np.zeros(hi - lo, np.uint8) if fill == "zeros" else np.empty(hi - lo, np.uint8)
        out = np.ndarray(a.shape, dt, buffer=buf, offset=-lo, strides=a.strides)
    if fill == "copy":
        np.copyto(out, a, casting="unsafe")
    if not a.flags.writeable:
        out.flags.writeable = False
    return out


def clone(x: Any, dtype_map: dict[Any, Any] | None = None) -> Any:
    """Deep copy of a value tree; arrays keep their strides. `dtype_map` widens dtypes."""

    def leaf(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            dt = None if dtype_map is None else dtype_map.get(v.dtype)
            return clone_array(v, dt)
        if dtype_map is not None and isinstance(v, (np.floating, np.complexfloating)):
            wide = dtype_map.get(v.dtype)
            return v if wide is None else wide(v)
        return v

    return tree_map(x, leaf)


def widen(x: Any) -> Any:
    """`clone` with float16/float32/complex64 leaves widened to double precision."""
    return clone(x, _WIDE)


def has_narrow(x: Any) -> bool:
    """Whether any leaf is float16/float32/complex64 (an array or a numpy scalar)."""
    return any(isinstance(v, (np.ndarray, np.generic)) and v.dtype in _WIDE for _, v in leaves(x))


def perturb(x: Any, t: Any, h: float) -> Any:
    """`x + h·t` for a value tree `x` and its full tangent `t` (fresh memory, same layout)."""
    if isinstance(t, _EMPTY):
        return clone(x)
    if isinstance(x, np.ndarray):
        if x.dtype.kind not in "fc":
            return clone_array(x)
        out = clone_array(x, fill="empty") if x.flags.writeable else clone_array(x)
        out.flags.writeable = True
        np.add(x, h * np.asarray(t, dtype=x.dtype), out=out, casting="unsafe")
        return out
    if isinstance(x, _FLOAT_SCALARS):
        return type(x)(x + h * t)
    if isinstance(x, tuple):
        vals = [perturb(e, te, h) for e, te in zip(x, t, strict=True)]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [perturb(e, te, h) for e, te in zip(x, t, strict=True)]
    if isinstance(x, dict):
        return {k: perturb(e, t[k], h) for k, e in x.items()}
    return x


def fd_tangent(xp: Any, xm: Any, h: float) -> Any:
    """The central difference `(xp − xm) / 2h` as a full tangent of the value tree."""
    if isinstance(xp, np.ndarray):
        if xp.dtype.kind not in "fc":
            return NoTangent()
        wide = np.complex128 if xp.dtype.kind == "c" else np.float64
        return (xp.astype(wide) - xm.astype(wide)) / (2 * h)
    if isinstance(xp, _FLOAT_SCALARS) and not isinstance(xp, bool):
        return (
            (complex(xp) - complex(xm)) / (2 * h)
            if isinstance(xp, (complex, np.complexfloating))
            else (float(xp) - float(xm)) / (2 * h)
        )
    if isinstance(xp, (tuple, list)):
        ts = [fd_tangent(a, b, h) for a, b in zip(xp, xm, strict=True)]
        if isinstance(xp, tuple) and all(isinstance(e, NoTangent) for e in ts):
            return NoTangent()
        return tuple(ts) if isinstance(xp, tuple) else ts
    if isinstance(xp, dict):
        return {k: fd_tangent(v, xm[k], h) for k, v in xp.items()}
    return NoTangent()


def finite(t: Any) -> bool:
    """Whether every number in a tangent tree is finite."""
    for _, v in leaves(t):
        if isinstance(v, _EMPTY) or v is None:
            continue
        if isinstance(v, (np.ndarray, *_FLOAT_SCALARS)) and not np.all(np.isfinite(v)):
            return False
    return True


def same_value(a: Any, b: Any) -> bool:
    """Bitwise equality of two value trees (NaNs at the same places count as equal)."""
    la, lb = list(leaves(a)), list(leaves(b))
    if len(la) != len(lb):
        return False
    for (_, x), (_, y) in zip(la, lb, strict=True):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
                return False
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.dtype.kind in "fc":
                if not np.array_equal(x, y, equal_nan=True):
                    return False
            elif not np.array_equal(x, y):
                return False
        elif x is not y and not (x == y or (x != x and y != y)):
            return False
    return True


def shares(a: Any, b: Any) -> bool:
    """Whether any array leaf of `a` shares memory with any array leaf of `b`."""
    arrs_a = [v for _, v in leaves(a) if isinstance(v, np.ndarray) and v.size]
    arrs_b = [v for _, v in leaves(b) if isinstance(v, np.ndarray) and v.size]
    return any(np.shares_memory(x, y) for x in arrs_a for y in arrs_b)


def max_abs(x: Any) -> float:
    m = 0.0
    for _, v in leaves(x):
        if isinstance(v, np.ndarray) and v.dtype.kind in "fciub" and v.size:
            with np.errstate(invalid="ignore"):
                fin = np.abs(v[np.isfinite(v)]) if v.dtype.kind in "fc" else np.abs(v)
            if fin.size:
                m = max(m, float(np.max(fin)))
        elif isinstance(v, (int, float, complex, np.number)) and not isinstance(v, bool):
            m = max(m, abs(complex(v))) if np.isfinite(v) else m
    return m


def match_tangent(y: Any, t: Any) -> Any:
    """Tangent `t` of a primal result, fitted to a rule's output `y`: where `y` has a 0-d
    array and `t` a scalar (numpy returned a scalar there), a 0-d array of `y`'s dtype."""
    if isinstance(y, np.ndarray) and y.ndim == 0 and isinstance(t, _FLOAT_SCALARS):
        return np.array(t, dtype=y.dtype)
    if isinstance(y, (tuple, list)) and isinstance(t, (tuple, list)) and len(y) == len(t):
        out = [match_tangent(a, b) for a, b in zip(y, t, strict=True)]
        return tuple(out) if isinstance(t, tuple) else out
    if isinstance(y, dict) and isinstance(t, dict):
        return {k: match_tangent(y.get(k), v) for k, v in t.items()}
    return t


def tree_close(
    got: Any,
    want: Any,
    rtol: float,
    path: str = "output",
    floor: float = 0.0,
    who: str = "the reference",
    scalar_as_0d: bool = False,
) -> str | None:
    """None if `got` has `want`'s structure, types, dtypes, shapes and values; else why not.

    Values are compared with `rtol` relative to the largest magnitude in `want`,
    plus an absolute `floor` (rounding level of the inputs: an exact zero that
    another algorithm computes as 1e-17 is the same result). `who` names where
    `want` comes from in the message ("np.cos", "the primal function g").
    `scalar_as_0d`: a 0-d array of the same dtype stands for a float or complex
    scalar (a rule may return a 0-d array where NumPy returns a scalar).
    """
    if isinstance(want, np.ndarray):
        if not isinstance(got, np.ndarray):
            return f"{path} is {_kind(got)}; {who} gives {_kind(want)}"
        if got.dtype != want.dtype or got.shape != want.shape:
            return (
                f"{path} has dtype {got.dtype} and shape {got.shape}; {who} gives dtype "
                f"{want.dtype} and shape {want.shape}"
            )
        if want.dtype.kind in "fc":
            scale = max_abs(want)
            if not np.allclose(got, want, rtol=rtol, atol=rtol * scale + floor, equal_nan=True):
                err = np.nanmax(np.abs(got - want)) if want.size else 0.0
                return f"{path} differs from what {who} gives (max abs difference {err:.3g})"
        elif not np.array_equal(got, want):
            return f"{path} differs from what {who} gives"
        return None
    if isinstance(want, (tuple, list)):
        if type(got) is not type(want) or len(got) != len(want):
            return (
                f"{path} is {type(got).__name__} of length {_len(got)}; {who} gives "
                f"{type(want).__name__} of length {len(want)}"
            )
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            why = tree_close(g, w, rtol, f"{path}[{i}]", floor, who, scalar_as_0d)
            if why:
                return why
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return f"{path} has other keys than what {who} gives"
        for k in want:
            why = tree_close(got[k], want[k], rtol, f"{path}[{k!r}]", floor, who, scalar_as_0d)
            if why:
                return why
        return None
    if (
        scalar_as_0d
        and isinstance(got, np.ndarray)
        and got.ndim == 0
        and isinstance(want, _FLOAT_SCALARS)
    ):
        want_dtype = want.dtype if isinstance(want, np.generic) else np.asarray(want).dtype
        if got.dtype != want_dtype:
            return f"{path} is a 0-d {got.dtype} array; {who} gives {_kind(want)}"
        got = want_dtype.type(got[()]) if isinstance(want, np.generic) else got[()].item()
    if type(got) is not type(want):
        return f"{path} is {_kind(got)}; {who} gives {_kind(want)}"
    if isinstance(want, _FLOAT_SCALARS):
        if not np.isfinite(want):
            same = got == want or (np.isnan(got) and np.isnan(want))
            return None if same else f"{path} is {got!r}; {who} gives {want!r}"
        tol = rtol * abs(complex(want)) + floor
        if not np.isclose(got, want, rtol=rtol, atol=tol, equal_nan=True):
            return f"{path} is {got!r}; {who} gives {want!r}"
        return None
    try:
        equal = bool(got == want)
    except Exception:
        equal = got is want
    return None if equal else f"{path} is {got!r}; {who} gives {want!r}"


def _kind(x: Any) -> str:
    """`a float64 array of shape (3,)`, `a 0-d float64 array`, `float64 0.5`."""
    if isinstance(x, np.ndarray):
        return f"a 0-d {x.dtype} array" if x.ndim == 0 else f"a {x.dtype} array of shape {x.shape}"
    return f"{type(x).__name__} {x!r:.40}"


def _len(x: Any) -> Any:
    try:
        return len(x)
    except TypeError:
        return "-"
