"""Call arguments as templates, and call results as signatures (for compiled replay).

A *template* is a call's arguments with every traced value replaced by its
slot (`Slot`); a replay fills it in with that replay's traced values (`fill`),
rebuilt from the CoDuals of its slot table. A *signature* is what a replay must
reproduce of a call's result: the slots, shapes and dtypes of its traced values
and its plain values (`signature`, compared with `same`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._engine._guards import Snapshot
from rulekit._engine._tape import Tape
from rulekit._engine._traced import Traced, TracedScalar, traced_in

__all__ = [
    "Constant",
    "Slot",
    "collect",
    "fill",
    "kinds",
    "same",
    "signature",
    "slots_in",
    "template",
]


class Slot:
    """A traced value's place in a step's argument template."""

    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k


class Constant:
    """A constant array a call read, and what a replay checks before it reads it again.

    Its shape, dtype and strides must be unchanged, and so must its contents, unless it
    is `watched` (a captured array `Captures` compares on every call already): a plain
    array made inside `f` and then overwritten by plain code between two calls that read
    it would otherwise be replayed with its last contents for both.
    """

    __slots__ = ("a", "key", "snapshot")

    def __init__(self, a: np.ndarray, watched: bool) -> None:
        self.a = a
        self.key = (a.shape, a.dtype, a.strides)
        self.snapshot = None if watched else Snapshot(a)

    def holds(self) -> bool:
        a = self.a
        if (a.shape, a.dtype, a.strides) != self.key:
            return False
        s = self.snapshot
        return s is None or s.holds(a)


def template(x: Any, consts: list[Constant], watched: set[int]) -> Any:
    """`x` with its traced values replaced by their slots; its constant arrays noted."""
    if isinstance(x, Traced):
        return Slot(x.slot)
    t = type(x)
    if t is tuple or t is list:
        parts = [template(e, consts, watched) for e in x]
        if any(p is not e for p, e in zip(parts, x, strict=True)):
            return t(parts)
        return x
    if isinstance(x, tuple):  # (a named tuple)
        parts = [template(e, consts, watched) for e in x]
        return t(*parts) if any(p is not e for p, e in zip(parts, x, strict=True)) else x
    if t is dict:
        vals = {k: template(v, consts, watched) for k, v in x.items()}
        return vals if any(vals[k] is not v for k, v in x.items()) else x
    if isinstance(x, np.ndarray):
        consts.append(Constant(x, id(x) in watched))
    return x


def fill(
    x: Any, table: dict[int, CoDual], tape: Tape, kinds: dict[int, type], copy: bool = False
) -> Any:
    """The template `x` with its slots replaced by traced values of this replay's `tape`."""
    t = type(x)
    if t is Slot:
        k = x.k
        cd = table[k]
        cls = kinds[k]
        return cls(cd, tape, k, issubclass(cls, TracedScalar))
    if t is tuple or t is list:
        return t(fill(e, table, tape, kinds, copy) for e in x)
    if isinstance(x, tuple):
        return t(*(fill(e, table, tape, kinds, copy) for e in x))
    if t is dict:
        return {k: fill(v, table, tape, kinds, copy) for k, v in x.items()}
    if copy and isinstance(x, np.ndarray):  # (a constant returned: each call its own)
        return x.copy()
    return x


def slots_in(x: Any) -> list[int]:
    """The slots in template `x` (inside tuples, lists and dicts too)."""
    if type(x) is Slot:
        return [x.k]
    if isinstance(x, (tuple, list)):
        return [k for e in x for k in slots_in(e)]
    if isinstance(x, dict):
        return [k for e in x.values() for k in slots_in(e)]
    return []


def kinds(x: Any, into: dict[int, type]) -> None:
    """Note the class of each traced value in `x`."""
    for t in traced_in(x):
        into[t.slot] = type(t)


def collect(x: Any, table: dict[int, CoDual]) -> None:
    """Enter each traced value of `x` in a replay's slot table (its CoDual)."""
    for t in traced_in(x):
        table[t.slot] = t.cd


def signature(x: Any) -> Any:
    """What a replay must reproduce of a call's result: the slots, shapes and dtypes of its
    traced values, and plain values themselves (arrays copied)."""
    if isinstance(x, Traced):
        v = x.cd.x
        return (x.slot, x.tracked, np.shape(v), getattr(v, "dtype", type(v)))
    t = type(x)
    if t is tuple or t is list or isinstance(x, tuple):
        return tuple(signature(e) for e in x)
    if isinstance(x, np.ndarray):
        return x.copy()
    return x


def same(a: Any, b: Any) -> bool:
    """Whether two recorded values are equal (arrays elementwise, NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return (
            a.shape == b.shape
            and a.dtype == b.dtype
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
        )
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (float, complex, np.inexact)):
        return bool(a == b) or (a != a and b != b)
    try:
        return bool(a == b)
    except Exception:
        return False
