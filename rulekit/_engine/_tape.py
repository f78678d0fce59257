"""The tape: a trace recorded as data, and the reverse pass over it.

Every traced value is a *slot* (an integer). A `Record` holds one rule call:
the function, its concrete signature, the rule object that ran, the slots it
read and wrote, and the pullback. Array cotangents live in the arrays' fdata
(shared through CoDuals, incremented in place by pullbacks); the tape keeps
only the rdata of immutable values (traced scalars), one accumulator a slot.

The reverse pass walks the records backwards, hands each pullback the rdata
of its output and adds the returned rdata to the input slots. Because every
pullback restores what its forward mutated, memory is back in the state just
after call *i* when pullback *i* runs, so rules may keep references to their
inputs instead of copying them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._tangents import NoFData, NoRData

__all__ = ["ConstantPool", "Record", "Site", "Tape"]

_NO_R = NoRData()
_NO_F = NoFData()


class Site:
    """What a call position remembers between evaluations: its dispatch key and rule."""

    __slots__ = ("fcd", "key", "rule", "sig")

    def __init__(self, key: Any, sig: Any, rule: Any) -> None:
        self.key = key
        self.sig = sig
        self.rule = rule
        self.fcd = CoDual(key[0], _NO_F)  # the function's CoDual, made once per site


class ListSlots:
    """Traced scalars inside a list argument: their cotangents come back in the list's fdata."""

    __slots__ = ("fdata", "items")

    def __init__(self, fdata: list[Any], items: list[tuple[int, int]]) -> None:
        self.fdata = fdata  # the list's full tangent, incremented by the pullback
        self.items = items  # (position in the list, slot of the traced scalar there)


class Record:
    """One recorded rule call (the trace as data)."""

    __slots__ = ("args", "f", "in_slots", "out_slot", "pullback", "reads", "site", "writes", "y")

    def __init__(
        self,
        f: Any,
        site: Site,
        pullback: Any,
        out_slot: Any,
        in_slots: Any,
        reads: list[int],
        writes: tuple[int, ...],
        args: list[CoDual],
        y: CoDual,
    ) -> None:
        self.f = f
        self.site = site
        self.pullback = pullback
        self.out_slot = out_slot  # None (no rdata), a slot int, or a tuple tree of them
        self.in_slots = in_slots  # None, or [(arg position, slot tree)] for scalar inputs
        self.reads = reads  # slots of traced inputs
        self.writes = writes  # slots of traced outputs
        self.args = args  # the rule's argument CoDuals
        self.y = y  # the rule's output CoDual

    def needed(self, live: set[int]) -> bool:
        """Whether the reverse pass must run this pullback, given the `live` slots.

        A call none of whose outputs can receive a cotangent (nothing live reads
        them) is skipped: unused intermediates and `has_aux` values cost nothing
        and, as in JAX and PyTorch, cannot turn a gradient into NaN (0·∞ in a
        pullback whose cotangent is zero). A call that mutates or aliases memory
        always runs: its pullback restores what it overwrote, and a view's
        fdata is another value's.
        """
        for w in self.writes:
            if w in live:
                return True
        return _mutates_or_aliases(self)

    def __repr__(self) -> str:
        sig = self.site.sig
        return f"Record({sig!r}, reads={self.reads}, writes={self.writes})"


def _arrays(x: Any, into: list[np.ndarray]) -> list[np.ndarray]:
    if isinstance(x, np.ndarray):
        into.append(x)
    elif isinstance(x, (tuple, list)):
        for e in x:
            _arrays(e, into)
    return into


def _mutates_or_aliases(rec: Record) -> bool:
    """Whether a call wrote into an argument or returned memory an argument holds."""
    if set(rec.writes) & set(rec.reads):  # out= (and in-place operators)
        return True
    outs = _arrays(rec.y.x, [])
    if rec.y.x is None:
        return True  # (setitem, copyto, add.at, put, ...: mutations return None)
    ins = _arrays([a.x for a in rec.args], [])
    return any(np.may_share_memory(o, i) for o in outs for i in ins)


class ConstantPool:
    """Reused snapshot buffers for the constant arrays of one trace (see `Tape.freeze`).

    One pool serves one tape at a time: a tracer hands its free pool to each new
    tape and takes it back when the tape is done, so a trace started while
    another of the same tracer is still waiting for its reverse pass (a derived
    rule called twice before its pullbacks) gets a pool of its own.
    """

    __slots__ = ("buffers", "keys")

    def __init__(self) -> None:
        self.buffers: list[np.ndarray] = []  # the k-th constant of a trace is copied into [k]
        self.keys: list[tuple[Any, ...]] = []  # (shape, dtype, strides) each buffer was made for


def _immutable(a: np.ndarray) -> bool:
    """Whether no write can reach `a`'s memory: it and every array it views are read-only.

    (A read-only view of a writeable array, e.g. `np.broadcast_to(c, s)`, is not:
    writes to `c` change it. A user who marks a large constant read-only,
    `X.flags.writeable = False`, saves the copy.)
    """
    b: Any = a
    while isinstance(b, np.ndarray):
        if b.flags.writeable:
            return False
        b = b.base
    return b is None or isinstance(b, bytes)


