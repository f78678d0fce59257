"""Rules for the ufunc methods of differentiable ufuncs: reduce, accumulate, outer, reduceat.

Where a method *is* a numpy function that has a rule, the rule delegates to it
(same forward value, same conventions):

    add.reduce = sum, multiply.reduce = prod, maximum/minimum.reduce = max/min,
    add.accumulate = cumsum, multiply.accumulate = cumprod  (default axis=0)
    f.outer(a, b) = f(a[..., None, …, None], b)  (the binary ufunc's own rule; its
                    unbroadcast sums a's cotangent over b's axes)

and has its own rule otherwise:

    y = logaddexp.reduce(x)      ⇒  x̄ += ȳ·exp(x − y)        (logaddexp2: ·2^(x − y))
    y = maximum.accumulate(x)    ⇒  yᵢ's ȳᵢ split equally among the xⱼ (j ≤ i) equal to yᵢ
    y = add.reduceat(x, idx)     ⇒  x̄[segment k] += ȳₖ   (declared linear: `rulekit.linear`)

Ties follow np.max's `tie_split` (docs/conventions-reductions.md): a running
maximum shares ȳᵢ equally among the elements so far equal to it, and a lane of
`logaddexp.reduce` whose result is ±inf splits ȳ among the elements equal to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Example, Vararg, example
from rulekit._linear import linear
from rules._support.cotangents import (
    NO_F,
    NO_R,
    accumulate,
    add_to_fdata,
    no_rdata,
    output_cotangent,
)
from rules._support.examples import randn
from rules._support.outputs import new_output
from rules.numpy.reductions import extrema, products, sums
from rules.numpy.reductions._common import NOVALUE, plan
from rules.numpy.reductions.extrema import tie_split

assert extrema and products and sums  # the rules delegated to (np.sum, np.prod, np.max, ...)

__all__ = ["REDUCEAT", "accumulate_max_rrule", "logaddexp_reduce_rrule", "outer_rrule"]

_METHOD = ("axis", "dtype", "out", "keepdims", "initial", "where")


def _with_axis0(args: tuple[CoDual, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ufunc methods' default axis is 0 (np.sum's is None): pass it explicitly."""
    return kwargs if args or "axis" in kwargs else {**kwargs, "axis": 0}


def _without_dtype(
    x: CoDual, args: tuple[CoDual, ...], kwargs: dict[str, Any]
) -> tuple[tuple[CoDual, ...], dict[str, Any]]:
    """reduce's (axis, dtype, out, …) as np.max's (axis, out, …): dtype must be x's or None."""
    dtype = kwargs.get("dtype", args[1].x if len(args) > 1 else None)
    if dtype is not None and np.dtype(dtype) != x.x.dtype:
        raise NotImplementedError("np.maximum/minimum.reduce: dtype= other than x's has no rule")
    return (*args[:1], *args[2:]), {k: v for k, v in kwargs.items() if k != "dtype"}


def _delegate(target: Any) -> Any:
    def method_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        """y = ufunc.method(x, …) = target(x, …, axis=0 by default) ⇒ target's adjoint."""
        if f.x.__name__ == "accumulate" and x.x.ndim != 1:  # numpy refuses axis=None there
            axis = args[0].x if args else kwargs.get("axis", 0)
            if axis is None:
                f.x(x.x, *[a.x for a in args], **kwargs)  # numpy's own error
        if target in (np.max, np.min):  # (np.max has no dtype parameter)
            args2, kw = _without_dtype(x, args, kwargs)
            y, pullback = rulekit.rrule(CoDual(target, NO_F), x, *args2, **_with_axis0(args2, kw))
            if len(args2) == len(args):
                return y, pullback

            def extremum_method_pullback(dy: Any) -> tuple[Any, ...]:
                r = tuple(pullback(dy))
                return (*r[:3], NO_R, *r[3:])  # (dtype's rdata back in its place)

            return y, extremum_method_pullback
        return rulekit.rrule(CoDual(target, NO_F), x, *args, **_with_axis0(args, kwargs))

    return method_rrule


def _reduce_examples() -> list[Example]:
    x = randn(3, 4, seed=1)
    return [example(x), example(x, 1), example(x.astype(np.float32), axis=None, keepdims=True)]


