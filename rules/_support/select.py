"""`select(cond, a, b)`: `np.where` in partials that numba kernels also compile.

A declared partial (`rulekit.elementwise`) runs on arrays, on scalars and, inlined,
inside the numba loop kernels generated from it (`rules.numpy.ufuncs._kernels`,
`rules.numpy.ufuncs.fusion`). `np.where` on two numbers is a 0-d array: inside a
kernel that is an allocation per element (measured: `x ** 2`'s pullback at 10⁵
elements took 10 ms instead of 0.1 ms). `select` is `np.where` everywhere except in
those kernels, where `install_numba()` makes numba compile it as `a if cond else b`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["install_numba", "select"]


def select(cond: Any, a: Any, b: Any) -> Any:
    """`np.where(cond, a, b)`; in a numba kernel, on numbers, `a if cond else b`."""
    return np.where(cond, a, b)


_installed: list[bool] = []


def install_numba() -> None:
    """Teach numba `select` on scalars (once per process; generated kernels call it)."""
    if _installed:
        return
    from numba import types
    from numba.extending import overload

    @overload(select)
    def _select(cond: Any, a: Any, b: Any) -> Any:
        if isinstance(cond, types.Boolean) and not isinstance(a, types.Array):

            def scalar_select(cond: Any, a: Any, b: Any) -> Any:
                if cond:
                    return a
                return b

            return scalar_select
        return None

    _installed.append(True)
