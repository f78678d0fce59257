"""Helpers shared by the reduction rules (reductions, extrema, statistics, norms).

A reduction `y = R(x)` over `axes` hands its cotangent back to every element of
the reduced lanes, so most pullbacks are "expand ȳ to the kept-dims shape, scale
it elementwise, add it into x̄". These helpers do the bookkeeping once:
reading the numpy options, normalizing `axis`, and reshaping ȳ so it broadcasts
against `x` (the cotangent goes into x̄ with `rules._support.cotangents.add_to_fdata`).
See docs/conventions-reductions.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from rulekit import CoDual
from rules._support.cotangents import no_rdata
from rules._support.outputs import new_output

__all__ = [
    "NOVALUE",
    "axes_of",
    "differentiable",
    "expand",
    "flag",
    "forward",
    "kept_shape",
    "lane_count",
    "option",
    "plan",
    "read_options",
    "reject_traced_scalars",
    "safe_div",
    "simple_call",
    "split_lanes",
    "where_mask",
]

NOVALUE: Any = np._NoValue  # numpy's "argument not given" marker (keepdims=<no value>)

_SCALARS = (float, complex, np.inexact)


def read_options(
    names: Sequence[str], args: Sequence[CoDual], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The options of a call `fn(a, *args, **kwargs)` by name: `names` are fn's parameters
    after `a` (not `rules._support.binding`: numpy's reductions have no Python signature to
    bind to, and numpy has already checked the call).

    Positional CoDuals are unwrapped; keyword values stay as given (a traced
    keyword array, e.g. `weights=`, is a CoDual). Call numpy first: it has
    already rejected malformed calls, so only `out=` is checked here.
    """
    o = {n: a.x for n, a in zip(names, args, strict=False)}
    if kwargs:
        o.update(kwargs)
    out = o.get("out")
    if out is not None and out is not NOVALUE:
        raise NotImplementedError(
            "a reduction rule was called with out=: the engine handles out= itself (it records "
            "the call without out= and a copy into the destination). Call the rule without "
            "out=, or pass out= by keyword to traced code."
        )
    return o


def forward(
    f: CoDual,
    x: CoDual,
    args: Sequence[CoDual],
    kwargs: dict[str, Any],
    names: Sequence[str],
    allowed: tuple[str, ...] = (),
    call_kwargs: dict[str, Any] | None = None,
) -> tuple[Any, CoDual, tuple[Any, ...], dict[str, Any] | None]:
    """The forward pass the reduction rules share: numpy's `y = f(x, *args, **kwargs)`.

    Returns `(y, out, none, o)`: numpy's result, its CoDual (`output`), the
    all-NoRData rdata (`no_rdata`) and the options (`read_options`, `names` being the
    function's parameters after `x`), with options other than `allowed` refused
    as traced numbers (`reject_traced_scalars`). `o` is None when `y` carries no
    cotangent (an integer `dtype=`): the rule then returns `out, lambda dy: none`.
    `call_kwargs` replaces `kwargs` in the call (a traced keyword array unwrapped).
    """
    fn = f.x
    y = fn(x.x, *[a.x for a in args], **(kwargs if call_kwargs is None else call_kwargs))
    out = new_output(y)
    none = no_rdata(len(args) + 2)
    if not differentiable(y):
        return y, out, none, None
    o = read_options(names, args, kwargs)
    reject_traced_scalars(f"np.{fn.__name__}", names, args, allowed)
    return y, out, none, o


def reject_traced_scalars(
    fname: str, names: Sequence[str], args: Sequence[CoDual], allowed: tuple[str, ...] = ()
) -> None:
    """Raise if an option other than `allowed` arrives as an active (traced) float.

    Options such as `ddof` or `initial` are constants in practice; a traced
    value there would silently get no cotangent, so it is refused instead.
    """
    for n, a in zip(names, args, strict=False):
        if a.dx is not None and n not in allowed and isinstance(a.x, _SCALARS):
            raise NotImplementedError(
                f"{fname}: the option {n}= was passed a traced (differentiated) number; "
                f"no cotangent is computed for {n}=. Pass a constant."
            )


def option(o: dict[str, Any], name: str) -> Any:
    """An option's value, None when absent or numpy's `<no value>`."""
    v = o.get(name)
    return None if v is NOVALUE else v


