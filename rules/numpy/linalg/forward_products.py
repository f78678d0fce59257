"""Forward rules and differentiable pullbacks for np.linalg.norm, matrix_power and multi_dot
(imported by `rules.numpy.linalg.forward`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Dual
from rules._support.forward import register_like
from rules.numpy.linalg.forward_support import (
    cplx,
    dtype_of,
    inexact,
    like,
    mH,
    tangent,
    tangent_like,
)

__all__: list[str] = []


# -- norm ------------------------------------------------------------------------------------------

_NORM = inspect.signature(np.linalg.norm)


def _safe_div(a: Any, b: Any) -> Any:
    """a/b, 0 where b = 0."""
    return np.where(b == 0, 0, a / np.where(b == 0, 1, b))


def _sgn(x: Any) -> Any:
    """x/|x| (0 at 0)."""
    return _safe_div(x, np.abs(x)) if cplx(x) else np.sign(x)


def _ties(a: Any, best: Any, axes: tuple[int, ...]) -> Any:
    """1/k on the k entries of `a` equal to `best` along `axes` (0 elsewhere)."""
    hit = a == best
    count = np.maximum(np.sum(hit, axis=axes, keepdims=True), 1)
    return hit / count


def _norm_plan(
    x: Any, rest: Sequence[Any], kw: dict[str, Any]
) -> tuple[Any, tuple[int, ...], bool, bool]:
    """(ord, axes (normalized), matrix norm?, keepdims) as numpy reads them."""
    ba = _NORM.bind(x, *rest, **kw)
    ba.apply_defaults()
    o, axis, keep = ba.arguments["ord"], ba.arguments["axis"], bool(ba.arguments["keepdims"])
    nd = np.ndim(x)
    if axis is None:
        axes = tuple(range(nd)) if o is None else tuple(range(min(nd, 2)))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(int(i) % nd for i in axis)
    else:
        axes = (int(axis) % nd,)
    matrix = len(axes) == 2 and not (o is None and axis is None)
    return o, axes, matrix, keep


def _norm_weight(x: Any, o: Any, axes: tuple[int, ...], matrix: bool, yk: Any) -> Any:
    """W with ẏ = Re Σ_axes conj(W)·ẋ and x̄ = W·ȳ (yk: the norm with kept axes).
    Non-differentiable points take the reverse rule's symmetric choice (0 at 0, ties shared)."""
    if o is None or (isinstance(o, str) and o in ("fro", "f")) or (o == 2 and not matrix):
        return _safe_div(x, yk)
    a = np.abs(x)
    if not matrix:
        if o == 0:
            return np.zeros(np.shape(x), x.dtype)
        if o == 1:
            return _sgn(x)
        if o in (np.inf, -np.inf):
            return _sgn(x) * _ties(a, yk, axes)
        r = _safe_div(a, yk)
        return _sgn(x) * np.where(r != 0, np.power(np.where(r != 0, r, 1), o - 1), 0)
    r, c = axes
    if o in (1, -1, np.inf, -np.inf):
        over, pick = (r, c) if o in (1, -1) else (c, r)
        sums = np.sum(a, axis=over, keepdims=True)
        best = (
            np.max(sums, axis=pick, keepdims=True)
            if o > 0
            else np.min(sums, axis=pick, keepdims=True)
        )
        return _sgn(x) * _ties(sums, best, (pick,))
    if o not in (2, -2, "nuc"):
        raise NotImplementedError(f"np.linalg.norm(ord={o!r}) has no forward/nested rule")
    xm = np.moveaxis(x, axes, (-2, -1))
    u, s, vh = np.linalg.svd(xm, full_matrices=False)
    smax = s[..., :1]
    tol = max(xm.shape[-2:]) * np.finfo(s.dtype).eps * smax
    if o == "nuc":
        w = (s > tol) * np.ones((), s.dtype)
    else:
        ref = smax if o == 2 else s[..., -1:]
        w = (np.abs(s - ref) <= tol) & (ref > (tol if o == -2 else 0))
        w = w / np.maximum(np.sum(w, axis=-1, keepdims=True), 1)
    return np.moveaxis((u * w[..., None, :]) @ vh, (-2, -1), axes)


def _kept(x: Any, y: Any, o: Any, axes: tuple[int, ...]) -> Any:
    """The norm with the reduced axes kept (length 1); a 0-d x's norm is |x| itself."""
    if np.ndim(x) == 0:
        return y * np.ones((), dtype_of(y))
    if len(axes) <= 2:
        return np.linalg.norm(x, o, axes, keepdims=True)
    return y * np.ones((1,) * np.ndim(x), dtype_of(y))


