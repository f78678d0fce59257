"""More shape rules: append, atleast_1d/2d/3d, column_stack, rot90, np.astype, partition,
real_if_close.

`append`, `column_stack`, `rot90` and `np.astype` are linear and declared once each
(`rulekit.linear`); their adjoints gather ȳ back:

    y = append(a, v, axis)    ⇒  ā += ȳ[first block],  v̄ += ȳ[second block]
    y = column_stack(xs)      ⇒  x̄ₖ += ȳ[:, columns of xₖ] (1-D/0-d: reshaped back)
    y = column_stack(x)       ⇒  the same, xₖ = x[k] (one array: the sequence of its slices)
    y = rot90(x, k, axes)     ⇒  x̄ += rot90(ȳ, −k, axes)   (a view: its fdata is rot90(x̄))
    y = np.astype(x, d)       ⇒  x̄ += ȳ cast back (Re ȳ for a real x)

The others stay hand-written, with the reason: `atleast_*d` takes any number of
arguments and returns views of (or the very same) inputs, a scalar becoming a new
array; `partition` and `real_if_close` are linear only for a data-dependent choice
(the permutation; whether the imaginary parts are dropped):

    y = atleast_nd(x)         ⇒  a view of x (fdata: the same view of x̄); scalar x: x̄ = Σ ȳ
    y = partition(x, kth)     ⇒  x̄[P] += ȳ, P the permutation with y = x[P]
    y = real_if_close(x)      ⇒  y = Re x (a view) when the imaginary parts are negligible

The permutation of `partition` is recovered in the pullback by matching the
sorted values of x and y (stable sorts), so it agrees with numpy's output also
where numpy's `argpartition` would arrange the non-kth elements differently. At
ties every assignment of the tied elements is a valid (sub)gradient; one is taken.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from rulekit import CoDual, Vararg, example, linear, rrule
from rules._support.arguments import primals
from rules._support.binding import binder
from rules._support.cotangents import NO_F, no_pullback, no_rdata, scalar_rdata
from rules._support.examples import randn
from rules._support.forward import register_traced
from rules._support.outputs import inactive_output, is_inexact_array, new_output
from rules._support.patterns import Inexact, InexactArray, Numeric, Seq
from rules.numpy.shape.views import always_a_view

__all__ = ["atleast_rrule", "partition_rrule", "real_if_close_rrule"]

ArrayLike = Union[Numeric, list, tuple]


# -- append: linear in both arrays ----------------------------------------------------------


def _append_blocks(g: np.ndarray, arr: Any, values: Any, axis: Any = None) -> tuple[Any, Any]:
    """The blocks of ȳ that `arr` and `values` became (axis None: both flattened)."""
    A, V = np.asarray(arr), np.asarray(values)
    if axis is None:
        return g[: A.size].reshape(A.shape), g[A.size :].reshape(V.shape)
    lead = (slice(None),) * (axis % g.ndim)
    k = A.shape[axis]
    return g[(*lead, slice(0, k))], g[(*lead, slice(k, None))]


linear(
    np.append,
    (
        lambda g, arr, values, axis=None: _append_blocks(g, arr, values, axis)[0],
        lambda g, arr, values, axis=None: _append_blocks(g, arr, values, axis)[1],
    ),
    patterns=[(ArrayLike, ArrayLike, Vararg[Any])],
    argnums=(0, 1),
    examples=lambda: [
        example(randn(2, 3), randn(2, seed=1)),
        example(randn(2, 3, dtype=np.float32), randn(1, 3, seed=1), axis=0),
        example(randn(3, 2), 1.5, None),
        example(randn(2, 2, dtype=np.complex128), [np.float64(2.0), np.float64(-1.0)]),
    ],
)


# -- np.astype (the numpy-2 function; the method's rule is in rules.numpy.shape.views) ---

#: y = np.astype(x, d): as `x.astype(d)`; a numpy scalar x gives a scalar: x̄ = ȳ (Re ȳ for
#: a real x)
linear(
    np.astype,
    lambda g, x, dtype, **kwargs: g,
    patterns=[(Inexact, Any)],
    examples=lambda: [
        example(randn(2, 3), np.float32),
        example(randn(3, dtype=np.float32), np.complex128),
        example(randn(2, dtype=np.complex128), np.complex64, copy=False),
        example(np.float64(1.25), np.float32),
    ],
)


# -- atleast_1d/2d/3d: views (a scalar argument becomes a new array) --------------------------


def atleast_rrule(f: CoDual, *arys: CoDual) -> tuple[CoDual, Any]:
    """y = atleast_nd(x): x itself or a view of it, with the same view of x̄ as fdata; a
    scalar x becomes a new array: x̄ = Σ ȳ (rdata). Several arguments give a tuple."""
    fn = f.x
    ys = fn(*(a.x for a in arys))
    parts = [ys] if len(arys) == 1 else list(ys)
    fds: list[Any] = []
    scalars: list[int] = []
    for k, (a, y) in enumerate(zip(arys, parts, strict=True)):
        dx = a.dx
        if isinstance(dx, np.ndarray):
            fds.append(fn(dx))
        elif dx is not None and is_inexact_array(y) and not isinstance(a.x, np.ndarray):
            fds.append(np.zeros_like(y))  # a scalar: a new array
            scalars.append(k)
        elif len(arys) == 1 or not is_inexact_array(y):
            fds.append(None if len(arys) == 1 else NO_F)
        else:  # a constant among active arguments: a tuple's fdata has no None elements
            fds.append(np.zeros_like(y))
    n = 1 + len(arys)
    if len(arys) == 1:
        out = CoDual(ys, fds[0])
    elif all(a.dx is None for a in arys):
        out = CoDual(ys, None)
    else:
        out = CoDual(ys, tuple(fds))
    if not scalars:
        return out, no_pullback(n)
    result = list(no_rdata(n))

    def atleast_pullback(dy: Any) -> tuple[Any, ...]:
        for k in scalars:
            result[1 + k] = scalar_rdata(arys[k].x, fds[k])
        return tuple(result)

    return out, atleast_pullback


def _atleast_examples() -> list[Any]:
    return [
        example(randn(3)),
        example(randn(dtype=np.float32)),
        example(randn(2, 3), np.float64(1.5), randn(2, 2, 2, 2, dtype=np.complex128)),
        example(2.5),
    ]


for _fn in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
    rrule.register(_fn, Vararg[Numeric], examples=_atleast_examples)(atleast_rrule)


def _at_least(n: int) -> Any:
    """numpy's atleast_nd written with indexing (a traceable re-implementation, for the
    forward rule and the differentiable pullback): a scalar times ones of shape (1,)·n."""
    full = slice(None)
    expands: dict[int, dict[int, tuple[Any, ...]]] = {
        1: {},
        2: {1: (None, full)},
        3: {1: (None, full, None), 2: (full, full, None)},
    }
    expand = expands[n]

    def one(x: Any) -> Any:
        nd = np.ndim(x)
        if nd == 0:
            dt = getattr(x, "dtype", None)
            return x * np.ones((1,) * n, dt if dt is not None else np.result_type(x))
        return x[expand[nd]] if nd in expand else x

    def impl(*arys: Any) -> Any:
        ys = [one(a) for a in arys]
        return ys[0] if len(ys) == 1 else tuple(ys)

    impl.__name__ = f"atleast_{n}d"
    return impl


for _n, _fn in ((1, np.atleast_1d), (2, np.atleast_2d), (3, np.atleast_3d)):
    register_traced(_fn, _at_least(_n))


# -- column_stack: linear in the sequence ------------------------------------------------------


def _column_stack_adjoint(g: np.ndarray, tup: Any) -> Any:
    """x̄ₖ += ȳ[:, the columns of xₖ] (one column, reshaped back, for ndim < 2).

    One array `tup` is the sequence of its slices along axis 0 (numpy iterates it):
    its cotangent is those slices' cotangents, stacked back.
    """
    if isinstance(tup, np.ndarray):
        if len(tup) == 0:
            return np.zeros(tup.shape, g.dtype)
        return np.stack(_column_stack_adjoint(g, list(tup)))
    grads, start = [], 0
    for x in tup:
        shape = np.shape(x)
        k = 1 if len(shape) < 2 else shape[1]
        piece = g[:, start : start + k]
        start += k
        grads.append(piece.reshape(shape) if len(shape) < 2 else piece)
    return grads


linear(
    np.column_stack,
    _column_stack_adjoint,
    patterns=[(Seq,), (InexactArray,)],
    examples=lambda: [
        example([randn(3), randn(3, seed=1)]),
        example((randn(2, 2, dtype=np.float32), randn(2, seed=1))),
        example([randn(), np.float64(0.5), randn(1, 2, dtype=np.complex128)]),
        example(randn(4)),  # one 1-D array: its elements as one row, shape (1, 4)
        example(randn(2, 3, dtype=np.float32)),  # one 2-D array: x.T
        example(randn(2, 3, 2, dtype=np.complex128)),
    ],
)


# -- rot90: a view --------------------------------------------------------------------------

linear(
    np.rot90,
    lambda g, m, k=1, axes=(0, 1): np.rot90(g, -k, axes),
    patterns=[(InexactArray, Vararg[Any])],
    view=always_a_view,
    examples=lambda: [
        example(randn(2, 3)),
        example(randn(2, 3, 2, dtype=np.float32), 3, (2, 0)),
        example(randn(3, 2, dtype=np.complex128), k=-2),
        example(randn(2, 2), 4),
    ],
)


# -- partition ------------------------------------------------------------------------------

_bind_partition = binder(np.partition)


def _permutation(a: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    """P with take_along_axis(a, P, axis) == y: the stable sort orders of a and y matched."""
    sa = np.argsort(a, axis=axis, kind="stable")
    sy = np.argsort(y, axis=axis, kind="stable")
    P = np.empty_like(sa)
    np.put_along_axis(P, sy, sa, axis=axis)
    return P


def partition_rrule(f: CoDual, a: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = partition(x, kth, axis) = x[P]  ⇒  x̄[P] += ȳ (axis None: over the flat x)."""
    b = _bind_partition((a, *args), kwargs)
    p = primals(args, kwargs)
    y = np.partition(a.x, *p[0], **p[1])
    if a.dx is None:
        return inactive_output(y, 2 + len(args))
    out = new_output(y)
    axis = b.value("axis")

    def partition_pullback(dy: Any) -> tuple[Any, ...]:
        x = a.x.reshape(-1) if axis is None else a.x
        ax = 0 if axis is None else axis
        g = np.empty_like(out.dx)
        np.put_along_axis(g, _permutation(x, y, ax), out.dx, axis=ax)
        a.dx += g.reshape(a.x.shape)
        return no_rdata(2 + len(args))

    return out, partition_pullback


