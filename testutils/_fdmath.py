"""The numbers behind the dot-product test: steps, directions, precisions, rounding error.

The kit's tolerance tables are explicit here, per precision class of a dtype (as
JAX's `check_grads` keeps per-dtype tables): `STEPS` (finite-difference steps),
`PRECISION` (dtype → class), `EPS` (machine epsilon per dtype) and `FD_ULPS`
(how far a computed value is assumed off); `testutils.RTOL` is the relative
tolerance. `fd_noise` is the rounding error of a central difference, part of
the tolerance (docs/testing-your-rules.md, "The dot-product test").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rulekit import inner
from testutils._call import get_leaf
from testutils._trees import leaves, max_abs

__all__ = [
    "DIRECTION_FLOOR",
    "EPS",
    "FD_ULPS",
    "LARGE",
    "PRECISION",
    "SMALL_STEPS",
    "STEPS",
    "FDStep",
    "FDTerm",
    "elements",
    "eps_of",
    "fd_noise",
    "norm",
    "precision_of",
    "relative_direction",
]

#: Finite-difference steps h, by the precision the primal computes in. The direction ẋⱼ is
#: already relative (`relative_direction`: element k scaled by max(|xₖ|, floor)), so an input
#: is moved by h·|xₖ|·N(0, 1) per element: log at 1e-3 and exp at 500 in one array both work.
STEPS = {
    "double": (1e-2, 1e-3, 1e-4, 1e-5, 1e-6),
    "single": (1e-1, 3e-2, 1e-2, 3e-3, 1e-3),
    "half": (3e-1, 1e-1, 3e-2),
}

#: Further steps for an argument with magnitudes above `LARGE`, where a relative step moves
#: an element far in absolute terms (tan at x = 1e3 needs steps of 1e-5 and less).
SMALL_STEPS = {"double": (1e-7, 1e-8), "single": (3e-4,), "half": ()}
LARGE = 10.0

#: The precision class of each float dtype (the tables of the kit are per class, as JAX's
#: `check_grads` tolerances are per dtype). Python floats and complexes are double.
PRECISION: dict[np.dtype[Any], str] = {
    np.dtype(np.float16): "half",
    np.dtype(np.float32): "single",
    np.dtype(np.complex64): "single",
    np.dtype(np.float64): "double",
    np.dtype(np.complex128): "double",
}

#: Machine epsilon per float dtype: the rounding unit of a value computed in that dtype.
EPS: dict[np.dtype[Any], float] = {
    np.dtype(np.float16): 2.0**-10,
    np.dtype(np.float32): 2.0**-23,
    np.dtype(np.complex64): 2.0**-23,
    np.dtype(np.float64): 2.0**-52,
    np.dtype(np.complex128): 2.0**-52,
}

#: How many units of rounding (EPS·|value|) a primal's computed value is assumed to be off
#: by, per element: a few operations of ½ ulp each, with room for libm's few-ulp functions.
#: It sizes the rounding error of a central difference, FD_ULPS·EPS·(|y⁺| + |y⁻|)/(2h).
FD_ULPS = 16.0

#: Scale of the direction at an element that is zero (or not finite), relative to the
#: argument's largest magnitude (capped at 1): ẋ = N(0, 1)·max(|x|, floor).
DIRECTION_FLOOR = 1e-3


def precision_of(values: Any) -> str:
    """'half', 'single' or 'double': the least precise float dtype among the leaves."""
    best = "double"
    for _, v in leaves(values):
        if not isinstance(v, (np.ndarray, np.generic)) or v.dtype.kind not in "fc":
            continue
        p = PRECISION.get(v.dtype)
        if p is None:  # (longdouble and friends: by size)
            size = v.dtype.itemsize // (2 if v.dtype.kind == "c" else 1)
            p = "half" if size <= 2 else "single" if size <= 4 else "double"
        if p == "half":
            return "half"
        if p == "single":
            best = "single"
    return best


def eps_of(x: Any) -> float:
    """Machine epsilon of a float leaf's dtype (Python float/complex: double)."""
    dt = x.dtype if isinstance(x, (np.ndarray, np.generic)) else np.dtype(np.float64)
    e = EPS.get(dt)
    return float(np.finfo(dt).eps) if e is None else e


