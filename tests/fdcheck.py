"""Finite-difference gradients for the engine's tests (small inputs only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def fd_grad(f: Callable[..., Any], args: tuple[Any, ...], argnum: int, eps: float = 1e-6) -> Any:
    """Central-difference gradient of scalar `f` w.r.t. `args[argnum]` (array or float)."""
    x = args[argnum]

    def at(v: Any) -> float:
        a = list(args)
        a[argnum] = v
        copies = [np.array(e, copy=True) if isinstance(e, np.ndarray) else e for e in a]
        return float(f(*copies))

    if not isinstance(x, np.ndarray):
        return (at(x + eps) - at(x - eps)) / (2 * eps)
    g = np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(x.shape):
        xp = x.astype(np.float64, copy=True)
        xm = x.astype(np.float64, copy=True)
        xp[i] += eps
        xm[i] -= eps
        g[i] = (at(xp) - at(xm)) / (2 * eps)
    return g
