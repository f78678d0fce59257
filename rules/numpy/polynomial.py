"""Rules for np.polyval, np.vander and np.polyfit, derived from numpy's own formulas
(`rules.numpy._composite`: numpy's code converts its arguments with `np.asarray`).

    polyval(p, x):  Horner, y ← y·x + pₖ      ⇒ p̄ₖ = Σ conj(x^(N−1−k))·ȳ, x̄ = conj(p′(x))·ȳ
    vander(x, N):   columns 1, x, x·x, …       ⇒ x̄ᵢ = Σₖ conj(k·xᵢ^(k−1))·Ȳᵢₖ (exact at x = 0)
    polyfit(x, y, deg, rcond, full, w, cov):  V = vander(x)·w, scaled columns, then
                    np.linalg.lstsq (its rule: full-rank least squares; a rank-deficient fit
                    raises LinAlgError in the pullback), so c̄ reaches y and x (through V)

Each adjoint is that of the traced operations (numpy's own sequence: the same values).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

import rulekit
from rulekit import Array, Vararg, example
from rules._support.examples import randn
from rules._support.patterns import Inexact
from rules.numpy._composite import composite, register_traced_keywords

__all__ = ["polyfit_impl", "polyval_impl", "vander_impl"]


def _array(v: Any) -> Any:
    return v if rulekit.is_traced(v) else np.asanyarray(v)


def polyval_impl(p: Any, x: Any) -> Any:
    """np.polyval (numpy/lib/_polynomial_impl.py): Horner's scheme on traced values."""
    if not isinstance(p, (list, tuple)):  # (a list of traced numbers is indexed as it is)
        p = _array(p)
    x = _array(x)
    y = np.zeros(np.shape(x), x.dtype)  # (numpy: zeros_like(x); x may be a traced number)
    for k in range(len(p)):
        y = y * x + p[k]
    return y


def vander_impl(x: Any, N: Any = None, increasing: bool = False) -> Any:
    """np.vander: the columns x⁰ = 1, x¹, x·x, … (numpy's running product), highest first."""
    x = _array(x)
    if np.ndim(x) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    if N is None:
        N = len(x)
    dt = np.promote_types(x.dtype, int)  # (numpy's result dtype: float32 → float64)
    if x.dtype != dt:
        x = x.astype(dt)
    cols = [np.ones_like(x)] if N > 0 else []
    if N > 1:
        cols.append(x if rulekit.is_traced(x) else np.copy(x))
    while len(cols) < N:
        cols.append(cols[-1] * x)
    if not cols:
        return np.empty((len(x), 0), dt)
    v = np.stack(cols, axis=1)
    return v if increasing else v[:, ::-1]


def polyfit_impl(
    x: Any, y: Any, deg: Any, rcond: Any = None, full: bool = False, w: Any = None,
    cov: Any = False,
) -> Any:  # fmt: skip
    """np.polyfit's formula on traced values (its checks, weighting, scaling and lstsq)."""
    order = int(deg) + 1
    x = _array(x) + 0.0
    y = _array(y) + 0.0
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.size == 0:
        raise TypeError("expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")
    if rcond is None:
        rcond = len(x) * np.finfo(x.dtype).eps
    lhs = np.vander(x, order)
    rhs = y
    if w is not None:
        w = _array(w) + 0.0
        if w.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * w[:, np.newaxis]
        rhs = rhs * (w[:, np.newaxis] if rhs.ndim == 2 else w)
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = np.linalg.lstsq(lhs, rhs, rcond)
    c = np.transpose(np.transpose(c) / scale)
    if rank != order and not full:
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning, stacklevel=3)
    if full:
        return c, resids, rank, s, rcond
    if not cov:
        return c
    vbase = np.linalg.inv(np.dot(np.transpose(lhs), lhs)) / np.outer(scale, scale)
    if cov == "unscaled":
        fac: Any = 1
    else:
        if len(x) <= order:
            raise ValueError("the number of data points must exceed order to scale the "
                             "covariance matrix")  # fmt: skip
        fac = resids / (len(x) - order)
    return (c, vbase * fac) if y.ndim == 1 else (c, vbase[:, :, np.newaxis] * fac)


def _polyval_examples() -> list[Any]:
    p, x = randn(4, seed=50), randn(3, 2, seed=51)
    return [
        example(p, x),
        example(p, 0.7),  # a scalar x
        example([1.0, -2.0, 0.5], x),  # constant coefficients
        example(p.astype(np.float32), x.astype(np.float32)),
        example(p + 1j * randn(4, seed=52), x),
    ]


def _vander_examples() -> list[Any]:
    x = randn(4, seed=53)
    x[1] = 0.0  # x = 0: the derivative of x⁰ is 0, of x¹ is 1
    return [
        example(x),
        example(x, 3, True),
        example(x.astype(np.float32), N=5),
        example(x + 1j * randn(4, seed=54), 2),
    ]


def _polyfit_examples() -> list[Any]:
    x = np.linspace(-1.0, 1.5, 7) + 0.05 * randn(7, seed=55)
    y = randn(7, seed=56)
    return [
        example(x, y, 2),
        example(x, np.stack([y, randn(7, seed=57)], axis=1), 3),  # several columns
        example(x, y, 1, w=np.abs(randn(7, seed=58)) + 0.5),
        example(x, y, 2, cov=True),
    ]


for _fn, _impl, _adjoint, _examples, _patterns in (
    (np.polyval, polyval_impl, "y = Σ pₖ x^(N−1−k) ⇒ p̄ₖ = Σ conj(x^(N−1−k))ȳ, x̄ = conj(p′(x))ȳ",
     _polyval_examples, [(Array[np.inexact], Any), (Any, Inexact), (Array[np.inexact], Inexact)]),
    (np.vander, vander_impl, "Yᵢₖ = xᵢ^pₖ ⇒ x̄ᵢ = Σₖ conj(pₖ xᵢ^(pₖ−1)) Ȳᵢₖ",
     _vander_examples, [(Array[np.inexact], Vararg[Any])]),
    (np.polyfit, polyfit_impl, "c = lstsq(V(x)·w, y·w) ⇒ ȳ, x̄ by lstsq's and vander's adjoints",
     _polyfit_examples, [(Array[np.inexact], Any, Vararg[Any]),
                         (Any, Array[np.inexact], Vararg[Any]),
                         (Array[np.inexact], Array[np.inexact], Vararg[Any])]),
):  # fmt: skip
    for _pats in _patterns:
        rulekit.build_primitive_rrule.register(_fn, *_pats, examples=_examples)(
            composite(_impl, _adjoint)
        )
    register_traced_keywords(_fn, _impl)  # (polyfit: a tangent on w= too)
