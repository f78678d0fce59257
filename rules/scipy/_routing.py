"""Plain SciPy calls on traced arrays: SciPy's public names routed through the bundled rules.

`scipy.linalg.cholesky(K)` is a Python function that NumPy's protocols never see: it
converts `K` with `np.asarray`, which a traced array refuses. So when a `rules.scipy`
subpackage is imported, it replaces each public SciPy name that has a bundled
`rulekit.primitive` wrapper (`scipy.linalg.cholesky`, `scipy.special.logsumexp`,
`scipy.stats.norm.logpdf`, `scipy.linalg.blas.dgemm`, ...) by a *routed* function:

- on plain values it calls SciPy's own function at once (the wrapper's one check of
  overhead, measured in `benchmarks/bench_scipy_calls.py`), so plain code behaves
  exactly as before;
- while a trace is running and an argument is traced, it dispatches to the rule.

Every way users reach the name sees the routed function, because each looks the name up
on the module when it runs: `scipy.linalg.cholesky(K)`, `from scipy import linalg;
linalg.cholesky(K)`, `import scipy.linalg as sl; sl.cholesky(K)`, and
`from scipy.linalg import cholesky` executed after the rules loaded. A name bound
*before* (a `from scipy.linalg import cholesky` that ran before rulekit loaded its
SciPy rules) still holds SciPy's original function: its traced call raises
`TracingError`, whose message names the fix. docs/scipy-calls.md says why this
mechanism was chosen over SciPy's array-API dispatch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from rulekit import Primitive

__all__ = ["original", "route_methods", "route_module", "routed_names"]

#: (module or object, name) → the routed function installed there
_ROUTED: dict[tuple[int, str], Callable[..., Any]] = {}


def _routed(prim: Primitive) -> Callable[..., Any]:
    """A function with `prim.fn`'s name, docstring and signature that calls `prim`."""

    @functools.wraps(prim.fn)
    def routed(*args: Any, **kwargs: Any) -> Any:
        return prim(*args, **kwargs)

    routed.__rulekit_primitive__ = prim  # type: ignore[attr-defined]
    return routed


def _route(
    owner: Any,
    wrappers: Iterable[tuple[str, Any]],
    replacement: Callable[[Primitive, Any], Callable[..., Any] | None],
) -> list[str]:
    """Set `owner.<name>` to `replacement(prim, current)` for each `(name, prim)` whose
    `rulekit.primitive` wrapper matches what `owner.<name>` holds (`replacement` returns
    None when it does not). Names already routed to `prim` count as routed (importing
    twice changes nothing). Returns the names routed."""
    done = []
    for name, prim in wrappers:
        if not isinstance(prim, Primitive):
            continue
        current = getattr(owner, name, None)
        if getattr(current, "__rulekit_primitive__", None) is not prim:
            fn = replacement(prim, current)
            if fn is None:
                continue
            setattr(owner, name, fn)
            _ROUTED[(id(owner), name)] = fn
        done.append(name)
    return done


def route_module(module: ModuleType, wrappers: Iterable[tuple[str, Any]]) -> list[str]:
    """Replace `module.<name>` by a routed function for each `(name, wrapper)` whose
    wrapper is a `rulekit.primitive` of exactly the function `module.<name>` holds.

    Names whose SciPy function differs from the wrapped one (another SciPy version,
    a name rebound by the user) are left alone. Returns the names routed.
    """
    return _route(
        module, wrappers, lambda prim, current: _routed(prim) if current is prim.fn else None
    )


def route_methods(obj: Any, wrappers: Iterable[tuple[str, Any]]) -> list[str]:
    """`route_module` for the bound methods of one object (a scipy.stats distribution such
    as `scipy.stats.norm`, the one instance of its class `norm_gen`).

    The routed method is set on the object's class and routes calls on `obj` only; calls
    on other instances (a frozen `norm(loc, scale)` makes its own) run the original
    method. The instance itself is unchanged, so it pickles and copies as before.
    """

    def replacement(prim: Primitive, current: Any) -> Callable[..., Any] | None:
        bound = prim.fn
        if getattr(bound, "__self__", None) is not obj:
            return None
        if current is None or id(getattr(bound, "__func__", None)) != id(current):
            return None  # (ids: an `is` test would narrow `current` to getattr's type)
        return _routed_method(obj, prim, current)

    return _route(type(obj), wrappers, replacement)


def _routed_method(obj: Any, prim: Primitive, method: Callable[..., Any]) -> Callable[..., Any]:
    """A method of `type(obj)` that calls `prim` for `obj` and `method` for other instances."""

    @functools.wraps(method)
    def routed(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self is obj:
            return prim(*args, **kwargs)
        return method(self, *args, **kwargs)

    routed.__rulekit_primitive__ = prim  # type: ignore[attr-defined]
    return routed


def routed_names() -> int:
    """How many SciPy names are routed (for tests and `rulekit rules`)."""
    return len(_ROUTED)


def original(fn: Callable[..., Any]) -> Callable[..., Any]:
    """SciPy's own function (or bound method) behind a routed one; `fn` if not routed."""
    prim = getattr(fn, "__rulekit_primitive__", None)
    return fn if prim is None else prim.fn
