"""Checks 5 and 6 of `check_rule`: statefulness (reuse, reentrancy, layouts, shape), allocation.

Both run *one* rule object many times, as the engine does with the rule it
keeps at a call site. What the reused object gives is compared with what a
*fresh* object gives (`_Checker.make`), or checked against finite
differences: an object that kept something stale shows up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rulekit import Example, NoRData, StatefulRRule, increment, split_tangent
from testutils._alloc import counting
from testutils._call import Call, Run
from testutils._layouts import describe_layout
from testutils._reference import Reference
from testutils._trees import clone, leaves, match_tangent, same_value, shares, tree_close, tree_map

if TYPE_CHECKING:
    from testutils._check import _Checker

__all__ = ["AGREE", "check_allocation", "check_statefulness", "primal_allocations", "shrink"]

#: rtol for "two runs of the same rule on the same inputs agree" (BLAS may pick other
#: kernels for other buffer alignments, so not bitwise).
AGREE = {"double": 1e-10, "single": 1e-5, "half": 1e-2}


def check_statefulness(
    ck: _Checker,
    ref: Reference,
    first: Run,
    shape_change: Any,
    variants: list[tuple[_Checker, Reference, Run]],
) -> str:
    """One rule object over many calls: the same inputs again, other values of the same shape,
    interleaved calls, other layouts, another shape and back. Every call is compared with a
    *fresh* rule object's (or checked against finite differences). Returns a status."""
    from testutils._check import RuleCheckError, UncheckableInput, execute, seed_output
    from testutils._combination import check_combination

    call, active = ck.call, ck.all_active()
    rule = ck.make()  # the one object of every call below, as the engine keeps it
    tol = AGREE[ref.precision]

    def run(c: Call = call, r: Reference = ref, values: list[Any] | None = None) -> Run:
        try:
            return execute(c, r, rule, active, r.seeds, values)
        except Exception as e:
            ck.fail("statefulness", f"a repeated call raised {type(e).__name__}: {e}")
            raise  # unreachable

    def fresh(c: Call, r: Reference, values: list[Any] | None = None) -> Run:
        return execute(c, r, ck.make(), active, r.seeds, values)

    # `first` (and each variant's run) is a fresh rule object's call, from checks 1–4
    _agree(ck, run(), first, tol, "a call of a rule object on the inputs")
    _agree(ck, run(), first, tol, "a second call of the same rule object on the same inputs")
    notes = []
    b_values = _perturbed(call, ck.seed)
    if b_values is None:
        notes.append("other values n/a (no perturbed inputs the primal accepts)")
    else:
        # Call b: other values of the same shape, and other cotangents and seeds (a rule
        # that reads another call's cotangent must not pass by their being equal).
        args_b, kwargs_b = call.plain(clone(b_values))
        sub = ck.derive(tuple(args_b), kwargs_b, f"{ck.context} [a later call of one rule "
                        "object, on other values of the same shape]", ck.seed + 2)  # fmt: skip
        try:
            # At the steps where the first call's dot tests passed (cheaper than a sweep);
            # a failure there is confirmed over the whole sweep of steps.
            steps = {j: [h] for j, h in ref.passed_at.items()}
            bref = sub.build_reference(steps=steps, like=ref)
            try:
                check_combination(sub, bref, rule, active)
            except RuleCheckError as e:
                if e.check not in ("correctness", "mutation") or not steps:
                    raise
                bref = sub.build_reference(like=ref)
                check_combination(sub, bref, rule, active)
        except UncheckableInput as e:  # (the perturbed values hit a kink: interleave only)
            notes.append(f"finite differences on other values n/a ({e})")
            bref = sub.build_reference(fd=False, like=ref)
        except RuleCheckError as e:
            raise RuleCheckError(
                "statefulness",
                f"a later call of one rule object, on other values of the same shape, failed "
                f"the {e.check} check (is something kept per shape that depends on the "
                f"values?): {e.detail}",
                e.argument,
                e.signature,
                e.input,
            ) from None
        alone = fresh(sub.call, bref)
        ra = Run(call, rule, active, ref.seeds)
        rb = Run(sub.call, rule, active, bref.seeds)
        try:
            ya, pba = ra.forward()
            yb, pbb = rb.forward()
            rb.y, ra.y = clone(yb.x), clone(ya.x)
            rb.rdata = pbb(seed_output(yb, bref))
            ra.rdata = pba(seed_output(ya, ref))
        except Exception as e:
            ck.fail("statefulness", f"interleaved calls (forward a, forward b, pullback b, "
                    f"pullback a) raised {type(e).__name__}: {e}")  # fmt: skip
        what = "interleaved calls of one rule object (forward a, forward b, pullback b, pullback a)"
        _agree(sub, rb, alone, tol, what + ", call b")
        _agree(ck, ra, first, tol, what + ", call a")
    for vck, vref, vrun in variants:
        where = vck.context.rsplit("[layout: ", 1)[-1].rstrip("]")
        _agree(vck, run(vck.call, vref), vrun, tol,
               f"a call of one rule object on {where}, after calls on other layouts")  # fmt: skip
    if variants:
        _agree(ck, run(), first, tol, "a call of one rule object after calls on other layouts")
    args2, kwargs2, why = _shape_change_args(ck, shape_change)
    if args2 is None:
        notes.append(f"shape change n/a ({why})")
    else:
        sub = ck.derive(args2, kwargs2, ck.context, ck.seed + 1)
        steps = {j: [h] for j, h in ref.passed_at.items()}
        try:
            ref2 = Reference.build(sub.call, sub.seed, steps=steps)
        except Exception as e:
            if shape_change is not None:
                raise ValueError(f"check_rule: the primal rejects shape_change: {e}") from e
            notes.append(f"shape change n/a (the primal rejects smaller inputs: {e})")
        else:
            try:
                try:  # (at the steps that worked before; a failure is confirmed over all)
                    check_combination(sub, ref2, rule, sub.all_active())
                except RuleCheckError as e:
                    if e.check not in ("correctness", "mutation") or not steps:
                        raise
                    check_combination(sub, sub.build_reference(), rule, sub.all_active())
            except UncheckableInput as e:
                notes.append(f"finite differences after a change of shape n/a ({e})")
            except RuleCheckError as e:
                shapes = f"{_shapes(call.values)} → {_shapes(sub.call.values)}"
                raise RuleCheckError(
                    "statefulness",
                    f"after a change of shape ({shapes}) the {e.check} check failed: {e.detail}",
                    e.argument,
                    e.signature,
                    e.input,
                ) from None
            _agree(ck, run(), first, tol, "a call after a change of shape and back")
    return "pass" if not notes else "pass; " + "; ".join(notes)


