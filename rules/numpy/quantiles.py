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
from rules._support.forward import register_like, register_traced
from rules._support.outputs import new_output
from rules.numpy._composite import composite
from rules.numpy._traced_active import active_traced_rules

__all__ = ["QuantileMethodError", "ptp_impl", "quantile_rrule"]

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


# -- forward rules and differentiable pullbacks: numpy's formula, traced ------------------------
#
# The order statistics come from a sort of each lane; numpy's own virtual index, neighbours
# and interpolation weight γ (its `_QuantileMethods` table, its `_lerp`) give the value as
# numpy 2.4 computes it; the value returned is the installed numpy's own, with the formula's
# derivative (`_with_value`: rounding of q and γ differs between releases). Each order
# statistic x₍ₗ₎ then has the tangent of the elements tied with it, averaged
# (x₍ₗ₎ + Σ_{xⱼ = x₍ₗ₎} (xⱼ − x₍ₗ₎)/#: the value is unchanged, the derivative is the reverse
# rule's tie split); a lane holding a NaN (non-nan forms) has
# the NaNs' average tangent, an all-NaN lane (nan forms) none. The index and γ depend on q
# only: a traced q is differentiated through γ for method "linear", is a constant of the
# piecewise-constant methods (their derivative in q is 0 where it exists), and is refused for
# the other continuous ones (QuantileMethodError), as by the reverse rule. A constant q is a
# plain value of the re-implementation (`active_traced_rules` closes over it).

#: methods whose virtual index numpy computes as n·q + (α + q·(1 − α − β)) − 1
_ALPHA_BETA: dict[str, tuple[float, float]] = {
    "interpolated_inverted_cdf": (0, 1),
    "hazen": (0.5, 0.5),
    "weibull": (0, 0),
    "median_unbiased": (1 / 3.0, 1 / 3.0),
    "normal_unbiased": (3 / 8.0, 3 / 8.0),
}
_CONTINUOUS = ("linear", *_ALPHA_BETA)
#: methods whose virtual index is an integer: the order statistic itself (numpy's `take`)
_TAKE = ("inverted_cdf", "closest_observation", "lower", "higher", "nearest")
_METHODS = (*_CONTINUOUS, "inverted_cdf", "averaged_inverted_cdf", "closest_observation",
            "lower", "higher", "midpoint", "nearest")  # fmt: skip


class QuantileMethodError(rulekit.TracingError, NotImplementedError):
    """A traced q with a continuous method other than "linear" (hazen, weibull, ...): refused
    by the forward rules and differentiable pullbacks as by the reverse rule, whose
    NotImplementedError it also is."""


def _discrete_to_boundaries(index: Any, odd_rule: bool) -> Any:
    """numpy's `_discrete_interpolation_to_boundaries` (inverted_cdf, closest_observation)."""
    prev = np.floor(index)
    gamma = index - prev
    take_prev = (gamma == 0) & (np.floor(index) % 2 == 1) if odd_rule else gamma == 0
    return np.maximum(np.astype(np.where(take_prev, prev, prev + 1), np.intp), 0)


def _virtual_index(method: str, n: Any, q: Any) -> Any:
    """numpy's virtual index of quantile q in lanes of n values (n in q's dtype)."""
    if method == "linear":
        return (n - 1) * q
    if method in _ALPHA_BETA:
        alpha, beta = _ALPHA_BETA[method]
        return n * q + (alpha + q * (1 - alpha - beta)) - 1
    if method == "inverted_cdf":
        return _discrete_to_boundaries(n * q - 1, False)
    if method == "closest_observation":
        return _discrete_to_boundaries(n * q - 1 - 0.5, True)
    if method == "averaged_inverted_cdf":
        return n * q - 1
    if method == "lower":
        return np.astype(np.floor((n - 1) * q), np.intp)
    if method == "higher":
        return np.astype(np.ceil((n - 1) * q), np.intp)
    if method == "nearest":
        return np.astype(np.around((n - 1) * q), np.intp)
    # midpoint
    return 0.5 * (np.floor((n - 1) * q) + np.ceil((n - 1) * q))


def _fix_gamma(method: str, gamma: Any, index: Any) -> Any:
    if method == "averaged_inverted_cdf":
        return np.astype(np.where(gamma == 0, 0.5, 1.0), index.dtype)
    if method == "midpoint":
        return np.astype(np.where(index % 1 == 0, 0.0, 0.5), index.dtype)
    return gamma


def _lerp(a: Any, b: Any, t: Any, weak: Any) -> Any:
    """numpy's `_lerp`: a + (b − a)·t, or b − (b − a)·(1 − t) where t ≥ 0.5. `weak`: numpy's
    t is a Python float (a Python float q), which a narrower `a` rounds to its own dtype
    after 1 − t: t and 1 − t in that dtype."""
    diff = b - a
    upper, t1 = t >= 0.5, 1 - t
    if weak is not None and weak != t.dtype:
        t, t1 = np.astype(t, weak), np.astype(t1, weak)
    return np.where(upper, b - diff * t1, a + diff * t)


