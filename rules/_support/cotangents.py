"""Handing a cotangent back to an argument: the one accumulate/unbroadcast family.

A pullback receives ȳ and must give every active argument its share x̄:

* **array arguments** get it *incremented into their fdata* in place,
  `x̄ += unbroadcast(g, x.shape)` (`add_to_fdata`): when `x` was broadcast to
  the shape of `g` (implicitly, by a ufunc or `@`), the adjoint of broadcasting
  is the sum over the broadcast axes. A real `x` of a complex computation takes
  `Re g`: for real x, the adjoint of the embedding x ↦ x + 0i is the real part;
* **scalar arguments** get it as *rdata*, returned by the pullback:
  `type(x)(Σ g)` (`scalar_rdata`), the sum again being the adjoint of
  broadcasting a scalar;
* **list/tuple arguments** (`np.asarray` stacks them): element k gets `g[k]`
  (`accumulate_sequence`);
* inactive arguments, plain keyword values and integer/bool values get nothing
  (their rdata is `NoRData()`).

`accumulate(arg, g)` does whichever applies and returns the rdata. Complex values
follow the JAX/PyTorch convention: for holomorphic `y = f(x)` the cotangent is
`x̄ = conj(f'(x))·ȳ`, which keeps the real inner product Re⟨ȳ, J ẋ⟩ = Re⟨Jᴴȳ, ẋ⟩.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit import CoDual, NoFData, NoRData, zero_rdata

__all__ = [
    "ADD_REDUCE",
    "NO_F",
    "NO_R",
    "accumulate",
    "accumulate_sequence",
    "add_to_fdata",
    "add_to_fdata_pooled",
    "broadcast_axes",
    "broadcast_shape",
    "element_cotangent",
    "no_pullback",
    "no_rdata",
    "output_cotangent",
    "scalar_rdata",
    "unbroadcast",
    "zero_rdata_of",
]

NO_F = NoFData()
NO_R = NoRData()
#: `np.add.reduce(x, axis, dtype, out, keepdims)`: what np.sum computes, without its Python
#: layers (a microsecond or two a call on the hot paths)
ADD_REDUCE: Any = np.add.reduce

_INEXACT_SCALARS = (float, complex, np.floating, np.complexfloating)


# -- broadcasting ---------------------------------------------------------------------------


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


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The adjoint of broadcasting an operand of `shape`: `g` summed over the broadcast axes.

    `x ↦ broadcast_to(x, g.shape)` copies each element of x along the broadcast
    axes, so its adjoint sums `g` along them. The result has `shape` when `g` has at
    least `len(shape)` axes. When `shape` has more (extra leading unit axes, as
    `x[i] = v` drops them) `g` is read with leading unit axes, and the result has
    `len(shape)` axes, each of `shape`'s length or 1 (`dx += result` broadcasts those).
    """
    if g.shape == shape:
        return g
    if len(shape) > g.ndim:
        g = g.reshape((1,) * (len(shape) - g.ndim) + g.shape)
    lead = g.ndim - len(shape)
    axes, _ = broadcast_axes(shape, g.shape)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(g.shape[lead:]) if lead else g


# -- arrays: into fdata ------------------------------------------------------------------------


def add_to_fdata(dx: np.ndarray, g: Any) -> None:
    """`dx += unbroadcast(g, dx.shape)` in place; a real `dx` takes `Re g`.

    `g` has the shape `dx`'s primal was broadcast to, or any shape that broadcasts
    to `dx` (a kept-dims reduction cotangent, a scalar).
    """
    g = np.asarray(g)
    if g.dtype.kind == "c" and dx.dtype.kind != "c":
        g = g.real
    dx += unbroadcast(g, dx.shape)


def add_to_fdata_pooled(rule: Any, name: str, dx: np.ndarray, contrib: np.ndarray) -> None:
    """`add_to_fdata(dx, contrib)` for a real `contrib` of the full broadcast shape, reduced
    through a scratch buffer of StatefulRRule `rule` (`name`): no allocation once warm."""
    if contrib.shape == dx.shape:
        np.add(dx, contrib, out=dx)
        return
    axes, kept = broadcast_axes(dx.shape, contrib.shape)
    red = rule.scratch(f"{name}{kept}", kept, contrib.dtype)  # one buffer per reduced shape
    ADD_REDUCE(contrib, axes, None, red, True)  # np.sum(contrib, axes, keepdims=True, out=red)
    np.add(dx, red.reshape(dx.shape), out=dx)


# -- scalars: rdata ------------------------------------------------------------------------------


def scalar_rdata(x: Any, g: Any) -> Any:
    """The rdata of scalar primal `x` for cotangent `g`: `type(x)(Σ g)` (`Re` for a real x);
    `NoRData()` for an integer, bool or non-scalar `x`."""
    if not isinstance(x, _INEXACT_SCALARS):
        return NO_R
    total = np.sum(g) if isinstance(g, np.ndarray) else g
    if not isinstance(x, (complex, np.complexfloating)):
        total = np.real(total)
    return type(x)(total)


