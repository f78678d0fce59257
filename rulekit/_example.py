"""`Example`: a call example attached to a rule registration, checked by the kit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Example", "example"]


@dataclass(frozen=True)
class Example:
    """One call `f(*args, **kwargs)` on which the conformance kit checks a rule.

    `rtol`/`atol` override the kit's per-dtype tolerances for this example
    (say why in a comment where you set them); `name` labels it in reports.
    `reference` replaces `f` as the function the rule is compared with, for
    primals whose results are not determined by their inputs (`np.empty_like`
    is checked against `np.zeros_like`, which is one of its valid results).
    """

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    rtol: float | None = None
    atol: float | None = None
    name: str | None = None
    reference: Any = None


def example(*args: Any, **kwargs: Any) -> Example:
    """Shorthand: `example(A, B, axis=0)` is `Example((A, B), {"axis": 0})`."""
    return Example(tuple(args), dict(kwargs))
