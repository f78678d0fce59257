"""A recorded trace as a program: the calls to replay and the guards that keep it valid.

While a compiled trace is recorded (`Tape.program` is set), every call that
reaches a rule (`traced_call`) or runs without derivative (`primal_call`) is
appended as a `Step`: the function, its call position (the rule it used) and
its arguments as a *template*, with each traced value replaced by its slot.
Every value the recording read from the data for plain Python code is appended
as a `Guard`: `bool()` of a traced value, `int()`/`float()`/`.item()`/
`__array__` of a tracked one (`rulekit._engine._tracked`).

`Program.replay` runs the steps on a fresh tape whose inputs are the new
arguments: each step's template is filled in with this replay's traced values,
and the call goes through the same `traced_call` as when tracing, so the same
rules (the program's call sites, stateful buffers included) run on the new
values and the tape is the one tracing would have made. It checks, in order:

- each guard: the value read, recomputed from this replay's values, is the
  value the recording read;
- each step's result signature: slots, shapes, dtypes (so a data-dependent
  shape, `x[mask]` or `np.nonzero(x)`, that changes is caught), and the Python
  values a call returned;
- each constant array a step reads: still the same shape, dtype and strides
  (its contents are read afresh, as when tracing).

The first check that fails raises `GuardFailed`; the caller unwinds the tape and
traces again.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._engine._steps import (
    DirectStep,
    Guard,
    GuardFailed,
    RuleStep,
    Step,
    changed_constant,
    writes,
)
from rulekit._engine._tape import Record, Site, Tape
from rulekit._engine._templates import (
    collect,
    fill,
    kinds,
    same,
    signature,
    slots_in,
    template,
)
from rulekit._engine._traced import Traced
from rulekit._errors import TracingError
from rulekit._functions import function_name

__all__ = ["PASSES", "Program"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY = os.path.dirname(os.path.abspath(np.__file__))


#: Rewrites of a recorded program, run once when its recording ends (`Program.finish`):
#: each may replace steps by equivalent `DirectStep`s. The bundled rules add one that fuses
#: chains of elementwise calls into one compiled kernel (`rules.numpy.ufuncs.fusion`).
PASSES: list[Callable[[Program], None]] = []


class Program:
    """A recorded trace of one function for one input signature, replayable."""

    def __init__(self, key: Any) -> None:
        self.key = key
        self.sites: list[Site] = []  # the rules at each call position (stateful buffers)
        self.steps: list[Step | Guard | DirectStep] = []
        self.output: Any = None
        self.inputs: list[np.ndarray] = []  # non-differentiated input arrays (never written)
        self.failed: str | None = None  # what made the last replay fail
        self.captures: Any = None  # what f read from outside its arguments (`Captures`)
        self.keep: list[Any] = []  # objects the entry key compares by identity, kept alive
        self.kinds: dict[int, type] = {}  # each slot's traced class
        self.watched: set[int] = set()  # ids of the captured arrays `captures` compares
        self.rdata0: list[Any] = []
        self.sharing: Any = None  # which input arrays shared memory (`_guards.sharing`)
        self.mutates = False  # whether a step writes into memory (then `sharing` is checked)
        self.freeze = True  # snapshot constant arrays (False: no user code runs before the
        # pullbacks, so nothing can overwrite them: value_and_grad's forward + reverse)

    # -- recording -------------------------------------------------------------

    def call(
        self,
        pos: int | None,
        invoke: Callable[..., Any],
        f: Any,
        args: Any,
        kwargs: Any,
        result: Any,
        rec: Record | None = None,
    ) -> None:
        """Record the call `invoke(tape, f, args, kwargs)` that returned `result` (and made
        the tape record `rec`, for a rule call)."""
        kinds(result, self.kinds)
        if rec is not None:
            lean = RuleStep.make(rec, args, kwargs, result, self.watched)
            if lean is not None:
                self.steps.append(lean)
                return
        step = Step(pos, invoke, f, args, kwargs, self.watched)
        step.sig = signature(result)
        if isinstance(result, Traced):
            step.single = (result.slot, np.shape(result.cd.x))
        self.steps.append(step)

    def start(self, inputs: Any) -> None:
        """The recording starts with the traced `inputs` (args and kwargs)."""
        kinds(inputs, self.kinds)

    def guard(self, t: Traced, conv: Callable[[Any], Any], value: Any) -> None:
        """Record that plain code read `conv(primal of t) == value`."""
        kept = value.copy() if isinstance(value, np.ndarray) else value
        self.steps.append(Guard(t.slot, conv, kept, _where()))

    def check_write(self, f: Any, dst: Any) -> None:
        """Refuse a write into a non-differentiated input: a replay that failed a guard
        after it, and the retrace, would apply it twice."""
        d = dst.cd.x if isinstance(dst, Traced) else dst
        if isinstance(d, np.ndarray) and any(np.may_share_memory(d, a) for a in self.inputs):
            raise TracingError(
                f"{function_name(f)} writes into a non-differentiated argument of a function "
                "compiled with compile=True. Fix: write into a copy (`X = X.copy()` first), "
                "or drop compile=True. (A compiled function must not change its arguments: "
                "a replay that has to retrace part-way would change them twice.)"
            )

    def finish(self, out: Any, tape: Tape) -> None:
        """The recording ended with `f` returning `out`: run the program passes."""
        self.output = template(out, [], set())
        self.rdata0 = list(tape.rdata)  # (each slot's initial rdata: the tape is not reversed)
        self.mutates = any(writes(step) for step in self.steps)
        for rewrite in PASSES:
            rewrite(self)

    def uses(self) -> dict[int, list[int]]:
        """For each slot, the indices of the steps that read it (`len(steps)`: the output)."""
        used: dict[int, list[int]] = {}
        for n, step in enumerate(self.steps):
            if isinstance(step, Guard):
                slots = [step.k]
            elif isinstance(step, DirectStep):
                slots = step.read_slots()
            else:
                slots = slots_in((step.args, step.kwargs))
            for k in slots:
                used.setdefault(k, []).append(n)
        for k in slots_in(self.output):
            used.setdefault(k, []).append(len(self.steps))
        return used

    # -- replaying ---------------------------------------------------------------

    def replay(self, tape: Tape, inputs: Any) -> Any:
        """Run the recorded calls on `tape`, whose traced `inputs` hold the new values.

        Returns what `f` would return (traced values of this tape). Raises `GuardFailed`
        when a guard does not hold; the tape then holds the calls made so far.
        """
        table: dict[int, CoDual] = {}
        collect(inputs, table)
        kinds = self.kinds
        freeze = tape.freeze if self.freeze else None
        # (tracked values: written only by this program's own steps, if it writes at all)
        tracked = tape.freeze if self.freeze or self.mutates else None
        for step in self.steps:
            if isinstance(step, DirectStep):
                if not step.run(tape, table, freeze, tracked):
                    self._fail(step)
                continue
            if isinstance(step, Guard):
                if not same(step.conv(table[step.k].x), step.value):
                    self.failed = step.describe()
                    raise GuardFailed(self.failed)
                continue
            for c in step.consts:
                if not c.holds():
                    self.failed = changed_constant(step.f)
                    raise GuardFailed(self.failed)
            if step.pos is not None:
                tape.pos = step.pos
            args = fill(step.args, table, tape, kinds)
            kwargs = fill(step.kwargs, table, tape, kinds) if step.kwargs else step.kwargs
            res = step.invoke(tape, step.f, args, kwargs)
            single = step.single
            if single is not None and isinstance(res, Traced):  # (the common case)
                if res.slot != single[0] or np.shape(res.cd.x) != single[1]:
                    self._fail(step)
                table[res.slot] = res.cd
                continue
            if not same(signature(res), step.sig):
                self._fail(step)
            collect(res, table)
        return fill(self.output, table, tape, kinds, copy=True)

    def _fail(self, step: Any) -> None:
        self.failed = f"the result of {function_name(step.f)} (its shape or value)"
        raise GuardFailed(self.failed)


def _where() -> str:
    """The user's file and line that made the trace read a value (for messages)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith((_PACKAGE, _NUMPY)):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "an unknown place"
