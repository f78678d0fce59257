"""Rules for np.cov and np.corrcoef, derived from numpy's own formulas (`rules.numpy._composite`).

numpy's code converts its arguments with `np.asarray`, so it cannot be traced
through; the rules trace the same sequence of operations on traced values:

    cov:       X (variables × observations, the rows of m then of y), X₀ = X − mean(X, 1),
               C = X₀·X₀ᴴ / (N − ddof)          (N − ddof ≤ 0: numpy's warning, then 0 → inf)
    corrcoef:  R = C / (σ σᵀ), σ = √Re diag C, then clipped to [−1, 1] (Re and Im apart)

    adjoint:   X̄₀ = (C̄ + C̄ᴴ)·X₀/(N − ddof), X̄ = X̄₀ − mean(X̄₀, 1)  (the traced operations' own)

The clip follows np.clip's convention (docs/conventions-misc.md): a correlation
rounded just beyond ±1 (typically the diagonal, identically 1) gets no cotangent.
Weights (`fweights=`, `aweights=`) enter numpy's formula as they do in numpy, and a
traced `aweights=` is differentiated through it.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

import rulekit
from rulekit import Array, Vararg, example
from rules._support.examples import randn
from rules._support.forward import register_traced
from rules.numpy._composite import composite, register_traced_keywords

__all__ = ["corrcoef_impl", "cov_impl"]


def _as_rows(v: Any, rowvar: bool, dtype: Any) -> Any:
    """numpy's `array(v, ndmin=2, dtype=dtype)`, transposed when not rowvar (kept 1 × N)."""
    v = np.atleast_2d(v) if rulekit.is_traced(v) else np.array(v, ndmin=2)
    if v.dtype != dtype:
        v = v.astype(dtype)
    if not rowvar and v.shape[0] != 1:
        v = np.transpose(v)
    return v


def cov_impl(
    m: Any,
    y: Any = None,
    rowvar: bool = True,
    bias: bool = False,
    ddof: Any = None,
    fweights: Any = None,
    aweights: Any = None,
    *,
    dtype: Any = None,
) -> Any:
    """np.cov's formula (numpy/lib/_function_base_impl.py) on traced values."""
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    if dtype is None:
        parts = [v.dtype if hasattr(v, "dtype") else np.asarray(v) for v in (m, y) if v is not None]
        dtype = np.result_type(*parts, np.float64)
    if np.ndim(m) > 2:
        raise ValueError("m has more than 2 dimensions")
    X = _as_rows(m, rowvar, dtype)
    if X.shape[0] == 0:
        return np.array([]).reshape(0, 0)
    if y is not None:
        if np.ndim(y) > 2:
            raise ValueError("y has more than 2 dimensions")
        X = np.concatenate((X, _as_rows(y, rowvar, dtype)), axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    w: Any = None
    aw: Any = None
    for name, wv, integer in (("fweights", fweights, True), ("aweights", aweights, False)):
        if wv is None:
            continue
        if rulekit.is_traced(wv):
            wv = wv if wv.dtype == np.float64 else wv.astype(np.float64)
        else:
            wv = np.asarray(wv, dtype=float)
        if integer and not np.all(wv == np.around(wv)):
            raise TypeError("fweights must be integer")
        if wv.ndim > 1:
            raise RuntimeError(f"cannot handle multidimensional {name}")
        if wv.shape[0] != X.shape[1]:
            raise RuntimeError(f"incompatible numbers of samples and {name}")
        if np.any(wv < 0):
            raise ValueError(f"{name} cannot be negative")
        w = wv if w is None else w * wv
        aw = wv if not integer else aw
    if w is None:
        avg = np.mean(X, axis=1)
        w_sum = X.shape[1]
    else:
        w_sum = np.sum(w)
        avg = np.sum(X * w, axis=1) / w_sum
    if w is None:
        fact: Any = X.shape[1] - ddof
    elif ddof == 0:
        fact = w_sum
    elif aweights is None:
        fact = w_sum - ddof
    else:
        fact = w_sum - ddof * np.sum(w * aw) / w_sum
    if fact <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        fact = 0.0
    X = X - avg[:, None]
    X_T = np.transpose(X) if w is None else np.transpose(X * w)
    c = np.dot(X, np.conj(X_T))
    with np.errstate(divide="ignore"):
        c = c * np.true_divide(1, fact)
    return np.squeeze(c)


def corrcoef_impl(x: Any, y: Any = None, rowvar: bool = True, *, dtype: Any = None) -> Any:
    """np.corrcoef's formula on traced values: cov, scaled by the standard deviations, clipped."""
    c = np.cov(x, y, rowvar, dtype=dtype)
    if np.ndim(c) == 0:  # (numpy: diag raises ValueError for a single variable: c / c)
        return c / c
    stddev = np.sqrt(np.real(np.diag(c)))
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    if np.iscomplexobj(c):
        return np.clip(np.real(c), -1, 1) + 1j * np.clip(np.imag(c), -1, 1)
    return np.clip(c, -1, 1)


def _cov_examples() -> list[Any]:
    m = randn(3, 5, seed=21)
    return [
        example(m),
        example(m, randn(5, seed=22)),  # y: one more variable
        example(m.T, rowvar=False, bias=True),
        example(m.astype(np.float32), ddof=0),
        example(m + 1j * randn(3, 5, seed=23)),
        example(m, fweights=np.array([1, 2, 1, 3, 1]), aweights=np.array([0.5, 1, 2, 1, 1])),
        example(randn(6, seed=24)),  # one variable: a 0-d result
    ]


def _corrcoef_examples() -> list[Any]:
    m = randn(3, 5, seed=25)
    return [
        example(m),
        example(m, randn(5, seed=26)),
        example(m.T, rowvar=False),
        example(m + 1j * randn(3, 5, seed=27)),
    ]


rulekit.build_primitive_rrule.register(np.cov, Array[np.inexact], Vararg[Any],
                                       examples=_cov_examples)(composite(
    cov_impl, "C = X₀X₀ᴴ/(N − ddof), X₀ = X − mean ⇒ X̄₀ = (C̄ + C̄ᴴ)X₀/(N − ddof), X̄ = X̄₀ − mean(X̄₀)"
))  # fmt: skip
rulekit.build_primitive_rrule.register(np.corrcoef, Array[np.inexact], Vararg[Any],
                                       examples=_corrcoef_examples)(composite(
    corrcoef_impl, "R = clip(C/(σσᵀ)), σ = √diag C ⇒ the adjoints of cov, sqrt, division and clip"
))  # fmt: skip
register_traced_keywords(np.cov, cov_impl)  # (a tangent on aweights= too)
register_traced(np.corrcoef, corrcoef_impl)
