"""Which registered `rulekit.primitive` wrapper a traced value should have gone through.

When third-party Python code (e.g. `scipy.special.logsumexp`) converts a traced
value to a plain array, the call would have worked through the wrapper a rule
package exports for it (`rules.special.logsumexp`). `suggest_wrapper` finds the
wrapped function on the current call stack and names that wrapper, so the
error message can say exactly what to call instead.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from rulekit._primitive import Primitive
from rulekit._registry import function_name, registry

__all__ = ["suggest_wrapper"]


def _exported_name(prim: Primitive, module: str) -> str | None:
    """The shortest public `module.attr` of the registering package that exports `prim`."""
    top = module.split(".")[0]
    names = [
        f"{name}.{attr}"
        for name, mod in list(sys.modules.items())
        if mod is not None and (name == top or name.startswith(top + "."))
        and not any(p.startswith("_") for p in name.split("."))
        for attr, value in list(vars(mod).items())
        if value is prim and not attr.startswith("_")
    ]  # fmt: skip
    return min(names, key=lambda n: (len(n), n)) if names else None


def suggest_wrapper(frame: FrameType | None, depth: int = 40) -> str | None:
    """A hint naming the registered wrapper of a function running on the stack, if any."""
    codes: dict[Any, tuple[Primitive, str]] = {}
    for reg in registry.entries():
        f = reg.f
        if isinstance(f, Primitive):
            code = getattr(f.fn, "__code__", None)
            if code is not None:
                codes.setdefault(code, (f, reg.module))
    while frame is not None and depth > 0:
        hit = codes.get(frame.f_code)
        if hit is not None:
            prim, module = hit
            where = _exported_name(prim, module) or f"the rulekit.primitive registered by {module}"
            return (
                f" {function_name(prim.fn)} has a rule through its wrapper {where}: call "
                f"{where}(...) instead of {function_name(prim.fn)}(...) on traced values."
            )
        frame, depth = frame.f_back, depth - 1
    return None
