"""`Dual`: a primal value travelling with its tangent (forward mode's CoDual)."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

P = TypeVar("P")

__all__ = ["Dual"]


class Dual(Generic[P]):
    """A primal `x` paired with its tangent `dx` (forward mode).

    `dx` has `x`'s type, shape and dtype; `None` marks a constant, whose
    tangent no rule may compute. A forward rule takes the function and each
    positional argument as a `Dual` and returns the output's `Dual`; a rule for
    a function that writes into an argument updates that argument's `dx` in
    place too. A tuple output is one Dual of tuples, `Dual((y₀, y₁), (ẏ₀, ẏ₁))`.
    """

    __slots__ = ("dx", "x")

    def __init__(self, x: P, dx: Any = None) -> None:
        self.x = x
        self.dx = dx

    @property
    def active(self) -> bool:
        """Whether this value has a tangent (`dx is not None`)."""
        return self.dx is not None

    def __iter__(self):  # allows `x, dx = dual`
        yield self.x
        yield self.dx

    def __repr__(self) -> str:
        return f"Dual({self.x!r}, {self.dx!r})"
