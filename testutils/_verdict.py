"""What `check_rule` says: a `RuleReport` when the rule passes, a `RuleCheckError` when not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CHECKS", "FORWARD_CHECKS", "VJP_CHECKS", "RuleCheckError", "RuleReport"]

CHECKS = ("interface", "registered", "mutation", "aliasing", "correctness", "statefulness",
          "allocation")  # fmt: skip
#: The checks of a forward rule (`check_frule`): correctness is the JVP against finite
#: differences, consistency ⟨ȳ, J ẋ⟩ = ⟨Jᵀ ȳ, ẋ⟩ with the reverse rule.
FORWARD_CHECKS = ("interface", "registered", "mutation", "correctness", "consistency",
                  "statefulness")  # fmt: skip
#: The checks of a vjp rule (`check_vjp_rule`): correctness is its cotangents against the
#: reverse rule's (finite differences where there is none).
VJP_CHECKS = ("interface", "registered", "mutation", "correctness", "statefulness")
#: The checks of each kind of rule.
CHECKS_OF = {"rrule": CHECKS, "frule": FORWARD_CHECKS, "vjp": VJP_CHECKS}


class RuleCheckError(AssertionError):
    """A rule failed a check: `.check` names it, `.argument` the argument, `.input` the input.

    Constructing one gives the subclass of its check (`CorrectnessCheckError`, ...), so
    that hypothesis reports failures of different checks as distinct failures.
    """

    def __new__(cls, check: str, *args: Any, **kwargs: Any) -> RuleCheckError:
        sub = _BY_CHECK.get(check, cls) if cls is RuleCheckError else cls
        return super().__new__(sub)

    def __init__(
        self,
        check: str,
        message: str,
        argument: str | None = None,
        signature: str = "",
        input: str = "",
    ) -> None:
        self.check = check
        self.argument = argument
        self.signature = signature
        self.detail = message
        self.input = input
        where = f" ({argument})" if argument else ""
        text = f"{signature}: {check} check failed{where}: {message}"
        super().__init__(text + (f"\n{input}" if input else ""))

    def __reduce__(self) -> Any:
        return (RuleCheckError, (self.check, self.detail, self.argument, self.signature,
                                 self.input))  # fmt: skip

    def with_hint(self, hint: str) -> RuleCheckError:
        """The same failure with `hint` (a likely cause) appended to the message."""
        return RuleCheckError(self.check, f"{self.detail}. This rule {hint}", self.argument,
                              self.signature, self.input)  # fmt: skip


class InterfaceCheckError(RuleCheckError):
    pass


class RegisteredCheckError(RuleCheckError):
    pass


class MutationCheckError(RuleCheckError):
    pass


class AliasingCheckError(RuleCheckError):
    pass


class CorrectnessCheckError(RuleCheckError):
    pass


class StatefulnessCheckError(RuleCheckError):
    pass


class ConsistencyCheckError(RuleCheckError):
    pass


class AllocationCheckError(RuleCheckError):
    pass


_BY_CHECK: dict[str, type[RuleCheckError]] = {
    "interface": InterfaceCheckError,
    "registered": RegisteredCheckError,
    "mutation": MutationCheckError,
    "aliasing": AliasingCheckError,
    "correctness": CorrectnessCheckError,
    "statefulness": StatefulnessCheckError,
    "consistency": ConsistencyCheckError,
    "allocation": AllocationCheckError,
}


@dataclass
class RuleReport:
    """What `check_rule` found: every check's status ("pass" or "n/a: why")."""

    signature: str
    checks: dict[str, str] = field(default_factory=dict)
    allocations: int | None = None
    stateful: bool = False
    combinations: int = 0
    seconds: float = 0.0
    refused: list[str] = field(default_factory=list)  # combinations refused (TracingError)
    layouts: list[str] = field(default_factory=list)  # layout variants the call was tried in
    primal_allocations: int | None = None  # what the primal call allocates on the same inputs
    kind: str = "rrule"  # "rrule" (a reverse rule or factory), "frule" or "vjp"

    def __str__(self) -> str:
        cells = ", ".join(f"{k}: {self.checks.get(k, '-')}" for k in CHECKS_OF[self.kind])
        alloc = "" if self.allocations is None else f"; {self.allocations} allocations"
        return f"{self.signature}: {cells}{alloc} ({self.seconds:.2f}s)"
