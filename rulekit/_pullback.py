"""`value_and_pullback` and `Pullback`: a non-scalar function's output cotangent pulled back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rulekit._api import _differentiable, _GradBuffers, _gradient, _own_layout
from rulekit._engine._levels import nesting
from rulekit._engine._trace import Tracer, untrace
from rulekit._tangents import NoTangent

__all__ = ["Pullback", "value_and_pullback"]


class Pullback:
    """`Pullback(f)(dy, *args) -> (value, (x̄₀, x̄₁, ...))`: `f(*args)` and the output
    cotangent `dy` pulled back to every positional argument (`NoTangent()` for the
    non-differentiable ones). One object keeps its rules per call site between calls,
    as `value_and_grad` does (what `rulekit.vjp`'s reusable `vjp_fn` calls)."""

    def __init__(self, f: Callable[..., Any]) -> None:
        self.f = f
        self.tracer = Tracer(f)
        self._lock = threading.RLock()

    def __call__(self, dy: Any, *args: Any) -> tuple[Any, tuple[Any, ...]]:
        if nesting():  # inside another transformation: the differentiable (nested) mode
            from rulekit._nested import nested_vjp  # (on first use: light import)

            value, fn, _ = nested_vjp(self.f, args, False)
            return value, fn(dy)
        with self._lock:
            tracer = self.tracer
            tape = tracer.new_tape()
            buffers = _GradBuffers(reuse=False)
            dxs = [buffers.fdata(a, i) if _differentiable(a) else None for i, a in enumerate(args)]
            prims = [_own_layout(a) for a in args]
            targs = [tracer.wrap(x, d, tape) for x, d in zip(prims, dxs, strict=True)]
            out = tracer.forward(targs, {}, tape)
            value = untrace(out)
            tracer.seed(out, dy, tape)
            tracer.backward(tape)
            grads = tuple(
                _gradient(a, t, d, tape) if d is not None else NoTangent()
                for a, t, d in zip(args, targs, dxs, strict=True)
            )
            return value, grads


def value_and_pullback(f: Callable[..., Any], dy: Any, *args: Any) -> tuple[Any, tuple[Any, ...]]:
    """Evaluate `f(*args)` and pull the output cotangent `dy` back to every argument.

    Returns `(value, (x̄₀, x̄₁, ...))` with one cotangent per positional argument
    (`NoTangent()` for non-differentiable ones).
    """
    return Pullback(f)(dy, *args)
