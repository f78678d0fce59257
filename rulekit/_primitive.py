"""`primitive(fn)`: route calls of a non-numpy callable through the rule registry.

NumPy functions reach the AD engine through NumPy's own protocols; a SciPy
BLAS wrapper or a user's function does not. `primitive(fn)` wraps it: on
plain values the wrapper calls `fn` straight away (one global check of
overhead); while a trace is running and an argument is traced, the call is
recorded and dispatched to the rule registered *for the wrapper*.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Primitive", "primitive"]


class _TraceState(threading.local):
    """Per thread: how many traces are running, their tapes (innermost last), the call hook.

    Thread-local, so that a trace running in one thread never sees (or records)
    the calls of another thread: separate `value_and_grad` objects run
    concurrently. `hook` is set once by the engine (the same in every thread).
    """

    active: int = 0
    hook: Callable[..., Any] | None = None

    def __init__(self) -> None:
        self.tapes: list[Any] = []  # the tapes whose forward pass is running, innermost last
        self.refusals: list[Any] = []  # TracingErrors raised by traced values in those passes


trace_state = _TraceState()


class Primitive:
    """A callable routed through the registry while tracing; a direct call otherwise.

    Register rules for the wrapper object itself::

        mysolve = rulekit.primitive(my_solver)

        @rulekit.rrule.register(mysolve, Array[np.float64, 2], Array[np.float64, 1])
        def mysolve_rrule(f, A, b): ...
    """

    __slots__ = ("__dict__", "__wrapped__", "fn")

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TypeError(f"rulekit.primitive expects a callable, got {fn!r}")
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if trace_state.active and trace_state.hook is not None:
            return trace_state.hook(self, args, kwargs)
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"rulekit.primitive({getattr(self.fn, '__qualname__', self.fn)!r})"

    def __reduce__(self) -> Any:
        return (primitive, (self.fn,))


def primitive(fn: Callable[..., Any]) -> Primitive:
    """Wrap `fn` so that traced calls dispatch to its registered rule (see `Primitive`)."""
    return fn if isinstance(fn, Primitive) else Primitive(fn)
