"""More shape rules: append, atleast_1d/2d/3d, column_stack, rot90, np.astype, partition,
real_if_close.

Views alias fdata as in `rules.numpy.shape.views` (see `rules._support.shape`): `atleast_*d`,
`rot90` and `real_if_close` return views of (or the very same) input, whose
fdata is the same view of the input's fdata, and their pullbacks do nothing.
The others build new arrays out of input elements, and their adjoints gather
ȳ back:

    y = append(a, v, axis)    ⇒  ā += ȳ[first block],  v̄ += ȳ[second block]
    y = column_stack(xs)      ⇒  x̄ₖ += ȳ[:, columns of xₖ] (1-D/0-d: reshaped back)
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

from rulekit import CoDual, Vararg, example, rrule
from rules._support.arraylike import Seq, as_array, binder, give, inactive, primals
from rules._support.shape import INEXACT, no_pullback, nulls, seq_fdata, seq_rdata
from rules._support.util import NO_F, NO_R, is_inexact_array, new_output, randn, scalar_rdata
from rules.numpy.shape.views import astype_rrule, view_rrule
from rules.numpy.ufuncs._common import Inexact, Numeric

__all__ = [
    "append_rrule",
    "atleast_rrule",
    "column_stack_rrule",
    "np_astype_rrule",
    "partition_rrule",
    "real_if_close_rrule",
]

ArrayLike = Union[Numeric, list, tuple]


# -- append ---------------------------------------------------------------------------------

_bind_append = binder(np.append)


def append_rrule(
    f: CoDual, arr: CoDual, values: CoDual, *args: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = append(a, v, axis): axis None ⇒ ā += ȳ[:a.size] (reshaped), v̄ += ȳ[a.size:];
    else ā += ȳ[..., :a.shape[axis], ...], v̄ += the rest (along `axis`)."""
    b = _bind_append((arr, values, *args), kwargs)
    axis = b.value("axis")
    a_ = primals(args, kwargs)
    y = np.append(arr.x, values.x, *a_[0], **a_[1])
    if (arr.dx is None and values.dx is None) or not is_inexact_array(y):
        return inactive(y, 3 + len(args))
    out = new_output(y)
    A, V = as_array(arr), as_array(values)

    def append_pullback(dy: Any) -> tuple[Any, ...]:
        g = out.dx
        if axis is None:
            ga, gv = g[: A.size].reshape(A.shape), g[A.size :].reshape(V.shape)
        else:
            lead = (slice(None),) * (axis % g.ndim)
            k = A.shape[axis]
            ga, gv = g[(*lead, slice(0, k))], g[(*lead, slice(k, None))]
        return b.rdata({"arr": give(arr, ga), "values": give(values, gv)})

    return out, append_pullback


def _append_examples() -> list[Any]:
    return [
        example(randn(2, 3), randn(2, seed=1)),
        example(randn(2, 3, dtype=np.float32), randn(1, 3, seed=1), axis=0),
        example(randn(3, 2), 1.5, None),
        example(randn(2, 2, dtype=np.complex128), [np.float64(2.0), np.float64(-1.0)]),
    ]


rrule.register(np.append, ArrayLike, ArrayLike, Vararg[Any], examples=_append_examples)(
    append_rrule
)


# -- np.astype (the numpy-2 function; the method's rule is in rules.numpy.shape.views) ---


