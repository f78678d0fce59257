"""Rules for order statistics: median, percentile, quantile and their nan- forms, and ptp.

Every method numpy offers computes, per lane and per q, y = (1 − γ)·x₍ₗ₎ + γ·x₍ₗ₊₁₎
from two order statistics, with l and γ depending only on the lane's count n and
on q (γ = 0 for the discontinuous methods: lower, higher, nearest, inverted_cdf,
...). The rule runs numpy's function forward (its exact value) and reads l and γ
off numpy itself: the same call on the sorted positions 0, 1, …, n−1 returns l + γ.
The adjoint is the gradient of that formula:

    x̄ += (1 − γ)·ȳ·[x = x₍ₗ₎]/#[x = x₍ₗ₎] + γ·ȳ·[x = x₍ₗ₊₁₎]/#[x = x₍ₗ₊₁₎]

Conventions (docs/conventions-reductions.md): an even-count median gives ½ to each
middle value; an order statistic shared by tied elements is split equally among
them (np.max's `tie_split`: quantile(x, 1) has np.max's gradient); a lane holding
a NaN has a NaN result whose ȳ is shared by the lane's NaNs (nan- forms skip NaNs;
an all-NaN lane gets nothing). A traced q is differentiated for method "linear"
(∂y/∂q = (n − 1)·(x₍ₗ₊₁₎ − x₍ₗ₎), the right derivative where (n − 1)q is an integer)
and the piecewise-constant methods (0); weights= raises NotImplementedError.

`np.ptp(x) = max(x) − min(x)` is derived from numpy's own formula
(`rules.numpy._composite`): np.max's and np.min's rules and their tie split.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Example, Vararg, example
from rules._support.cotangents import NO_R as none_r
from rules._support.cotangents import add_to_fdata, no_rdata, output_cotangent
from rules._support.examples import randn
from rules._support.forward import register_traced
from rules._support.outputs import new_output
from rules.numpy._composite import composite

__all__ = ["ptp_impl", "quantile_rrule"]

#: fn → (its parameters after `a`, the scale of q (percent), skips NaNs)
_FNS: dict[Any, tuple[tuple[str, ...], float | None, bool]] = {
    np.quantile: (("q", "axis", "out", "overwrite_input", "method", "keepdims"), 1.0, False),
    np.percentile: (("q", "axis", "out", "overwrite_input", "method", "keepdims"), 100.0, False),
    np.nanquantile: (("q", "axis", "out", "overwrite_input", "method", "keepdims"), 1.0, True),
    np.nanpercentile: (("q", "axis", "out", "overwrite_input", "method", "keepdims"), 100.0, True),
    np.median: (("axis", "out", "overwrite_input", "keepdims"), None, False),
    np.nanmedian: (("axis", "out", "overwrite_input", "keepdims"), None, True),
}


def _lanes(x: np.ndarray, axis: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    """x with the reduced axes moved last and merged: shape (…, n); and those axes."""
    axes = tuple(range(x.ndim)) if axis is None else tuple(np.atleast_1d(axis) % max(x.ndim, 1))
    rest = [d for d in range(x.ndim) if d not in axes]
    moved = np.transpose(x, rest + list(axes)) if x.ndim else x.reshape(1)
    keep = moved.shape[: len(rest)]
    return moved.reshape(*keep, -1), axes


@functools.lru_cache(maxsize=1024)
def _position(fn: Any, n: int, q: float, method: str) -> tuple[int, float]:
    """(l, γ) of numpy's formula for a lane of n values: fn on the positions 0…n−1."""
    p = float(fn(np.arange(n, dtype=np.float64), q, method=method)) if n else 0.0
    lo = min(max(int(np.floor(p)), 0), max(n - 1, 0))
    return lo, p - lo


