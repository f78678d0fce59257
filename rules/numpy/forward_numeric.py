"""Forward rules and differentiable pullbacks of `np.gradient` and `np.real_if_close`
(imported by rules.numpy.quantiles, after the reverse rules of rules.numpy.numeric and
rules.numpy.shape, whose patterns and examples they share).

Both are numpy's own computation written without writes into an output buffer, so that
every operation has a rule and the rules are jvp / vjp of it (differentiable again):

    gradient:       per axis, [edge₀, (f[2:] − f[:−2])/(2h) (or numpy's nonuniform
                    three-point weights), edge₋₁] joined along the axis, each part cast to
                    f's dtype as numpy's output buffer casts it; a scalar spacing h is
                    differentiable, coordinate arrays are constants (an active one raises
                    NotImplementedError, as in reverse mode)
    real_if_close:  Re x where every |Im x| < tol (tol > 1: tol·eps), x itself otherwise;
                    the choice is made on the values (piecewise constant: no derivative)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rules._support.forward import register_like, register_traced
from rules.numpy._traced_active import active_traced_rules, inexact_value

__all__ = ["gradient_impl", "real_if_close_impl"]

_PLAIN = (bool, int, float, complex, np.generic, np.ndarray)


def _coordinates(d: Any, length: int) -> Any:
    """numpy's processing of a coordinate array (1-d, one per element along the axis): its
    differences, or their common value when they are all equal."""
    d = np.asanyarray(d)
    if d.ndim != 1:
        raise ValueError("distances must be either scalars or 1d")
    if len(d) != length:
        raise ValueError("when 1d, distances must match the length of the corresponding dimension")
    if np.issubdtype(d.dtype, np.integer):
        d = d.astype(np.float64)
    diffx = np.diff(d)
    return diffx[0] if (diffx == diffx[0]).all() else diffx


def _along(ndim: int, axis: int, s: Any) -> tuple[Any, ...]:
    idx: list[Any] = [slice(None)] * ndim
    idx[axis] = s
    return tuple(idx)


def gradient_impl(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """np.gradient(f, *varargs, axis=axis, edge_order=edge_order), numpy's formulas joined
    with np.concatenate instead of written into a buffer."""
    N = f.ndim
    axes = tuple(range(N)) if axis is None else np.lib.array_utils.normalize_axis_tuple(axis, N)
    n = len(varargs)
    if n == 0:
        dx: list[Any] = [1.0] * len(axes)
    elif n == 1 and np.ndim(varargs[0]) == 0:
        dx = list(varargs) * len(axes)
    elif n == len(axes):
        dx = [d if np.ndim(d) == 0 else _coordinates(d, f.shape[axes[i]])
              for i, d in enumerate(varargs)]  # fmt: skip
    else:
        raise TypeError("invalid number of arguments")
    if edge_order > 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    otype = f.dtype
    outs = []
    for ax, h in zip(axes, dx, strict=True):
        if f.shape[ax] < edge_order + 1:
            raise ValueError(
                "Shape of array too small to calculate a numerical gradient, "
                "at least (edge_order + 1) elements are required."
            )

        def at(s: Any, ax: int = ax) -> Any:
            return f[_along(N, ax, s)]

        uniform = np.ndim(h) == 0
        if uniform:
            mid = (at(slice(2, None)) - at(slice(None, -2))) / (2.0 * h)
        else:
            dx1, dx2 = h[0:-1], h[1:]
            shape = [1] * N
            shape[ax] = -1
            a = (-(dx2) / (dx1 * (dx1 + dx2))).reshape(shape)
            b = ((dx2 - dx1) / (dx1 * dx2)).reshape(shape)
            c = (dx1 / (dx2 * (dx1 + dx2))).reshape(shape)
            mid = a * at(slice(None, -2)) + b * at(slice(1, -1)) + c * at(slice(2, None))
        first, second, third = at(slice(0, 1)), at(slice(1, 2)), at(slice(2, 3))
        last, last2, last3 = at(slice(-1, None)), at(slice(-2, -1)), at(slice(-3, -2))
        if edge_order == 1:
            start = (second - first) / (h if uniform else h[0])
            end = (last - last2) / (h if uniform else h[-1])
        else:
            if uniform:
                a, b, c = -1.5 / h, 2.0 / h, -0.5 / h
            else:
                dx1, dx2 = h[0], h[1]
                a = -(2.0 * dx1 + dx2) / (dx1 * (dx1 + dx2))
                b = (dx1 + dx2) / (dx1 * dx2)
                c = -dx1 / (dx2 * (dx1 + dx2))
            start = a * first + b * second + c * third
            if uniform:
                a, b, c = 0.5 / h, -2.0 / h, 1.5 / h
            else:
                dx1, dx2 = h[-2], h[-1]
                a = (dx2) / (dx1 * (dx1 + dx2))
                b = -(dx2 + dx1) / (dx1 * dx2)
                c = (2.0 * dx2 + dx1) / (dx2 * (dx1 + dx2))
            end = a * last3 + b * last2 + c * last
        parts = [p if p.dtype == otype else np.astype(p, otype) for p in (start, mid, end)]
        outs.append(np.concatenate(parts, axis=ax))
    return outs[0] if len(axes) == 1 else tuple(outs)


def _refuse_coordinates(active: list[int], args: Sequence[Any]) -> None:
    for i in active:
        if i > 0 and np.ndim(args[i]) > 0 and inexact_value(args[i]):
            raise NotImplementedError(
                "rulekit: np.gradient with a traced coordinate array has no rule (coordinate "
                "arrays are constants; scalar spacings are differentiable). Pass the "
                "coordinates as a plain array, or write the difference quotients with np.diff."
            )


def real_if_close_impl(a: Any, tol: Any = 100) -> Any:
    """np.real_if_close: Re a where every imaginary part is below tol (·eps if tol > 1)."""
    if a.dtype.kind != "c":
        return a
    if tol > 1:
        tol = np.finfo(a.dtype).eps * tol
    if np.all(np.abs(np.imag(a)) < tol):  # (comparisons of traced values: plain booleans)
        return np.real(a)
    return a


_frule, _vjp = active_traced_rules(gradient_impl, refuse=_refuse_coordinates)
register_like(np.gradient, frule=_frule, vjp=_vjp)
register_traced(np.real_if_close, real_if_close_impl)
