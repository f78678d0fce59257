"""Rule for np.linalg.norm: every `ord`, `axis` (None, int, 2-tuple) and `keepdims`.

The norm is real for real and complex x. Writing sgn(x) = x/|x| (0 at 0), ā for the
cotangent of |x| and ȳ the norm's cotangent, x̄ += sgn(x)·ā; per `ord`:

vectors (axis int, or axis None on 1-d x; ord=None on any x is the 2-norm of x.ravel()):
    None, 2:   x̄ += x·ȳ/y
    1:         x̄ += sgn(x)·ȳ
    inf, -inf: x̄ += sgn(x)·ȳ/k on the k elements with |xᵢ| = y (ties split equally)
    0:         a count of nonzeros, piecewise constant: x̄ += 0 (its derivative wherever
               it has one; nothing flows back)
    other p:   x̄ += sgn(x)·(|x|/y)^(p−1)·ȳ (p < 0 and 0 < p < 1 included)
matrices (axis 2-tuple, or axis None on 2-d x), over the last two axes after moving them:
    'fro':     X̄ += X·ȳ/y
    'nuc':     X̄ += U Vᴴ·ȳ (thin SVD; only σᵢ > tol: the rank-deficient part gets 0)
    2, -2:     X̄ += (1/k) Σ uᵢvᵢᴴ·ȳ over the k singular values tied with σ_max (σ_min)
    1, -1:     X̄ += sgn(X)·ȳ/k on the k columns whose Σ|x| is the max (min)
    inf, -inf: the same with rows
Non-differentiable points get the central (symmetric) derivative: 0 for a norm at 0,
for |xᵢ| = 0 under ord ≤ 1 (sgn(0) = 0), for σ_min ≤ tol (ord=-2); equal shares at
ties. tol = max(m, n)·ε·σ_max (numpy's matrix_rank tolerance). See
docs/conventions-reductions.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Example, Vararg, example
from rules._support.cotangents import add_to_fdata, no_rdata, output_cotangent, scalar_rdata
from rules._support.outputs import new_output
from rules.numpy.reductions._common import (
    axes_of,
    expand,
    plan,
    read_options,
    reject_traced_scalars,
    safe_div,
)
from rules.numpy.reductions.extrema import tie_split

__all__ = ["norm_rrule"]

_NAMES = ("ord", "axis", "keepdims")


def _examples() -> list[Example]:
    rng = np.random.default_rng(40)
    v = rng.normal(size=(3, 4))
    m = rng.normal(size=(2, 3, 4)) + 1j * rng.normal(size=(2, 3, 4))
    t = np.array([[2.0, -3.0, 0.5], [3.0, 2.0, -3.0]])  # column sums 5, 5: a tie (ord=1)
    return [
        example(v),
        example(m, 2, axis=(2, 1), keepdims=True),
        example(t, 1),
        example(t, -1.5, axis=-1),  # a float ord is differentiable too: ∂y/∂p
    ]


def _sgn(x: np.ndarray) -> np.ndarray:
    """x/|x|, and 0 at 0."""
    if x.dtype.kind != "c":
        return np.sign(x)
    return safe_div(x, np.abs(x))


@rulekit.rrule.register(np.linalg.norm, Array[np.inexact], Vararg[Any], examples=_examples)
def norm_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = ‖x‖_ord over `axis` (see the module docstring for x̄ per ord)."""
    y = np.linalg.norm(x.x, *[a.x for a in args], **kwargs)
    out = new_output(y)
    none = no_rdata(len(args) + 2)
    o = read_options(_NAMES, args, kwargs)
    reject_traced_scalars("np.linalg.norm", _NAMES, args, allowed=("ord",))
    ord_, axis, nd = o.get("ord"), o.get("axis"), x.x.ndim
    if axis is None:
        axes = tuple(range(nd)) if ord_ is None else tuple(range(min(nd, 2)))
    else:
        axes = axes_of(axis, nd)
    kshape = plan(axes, x.x.shape)[1]
    matrix = len(axes) == 2 and not (ord_ is None and axis is None)
    dord = args[0] if args and args[0].dx is not None else None
    if dord is not None and (matrix or ord_ == 0):
        raise NotImplementedError(
            f"np.linalg.norm: ord={ord_!r} is a traced value, but ord is discrete here "
            "(matrix norms, or the count ord=0) and has no derivative. Pass ord as a constant."
        )

    def norm_pullback(dy: Any) -> tuple[Any, ...]:
        g = expand(output_cotangent(out, dy), kshape)
        yk = expand(y, kshape)
        if x.dx is not None:
            if matrix:
                _matrix(x, ord_, axes, g, yk)
            else:
                _vector(x, ord_, axes, g, yk)
        if dord is None:
            return none
        return (*none[:2], scalar_rdata(ord_, _vector_dp(x.x, ord_, axes, g, yk)), *none[3:])

    return out, norm_pullback


