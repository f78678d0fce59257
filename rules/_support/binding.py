"""Binding a rule's arguments to the parameter names of the function it differentiates.

A rule receives `(f, *args, **kwargs)`: positional CoDuals and keyword values as
the caller wrote them. `binder(fn)` reads `fn`'s signature once and returns
`bind(args, kwargs) -> Bound`: the arguments by parameter name, defaults filled in,
each value as given (CoDuals stay CoDuals, so a rule can ask which are active).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from rulekit import CoDual
from rules._support.cotangents import NO_R

__all__ = ["Binder", "Bound", "binder"]


class Bound(dict[str, Any]):
    """A call's arguments by parameter name (a dict: name → CoDual or plain value).

    `b.value(name)` is the primal, `b.arg(name)` (or `b[name]`) the CoDual or plain
    value as the rule received it, `b.names` the parameter name of each positional
    argument (`args[k]` of a `*args` parameter is `"args[k]"`), and `b.rdata(grads)`
    the pullback result for the positional arguments given a `{name: rdata}` dict.
    """

    __slots__ = ("names",)

    def __init__(self, arguments: dict[str, Any], names: list[str]) -> None:
        super().__init__(arguments)
        self.names = names

    def arg(self, name: str) -> Any:
        return self[name]

    def value(self, name: str) -> Any:
        v = self[name]
        return v.x if isinstance(v, CoDual) else v

    def primal_values(self) -> dict[str, Any]:
        """Every bound argument's primal, by name."""
        return {k: (v.x if isinstance(v, CoDual) else v) for k, v in self.items()}

    def rdata(self, grads: dict[str, Any]) -> tuple[Any, ...]:
        """(NoRData for f, then one rdata per positional argument, NoRData if not in grads)."""
        return (NO_R, *(grads.get(n, NO_R) for n in self.names))


class Binder:
    """`bind(args, kwargs) -> Bound` for calls of one signature (read once)."""

    __slots__ = ("_params", "signature")

    def __init__(self, signature: inspect.Signature) -> None:
        self.signature = signature
        self._params = list(signature.parameters.values())

    @classmethod
    def from_names(cls, names: Sequence[str], defaults: dict[str, Any]) -> Binder:
        """A binder for parameters `names` (positional or keyword) with these defaults."""
        kind, empty = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty
        return cls(
            inspect.Signature(
                [inspect.Parameter(n, kind, default=defaults.get(n, empty)) for n in names]
            )
        )

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Bound:
        ba = self.signature.bind(*args, **kwargs)
        ba.apply_defaults()
        params = self._params
        names: list[str] = []
        for k in range(len(args)):
            p = params[min(k, len(params) - 1)]
            names.append(p.name if p.kind is not p.VAR_POSITIONAL else f"{p.name}[{k}]")
        return Bound(dict(ba.arguments), names)


def binder(fn: Callable[..., Any]) -> Binder:
    """The binder of `fn`'s signature: `binder(np.cross)(args, kwargs)["a"]`."""
    return Binder(inspect.signature(fn))
