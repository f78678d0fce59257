"""A forward rule and a differentiable pullback that differentiate a traceable
re-implementation in its *active* positional arguments only.

`rules._support.forward.traced_rules(impl)` differentiates `impl` in every positional
argument (its pullback traces each float argument, active or not). Where an argument is a
constant that `impl` must see as a plain value — np.gradient's coordinate arrays, whose
traced form has no rule — `active_traced_rules(impl, refuse=...)` closes over the inactive
arguments instead, and `refuse(active)` may raise for an active one that has no
derivative (as the reverse rule does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import rulekit
from rules._support.forward import name_rules, no_tangent

__all__ = ["active_traced_rules", "inexact_value"]


def inexact_value(v: Any) -> bool:
    """Whether `v` is a float or complex value (traced or not): what carries a derivative."""
    if isinstance(v, (float, complex)):
        return True
    dtype = getattr(v, "dtype", None)
    return dtype is not None and dtype.kind in "fc"


def active_traced_rules(
    impl: Callable[..., Any],
    refuse: Callable[[list[int], Sequence[Any]], None] | None = None,
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(frule, vjp) of `impl(*args, **kwargs)`: `rulekit.jvp` / `rulekit.vjp` of it in the
    positional arguments that carry a tangent / are active, the others closed over."""

    def frule(f: Any, *args: Any, **kwargs: Any) -> Any:
        xs = [a.x for a in args]
        active = [i for i, a in enumerate(args) if not no_tangent(a.dx)]
        if refuse is not None:
            refuse(active, xs)
        if not active:
            return rulekit.Dual(impl(*xs, **kwargs), None)

        def call(*vs: Any) -> Any:
            full = list(xs)
            for i, v in zip(active, vs, strict=True):
                full[i] = v
            return impl(*full, **kwargs)

        y, dy = rulekit.jvp(call, tuple(xs[i] for i in active), tuple(args[i].dx for i in active))
        return rulekit.Dual(y, dy)

    def vjp(act: Sequence[bool], *args: Any, **kwargs: Any) -> Any:
        active = [i for i, a in enumerate(act) if a and inexact_value(args[i])]
        if refuse is not None:
            refuse(active, args)
        if not active:
            return impl(*args, **kwargs), lambda g: (None,) * len(args)

        def call(*vs: Any) -> Any:
            full = list(args)
            for i, v in zip(active, vs, strict=True):
                full[i] = v
            return impl(*full, **kwargs)

        y, vjp_fn = rulekit.vjp(call, *(args[i] for i in active))

        def pullback(g: Any) -> tuple[Any, ...]:
            cts: list[Any] = [None] * len(args)
            for i, c in zip(active, vjp_fn(g), strict=True):
                cts[i] = c
            return tuple(cts)

        return y, pullback

    name = getattr(impl, "__name__", "impl")
    name_rules(frule, vjp, name, f"{name} (its NumPy re-implementation) in the active arguments")
    return frule, vjp