# -- any argument ----------------------------------------------------------------------------


def accumulate(v: Any, g: Any) -> Any:
    """Hand cotangent `g` to argument `v` (see the module docstring); return `v`'s rdata.

    `g` None stands for a zero cotangent: nothing is added, and the rdata is
    `zero_rdata_of(v)`.
    """
    if not isinstance(v, CoDual) or v.dx is None:
        return NO_R
    if g is None:
        return zero_rdata(v.x)
    x, dx = v.x, v.dx
    if type(dx) is np.ndarray:
        if dx.dtype.kind in "fc":
            add_to_fdata(dx, g)
        return NO_R
    if isinstance(x, (list, tuple)):
        shape = np.shape(x)
        g = np.broadcast_to(unbroadcast(np.asarray(g), shape), shape)
        if isinstance(dx, (list, tuple)) and any(isinstance(d, (list, tuple)) for d in dx):
            raise NotImplementedError(
                "rulekit: a nested list/tuple of traced values as an array argument has no "
                "rule; build the array with np.stack (e.g. np.stack([np.stack(row) for row in "
                "rows])) and pass that."
            )
        return accumulate_sequence(v, [g[k] for k in range(len(x))])
    if isinstance(dx, NoFData):
        return scalar_rdata(x, g)
    return NO_R


def accumulate_sequence(seq: CoDual, grads: Sequence[Any]) -> Any:
    """Hand element cotangents `grads[k]` (None: nothing) to a list/tuple argument.

    Array elements are incremented in place (`add_to_fdata`); scalar elements'
    cotangents are returned as a tuple of rdata (the engine's convention for traced
    scalars in a list), or added into a list fdata that holds full scalar tangents.
    The sequence's rdata is `NoRData()` when no element is a scalar.
    """
    d = seq.dx
    if d is None:
        return NO_R
    xs = seq.x
    parts: list[Any] = []
    any_scalar = False
    for k, g in enumerate(grads):
        dk = d if isinstance(d, NoFData) else d[k]
        r: Any = NO_R
        if g is not None and dk is not None:
            if isinstance(dk, np.ndarray):
                if dk.dtype.kind in "fc":
                    add_to_fdata(dk, g)
            elif isinstance(dk, NoFData):
                r = scalar_rdata(xs[k], g)
            elif isinstance(d, list) and isinstance(dk, (float, complex, np.number)):
                d[k] = dk + scalar_rdata(xs[k], g)  # a list's fdata holds full tangents
        any_scalar = any_scalar or r is not NO_R
        parts.append(r)
    return tuple(parts) if any_scalar else NO_R


def zero_rdata_of(v: Any) -> Any:
    """The zero rdata of argument `v` (`rulekit.zero_rdata` of its primal: a zero of a float
    scalar's type, NoRData for arrays, whose adjoint goes into fdata); NoRData for a plain
    keyword value."""
    return zero_rdata(v.x) if isinstance(v, CoDual) else NO_R


# -- the cotangent of an output ----------------------------------------------------------------


def output_cotangent(out: CoDual, dy: Any) -> Any:
    """ȳ: an array output's fdata, or the pullback's argument `dy` for a scalar output
    (0.0 when the engine passes none)."""
    if isinstance(out.x, np.ndarray):
        return out.dx
    return 0.0 if dy is None or isinstance(dy, NoRData) else dy


def element_cotangent(out: CoDual, dy: Any, i: int) -> Any:
    """The cotangent of element `i` of a tuple output: its fdata array, or its rdata scalar
    from `dy`; None when it has none."""
    dx = out.dx
    if isinstance(dx, tuple) and isinstance(dx[i], np.ndarray):
        return dx[i]
    if isinstance(dy, tuple):
        r = dy[i]
        if isinstance(r, (float, complex, np.number)):
            return r
    return None


# -- nothing to hand back ----------------------------------------------------------------------

_NO_RDATA = [(NO_R,) * n for n in range(12)]


def no_rdata(n: int) -> tuple[Any, ...]:
    """`n` NoRData values: a pullback's result for `n` inputs (f counted) that get nothing."""
    return _NO_RDATA[n] if n < len(_NO_RDATA) else (NO_R,) * n


def _make_no_pullback(n: int) -> Callable[[Any], tuple[Any, ...]]:
    result = no_rdata(n)

    def nothing_to_do(dy: Any) -> tuple[Any, ...]:
        return result

    return nothing_to_do


_NO_PULLBACKS = [_make_no_pullback(n) for n in range(12)]


def no_pullback(n: int) -> Callable[[Any], tuple[Any, ...]]:
    """A pullback with nothing to do, for a rule of `n` positional inputs (f counted):
    it returns `no_rdata(n)`."""
    return _NO_PULLBACKS[n] if n < len(_NO_PULLBACKS) else _make_no_pullback(n)
