"""`check_frule`: prove a forward rule right on one call (docs/testing-your-rules.md).

The checks, in the order a failure is reported:

1. registered — the rule is the one `rulekit.frule` dispatches this call to;
2. interface — the rule returns a `Dual` whose primal equals the primal function's
   result, and whose tangent has the output's structure, shape and dtype (None only for
   a non-float output, or when no argument has a tangent);
3. mutation — the rule writes only into what the primal mutates (values and, for those,
   tangents), leaves every other argument's value and tangent as they were, and leaves a
   mutated argument's value as the primal does;
4. correctness — per differentiable argument j alone (the others constant, `dx is None`)
   and with every argument at once, the JVP against central finite differences of the
   primal along random directions ẋ (`_forward_vjp_shared`):
   ⟨ȳ, ẏ⟩ + Σ_{i mutated} ⟨rᵢ, ẋᵢ'⟩ ≈ FD, where ẋᵢ' is the tangent the rule left in a
   mutated argument (so it must equal the derivative of the mutated value); and again
   with every array argument (and tangent) in other layouts (F order, strided, negative
   strides), where the result must agree with the first layout's;
5. consistency — ⟨ȳ, J ẋ⟩ from the forward rule equals ⟨Jᵀȳ, ẋ⟩ from the reverse rule
   (the registered one, `rrule=`; n/a without one);
6. statefulness — a later call on other values of the same shape is right too (a rule
   that caches something value-dependent fails here), and a repeat of the first call
   agrees with it.

A rule may refuse a combination that writes an active value into a constant mutated
argument by raising `rulekit.TracingError`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rulekit import Dual, Example, TracingError, forward_registry
from testutils._check import OUTPUT_RTOL
from testutils._dottest import UncheckableInput, _converges, _within
from testutils._forward_vjp_shared import (
    FwdChecker,
    as_dx,
    example_options,
    full_sweep,
    tdot,
    wide_leaves,
)
from testutils._fwdtangents import constant_leaves, tangent_problem
from testutils._reference import FDStep, FDTerm, Reference
from testutils._trees import clone, same_value, tree_close
from testutils._verdict import RuleReport

__all__ = ["check_frule", "check_frule_example"]


def check_frule(
    f: Any,
    *args: Any,
    kwargs: dict[str, Any] | None = None,
    rule: Any = None,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    reference: Any = None,
    rrule: Any = None,
) -> RuleReport:
    """Check the forward rule for `f(*args, **kwargs)` (the registered one, or `rule`).

    `rtol`/`atol` override the per-precision tolerances of the finite-difference and
    consistency tests (`testutils.RTOL`); `reference` replaces `f` as the function
    compared against; `rrule` is the reverse rule of the consistency check (default: the
    registered one; False: skip it). Raises `RuleCheckError` naming the failing check,
    argument and input; returns a `RuleReport` (`kind == "frule"`).
    """
    from testutils._forward_variants import consistency, layouts, statefulness

    start = time.perf_counter()
    ck = _FChecker(f, args, kwargs or {}, rule, rtol, atol, seed, reference, rrule)
    ck.rule = ck.lookup(forward_registry, "forward rule (rulekit.frule) for this call")
    ref = ck.build_reference(fd=True)
    first = _core(ck, ref)
    for name in ("interface", "mutation", "correctness"):
        ck.report.checks[name] = "pass"
    if ck.report.refused:
        n = len(ck.report.refused)
        ck.report.checks["correctness"] = (
            f"pass; {n} activity combination{'s' * (n > 1)} refused with TracingError"
        )
    if first is None:
        ck.report.checks["consistency"] = (
            "n/a: no differentiable argument, or every argument active is refused"
        )
    else:
        layouts(ck, ref, first)
        ck.report.checks["consistency"] = consistency(ck, ref, first)
    ck.report.checks["statefulness"] = statefulness(ck, ref, first)
    ck.report.seconds = time.perf_counter() - start
    return ck.report


def check_frule_example(f: Any, ex: Example, **options: Any) -> RuleReport:
    """`check_frule` on a call example attached to a registration (its tolerances too)."""
    return check_frule(f, *ex.args, kwargs=ex.kwargs, **example_options(ex, options))


class _FChecker(FwdChecker):
    kind = "frule"
    rule: Any = None

    def may_refuse(self, ref: Reference, active: frozenset[int]) -> bool:
        return bool(active) and any(i not in active for i in ref.mutated)


@dataclass
class _FRun:
    """One call of the forward rule on fresh clones."""

    active: frozenset[int]
    values: list[Any]
    dxs: list[Any]  # the tangents passed (updated in place for mutated arguments)
    before: list[Any] = field(default_factory=list)  # copies of them before the call
    y: Any = None
    ydot: Any = None


def _duals(ck: _FChecker, values: list[Any], dxs: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    call = ck.call
    args: list[Any] = [None] * call.nargs
    kwargs = dict(call.fixed_kwargs)
    for s in call.slots:
        v, t = values[s.var], dxs[s.var]
        if s.where[0] == "arg":
            args[s.where[1]] = Dual(v, t)
        else:
            val = Dual(v, t) if t is not None else v
            kwargs[s.where[1]] = (val,) if s.where[2] else val
    return args, kwargs


def _run(
    ck: _FChecker, ref: Reference, active: frozenset[int], values: list[Any] | None = None
) -> _FRun | None:
    """Call the rule; None if it refused the combination with TracingError (allowed)."""
    values = ck.call.fresh() if values is None else values
    dxs = [as_dx(v, ref.directions[i]) if i in active else None for i, v in enumerate(values)]
    run = _FRun(active, values, dxs, [clone(t) for t in dxs])
    args, kwargs = _duals(ck, values, dxs)
    saved = ck.context
    ck.context = saved + _describe(ck, active)
    try:
        out = ck.rule(Dual(ck.call.f, None), *args, **kwargs)
    except TracingError as e:
        # Refusing is allowed where an active value is written into a constant the primal
        # mutates, and (never a wrong value) with some arguments constant.
        if ck.may_refuse(ref, active) or active != frozenset(ck.differentiable()):
            for i, v in enumerate(values):
                if not same_value(v, ck.call.values[i]):
                    ck.fail(
                        "mutation",
                        "the rule refused this activity combination with "
                        "TracingError but had already mutated this argument",
                        i,
                    )
            ck.report.refused.append(_describe(ck, active).strip())
            ck.context = saved
            return None
        ck.fail("interface", f"the forward rule raised TracingError: {e}")
    except Exception as e:
        ck.fail("interface", f"the forward rule raised {type(e).__name__}: {e}")
    if not isinstance(out, Dual):
        ck.fail("interface", f"the forward rule must return a Dual, got {out!r:.200}")
    why = tree_close(
        out.x, ref.y, OUTPUT_RTOL[ref.precision], floor=ref.rounding, who=ck.who, scalar_as_0d=True
    )
    if why:
        ck.fail("interface", why)
    run.y, run.ydot = out.x, out.dx
    # (with every argument active a float output has a tangent; with some constant, None
    # may stand for a zero, e.g. np.where's condition: the dot test catches a lost one)
    strict = bool(active) and active == set(ck.differentiable())
    constant: list[Any] = []  # (the output leaves that do not depend on the arguments)

    def varies(path: tuple[Any, ...]) -> bool:
        if not constant:
            constant.append(constant_leaves(ck, ref, active))
        return path not in constant[0]

    problem = tangent_problem(out.x, out.dx, "output", varies if strict else None)
    if problem:
        ck.fail("interface", problem)
    if (
        not active
        and out.dx is not None
        and any(a is not None and np.any(a != 0) for a in wide_leaves(out.x, out.dx))
    ):
        ck.fail("interface", "no argument has a tangent, but the output's tangent is not zero")
    _check_mutation(ck, ref, run)
    ck.context = saved
    return run


def _describe(ck: _FChecker, active: frozenset[int]) -> str:
    diff = ck.differentiable()
    on = [ck.call.names[i] for i in diff if i in active]
    off = [ck.call.names[i] for i in diff if i not in active]
    return f" [with a tangent: {', '.join(on) or 'none'}; constant: {', '.join(off) or 'none'}]"


def _check_mutation(ck: _FChecker, ref: Reference, run: _FRun) -> None:
    rtol = OUTPUT_RTOL[ref.precision]
    for i, v in enumerate(run.values):
        changed = not same_value(v, ck.call.values[i])
        if changed and i not in ref.mutated:
            ck.fail("mutation", f"the forward rule mutated it; {ck.who} does not", i)
        if i in ref.mutated:
            why = tree_close(v, ref.post[i], rtol, "its value after the call", who=ck.who)
            if why:
                ck.fail("mutation", why, i)
        elif run.dxs[i] is not None and not same_value(run.dxs[i], run.before[i]):
            ck.fail(
                "mutation",
                "the forward rule wrote into this argument's tangent (only "
                "a mutated argument's tangent may be updated)",
                i,
            )


# -- finite differences ----------------------------------------------------------------


def _lhs(ck: _FChecker, ref: Reference, run: _FRun) -> tuple[float, float]:
    """(⟨ȳ, ẏ⟩, Σ_{i mutated, active} ⟨rᵢ, ẋᵢ'⟩) of one run."""
    out = tdot(ref.y, ref.ybar, run.ydot) if ref.y is not None else 0.0
    states = sum(
        tdot(ck.call.values[i], ref.seed_tangent(i), run.dxs[i])
        for i in ref.mutated
        if i in run.active
    )
    return out, states


def _summed(terms: list[FDTerm]) -> FDTerm:
    """The FD right-hand side of several arguments' directions at once (steps they share)."""
    common = set.intersection(*(set(s.h for s in t.steps) for t in terms)) if terms else set()
    steps = []
    for h in sorted(common, reverse=True):
        parts = [next(s for s in t.steps if s.h == h) for t in terms]
        states: dict[int, tuple[float, float, float]] = {}
        for p in parts:
            for i, (v, b, n) in p.states.items():
                o = states.get(i, (0.0, 0.0, 0.0))
                states[i] = (o[0] + v, o[1] + b, o[2] + n)
        steps.append(
            FDStep(
                h,
                sum(p.own for p in parts),
                sum(p.own_bound for p in parts),
                sum(p.own_noise for p in parts),
                states,
                max(p.size for p in parts),
            )
        )
    return FDTerm(steps)


def _dot_test(ck: _FChecker, ref: Reference, run: _FRun, js: list[int]) -> None:
    """The run's ⟨ȳ, ẏ⟩ + Σ⟨rᵢ, ẋᵢ'⟩ against finite differences along the directions of `js`."""
    rtol, atol = ck.rtols(ref)
    if any(not ref.fd[j].steps for j in js):
        full_sweep(ref, js)
    for j in js:
        if not ref.fd[j].steps:
            raise UncheckableInput(
                f"check_frule: finite differences of {ck.who} along {ck.call.names[j]} are not "
                "finite at any step; choose inputs inside the function's domain." + ck.context
            )
    out, states = _lhs(ck, ref, run)
    while True:
        term = ref.fd[js[0]] if len(js) == 1 else _summed([ref.fd[j] for j in js])
        if not term.steps:  # (the arguments' differences share no step: each alone was tested)
            return
        ok, (rhs, err, tol, _noise, h) = _within(out + states, term, run.active, rtol, atol)
        if ok:
            for j in js:
                ref.passed_at[j] = h
            return
        if not full_sweep(ref, js):  # (failed at the first step: try them all)
            break
    if not term.steps or not _converges(term, run.active):
        raise UncheckableInput(
            f"check_frule: {ck.who} is not differentiable along {_names(ck, js)} at this input "
            "(finite differences do not converge as the step shrinks); choose inputs where it "
            "is differentiable." + ck.context
        )
    numbers = (
        f"the forward rule gives {out + states:.9g}, finite differences of {ck.who} give "
        f"{rhs:.9g} (at the best step h={h:g}: error {err:.3g} > tolerance {tol:.3g})"
    )
    var = js[0] if len(js) == 1 else None
    if states or any(i in run.active for i in ref.mutated):
        own = FDTerm([FDStep(s.h, s.own, s.own_bound, s.own_noise, {}, s.size) for s in term.steps])
        if ref.y is None or _within(out, own, run.active, rtol, atol)[0]:
            i = next(i for i in ref.mutated if i in run.active)
            ck.fail(
                "mutation",
                "the tangent the rule left in this mutated argument is not the "
                f"derivative of its value after the call: ⟨ȳ, ẏ⟩ + ⟨r, ẋ'⟩: {numbers}",
                i,
            )
    ck.fail("correctness", f"wrong tangent: ⟨ȳ, ẏ⟩ (ȳ random): {numbers}", var)


def _names(ck: _FChecker, js: list[int]) -> str:
    return ", ".join(ck.call.names[j] for j in js)


def _core(ck: _FChecker, ref: Reference, alone: bool = True) -> _FRun | None:
    """Interface, mutation and correctness on one input: every argument alone, then all;
    the run with every argument active (None if nothing is differentiable)."""
    diff = ck.differentiable()
    if not diff:
        _run(ck, ref, frozenset())
        return None
    for j in diff if alone else []:
        run = _run(ck, ref, frozenset({j}))
        if run is not None:
            _dot_test(ck, ref, run, [j])
    if len(diff) == 1 and alone:
        return run
    every = _run(ck, ref, frozenset(diff))
    if every is not None:  # (None: refused, a constant the primal mutates cannot be active)
        _dot_test(ck, ref, every, diff)
    return every
