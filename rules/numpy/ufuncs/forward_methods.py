"""Forward rules and differentiable pullbacks of the ufunc methods `outer`, `accumulate` and
`reduce` whose reverse rules are in `.methods` and `.folds` (add/multiply/maximum/minimum
.reduce: `rules.numpy.reductions.forward_methods`).

    u.outer(a, b) = u(a[…, None·b.ndim], b)        traced: u's own rules (`register_traced`)
    add.accumulate = cumsum, multiply.accumulate = cumprod (axis=0 by default)    traced
    y = maximum.accumulate(x) (minimum alike), cᵢ = #{j ≤ i : xⱼ = yᵢ}:
        ẏᵢ = Σ_{j ≤ i, xⱼ = yᵢ} ẋⱼ / cᵢ,     x̄ⱼ = Σ_{i ≥ j, xⱼ = yᵢ} ȳᵢ / cᵢ     (ties split)
    y = logaddexp.reduce(x):  ẏ = Σ e^(x − y)·ẋ,  x̄ = e^(x − y)·ȳ   (logaddexp2: 2^(x − y));
        a lane with an infinite (or NaN) y: the elements equal to it share ȳ
    y = f.accumulate(x), the left fold y₀ = x₀, yₖ = f(yₖ₋₁, xₖ)  (f.reduce: its last value):
        ẏₖ = ∂₁f·ẏₖ₋₁ + ∂₂f·ẋₖ,   and backwards  x̄ₖ = ∂₂f·tₖ,  tₖ₋₁ = ȳₖ₋₁ + ∂₁f·tₖ

with ∂₁f, ∂₂f the partials of f's `rulekit.elementwise` declaration at (yₖ₋₁, xₖ, yₖ), as
the reverse rules use them, and the same tie conventions as the reverse rules.

Values: the traced re-implementations compute exactly numpy's (outer is the ufunc on a
reshaped operand; cumsum/cumprod are add/multiply.accumulate). The hand-written rules
compute y with numpy's method itself (on values that enclosing transformations may trace,
whose rules then handle it): a re-implementation of a fold by elementwise calls is not
always numpy's value to the last bit (numpy's accumulate loop of power/arctan2 may call
another libm kernel than the elementwise call), and the tie conventions of a running
maximum and of a logsumexp at ±inf need masks, not a traced formula. The bodies are plain
NumPy on their arguments (masks from comparisons carry no derivative), so all of them are
differentiated again: `hessian`, `hvp` and nested `grad` in every mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit import CoDual, Dual, Elementwise
from rulekit._declared_rules import shaped_like
from rules._support.forward import register_like, register_traced
from rules.numpy.reductions._common import plan
from rules.numpy.reductions.extrema import tie_split
from rules.numpy.reductions.forward_common import kept, spread
from rules.numpy.ufuncs import folds as _folds
from rules.numpy.ufuncs import methods as _methods
from rules.numpy.ufuncs.forward import to_arg, zeros_of

__all__ = [
    "fold_frule",
    "fold_vjp",
    "logaddexp_reduce_frule",
    "logaddexp_reduce_vjp",
    "outer_impl",
    "running_frule",
    "running_vjp",
]


def _plain(v: Any) -> Any:
    return v.x if isinstance(v, Dual) else v


def _as_codual(args: Sequence[Any]) -> tuple[CoDual, ...]:
    """Options (Duals in a forward rule, values in a pullback) as the reverse rules read them."""
    return tuple(CoDual(a.x, a.dx) if isinstance(a, Dual) else CoDual(a, None) for a in args)


# -- outer --------------------------------------------------------------------------------------


def _array(v: Any) -> Any:
    """Operand `v` as numpy's outer converts it: a number (Python's too: float64, not a
    weak scalar) as a 0-d array, a list as an array (np.stack: its elements may be traced)."""
    if isinstance(v, (list, tuple)):
        if not v:
            return np.asarray(v)  # (no elements: nothing traced)
        return np.stack([_array(e) for e in v])
    if np.ndim(v) == 0:
        return np.reshape(np.stack([v]), ())
    return v


def outer_impl(u: np.ufunc) -> Callable[..., Any]:
    """u.outer(a, b) = u(a with b.ndim trailing unit axes, b)."""

    def impl(a: Any, b: Any, **kwargs: Any) -> Any:
        a, b = _array(a), _array(b)
        k, na = np.ndim(b), np.ndim(a)
        if k and na:
            a = np.reshape(a, np.shape(a) + (1,) * k)
        return u(a, b, **kwargs)

    impl.__name__ = impl.__qualname__ = f"{u.__name__}_outer"
    return impl


for _u in _methods.OUTER_UFUNCS:
    register_traced(_u.outer, outer_impl(_u))


# -- add.accumulate, multiply.accumulate ----------------------------------------------------------


def _accumulate_impl(method: Any, target: Any) -> Callable[..., Any]:
    """method(x, axis=0, dtype=None, out=None) = target(x, axis, dtype) (numpy's errors kept:
    a scalar x, axis=None for x.ndim > 1)."""

    def impl(x: Any, axis: Any = 0, dtype: Any = None, out: Any = None) -> Any:
        if out is not None:
            raise NotImplementedError(f"{_name(method)}: out= is recorded by the engine")
        method(np.zeros((0,) * np.ndim(x), x.dtype), axis, dtype)  # (numpy's own errors)
        return target(x, axis, dtype)

    impl.__name__ = impl.__qualname__ = f"{method.__self__.__name__}_accumulate"
    return impl


def _name(method: Any) -> str:
    return f"np.{method.__self__.__name__}.{method.__name__}"


register_traced(np.add.accumulate, _accumulate_impl(np.add.accumulate, np.cumsum))
register_traced(np.multiply.accumulate, _accumulate_impl(np.multiply.accumulate, np.cumprod))


# -- maximum.accumulate, minimum.accumulate -------------------------------------------------------


def _running_axis(method: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> int:
    """The axis of a running max/min (options as its reverse rule takes them: axis only)."""
    o = _methods._only(_name(method), _as_codual(args), _plain_kw(kwargs), {"axis"})
    axis = o.get("axis", 0)
    return 0 if axis is None else int(axis)


def _plain_kw(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(v) for k, v in kwargs.items()}


def _running_tangent(x: Any, y: Any, t: Any) -> Any:
    """ẏᵢ = Σ_{j ≤ i, xⱼ = yᵢ} ẋⱼ / cᵢ along the last axis (y monotone: the xⱼ equal to yᵢ are
    in the run of equal y ending at i; NaN equal to NaN)."""
    hit = (x == y) | (np.isnan(x) & np.isnan(y))
    n = np.shape(x)[-1]
    same = (y[..., 1:] == y[..., :-1]) | (np.isnan(y[..., 1:]) & np.isnan(y[..., :-1]))
    first = np.ones((*np.shape(x)[:-1], min(n, 1)), bool)
    new_run = np.concatenate([first, ~same], axis=-1)
    start = np.maximum.accumulate(np.where(new_run, np.arange(n), 0), axis=-1)
    hits = np.cumsum(hit, axis=-1)
    count = hits - np.take_along_axis(hits, start, -1) + np.take_along_axis(hit, start, -1)
    h = np.where(hit, t, 0)
    s = np.cumsum(h, axis=-1)
    before = np.take_along_axis(s, start, -1) - np.take_along_axis(h, start, -1)
    return (s - before) / np.maximum(count, 1)


def running_frule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """ẏᵢ = Σ_{j ≤ i, xⱼ = yᵢ} ẋⱼ / #{j ≤ i : xⱼ = yᵢ} (ties split, as the reverse rule)."""
    axis = _running_axis(f.x, args, kwargs)
    y = f.x(x.x, *[a.x for a in args], **_plain_kw(kwargs))
    if x.dx is None:
        return Dual(y, None)
    xm, ym, tm = (np.moveaxis(v, axis, -1) for v in (x.x, y, x.dx))
    return Dual(y, shaped_like(np.moveaxis(_running_tangent(xm, ym, tm), -1, axis), y))