def _partition_examples() -> list[Any]:
    return [
        example(randn(6), 2),
        example(randn(3, 4, dtype=np.float32), [0, 2], axis=0),
        example(randn(2, 3), 4, None),
        example(randn(5, dtype=np.complex128), -1),
    ]


rrule.register(np.partition, InexactArray, Vararg[Any], examples=_partition_examples)(
    partition_rrule
)


# -- real_if_close: the input itself, or a view of its real part ------------------------------


def real_if_close_rrule(f: CoDual, a: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = real_if_close(x): x itself (real, or imaginary parts not negligible): fdata x̄;
    else y = Re x, a view whose fdata is Re x̄ (a view of the complex fdata): x̄ += ȳ."""
    p = primals(args, kwargs)
    y = np.real_if_close(a.x, *p[0], **p[1])
    n = 2 + len(args)
    dx = a.dx
    if y is a.x or dx is None:
        return CoDual(y, dx), no_pullback(n)
    return CoDual(y, dx.real), no_pullback(n)


def _real_if_close_examples() -> list[Any]:
    return [
        example(randn(2, 3)),
        example(randn(3, dtype=np.complex128)),  # imaginary parts far from 0: x itself
        example(randn(2, dtype=np.complex64), 1000),
    ]


rrule.register(np.real_if_close, InexactArray, Vararg[Any], examples=_real_if_close_examples)(
    real_if_close_rrule
)
