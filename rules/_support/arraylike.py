"""Helpers for rules whose arguments are *array-likes*: arrays, scalars or flat sequences.

Functions such as `np.append(arr, values)`, `np.diff(a, prepend=p)`,
`np.linspace(start, stop)` or `np.cross(a, b)` accept anything numpy can turn
into an array. `give(arg, g)` hands a cotangent `g` (of `np.asarray(arg)`'s shape,
or of a shape it was broadcast to) back to such an argument, whatever it is:

* a float/complex array: `x̄ += unbroadcast(g)` in place (a real array takes Re g);
* a float/complex scalar: its rdata `type(x)(Σ g)` is returned;
* a list/tuple of arrays or scalars (`np.asarray` stacks them): element k gets `g[k]`;
* an inactive argument, a plain keyword value or an integer/bool value: nothing.

Helpers for the common structure of these rules sit here too: reading the
primals of a call (`primals`), a bound view of its arguments (`Bound`) and an
inactive output (`inactive`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Union

import numpy as np

from rulekit import CoDual, NoFData
from rules._support.shape import add_into, no_pullback, seq_rdata, unbroadcast_to
from rules._support.util import NO_R, scalar_rdata

__all__ = ["Bound", "Seq", "active", "as_array", "binder", "give", "inactive", "primals"]

#: A list or tuple argument (np.asarray stacks its elements).
Seq = Union[list, tuple]


def active(v: Any) -> bool:
    """Whether `v` is a CoDual whose adjoint is wanted (a plain keyword value is not)."""
    return isinstance(v, CoDual) and v.dx is not None


def as_array(v: Any) -> np.ndarray:
    """`np.asarray` of the primal of `v` (a CoDual or a plain value)."""
    return np.asarray(v.x if isinstance(v, CoDual) else v)


def primals(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The primal values of a call's positional CoDuals and keyword values."""
    return [a.x for a in args], {
        k: (v.x if isinstance(v, CoDual) else v) for k, v in kwargs.items()
    }


def inactive(y: Any, n: int) -> tuple[CoDual, Any]:
    """An output that carries no derivative, for a rule of `n` positional inputs (f included)."""
    return CoDual(y, None), no_pullback(n)


def give(v: Any, g: Any) -> Any:
    """Add cotangent `g` to argument `v` (see the module docstring); return `v`'s rdata."""
    if not isinstance(v, CoDual) or v.dx is None:
        return NO_R
    x, dx = v.x, v.dx
    if isinstance(dx, np.ndarray):
        if dx.dtype.kind in "fc":
            add_into(dx, g)
        return NO_R
    if isinstance(x, (list, tuple)):
        shape = np.shape(x)
        g = np.broadcast_to(unbroadcast_to(np.asarray(g), shape), shape)
        if isinstance(dx, (list, tuple)) and any(isinstance(d, (list, tuple)) for d in dx):
            raise NotImplementedError(
                "rulekit: a nested list/tuple of traced values as an array argument has no "
                "rule; build the array with np.stack (e.g. np.stack([np.stack(row) for row in "
                "rows])) and pass that."
            )
        return seq_rdata(v, [g[k] for k in range(len(x))])
    if isinstance(dx, NoFData):
        return scalar_rdata(x, g)
    return NO_R


class Bound:
    """A call's arguments bound to the primal function's parameter names (defaults filled).

    `b.value(name)` is the primal, `b.arg(name)` the CoDual (or plain keyword
    value) as the rule received it, and `b.rdata(grads)` the rdata tuple of the
    positional arguments, given a `{name: rdata}` dict.
    """

    __slots__ = ("args", "names")

    def __init__(self, sig: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        self.args = dict(bound.arguments)
        params = list(sig.parameters.values())
        names: list[str] = []
        for k in range(len(args)):
            p = params[min(k, len(params) - 1)]
            names.append(p.name if p.kind is not p.VAR_POSITIONAL else f"{p.name}[{k}]")
        self.names = names

    def arg(self, name: str) -> Any:
        return self.args[name]

    def value(self, name: str) -> Any:
        v = self.args[name]
        return v.x if isinstance(v, CoDual) else v

    def rdata(self, grads: dict[str, Any]) -> tuple[Any, ...]:
        """(NoRData for f, then one rdata per positional argument)."""
        return (NO_R, *(grads.get(n, NO_R) for n in self.names))


def binder(fn: Callable[..., Any]) -> Callable[[tuple[Any, ...], dict[str, Any]], Bound]:
    """`bind(args, kwargs) -> Bound` for calls of `fn` (the signature is read once)."""
    sig = inspect.signature(fn)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Bound:
        return Bound(sig, args, kwargs)

    return bind
