"""Checks 1–4 of `check_rule` on one activity combination: one forward pass and its pullback.

`check_combination` runs the rule on fresh clones of the call's arguments, some
active (fdata pre-seeded with random values) and some constant (`dx is None`),
and checks the interface, mutation, aliasing and — through `_dottest` — the
cotangents against finite differences.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rulekit import CoDual, NoFData, NoRData, NoTangent, TracingError, increment, zero_rdata
from testutils._call import Run, get_leaf
from testutils._reference import Reference, output_aliases
from testutils._trees import clone, leaves, same_value, tree_close

if TYPE_CHECKING:
    from testutils._check import _Checker

__all__ = ["check_combination"]


def check_combination(
    ck: _Checker, ref: Reference, rule: Any, active: frozenset[int]
) -> Run | None:
    """Checks 1–4 on one activity combination; None if the rule refused it (TracingError)."""
    saved = ck.context
    try:
        return _check_combination(ck, ref, rule, active)
    finally:
        ck.context = saved


def _check_combination(
    ck: _Checker, ref: Reference, rule: Any, active: frozenset[int]
) -> Run | None:
    from testutils._check import OUTPUT_RTOL
    from testutils._dottest import dot_tests

    call = ck.call
    saved = ck.context
    ck.context = saved + ck.describe(active)
    if ck.may_refuse(ref, active):
        ck.context += (
            " (here an active value is written into a constant that the primal mutates: the "
            "engine never calls a rule so, and a rule may refuse it by raising "
            "rulekit.TracingError)"
        )
    run = Run(call, rule, active, ref.seeds)
    try:
        out = run.forward()
    except TracingError as e:
        if ck.may_refuse(ref, active):
            for i, v in enumerate(run.values):
                if not same_value(v, call.values[i]):
                    ck.fail("mutation", "the rule refused this activity combination with "
                            "TracingError but had already mutated this argument", i)  # fmt: skip
            return None  # refused, as the engine refuses it: correct
        ck.fail("interface", f"the forward pass raised TracingError: {e}")
    except Exception as e:
        ck.fail("interface", f"the forward pass raised {type(e).__name__}: {e}")
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], CoDual)):
        ck.fail("interface", f"the rule must return (CoDual, pullback), got {out!r:.200}")
    y, pb = out
    if not callable(pb):
        ck.fail("interface", f"the pullback is not callable: {pb!r:.200}")
    why = tree_close(y.x, ref.y, OUTPUT_RTOL[ref.precision], floor=ref.rounding, who=ck.who,
                     scalar_as_0d=True)  # fmt: skip
    if why:
        ck.fail("interface", why)
    run.y = clone(y.x)
    _check_mutated_forward(ck, ref, run)
    for i in active:
        if not same_value(run.fdata[i], ref.seeds[i]):
            ck.fail(
                "interface",
                "the forward pass wrote into this argument's fdata; it must never read "
                "or write fdata (only pullbacks do)",
                i,
            )
    _check_aliasing(ck, ref, run, y)
    _check_output_fdata(ck, ref, run, y)
    rdata = run.rdata = _pullback(ck, ref, y, pb)
    sums = _check_rdata(ck, run, rdata)
    for i in range(len(call.values)):
        if not same_value(run.values[i], call.values[i]):
            ck.fail(
                "mutation",
                "after the pullback this argument is not restored to its value before "
                "the call (a mutating rule must restore what it overwrote)",
                i,
            )
    dot_tests(ck, ref, run, sums)
    return run


def _check_mutated_forward(ck: _Checker, ref: Reference, run: Run) -> None:
    from testutils._check import OUTPUT_RTOL

    rtol = OUTPUT_RTOL[ref.precision]
    for i, v in enumerate(run.values):
        changed = not same_value(v, ck.call.values[i])
        if changed and i not in ref.mutated:
            ck.fail("mutation", f"the rule's forward pass mutated it; {ck.who} does not", i)
        if i in ref.mutated:  # (a write of the value already there changes nothing)
            why = tree_close(v, ref.post[i], rtol, "its value after the call", who=ck.who)
            if why:
                ck.fail("mutation", why, i)


def _check_aliasing(ck: _Checker, ref: Reference, run: Run, y: CoDual) -> None:
    got = output_aliases(y.x, run.values)
    for path in sorted(set(got) | set(ref.aliases), key=repr):
        g, w = got.get(path, frozenset()), ref.aliases.get(path, frozenset())
        if g != w:
            names = ck.call.names
            how = "a view" if g else "new memory (a copy)"
            want = "a view" if w else "new memory"
            ck.fail(
                "aliasing",
                f"output{_p(path)} is {how}, sharing memory with {_names(names, g)}; the output "
                f"of {ck.who} is {want}, sharing memory with {_names(names, w)} (a rule must "
                "return views exactly where the primal does, or writes through the output "
                "would reach the wrong memory)",
            )


def _check_output_fdata(ck: _Checker, ref: Reference, run: Run, y: CoDual) -> None:
    if y.dx is None:
        return  # an inactive output; the dot-product test catches a lost dependence
    for path, leaf in leaves(y.x):
        fd = get_leaf(y.dx, path)
        where = f"output{_p(path)}"
        if not (isinstance(leaf, np.ndarray) and leaf.dtype.kind in "fc"):
            # Non-float leaves have empty fdata; in lists and dicts (whose fdata holds full
            # tangents) that is NoTangent(), or the scalar tangent of a float element.
            in_container = isinstance(y.x, (list, dict))
            ok = (
                fd is None
                or isinstance(fd, (NoFData, NoTangent))
                or (in_container and isinstance(fd, (float, complex, np.number)))
            )
            if not ok:
                ck.fail("interface", f"{where} is {type(leaf).__name__}, not a float array: "
                        f"its fdata must be NoFData(), got {_describe(fd)}")  # fmt: skip
            continue
        if fd is None:
            continue
        if not isinstance(fd, np.ndarray) or fd.shape != leaf.shape or fd.dtype != leaf.dtype:
            ck.fail(
                "interface",
                f"{where}'s fdata must be an array of shape {leaf.shape} and dtype "
                f"{leaf.dtype}, got {_describe(fd)}",
            )
        if path in ref.aliases and path not in ref.own_fdata:
            _check_view(ck, run, path, leaf, fd, ref.aliases[path])
            continue
        for i, d in enumerate(run.fdata):
            if any(np.shares_memory(fd, a) for _, a in leaves(d) if isinstance(a, np.ndarray)):
                ck.fail("aliasing", f"{where} is new memory but its fdata shares memory "
                        "with this argument's fdata", i)  # fmt: skip
        if np.any(fd != 0):
            ck.fail("interface", f"{where} is a new output: its fdata must start at zero")


def _check_view(ck: _Checker, run: Run, path: Any, leaf: np.ndarray, fd: np.ndarray,
                vs: Any) -> None:  # fmt: skip
    for v in vs:
        if v not in run.active:
            continue
        for p_in, x in leaves(run.values[v]):
            if not (isinstance(x, np.ndarray) and np.shares_memory(leaf, x)):
                continue
            fx = get_leaf(run.fdata[v], p_in)
            ok = isinstance(fx, np.ndarray) and np.shares_memory(fd, fx)
            if ok and fx.strides == x.strides:
                ok = fd.strides == leaf.strides and (
                    _addr(fd) - _addr(fx) == _addr(leaf) - _addr(x)
                )
            if not ok:
                ck.fail(
                    "aliasing",
                    f"output{_p(path)} is a view of this argument, so its fdata must be the "
                    "same view of the argument's fdata (else cotangents written through the "
                    "view are lost)",
                    v,
                )


def _pullback(ck: _Checker, ref: Reference, y: CoDual, pb: Any) -> Any:
    from testutils._check import seed_output

    dy = seed_output(y, ref)
    try:
        return pb(dy)
    except Exception as e:
        ck.fail("interface", f"the pullback raised {type(e).__name__}: {e}")


def _check_rdata(ck: _Checker, run: Run, rdata: Any) -> dict[int, Any]:
    n = ck.call.nargs + 1
    if not isinstance(rdata, tuple) or len(rdata) != n:
        got = len(rdata) if isinstance(rdata, tuple) else type(rdata).__name__
        ck.fail("interface", f"the pullback must return a tuple of {n} rdata (the function "
                f"first, then one per positional argument), got {got}")  # fmt: skip
    if not _rdata_ok(ck.f, rdata[0]):
        ck.fail("interface", f"rdata for the function must be NoRData(), got {rdata[0]!r}")
    sums: dict[int, Any] = {}
    for k, var in enumerate(ck.call.positional_vars()):
        r = rdata[k + 1]
        if var not in run.active:
            continue  # discarded, whatever it is
        if not _rdata_ok(ck.call.values[var], r):
            want = type(zero_rdata(ck.call.values[var])).__name__
            ck.fail("interface", f"rdata of positional argument {k} must be {want} "
                    f"(or NoRData() for zero), got {type(r).__name__}", var)  # fmt: skip
        sums[var] = increment(sums.get(var, NoRData()), r)
    return sums


def _rdata_ok(x: Any, r: Any) -> bool:
    if isinstance(r, NoRData):
        return True  # the zero of every rdata
    want = zero_rdata(x)
    if isinstance(want, NoRData):
        return False
    if isinstance(want, tuple):
        return (
            isinstance(r, tuple)
            and len(r) == len(want)
            and all(_rdata_ok(e, re) for e, re in zip(x, r, strict=True))
        )
    return type(r) is type(want)


def _p(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p!r}]" for p in path)


def _names(names: list[str], s: Any) -> str:
    return ", ".join(names[i] for i in sorted(s)) or "no argument"


def _describe(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return f"an array of shape {x.shape} and dtype {x.dtype}"
    return type(x).__name__


def _addr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])
