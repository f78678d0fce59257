"""Forward rules and differentiable pullbacks for `np.diff`, `np.linspace`, `np.interp`,
`np.convolve`, `np.correlate` and `np.polyval` (imported by
`rules.numpy.forward_misc`).

    diff:       ẏ = diff(ẋ, n, axis, prepend=ṗ, append=ȧ);  z̄ = (Dᵀ)ⁿ ȳ split over the parts
    linspace:   y = start·(1 − w) + stop·w  ⇒  ẏ = linspace(ṡtart, ṡtop);  s̄tart = Σ(1 − w)ȳ,
                s̄top = Σ w ȳ  (w = k/div along `axis`; retstep: step = (stop − start)/div)
    interp:     ẏ = s·ẋ + interp(x, xp, ḟp) + s·((t − 1)·ẋp[j] − t·ẋp[j+1]) (+ l̇eft, ṙight
                outside the range);  x̄ = Re(s̄ȳ), xp̄ⱼ,ⱼ₊₁ = (t − 1, −t)·Re(s̄ȳ), f̄p: ȳ split
                (1 − t, t) over the piece's ends  (s the slope of the piece, t the fraction)
    convolve:   ẏ = ȧ ∗ v + a ∗ v̇ (bilinear);  ā = correlate(ȳ_full, v), v̄ = correlate(ȳ_full, a)
    polyval:    ẏ = polyval(ṗ, x) + p′(x)·ẋ;  p̄ₖ = Σ conj(x^(N−1−k))·ȳ, x̄ = conj(p′(x))·ȳ

Every body is numpy on the arguments (the constant index arrays come from the constants),
so they trace: differentiable again.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

import rulekit
from rulekit import Dual, example
from rulekit._declared_rules import shaped_like
from rules._support.examples import randn
from rules._support.forward import bind_by_name, dual_tangent, dual_value, register_like
from rules.numpy.indexing.forward import scatter_add
from rules.numpy.ufuncs.forward import index_rules, inexact, to_arg, zeros_of

__all__: list[str] = []

_NV = np._NoValue


def _tangent_or_zeros(v: Any) -> Any:
    """The tangent of argument `v` (a Dual or plain value), zeros for a constant."""
    d = dual_tangent(v)
    return (
        zeros_of(np.asarray(dual_value(v)) if isinstance(dual_value(v), list) else dual_value(v))
        if d is None
        else d
    )


# -- diff ---------------------------------------------------------------------------------------


def _diff_adjoint(g: Any, axis: int) -> Any:
    """Dᵀg for y = x[1:] − x[:-1] along axis: [−g₀, g₀ − g₁, …, g_{m−1}]."""
    shape = list(np.shape(g))
    shape[axis] = 1
    z = np.zeros(shape, getattr(g, "dtype", np.float64))
    return np.concatenate([z, g], axis=axis) - np.concatenate([g, z], axis=axis)


def diff_frule(f: Dual, a: Dual, *args: Dual, **kw: Any) -> Dual:
    """ẏ = diff(ẋ, n, axis, prepend=ṗ, append=ȧ) (zeros for constant parts)."""
    p = bind_by_name(np.diff, (a, *args), kw)
    prims = {k: dual_value(v) for k, v in p.items()}
    y = _call_diff(prims)
    parts = [k for k in ("a", "prepend", "append") if prims[k] is not _NV]
    if all(dual_tangent(p[k]) is None for k in parts) or not inexact(y):
        return Dual(y, None)
    tan = dict(prims)
    for k in parts:
        tan[k] = _tangent_or_zeros(p[k])
    return Dual(y, shaped_like(_call_diff(tan), y))


def _call_diff(p: dict[str, Any]) -> Any:
    """np.diff with these arguments (x positional: the engines dispatch on it)."""
    return np.diff(p["a"], **{k: v for k, v in p.items() if k != "a" and v is not _NV})


def diff_vjp(active: Sequence[bool], a: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
    """z̄ = (Dᵀ)ⁿ ȳ over the concatenation [prepend, x, append], split back."""
    p = bind_by_name(np.diff, (a, *args), kw)
    y = np.diff(a, *args, **kw)
    n, axis = p["n"], p["axis"] % max(np.ndim(a), 1)
    pre, app = p["prepend"], p["append"]
    npre = 0 if pre is _NV else (1 if np.ndim(pre) == 0 else np.shape(pre)[axis])
    nx = np.shape(a)[axis]
    names = ["a", *list(inspect.signature(np.diff).parameters)[1 : 1 + len(args)]]

    def pullback(g: Any) -> tuple[Any, ...]:
        out: list[Any] = [None] * len(names)
        if g is None or n == 0:
            return (g if n == 0 and active[0] else None, *out[1:])
        for _ in range(n):
            g = _diff_adjoint(g, axis)
        lead = (slice(None),) * axis
        got = {"a": (a, g[(*lead, slice(npre, npre + nx))])}
        if pre is not _NV:
            got["prepend"] = (pre, g[(*lead, slice(0, npre))])
        if app is not _NV:
            got["append"] = (app, g[(*lead, slice(npre + nx, None))])
        for i, name in enumerate(names):
            if active[i] and name in got:
                out[i] = to_arg(*reversed(got[name]))
        return tuple(out)

    return y, pullback


register_like(np.diff, frule=diff_frule, vjp=diff_vjp)


# -- linspace -----------------------------------------------------------------------------------


def _weights(p: dict[str, Any], shape: tuple[int, ...]) -> tuple[Any, int, float]:
    """(w, axis, div): w = k/div along the new axis of the output (shape `shape` of start and
    stop broadcast), so that y = start·(1 − w) + stop·w."""
    num, endpoint = int(p["num"]), bool(p["endpoint"])
    div = (num - 1) if endpoint else num
    k = np.arange(num, dtype=np.float64)
    w = k / div if div > 0 else k * 0.0
    nd = len(shape) + 1
    axis = p["axis"] % nd
    return np.reshape(w, [num if i == axis else 1 for i in range(nd)]), axis, float(div)


def linspace_frule(f: Dual, start: Dual, stop: Dual, *args: Dual, **kw: Any) -> Dual:
    """ẏ = linspace(ṡtart, ṡtop, ...) (linear in start and stop; zeros for a constant)."""
    p = bind_by_name(np.linspace, (start, stop, *args), kw)
    prims = {k: dual_value(v) for k, v in p.items()}
    y = _call_linspace(prims)
    if (start.dx is None and stop.dx is None) or not inexact(y):
        return Dual(y, None)
    tan = {**prims, "start": _tangent_or_zeros(start), "stop": _tangent_or_zeros(stop)}
    t = _call_linspace(tan)
    if prims["retstep"]:
        return Dual(y, (shaped_like(t[0], y[0]), shaped_like(t[1], y[1])))
    return Dual(y, shaped_like(t, y))


def _call_linspace(p: dict[str, Any]) -> Any:
    """np.linspace with these arguments (start, stop positional: the engines dispatch on them)."""
    return np.linspace(
        p["start"], p["stop"], **{k: v for k, v in p.items() if k not in ("start", "stop")}
    )


def linspace_vjp(
    active: Sequence[bool], start: Any, stop: Any, *args: Any, **kw: Any
) -> tuple[Any, Any]:
    """s̄tart = Σ (1 − w)·ȳ − s̄tep/div, s̄top = Σ w·ȳ + s̄tep/div."""
    p = bind_by_name(np.linspace, (start, stop, *args), kw)
    y = np.linspace(start, stop, *args, **kw)
    shape = np.broadcast_shapes(np.shape(start), np.shape(stop))
    w, axis, div = _weights(p, shape)
    retstep = bool(p["retstep"])

    def pullback(g: Any) -> tuple[Any, ...]:
        gy, gs = (g if g is not None else (None, None)) if retstep else (g, None)
        cs: list[Any] = [0.0, 0.0]
        if gy is not None:
            cs = [np.sum(gy * (1.0 - w), axis=axis), np.sum(gy * w, axis=axis)]
        if gs is not None and div > 0:
            cs = [cs[0] - gs / div, cs[1] + gs / div]
        out: list[Any] = [None] * (2 + len(args))
        for i, (v, c) in enumerate(zip((start, stop), cs, strict=True)):
            if active[i] and (gy is not None or gs is not None):
                out[i] = to_arg(np.zeros(shape) + c, v)
        return tuple(out)

    return y, pullback


register_like(np.linspace, frule=linspace_frule, vjp=linspace_vjp)


# -- interp -------------------------------------------------------------------------------------


def _piece(xp: Any, x: Any) -> np.ndarray:
    """j with xp[j] ≤ x < xp[j + 1] (−1 below the range, n − 1 at or above its end)."""
    return np.searchsorted(xp, x, side="right") - 1


piece = rulekit.primitive(_piece)
index_rules(piece, _piece, lambda: [example(np.linspace(0.0, 1.0, 5), randn(4))])


def _array(v: Any, dtype: Any = None) -> Any:
    """`v` as numpy's interp reads it (`dtype`: float64 for x and xp), a traced value kept
    traced (cast with astype, which has rules)."""
    if rulekit.is_traced(v):
        return v if dtype is None or v.dtype == dtype else v.astype(dtype)
    return np.asarray(v, dtype)


def _cot(g: Any, v: Any) -> Any:
    """Cotangent `g` (an array) for argument `v`: a list/tuple of cotangents for a list/tuple."""
    if isinstance(v, (list, tuple)):
        return type(v)(to_arg(g[i], e) for i, e in enumerate(v))
    return to_arg(g, v)


def _interp_parts(x: Any, xp: Any, fp: Any) -> tuple[Any, ...]:
    """(jj, k, t, s, inner, below, above, at_end, nan) for x, xp as float64 arrays: x in
    [xp[jj], xp[k]] at fraction t where inner, s the slope of that piece (0 elsewhere);
    below/above the range (left/right), exactly at its end, or NaN. t and s are traced with
    x, xp and fp."""
    n = np.shape(xp)[0]
    j = piece(xp, x)
    nan = np.isnan(x)
    inner = (j >= 0) & (j < n - 1)
    jj = np.clip(j, 0, max(n - 2, 0))
    k = np.minimum(jj + 1, n - 1)
    d = np.where(inner, xp[k] - xp[jj], 1.0)
    t = np.where(inner, (x - xp[jj]) / d, 0.0)
    s = np.where(inner, (fp[k] - fp[jj]) / d, 0.0)
    below = ~nan & (j < 0)
    above = ~nan & (j >= n - 1) & np.not_equal(x, xp[-1])
    at_end = ~nan & ~inner & ~below & ~above
    return jj, k, t, s, inner, below, above, at_end, nan


def _interp_args(x: Any, xp: Any, fp: Any, args: Sequence[Any], kw: dict[str, Any]) -> Any:
    """(the bound arguments, x, xp, fp as interp reads them); period= is refused."""
    p = bind_by_name(np.interp, (x, xp, fp, *args), kw)
    if dual_value(p["period"]) is not None:
        raise NotImplementedError("np.interp: period= has no rule; call it without period=")
    return (
        p,
        _array(dual_value(x), np.float64),
        _array(dual_value(xp), np.float64),
        _array(dual_value(fp)),
    )


def interp_frule(f: Dual, x: Dual, xp: Dual, fp: Dual, *args: Dual, **kw: Any) -> Dual:
    """ẏ = s·ẋ + interp(x, xp, ḟp) + s·((t − 1)·ẋp[j] − t·ẋp[j + 1]) inside the range,
    + l̇eft / ṙight below / above it (when given); period: refused."""
    p, xv, xpv, fpv = _interp_args(x, xp, fp, args, kw)
    y = np.interp(
        x.x, xp.x, fp.x, *[a.x for a in args], **{k: dual_value(v) for k, v in kw.items()}
    )
    left, right = p["left"], p["right"]
    if all(dual_tangent(v) is None for v in (x, xp, fp, left, right)) or not inexact(y):
        return Dual(y, None)
    jj, k, t, s, inner, below, above, _, nan = _interp_parts(xv, xpv, fpv)
    terms = []
    if x.dx is not None:
        terms.append(s * x.dx + np.where(nan, x.dx, 0.0))  # (a NaN x: y = x)
    if fp.dx is not None:
        lr = {k: (None if dual_value(p[k]) is None else 0.0) for k in ("left", "right")}
        terms.append(np.where(nan, 0.0, np.interp(xv, xpv, _array(fp.dx), **lr)))
    if xp.dx is not None:
        dxp = _array(xp.dx)
        terms.append(np.where(inner, s * ((t - 1.0) * dxp[jj] - t * dxp[k]), 0.0))
    for v, mask in ((left, below), (right, above)):
        if dual_tangent(v) is not None:
            terms.append(np.where(mask, dual_tangent(v), 0.0))
    return Dual(y, shaped_like(sum(terms[1:], terms[0]), y))


def interp_vjp(
    active: Sequence[bool], x: Any, xp: Any, fp: Any, *args: Any, **kw: Any
) -> tuple[Any, Any]:
    """x̄ = Re(conj(s)·ȳ); xp̄[j] = (t − 1)·Re(conj(s)·ȳ), xp̄[j + 1] = −t·Re(conj(s)·ȳ);
    f̄p = (1 − t)·ȳ, t·ȳ scattered to the piece's ends, plus ȳ below / above the range to
    fp[0] / fp[-1] when left / right are None, else l̄eft / r̄ight = Σ ȳ there."""
    p, xv, xpv, fpv = _interp_args(x, xp, fp, args, kw)
    y = np.interp(x, xp, fp, *args, **kw)
    jj, k, t, s, inner, below, above, at_end, nan = _interp_parts(xv, xpv, fpv)
    n = np.shape(xpv)[0]
    ends = [(at_end, n - 1)]
    if p["left"] is None:
        ends.append((below, 0))
    if p["right"] is None:
        ends.append((above, n - 1))

    def pullback(g: Any) -> tuple[Any, ...]:
        out: list[Any] = [None] * (3 + len(args))
        if g is None:
            return tuple(out)
        if np.shape(g) != np.shape(t):
            g = g + np.zeros(np.shape(t))
        gi = np.where(inner, g, 0.0)
        gs = np.real(np.conjugate(s) * gi)  # Re(s̄ȳ): the cotangent of the position x
        if active[0]:
            out[0] = to_arg(gs + np.where(nan, np.real(g), 0.0), x)
        if active[1]:
            gxp = scatter_add((t - 1.0) * gs, (n,), (jj,)) + scatter_add(-t * gs, (n,), (k,))
            out[1] = _cot(gxp, xp)
        if active[2]:
            m = np.shape(fpv)
            gf = scatter_add((1.0 - t) * gi, m, (jj,)) + scatter_add(t * gi, m, (k,))
            for mask, at in ends:
                idx = (np.full(np.shape(t), at, np.intp),)
                gf = gf + scatter_add(np.where(mask, g, 0.0), m, idx)
            out[2] = _cot(gf, fp)
        for i, mask in ((3, below), (4, above)):  # left, right (when given positionally)
            if i < len(out) and active[i] and args[i - 3] is not None:
                out[i] = to_arg(np.sum(np.where(mask, g, 0.0)), args[i - 3])
        return tuple(out)

    return y, pullback


register_like(np.interp, frule=interp_frule, vjp=interp_vjp)


# -- convolve, correlate ------------------------------------------------------------------------

_DEFAULT_MODE = {np.convolve: "full", np.correlate: "valid"}


def _mode(fn: Any, args: Sequence[Any], kw: dict[str, Any]) -> str:
    mode = kw.get("mode", dual_value(args[0]) if args else _DEFAULT_MODE[fn])
    return str({"f": "full", "s": "same", "v": "valid"}.get(str(mode)[:1].lower(), mode))


def convolution_frule(f: Dual, a: Dual, v: Dual, *args: Dual, **kw: Any) -> Dual:
    """ẏ = f(ȧ, v) + f(a, v̇) (bilinear)."""
    fn = f.x
    rest = [r.x for r in args]
    y = fn(a.x, v.x, *rest, **kw)
    t: Any = None
    if a.dx is not None:
        t = fn(a.dx, v.x, *rest, **kw)
    if v.dx is not None:
        tv = fn(a.x, v.dx, *rest, **kw)
        t = tv if t is None else t + tv
    return Dual(y, None if t is None else shaped_like(t, y))


def _convolution_vjp(fn: Any) -> Any:
    corr = fn is np.correlate

    def rule(active: Sequence[bool], a: Any, v: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
        """y = (a ∗ k)[o:o+L] (k = v, or conj(v) reversed for correlate) ⇒
        ā = correlate(ȳ_full, k, valid), k̄ = correlate(ȳ_full, a, valid)."""
        y = fn(a, v, *args, **kw)
        n, m = np.size(a), np.size(v)
        mode = _mode(fn, args, kw)
        off = _offset(corr, mode, n, m)
        k = np.conjugate(np.flip(v)) if corr else v

        def pullback(g: Any) -> tuple[Any, ...]:
            out: list[Any] = [None] * (2 + len(args))
            if g is None:
                return tuple(out)
            full = np.pad(g, (off, n + m - 1 - off - np.size(g)))
            if active[0]:
                out[0] = to_arg(np.correlate(full, k, "valid"), a)
            if active[1]:
                kbar = np.correlate(full, a, "valid")
                out[1] = to_arg(np.conjugate(np.flip(kbar)) if corr else kbar, v)
            return tuple(out)

        return y, pullback

    return rule


def _offset(corr: bool, mode: str, n: int, m: int) -> int:
    """Where numpy's mode-`mode` result starts within the full result."""
    if mode == "full":
        return 0
    if mode == "valid":
        return min(n, m) - 1
    return n // 2 if corr and n < m else (min(n, m) - 1) // 2


