"""Forward rules and differentiable pullbacks for `np.cross` and `np.trapezoid` (imported by
`rules.numpy.forward_misc`).

    cross:      ẏ = ȧ × b + a × ḃ;  ā = conj(b) × ȳ,  b̄ = ȳ × conj(a)  (2-vectors: z = 0)
    trapezoid:  I = Σ Δxᵢ (yᵢ + yᵢ₊₁)/2 is bilinear in y and Δx:
                İ = trapezoid(ẏ, x) + trapezoid(y, ẋ)  (or + trapezoid(y, dx=ḋx));
                ȳ = Ī·(Δxᵢ₋₁ + Δxᵢ)/2,  x̄ = Dᵀ(Ī·(yᵢ + yᵢ₊₁)/2),  d̄x = Σ Ī·trapezoid(y, dx=1)

Plain numpy on the arguments: the rules trace (differentiable again).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Dual, unbroadcast
from rulekit._declared_rules import shaped_like
from rules._support.forward import bind_by_name, dual_tangent, dual_value, register_like
from rules.numpy.forward_calculus import _diff_adjoint
from rules.numpy.ufuncs.forward import to_arg

__all__: list[str] = []


# -- cross --------------------------------------------------------------------------------------


def cross_frule(f: Dual, a: Dual, b: Dual, *args: Dual, **kw: Any) -> Dual:
    """ẏ = ȧ × b + a × ḃ."""
    rest = [r.x for r in args]
    y = np.cross(a.x, b.x, *rest, **kw)
    t: Any = None
    if a.dx is not None:
        t = np.cross(a.dx, b.x, *rest, **kw)
    if b.dx is not None:
        tb = np.cross(a.x, b.dx, *rest, **kw)
        t = tb if t is None else t + tb
    return Dual(y, None if t is None else shaped_like(t, y))


def _as3(v: Any) -> Any:
    """Vectors along the last axis padded with z = 0 to 3 components."""
    if np.shape(v)[-1] == 3:
        return v
    z = np.zeros((*np.shape(v)[:-1], 1), getattr(v, "dtype", np.float64))
    return np.concatenate([v, z], axis=-1)


def cross_vjp(active: Sequence[bool], a: Any, b: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
    """ā = conj(b) × ȳ, b̄ = ȳ × conj(a) (vectors moved along the last axis and back)."""
    p = bind_by_name(np.cross, (a, b, *args), kw)
    y = np.cross(a, b, *args, **kw)
    axis = p["axis"]
    axa, axb, axc = (axis,) * 3 if axis is not None else (p["axisa"], p["axisb"], p["axisc"])
    A, B = np.moveaxis(a, axa, -1), np.moveaxis(b, axb, -1)
    da, db = np.shape(A)[-1], np.shape(B)[-1]

    def pullback(g: Any) -> tuple[Any, ...]:
        out: list[Any] = [None] * (2 + len(args))
        if g is None:
            return tuple(out)
        if da == 2 and db == 2:
            z = np.zeros(np.shape(g), getattr(g, "dtype", np.float64))
            g3 = np.stack([z, z, g], axis=-1)
        else:
            g3 = np.moveaxis(g, axc, -1)
        if active[0]:
            ga = np.cross(np.conjugate(_as3(B)), g3)[..., :da]
            out[0] = to_arg(np.moveaxis(unbroadcast(ga, np.shape(A)), -1, axa), a)
        if active[1]:
            gb = np.cross(g3, np.conjugate(_as3(A)))[..., :db]
            out[1] = to_arg(np.moveaxis(unbroadcast(gb, np.shape(B)), -1, axb), b)
        return tuple(out)

    return y, pullback


register_like(np.cross, frule=cross_frule, vjp=cross_vjp)


# -- trapezoid ----------------------------------------------------------------------------------


def trapezoid_frule(f: Dual, y: Dual, *args: Dual, **kw: Any) -> Dual:
    """İ = trapezoid(ẏ, x, dx) + trapezoid(y, ẋ) (or + trapezoid(y, dx=ḋx))."""
    p = bind_by_name(np.trapezoid, (y, *args), kw)
    x, dx, axis = p["x"], p["dx"], dual_value(p["axis"])
    val = np.trapezoid(y.x, dual_value(x), dual_value(dx), axis)
    t: Any = None
    if y.dx is not None:
        t = np.trapezoid(y.dx, dual_value(x), dual_value(dx), axis)
    if dual_value(x) is not None and dual_tangent(x) is not None:
        tx = np.trapezoid(y.x, dual_tangent(x), 1.0, axis)
        t = tx if t is None else t + tx
    elif dual_value(x) is None and dual_tangent(dx) is not None:
        td = np.trapezoid(y.x, None, dual_tangent(dx), axis)
        t = td if t is None else t + td
    return Dual(val, None if t is None else shaped_like(t, val))


def _along(v: Any, nd: int, axis: int) -> Any:
    """A 1-d `v` shaped to lie along `axis` of an nd-array."""
    return np.reshape(v, [np.shape(v)[0] if k == axis else 1 for k in range(nd)])


def trapezoid_vjp(active: Sequence[bool], y: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
    """ȳ = Ī·(Δxᵢ₋₁ + Δxᵢ)/2, x̄ = Dᵀ(Ī·conj(yᵢ + yᵢ₊₁)/2), d̄x = Σ Ī·conj(trapezoid(y, dx=1))."""
    p = bind_by_name(np.trapezoid, (y, *args), kw)
    x, dx = p["x"], p["dx"]
    nd = np.ndim(y)
    axis = p["axis"] % nd
    val = np.trapezoid(y, x, dx, p["axis"])
    n = np.shape(y)[axis]
    lead = (slice(None),) * axis
    names = ["y", *list(inspect.signature(np.trapezoid).parameters)[1 : 1 + len(args)]]

    def pullback(g: Any) -> tuple[Any, ...]:
        out: list[Any] = [None] * len(names)
        if g is None:
            return tuple(out)
        ge = np.expand_dims(g, axis) if np.ndim(g) else g
        if x is None:
            d = dx * _along(np.concatenate([[0.5], np.ones(max(n - 2, 0)), [0.5]])[:n], nd, axis)
            wy = d
        else:
            dd = _along(np.diff(x), nd, axis) if np.ndim(x) == 1 else np.diff(x, axis=axis)
            wy = _pair_sum(dd, axis) / 2.0
        if active[0]:
            out[0] = to_arg(np.conjugate(wy) * ge if np.iscomplexobj(wy) else wy * ge, y)
        mid = (y[(*lead, slice(1, None))] + y[(*lead, slice(None, -1))]) / 2.0
        for i, name in enumerate(names):
            if not active[i]:
                continue
            if name == "x" and x is not None:
                gx = _diff_adjoint(np.conjugate(mid) * ge, axis)
                if np.ndim(x) == 1 and nd > 1:
                    gx = np.sum(gx, axis=tuple(k for k in range(nd) if k != axis))
                out[i] = to_arg(gx, x)
            elif name == "dx" and x is None:
                out[i] = to_arg(np.sum(np.conjugate(np.sum(mid, axis=axis)) * g), dx)
        return tuple(out)

    return val, pullback


def _pair_sum(d: Any, axis: int) -> Any:
    """[d₀, d₀ + d₁, …, d_{m−2} + d_{m−1}, d_{m−1}] along axis (Δxᵢ₋₁ + Δxᵢ, with 0 ends)."""
    shape = list(np.shape(d))
    shape[axis] = 1
    z = np.zeros(shape, getattr(d, "dtype", np.float64))
    return np.concatenate([z, d], axis=axis) + np.concatenate([d, z], axis=axis)


register_like(np.trapezoid, frule=trapezoid_frule, vjp=trapezoid_vjp)