def _order_stat_weights(
    a: np.ndarray, qs: np.ndarray, g: np.ndarray, fn: Any, method: str, skip_nan: bool
) -> np.ndarray:
    """Σ over q of the cotangent weights of each element of lanes `a` (…, n); g: (nq, …)."""
    s = np.sort(a, axis=-1)  # NaNs last
    nan = np.isnan(a)
    counts = (a.shape[-1] - nan.sum(-1)) if skip_nan else np.full(a.shape[:-1], a.shape[-1])
    has_nan = nan.any(-1)
    out = np.zeros(a.shape, np.result_type(a, g))
    for n in np.unique(counts):
        lanes = counts == n
        for k, q in enumerate(qs):
            lo, gamma = _position(fn, int(n), float(q), method)
            for idx, w in ((lo, 1.0 - gamma), (min(lo + 1, max(int(n) - 1, 0)), gamma)):
                if w == 0.0 or n == 0:
                    continue
                v = s[..., idx : idx + 1]
                hit = (a == v) & lanes[..., None]
                if not skip_nan:
                    hit &= ~has_nan[..., None]
                c = np.maximum(hit.sum(-1, keepdims=True), 1)
                out += np.where(hit, w * g[k][..., None] / c, 0)
    if not skip_nan and has_nan.any():  # NaN result: the lane's NaNs share ȳ (as np.max)
        c = np.maximum(nan.sum(-1, keepdims=True), 1)
        total = g.sum(0)[..., None]
        out += np.where(nan & has_nan[..., None], total / c, 0)
    return out


#: methods whose y has a q-derivative here: linear (dp/dq = n − 1), piecewise constant ones (0)
_Q_METHODS = ("linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf",
              "averaged_inverted_cdf", "closest_observation")  # fmt: skip


def _q_cotangent(
    q: CoDual, a: np.ndarray, qs: np.ndarray, g: np.ndarray, scale: float, skip_nan: bool,
    method: str,
) -> Any:  # fmt: skip
    """q̄ₖ = Σ_lanes ȳ·(n − 1)·(x₍ₗ₊₁₎ − x₍ₗ₎)/scale for method linear (the right derivative at
    integer positions); 0 for the piecewise-constant methods. Added to q's fdata or returned."""
    qbar = np.zeros(qs.size)
    if method == "linear":
        s = np.sort(a, axis=-1)
        nan = np.isnan(a)
        counts = (a.shape[-1] - nan.sum(-1)) if skip_nan else np.full(a.shape[:-1], a.shape[-1])
        for k, qk in enumerate(qs.reshape(-1)):
            for n in np.unique(counts):
                if n < 2:
                    continue
                lanes = counts == n
                lo, _ = _position(np.quantile, int(n), float(qk), "linear")
                hi = min(lo + 1, int(n) - 1)
                d = (s[..., hi] - s[..., lo]) * (n - 1) / scale
                qbar[k] += np.sum(np.where(lanes, g[k] * d, 0))
    if isinstance(q.dx, np.ndarray):
        add_to_fdata(q.dx, qbar.reshape(q.dx.shape))
        return none_r
    return type(q.x)(qbar[0])


