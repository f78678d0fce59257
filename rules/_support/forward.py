"""Registering forward rules and differentiable pullbacks on a function's reverse patterns.

`register_like(f, frule=..., vjp=...)` registers them for every pattern tuple (and
with the examples) that `f`'s reverse rules are registered for, so that the three
rules of a function dispatch alike and the kit checks them on the same examples.
Call it after the reverse rules are registered (import the reverse module first).

`bind_by_name`, `dual_value` and `dual_tangent` are what forward rules taking
keyword arguments use to read their arguments (Duals or plain values).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import rulekit
from rulekit._registry import forward_registry, registry, vjp_registry
from rulekit._signature import unwrap

__all__ = ["bind_by_name", "dual_tangent", "dual_value", "register_like", "register_traced",
           "traced_rules"]  # fmt: skip


def bind_by_name(fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`fn`'s parameters by name, defaults filled in (values as given: Duals stay Duals)."""
    ba = inspect.signature(fn).bind(*args, **kwargs)
    ba.apply_defaults()
    return dict(ba.arguments)


def dual_value(v: Any) -> Any:
    """The value of an argument given as a Dual or as a plain value."""
    return v.x if isinstance(v, rulekit.Dual) else v


def dual_tangent(v: Any) -> Any:
    """The tangent of an argument given as a Dual (None: a plain value, a constant)."""
    return v.dx if isinstance(v, rulekit.Dual) else None


def register_like(
    f: Any,
    *,
    frule: Callable[..., Any] | None = None,
    vjp: Callable[..., Any] | None = None,
    module: str | None = None,
) -> None:
    """Register `frule` / `vjp` for `f` on each of its reverse registrations' patterns."""
    target = unwrap(f)  # (== not `is`: a bound method such as np.add.at is new per access)
    regs = [r for r in registry.entries() if r.f == target and r.out is None]
    if not regs:
        raise LookupError(f"no reverse rule is registered for {rulekit.function_name(f)}")
    mod = module or "rules"
    seen: set[Any] = set()
    for r in regs:
        if r.patterns in seen:
            continue
        seen.add(r.patterns)
        mod = module or r.module
        if frule is not None:
            forward_registry.add("frule", f, r.patterns, frule, examples=r.examples, module=mod)
        if vjp is not None:
            vjp_registry.add("vjp", f, r.patterns, vjp, examples=r.examples, module=mod)


def traced_rules(impl: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """A forward rule and a differentiable pullback for a function re-implemented in NumPy
    (`rules.numpy._composite`): `rulekit.jvp` / `rulekit.vjp` of `impl`, run where the rule
    runs, so they differentiate `impl`'s own operations (to any order)."""

    def frule(f: Any, *args: Any, **kwargs: Any) -> Any:
        primals = tuple(a.x for a in args)
        tangents = tuple(a.dx for a in args)
        if all(no_tangent(t) for t in tangents):
            return rulekit.Dual(impl(*primals, **kwargs), None)
        y, dy = rulekit.jvp(lambda *xs: impl(*xs, **kwargs), primals, tangents)
        return rulekit.Dual(y, dy)

    def vjp(active: Any, *args: Any, **kwargs: Any) -> Any:
        y, vjp_fn = rulekit.vjp(lambda *xs: impl(*xs, **kwargs), *args)

        def pullback(g: Any) -> tuple[Any, ...]:
            cts = vjp_fn(g)
            return tuple(c if a else None for c, a in zip(cts, active, strict=True))

        return y, pullback

    name = getattr(impl, "__name__", "impl")
    name_rules(frule, vjp, name, f"{name} (its NumPy re-implementation, traced)")
    return frule, vjp


def no_tangent(t: Any) -> bool:
    """Whether tangent `t` is None (a constant), also per element of a tuple/list argument."""
    if isinstance(t, (list, tuple)):
        return all(no_tangent(e) for e in t)
    return t is None


def name_rules(frule: Any, vjp: Any, name: str, what: str) -> None:
    """Name the forward rule and differentiable pullback made for `name` from `what` (the
    re-implementation they differentiate), for `rulekit rules` and error messages."""
    frule.__name__ = frule.__qualname__ = f"{name}_frule"
    frule.__doc__ = f"ẏ = jvp of {what}."
    if vjp is not None:
        vjp.__name__ = vjp.__qualname__ = f"{name}_vjp"
        vjp.__doc__ = f"x̄ = vjp of {what}."


def register_traced(f: Any, impl: Callable[..., Any]) -> None:
    """`register_like(f, ...)` with `traced_rules(impl)`."""
    frule, vjp = traced_rules(impl)
    register_like(f, frule=frule, vjp=vjp)
