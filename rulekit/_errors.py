"""The exceptions rulekit raises. Each message says what happened and what to do."""

from __future__ import annotations

import numpy as np


class RulekitError(Exception):
    """Base class of every error rulekit raises on purpose."""


class RuleRegistrationError(RulekitError, TypeError):
    """A rule registration is malformed (caught when it is registered, not when called)."""


class MissingRuleError(RulekitError, LookupError):
    """No registered rule matches a concrete call signature."""


class AmbiguousRuleError(RulekitError, LookupError):
    """Two registered rules match a call and neither is more specific than the other."""


class TracingError(RulekitError, RuntimeError):
    """A traced value would silently leave the trace, which would give a wrong gradient."""


class TangentError(RulekitError, TypeError):
    """A value has no tangent type, or two tangents do not fit together."""


class SubclassError(TracingError, TypeError):
    """An ndarray subclass (np.matrix, a masked array, ...) was given where rulekit refuses it.

    Both a `TracingError` and a `TypeError`: it is raised for differentiated
    inputs (bad input) and for constant operands met while tracing.
    """


class RulePackageError(RulekitError, ImportError):
    """A rule package that rulekit loads by itself failed to import.

    Raised at the lookup that loads it: a module named by a `rulekit.rules` entry
    point, or one deferred with `rulekit.registry.defer`. `name` is that module;
    the import's own error is the `__cause__`.
    """


class RuleRegistrationWarning(UserWarning):
    """A rule was registered where traced calls cannot reach it (e.g. a plain Python function)."""


class RetraceWarning(UserWarning):
    """A function compiled with `compile=True` is traced again on every call (never replayed)."""


def untraced_write_error(what: str) -> TracingError:
    """The refusal for writing a traced value into an untraced array (`what` did it).

    A rule that writes into an argument raises it when that argument is constant
    (`dx is None`) and the value written is active: `untraced_write_error("np.copyto")`.
    """
    return TracingError(
        f"{what} writes a traced value into an untraced array. Fix: make the destination "
        "traced, e.g. `buf = np.zeros_like(x)` or `buf = x.copy()` from a traced x, and write "
        "into that; or build the array with np.stack / np.concatenate / np.where. Written "
        "into a plain array, the value would leave the trace and its gradient would be lost."
    )


def subclass_error(a: np.ndarray, what: str) -> SubclassError:
    """Refuse an ndarray subclass: its operators and functions may mean something else."""
    name = f"{type(a).__module__}.{type(a).__qualname__}"
    if isinstance(a, np.ma.MaskedArray):
        fix = "work on plain arrays: `m.filled(fill_value)`, or `np.where(m.mask, fill, m.data)`"
    elif isinstance(a, np.matrix):
        fix = "convert it with `np.asarray(m)`, and write `@` where np.matrix's `*` meant it"
    else:
        fix = "convert it with `np.asarray(a)` (or `a.view(np.ndarray)`)"
    return SubclassError(
        f"rulekit cannot differentiate through an ndarray subclass ({name}, {what}). "
        f"Fix: {fix}. (Subclasses override operators and functions, e.g. np.matrix's `*` is "
        "a matrix product and a masked array skips masked entries, in ways the rules for "
        "plain arrays do not follow: their gradient would be wrong.)"
    )
