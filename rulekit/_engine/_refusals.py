"""The errors a traced value raises when it would leave the trace, and how they are noted.

A refusal raised inside the traced function may be caught there (by user code
or a library) and replaced by another error or ignored; `refuse` notes it in
`trace_state.refusals` so that `Tracer.forward` can report it anyway.
"""

from __future__ import annotations

import dis
from typing import Any

import numpy as np

from rulekit._engine._state import trace_state
from rulekit._errors import TracingError, untraced_write_error

__all__ = [
    "finished_level", "index_refusal", "inner_into_outer", "keyword_tangent", "leak", "refuse",
    "subclass_caller",
]  # fmt: skip


def refuse(err: TracingError) -> TracingError:
    """Note a refusal raised by a traced value: if code in the traced function catches it
    and carries on, the engine reports it when the function returns (see `Tracer.forward`)."""
    if trace_state.active:
        trace_state.refusals.append(err)
    return err


def leak(what: str, frame: Any = None) -> TracingError:
    """The error for a traced value about to leave the trace; `frame` is the user's line."""
    return refuse(_leak_error(what, frame))


def _leak_error(what: str, frame: Any) -> TracingError:
    if frame is not None and _storing_into_subscript(frame):
        return untraced_write_error("`plain[i] = x`")
    if what.startswith("NumPy was asked to convert"):  # __array__: most often np.array([...])
        return TracingError(
            f"{what} a traced value. Fix: to build an array from traced values use "
            "np.stack([a, b]) or np.concatenate([a, b]) (np.column_stack([a, b]) for columns), "
            "not np.array([a, b]), np.r_[a, b] or np.c_[a, b]; to fill one with a traced value "
            "use np.full_like(x, v) or v * np.ones(shape), not np.full(shape, v). Why: those "
            "take a list (or an index expression), not an array, so NumPy never hands the call "
            "to rulekit: it converts each item to a plain array, and the value would leave the "
            "trace with its gradient silently lost. Otherwise keep the computation in numpy "
            "functions that have rules; for another callable (a C extension, a numba or scipy "
            "function), wrap it with rulekit.primitive and register a rule for it."
        )
    return TracingError(
        f"{what} a traced value. Fix: keep the computation in numpy functions that have "
        "rules; for another callable (a C extension, a numba or scipy function), wrap it with "
        "rulekit.primitive and register a rule for it; to build an array from traced values "
        "use np.stack([a, b]) (not np.array([a, b])); to fill one with a traced value use "
        "np.full_like(x, v) or v * np.ones(shape) (not np.full(shape, v)). Converted to a "
        "plain array or Python number, the value would leave the trace and its gradient "
        "would silently be lost."
    )


_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]
_BINARY_OP = dis.opmap.get("BINARY_OP")
#: BINARY_OP's arguments for `**` and `**=`
_POWER_OPS = frozenset(
    i for i, (_, sym) in enumerate(getattr(dis, "_nb_ops", ())) if sym in ("**", "**=")
)


def index_refusal(frame: Any) -> Exception:
    """The error of `__index__` on a traced value, called from `frame`.

    numpy < 2.3's `ndarray ** e` first asks the exponent for `__index__` (its fast path for
    integer powers), swallows the error and calls np.power, whose rule then runs: for that
    probe a plain TypeError, not noted as a refusal. Anywhere else the noted leak error."""
    code, i = frame.f_code.co_code, frame.f_lasti
    if 0 <= i < len(code) - 1 and code[i] == _BINARY_OP and code[i + 1] in _POWER_OPS:
        return TypeError("a traced exponent has no integer value (numpy's probe of `**`)")
    return leak("a traced value was used as an index: __index__ was applied to")


def _storing_into_subscript(frame: Any) -> bool:
    """Whether `frame` is executing `a[i] = v` (numpy converts v while storing it)."""
    code = frame.f_code.co_code
    i = frame.f_lasti
    return 0 <= i < len(code) and code[i] == _STORE_SUBSCR


def subclass_caller(frame: Any, depth: int = 6) -> np.ndarray | None:
    """The ndarray subclass instance whose own method is converting a traced value, if any
    (e.g. `masked * x`: the masked array's `__mul__` runs first and calls `np.asarray(x)`)."""
    while frame is not None and depth:
        owner = frame.f_locals.get("self")
        if isinstance(owner, np.ndarray) and type(owner) is not np.ndarray:
            return owner
        frame, depth = frame.f_back, depth - 1
    return None


def finished_level(kind: str) -> TracingError:
    """The error for a value of a transformation (`kind`) that has returned."""
    return TracingError(
        f"a value traced by a {kind} that has returned was used. Fix: use only values "
        "computed in the current call; keep results as the plain values the transformation "
        "returns (the value was stored in a global, a closure or an attribute, or passed to "
        "another thread)."
    )


def inner_into_outer() -> TracingError:
    """The error for `outer[i] = inner_value`."""
    return TracingError(
        "a value differentiated by an inner transformation was written into an array of an "
        "outer one (`outer[i] = inner_value`). Fix: build the result functionally "
        "(np.stack / np.concatenate / np.where) inside the inner function and return it, or "
        "make the array inside the inner function."
    )


def keyword_tangent(name: str, keywords: list[str], rule_kind: str) -> TracingError:
    """The error for a differentiated keyword argument of a rule that takes positional ones."""
    return TracingError(
        f"{name} was called with a differentiated value as a keyword argument "
        f"({', '.join(keywords)}=), and its {rule_kind} takes derivatives of positional "
        "arguments only. Fix: pass it positionally."
    )
