"""`CoDual`: a primal value travelling with its adjoint memory (its fdata)."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from rulekit._tangents import zero_fdata

P = TypeVar("P")

__all__ = ["CoDual", "zero_codual"]


class CoDual(Generic[P]):
    """A primal `x` paired with its fdata `dx`.

    `dx is None` marks an *inactive* (constant) value: a rule must not compute
    or write its adjoint. For an active float array `dx` is an array of the
    same shape and dtype that the pullbacks increment in place; for immutable
    values (floats, tuples of floats, ints) it is `NoFData()`.

    CoDual is a two-slot object: the engine creates one per operation, so it is
    kept as cheap as a tuple.
    """

    __slots__ = ("dx", "x")

    def __init__(self, x: P, dx: Any = None) -> None:
        self.x = x
        self.dx = dx

    @property
    def active(self) -> bool:
        """Whether this value's adjoint is wanted (`dx is not None`)."""
        return self.dx is not None

    def __iter__(self):  # allows `x, dx = codual`
        yield self.x
        yield self.dx

    def __repr__(self) -> str:
        return f"CoDual({self.x!r}, {self.dx!r})"


def zero_codual(x: P) -> CoDual[P]:
    """A CoDual of `x` with freshly allocated zero fdata (active)."""
    return CoDual(x, zero_fdata(x))
