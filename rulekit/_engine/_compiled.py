"""Compiled replay: trace once, then replay the recorded calls while the guards hold.

`CompiledTracer` is the `Tracer` of `value_and_grad(f, compile=True)` and of
compiled derived rules. A call with a new entry key (`_guards.entry_key`: the
inputs' shapes, dtypes, layouts, aliasing, and the values of non-differentiated
scalars) traces `f` on a *tracking* tape, which records a `Program`: the rule
calls, the guards, the call sites' rules (their stateful buffers). A later call
with the same key replays the program (`Program.replay`) without running `f`,
after checking that nothing `f` captured has changed (`_guards.Captures`).

A guard that fails part-way raises `GuardFailed`: the tape is unwound (every
pullback restores what its forward overwrote) and the next program kept under
this key is tried, most recently used first; when none applies, `f` is traced
again and the new program is kept beside the old ones. At most `max_traces`
programs are kept (least recently used dropped, with their buffers). A function
traced again on `max_traces` calls in a row gets a `RetraceWarning` naming the
guard that failed: its compiled form is never reused, and the fix is usually to
pass the changing value as an argument or to drop `compile=True`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._engine._call import CallTape
from rulekit._engine._guards import Captures, entry_key, sharing
from rulekit._engine._program import GuardFailed, Program
from rulekit._engine._state import trace_state
from rulekit._engine._tape import Tape
from rulekit._engine._trace import Tracer
from rulekit._engine._traced import traced_in
from rulekit._engine._tracked import TrackedArray
from rulekit._errors import RetraceWarning
from rulekit._registry import registry

__all__ = ["CompiledTracer", "track_input"]

Prepare = Callable[[Tape], tuple[Any, ...]]  # tape → (traced args, traced kwargs, ...)


def track_input(x: Any, tape: Tape) -> Any:
    """A non-differentiated argument on a tracking tape: its arrays tracked (so that what
    `f` computes from them is recorded and recomputed), everything else as it is."""
    t = type(x)
    if t is np.ndarray:
        return TrackedArray(CoDual(x, None), tape, tape.new_slot(), False)
    if t is tuple or t is list:
        return t(track_input(e, tape) for e in x)
    if isinstance(x, tuple):
        return t(*(track_input(e, tape) for e in x))
    if t is dict:
        return {k: track_input(v, tape) for k, v in x.items()}
    return x


class CompiledTracer(Tracer):
    """A `Tracer` that records programs and replays them (see the module docstring)."""

    def __init__(self, f: Callable[..., Any], max_traces: int = 8) -> None:
        super().__init__(f)
        self.programs: list[Program] = []  # most recently used first
        self.max_traces = max_traces
        self.traced_in_a_row = 0
        self.warned = False
        self.traces = 0  # how many times f was traced (for tests and diagnostics)
        self.replays = 0  # how many calls were replayed
        self.in_place_constants = False

    track = staticmethod(track_input)  # (what `value_and_grad` and derived rules call)
    key = staticmethod(entry_key)

    def tape_for(self, program: Program) -> Tape:
        tape = CallTape(program.sites, self.free_pools)
        tape.tracking = True
        return tape

    def no_user_code_before_pullbacks(self) -> None:
        """Calls run their forward and reverse passes back to back (value_and_grad): no user
        code can overwrite a constant array in between, so replays read them in place."""
        self.in_place_constants = True

    def run(
        self, key: Any, arrays: list[np.ndarray], keep: list[Any], prepare: Prepare
    ) -> tuple[Any, Tape, tuple[Any, ...]]:
        """Evaluate `f` for a call with entry key `key`: replay a program or trace one.

        `prepare(tape)` wraps this call's inputs on a new tape and returns
        `(traced args, traced kwargs, *anything)`. Returns `(f's traced output, the tape,
        what prepare returned)`; the tape holds the calls, ready for the reverse pass.
        """
        registry.load_pending()
        reason = "its first call" if not self.programs else "a new input signature"
        shared = None
        for program in [p for p in self.programs if p.key == key]:
            if program.mutates:  # (a trace that writes: which inputs alias matters)
                if shared is None:
                    shared = sharing(arrays)
                if shared != program.sharing:
                    reason = "inputs that share memory differently"
                    continue
            changed = program.captures.changed()
            if changed is not None:
                self.programs.remove(program)  # (stale for good: its captures moved on)
                reason = changed
                continue
            tape = self.tape_for(program)
            prepared = prepare(tape)
            try:
                out = self._replay(program, tape, prepared)
            except GuardFailed:
                reason = program.failed or "a guard"
                continue
            self.programs.remove(program)
            self.programs.insert(0, program)
            self.traced_in_a_row = 0
            self.replays += 1
            return out, tape, prepared
        return self._trace(key, arrays, keep, prepare, reason)

    def _replay(self, program: Program, tape: Tape, prepared: tuple[Any, ...]) -> Any:
        state = trace_state
        state.active += 1
        state.tapes.append(tape)
        try:
            return program.replay(tape, prepared[:2])
        except BaseException:
            tape.unwind()
            self.reset_rules(program.sites)
            raise
        finally:
            state.tapes.pop()
            state.active -= 1

    def _trace(
        self, key: Any, arrays: list[np.ndarray], keep: list[Any], prepare: Prepare, reason: str
    ) -> tuple[Any, Tape, tuple[Any, ...]]:
        program = Program(key)
        program.sharing = sharing(arrays)
        program.freeze = not self.in_place_constants
        program.captures = Captures(self.f)  # (before f runs: what it reads is as now)
        program.watched = program.captures.arrays()
        program.keep = keep
        tape = self.tape_for(program)
        prepared = prepare(tape)
        targs, kwargs = prepared[0], prepared[1]
        program.inputs = [
            t.cd.x
            for t in traced_in((targs, kwargs))
            if t.tracked and isinstance(t.cd.x, np.ndarray)
        ]
        program.start((targs, kwargs))
        tape.program = program
        try:
            out = self.forward(list(targs), kwargs, tape)
        finally:
            tape.program = None
        program.finish(out, tape)
        self.programs.insert(0, program)
        del self.programs[self.max_traces :]
        self.traces += 1
        self.traced_in_a_row += 1
        if self.traced_in_a_row > self.max_traces and not self.warned:
            self.warned = True
            name = getattr(self.f, "__qualname__", repr(self.f))
            warnings.warn(
                RetraceWarning(
                    f"{name} (compile=True) was traced again on each of its last "
                    f"{self.traced_in_a_row} calls, so no recorded trace was reused; the last "
                    f"retrace was caused by {reason}. Fix: pass a value that changes from call "
                    "to call as an argument (differentiated, or a non-differentiated array), "
                    "not as a Python scalar, captured value or data-dependent branch; or drop "
                    "compile=True (the results are correct either way)."
                ),
                stacklevel=4,
            )
        return out, tape, prepared
