"""Cotangent helpers for rule authors: activity, unbroadcasting, accumulation.

The one vocabulary every rule needs (the declarations `rulekit.elementwise` and
`rulekit.linear` use it; the bundled rules' `rules._support.cotangents` re-exports it).
A pullback receives ȳ and must give every active argument its share x̄:

* **array arguments** get it *incremented into their fdata* in place,
  `x̄ += unbroadcast(g, x.shape)` (`add_to_fdata`): when `x` was broadcast to the
  shape of `g`, the adjoint of broadcasting is the sum over the broadcast axes. A
  real `x` of a complex computation takes `Re g`: for real x, the adjoint of the
  embedding x ↦ x + 0i is the real part;
* **scalar arguments** get it as *rdata*, returned by the pullback: `type(x)(Σ g)`
  (`scalar_rdata`), the sum again being the adjoint of broadcasting a scalar;
* **list/tuple arguments** (`np.asarray` stacks them): element k gets `g[k]`
  (`accumulate_sequence`);
* inactive arguments, plain keyword values and integer/bool values get nothing
  (their rdata is `NoRData()`; `no_rdata(n)`, `no_pullback(n)` for a whole call).

`accumulate(arg, g)` does whichever applies and returns the rdata. `is_active(arg)`
says whether an argument wants a cotangent at all, `differentiable(arg)` the same for
an array or scalar operand (not a list). Complex values follow the JAX/PyTorch
convention: for holomorphic `y = f(x)` the cotangent is `x̄ = conj(f'(x))·ȳ`, which
keeps the real inner product Re⟨ȳ, J ẋ⟩ = Re⟨Jᴴȳ, ẋ⟩.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

import numpy as np

from rulekit._codual import CoDual
from rulekit._tangent_types import NoFData, NoRData

__all__ = [
    "accumulate",
    "accumulate_sequence",
    "add_to_fdata",
    "broadcast_axes",
    "differentiable",
    "is_active",
    "no_pullback",
    "no_rdata",
    "scalar_rdata",
    "unbroadcast",
]

_nd = np.ndarray
_NO_R = NoRData()
_INEXACT_SCALARS = (float, complex, np.inexact)


# -- activity -------------------------------------------------------------------------------


def differentiable(cd: Any) -> bool:
    """Whether operand `cd` is active (`dx` is not None) and carries a derivative: a
    float/complex array or scalar (integer and bool operands are constants). Anything
    but a CoDual (a plain keyword value, None) is not; nor is a list (see `is_active`)."""
    dx = getattr(cd, "dx", None)
    if dx is None:
        return False
    if type(dx) is _nd:
        return dx.dtype.kind in "fc"
    return isinstance(cd.x, _INEXACT_SCALARS)


def is_active(v: Any) -> TypeGuard[CoDual]:
    """Whether `v` is a differentiated argument: a CoDual with `dx is not None` whose value
    is inexact (a float/complex array or scalar, `differentiable`) or a list/tuple (whose
    fdata holds its elements')."""
    if not isinstance(v, CoDual):
        return False
    if differentiable(v):
        return True
    dx = v.dx
    return dx is not None and type(dx) is not _nd and isinstance(v.x, (list, tuple))


# -- broadcasting ---------------------------------------------------------------------------


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


def unbroadcast(g: Any, shape: tuple[int, ...]) -> Any:
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


# -- handing a cotangent to an argument -----------------------------------------------------


def add_to_fdata(dx: np.ndarray, g: Any) -> None:
    """`x̄ += unbroadcast(g, x̄.shape)` in place into fdata `dx`; a real `dx` takes `Re g`.

    `g` has the shape `dx`'s primal was broadcast to, or any shape that broadcasts
    to `dx` (a kept-dims reduction cotangent, a scalar).
    """
    g = np.asarray(g)
    if g.dtype.kind == "c" and dx.dtype.kind != "c":
        g = g.real
    dx += unbroadcast(g, dx.shape)


def scalar_rdata(x: Any, g: Any) -> Any:
    """The rdata of scalar primal `x` for cotangent `g`: `type(x)(Σ g)` (`Re` for a real x);
    `NoRData()` for an integer, bool or non-scalar `x`."""
    if not isinstance(x, _INEXACT_SCALARS):
        return _NO_R
    total = np.sum(g) if type(g) is _nd else g
    if not isinstance(x, (complex, np.complexfloating)):
        total = np.real(total)
    return type(x)(total)


def accumulate(v: Any, g: Any) -> Any:
    """Hand cotangent `g` (of the broadcast shape; None: zero) to argument `v`; return its
    rdata (see the module docstring).

    Arrays: `v.dx += unbroadcast(g)` in place (the real part for a real operand), rdata
    NoRData. Scalars: rdata `type(x)(Σg)`. Lists/tuples: `g` (broadcast to the stacked
    shape) split by element, `accumulate_sequence`. Inactive, integer or non-CoDual
    arguments, and `g` None: NoRData.
    """
    if g is None or not isinstance(v, CoDual):
        return _NO_R
    x, dx = v.x, v.dx
    if dx is None:
        return _NO_R
    if type(dx) is _nd:
        if dx.dtype.kind in "fc":
            add_to_fdata(dx, g)
        return _NO_R
    if isinstance(x, (list, tuple)):
        shape = np.shape(x)
        g = np.broadcast_to(unbroadcast(np.asarray(g), shape), shape)
        return accumulate_sequence(v, [g[k] for k in range(len(x))])
    if isinstance(dx, NoFData):
        return scalar_rdata(x, g)
    return _NO_R


def accumulate_sequence(seq: CoDual, grads: Sequence[Any]) -> Any:
    """Hand element cotangents `grads[k]` (None: nothing) to a list/tuple argument.

    Array elements are incremented in place (`add_to_fdata`); scalar elements'
    cotangents are returned as a tuple of rdata (the engine's convention for traced
    scalars in a list), or added into a list fdata that holds full scalar tangents.
    The sequence's rdata is `NoRData()` when no element is a scalar. A nested
    list/tuple element raises NotImplementedError (its cotangent would be lost).
    """
    d = seq.dx
    if d is None:
        return _NO_R
    xs = seq.x
    parts: list[Any] = []
    any_scalar = False
    for k, g in enumerate(grads):
        dk = d if isinstance(d, NoFData) else d[k]
        r: Any = _NO_R
        if g is not None and dk is not None:
            if type(dk) is _nd:
                if dk.dtype.kind in "fc":
                    add_to_fdata(dk, g)
            elif isinstance(dk, NoFData):
                r = scalar_rdata(xs[k], g)
            elif isinstance(d, list) and isinstance(dk, (float, complex, np.number)):
                d[k] = dk + scalar_rdata(xs[k], g)  # a list's fdata holds full tangents
            elif isinstance(dk, (list, tuple)):
                raise NotImplementedError(
                    "rulekit: a nested list/tuple of traced values as an array argument has "
                    "no rule; build the array with np.stack (e.g. np.stack([np.stack(row) for "
                    "row in rows])) and pass that."
                )
        any_scalar = any_scalar or r is not _NO_R
        parts.append(r)
    return tuple(parts) if any_scalar else _NO_R


# -- nothing to hand back -------------------------------------------------------------------

_NO_RDATA = [(_NO_R,) * n for n in range(12)]


def no_rdata(n: int) -> tuple[Any, ...]:
    """`n` NoRData values: a pullback's result for `n` inputs (f counted) that get nothing."""
    return _NO_RDATA[n] if n < len(_NO_RDATA) else (_NO_R,) * n


def _make_no_pullback(n: int) -> Callable[[Any], tuple[Any, ...]]:
    result = no_rdata(n)

    def nothing_to_do(dy: Any) -> tuple[Any, ...]:
        return result

    return nothing_to_do


_NO_PULLBACKS = [_make_no_pullback(n) for n in range(12)]


def no_pullback(n: int) -> Callable[[Any], tuple[Any, ...]]:
    """A pullback with nothing to do, for a rule of `n` positional inputs (f counted): it
    returns `no_rdata(n)` (x̄ += 0 for every input)."""
    return _NO_PULLBACKS[n] if n < len(_NO_PULLBACKS) else _make_no_pullback(n)
