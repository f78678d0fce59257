"""Helpers shared by the bundled rules: unwrapping, broadcasting adjoints, rdata, patterns.

Conventions every bundled rule follows (see docs/concepts.md):

* an argument is *active* when its CoDual's `dx` is not None; no work is spent
  on the adjoint of an inactive one;
* array adjoints are *incremented* into `dx` in place (reduced over broadcast
  axes by `accumulate`); scalar adjoints are returned as rdata of the
  scalar's own type (`scalar_rdata`);
* complex values follow the convention of JAX and PyTorch: for a holomorphic
  `y = f(x)` the cotangent is `x̄ = conj(f'(x)) · ȳ`, which makes the
  real inner product Re⟨ȳ, J ẋ⟩ = Re⟨Jᴴ ȳ, ẋ⟩ hold.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from rulekit import Array, CoDual, NoFData, NoRData
from rules._support.layout import new_fdata

__all__ = [
    "ADD_REDUCE",
    "NO_F",
    "NO_R",
    "Numeric",
    "Real",
    "accumulate",
    "add_unbroadcast",
    "broadcast_axes",
    "broadcast_shape",
    "fdata",
    "filled_0d",
    "is_inexact_array",
    "new_output",
    "primal",
    "randn",
    "scalar_rdata",
    "unbroadcast",
]

NO_F = NoFData()
NO_R = NoRData()
#: `np.add.reduce(x, axis, dtype, out, keepdims)`: what np.sum computes, without its Python
#: layers (a microsecond or two a call on the hot paths)
ADD_REDUCE: Any = np.add.reduce

#: Any numeric operand of a ufunc: arrays of any numeric/bool dtype and Python/numpy scalars.
Numeric = Union[Array[np.number], Array[np.bool_], float, int, bool, complex, np.number, np.bool_]
#: Real floating operands (arrays or scalars).
Real = Union[Array[np.floating], float, np.floating]


def primal(v: Any) -> Any:
    """The primal of a CoDual, or the value itself (keyword arguments may be plain)."""
    return v.x if isinstance(v, CoDual) else v


def fdata(v: Any) -> Any:
    """The fdata of an active CoDual, else None (inactive, or a plain keyword value)."""
    return v.dx if isinstance(v, CoDual) else None


def is_inexact_array(y: Any) -> bool:
    """Whether `y` is a float or complex ndarray (an output that carries fdata)."""
    return isinstance(y, np.ndarray) and y.dtype.kind in "fc"


def new_output(y: Any) -> CoDual:
    """A CoDual for a freshly computed output: zero fdata for arrays (laid out like them,
    `rules._support.layout.zeros_like_exact`), NoFData for scalars."""
    return CoDual(y, new_fdata(y))


def broadcast_shape(s: tuple[int, ...], t: tuple[int, ...]) -> tuple[int, ...]:
    """np.broadcast_shapes for two shapes, without its temporary 0-d arrays (an allocation
    the stateful rules must not make); ValueError if they do not broadcast."""
    n = max(len(s), len(t))
    s, t = (1,) * (n - len(s)) + s, (1,) * (n - len(t)) + t
    out = []
    for i, j in zip(s, t, strict=True):
        if i != j and i != 1 and j != 1:
            raise ValueError(f"shapes {s} and {t} do not broadcast")
        out.append(j if i == 1 else i)
    return tuple(out)


def broadcast_axes(
    shape: tuple[int, ...], full: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`(axes, kept)`: the axes of `full` along which an operand of `shape` was broadcast
    to `full` (its missing leading axes and its unit axes), and `full` with those set to 1."""
    lead = len(full) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and full[lead + i] != 1
    )
    kept = tuple(1 if i in axes else n for i, n in enumerate(full))
    return axes, kept


def filled_0d(store: dict[str, np.ndarray], c: Any, dtype: np.dtype) -> np.ndarray:
    """`c` in a 0-d array of `dtype` kept in `store` (one per dtype): a ufunc operand that
    allocates nothing, where a Python number would be made into a new 0-d array."""
    s = store.get(dtype.char)
    if s is None:
        s = store[dtype.char] = np.empty((), dtype)
    s.fill(c)
    return s


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum `g` over the axes along which an operand of `shape` was broadcast to `g.shape`."""
    if g.shape == shape:
        return g
    axes, _ = broadcast_axes(shape, g.shape)
    out = g.sum(axis=axes, keepdims=True) if axes else g
    return out.reshape(shape)


def add_unbroadcast(rule: Any, name: str, dx: np.ndarray, contrib: np.ndarray) -> None:
    """dx += contrib summed over the axes dx was broadcast along (contrib has the full
    shape), through a scratch buffer of StatefulRRule `rule`: no allocation once warm."""
    if contrib.shape == dx.shape:
        np.add(dx, contrib, out=dx)
        return
    axes, kept = broadcast_axes(dx.shape, contrib.shape)
    red = rule.scratch(f"{name}{kept}", kept, contrib.dtype)  # one buffer per reduced shape
    ADD_REDUCE(contrib, axes, None, red, True)  # np.sum(contrib, axes, keepdims=True, out=red)
    np.add(dx, red.reshape(dx.shape), out=dx)


def _real_if_needed(g: Any, dtype: np.dtype) -> Any:
    # A real operand of a complex computation gets the real part of its cotangent.
    if np.iscomplexobj(g) and dtype.kind != "c":
        return np.real(g)
    return g


def accumulate(cd: CoDual, g: Any) -> Any:
    """Add the cotangent `g` (broadcast shape) into argument `cd`; return its rdata.

    Arrays: `cd.dx += unbroadcast(g)` in place, rdata `NoRData()`. Scalars: the
    rdata `type(x)(Σ g)`. Inactive arguments and non-differentiable ones: nothing.
    """
    dx = cd.dx
    if dx is None:
        return NO_R
    if isinstance(dx, np.ndarray):
        g = _real_if_needed(np.asarray(g), dx.dtype)
        dx += unbroadcast(g, dx.shape)
        return NO_R
    return scalar_rdata(cd.x, g)


def scalar_rdata(x: Any, g: Any) -> Any:
    """The rdata of scalar primal `x` given a cotangent `g` (summed if an array)."""
    if isinstance(x, (bool, int, np.integer, np.bool_)):
        return NO_R
    if not isinstance(x, (float, complex, np.floating, np.complexfloating)):
        return NO_R
    total = np.sum(g) if isinstance(g, np.ndarray) else g
    if not isinstance(x, (complex, np.complexfloating)):
        total = np.real(total)
    return type(x)(total)


def randn(*shape: int, seed: int = 0, dtype: Any = np.float64) -> np.ndarray:
    """Seeded standard-normal data of `shape` and `dtype` for the rules' call examples.

    A complex `dtype` draws the imaginary parts from `seed + 1`.
    """
    x = np.asarray(np.random.default_rng(seed).normal(size=shape))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * np.random.default_rng(seed + 1).normal(size=shape)
    return np.asarray(x, dtype=dtype)