def _tied_examples() -> list[Example]:  # (≤ 4 per ufunc registration: the kit's budget)
    t = np.array([[0.5, 2.0, 2.0, -1.0], [1.0, 1.0, 3.0, 3.0], [-2.0, 0.0, -2.0, 0.5]])
    x = randn(3, 4, seed=1)
    return [
        example(t, axis=1),  # two-way ties: split (np.max's convention)
        example(x, 1, None, None, True),  # positional dtype, out, keepdims
        example(x, 0, np.float64, keepdims=False, initial=-0.5),
        example(x.astype(np.float32), axis=None, keepdims=True),
    ]


_DELEGATED: list[tuple[Any, Any, Any, Any]] = [
    (np.add.reduce, np.sum, Array[np.inexact], _reduce_examples),
    (np.multiply.reduce, np.prod, Array[np.inexact], _reduce_examples),
    (np.maximum.reduce, np.max, Array[np.floating], _tied_examples),
    (np.minimum.reduce, np.min, Array[np.floating], _tied_examples),
    (np.add.accumulate, np.cumsum, Array[np.inexact], lambda: _reduce_examples()[:2]),
    (np.multiply.accumulate, np.cumprod, Array[np.inexact], lambda: _reduce_examples()[:2]),
]
for _method, _target, _pattern, _ex in _DELEGATED:
    rulekit.rrule.register(_method, _pattern, Vararg[Any], examples=_ex)(_delegate(_target))


# -- logaddexp.reduce, logaddexp2.reduce --------------------------------------------------------


def _only(fname: str, args: tuple[CoDual, ...], kwargs: dict[str, Any], allowed: set[str]) -> Any:
    """The options by name; refuse options other than `allowed` (and traced ones)."""
    o = {n: a.x for n, a in zip(_METHOD, args, strict=False)}
    o.update(kwargs)
    for n, a in zip(_METHOD, args, strict=False):
        if a.dx is not None:
            raise NotImplementedError(f"{fname}: {n}= must be a constant, not a traced value")
    for n, v in o.items():
        if (
            n not in allowed
            and v is not None
            and v is not NOVALUE
            and not (n == "where" and v is True)
        ):
            raise NotImplementedError(
                f"{fname}: the option {n}= has no rule; supported: {', '.join(sorted(allowed))}"
            )
    return o