def _order_stat(s: Any, lanes: Any, idx: Any) -> Any:
    """s[..., idx] per lane (idx: (…q, …lanes)), with the tangent of the elements tied with it
    averaged (value unchanged: each tied xⱼ − x₍ₗ₎ is exactly 0)."""
    extra = tuple(range(np.ndim(idx) + 1 - np.ndim(s)))  # (the q axes)
    if extra:
        s, lanes = np.expand_dims(s, extra), np.expand_dims(lanes, extra)
    v = np.take_along_axis(s, idx[..., None], axis=-1)  # (…q, …lanes, 1)
    hits = (lanes == v) & np.isfinite(v)  # (comparisons: plain arrays; ±inf: no tie split)
    count = np.sum(hits, axis=-1)
    if not np.any(count > 1):
        return v[..., 0]
    tied = np.sum(np.where(hits, lanes - v, 0), axis=-1) / np.maximum(count, 1).astype(v.dtype)
    return v[..., 0] + tied


def _quantile_forward(
    fn: Any, a: Any, q: Any, axis: Any, method: str, keepdims: Any, scale: float | None,
    skip_nan: bool,
) -> Any:  # fmt: skip
    """fn(a, q, axis=axis, method=method, keepdims=keepdims) by numpy's formula (see above).

    Every intermediate is an array of at least one dimension (a single lane is a batch of
    one, a scalar q a vector of one): rulekit's rules take NumPy scalars in fewer places."""
    if method not in _METHODS:
        raise ValueError(f"{method!r} is not a valid method. Use one of: {_METHODS}")
    shape = np.shape(a)
    axes = (tuple(range(len(shape))) if axis is None else
            np.lib.array_utils.normalize_axis_tuple(axis, len(shape)))  # fmt: skip
    rest = [d for d in range(len(shape)) if d not in axes]
    moved = np.transpose(a, rest + list(axes)) if rest else a
    kept = tuple(shape[d] for d in rest)
    lanes = np.reshape(moved, (*(kept or (1,)), -1))  # (…lanes, n)
    n = lanes.shape[-1]
    nan = np.isnan(lanes)  # (plain booleans, as every comparison below)
    counts = (n - np.sum(nan, axis=-1)) if skip_nan else np.full(lanes.shape[:-1], n)
    s = np.sort(lanes, axis=-1)
    qshape: tuple[int, ...] = ()
    if scale is None:  # median: the mean of the two middle order statistics
        lo = np.maximum((counts - 1) // 2, 0).astype(np.intp)
        hi = np.maximum(counts // 2, 0).astype(np.intp)
        a_lo, a_hi = _order_stat(s, lanes, lo), _order_stat(s, lanes, hi)
        if a_lo.dtype == np.float16:  # (np.mean of float16 adds in float32)
            y = np.astype((np.astype(a_lo, np.float32) + np.astype(a_hi, np.float32)) / 2,
                          np.float16)  # fmt: skip
        else:
            y = (a_lo + a_hi) / 2
    else:
        weak = _weak(q)
        Q = np.stack(q) if isinstance(q, (list, tuple)) else q
        Q = np.asarray(Q) if isinstance(Q, (int, float, np.generic)) else Q
        if method in _ALPHA_BETA and not isinstance(Q, (np.ndarray, np.generic)):
            raise QuantileMethodError(
                f"np.{fn.__name__}: the derivative w.r.t. a traced q is implemented for the "
                f"methods {', '.join(_Q_METHODS)}, not {method!r}, in every mode (as the reverse "
                "rule); pass q as a constant (rulekit.stop_gradient(q))"
            )
        if scale != 1.0:
            Q = np.true_divide(Q, scale)
        if not (np.all(Q >= 0) and np.all(Q <= 1)):
            what = "Quantiles must be in the range [0, 1]" if scale == 1.0 else (
                "Percentiles must be in the range [0, 100]")  # fmt: skip
            raise ValueError(what)
        if np.ndim(Q) > 2:
            raise ValueError("q must be a scalar or 1d")
        qshape = np.shape(Q)
        qdt = np.result_type(Q)
        Q = np.reshape(Q, (-1,)) if qshape else Q * np.ones(1, qdt)  # (exact: q·1)
        Qb = np.reshape(Q, (-1,) + (1,) * (lanes.ndim - 1))
        index = _virtual_index(method, counts.astype(qdt), Qb)  # (q, …lanes; integers plain)
        idt = np.result_type(index)
        last = np.broadcast_to(counts - 1, np.shape(index))
        if method in _TAKE or (method == "linear" and idt.kind in "iu"):
            y = _order_stat(s, lanes, np.broadcast_to(index, np.shape(last)))
        else:
            prev = np.astype(np.floor(index), np.intp)  # (plain: integers carry no derivative)
            top = (index >= last) | np.isnan(index)
            prev = np.where(top, last, np.where(index < 0, 0, prev))
            nxt = np.where(top | (index < 0), prev, prev + 1)
            gamma = _fix_gamma(method, np.astype(index - prev.astype(idt), idt), index)
            y = _lerp(_order_stat(s, lanes, prev), _order_stat(s, lanes, nxt), gamma,
                      np.result_type(lanes.dtype, 1.0) if weak else None)  # fmt: skip
    out_shape = qshape + kept
    if skip_nan:
        empty = counts == 0
        if np.any(empty):
            y = np.where(empty, np.nan, y)
    elif np.any(nan):  # a NaN result, whose tangent is the lane's NaNs' (as np.max)
        cn = np.astype(np.maximum(np.sum(nan, axis=-1), 1), lanes.dtype)
        y = np.where(np.any(nan, axis=-1), np.sum(np.where(nan, lanes, 0), axis=-1) / cn, y)
        if not out_shape:  # (numpy returns the lane's last element itself then)
            y = np.astype(y, lanes.dtype)
    if keepdims is True:
        out_shape = qshape + tuple(1 if d in axes else shape[d] for d in range(len(shape)))
    if not out_shape:
        return np.reshape(y, (-1,))[0]  # (a NumPy scalar, as numpy returns)
    return np.reshape(y, out_shape)


def _weak(q: Any) -> bool:
    """Whether q promotes weakly, as numpy's `type(q) in (int, float)` (a traced Python float
    too): float16 stays float16 with it, and q is not a float16 itself."""
    if isinstance(q, (list, tuple)):
        return False
    return bool(np.result_type(np.float16, q) == np.float16 and np.result_type(q) != np.float16)


def _with_value(y: Any, want: Any) -> Any:
    """numpy's own value `want`, with the derivative of the re-implementation's y.

    The formula above follows numpy's, but numpy's rounding of q and γ has changed between
    releases (2.2 casts a Python float q to a's dtype, 2.4 promotes it weakly): the value is
    taken from numpy itself, so it is the installed numpy's bit for bit. Where y = want, y;
    elsewhere (y − stop_gradient(y)) + want, whose value is want exactly (y − y = 0) and whose
    derivative is y's. ±inf and NaN results are equal or NaN on both sides: no inf − inf."""
    y = np.astype(y, np.result_type(want)) if np.result_type(y) != np.result_type(want) else y
    out = np.where(y == want, y, (y - rulekit.stop_gradient(y)) + want)
    return np.reshape(out, (-1,))[0] if np.ndim(want) == 0 else out


def _quantile_impl(fn: Any) -> Any:
    """A traceable re-implementation of quantile-type `fn`, with numpy's signature."""
    names, scale, skip_nan = _FNS[fn]

    def impl(a: Any, *args: Any, **kwargs: Any) -> Any:
        o: dict[str, Any] = dict(zip(names, args, strict=False))
        o.update(kwargs)
        if o.get("weights") is not None:
            raise NotImplementedError(f"np.{fn.__name__}: weights= has no rule")
        if o.get("out") is not None:
            raise NotImplementedError(
                f"np.{fn.__name__}: pass out= by keyword (the engine handles it)")  # fmt: skip
        plain = {k: v for k, v in o.items() if k not in ("out", "overwrite_input")}
        want = fn(rulekit.stop_gradient(a), **rulekit.stop_gradient(plain))  # (its warnings too)
        if np.size(a) == 0:  # (NaNs: nothing to differentiate)
            return want
        y = _quantile_forward(fn, a, o.get("q"), o.get("axis"), o.get("method", "linear"),
                              o.get("keepdims", False), scale, skip_nan)  # fmt: skip
        return _with_value(y, want)

    impl.__name__ = impl.__qualname__ = f"{fn.__name__}_impl"
    impl.__doc__ = f"np.{fn.__name__} by numpy's formula on a sort (traceable)."
    return impl


for _fn in _FNS:  # (a constant q stays a plain value of the re-implementation: see _ALPHA_BETA)
    _frule, _vjp = active_traced_rules(_quantile_impl(_fn))
    register_like(_fn, frule=_frule, vjp=_vjp)

# np.gradient's and np.real_if_close's forward rules and differentiable pullbacks: registered
# here, as rules.numpy imports this module after their reverse rules (numeric, shape)
from rules.numpy import forward_numeric as forward_numeric  # noqa: E402