def _agree(ck: _Checker, got: Run, want: Run, rtol: float, what: str) -> None:
    parts = [("output", got.y, want.y), ("rdata", got.rdata, want.rdata)]
    parts += [(f"fdata of {ck.call.names[i]}", got.fdata[i], want.fdata[i]) for i in got.active]
    parts += [(f"{ck.call.names[i]} after the pullback", v, w)
              for i, (v, w) in enumerate(zip(got.values, want.values, strict=True))]  # fmt: skip
    for name, g, w in parts:
        if same_value(g, w):  # (most are bitwise equal: skip the slower tolerance test)
            continue
        why = tree_close(g, w, rtol, name, who="a fresh rule object")
        if why:
            ck.fail("statefulness", f"{what} disagrees with a fresh rule object: {why}")


def _perturbed(call: Call, seed: int) -> list[Any] | None:
    """The arguments with every float value scaled by 1 ± 5% (zeros, signs, structure kept)."""
    rng = np.random.default_rng(seed + 7)
    for size in (0.05, 0.005):

        def leaf(v: Any, size: float = size) -> Any:
            if isinstance(v, np.ndarray) and v.dtype.kind in "fc":
                out = clone(v)
                out.flags.writeable = True
                parts = (out.real, out.imag) if v.dtype.kind == "c" else (out,)
                for part in parts:  # (part by part: inf·0 would make a complex inf nan)
                    part *= np.asarray(1 + size * rng.uniform(-1, 1, v.shape), v.real.dtype)
                out.flags.writeable = v.flags.writeable
                return out
            if isinstance(v, (float, np.floating)) and not isinstance(v, bool):
                return type(v)(v * (1 + size * rng.uniform(-1, 1)))
            return clone(v)

        values = [tree_map(v, leaf) for v in call.values]
        if all(same_value(v, w) for v, w in zip(values, call.values, strict=True)):
            return None
        try:
            with np.errstate(all="ignore"):
                y = call.primal([clone(v) for v in values])
        except Exception:
            continue
        if all(np.all(np.isfinite(v)) for _, v in leaves(y) if _is_float(v)):
            return values
    return None