@dataclass
class FDStep:
    """The finite-difference right-hand side of argument j's dot test at one step h.

    `own` is ⟨ȳ, ẏ⟩ (+ ⟨rⱼ, ẋⱼ⟩ when j is not mutated); `states[i]` is ⟨rᵢ, ẋᵢ'⟩ of a
    mutated argument i, counted only when i is active. Each comes with its Cauchy–Schwarz
    bound and the rounding error of its central difference (`noise`).
    """

    h: float
    own: float
    own_bound: float
    own_noise: float
    states: dict[int, tuple[float, float, float]]  # mutated i -> (value, bound, noise)
    size: int  # elements involved (a random inner product is ~ bound/√size)

    def rhs(self, active: frozenset[int]) -> tuple[float, float, float]:
        """(value, bound, noise) with the terms of the active mutated arguments."""
        value, bound, noise = self.own, self.own_bound, self.own_noise
        for i, (v, b, n) in self.states.items():
            if i in active:
                value, bound, noise = value + v, bound + b, noise + n
        return value, bound, noise


@dataclass
class FDTerm:
    """The finite-difference right-hand sides for one argument, one per step that worked."""

    steps: list[FDStep]


def fd_noise(w: Any, yp: Any, ym: Any, h: float) -> float:
    """Rounding error of ⟨w, (y⁺ − y⁻)/2h⟩: Σₖ |wₖ|·FD_ULPS·EPS·(|y⁺ₖ| + |y⁻ₖ|)/(2h).

    Each computed value is assumed off by FD_ULPS·EPS of its magnitude (EPS of its
    dtype); the errors are summed in absolute value (worst case: they need not cancel).
    A derivative that is tiny next to the value (cos near 0, c·x³ + sin x at x = 1e-90
    with respect to c) is below this level, and finite differences cannot see it.
    """
    total = 0.0
    for path, a in leaves(yp):
        wl, b = get_leaf(w, path), get_leaf(ym, path)
        if isinstance(a, np.ndarray):
            if a.dtype.kind not in "fc" or not isinstance(wl, np.ndarray) or wl.shape != a.shape:
                continue
            with np.errstate(over="ignore", invalid="ignore"):
                mag = np.abs(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))
                mag += np.abs(np.asarray(b))
                total += eps_of(a) * float(np.sum(np.abs(wl) * mag))
        elif isinstance(a, (float, complex, np.floating, np.complexfloating)) and isinstance(
            wl, (float, complex, np.floating, np.complexfloating)
        ):
            total += eps_of(a) * abs(complex(wl)) * (abs(complex(a)) + abs(complex(b)))
    return FD_ULPS * total / (2 * h)


def relative_direction(x: Any, t: Any) -> Any:
    """Direction `t` of argument `x`, scaled per element by max(|xₖ|, floor).

    floor = DIRECTION_FLOOR·min(1, max|x|) (1 if x is all zeros): a step h then moves
    every element by about h times its own size, as a relative step size should.
    """
    top = max_abs(x)
    floor = DIRECTION_FLOOR * min(1.0, top) if top > 0 else 1.0

    def go(v: Any, tv: Any) -> Any:
        if isinstance(tv, np.ndarray) and isinstance(v, np.ndarray) and v.dtype.kind in "fc":
            with np.errstate(invalid="ignore"):
                s = np.array(np.abs(v), dtype=np.float64)  # (an array, 0-d too)
            s[~np.isfinite(s)] = floor
            return np.asarray(tv * np.maximum(s, floor), dtype=tv.dtype)
        if isinstance(tv, (float, complex, np.floating, np.complexfloating)) and isinstance(
            v, (float, complex, np.floating, np.complexfloating)
        ):
            m = abs(complex(v))
            scaled: Any = tv * max(m if math.isfinite(m) else floor, floor)
            return type(tv)(scaled)
        if isinstance(tv, (tuple, list)) and isinstance(v, (tuple, list)) and len(tv) == len(v):
            out = [go(a, b) for a, b in zip(v, tv, strict=True)]
            return tuple(out) if isinstance(tv, tuple) else out
        if isinstance(tv, dict) and isinstance(v, dict):
            return {k: go(v[k], e) for k, e in tv.items()}
        return tv

    return go(x, t)


def norm(t: Any) -> float:
    return math.sqrt(max(inner(t, t), 0.0))


def elements(t: Any) -> int:
    n = 0
    for _, v in leaves(t):
        if isinstance(v, np.ndarray):
            n += v.size
        elif isinstance(v, (float, complex, np.number)):
            n += 1
    return max(n, 1)
