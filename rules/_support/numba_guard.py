"""A traced value passed to a numba-jitted function: a TracingError, not numba's TypingError.

Numba types each argument of a call with `numba.extending.typeof_impl`; for a class it does
not know it gives up with a long `TypingError` ("non-precise type pyobject"). Registering
rulekit's traced classes there raises rulekit's `TracingError` instead, which numba lets
through unchanged (its dispatcher only turns `ValueError`s into "pyobject"). Installed by
`rules/__init__.py`: the bundled rules import numba anyway (their kernels), while
`import rulekit` must not.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from rulekit import TracingError

__all__ = ["install"]


def _jitted_name(depth: int = 12) -> str | None:
    """The name of the jitted function being called: a numba dispatcher's `py_func`, found
    as `self` of one of the frames typing the call (`typeof_pyval`, `_compile_for_args`)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and depth > 0:
        owner = frame.f_locals.get("self") if frame.f_code.co_argcount else None
        if type(owner).__module__.startswith("numba"):
            fn = getattr(owner, "py_func", None)
            if fn is not None:
                module = getattr(fn, "__module__", None)
                qualname = getattr(fn, "__qualname__", None) or repr(fn)
                return f"{module}.{qualname}" if module else qualname
        frame, depth = frame.f_back, depth - 1
    return None


def _refuse(val: Any, c: Any) -> Any:
    """numba's typeof for a traced value: always a TracingError (it has no numba type)."""
    name = _jitted_name()
    short = name.rsplit(".", 1)[-1] if name else "f"
    what = f"the numba-jitted function {name}" if name else "a numba-jitted function"
    x: Any = getattr(getattr(val, "cd", None), "x", None)
    pattern = (
        f"Array[np.{x.dtype.name}, {x.ndim}]"
        if hasattr(x, "dtype") and hasattr(x, "ndim") and not getattr(val, "scalar", False)
        else "float"
    )
    raise TracingError(
        f"a traced value was passed to {what}. Fix: wrap it with rulekit.primitive and "
        f"register a rule for it, then call the wrapper: `{short} = rulekit.primitive({short})` "
        f"and `@rulekit.rrule.register({short}, ...)` with one pattern per argument (this one: "
        f"{pattern}); see docs/concepts.md, 'Rules and pullbacks'. Numba compiles for plain "
        "arrays only, so the value would leave the trace and its gradient would be lost. (If "
        "its body is plain NumPy code, "
        f"calling `{short}.py_func(...)` instead traces through it.)"
    )


def install() -> None:
    """Register `_refuse` as numba's typeof for rulekit's traced classes (idempotent)."""
    from numba.extending import typeof_impl

    from rulekit import Traced

    if typeof_impl.dispatch(Traced) is not _refuse:
        typeof_impl.register(Traced)(_refuse)
