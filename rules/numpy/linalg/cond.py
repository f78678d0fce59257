"""Rule for np.linalg.cond, derived from numpy's own formula (`rules.numpy._composite`).

    p = None, 2, −2:  κ = σ_max/σ_min (−2: σ_min/σ_max), σ = svd(A, compute_uv=False)
                      ⇒ Ā = U diag(σ̄) Vᴴ with σ̄_max = κ̄/σ_min, σ̄_min = −κ̄·κ/σ_min
    other p:          κ = ‖A‖_p·‖A⁻¹‖_p  ⇒ the adjoints of norm and inv (their rules)

Distinct extreme singular values are assumed (the svd rule's convention otherwise;
docs/conventions-linalg.md). Where numpy gives inf for a singular matrix (other p),
np.linalg.inv raises LinAlgError here. `np.linalg.matrix_rank` has no derivative: it
runs on the primal values (`rulekit.PRIMAL_ONLY`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, Vararg, example
from rules._support.examples import randn
from rules._support.forward import register_traced
from rules.numpy._composite import composite

__all__ = ["cond_impl"]


def cond_impl(x: Any, p: Any = None) -> Any:
    """np.linalg.cond (numpy/linalg/_linalg.py) on traced values."""
    if np.ndim(x) < 2:
        raise np.linalg.LinAlgError(
            f"{np.ndim(x)}-dimensional array given. Array must be at least two-dimensional"
        )
    if np.size(x) == 0:
        raise np.linalg.LinAlgError("cond is not defined on empty arrays")
    if p is None or p == 2 or p == -2:
        s = np.linalg.svd(x, compute_uv=False)
        with np.errstate(all="ignore"):
            r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    else:
        if np.shape(x)[-1] != np.shape(x)[-2]:
            raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
        r = np.linalg.norm(x, p, axis=(-2, -1)) * np.linalg.norm(np.linalg.inv(x), p, axis=(-2, -1))
    return r


def _examples() -> list[Any]:
    a = randn(3, 3, seed=59) + 2 * np.eye(3)
    return [
        example(a),
        example(a, 2),
        example(a, -2),
        example(a, "fro"),
        example(a, 1),
        example(a, p=-np.inf),  # (a float p by keyword: an order, not a differentiable value)
        example(randn(4, 3, seed=60)),  # rectangular: σ_max/σ_min
        example(np.stack([a, a.T + np.eye(3)])),  # a stack
        example(a.astype(np.float32), p=np.inf),
        example(a + 1j * randn(3, 3, seed=61)),
    ]


rulekit.build_primitive_rrule.register(np.linalg.cond, Array[np.inexact], Vararg[Any],
                                       examples=_examples)(composite(
    cond_impl, "κ = σ_max/σ_min ⇒ Ā = U diag(σ̄)Vᴴ; κ = ‖A‖‖A⁻¹‖ ⇒ the adjoints of norm and inv"
))  # fmt: skip
register_traced(np.linalg.cond, cond_impl)
