"""Rules for numpy's numeric helpers: diff, gradient, cross, nan_to_num.

All but `cross` are linear in their differentiable arguments (`cross` is
bilinear); the adjoints:

    y = diff(x, n, axis, prepend=p, append=q)
        ⇒  z̄ = Dᵀⁿ ȳ for z = [p, x, q] along axis (Dᵀg = [−g₀, g₀−g₁, …, g_last]);
           x̄, p̄, q̄ get their blocks of z̄ (a 0-d p or q: the sum of its column)
    y = gradient(x, *h, axis, edge_order)
        ⇒  x̄ += Gₐᵀ ȳₐ for each axis a, Gₐ numpy's banded stencil along a
           (its coefficients are read off numpy by three probe vectors)
    y = cross(a, b)           ⇒  ā += conj(b) × ȳ,   b̄ += ȳ × conj(a)
                                 (2-vectors are 3-vectors with z = 0)
    y = nan_to_num(x)         ⇒  x̄ += ȳ where x is finite (real and imaginary parts
                                 separately); the replacement values (nan=, posinf=,
                                 neginf=) get Σ ȳ over the positions they filled

A scalar spacing of `gradient` is differentiable (it scales the result by 1/h);
coordinate arrays are constants (a traced one raises).
`nan_to_num(copy=False)` overwrites x in place: its pullback zeroes x̄ where the
non-finite values were and restores them (the mutation convention).
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

import rulekit
from rulekit import Array, CoDual, Vararg, example, rrule
from rules._support.arguments import as_array, is_active, primals
from rules._support.binding import binder
from rules._support.cotangents import (
    NO_R,
    accumulate,
    add_to_fdata,
    output_cotangent,
    scalar_rdata,
    unbroadcast,
)
from rules._support.examples import randn
from rules._support.outputs import inactive_output, is_inexact_array, new_output
from rules._support.patterns import Inexact

__all__ = [
    "cross_rrule",
    "diff_rrule",
    "gradient_rrule",
    "nan_to_num_rrule",
]

NumArray: Any = Union[Array[np.inexact], Array[np.integer]]


# -- diff -------------------------------------------------------------------------------------

_bind_diff = binder(np.diff)


def _diff_adjoint(g: np.ndarray, axis: int) -> np.ndarray:
    """Dᵀg for y = x[1:] − x[:-1] along `axis`: [−g₀, g₀ − g₁, …, g_{m−2} − g_{m−1}, g_{m−1}]."""
    g = np.moveaxis(g, axis, 0)
    out = np.zeros((g.shape[0] + 1, *g.shape[1:]), dtype=g.dtype)
    out[1:] += g
    out[:-1] -= g
    return np.moveaxis(out, 0, axis)


def _length(v: np.ndarray, axis: int) -> int:
    """How many positions along `axis` a prepend/append value fills (a 0-d one: 1)."""
    return 1 if v.ndim == 0 else v.shape[axis]


def diff_rrule(f: CoDual, a: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = diff(x, n, axis, prepend, append): z̄ = (Dᵀ)ⁿ ȳ split over prepend, x, append."""
    b = _bind_diff((a, *args), kwargs)
    p = primals(args, kwargs)
    y = np.diff(a.x, *p[0], **p[1])
    n = b.value("n")
    nargs = 2 + len(args)
    if n == 0:  # numpy returns x itself
        return CoDual(y, a.dx), inactive_output(None, nargs)[1]
    pre, app = b.arg("prepend"), b.arg("append")
    if not (is_active(a) or is_active(pre) or is_active(app)) or not is_inexact_array(y):
        return inactive_output(y, nargs)
    axis = b.value("axis") % np.ndim(a.x)
    npre = 0 if pre is np._NoValue else _length(as_array(pre), axis)
    nx = np.shape(a.x)[axis]
    out = new_output(y)

    def diff_pullback(dy: Any) -> tuple[Any, ...]:
        g = out.dx
        for _ in range(n):
            g = _diff_adjoint(g, axis)
        lead = (slice(None),) * axis
        grads = {"a": accumulate(a, g[(*lead, slice(npre, npre + nx))])}
        if pre is not np._NoValue:
            grads["prepend"] = accumulate(pre, g[(*lead, slice(0, npre))])
        if app is not np._NoValue:
            grads["append"] = accumulate(app, g[(*lead, slice(npre + nx, None))])
        return b.rdata(grads)

    return out, diff_pullback