def quantile_rrule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = (1−γ)x₍ₗ₎ + γx₍ₗ₊₁₎ ⇒ x̄ += ((1−γ)ȳ, γȳ), each split among the elements equal to it."""
    fn = f.x
    names, scale, skip_nan = _FNS[fn]
    o = {n: a.x for n, a in zip(names, args, strict=False)}
    o.update(kwargs)
    method = o.get("method", "linear")
    q_active = bool(args) and scale is not None and args[0].dx is not None
    if q_active and method not in _Q_METHODS:
        raise NotImplementedError(
            f"np.{fn.__name__}: the derivative w.r.t. a traced q is implemented for the methods "
            f"{', '.join(_Q_METHODS)}, not {method!r}; pass q as a constant"
        )
    if kwargs.get("weights") is not None:
        raise NotImplementedError(f"np.{fn.__name__}: weights= has no rule")
    if o.get("out") is not None:
        raise NotImplementedError(f"np.{fn.__name__}: pass out= by keyword (the engine handles it)")
    # overwrite_input=True would let numpy reorder x in place, which other rules may still
    # read: numpy leaves x's contents undefined then, so leaving x as it is is allowed
    y = fn(x.x, **{k: v for k, v in o.items() if k != "overwrite_input"})
    out = new_output(y)
    none = no_rdata(len(args) + 2)
    if scale is None:
        base, qs = (np.nanquantile if skip_nan else np.quantile), np.array([0.5])
    else:
        base = np.nanquantile if skip_nan else np.quantile
        qs = np.asarray(o["q"], np.float64) / scale
    q_shape = np.shape(qs) if scale is not None else ()
    axis = o.get("axis")
    X = x.x

    def quantile_pullback(dy: Any) -> tuple[Any, ...]:
        a, axes = _lanes(X, axis)
        g = np.reshape(output_cotangent(out, dy), (int(np.prod(q_shape)), *a.shape[:-1]))
        rq = _q_cotangent(args[0], a, qs, g, scale or 1.0, skip_nan, method) if q_active else None
        if x.dx is None:
            return (*none[:2], rq, *none[3:]) if q_active else none
        w = _order_stat_weights(a, qs.reshape(-1), g, base, method, skip_nan)
        rest = [d for d in range(X.ndim) if d not in axes]
        moved = w.reshape([X.shape[d] for d in rest + list(axes)])
        add_to_fdata(x.dx, np.transpose(moved, np.argsort(rest + list(axes))) if X.ndim else
                     moved.reshape(()))  # fmt: skip
        return (*none[:2], rq, *none[3:]) if q_active else none

    return out, quantile_pullback


def _examples(fn: Any) -> Any:
    def examples() -> list[Example]:
        x = randn(3, 4, seed=11)
        t = np.array(
            [[1.0, 3.0, 2.0, 5.0], [0.5, -1.0, 0.25, 4.0], [2.0, 6.0, 1.0, 0.0]]
        )  # 2-way ties
        _, scale, skip_nan = _FNS[fn]
        q: tuple[Any, ...] = () if scale is None else (0.3 * scale,)
        qv: tuple[Any, ...] = () if scale is None else (np.array([0.15, 0.4, 0.85]) * scale,)
        out = [
            example(x, *q),
            example(x, *q, axis=1),  # an even count: the median's ½, ½
            example(x.astype(np.float32), *qv, axis=0, keepdims=True),
            example(randn(5, seed=12), *q),
            example(t, *q, axis=(0, 1)),
        ]
        if scale is not None:
            out.append(example(x, *qv, axis=1, method="nearest"))
            out.append(example(x, *q, axis=0, method="midpoint"))
        if skip_nan:
            n = x.copy()
            n[0, 1] = n[2, 2] = np.nan
            out.append(example(n, *q, axis=1))
        return out

    return examples


for _fn in _FNS:
    rulekit.rrule.register(_fn, Array[np.floating], Vararg[Any], examples=_examples(_fn))(
        quantile_rrule
    )


def ptp_impl(a: Any, axis: Any = None, out: Any = None, keepdims: Any = np._NoValue) -> Any:
    """np.ptp's formula: maximum.reduce − minimum.reduce (np.max − np.min)."""
    if out is not None:
        raise NotImplementedError("np.ptp: pass out= by keyword (the engine handles it)")
    kw = {} if keepdims is np._NoValue else {"keepdims": keepdims}
    return np.max(a, axis=axis, **kw) - np.min(a, axis=axis, **kw)


def _ptp_examples() -> list[Example]:
    x = randn(3, 4, seed=28)
    t = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, -1.0, 0.5, -1.0], [0.0, 0.0, 4.0, 2.0]])
    return [
        example(x),
        example(x, 1),
        example(x.astype(np.float32), axis=0, keepdims=True),
        example(t, axis=1),  # two-way ties: split (np.max's convention)
    ]


rulekit.build_primitive_rrule.register(np.ptp, Array[np.floating], Vararg[Any],
                                       examples=_ptp_examples)(composite(
    ptp_impl, "y = max − min ⇒ x̄ += ȳ split among the maxima − ȳ split among the minima"
))  # fmt: skip
register_traced(np.ptp, ptp_impl)