def flag(o: dict[str, Any], name: str) -> bool:
    """A boolean option (`keepdims`), False when absent."""
    v = o.get(name, False)
    return False if v is NOVALUE else bool(v)


def axes_of(axis: Any, ndim: int) -> tuple[int, ...]:
    """The reduced axes, normalized (non-negative, checked); None means all of them."""
    if axis is None:
        return tuple(range(ndim))
    return normalize_axis_tuple(axis, ndim)


def kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    """The output shape with keepdims=True: the reduced axes become 1."""
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


_PLANS: dict[tuple[Any, tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]] = {}


def plan(axis: Any, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`(axes, kept_shape)` of a reduction over `axis` of an array of `shape` (memoized)."""
    try:
        return _PLANS[axis, shape]
    except KeyError:
        pass
    except TypeError:  # an unhashable axis (a list): not memoized
        axes = axes_of(axis, len(shape))
        return axes, kept_shape(shape, axes)
    axes = axes_of(axis, len(shape))
    if len(_PLANS) > 4096:
        _PLANS.clear()
    result = _PLANS[axis, shape] = (axes, kept_shape(shape, axes))
    return result


_F64, _F32 = np.dtype(np.float64), np.dtype(np.float32)


def simple_call(
    X: Any, args: Sequence[CoDual], kwargs: dict[str, Any]
) -> tuple[int | None, bool, tuple[Any, ...]] | None:
    """`(axis, keepdims, nulls)` of the calls the reductions' fast paths take, else None.

    Those are `f(X)`, `f(X, axis)`, `f(X, axis=a)`, each with or without a bool
    `keepdims=`, for a non-empty float32/float64 ndarray `X` (not 0-d) and an
    `axis` that is None or an in-range int (returned non-negative). Anything
    else (tuples of axes, `dtype=`, `where=`, an out-of-range axis, which numpy
    then rejects) is for the general code.
    """
    dt = X.dtype if type(X) is np.ndarray else None
    if (dt is not _F64 and dt is not _F32) or not X.ndim or not X.size:
        return None
    nk = len(kwargs)
    if args:
        if len(args) > 1 or (nk and "axis" in kwargs):
            return None
        axis = args[0].x
    else:
        axis = kwargs.get("axis")
        if axis is not None or "axis" in kwargs:
            nk -= 1
    keepdims: Any = False
    if nk:
        keepdims = kwargs.get("keepdims")
        if nk > 1 or (keepdims is not True and keepdims is not False):
            return None
    if axis is not None:
        if type(axis) is not int:
            return None
        nd = X.ndim
        if axis < 0:
            axis += nd
            if axis < 0:
                return None
        elif axis >= nd:
            return None
    return axis, keepdims, no_rdata(len(args) + 2)


def split_lanes(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """`(pre, n, post)`: a C-ordered array of `shape` as lanes `[p, :, q]` along `axis`."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def where_mask(o: dict[str, Any]) -> Any:
    """The `where=` mask, None when absent or all-True."""
    w = option(o, "where")
    return None if w is None or w is True else w


def differentiable(y: Any) -> bool:
    """Whether an output carries a cotangent (float/complex, not an integer `dtype=`)."""
    if type(y) is np.ndarray:
        return y.dtype.kind in "fc"
    return isinstance(y, _SCALARS)


def expand(v: Any, kshape: tuple[int, ...]) -> Any:
    """A reduction's output (or its cotangent) reshaped to broadcast against the input."""
    return v.reshape(kshape) if type(v) is np.ndarray else v


def lane_count(shape: tuple[int, ...], axes: tuple[int, ...], where: Any) -> Any:
    """How many elements each output reduces: an int, or (with where=) a kept-dims array."""
    if where is None:
        n = 1
        for i in axes:
            n *= shape[i]
        return n
    return np.sum(np.broadcast_to(where, shape), axis=axes, keepdims=True)


def safe_div(a: Any, b: Any) -> Any:
    """a / b, and 0 where b == 0 (the convention at kinks: see conventions-reductions.md)."""
    if np.ndim(a) == 0 and np.ndim(b) == 0:
        return a / b if b != 0 else 0 * a
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    out = np.zeros(shape, dtype=np.result_type(a, b, np.float16))
    np.divide(a, b, out=out, where=np.asarray(b) != 0)
    return out