def _is_float(v: Any) -> bool:
    return isinstance(v, (np.ndarray, np.floating, float)) and np.asarray(v).dtype.kind in "fc"


def shrink(x: Any) -> Any:
    """Every float array one element shorter along each axis longer than one."""

    def leaf(v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.dtype.kind in "fc" and v.ndim:
            part = v[tuple(slice(0, n - 1) if n > 1 else slice(None) for n in v.shape)]
            return np.copy(part, order="K")
        return v

    return tree_map(x, leaf)


def _shape_change_args(ck: _Checker, given: Any) -> tuple[Any, Any, str]:
    if isinstance(given, Example):
        return given.args, given.kwargs, ""
    if given is not None:
        return tuple(given), ck.kwargs, ""
    args2 = shrink(ck.args)
    kwargs2 = {k: shrink(v) for k, v in ck.kwargs.items()}
    if _shapes(list(args2) + list(kwargs2.values())) == _shapes(
        list(ck.args) + list(ck.kwargs.values())
    ):
        return None, None, "no float array has an axis longer than one"
    return args2, kwargs2, ""


def _shapes(values: list[Any]) -> str:
    return ", ".join(str(v.shape) for _, v in leaves(values) if isinstance(v, np.ndarray))


def check_allocation(ck: _Checker, ref: Reference) -> tuple[int, str]:
    """Allocations of one warm forward + pullback. A StatefulRRule may make no more than the
    primal call makes on the same inputs besides its outputs (which come from its pool)."""
    rule, active = ck.make(), ck.all_active()
    warm = Run(ck.call, rule, active, ref.seeds)
    y, pb = warm.forward()
    fpart, rpart = split_tangent(y.x, match_tangent(y.x, ref.ybar))
    pb(NoRData() if y.dx is None else rpart)

    def once(run: Run) -> None:
        y, pb = run.forward()
        if y.dx is None:
            pb(NoRData())
        else:
            increment(y.dx, fpart)
            pb(rpart)

    once(Run(ck.call, rule, active, ref.seeds))
    run = Run(ck.call, rule, active, ref.seeds)
    with counting() as c:
        once(run)
    assert c.result is not None
    n = c.result.count
    if not isinstance(rule, StatefulRRule):
        return n, f"n/a: plain rule ({n} allocations per call; only stateful rules are held to it)"
    primal, outputs = primal_allocations(ck.call)
    ck.report.primal_allocations = primal
    allowed = max(0, primal - outputs)
    if n > allowed:
        layouts = ", ".join(
            f"{name}: {describe_layout(v)}"
            for name, v in zip(ck.call.names, ck.call.values, strict=True)
            if isinstance(v, np.ndarray)
        )
        ck.fail(
            "allocation",
            f"after warm-up, forward + pullback allocated {c.result}; {ck.who} itself makes "
            f"{primal} on these inputs ({layouts or 'no array arguments'}), {outputs} of them "
            f"its output{'s' * (outputs != 1)}, so at most {allowed} "
            f"{'is' if allowed == 1 else 'are'} allowed (copies the primal call cannot avoid "
            "either, e.g. f2py copying a C-ordered operand). A StatefulRRule must allocate "
            "nothing else once warm: take outputs and saved copies from its pool (push/save), "
            "work buffers from scratch(...), and accumulate with out=.",
        )
    if n:
        return n, (f"pass ({n} allocations, as many as the primal call's {primal} minus its "
                   f"{outputs} output{'s' * (outputs != 1)})")  # fmt: skip
    return n, "pass"


def primal_allocations(call: Call) -> tuple[int, int]:
    """(allocations of one primal call on fresh copies of the inputs, how many of them are new
    output buffers): the fewest of three calls (a first call may fill caches)."""
    counts, y, values = [], None, []
    for _ in range(3):
        values = call.fresh()
        with counting() as c:
            y = call.primal(values)
        counts.append(c.count)
    outputs: list[np.ndarray] = []
    for _, a in leaves(y):
        new = isinstance(a, np.ndarray) and not any(shares(a, v) for v in values)
        if new and not any(a.size and b.size and np.shares_memory(a, b) for b in outputs):
            outputs.append(a)
    return min(counts), len(outputs)