def logaddexp_reduce_rrule(
    f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = log Σ exp(x) over axis ⇒ x̄ += ȳ·exp(x − y) (base 2 for logaddexp2); ±inf y: tie split."""
    fn = f.x
    o = _only(f"np.{fn.__self__.__name__}.reduce", args, kwargs, {"axis", "keepdims"})
    y = fn(x.x, *[a.x for a in args], **kwargs)
    out = new_output(y)
    none = no_rdata(len(args) + 2)
    axes, kshape = plan(o.get("axis", 0), x.x.shape) if x.x.ndim else ((), ())  # (0-d: y = x)
    base2 = fn.__self__ is np.logaddexp2

    def logaddexp_reduce_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is None:
            return none
        g = np.reshape(output_cotangent(out, dy), kshape)
        yk = np.reshape(y, kshape)
        with np.errstate(invalid="ignore"):
            w = np.exp2(x.x - yk) if base2 else np.exp(x.x - yk)
        bad = ~np.isfinite(yk)
        if bad.any():  # an infinite (or NaN) result: the elements equal to it share ȳ
            hit, count = tie_split(x.x, yk, axes)
            w = np.where(bad, hit / count, w)
        add_to_fdata(x.dx, w * g)
        return none

    return out, logaddexp_reduce_pullback


def _lse_examples() -> list[Example]:
    x = randn(3, 4, seed=2)
    return [
        example(x),
        example(x, 1),
        example(x.astype(np.float32), axis=None, keepdims=True),
        example(x, (0, 1)),
    ]


for _lse in (np.logaddexp, np.logaddexp2):
    rulekit.rrule.register(_lse.reduce, Array[np.floating], Vararg[Any], examples=_lse_examples)(
        logaddexp_reduce_rrule
    )


# -- maximum.accumulate, minimum.accumulate -----------------------------------------------------


def _running_tie_adjoint(x: np.ndarray, y: np.ndarray, g: np.ndarray) -> np.ndarray:
    """x̄ for y = running max/min along the last axis: ȳᵢ split among the xⱼ (j ≤ i) equal to yᵢ.

    y is monotone, so the candidates for yᵢ lie in the run of equal y around i
    (NaN counts as equal to NaN: a NaN result is shared by the NaNs so far). In a
    run, cᵢ = the number of hits up to i, and x̄ⱼ = hitⱼ · Σ_{i ≥ j in the run} ȳᵢ/cᵢ.
    """
    nan = np.isnan(x) & np.isnan(y)
    hit = (x == y) | nan
    n = x.shape[-1]
    new_run = np.ones(x.shape, bool)
    if n > 1:
        same = (y[..., 1:] == y[..., :-1]) | (np.isnan(y[..., 1:]) & np.isnan(y[..., :-1]))
        new_run[..., 1:] = ~same
    hits = np.cumsum(hit, axis=-1)
    start = np.maximum.accumulate(np.where(new_run, np.arange(n), 0), axis=-1)
    before = np.take_along_axis(hits, start, -1) - np.take_along_axis(hit, start, -1)
    w = g / np.maximum(hits - before, 1)
    suffix = np.cumsum(w[..., ::-1], axis=-1)[..., ::-1]  # Σ_{i ≥ j} wᵢ over the lane
    nxt = _run_last(new_run) + 1
    after = np.where(nxt < n, np.take_along_axis(suffix, np.minimum(nxt, n - 1), -1), 0)
    return np.where(hit, suffix - after, 0)


def _run_last(new_run: np.ndarray) -> np.ndarray:
    """The index of the last element of each element's run (runs start where new_run)."""
    n = new_run.shape[-1]
    if n == 0:  # (empty lanes)
        return np.zeros(new_run.shape, np.intp)
    ends = np.zeros(new_run.shape, bool)
    ends[..., -1] = True
    ends[..., :-1] = new_run[..., 1:]
    idx = np.where(ends, np.arange(n), n)
    return np.minimum.accumulate(idx[..., ::-1], axis=-1)[..., ::-1]


def accumulate_max_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = running max/min of x along axis ⇒ x̄ⱼ += Σ_{i ≥ j, xⱼ = yᵢ} ȳᵢ / #{k ≤ i : xₖ = yᵢ}."""
    fn = f.x
    o = _only(f"np.{fn.__self__.__name__}.accumulate", args, kwargs, {"axis"})
    y = fn(x.x, *[a.x for a in args], **kwargs)
    out = new_output(y)
    none = no_rdata(len(args) + 2)
    axis = o.get("axis", 0)

    def accumulate_max_pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            ax = 0 if axis is None else axis
            xm, ym, gm = (np.moveaxis(v, ax, -1) for v in (x.x, y, out.dx))
            add_to_fdata(x.dx, np.moveaxis(_running_tie_adjoint(xm, ym, gm), -1, ax))
        return none

    return out, accumulate_max_pullback


def _running_examples() -> list[Example]:
    t = np.array([[0.5, 2.0, 2.0, -1.0, 1.0], [1.0, 1.0, 3.0, 0.0, 3.0], [-2.0, 0.0, -2, 5, 5]])
    return [
        example(randn(3, 4, seed=3)),
        example(t, 1),  # two-way ties (maxima and minima): the split is the central difference
        example(randn(4, 3, seed=4, dtype=np.float32), axis=-1),
        example(randn(5, seed=5), axis=None),
    ]


for _ext in (np.maximum, np.minimum):
    rulekit.rrule.register(
        _ext.accumulate, Array[np.floating], Vararg[Any], examples=_running_examples
    )(accumulate_max_rrule)


# -- outer ------------------------------------------------------------------------------------


def _operand(c: CoDual) -> tuple[CoDual, np.ndarray | None]:
    """A list/tuple operand as an array CoDual (and its fdata buffer, when differentiated)."""
    if not isinstance(c.x, (list, tuple)):
        return c, None
    x = np.asarray(c.x)
    if c.dx is None or x.dtype.kind not in "fc":
        return CoDual(x, None), None
    buf = np.zeros(x.shape, x.dtype)
    return CoDual(x, buf), buf


def _expanded(a: CoDual, k: int) -> CoDual:
    """`a` with k trailing unit axes (views of its primal and of its fdata); a number as it is."""
    if k == 0 or not isinstance(a.x, np.ndarray):
        return a
    idx = (Ellipsis,) + (None,) * k
    dx = a.dx[idx] if isinstance(a.dx, np.ndarray) else a.dx
    return CoDual(a.x[idx], dx)


def outer_rrule(f: CoDual, a: CoDual, b: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = u.outer(a, b) = u(a[…, None·b.ndim], b) ⇒ u's adjoint (ā summed over b's axes)."""
    u = f.x.__self__
    (ca, abuf), (cb, bbuf) = _operand(a), _operand(b)
    y, pullback = rulekit.rrule(CoDual(u, NO_F), _expanded(ca, np.ndim(cb.x)), cb, **kwargs)
    if abuf is None and bbuf is None:
        return y, pullback

    def outer_list_pullback(dy: Any) -> tuple[Any, ...]:
        r = list(pullback(dy))
        for i, (c, buf) in enumerate(((a, abuf), (b, bbuf)), 1):
            if buf is not None:
                r[i] = accumulate(c, buf)  # (a list's elements get their cotangents)
        return tuple(r)

    return y, outer_list_pullback


#: the binary ufuncs whose `outer` has a rule (their own rules, `rules.numpy.ufuncs.binary`)
OUTER_UFUNCS: tuple[Any, ...] = (
    np.add, np.subtract, np.multiply, np.true_divide, np.power, np.float_power, np.maximum,
    np.minimum, np.fmax, np.fmin, np.hypot, np.arctan2, np.logaddexp, np.logaddexp2,
)  # fmt: skip


def _outer_examples(u: Any) -> Any:
    def examples() -> list[Example]:
        a, b = np.abs(randn(3, seed=6)) + 0.5, np.abs(randn(2, 2, seed=7)) + 0.5  # (power: > 0)
        return [  # (≤ 4 per ufunc registration; a scalar b and a list b: in the tests)
            example(a, b),
            example(b.astype(np.float32), a.astype(np.float32)),
            example(0.75, b),
            example([0.5, 1.5], b),  # a list operand is an array
        ]

    return examples


for _u in OUTER_UFUNCS:
    for _pats in ((Array[np.inexact], Any), (Any, Array[np.inexact]),
                  (Array[np.inexact], Array[np.inexact])):  # fmt: skip
        rulekit.rrule.register(_u.outer, *_pats, examples=_outer_examples(_u))(outer_rrule)


# -- add.reduceat ---------------------------------------------------------------------------------


def _reduceat_adjoint(
    g: np.ndarray, x: np.ndarray, indices: Any, axis: int = 0, dtype: Any = None, out: Any = None
) -> np.ndarray:
    """y = add.reduceat(x, idx) ⇒ x̄[sₖ:eₖ] += ȳₖ along axis (eₖ = idx[k+1] if > sₖ, else sₖ+1)."""
    if dtype is not None:
        raise NotImplementedError("np.add.reduceat: dtype= has no rule; supported: axis")
    n = x.shape[axis]
    s = np.asarray(indices, np.intp).reshape(-1)
    e = np.empty_like(s)
    e[:-1] = np.where(s[1:] > s[:-1], s[1:], s[:-1] + 1)
    e[-1:] = n
    gm = np.moveaxis(np.asarray(g), axis, 0)
    d = np.zeros((n + 1, *gm.shape[1:]), gm.dtype)
    np.add.at(d, s, gm)  # a difference array: +ȳₖ where segment k starts, −ȳₖ past its end
    np.subtract.at(d, e, gm)
    return np.moveaxis(np.cumsum(d[:n], axis=0), 0, axis)


#: y = np.add.reduceat(x, indices, axis)  (linear in x)
REDUCEAT = linear(
    np.add.reduceat,
    _reduceat_adjoint,
    patterns=[(Array[np.inexact], Vararg[Any])],
    examples=lambda: [
        example(randn(7, seed=8), [0, 3, 3, 1, 5]),  # empty, decreasing, single segments
        example(randn(3, 5, seed=9, dtype=np.float32), np.array([1, 4]), axis=1),
        example(randn(4, 2, seed=10, dtype=np.complex128), [0, 2]),
    ],
    name="add.reduceat",
)