def _norm_dp(x: Any, p: Any, axes: tuple[int, ...], yk: Any) -> Any:
    """∂y/∂p of the vector p-norm: y·(Σ|x|^p ln|x| / (p S) − ln S / p²), S = Σ|x|^p; 0 for
    p = ±inf and where y is 0 or not finite (the reverse rule's choice)."""
    if p in (np.inf, -np.inf):
        return np.zeros(np.shape(yk), dtype_of(yk))
    a = np.abs(x)
    pos = a > 0
    safe = np.where(pos, a, 1)
    ap = np.where(pos, np.power(safe, p), 0)
    S = np.sum(ap, axis=axes, keepdims=True)
    T = np.sum(ap * np.log(safe), axis=axes, keepdims=True)
    ok = (S > 0) & np.isfinite(S) & (yk > 0) & np.isfinite(yk)
    S1 = np.where(ok, S, 1)
    return np.where(ok, yk * (T / (p * S1) - np.log(S1) / p**2), 0)


def _ord_tangent(rest: Sequence[Dual], matrix: bool, o: Any) -> Any:
    """ṗ of a positional float ord with a tangent (None if none); refused where ord is
    discrete (matrix norms, the count ord=0), as in the reverse rule."""
    dp = tangent(rest[0]) if rest else None
    if dp is not None and (matrix or o == 0):
        raise NotImplementedError(
            f"np.linalg.norm: ord={o!r} has a tangent, but ord is discrete here (matrix "
            "norms, or the count ord=0) and has no derivative. Pass ord as a constant."
        )
    return dp


def norm_frule(f: Dual, x: Dual, *rest: Dual, **kw: Any) -> Dual:
    """y = ‖x‖_ord ⇒ ẏ = Re Σ conj(W)·ẋ (+ ∂y/∂p·ṗ for a float ord with a tangent), W the
    gradient of the norm (see `_norm_weight`)."""
    rx = [r.x for r in rest]
    y = np.linalg.norm(x.x, *rx, **kw)
    o, axes, matrix, keep = _norm_plan(x.x, rx, kw)
    dx, dp = tangent(x), _ord_tangent(rest, matrix, o)
    if dx is None and dp is None:
        return Dual(y, None)
    yk = _kept(x.x, y, o, axes)
    dy: Any = 0
    if dx is not None:
        W = _norm_weight(x.x, o, axes, matrix, yk)
        dy = np.sum(np.real(np.conj(W) * dx), axis=axes, keepdims=True)
    if dp is not None:
        dy = dy + _norm_dp(x.x, o, axes, yk) * dp
    dy = dy if keep else np.sum(dy, axis=axes)
    return Dual(y, tangent_like(dy + np.zeros(np.shape(y), dtype_of(y)), y))


