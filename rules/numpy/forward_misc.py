"""Forward rules and differentiable pullbacks for selection, creation and the other numpy
functions of a typical model that have hand-written reverse rules: `np.sort`,
`np.partition`, `np.select`, `np.zeros_like`/`ones_like`/`empty_like`/`full_like`,
`np.copyto` (forward only: it writes), `np.nan_to_num`, `np.pad` and `np.diff`. The
interpolation, convolution and polynomial functions are in `rules.numpy.forward_calculus`,
`np.cross` and `np.trapezoid` in `rules.numpy.forward_cross` (both imported at the end).

    sort, partition:  ẏ = ẋ[perm] (the same gather as y = x[perm]);  x̄ = ȳ[perm⁻¹]
    select:           ẏ = select(conds, [ẋₖ], ḋ);  x̄ₖ = ȳ where condₖ is the first true one
    *_like:           constant outputs (zeros of the output when x has a tangent: a buffer
                      that will be written into; empty_like gives zeros, as its reverse rule
                      does); full_like: ẏ = ḟill, f̄ill = Σ ȳ
    copyto:           ḋst ← ṡrc (where the primal is copied)
    nan_to_num:       ẏ = ẋ where x is finite, ṅan/ṗosinf/ṅeginf where they fill (Re/Im
                      separately);  x̄ = ȳ there, n̄an = Σ ȳ where it fills (copy=False: the
                      vjp rule refuses it, it writes into x)
    pad:              ẏ = pad(ẋ) (constant_values: constants);  x̄ = ȳ[interior] / Σ over copies
    diff:             ẏ = diff(ẋ, prepend=ṗ, append=ȧ);  x̄ = (Dᵀ)ⁿ ȳ split over the parts

The permutations come from `argsort`, a `rulekit.primitive` with a rule of its own (an
integer output, no derivative), so the rules trace: they are differentiable again.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

import rulekit
from rulekit import Dual, TracingError, Vararg, example
from rulekit._declared_rules import shaped_like
from rules._support.examples import randn
from rules._support.forward import bind_by_name, dual_tangent, dual_value, register_like
from rules._support.patterns import Inexact
from rules.numpy.indexing.forward import scatter_add
from rules.numpy.joining import PAD
from rules.numpy.ufuncs.forward import index_rules, inexact, to_arg, zeros_of

__all__ = ["argpartition", "argsort"]


# -- argsort: value-dependent integer indices, traceable --------------------------------------


def _argsort(x: Any, axis: Any = -1) -> np.ndarray:
    """The stable argsort of x along axis (None: of the flat x)."""
    return np.argsort(x, axis=axis, kind="stable")


argsort = rulekit.primitive(_argsort)
index_rules(argsort, _argsort, lambda: [example(randn(5)), example(randn(3, 4), None)])


# -- sort, partition ----------------------------------------------------------------------------


def _inverse(perm: Any, axis: int) -> Any:
    """The inverse permutation along axis (perm a plain integer array)."""
    return np.argsort(perm, axis=axis, kind="stable")


def _sort_perm(x: Any, axis: Any) -> tuple[Any, int, bool]:
    """(perm, axis, flat): perm sorts x (flattened when axis is None) along the axis."""
    flat = axis is None
    src = np.reshape(x, (-1,)) if flat else x
    return argsort(src, 0 if flat else axis), 0 if flat else axis, flat


def _gather(v: Any, perm: Any, axis: int, flat: bool) -> Any:
    src = np.reshape(v, (-1,)) if flat else v
    return np.take_along_axis(src, perm, axis)


def sort_frule(f: Dual, x: Dual, *args: Dual, **kw: Any) -> Dual:
    """ẏ = ẋ[perm] (the stable argsort: ties keep the input order)."""
    p = bind_by_name(np.sort, (x, *args), kw)
    perm, ax, flat = _sort_perm(x.x, dual_value(p["axis"]))
    y = _gather(x.x, perm, ax, flat)
    return Dual(y, None if x.dx is None else _gather(x.dx, perm, ax, flat))


def sort_vjp(active: Sequence[bool], x: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
    """x̄ = ȳ[perm⁻¹]."""
    axis = bind_by_name(np.sort, (x, *args), kw)["axis"]
    perm, ax, flat = _sort_perm(x, axis)
    y = _gather(x, perm, ax, flat)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None or not active[0]:
            return (None,) * (1 + len(args))
        gx = np.take_along_axis(g, _inverse(perm, ax), ax)
        return (to_arg(np.reshape(gx, np.shape(x)) if flat else gx, x), *(None,) * len(args))

    return y, pullback


def _partition_perm(x: Any, kth: Any, axis: Any) -> tuple[Any, int, bool]:
    flat = axis is None
    src = np.reshape(x, (-1,)) if flat else x
    ax = 0 if flat else axis
    return argpartition(src, kth, ax), ax, flat


def _argpartition(x: Any, kth: Any, axis: Any) -> np.ndarray:
    return np.argpartition(x, kth, axis=axis)


argpartition = rulekit.primitive(_argpartition)
index_rules(argpartition, _argpartition, lambda: [example(randn(6), 2, -1)])


def partition_frule(f: Dual, a: Dual, *args: Dual, **kw: Any) -> Dual:
    """ẏ = ẋ[P] with y = x[P] (P: argpartition)."""
    p = bind_by_name(np.partition, (a, *args), kw)
    perm, ax, flat = _partition_perm(a.x, dual_value(p["kth"]), dual_value(p["axis"]))
    y = _gather(a.x, perm, ax, flat)
    return Dual(y, None if a.dx is None else _gather(a.dx, perm, ax, flat))


def partition_vjp(active: Sequence[bool], a: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
    """x̄ = ȳ[P⁻¹]."""
    p = bind_by_name(np.partition, (a, *args), kw)
    perm, ax, flat = _partition_perm(a, p["kth"], p["axis"])
    y = _gather(a, perm, ax, flat)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None or not active[0]:
            return (None,) * (1 + len(args))
        gx = np.take_along_axis(g, _inverse(perm, ax), ax)
        return (to_arg(np.reshape(gx, np.shape(a)) if flat else gx, a), *(None,) * len(args))

    return y, pullback


register_like(np.sort, frule=sort_frule, vjp=sort_vjp)
register_like(np.partition, frule=partition_frule, vjp=partition_vjp)


# -- select -------------------------------------------------------------------------------------


def select_frule(f: Dual, conds: Dual, choices: Dual, *args: Dual, **kw: Any) -> Dual:
    """ẏ = select(conds, [ẋₖ], ḋefault) (zeros for constants)."""
    dflt = args[0] if args else kw.pop("default", Dual(0, None))
    dflt = dflt if isinstance(dflt, Dual) else Dual(dflt, None)
    xs = list(choices.x)
    y = np.select(conds.x, xs, dflt.x, *(a.x for a in args[1:]), **kw)
    dxs = choices.dx if isinstance(choices.dx, (list, tuple)) else [None] * len(xs)
    if (all(d is None for d in dxs) and dflt.dx is None) or not inexact(y):
        return Dual(y, None)
    ts = [0.0 if d is None else d for d in dxs]
    t = np.select(conds.x, ts, 0.0 if dflt.dx is None else dflt.dx)
    return Dual(y, shaped_like(t, y))


def select_vjp(
    active: Sequence[bool], conds: Any, choices: Any, *args: Any, **kw: Any
) -> tuple[Any, Any]:
    """x̄ₖ = ȳ where condₖ is the first true condition, d̄efault = ȳ where none is."""
    y = np.select(conds, choices, *args, **kw)

    def pullback(g: Any) -> tuple[Any, ...]:
        out: list[Any] = [None] * (2 + len(args))
        if g is None:
            return tuple(out)
        taken: Any = np.zeros(np.shape(g), bool)
        grads = []
        for c in conds:
            first = np.logical_and(c, np.logical_not(taken))
            taken = np.logical_or(taken, first)
            grads.append(np.where(first, g, 0.0))
        if active[1]:
            out[1] = [to_arg(gk, xk) for gk, xk in zip(grads, choices, strict=True)]
        if args and active[2]:
            out[2] = to_arg(np.where(taken, 0.0, g), args[0])
        return tuple(out)

    return y, pullback


register_like(np.select, frule=select_frule, vjp=select_vjp)


# -- zeros_like, ones_like, empty_like, full_like -----------------------------------------------


def like_frule(f: Dual, a: Dual, *args: Dual, **kw: Any) -> Dual:
    """A constant output: zeros tangent when a has one (a buffer to write traced values into),
    None otherwise; full_like(a, v): ẏ = v̇ broadcast."""
    fn = f.x
    y = _like(fn)(a.x, *[v.x for v in args], **kw)
    fill = args[0] if fn is np.full_like and args else None
    active = a.dx is not None or (fill is not None and fill.dx is not None)
    if not active or not inexact(y):
        return Dual(y, None)
    # (traced by an enclosing transformation, y's zeros are too: a buffer that receives its
    # values' tangents by writes; reverse over forward writes traced tangents into it)
    t = zeros_of(y) if isinstance(y, (np.ndarray, np.generic)) else np.zeros_like(y)
    if fill is not None and fill.dx is not None:
        t = shaped_like(t + fill.dx, y)
    return Dual(y, t)


def _like(fn: Any) -> Any:
    """What the rules call for `fn`: np.zeros_like for np.empty_like (whose values numpy
    leaves unspecified), as its reverse rule gives: values that do not depend on memory."""
    return np.zeros_like if fn is np.empty_like else fn


def _like_vjp(fn: Any) -> Any:
    def rule(active: Sequence[bool], a: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
        """No cotangent for a; full_like: f̄ill = Σ ȳ."""
        y = _like(fn)(a, *args, **kw)

        def pullback(g: Any) -> tuple[Any, ...]:
            out: list[Any] = [None] * (1 + len(args))
            if fn is np.full_like and args and active[1] and g is not None:
                out[1] = to_arg(np.sum(g), args[0])
            return tuple(out)

        return y, pullback

    return rule


for _fn in (np.zeros_like, np.ones_like, np.empty_like, np.full_like):
    register_like(_fn, frule=like_frule, vjp=_like_vjp(_fn))


# -- copyto: forward only (it writes) -----------------------------------------------------------


def copyto_frule(f: Dual, dst: Dual, src: Dual, *args: Dual, **kw: Any) -> Dual:
    """dst ← src (where=mask): ḋst ← ṡrc likewise (zeros for a constant src)."""
    rest, kws = [a.x for a in args], {k: dual_value(v) for k, v in kw.items()}
    if dst.dx is None and src.dx is not None and inexact(src.x):
        raise TracingError(
            "np.copyto writes a value with a tangent into an array without one. Fix: copy into "
            "an array that carries a tangent (e.g. `buf = np.zeros_like(x)` of a "
            "differentiated x)."
        )
    np.copyto(dst.x, src.x, *rest, **kws)
    if dst.dx is not None:
        t = zeros_of(src.x) if src.dx is None or not inexact(src.x) else src.dx
        if np.iscomplexobj(t) and not np.iscomplexobj(dst.dx):
            t = np.real(t)
        where = {k: v for k, v in kws.items() if k != "casting"}
        np.copyto(dst.dx, t, "unsafe", *rest[1:], **where)
    return Dual(None, None)


register_like(np.copyto, frule=copyto_frule)


# -- nan_to_num ---------------------------------------------------------------------------------


_FILLS = (("nan", np.isnan), ("posinf", np.isposinf), ("neginf", np.isneginf))


def _parts(v: Any) -> list[Any]:
    """The real parts of a value: [v] for real, [Re v, Im v] for complex."""
    return [np.real(v), np.imag(v)] if np.iscomplexobj(v) else [v]


def _whole(parts: list[Any]) -> Any:
    return parts[0] if len(parts) == 1 else parts[0] + 1j * parts[1]


def _nan_masks(x: Any) -> tuple[list[Any], list[list[Any]]]:
    """(finite, [fill masks]): per real part of x, where it is finite and where each
    replacement value (nan, posinf, neginf) goes. Taken before the call: copy=False
    overwrites x."""
    parts = _parts(x)
    return [np.isfinite(q) for q in parts], [[test(q) for q in parts] for _, test in _FILLS]


def _finite_part(finite: list[Any], t: Any) -> Any:
    """t where x is finite, Re and Im parts separately (0 elsewhere)."""
    return _whole([np.where(ok, tp, 0.0) for tp, ok in zip(_parts(t), finite, strict=True)])


def _mutates(x: Any, copy: Any) -> bool:
    """Whether np.nan_to_num(x, copy) overwrites x (copy=False on an array; numpy refuses
    copy=False for a number)."""
    return not bool(copy) and not isinstance(x, (float, complex, int, np.generic))


def nan_to_num_frule(f: Dual, x: Dual, *args: Dual, **kw: Any) -> Dual:
    """ẏ = ẋ where x is finite, + ṅan / ṗosinf / ṅeginf where they replaced a value
    (Re and Im parts separately)."""
    p = bind_by_name(np.nan_to_num, (x, *args), kw)
    fills = [p[name] for name, _ in _FILLS]
    finite, masks = _nan_masks(x.x)
    wanted = [dual_tangent(v) is not None for v in fills]
    mutates = _mutates(x.x, dual_value(p["copy"]))
    replaced = any(bool(np.any(m)) for ms in masks for m in ms)
    if mutates and x.dx is None and any(wanted) and replaced:
        raise TracingError(
            "np.nan_to_num(x, copy=False) would write replacement values with a tangent into "
            "x, which has none (a constant). Fix: use copy=True, or give x a tangent."
        )
    y = np.nan_to_num(x.x, *[a.x for a in args], **{k: dual_value(v) for k, v in kw.items()})
    if (x.dx is None and not any(wanted)) or not inexact(y):
        return Dual(y, None)
    parts = _parts(zeros_of(y) if x.dx is None else _finite_part(finite, x.dx))
    for v, on, ms in zip(fills, wanted, masks, strict=True):
        if on:
            d = np.real(dual_tangent(v))
            parts = [tp + np.where(m, d, 0.0) for tp, m in zip(parts, ms, strict=True)]
    t = shaped_like(_whole(parts), y)
    if mutates and x.dx is not None:
        x.dx[...] = t  # (copy=False: x itself is the output)
        return Dual(y, x.dx)
    return Dual(y, t)


def nan_to_num_vjp(active: Sequence[bool], x: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
    """x̄ = ȳ where x is finite; n̄an, p̄osinf, n̄eginf = Σ ȳ over the parts they filled.
    copy=False (which overwrites x) is refused: nested reverse mode handles no writes here."""
    p = bind_by_name(np.nan_to_num, (x, *args), kw)
    if _mutates(x, p["copy"]):
        raise TracingError(
            "np.nan_to_num(x, copy=False) overwrites x, which a nested differentiation (grad "
            "of grad, hessian, jacrev inside a transformation) cannot follow. Fix: use "
            "y = np.nan_to_num(x) (copy=True) and use y."
        )
    finite, masks = _nan_masks(x)
    y = np.nan_to_num(x, *args, **kw)
    names = ["x", *list(inspect.signature(np.nan_to_num).parameters)[1 : 1 + len(args)]]
    fill_masks = dict(zip([name for name, _ in _FILLS], masks, strict=True))

    def pullback(g: Any) -> tuple[Any, ...]:
        out: list[Any] = [None] * len(names)
        if g is None:
            return tuple(out)
        if active[0]:
            out[0] = to_arg(_finite_part(finite, g), x)
        for i, name in enumerate(names):
            ms = fill_masks.get(name)
            if ms is not None and active[i] and args[i - 1] is not None:
                gm = [np.sum(np.where(m, gp, 0.0)) for gp, m in zip(_parts(g), ms, strict=True)]
                out[i] = to_arg(sum(gm[1:], gm[0]), args[i - 1])
        return tuple(out)

    return y, pullback


def _nan_to_num_vjp_examples() -> list[Any]:
    """The reverse rule's examples but the one with copy=False (a vjp rule must not be
    checked on a call that mutates: it refuses it), and that one with copy=True."""
    from rules.numpy.numeric import _nan_to_num_examples

    out = []
    for ex in _nan_to_num_examples():
        if ex.args[1:2] == (False,):
            ex = replace(ex, args=(ex.args[0], True, *ex.args[2:]))
        out.append(ex)
    return out


register_like(np.nan_to_num, frule=nan_to_num_frule)
rulekit.vjp_rule.register(np.nan_to_num, Inexact, Vararg[Any], examples=_nan_to_num_vjp_examples)(
    nan_to_num_vjp
)


# -- pad ----------------------------------------------------------------------------------------


def pad_vjp(active: Sequence[bool], x: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
    """constant mode: x̄ = ȳ[interior]; edge/reflect/symmetric/wrap: x̄ = Σ of ȳ over the copies
    of each element (a scatter of ȳ by the index map pad(arange))."""
    p = bind_by_name(np.pad, (x, *args), kw)
    y = np.pad(x, *args, **kw)
    mode, width = p["mode"], p["pad_width"]
    shape = np.shape(x)
    n = 1 + len(args)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None or not active[0]:
            return (None,) * n
        if mode == "constant":
            w = np.broadcast_to(np.asarray(width, dtype=np.intp), (len(shape), 2))
            gx = g[tuple(slice(lo, lo + m) for (lo, _), m in zip(w, shape, strict=True))]
        else:
            kws = {k: v for k, v in p["kwargs"].items()}
            index_map = np.pad(np.arange(int(np.prod(shape))).reshape(shape), width, mode, **kws)
            gx = np.reshape(scatter_add(g, (int(np.prod(shape)),), index_map), shape)
        return (to_arg(gx, x), *(None,) * (n - 1))

    return y, pullback


register_like(np.pad, frule=PAD.frule, vjp=pad_vjp)


from rules.numpy import forward_calculus as forward_calculus  # noqa: E402
from rules.numpy import forward_cross as forward_cross  # noqa: E402
