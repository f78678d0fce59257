"""`rrule` and `build_primitive_rrule`: register rules, and call or build the registered rule.

@rulekit.rrule.register(np.sin, Array[np.floating])
def sin_rrule(f, x): ...                      # a plain rule

@rulekit.build_primitive_rrule.register(np.matmul, Array[np.float64, 2], Array[np.float64, 2])
def build_matmul(sig): ...                    # a factory of StatefulRRule objects

y, pb = rulekit.rrule(zero_codual(np.sin), zero_codual(x))   # call through the registry
rule = rulekit.build_primitive_rrule(sig)     # the rule function, or a fresh rule object
"""

from __future__ import annotations

import functools
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._errors import RuleRegistrationWarning
from rulekit._functions import FunctionWrapper, function_name
from rulekit._loading import caller_module
from rulekit._patterns import as_pattern
from rulekit._registry import Kind, Registry, registry
from rulekit._signature import Signature, out_value

__all__ = ["build_primitive_rrule", "is_primitive", "rrule"]


def _unreachable(f: Any) -> bool:
    """Whether traced calls of `f` can never reach a rule registered for it.

    The engine sees ufuncs (and their methods), numpy functions dispatched through
    `__array_function__`, `rulekit.primitive` wrappers, and the builtins it calls
    itself (operator.getitem, ...). A plain Python function is none of those.
    """
    if isinstance(f, (FunctionWrapper, np.ufunc)) or hasattr(f, "_implementation"):
        return False
    return isinstance(f, (types.FunctionType, types.MethodType, functools.partial))


class _RegisterMixin:
    _kind: Kind
    _table: Registry = registry

    def register(
        self, f: Any, *patterns: Any, out: Any = None, examples: Any = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: register the decorated callable for calls of `f` matching `patterns`.

        `out=` is the pattern of an `out=` keyword array (registrations without it
        match only calls without `out=`). `examples` attaches call examples (a
        list of argument tuples, or a zero-argument callable returning one) that
        the conformance kit checks the rule on.
        """
        module = caller_module(1)
        # Validate the patterns now, not when the decorator is applied.
        for p in patterns:
            as_pattern(p)
        if _unreachable(f):
            warnings.warn(
                f"a rule registered for the plain Python function {function_name(f)} is never "
                f"used by traced code. Fix: wrap it, `{getattr(f, '__name__', 'f')} = "
                "rulekit.primitive(fn)`, and call the wrapper (it uses rules registered for the "
                "wrapper or for fn). Calls of the plain function are traced through its body, "
                "and this rule is ignored.",
                RuleRegistrationWarning,
                stacklevel=2,
            )

        def decorator(impl: Callable[..., Any]) -> Callable[..., Any]:
            self._table.add(
                self._kind, f, patterns, impl, out=out, examples=examples, module=module
            )
            return impl

        return decorator


class _RRule(_RegisterMixin):
    """`rulekit.rrule(f, *args, **kwargs)`: call the registered rule for these CoDuals.

    `rulekit.rrule.register(f, *patterns)` registers a plain rule function.
    For a signature with a stateful factory this builds a fresh rule object per
    call (the AD engine instead keeps one per call site).
    """

    _kind: Kind = "rrule"

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        out = out_value(kwargs) if kwargs and "out" in kwargs else None
        sig, reg = registry.lookup_call(f.x, [a.x for a in args], out)
        rule = reg.impl if reg.kind == "rrule" else reg.impl(sig)
        return rule(f, *args, **kwargs)

    def __repr__(self) -> str:
        return "rulekit.rrule"


class _BuildPrimitiveRRule(_RegisterMixin):
    """`rulekit.build_primitive_rrule(sig)`: the rule to use for signature `sig`.

    Returns the registered rule function, or a fresh `StatefulRRule` from a
    registered factory (`build_primitive_rrule.register(f, *patterns)` registers
    a factory `sig -> rule`; it wins over a plain rule of the same patterns).
    """

    _kind: Kind = "factory"

    def __call__(self, sig: Signature) -> Callable[..., Any]:
        reg = registry.lookup(sig)
        return reg.impl(sig) if reg.kind == "factory" else reg.impl

    def __repr__(self) -> str:
        return "rulekit.build_primitive_rrule"


rrule = _RRule()
build_primitive_rrule = _BuildPrimitiveRRule()


def is_primitive(sig: Signature) -> bool:
    """Whether a rule is registered for calls of signature `sig`."""
    return registry.find(sig) is not None
