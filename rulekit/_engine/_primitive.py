"""`primitive(fn)`: route calls of a non-numpy callable through the rule registry.

NumPy functions reach the AD engine through NumPy's own protocols; a SciPy
BLAS wrapper or a user's function does not. `primitive(fn)` wraps it: on
plain values the wrapper calls `fn` straight away (one check of overhead);
while a trace is running and an argument is traced, the call is recorded on
that argument's tape and dispatched to the rule registered *for the wrapper*
(or, failing that, for `fn`); an argument of a forward or nested level sends the
call to that level's rules (`rulekit.frule`, `rulekit.vjp_rule`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rulekit._engine._levels import _levels, innermost
from rulekit._engine._state import trace_state
from rulekit._engine._traced import find_tape
from rulekit._functions import FunctionWrapper

__all__ = ["Primitive", "primitive"]


class Primitive(FunctionWrapper):
    """A callable routed through the registry while tracing; a direct call otherwise.

    Register rules for the wrapper object itself::

        mysolve = rulekit.primitive(my_solver)

        @rulekit.rrule.register(mysolve, Array[np.float64, 2], Array[np.float64, 1])
        def mysolve_rrule(f, A, b): ...
    """

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _levels.stack:  # (a jvp or nested grad runs: its values go to that level)
            level = innermost(args, kwargs)
            if level is not None:
                return level.call(self, args, kwargs)
        if trace_state.active:
            tape = find_tape(args) or find_tape(tuple(kwargs.values()))
            if tape is not None:
                return tape.call(self, args, kwargs)
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"rulekit.primitive({getattr(self.fn, '__qualname__', self.fn)!r})"

    def __reduce__(self) -> Any:
        return (primitive, (self.fn,))


def primitive(fn: Callable[..., Any]) -> Primitive:
    """Wrap `fn` so that traced calls dispatch to its registered rule (see `Primitive`)."""
    return fn if isinstance(fn, Primitive) else Primitive(fn)
