"""`scipy_objective(f)`: a scalar function of a vector as `fun`, `jac`, `hessp` and `hess`
for `scipy.optimize.minimize` (Newton-type methods: trust-ncg, trust-krylov, Newton-CG).

For `f: ℝⁿ → ℝ` at x (a 1-D float array, as SciPy passes it) and a direction p:

    fun(x)      = f(x)
    jac(x)      = ∇f(x)                  (reverse mode; shared with fun, see below)
    hessp(x, p) = ∇²f(x)·p = d/dε ∇f(x + εp) at ε = 0   (forward over reverse: one jvp
                                          of the gradient, a few gradients' cost, no n×n)
    hess(x)     = ∇²f(x)                 (n×n, n forward passes over the gradient)

SciPy asks for `fun(x)` and then `jac(x)` at the same point, so both come from one
`value_and_grad` call: the last point is kept (a copy, compared by value, so a caller that
writes into its x between calls never gets a stale result).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit._api import value_and_grad
from rulekit._transforms import hessian, hvp

__all__ = ["ScipyObjective", "scipy_objective"]


class ScipyObjective:
    """`f(x, *args)` with its derivatives, as methods for `scipy.optimize.minimize`:

        obj = rulekit.scipy_objective(f, args=(X, y))
        scipy.optimize.minimize(obj.fun, x0, jac=obj.jac, hessp=obj.hessp, method="trust-ncg")

    `args` are fixed here (do not also pass `args=` to `minimize`). `mode` is the
    `rulekit.hvp`/`rulekit.hessian` mode for `hessp`/`hess`; `compile=True` replays the
    gradient's trace (docs/compiled-replay.md). `nfev`, `nhev`, `nhess` count the
    evaluations of f (each with its gradient), of Hessian-vector products and of Hessians.
    """

    def __init__(
        self,
        f: Callable[..., Any],
        args: Sequence[Any] = (),
        mode: str = "forward-over-reverse",
        compile: bool = False,
    ) -> None:
        self.f, self.args, self.mode = f, tuple(args), mode
        self._vg = value_and_grad(f, compile=compile)
        self._x: np.ndarray | None = None
        self._value: float = np.nan
        self._grad: np.ndarray | None = None
        self.nfev = self.nhev = self.nhess = 0

    def _at(self, x: Any) -> np.ndarray:
        """Evaluate f and ∇f at x unless x equals (by value) the point last evaluated."""
        x = np.asarray(x, dtype=float)
        last = self._x
        if last is None or last.shape != x.shape or not np.array_equal(last, x):
            value, g = self._vg(x.copy(), *self.args)
            self._x, self._value, self._grad = x.copy(), float(value), np.array(g, dtype=float)
            self.nfev += 1
        assert self._grad is not None
        return self._grad

    def fun(self, x: Any) -> float:
        """f(x)."""
        self._at(x)
        return self._value

    def jac(self, x: Any) -> np.ndarray:
        """∇f(x), a new array (the caller may write into it)."""
        return self._at(x).copy()

    def fun_and_jac(self, x: Any) -> tuple[float, np.ndarray]:
        """(f(x), ∇f(x)), for `minimize(obj.fun_and_jac, x0, jac=True)`."""
        return self.fun(x), self.jac(x)

    def _g(self, x: Any) -> Any:
        return self.f(x, *self.args)

    def hessp(self, x: Any, p: Any) -> np.ndarray:
        """∇²f(x)·p by `rulekit.hvp` (forward over reverse unless `mode` says otherwise)."""
        x, p = np.array(x, dtype=float), np.array(p, dtype=float)
        self.nhev += 1
        _, hv = hvp(self._g, (x,), (p,), mode=self.mode)
        return np.array(hv, dtype=float)

    def hess(self, x: Any) -> np.ndarray:
        """∇²f(x), shape (n, n), by `rulekit.hessian`."""
        self.nhess += 1
        return np.array(hessian(self._g, mode=self.mode)(np.array(x, dtype=float)), dtype=float)


def scipy_objective(
    f: Callable[..., Any],
    args: Sequence[Any] = (),
    mode: str = "forward-over-reverse",
    compile: bool = False,
) -> ScipyObjective:
    """`f(x, *args)` as `fun`, `jac`, `hessp`, `hess` (and `fun_and_jac`) for
    `scipy.optimize.minimize`; see `ScipyObjective`."""
    return ScipyObjective(f, args, mode=mode, compile=compile)