def running_vjp(method: Any) -> Any:
    """The differentiable pullback of running max/min `method`: x̄ⱼ = Σ_{i ≥ j, xⱼ = yᵢ} ȳᵢ/cᵢ."""

    def rule(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        axis = _running_axis(method, args, kwargs)
        y = method(x, *args, **kwargs)
        rest = (None,) * len(args)

        def running_pullback(g: Any) -> tuple[Any, ...]:
            if not active[0] or g is None:
                return (None, *rest)
            xm, ym, gm = (np.moveaxis(v, axis, -1) for v in (x, y, g))
            xbar = np.moveaxis(_methods._running_tie_adjoint(xm, ym, gm), -1, axis)
            return (to_arg(xbar, x), *rest)

        return y, running_pullback

    rule.__name__ = rule.__qualname__ = f"{method.__self__.__name__}_accumulate_vjp"
    return rule


for _ext in (np.maximum, np.minimum):
    register_like(_ext.accumulate, frule=running_frule, vjp=running_vjp(_ext.accumulate))


# -- logaddexp.reduce, logaddexp2.reduce ----------------------------------------------------------


def _lse_options(method: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    return _methods._only(_name(method), _as_codual(args), _plain_kw(kwargs), {"axis", "keepdims"})


def _lse_weights(method: Any, x: Any, y: Any, o: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(w = ∂y/∂x, axes, kept shape): e^(x − y) (2^(x − y)), and hit/count in lanes whose y is
    infinite or NaN (the elements equal to it share ȳ, as the reverse rule)."""
    axes, kshape = plan(o.get("axis", 0), np.shape(x)) if np.ndim(x) else ((), ())  # (0-d: x)
    yk = kept(y, kshape)
    bad = ~np.isfinite(yk)
    with np.errstate(invalid="ignore"):
        d = np.where(bad, 0.0, x - yk)  # (no inf − inf in a derivative either)
    w = np.exp2(d) if method.__self__ is np.logaddexp2 else np.exp(d)
    hit, count = tie_split(x, yk, axes)
    return np.where(bad, hit / count, w), axes, kshape


def logaddexp_reduce_frule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """ẏ = Σ_lane e^(x − y)·ẋ (2^(x − y) for logaddexp2)."""
    o = _lse_options(f.x, args, kwargs)
    y = f.x(x.x, *[a.x for a in args], **_plain_kw(kwargs))
    if x.dx is None:
        return Dual(y, None)
    w, axes, _ = _lse_weights(f.x, x.x, y, o)
    t = np.sum(w * x.dx, axis=axes, keepdims=bool(o.get("keepdims", False)))
    return Dual(y, shaped_like(t, y))


def logaddexp_reduce_vjp(method: Any) -> Any:
    """The differentiable pullback of `method` (logaddexp/logaddexp2.reduce): x̄ = w·ȳ."""

    def rule(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        o = _lse_options(method, args, kwargs)
        y = method(x, *args, **kwargs)
        rest = (None,) * len(args)

        def logaddexp_reduce_pullback(g: Any) -> tuple[Any, ...]:
            if not active[0] or g is None:
                return (None, *rest)
            w, _, kshape = _lse_weights(method, x, y, o)
            return (to_arg(w * spread(g, kshape, np.shape(x)), x), *rest)

        return y, logaddexp_reduce_pullback

    rule.__name__ = rule.__qualname__ = f"{method.__self__.__name__}_reduce_vjp"
    return rule


for _lse in (np.logaddexp, np.logaddexp2):
    register_like(_lse.reduce, frule=logaddexp_reduce_frule, vjp=logaddexp_reduce_vjp(_lse.reduce))


# -- reduce/accumulate of the other binary ufuncs: the left fold --------------------------------


def _fold_options(name: str, args: Sequence[Any], kwargs: dict[str, Any], reduce: bool) -> Any:
    """(axis, keepdims) as the reverse rule (`.folds`) takes them: an int axis (+ keepdims)."""
    return _folds._options(name, tuple(map(_plain, args)), _plain_kw(kwargs), reduce)


def _quiet() -> Any:
    """numpy's warnings off, as in the reverse rule (a partial may be infinite or undefined
    where f is finite)."""
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")


def _partials(decl: Elementwise, r: Any, xm: Any, k: int) -> list[Any]:
    """[∂₁f, ∂₂f] of step k of the fold (yₖ₋₁ = r[k − 1], xₖ, yₖ = r[k])."""
    return decl.partials([r[k - 1], xm[k]], r[k], [True, True])


def fold_frule(uf: np.ufunc, decl: Elementwise, reduce: bool) -> Callable[..., Dual]:
    """The forward rule of `uf.reduce` (`reduce`) or `uf.accumulate`: ẏₖ = ∂₁f·ẏₖ₋₁ + ∂₂f·ẋₖ."""
    name = f"np.{uf.__name__}.{'reduce' if reduce else 'accumulate'}"

    def rule(f: Dual, x: Dual, *args: Dual, **kwargs: Any) -> Dual:
        axis, keepdims = _fold_options(name, args, kwargs, reduce)
        X = x.x
        y = uf.reduce(X, axis=axis, keepdims=keepdims) if reduce else uf.accumulate(X, axis)
        if x.dx is None:
            return Dual(y, None)
        if np.ndim(X) == 0:  # (numpy reduces a 0-d x to itself)
            return Dual(y, shaped_like(x.dx, y))
        ax = axis % np.ndim(X)
        xm, tm = np.moveaxis(X, ax, 0), np.moveaxis(x.dx, ax, 0)
        n = np.shape(xm)[0]
        if n == 0:
            return Dual(y, zeros_of(y))
        r = uf.accumulate(xm, axis=0) if reduce else np.moveaxis(y, ax, 0)
        ts = [tm[0]]
        with _quiet():
            for k in range(1, n):
                d1, d2 = _partials(decl, r, xm, k)
                ts.append(d1 * ts[-1] + d2 * tm[k])
        if not reduce:
            t = np.moveaxis(np.stack(ts), 0, ax)
        elif keepdims and np.ndim(ts[-1]):
            t = np.expand_dims(ts[-1], ax)
        else:
            t = ts[-1]
        return Dual(y, shaped_like(t, y))

    rule.__name__ = rule.__qualname__ = f"{uf.__name__}_{name.rsplit('.', 1)[1]}_frule"
    rule.__doc__ = f"{name}: ẏₖ = ∂₁f·ẏₖ₋₁ + ∂₂f·ẋₖ (the left fold, {uf.__name__}'s partials)."
    return rule


def fold_vjp(uf: np.ufunc, decl: Elementwise, reduce: bool) -> Callable[..., Any]:
    """The differentiable pullback of `uf.reduce` / `uf.accumulate`: the fold backwards,
    x̄ₖ = ∂₂f·tₖ, tₖ₋₁ = ȳₖ₋₁ + ∂₁f·tₖ (tₙ₋₁ = ȳₙ₋₁; reduce: ȳ at the last step only)."""
    name = f"np.{uf.__name__}.{'reduce' if reduce else 'accumulate'}"

    def rule(active: Sequence[bool], x: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        axis, keepdims = _fold_options(name, args, kwargs, reduce)
        y = uf.reduce(x, axis=axis, keepdims=keepdims) if reduce else uf.accumulate(x, axis)
        rest = (None,) * len(args)

        def fold_pullback(g: Any) -> tuple[Any, ...]:
            if not active[0] or g is None:
                return (None, *rest)
            if np.ndim(x) == 0:  # (numpy reduces a 0-d x to itself)
                return (to_arg(g, x), *rest)
            ax = axis % np.ndim(x)
            xm = np.moveaxis(x, ax, 0)
            n = np.shape(xm)[0]
            if n == 0:
                return (zeros_of(x), *rest)
            r = uf.accumulate(xm, axis=0) if reduce else np.moveaxis(y, ax, 0)
            gm: Any = None  # (accumulate: ȳ with the axis first)
            if reduce:
                t = np.moveaxis(g, ax, 0)[0] if keepdims else g
            else:
                gm = np.moveaxis(g, ax, 0)
                t = gm[n - 1]
            parts: list[Any] = [None] * n
            with _quiet():
                for k in range(n - 1, 0, -1):
                    d1, d2 = _partials(decl, r, xm, k)
                    parts[k] = d2 * t
                    t = d1 * t if gm is None else d1 * t + gm[k - 1]
            parts[0] = t
            shape = np.shape(xm)[1:]
            parts = [p if np.shape(p) == shape else np.broadcast_to(p, shape) for p in parts]
            return (to_arg(np.moveaxis(np.stack(parts), 0, ax), x), *rest)

        return y, fold_pullback

    rule.__name__ = rule.__qualname__ = f"{uf.__name__}_{name.rsplit('.', 1)[1]}_vjp"
    rule.__doc__ = f"{name}: x̄ₖ = ∂₂f·tₖ, tₖ₋₁ = ȳₖ₋₁ + ∂₁f·tₖ ({uf.__name__}'s partials)."
    return rule


for _uf, _decl, _reduce in _folds.FOLDS:
    register_like(
        _uf.reduce if _reduce else _uf.accumulate,
        frule=fold_frule(_uf, _decl, _reduce),
        vjp=fold_vjp(_uf, _decl, _reduce),
    )
