"""The exceptions rulekit raises. Each message says what happened and what to do."""

from __future__ import annotations


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


class RuleRegistrationWarning(UserWarning):
    """A rule was registered where traced calls cannot reach it (e.g. a plain Python function)."""


def untraced_write_error(what: str) -> TracingError:
    """The refusal for writing a traced value into an untraced array (`what` did it)."""
    return TracingError(
        f"{what} writes a traced value into an untraced array. Fix: make the destination "
        "traced, e.g. `buf = np.zeros_like(x)` or `buf = x.copy()` from a traced x, and write "
        "into that; or build the array with np.stack / np.concatenate / np.where. Written "
        "into a plain array, the value would leave the trace and its gradient would be lost."
    )