def norm_vjp(active: Sequence[bool], x: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """x̄ = W·ȳ (ȳ expanded over the reduced axes); a float ord: p̄ = Σ ȳ·∂y/∂p."""
    y = np.linalg.norm(x, *rest, **kw)
    o, axes, matrix, keep = _norm_plan(x, rest, kw)
    p_active = bool(rest) and len(active) > 1 and active[1] and inexact(rest[0])
    p_active = p_active and not (matrix or o == 0)

    def pullback(g: Any) -> tuple[Any, ...]:
        none = [None] * len(rest)
        if g is None:
            return (None, *none)
        yk = _kept(x, y, o, axes)
        kept = g if keep or np.ndim(g) == 0 else np.expand_dims(g, axes)
        if p_active:
            none[0] = like(np.sum(kept * _norm_dp(x, o, axes, yk)), rest[0])
        return (like(_norm_weight(x, o, axes, matrix, yk) * kept, x), *none)

    return y, pullback


# -- matrix_power ----------------------------------------------------------------------------------


def _power_chain(p: int) -> tuple[int, list[tuple[int, int, int]]]:
    """numpy's squaring chain for Aᵖ (p ≥ 2): (index of the result, [(out, left, right)])."""
    tape: list[tuple[int, int, int]] = []
    count = [1]

    def mul(i: int, j: int) -> int:
        tape.append((count[0], i, j))
        count[0] += 1
        return count[0] - 1

    if p == 2:
        return mul(0, 0), tape
    if p == 3:
        return mul(mul(0, 0), 0), tape
    z = r = -1
    while p > 0:
        z = 0 if z < 0 else mul(z, z)
        p, bit = divmod(p, 2)
        if bit:
            r = z if r < 0 else mul(r, z)
    return r, tape


def _power_values(base: Any, p: int) -> tuple[list[Any], int, list[tuple[int, int, int]]]:
    r, tape = _power_chain(p) if p > 1 else (0, [])
    vals = [base]
    for _, i, j in tape:
        vals.append(vals[i] @ vals[j])
    return vals, r, tape


def matrix_power_frule(f: Dual, a: Dual, n: Dual) -> Dual:
    """Y = Aⁿ by numpy's squaring chain: P = L·R ⇒ Ṗ = L̇R + LṘ; n < 0: B = A⁻¹, Ḃ = −BȦB."""
    p = int(n.x)
    y = np.linalg.matrix_power(a.x, p)
    da = tangent(a)
    if da is None:
        return Dual(y, None)
    if p == 0:
        return Dual(y, np.zeros(np.shape(y), y.dtype))
    base = np.linalg.inv(a.x) if p < 0 else a.x
    dbase = -(base @ da @ base) if p < 0 else da
    vals, r, tape = _power_values(base, abs(p))
    dvals = [dbase]
    for _, i, j in tape:
        dvals.append(dvals[i] @ vals[j] + vals[i] @ dvals[j])
    return Dual(y, dvals[r])


def matrix_power_vjp(active: Sequence[bool], A: Any, n: Any) -> tuple[Any, Any]:
    """The chain backwards: P = L·R ⇒ L̄ += P̄Rᴴ, R̄ += LᴴP̄; n < 0: Ā = −Bᴴ B̄ Bᴴ."""
    p = int(n)
    y = np.linalg.matrix_power(A, p)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None:
            return (None, None)
        if p == 0:
            return (np.zeros(np.shape(A), A.dtype), None)
        base = np.linalg.inv(A) if p < 0 else A
        vals, r, tape = _power_values(base, abs(p))
        bars: list[Any] = [None] * len(vals)
        bars[r] = g
        for o, i, j in reversed(tape):
            go = bars[o]
            if go is None:
                continue
            for idx, c in ((i, go @ mH(vals[j])), (j, mH(vals[i]) @ go)):
                bars[idx] = c if bars[idx] is None else bars[idx] + c
        g0 = bars[0]
        if p < 0:
            g0 = -(mH(base) @ g0 @ mH(base))
        return (like(g0, A), None)

    return y, pullback


# -- multi_dot -------------------------------------------------------------------------------------


def _as_matrices(xs: Sequence[Any]) -> list[Any]:
    ms = list(xs)
    if np.ndim(ms[0]) == 1:
        ms[0] = ms[0][None, :]
    if np.ndim(ms[-1]) == 1:
        ms[-1] = ms[-1][:, None]
    return ms


def _no_out(kw: dict[str, Any]) -> None:
    if kw.get("out") is not None:
        raise NotImplementedError("np.linalg.multi_dot(out=...): call it without out=")


def multi_dot_frule(f: Dual, arrays: Dual, **kw: Any) -> Dual:
    """Y = A₁…Aₙ ⇒ Ẏ = Σₖ A₁…Ȧₖ…Aₙ."""
    _no_out(kw)
    xs = list(arrays.x)
    y = np.linalg.multi_dot(xs)
    dxs = arrays.dx if isinstance(arrays.dx, (list, tuple)) else [None] * len(xs)
    t: Any = None
    for k, d in enumerate(dxs):
        if d is None or not inexact(xs[k]):
            continue
        term = np.linalg.multi_dot([*xs[:k], d, *xs[k + 1 :]])
        t = term if t is None else t + term
    return Dual(y, None if t is None else tangent_like(t, y))


def multi_dot_vjp(active: Sequence[bool], arrays: Any, **kw: Any) -> tuple[Any, Any]:
    """Āₖ = (A₁…Aₖ₋₁)ᴴ Ȳ (Aₖ₊₁…Aₙ)ᴴ (1-D ends read as row/column)."""
    _no_out(kw)
    xs = list(arrays)
    y = np.linalg.multi_dot(xs)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None:
            return (None,)
        ms = _as_matrices(xs)
        g = np.reshape(g, (ms[0].shape[0], ms[-1].shape[1]))
        right = [g]
        for m in ms[:0:-1]:
            right.append(right[-1] @ mH(m))
        right.reverse()
        out: list[Any] = []
        left = None
        for k, m in enumerate(ms):
            if inexact(xs[k]):
                gk = right[k] if left is None else mH(left) @ right[k]
                out.append(like(np.reshape(gk, np.shape(xs[k])), xs[k]))
            else:
                out.append(None)
            left = m if left is None else left @ m
        return (type(arrays)(out) if isinstance(arrays, (list, tuple)) else out,)

    return y, pullback


register_like(np.linalg.norm, frule=norm_frule, vjp=norm_vjp)
register_like(np.linalg.matrix_power, frule=matrix_power_frule, vjp=matrix_power_vjp)
register_like(np.linalg.multi_dot, frule=multi_dot_frule, vjp=multi_dot_vjp)
