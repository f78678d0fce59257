"""`check_vjp_rule`: prove a differentiable pullback (`rulekit.vjp_rule`) right on one call.

A vjp rule is `rule(active, *args, **kwargs) -> (y, pullback)`, `pullback(ȳ) -> (x̄₀,
x̄₁, ...)` (one cotangent per positional argument, None for none). The checks, in the
order a failure is reported:

1. registered — the rule is the one `rulekit.vjp_rule` dispatches this call to;
2. mutation — the primal mutates nothing (a vjp rule of a mutating function must not be
   registered: nested reverse mode refuses such calls), and neither the rule nor its
   pullback changes an argument or ȳ;
3. interface — `y` equals the primal's result; the pullback returns one cotangent per
   positional argument, each of its argument's structure and shape (real for a real
   argument) or None;
4. correctness — with every argument active, the cotangents equal the reverse rule's
   (`rulekit.rrule`, started from the same random ȳ; finite differences where no
   reverse rule is registered); with one argument active, its cotangent is the same;
   with the arguments in other memory layouts too;
5. statefulness — the pullback called twice gives the same cotangents; a later call on
   other values of the same shape is right too; a repeat of the first call agrees.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from rulekit import Example, vjp_registry
from testutils._check import LAYOUT_VARIANTS, OUTPUT_RTOL
from testutils._dottest import UncheckableInput, _within
from testutils._forward_vjp_shared import (
    FwdChecker,
    as_dx,
    example_options,
    on_other_values,
    tdot,
    wide_leaves,
)
from testutils._layouts import VARIANT_NAMES, layout_key, relayout_values
from testutils._reference import Reference
from testutils._statecheck import AGREE
from testutils._trees import clone, max_abs, same_value, tree_close
from testutils._verdict import RuleCheckError, RuleReport

__all__ = ["VJP_RTOL", "check_vjp_example", "check_vjp_rule"]

#: rtol of "the vjp rule's cotangents equal the reverse rule's", relative to the largest
#: magnitude of each cotangent (two exact formulas, rounded differently).
VJP_RTOL = {"double": 1e-8, "single": 1e-3, "half": 5e-2}


def check_vjp_rule(
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
    """Check the vjp rule for `f(*args, **kwargs)` (the registered one, or `rule`).

    `rrule` is the reverse rule its cotangents are compared with (default: the registered
    one; False: finite differences instead). `rtol`/`atol` as for `check_frule`. Raises
    `RuleCheckError`; returns a `RuleReport` (`kind == "vjp"`).
    """
    start = time.perf_counter()
    ck = _VChecker(f, args, kwargs or {}, rule, rtol, atol, seed, reference, rrule)
    ck.rule = ck.lookup(vjp_registry, "vjp rule (rulekit.vjp_rule) for this call")
    ref = ck.build_reference(fd=False)
    for i in sorted(ref.mutated):
        ck.fail(
            "mutation",
            f"{ck.who} mutates this argument: a vjp rule must not be "
            "registered for a mutating function (nested reverse mode refuses such "
            "calls; register a forward rule and a reverse rule only)",
            i,
        )
    first = _core(ck, ref)
    for name in ("interface", "mutation", "correctness"):
        ck.report.checks[name] = "pass"
    _layouts(ck, ref, first)
    ck.report.checks["statefulness"] = _statefulness(ck, ref, first)
    ck.report.seconds = time.perf_counter() - start
    return ck.report


def check_vjp_example(f: Any, ex: Example, **options: Any) -> RuleReport:
    """`check_vjp_rule` on a call example attached to a registration."""
    return check_vjp_rule(f, *ex.args, kwargs=ex.kwargs, **example_options(ex, options))


class _VChecker(FwdChecker):
    kind = "vjp"
    rule: Any = None

    def differentiable(self) -> list[int]:
        """Positional variables only: a vjp rule returns one cotangent per positional
        argument, and gets keyword values plain (nested reverse mode refuses a traced one)."""
        pos = set(self.call.positional_vars())
        return [i for i in super().differentiable() if i in pos]


def _call(ck: _VChecker, ref: Reference, active: frozenset[int], twice: bool = True) -> list[Any]:
    """Run the rule and its pullback on ȳ; the cotangent of each variable (None: zero)."""
    call = ck.call
    values = call.fresh()
    args, kwargs = call.plain(values)
    pos = call.positional_vars()
    every = active == frozenset(ck.differentiable())  # (as `rulekit.vjp_rule` calls it)
    flags = tuple(every or var in active for var in pos)
    ybar = as_dx(ref.y, ref.ybar) if ref.y is not None else None
    kept = clone(ybar)
    try:
        y, pullback = ck.rule(flags, *args, **kwargs)
    except Exception as e:
        ck.fail("interface", f"the vjp rule raised {type(e).__name__}: {e}")
    why = tree_close(
        y, ref.y, OUTPUT_RTOL[ref.precision], floor=ref.rounding, who=ck.who, scalar_as_0d=True
    )
    if why:
        ck.fail("interface", why)
    _unchanged(ck, values, "the vjp rule")
    results = []
    for _ in range(2 if twice else 1):  # (the pullback is reusable: the second call agrees)
        try:
            cts = pullback(ybar)
        except Exception as e:
            ck.fail("interface", f"the pullback raised {type(e).__name__}: {e}")
        _unchanged(ck, values, "the pullback")
        if not same_value(ybar, kept):
            ck.fail("mutation", "the pullback wrote into the output cotangent ȳ it was given")
        if not isinstance(cts, tuple) or len(cts) != call.nargs:
            got = f"{len(cts)} values" if isinstance(cts, tuple) else type(cts).__name__
            ck.fail(
                "interface",
                f"the pullback must return a tuple of {call.nargs} cotangents "
                f"(one per positional argument, None for none), got {got}",
            )
        sums: list[Any] = [None] * len(values)
        for k, var in enumerate(pos):
            if var not in active or cts[k] is None:
                continue
            problem = _cotangent_problem(values[var], cts[k], f"cotangent {k}")
            if problem:
                ck.fail("interface", problem, var)
            sums[var] = cts[k] if sums[var] is None else _add(values[var], sums[var], cts[k])
        results.append(sums)
    try:
        if twice:
            _compare(
                ck,
                ref,
                results[1],
                results[0],
                active,
                AGREE[ref.precision],
                "a second call of the pullback on the same ȳ",
            )
    except RuleCheckError as e:
        raise RuleCheckError("statefulness", e.detail, e.argument, e.signature, e.input) from None
    return results[0]


def _add(v: Any, a: Any, b: Any) -> Any:
    if isinstance(v, (tuple, list)):
        return type(v)(_add(e, x, y) for e, x, y in zip(v, a, b, strict=True))
    if a is None:
        return b
    if b is None:
        return a
    return np.asarray(a) + np.asarray(b)


def _unchanged(ck: _VChecker, values: list[Any], who: str) -> None:
    for i, v in enumerate(values):
        if not same_value(v, ck.call.values[i]):
            ck.fail("mutation", f"{who} changed this argument (a vjp rule writes nothing)", i)


_FLOATS = (float, complex, np.floating, np.complexfloating)


def _cotangent_problem(x: Any, c: Any, where: str) -> str | None:
    """Why `c` is no cotangent of argument value `x` (None if it is one)."""
    if c is None:
        return None
    if isinstance(x, (tuple, list)):
        if not isinstance(c, (tuple, list)) or len(c) != len(x):
            return f"{where} must be a {type(x).__name__} of {len(x)} cotangents (None for none)"
        for i, (a, b) in enumerate(zip(x, c, strict=True)):
            why = _cotangent_problem(a, b, f"{where}[{i}]")
            if why:
                return why
        return None
    dt = x.dtype if isinstance(x, (np.ndarray, np.generic)) else np.asarray(x).dtype
    if dt.kind not in "fc":
        return None  # (ignored: no cotangent is read for a non-float argument)
    if not isinstance(c, (np.ndarray, np.generic, *_FLOATS)) or isinstance(c, bool):
        return f"{where} must be an array or a scalar, got {type(c).__name__}"
    if np.shape(c) != np.shape(x):
        return f"{where} has shape {np.shape(c)}; its argument has shape {np.shape(x)} " + (
            "(reduce broadcasting with rulekit.unbroadcast)"
        )
    cdt = np.asarray(c).dtype
    if cdt.kind == "c" and dt.kind != "c":
        return f"{where} is complex; its argument is real (give it the real part)"
    return None  # (a float32 argument's cotangent may be float64: the contract is the shape)


def _compare(
    ck: _VChecker,
    ref: Reference,
    got: list[Any],
    want: list[Any],
    active: frozenset[int],
    rtol: float,
    what: str,
) -> None:
    atol = 0.0 if ck.user_atol is None else ck.user_atol
    floor = Reference.ROUNDING[ref.precision] * max_abs(ref.ybar)  # (exact 0 vs rounding)
    for j in sorted(active):
        v = ck.call.values[j]
        for a, b in zip(wide_leaves(v, got[j]), wide_leaves(v, want[j]), strict=True):
            if a is None and b is None:
                continue
            a = np.zeros_like(b) if a is None else a
            b = np.zeros_like(a) if b is None else b
            if a.shape != b.shape:
                ck.fail("interface", f"{what}: cotangent of shape {a.shape}, want {b.shape}", j)
            scale = max(
                float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0))
            )
            err = float(np.max(np.abs(a - b), initial=0.0))
            if not err <= atol + rtol * max(scale, floor):
                ck.fail(
                    "correctness",
                    f"wrong cotangent: {what} (max abs difference {err:.3g}, "
                    f"scale {scale:.3g}, rtol {rtol:g})",
                    j,
                )


def _fd_check(ck: _VChecker, ref: Reference, got: list[Any], active: frozenset[int]) -> None:
    """No reverse rule: ⟨x̄ⱼ, ẋⱼ⟩ against finite differences, per argument."""
    if not ref.fd:
        ref._finite_differences({})
    rtol, atol = ck.rtols(ref)
    for j in sorted(active):
        term = ref.fd.get(j)
        if term is None:
            continue
        if not term.steps:
            raise UncheckableInput(
                f"check_vjp_rule: finite differences of {ck.who} along "
                f"{ck.call.names[j]} are not finite at any step"
            )
        lhs = tdot(ck.call.values[j], got[j], ref.directions[j])
        ok, (rhs, err, tol, _, h) = _within(lhs, term, frozenset({j}), rtol, atol)
        if not ok:
            ck.fail(
                "correctness",
                f"wrong cotangent: ⟨x̄, ẋ⟩ = {lhs:.9g} from the pullback, "
                f"finite differences of {ck.who} give {rhs:.9g} (at h={h:g}: error "
                f"{err:.3g} > tolerance {tol:.3g}; no reverse rule to compare with)",
                j,
            )


def _core(ck: _VChecker, ref: Reference) -> list[Any]:
    """Every argument active against the reverse rule (or FD); each alone against that."""
    diff = frozenset(ck.differentiable())
    first = _call(ck, ref, diff)
    want = ck.reverse_cotangents(ref)
    rtol = (
        VJP_RTOL[ref.precision]
        if ck.user_rtol is None
        else max(ck.user_rtol, VJP_RTOL[ref.precision])
    )
    if want is None:
        _fd_check(ck, ref, first, diff)
    else:
        _compare(
            ck,
            ref,
            first,
            want,
            diff,
            rtol,
            "its cotangent differs from the reverse rule's (every argument active, the same ȳ)",
        )
    if len(diff) > 1:
        for j in sorted(diff):
            alone = _call(ck, ref, frozenset({j}), twice=False)
            _compare(
                ck,
                ref,
                alone,
                first,
                frozenset({j}),
                AGREE[ref.precision],
                "with only this argument active, its cotangent differs from the one "
                "with every argument active",
            )
    return first


def _layouts(ck: _VChecker, ref: Reference, first: list[Any]) -> None:
    seen = {layout_key(ck.call.values)}
    values = [*ck.args, *ck.kwargs.values()]
    diff = frozenset(ck.differentiable())
    for variant in LAYOUT_VARIANTS:
        both = relayout_values(values, variant)
        key = layout_key(both)
        if key in seen:
            continue
        seen.add(key)
        args2 = tuple(both[: len(ck.args)])
        kwargs2 = dict(zip(ck.kwargs, both[len(ck.args) :], strict=True))
        sub = ck.derive(args2, kwargs2, f"{ck.context} [layout: {VARIANT_NAMES[variant]}]")
        try:
            got = _call(sub, ref, diff, twice=False)
        except RuleCheckError:
            try:  # (the primal refuses this layout too: then so may the rule)
                vref = Reference.build(sub.call, sub.seed, fd=None, like=ref)
            except Exception:
                ck.report.layouts.append(f"{variant}: refused, as by {ck.who}")
                continue
            if vref.behaves_like(ref, AGREE[ref.precision]):
                raise
            _core(sub, sub.build_reference(fd=False, like=ref))  # (the primal differs here)
            ck.report.layouts.append(variant)
            continue
        _compare(
            sub,
            ref,
            got,
            first,
            diff,
            AGREE[ref.precision],
            "its cotangent differs from the one in the first layout",
        )
        ck.report.layouts.append(variant)


def _statefulness(ck: _VChecker, ref: Reference, first: list[Any]) -> str:
    notes = on_other_values(ck, lambda sub: _core(sub, sub.build_reference(fd=False, like=ref)))
    again = _call(ck, ref, frozenset(ck.differentiable()), twice=False)
    try:
        _compare(
            ck,
            ref,
            again,
            first,
            frozenset(ck.differentiable()),
            AGREE[ref.precision],
            "a repeat of the first call, after the others",
        )
    except RuleCheckError as e:
        raise RuleCheckError("statefulness", e.detail, e.argument, e.signature, e.input) from None
    return "pass" + (f" ({'; '.join(notes)})" if notes else "")
