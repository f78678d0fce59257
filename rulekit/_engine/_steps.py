"""The steps of a recorded program: what one replayed call or guard does.

`Step` is any recorded call (replayed through the engine's `traced_call` or
`primal_call` with its argument template filled in), `Guard` a value plain code
read from the data, `DirectStep` a step that runs itself: `RuleStep`, one rule
call with the recording's bookkeeping, or what a program pass made of several
(`rules.numpy.ufuncs.fusion`). `GuardFailed` is what a replay raises when a
check does not hold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._engine._tape import Record, Tape
from rulekit._engine._templates import Constant, template
from rulekit._engine._traced import Traced
from rulekit._engine._tracked import WRITERS
from rulekit._functions import function_name

__all__ = ["DirectStep", "Guard", "GuardFailed", "RuleStep", "Step", "changed_constant", "writes"]


class GuardFailed(Exception):
    """A replay met a guard that does not hold: the program does not apply to these values."""


class Step:
    """One recorded call: `invoke(tape, f, *template filled in)` at call position `pos`."""

    __slots__ = ("args", "consts", "f", "flat", "invoke", "kwargs", "pos", "sig", "single")

    def __init__(
        self,
        pos: int | None,
        invoke: Callable[..., Any],
        f: Any,
        args: Any,
        kwargs: Any,
        watched: set[int],
    ) -> None:
        self.pos = pos
        self.invoke = invoke
        self.f = f
        self.consts: list[Constant] = []
        self.args = template(args, self.consts, watched)
        self.kwargs = template(kwargs, self.consts, watched)
        # (the common case, filled in without recursion: positional slots and plain values)
        self.flat = type(self.args) is tuple and not any(
            isinstance(a, (tuple, list, dict)) for a in self.args
        )
        self.sig: Any = None
        self.single: Any = None  # (slot, shape) when the result is one traced value

    def __repr__(self) -> str:
        return f"Step({function_name(self.f)} at {self.pos})"


class Guard:
    """A value plain code read from traced slot `k`: `conv(primal)` must equal `value`."""

    __slots__ = ("conv", "k", "value", "where")

    def __init__(self, k: int, conv: Callable[[Any], Any], value: Any, where: str) -> None:
        self.k = k
        self.conv = conv
        self.value = value
        self.where = where

    def describe(self) -> str:
        what = getattr(self.conv, "__name__", "a conversion")
        return f"{what}() of a traced value at {self.where}"


class DirectStep:
    """A step that runs itself: `run(tape, table, freeze, tracked)` calls its rule(s) on the
    slot table's CoDuals, appends the records to the tape and stores its outputs in the
    table; False (or GuardFailed) when its result does not have the recorded shape.
    `freeze` and `tracked` snapshot constant arrays and tracked values a rule reads
    (`Tape.freeze`), or are None where nothing can overwrite them before the pullbacks.

    `RuleStep` is one rule call; program passes (`PASSES`) may replace runs of them by
    other direct steps, e.g. one fused kernel for a chain of elementwise calls.
    """

    __slots__ = ()
    f: Any

    def run(self, tape: Tape, table: dict[int, CoDual], freeze: Any, tracked: Any) -> bool:
        raise NotImplementedError

    def read_slots(self) -> list[int]:
        """The slots this step reads."""
        raise NotImplementedError


class RuleStep(DirectStep):
    """A rule call replayed without the engine's argument handling (the common case).

    Its arguments are traced values, constant arrays and plain values, its keywords
    plain values or `out=` a traced array, and its result one traced value (or the
    `out=` array). The record's bookkeeping (slots read and written, scalar inputs) is
    the recording's; only the CoDuals, the pullback and the output are new.
    """

    __slots__ = ("f", "in_slots", "k", "kwspec", "meta", "out_slot", "reads", "shape", "site",
                 "spec", "writes")  # fmt: skip

    def __init__(
        self, rec: Record, spec: list[tuple[Any, Any]], kwspec: dict[str, Any], k: int | None
    ) -> None:
        self.f, self.site, self.spec, self.kwspec, self.k = rec.f, rec.site, spec, kwspec, k
        self.out_slot, self.in_slots = rec.out_slot, rec.in_slots
        self.reads, self.writes = rec.reads, rec.writes
        self.shape = np.shape(rec.y.x)
        # (what program passes may rely on: each operand's and the output's array type)
        self.meta = [_meta(cd) for cd in (*rec.args[: len(spec)], rec.y)]

    @staticmethod
    def make(
        rec: Record, args: Any, kwargs: Any, result: Any, watched: set[int]
    ) -> RuleStep | None:
        """The lean form of the call `rec`, or None if it does not have the common form."""
        if type(args) is not tuple:
            return None
        spec: list[tuple[Any, Any]] = []
        for a in args:
            if isinstance(a, Traced):
                spec.append((_TRACKED if a.tracked else _ACTIVE, a.slot))
            elif type(a) is np.ndarray:
                spec.append((_ARRAY, Constant(a, id(a) in watched)))
            elif isinstance(a, (tuple, list, dict, np.ndarray)):
                return None
            else:
                spec.append((_PLAIN, CoDual(a, None)))
        kwspec = {}
        for name, v in kwargs.items():
            if name == "out":
                o = v[0] if type(v) is tuple and len(v) == 1 else v
                if not isinstance(o, Traced) or o.tracked:
                    return None
                kwspec[name] = (_OUT_TUPLE if type(v) is tuple else _ACTIVE, o.slot)
            elif isinstance(v, (Traced, np.ndarray, tuple, list, dict)):
                return None
            else:
                kwspec[name] = (_VALUE, v)
        k: int | None
        if rec.y.x is None or (isinstance(result, Traced) and result.slot in rec.reads):
            k = None  # (a mutation, or the out= array returned)
        elif isinstance(result, Traced) and not result.tracked:
            k = result.slot
        else:
            return None
        return RuleStep(rec, spec, kwspec, k)

    def operands(self) -> list[tuple[str, Any]]:
        """Its positional arguments: ("active", slot), ("tracked", slot), ("array", a
        constant array) or ("value", a plain value); keywords: `self.kwspec`."""
        names = {_ACTIVE: "active", _TRACKED: "tracked", _ARRAY: "array", _PLAIN: "value"}
        return [
            (names[kind], v.a if kind is _ARRAY else v.x if kind is _PLAIN else v)
            for kind, v in self.spec
        ]

    def read_slots(self) -> list[int]:
        slots = [v for kind, v in self.spec if kind is _ACTIVE or kind is _TRACKED]
        return slots + [v for kind, v in self.kwspec.values() if kind is not _VALUE]

    def run(self, tape: Tape, table: dict[int, CoDual], freeze: Any, tracked: Any) -> bool:
        """Call the rule on this replay's values; False if the result's shape differs."""
        cds = []
        for kind, v in self.spec:
            if kind is _ACTIVE:
                cds.append(table[v])
            elif kind is _PLAIN:
                cds.append(v)
            elif kind is _ARRAY:
                if not v.holds():
                    raise GuardFailed(changed_constant(self.f))
                a = v.a
                cds.append(CoDual(a if freeze is None else freeze(a), None))
            else:  # (tracked: a snapshot if a later call may write into it)
                x = table[v].x
                frozen = tracked is not None and type(x) is np.ndarray
                cds.append(CoDual(tracked(x) if frozen else x, None))
        kw: dict[str, Any] = {}
        for name, (kind, v) in self.kwspec.items():
            if kind is _VALUE:
                kw[name] = v
            elif kind is _OUT_TUPLE:
                kw[name] = (table[v],)
            else:
                kw[name] = table[v]
        site = self.site
        y, pullback = site.rule(site.fcd, *cds, **kw)
        if kw:
            cds = cds + [v for v in kw.values() if isinstance(v, CoDual)]
            cds += [v[0] for v in kw.values() if type(v) is tuple]
        tape.records.append(
            Record(self.f, site, pullback, self.out_slot, self.in_slots, self.reads,
                   self.writes, cds, y)
        )  # fmt: skip
        k = self.k
        if k is not None:
            if len(tape.rdata) != k:
                return False
            tape.rdata.append(None if self.out_slot is None else type(y.x)(0))
            table[k] = y
        return np.shape(y.x) == self.shape


def writes(step: Any) -> bool:
    """Whether a recorded step writes into memory (an argument, `out=`)."""
    if isinstance(step, RuleStep):
        return step.k is None
    if isinstance(step, Step):
        return (
            (isinstance(step.kwargs, dict) and "out" in step.kwargs)
            or step.f in WRITERS
            or getattr(step.f, "__name__", None) == "at"
        )
    return False


def _meta(cd: CoDual) -> tuple[Any, ...] | None:
    """(shape, dtype, whether the primal is C-contiguous, whether the fdata is a C-contiguous
    array) of a CoDual whose primal is an array; None otherwise."""
    x, dx = cd.x, cd.dx
    if not isinstance(x, np.ndarray):
        return None
    fdata = isinstance(dx, np.ndarray) and dx.flags.c_contiguous
    return (x.shape, x.dtype, x.flags.c_contiguous, fdata)


def changed_constant(f: Any) -> str:
    return f"a constant array read by {function_name(f)} (its shape, layout or contents)"


_ACTIVE, _TRACKED, _ARRAY, _PLAIN, _VALUE, _OUT_TUPLE = (object() for _ in range(6))