def _vector_dp(v: np.ndarray, p: Any, axes: tuple[int, ...], g: Any, yk: Any) -> Any:
    """Σ ȳ·∂y/∂p for y = (Σ|x|^p)^(1/p): y·(Σ|x|^p ln|x| / (p S) − ln S / p²), S = Σ|x|^p.

    Lanes where y is 0 or not finite (a zero element and p < 0, all zeros) get 0,
    as do ord = ±inf (y does not change with p there).
    """
    if np.isinf(p):
        return 0.0
    a = np.abs(v)
    pos = a > 0
    ap = np.zeros_like(a)
    np.power(a, p, out=ap, where=pos)
    la = np.zeros_like(a)
    np.log(a, out=la, where=pos)
    s = np.sum(ap, axis=axes, keepdims=True)
    t = np.sum(ap * la, axis=axes, keepdims=True)
    ok = (s > 0) & np.isfinite(s) & (np.asarray(yk) > 0) & np.isfinite(yk)
    ratio = np.zeros_like(s)
    np.divide(t, p * s, out=ratio, where=ok)
    logs = np.zeros_like(s)
    np.log(s, out=logs, where=ok)
    return np.sum(g * np.where(ok, yk * (ratio - logs / p**2), 0))


def _vector(x: CoDual, p: Any, axes: tuple[int, ...], g: Any, yk: Any) -> None:
    v = x.x
    if p is None or p == 2:
        add_to_fdata(x.dx, v * safe_div(g, yk))
    elif p == 0:
        return  # a count: zero derivative
    elif p == 1:
        add_to_fdata(x.dx, _sgn(v) * g)
    elif p in (np.inf, -np.inf):
        hit, count = tie_split(np.abs(v), yk, axes)  # ties split equally, as for max
        add_to_fdata(x.dx, _sgn(v) * hit * (g / count))
    else:
        a = np.abs(v)
        r = safe_div(a, yk)
        w = np.zeros_like(r)
        np.power(r, p - 1, out=w, where=r != 0)
        add_to_fdata(x.dx, _sgn(v) * w * g)


def _matrix(x: CoDual, p: Any, axes: tuple[int, ...], g: Any, yk: Any) -> None:
    v = x.x
    r, c = axes
    if p in (None, "fro", "f"):
        add_to_fdata(x.dx, v * safe_div(g, yk))
    elif p in (1, -1, np.inf, -np.inf):
        over, pick = (r, c) if p in (1, -1) else (c, r)  # Σ over rows: column sums
        sums = np.sum(np.abs(v), axis=over, keepdims=True)
        best = (
            np.max(sums, axis=pick, keepdims=True)
            if p > 0
            else np.min(sums, axis=pick, keepdims=True)
        )
        hit = sums == best
        count = np.maximum(np.sum(hit, axis=pick, keepdims=True), 1)  # ≥ 1 (NaN: no hit)
        add_to_fdata(x.dx, _sgn(v) * (hit * (g / count)))
    else:  # 2, -2, 'nuc': through the SVD of the matrices moved to the last two axes
        vm = np.moveaxis(v, axes, (-2, -1))
        u, s, vh = np.linalg.svd(vm, full_matrices=False)
        gm = np.moveaxis(g, axes, (-2, -1)) if np.ndim(g) else g
        smax = s[..., :1]
        tol = max(vm.shape[-2:]) * np.finfo(s.dtype).eps * smax
        if p == "nuc":
            w = (s > tol).astype(s.dtype)
        else:
            ref = smax if p == 2 else s[..., -1:]
            w = (np.abs(s - ref) <= tol) & (ref > (tol if p == -2 else 0))
            w = w / np.maximum(np.sum(w, axis=-1, keepdims=True), 1)
        gx = (u * w[..., None, :]) @ vh * gm
        dxm = np.moveaxis(x.dx, axes, (-2, -1))
        if dxm.dtype.kind != "c":
            gx = gx.real
        dxm += gx
