"""Which traces are running in this thread, and the error for a value of another trace."""

from __future__ import annotations

import threading
from typing import Any

from rulekit._errors import TracingError

__all__ = ["foreign_trace_error", "trace_state"]


class _TraceState(threading.local):
    """Per thread: how many traces are running, their tapes (innermost last), refusals.

    Thread-local, so that a trace running in one thread never sees (or records)
    the calls of another thread: separate `value_and_grad` objects run
    concurrently.
    """

    active: int = 0

    def __init__(self) -> None:
        self.tapes: list[Any] = []  # the tapes whose forward pass is running, innermost last
        self.refusals: list[Any] = []  # TracingErrors raised by traced values in those passes


trace_state = _TraceState()


def foreign_trace_error(theirs: Any) -> TracingError:
    """A traced value reached a trace that is not the one that made it."""
    if theirs in trace_state.tapes:
        return TracingError(
            "a value traced by an outer rulekit.value_and_grad reached a trace that a rule "
            "runs for itself (a DerivedRule, scan or checkpoint body) without being one of its "
            "arguments. Fix: pass the value to the inner function as an argument "
            "(rulekit.lift_closure does this for closures). Nested transformations (grad of "
            "grad, jacfwd of grad) tag their own values and are not affected."
        )
    return TracingError(
        "a traced value was used outside the trace that made it. Fix: use only values "
        "computed in the current call; to keep a result, store the plain value the call "
        "returns. (The value was kept past its value_and_grad call, in a global, a closure, "
        "an attribute or a cache, or passed to another thread.)"
    )