def np_astype_rrule(f: CoDual, x: CoDual, dtype: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """y = np.astype(x, d): as `x.astype(d)` (see rules.numpy.shape.views.astype_rrule).
    A numpy scalar x gives a scalar: x̄ = ȳ (Re ȳ for a real x)."""
    device = kwargs.get("device")
    if device is not None and device != "cpu":
        return inactive(np.astype(x.x, dtype.x, **kwargs), 3)  # numpy raises
    copy = kwargs.get("copy", True)
    if isinstance(x.x, np.ndarray):
        return astype_rrule(f, x, dtype, copy=copy)
    y = np.astype(x.x, dtype.x, copy=copy)
    if x.dx is None or np.dtype(type(y)).kind not in "fc":
        return inactive(y, 3)

    def astype_scalar_pullback(dy: Any) -> tuple[Any, ...]:
        return NO_R, scalar_rdata(x.x, dy), NO_R

    return new_output(y), astype_scalar_pullback


def _np_astype_examples() -> list[Any]:
    return [
        example(randn(2, 3), np.float32),
        example(randn(3, dtype=np.float32), np.complex128),
        example(randn(2, dtype=np.complex128), np.complex64, copy=False),
        example(np.float64(1.25), np.float32),
    ]


rrule.register(np.astype, Inexact, Any, examples=_np_astype_examples)(np_astype_rrule)


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
    result = list(nulls(n))

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


# -- column_stack ---------------------------------------------------------------------------


def column_stack_rrule(f: CoDual, seq: CoDual) -> tuple[CoDual, Any]:
    """y = column_stack(xs): xₖ of ndim < 2 is one column  ⇒  x̄ₖ += ȳ[:, column] (reshaped
    to xₖ's shape); xₖ of ndim ≥ 2 ⇒ x̄ₖ += ȳ[:, its columns]."""
    xs, _ = seq_fdata(seq)
    y = np.column_stack(xs)
    if seq.dx is None or not is_inexact_array(y):
        return inactive(y, 2)
    out = new_output(y)
    shapes = [np.shape(x) for x in xs]

    def column_stack_pullback(dy: Any) -> tuple[Any, ...]:
        g = out.dx
        grads, start = [], 0
        for shape in shapes:
            k = 1 if len(shape) < 2 else shape[1]
            piece = g[:, start : start + k]
            start += k
            grads.append(piece.reshape(shape) if len(shape) < 2 else piece)
        return NO_R, seq_rdata(seq, grads)

    return out, column_stack_pullback


def _column_stack_examples() -> list[Any]:
    return [
        example([randn(3), randn(3, seed=1)]),
        example((randn(2, 2, dtype=np.float32), randn(2, seed=1))),
        example([randn(), np.float64(0.5), randn(1, 2, dtype=np.complex128)]),
    ]


rrule.register(np.column_stack, Seq, examples=_column_stack_examples)(column_stack_rrule)


# -- rot90: a view --------------------------------------------------------------------------


def _rot90_examples() -> list[Any]:
    return [
        example(randn(2, 3)),
        example(randn(2, 3, 2, dtype=np.float32), 3, (2, 0)),
        example(randn(3, 2, dtype=np.complex128), k=-2),
        example(randn(2, 2), 4),
    ]


rrule.register(np.rot90, INEXACT, Vararg[Any], examples=_rot90_examples)(view_rrule(np.rot90))


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
        return inactive(y, 2 + len(args))
    out = new_output(y)
    axis = b.value("axis")

    def partition_pullback(dy: Any) -> tuple[Any, ...]:
        x = a.x.reshape(-1) if axis is None else a.x
        ax = 0 if axis is None else axis
        g = np.empty_like(out.dx)
        np.put_along_axis(g, _permutation(x, y, ax), out.dx, axis=ax)
        a.dx += g.reshape(a.x.shape)
        return nulls(2 + len(args))

    return out, partition_pullback


def _partition_examples() -> list[Any]:
    return [
        example(randn(6), 2),
        example(randn(3, 4, dtype=np.float32), [0, 2], axis=0),
        example(randn(2, 3), 4, None),
        example(randn(5, dtype=np.complex128), -1),
    ]


rrule.register(np.partition, INEXACT, Vararg[Any], examples=_partition_examples)(partition_rrule)


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


rrule.register(np.real_if_close, INEXACT, Vararg[Any], examples=_real_if_close_examples)(
    real_if_close_rrule
)