for _fn in (np.convolve, np.correlate):
    register_like(_fn, frule=convolution_frule, vjp=_convolution_vjp(_fn))


# -- polyval ------------------------------------------------------------------------------------


def _polyder(p: Any) -> Any:
    """The coefficients of p′ (highest power first), for a 1-d p of length N ≥ 1."""
    n = np.shape(p)[0]
    if n <= 1:
        return p[:0] if n == 0 else p * 0.0
    return p[:-1] * np.arange(n - 1, 0, -1, dtype=np.float64)


def polyval_frule(f: Dual, p: Dual, x: Dual) -> Dual:
    """ẏ = polyval(ṗ, x) + p′(x)·ẋ."""
    y = np.polyval(p.x, x.x)
    t: Any = None
    if p.dx is not None:
        t = np.polyval(p.dx, x.x)
    if x.dx is not None:
        tx = np.polyval(_polyder(p.x), x.x) * x.dx
        t = tx if t is None else t + tx
    return Dual(y, None if t is None or not inexact(y) else shaped_like(t, y))


def polyval_vjp(active: Sequence[bool], p: Any, x: Any) -> tuple[Any, Any]:
    """p̄ₖ = Σ conj(x^(N−1−k))·ȳ, x̄ = conj(p′(x))·ȳ."""
    y = np.polyval(p, x)
    n = np.shape(p)[0]

    def pullback(g: Any) -> tuple[Any, Any]:
        if g is None:
            return (None, None)
        gp = gx = None
        if active[0]:
            cx = np.conjugate(x)
            gp = _cot(np.stack([np.sum(cx ** (n - 1 - k) * g) for k in range(n)]), p)
        if active[1]:
            gx = to_arg(np.conjugate(np.polyval(_polyder(p), x)) * g, x)
        return (gp, gx)

    return y, pullback


register_like(np.polyval, frule=polyval_frule, vjp=polyval_vjp)