class Tape:
    """A trace being recorded: records, slot rdata, and the call sites' rules.

    Traced values record their operations with `tape.call(f, args, kwargs)`; the
    tapes the engine makes are `CallTape`s (`rulekit._engine._call`), whose `call`
    is the engine's `traced_call`. This class is the data and the reverse pass.
    """

    __slots__ = (
        "consts",
        "live",
        "nconst",
        "pos",
        "program",
        "rdata",
        "records",
        "release_to",
        "sites",
        "tracking",
    )

    def __init__(self, sites: list[Site], free_pools: list[ConstantPool] | None = None) -> None:
        self.records: list[Record] = []
        self.rdata: list[Any] = []
        self.sites = sites
        self.pos = 0
        self.release_to = free_pools
        self.consts = free_pools.pop() if free_pools else ConstantPool()
        self.nconst = 0
        self.live: set[int] | None = None  # the output's slots, once seeded (see `reverse`)
        # Compiled replay (rulekit._engine._compiled): with `tracking`, values computed from
        # traced ones without a derivative stay traced (`Tracked`), so a replay recomputes
        # them; `program` is the Program being recorded (None: not recording).
        self.tracking = False
        self.program: Any = None

    def new_slot(self, rdata0: Any = None) -> int:
        """A new slot (a traced value's number on this tape), with initial rdata `rdata0`."""
        self.rdata.append(rdata0)
        return len(self.rdata) - 1

    def call(
        self,
        f: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        fallback: Callable[[], Any] | None = None,
    ) -> Any:
        """Record the call `f(*args, **kwargs)` and return its traced result (`CallTape`)."""
        raise NotImplementedError("a Tape records calls only as a CallTape")

    def primal(self, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run `f`, which has no derivative, on the primal values of `args` (`CallTape`)."""
        raise NotImplementedError("a Tape records calls only as a CallTape")

    # -- constants are snapshotted while traced -----------------------------

    def freeze(self, a: np.ndarray) -> np.ndarray:
        """The value of constant array `a` now, in memory no later write can reach.

        A rule may keep a reference to a constant input for its pullback. User
        code may then overwrite that memory untraced (`c[:] = t + 1` on a
        scratch view refilled in a loop, or through any other view of it), and
        the pullback would silently read the new values. Read-only flags cannot
        prevent that (views made earlier stay writeable), so a writeable
        constant is copied into a pooled buffer, reused on later calls: no
        allocation once warm. Constants whose memory is immutable are passed
        as they are.
        """
        if not a.flags.writeable and _immutable(a):
            return a
        k = self.nconst
        self.nconst = k + 1
        pool = self.consts
        key = (a.shape, a.dtype, a.strides)
        if k < len(pool.buffers) and pool.keys[k] == key:
            buf = pool.buffers[k]
        else:
            buf = np.empty_like(a, order="K")  # (same axis order as `a`: C stays C, F stays F)
            if k < len(pool.buffers):
                pool.buffers[k], pool.keys[k] = buf, key
            else:
                pool.buffers.append(buf)
                pool.keys.append(key)
        np.copyto(buf, a, casting="no")
        return buf

    def release(self) -> None:
        """The tape is done (reversed or unwound): its constant pool serves the next one."""
        if self.release_to is not None:  # (once: a second release is a no-op)
            self.release_to.append(self.consts)
            self.release_to = None

    # -- the reverse pass ----------------------------------------------------

    def _gather(self, tree: Any) -> Any:
        if tree is None:
            return _NO_R
        if type(tree) is int:
            return self.rdata[tree]
        return tuple(self._gather(t) for t in tree)

    def _scatter(self, tree: Any, r: Any) -> None:
        if tree is None or isinstance(r, NoRData):
            return
        if type(tree) is int:
            cur = self.rdata[tree]
            self.rdata[tree] = r if cur is None else cur + r
            return
        for t, e in zip(tree, r, strict=True):
            self._scatter(t, e)

    def reverse(self, live: set[int] | None = None) -> None:
        """Run the pullbacks, last call first: all of them, or (given the slots `live` at
        the end, e.g. the output's) those a cotangent can reach (`Record.needed`)."""
        records = self.records
        gather, scatter = self._gather, self._scatter
        while records:
            rec = records.pop()
            if live is not None:
                if not rec.needed(live):
                    continue
                live.update(rec.reads)
            os = rec.out_slot
            r = rec.pullback(_NO_R if os is None else gather(os))
            ins = rec.in_slots
            if ins is not None:
                for i, tree in ins:
                    if type(tree) is ListSlots:
                        for k, slot in tree.items:
                            scatter(slot, tree.fdata[k])
                    else:
                        scatter(tree, r[i])

    def unwind(self) -> None:
        """After an error in the forward pass: run the pullbacks to restore mutated primals.

        Cotangents computed on the way are discarded; errors raised by the
        pullbacks are suppressed (the original error is what the user sees).
        """
        records = self.records
        while records:
            rec = records.pop()
            # The forward already failed: restore what we can, report the original error.
            with contextlib.suppress(Exception):
                rec.pullback(_NO_R if rec.out_slot is None else self._gather(rec.out_slot))
        self.release()
