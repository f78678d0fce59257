"""One traced call: arguments → CoDuals, dispatch (with per-site rule reuse), outputs → traced.

`traced_call(tape, f, args, kwargs)` is what every NumPy protocol hook and every
`rulekit.primitive` wrapper ends in (as `tape.call(f, args, kwargs)`: the
engine's tapes are `CallTape`s). It

1. turns traced arguments into their CoDuals and plain ones into inactive
   CoDuals (`dx is None`), also inside lists and tuples (`np.stack([a, b])`);
2. finds the rule: the call site's cached rule when its dispatch key matches,
   else the registry's (a fresh stateful rule from a factory);
3. calls the rule, records it on the tape, and wraps the outputs.

Any rule gets an `out=` form for free: a call with an `out=` array and no rule
registered for `out=` is computed by the rule without `out=`, then recorded as
`np.copyto(out, y)`, a mutation whose rule (with the bundled rules) restores
`out` and pulls its cotangent back to `y`. A rule may register a faster `out=`
form of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._engine._state import foreign_trace_error, trace_state
from rulekit._engine._tape import ListSlots, Record, Site, Tape
from rulekit._engine._traced import Traced, TracedArray, TracedScalar
from rulekit._engine._tracked import primal_call, track
from rulekit._errors import (
    MissingRuleError,
    TracingError,
    subclass_error,
    untraced_write_error,
)
from rulekit._functions import function_name
from rulekit._registry import registry
from rulekit._signature import fast_key
from rulekit._tangents import NoFData, zero_fdata, zero_tangent

__all__ = ["CallTape", "constant", "traced_call", "wrap_output"]

_NO_F = NoFData()
_SCALARS = (float, complex, np.floating, np.complexfloating)


def _contains_traced(seq: Any) -> bool:
    for e in seq:
        t = type(e)
        if (
            t is TracedArray
            or t is TracedScalar
            or ((t is list or t is tuple) and _contains_traced(e))
        ):
            return True
    return False


def _arg(a: Any, tape: Tape, reads: list[int]) -> tuple[CoDual, Any]:
    """CoDual for one argument, and the slot tree of its traced scalars (None if none)."""
    t = type(a)
    if t is TracedArray or t is TracedScalar:
        if a.tape is not tape:
            raise foreign_trace_error(a.tape)
        reads.append(a.slot)
        return a.cd, (a.slot if a.scalar else None)
    if (t is list or t is tuple) and a and _contains_traced(a):
        parts = [_arg(e, tape, reads) for e in a]
        xs = [p[0].x for p in parts]
        trees = [p[1] for p in parts]
        if t is tuple:  # fdata: a tuple of element fdata; traced scalars return rdata
            dxs = [p[0].dx if p[0].dx is not None else zero_fdata(p[0].x) for p in parts]
            tree = None if all(tr is None for tr in trees) else tuple(trees)
            fd = _NO_F if all(isinstance(d, NoFData) for d in dxs) else tuple(dxs)
            return CoDual(tuple(xs), fd), tree
        return _list_arg(xs, parts, trees)
    return CoDual(constant(a, tape), None), None


_NESTED = (np.ndarray, tuple, list)


def constant(a: Any, tape: Tape) -> Any:
    """A constant argument as a rule receives it: arrays snapshotted (`Tape.freeze`),
    also inside tuples and lists (index tuples); ndarray subclasses refused."""
    t = type(a)
    if t is np.ndarray:
        return tape.freeze(a)
    if isinstance(a, np.ndarray):
        raise subclass_error(a, "a constant operand")
    if (t is tuple or t is list) and any(
        isinstance(e, _NESTED) or (isinstance(e, Traced) and e.tracked) for e in a
    ):
        return t(constant(e, tape) for e in a)
    if isinstance(a, Traced) and a.tracked and a.tape is tape:  # (compiled: no derivative)
        v = a.cd.x
        return tape.freeze(v) if type(v) is np.ndarray else v
    if isinstance(a, Traced):  # (a traced value nested deeper than _arg looks)
        raise (
            foreign_trace_error(a.tape)
            if a.tape is not tape
            else TracingError(
                "a traced value nested inside a container of containers was passed to a "
                "numpy function. Pass it directly, or in a flat list or tuple."
            )
        )
    return a


def _list_arg(xs: list[Any], parts: list[Any], trees: list[Any]) -> tuple[CoDual, Any]:
    """A list's fdata holds full element tangents (docs/concepts.md): a traced scalar's is a zero
    of its type, which the pullback increments and the tape reads back into its slot."""
    full: list[Any] = []
    items = []
    for k, ((cd, _), tree) in enumerate(zip(parts, trees, strict=True)):
        if tree is not None and type(tree) is not int:
            raise TracingError(
                "traced scalars inside a tuple inside a list are not supported as an "
                "argument; pass a flat list or tuple."
            )
        if isinstance(cd.dx, (np.ndarray, tuple, list)):  # (nested lists keep their fdata)
            full.append(cd.dx)
        else:
            full.append(zero_tangent(cd.x))
        if tree is not None:
            items.append((k, tree))
    return CoDual(xs, full), (ListSlots(full, items) if items else None)


def _out_error(f: Any) -> TracingError:
    return untraced_write_error(f"{function_name(f)}(..., out=...)")


def _kwargs(
    f: Any, kwargs: dict[str, Any], tape: Tape, reads: list[int]
) -> tuple[dict[str, Any], Any]:
    """Keyword arguments for the rule (traced arrays as CoDuals) and the traced out= array."""
    ckw: dict[str, Any] = {}
    out_t = None
    for k, v in kwargs.items():
        tv = type(v)
        if k == "out":
            if tv is tuple:
                if len(v) != 1:
                    if any(o is not None for o in v):
                        raise TracingError(
                            f"{function_name(f)}: several out= arrays are not supported "
                            "while tracing"
                        )
                    continue
                o = v[0]
            else:
                o = v
            if o is None:
                continue
            if not isinstance(o, Traced):
                raise _out_error(f)
            if o.tape is not tape:
                raise foreign_trace_error(o.tape)
            out_t = o
            if not o.tracked:
                reads.append(o.slot)
            ckw[k] = (o.cd,) if tv is tuple else o.cd
        elif tv is TracedArray or tv is TracedScalar:
            if v.tape is not tape:
                raise foreign_trace_error(v.tape)
            if v.scalar:
                raise TracingError(
                    f"a traced scalar was passed as keyword argument {k}= to "
                    f"{function_name(f)}; keyword arguments return no cotangent. "
                    "Pass it positionally."
                )
            reads.append(v.slot)
            ckw[k] = v.cd
        else:
            ckw[k] = constant(v, tape)
    return ckw, out_t


def traced_call(
    tape: Tape,
    f: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    fallback: Callable[[], Any] | None = None,
) -> Any:
    """Record the call `f(*args, **kwargs)` on `tape` and return its traced result.

    `fallback`, if given, is called instead when no rule matches (numpy functions
    written in Python are traced through their implementation).
    """
    tapes = trace_state.tapes
    if not tapes or tapes[-1] is not tape:
        raise foreign_trace_error(tape)
    reads: list[int] = []
    cds: list[CoDual] = []
    primals: list[Any] = []
    in_slots: list[tuple[int, Any]] | None = None
    for i, a in enumerate(args, 1):  # (the hot path: `_arg` inlined for the common types)
        t = type(a)
        if (t is TracedArray or t is TracedScalar) and a.tape is tape:
            reads.append(a.slot)
            cd = a.cd
            if a.scalar:
                if in_slots is None:
                    in_slots = []
                in_slots.append((i, a.slot))
        elif t is np.ndarray:
            cd = CoDual(tape.freeze(a), None)
        elif t is float or t is int:
            cd = CoDual(a, None)
        else:
            cd, tree = _arg(a, tape, reads)
            if tree is not None:
                if in_slots is None:
                    in_slots = []
                in_slots.append((i, tree))
        cds.append(cd)
        primals.append(cd.x)
    out_t = None
    kw0 = kwargs
    if kwargs:
        kwargs, out_t = _kwargs(f, kwargs, tape, reads)
    if tape.tracking:  # (compiled tracing: values without derivative are tracked)
        if not reads:  # no argument is active: the call has no derivative
            return primal_call(tape, f, args, kw0)
        if out_t is not None and out_t.tracked:
            raise _out_error(f)

    out_x = None if out_t is None else out_t.cd.x
    try:
        key = fast_key(f, primals, out_x)
        pos = tape.pos
        tape.pos = pos + 1
        sites = tape.sites
        if pos < len(sites) and sites[pos].key == key:  # (the hot path: `_site` inlined)
            site = sites[pos]
        else:
            site = _new_site(sites, pos, key, f, primals, out_x)
    except MissingRuleError as missing:
        if fallback is None:
            raise
        tape.pos -= 1
        try:
            return fallback()
        except TracingError as leak:
            raise MissingRuleError(
                f"{missing}\n{function_name(f)} has no rule, and tracing through its Python "
                f"implementation failed: {leak}"
            ) from leak
    if site.rule is None:  # an out= call without an out= rule: the generic mechanism
        plain_kw = {k: v for k, v in kwargs.items() if k != "out"}
        for k, v in plain_kw.items():
            if isinstance(v, CoDual):
                raise TracingError(
                    f"{function_name(f)}: traced keyword argument {k}= together with an "
                    "out= array that has no out= rule is not supported; drop out=."
                )
        traced_call(tape, np.copyto, (out_t, traced_call(tape, f, args, plain_kw)), {})
        return out_t
    y, pullback = site.rule(site.fcd, *cds, **kwargs)
    if kwargs:  # (traced keyword arguments, e.g. BLAS's c=, take part in aliasing checks)
        cds = cds + [v for v in kwargs.values() if isinstance(v, CoDual)]
    x = y.x
    result: Any
    if out_t is not None and x is out_t.cd.x:
        rec = Record(f, site, pullback, None, in_slots, reads, (out_t.slot,), cds, y)
        result = out_t
    else:
        out_slot: Any
        writes: tuple[int, ...]
        if type(x) is np.ndarray and type(y.dx) is np.ndarray:  # a traced array: the common case
            slot = len(tape.rdata)
            tape.rdata.append(None)
            result = TracedArray(y, tape, slot, False)
            out_slot, writes = None, (slot,)
        else:
            result, out_slot, writes = wrap_output(tape, y)
        rec = Record(f, site, pullback, out_slot, in_slots, reads, writes, cds, y)
    tape.records.append(rec)
    if tape.program is not None:  # (compiled tracing: the call, as a step to replay)
        tape.program.call(pos, traced_call, f, args, kw0, result, rec)
    return result


def _new_site(sites: list[Site], pos: int, key: Any, f: Any, primals: list[Any], out: Any) -> Site:
    """Call position `pos` saw another dispatch key last time (or none): look up its rule.

    (A site whose key matches the last evaluation's is reused by `traced_call` directly.)
    """
    try:
        sig, reg = registry.lookup_call(f, primals, out)
        rule = reg.impl(sig) if reg.kind == "factory" else reg.impl
    except MissingRuleError:
        if out is None:
            raise
        sig, rule = None, None  # no out= rule: remembered, so the generic path is taken
    site = Site(key, sig, rule)
    if pos < len(sites):
        sites[pos] = site
    else:
        sites.append(site)
    return site


def wrap_output(tape: Tape, y: CoDual) -> tuple[Any, Any, tuple[int, ...]]:
    """Turn a rule's output CoDual into the value user code sees.

    Differentiable arrays and scalars become traced values with a slot; non-
    differentiable or inactive outputs are returned as plain values; tuples
    and lists are wrapped element by element.
    Returns `(value, out_slot tree for rdata, slots written)`.
    """
    x, dx = y.x, y.dx
    tx = type(x)
    if tx is not np.ndarray and isinstance(x, np.ndarray):
        raise subclass_error(x, "the output of a rule")
    if tape.tracking and (dx is None or (tx is np.ndarray and type(dx) is not np.ndarray)):
        return track(tape, x, {}), None, ()  # (compiled tracing: recomputed by a replay)
    if tx is np.ndarray:
        if dx is None or type(dx) is not np.ndarray:
            return x, None, ()
        t = TracedArray(y, tape, tape.new_slot(), False)
        return t, None, (t.slot,)
    if isinstance(x, _SCALARS):
        if dx is None:
            return x, None, ()
        slot = tape.new_slot(type(x)(0))
        return TracedScalar(y, tape, slot, True), slot, (slot,)
    if isinstance(x, (tuple, list)) and dx is not None:
        n = len(x)
        dxs = (_NO_F,) * n if isinstance(dx, NoFData) else dx
        parts = [wrap_output(tape, CoDual(e, d)) for e, d in zip(x, dxs, strict=True)]
        values = [p[0] for p in parts]
        trees = [p[1] for p in parts]
        writes = tuple(s for p in parts for s in p[2])
        tree = None if all(tr is None for tr in trees) else tuple(trees)
        if isinstance(x, tuple):
            value: Any = type(x)(*values) if hasattr(x, "_fields") else tuple(values)
        else:
            value = values
        return value, tree, writes
    return x, None, ()


class CallTape(Tape):
    """The tape the engine records on: its `call` is `traced_call`."""

    __slots__ = ()

    call = traced_call
    primal = primal_call