def _diff_examples() -> list[Any]:
    return [
        example(randn(5)),
        example(randn(3, 4, dtype=np.float32), 2, 0),
        example(randn(2, 4), prepend=randn(2, 1, seed=1), append=0.5),
        example(randn(4, dtype=np.complex128), 1, -1, np.float64(1.5), randn(2, seed=2)),
    ]


rrule.register(np.diff, NumArray, Vararg[Any], examples=_diff_examples)(diff_rrule)


# -- gradient ---------------------------------------------------------------------------------

_bind_gradient = binder(np.gradient)


def _stencil(n: int, h: Any, edge_order: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy's gradient along one axis of length n as a banded matrix: row i is
    G[i, s_i : s_i + w] = C[i]. Every row's nonzeros lie in a window of w = min(3, n)
    consecutive columns, and consecutive columns differ mod 3, so three probe vectors
    (pⱼ = [i ≡ j mod 3]) recover every coefficient."""
    w = min(3, n)
    probes = (np.arange(n)[:, None] % 3 == np.arange(3)).astype(np.float64)
    R: Any = np.gradient(probes, h, axis=0, edge_order=edge_order)  # type: ignore[call-overload]
    s = np.clip(np.arange(n) - 1, 0, n - w)
    cols = s[:, None] + np.arange(w)
    return s, np.take_along_axis(R, cols % 3, axis=1)


def _gradient_adjoint(g: np.ndarray, axis: int, s: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Gᵀg along `axis`: x̄[s_i + t] += C[i, t]·g[i]."""
    g = np.moveaxis(g, axis, -1)
    out = np.zeros(g.shape, dtype=np.result_type(g, C))
    for t in range(C.shape[1]):
        np.add.at(out, (Ellipsis, s + t), g * C[:, t])  # type: ignore[arg-type]
    return np.moveaxis(out, -1, axis)


def gradient_rrule(f: CoDual, x: CoDual, *varargs: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = gradient(x, *h): for each differentiated axis a, x̄ += Gₐᵀ ȳₐ (see `_stencil`).

    A scalar spacing hₐ scales Gₐ by 1/hₐ: h̄ₐ = −Re⟨ȳₐ, yₐ⟩/hₐ (one h for every axis: the
    sum over the axes). Coordinate arrays are constants: a traced float one raises."""
    for h in varargs:
        if is_active(h) and np.ndim(h.x) > 0:
            raise NotImplementedError(
                "rulekit: np.gradient with a traced coordinate array has no rule (coordinate "
                "arrays are constants; scalar spacings are differentiable). Pass the "
                "coordinates as a plain array, or write the difference quotients with np.diff."
            )
    b = _bind_gradient((x, *varargs), kwargs)
    y = np.gradient(x.x, *(h.x for h in varargs), **kwargs)
    nargs = 2 + len(varargs)
    if x.dx is None and not any(is_active(h) for h in varargs):
        return inactive_output(y, nargs)
    ndim = x.x.ndim
    axis = b.value("axis")
    axes = [int(a) % ndim for a in (range(ndim) if axis is None else np.atleast_1d(axis))]
    hs = [h.x for h in varargs]
    owner = list(range(len(hs)))  # which positional spacing each axis uses
    if not hs:
        hs, owner = [1.0] * len(axes), [-1] * len(axes)
    elif len(hs) == 1 and np.ndim(hs[0]) == 0:
        hs, owner = hs * len(axes), [0] * len(axes)
    edge = b.value("edge_order")
    stencils = [_stencil(x.x.shape[a], h, edge) for a, h in zip(axes, hs, strict=True)]
    out = new_output(y)
    several = isinstance(y, tuple)
    ys = y if several else (y,)

    def gradient_pullback(dy: Any) -> tuple[Any, ...]:
        dh = [0.0] * len(varargs)
        for k, (a, (s, C)) in enumerate(zip(axes, stencils, strict=True)):
            g = out.dx[k] if several else out.dx
            if isinstance(x.dx, np.ndarray):
                x.dx += _gradient_adjoint(g, a, s, C)
            j = owner[k]
            if j >= 0 and is_active(varargs[j]):
                dh[j] -= float(np.real(np.vdot(g, ys[k]))) / float(hs[k])
        rd = [
            scalar_rdata(h.x, d) if is_active(h) else NO_R for h, d in zip(varargs, dh, strict=True)
        ]
        return (NO_R, NO_R, *rd)

    return out, gradient_pullback


def _gradient_examples() -> list[Any]:
    return [
        example(randn(5)),
        example(randn(3, 4, dtype=np.float32), 0.5, np.array([0, 1, 3, 4]), edge_order=2),
        example(randn(4, 3, dtype=np.complex128), axis=0),
        example(randn(2, 3, 4), 2.0, axis=(-1, 0)),
    ]


rrule.register(np.gradient, Array[np.inexact], Vararg[Any], examples=_gradient_examples)(
    gradient_rrule
)


# -- cross ------------------------------------------------------------------------------------

_bind_cross = binder(np.cross)


def _as3(v: np.ndarray) -> np.ndarray:
    """Vectors along the last axis padded with z = 0 to 3 components."""
    if v.shape[-1] == 3:
        return v
    return np.concatenate([v, np.zeros((*v.shape[:-1], 1), v.dtype)], axis=-1)


def cross_rrule(
    f: CoDual, a: CoDual, b: CoDual, *args: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = a × b (vectors along axisa/axisb, result along axisc; `axis` sets all three)
    ⇒  ā += conj(b) × ȳ,  b̄ += ȳ × conj(a). Two 2-vectors give the z component only."""
    bd = _bind_cross((a, b, *args), kwargs)
    p = primals(args, kwargs)
    y = np.cross(a.x, b.x, *p[0], **p[1])
    nargs = 3 + len(args)
    if (a.dx is None and b.dx is None) or not is_inexact_array(np.asarray(y)):
        return inactive_output(y, nargs)
    axis = bd.value("axis")
    axa, axb, axc = (axis,) * 3 if axis is not None else (
        bd.value("axisa"), bd.value("axisb"), bd.value("axisc"))  # fmt: skip
    A, B = np.moveaxis(a.x, axa, -1), np.moveaxis(b.x, axb, -1)
    da, db = A.shape[-1], B.shape[-1]
    out = new_output(y)

    def cross_pullback(dy: Any) -> tuple[Any, ...]:
        g = np.asarray(output_cotangent(out, dy))
        if da == 2 and db == 2:
            g3 = np.zeros((*g.shape, 3), dtype=g.dtype)
            g3[..., 2] = g
        else:
            g3 = np.moveaxis(g, axc, -1)
        if isinstance(a.dx, np.ndarray):
            ga = np.cross(np.conj(_as3(B)), g3)[..., :da]
            add_to_fdata(a.dx, np.moveaxis(unbroadcast(ga, A.shape), -1, axa))
        if isinstance(b.dx, np.ndarray):
            gb = np.cross(g3, np.conj(_as3(A)))[..., :db]
            add_to_fdata(b.dx, np.moveaxis(unbroadcast(gb, B.shape), -1, axb))
        return (NO_R,) * nargs

    return out, cross_pullback


def _cross_examples() -> list[Any]:
    return [
        example(randn(3), randn(3, seed=1)),
        example(randn(2, 3, dtype=np.float32), randn(4, 1, 3, seed=1, dtype=np.float32)),
        example(randn(3, 2), randn(3, 2, seed=1, dtype=np.complex128), axisa=0, axisb=0, axisc=-1),
        example(randn(2, 3, 4), randn(4, 3, seed=1), axis=1),
    ]


rrule.register(np.cross, NumArray, NumArray, Vararg[Any], examples=_cross_examples)(cross_rrule)


# -- nan_to_num -------------------------------------------------------------------------------

_bind_nan_to_num = binder(np.nan_to_num)
_FILLS = (("nan", np.isnan), ("posinf", np.isposinf), ("neginf", np.isneginf))


def _parts(v: Any) -> list[Any]:
    """The real parts of a value: [v] for real, [Re v, Im v] for complex."""
    return [np.real(v), np.imag(v)] if np.iscomplexobj(v) else [v]


def nan_to_num_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = nan_to_num(x, copy, nan, posinf, neginf)  ⇒  x̄ += ȳ where x is finite (Re and Im
    separately); nan̄ = Σ ȳ over the NaN positions (Re and Im parts), posinf̄, neginf̄ alike.
    copy=False overwrites an array x: its pullback zeroes x̄ at the replaced positions and
    restores them."""
    b = _bind_nan_to_num((x, *args), kwargs)
    xp = x.x
    fills = [(name, b.arg(name), test) for name, test in _FILLS]
    masks = [[test(part) for part in _parts(xp)] for _, _, test in fills]
    finite = [np.isfinite(part) for part in _parts(xp)]
    mutates = isinstance(xp, np.ndarray) and not b.value("copy")
    wanted = any(is_active(v) for _, v, _ in fills)
    replaced = not all(f.all() for f in finite)
    if mutates and x.dx is None and wanted and replaced:
        raise rulekit.TracingError(
            "np.nan_to_num(x, copy=False) would write traced replacement values into the "
            "untraced array x; make x traced or use copy=True."
        )
    saved = xp.copy() if mutates and replaced else None
    p = primals(args, kwargs)
    y = np.nan_to_num(xp, *p[0], **p[1])
    nargs = 2 + len(args)
    if x.dx is None and (mutates or not wanted):  # (x in place: nothing traced was written)
        return _restoring(y, saved, xp, nargs)
    shared = mutates and y is xp
    out = CoDual(y, x.dx) if shared else new_output(y)

    def nan_to_num_pullback(dy: Any) -> tuple[Any, ...]:
        g = np.asarray(output_cotangent(out, dy))
        if mutates:  # the cotangent of x's value after the call (+ a separate 0-d output's)
            g = x.dx if shared else x.dx + g
        grads = {}
        for (name, v, _), mask in zip(fills, masks, strict=True):
            if is_active(v):
                grads[name] = scalar_rdata(v.x, sum(np.sum(gp[m]) for gp, m in
                                                    zip(_parts(g), mask, strict=True)))  # fmt: skip
        kept = [np.where(ok, gp, 0) for gp, ok in zip(_parts(g), finite, strict=True)]
        gx = kept[0] if len(kept) == 1 else kept[0] + 1j * kept[1]
        if mutates:
            x.dx[...] = gx
            if saved is not None:
                np.copyto(xp, saved)
            grads["x"] = NO_R
        else:
            grads["x"] = accumulate(x, gx)
        return b.rdata(grads)

    return out, nan_to_num_pullback


def _restoring(y: Any, saved: Any, xp: Any, nargs: int) -> tuple[CoDual, Any]:
    """An inactive output whose pullback still restores an x overwritten in place."""
    result = inactive_output(None, nargs)[1](None)

    def restore_pullback(dy: Any) -> tuple[Any, ...]:
        if saved is not None:
            np.copyto(xp, saved)
        return result

    return CoDual(y, None), restore_pullback


def _nan_to_num_examples() -> list[Any]:
    x = randn(2, 4)
    x[0, 1], x[1, 2], x[1, 3] = np.nan, np.inf, -np.inf
    z = randn(5, dtype=np.complex128)
    z[1], z[3] = complex(np.nan, 1.0), complex(2.0, np.nan)  # (an inf part: tests)
    return [
        example(x),
        example(x.astype(np.float32), nan=1.5, posinf=9.0),
        example(x, False, np.float64(0.5), np.float64(3.0), np.float64(-3.0)),
        example(z),
    ]


rrule.register(np.nan_to_num, Inexact, Vararg[Any], examples=_nan_to_num_examples)(nan_to_num_rrule)
