"""`check_frule`'s checks after the first input: other layouts, consistency with the reverse
rule, and statefulness (a later call on other values, a repeat). See `_forward`."""

from __future__ import annotations

from typing import Any

import numpy as np

from testutils._check import LAYOUT_VARIANTS
from testutils._forward import _core, _FChecker, _FRun, _lhs, _run
from testutils._forward_vjp_shared import on_other_values, tdot, tnorm, wide_leaves
from testutils._layouts import VARIANT_NAMES, layout_key, relayout_values
from testutils._reference import Reference
from testutils._statecheck import AGREE
from testutils._verdict import RuleCheckError

__all__ = ["consistency", "layouts", "statefulness"]


def _agree(ck: _FChecker, ref: Reference, got: _FRun, want: _FRun, what: str) -> None:
    """`got` (another layout or a repeat) gives `want`'s tangents (output and mutated)."""
    tol = AGREE[ref.precision]
    pairs: list[tuple[Any, Any, Any, str, int | None]] = [
        (ref.y, got.ydot, want.ydot, "the output's tangent", None)
    ]
    pairs += [
        (ck.call.values[i], got.dxs[i], want.dxs[i], "its tangent after the call", i)
        for i in ref.mutated
        if i in want.active
    ]
    for v, a, b, name, var in pairs:
        for x, y in zip(wide_leaves(v, a), wide_leaves(v, b), strict=True):
            x = np.zeros(0) if x is None else x
            y = np.zeros(0) if y is None else y
            if x.size == 0 and y.size == 0:
                continue
            x = np.zeros_like(y) if x.size == 0 else x
            y = np.zeros_like(x) if y.size == 0 else y
            scale = max(
                float(np.max(np.abs(y), initial=0.0)), float(np.max(np.abs(x), initial=0.0))
            )
            err = float(np.max(np.abs(x - y), initial=0.0))
            if not err <= tol * scale + ref.rounding:
                ck.fail(
                    "correctness",
                    f"{what}: {name} differs from the first call's (max abs "
                    f"difference {err:.3g}, scale {scale:.3g})",
                    var,
                )


def layouts(ck: _FChecker, ref: Reference, first: _FRun) -> None:
    seen = {layout_key(ck.call.values)}
    values = [*ck.args, *ck.kwargs.values()]
    for variant in LAYOUT_VARIANTS:
        both = relayout_values(values, variant)
        key = layout_key(both)
        if key in seen:
            continue
        seen.add(key)
        args2 = tuple(both[: len(ck.args)])
        kwargs2 = dict(zip(ck.kwargs, both[len(ck.args) :], strict=True))
        sub = ck.derive(args2, kwargs2, f"{ck.context} [layout: {VARIANT_NAMES[variant]}]")
        try:  # (fast path: the primal does the same in every layout, as it nearly always does)
            run = _run(sub, ref, first.active)
            assert run is not None
            _agree(sub, ref, run, first, "another memory layout")
            ck.report.layouts.append(variant)
            continue
        except Exception:
            pass
        try:
            vref = Reference.build(sub.call, sub.seed, fd=None, like=ref)
        except Exception as e:
            try:
                _run(sub, ref, first.active)
            except Exception:
                ck.report.layouts.append(f"{variant}: refused, as by {ck.who}")
                continue
            sub.fail(
                "interface",
                f"{ck.who} raises {type(e).__name__} on these inputs ({e}), "
                "the rule returned a result",
            )
        if not vref.behaves_like(ref, AGREE[ref.precision]):
            _core(sub, sub.build_reference(fd=True, like=ref))
        else:
            vref.adopt(ref)
            run = _run(sub, vref, first.active)
            assert run is not None
            _agree(sub, ref, run, first, "another memory layout")
        ck.report.layouts.append(variant)


def consistency(ck: _FChecker, ref: Reference, first: _FRun) -> str:
    """⟨ȳ, J ẋ⟩ (+ mutated states) from the forward rule = Σⱼ ⟨x̄ⱼ, ẋⱼ⟩ from the reverse rule."""
    if first.active != frozenset(ck.differentiable()):
        return "n/a: the forward rule ran with some arguments constant"
    try:
        xbars = ck.reverse_cotangents(ref)
    except Exception as e:
        return f"n/a: the reverse rule raised {type(e).__name__}: {e}"
    if xbars is None:
        return "n/a: no reverse rule for this call (or it refuses every argument active)"
    out, states = _lhs(ck, ref, first)
    lhs = out + states
    rhs = bound = 0.0
    n = 1
    for j in first.active:
        v = ck.call.values[j]
        rhs += tdot(v, xbars[j], ref.directions[j])
        bound += tnorm(v, xbars[j]) * tnorm(v, ref.directions[j])
        n = max(n, sum(a.size for a in wide_leaves(v, ref.directions[j]) if a is not None))
    rtol, atol = ck.rtols(ref)
    tol = atol + rtol * max(abs(lhs), abs(rhs), bound / np.sqrt(n))
    if abs(lhs - rhs) <= tol:
        return "pass"
    ck.fail(
        "consistency",
        f"⟨ȳ, J ẋ⟩ = {lhs:.9g} from the forward rule, ⟨Jᵀȳ, ẋ⟩ = {rhs:.9g} "
        f"from the reverse rule (error {abs(lhs - rhs):.3g} > tolerance {tol:.3g}); the "
        "forward rule agrees with finite differences, so check the reverse rule "
        "(testutils.check_rule)",
    )
    return "FAIL"  # (unreachable)


def statefulness(ck: _FChecker, ref: Reference, first: _FRun | None) -> str:
    passed = sorted(set(ref.passed_at.values()), reverse=True)
    steps = {j: passed for j in ref.passed_at}

    def check(sub: Any) -> None:
        try:
            _core(sub, sub.build_reference(fd=True, steps=steps, like=ref), alone=False)
        except RuleCheckError as e:
            if e.check not in ("correctness", "mutation") or not steps:
                raise
            _core(sub, sub.build_reference(fd=True, like=ref))

    notes = on_other_values(ck, check)
    if first is not None:
        again = _run(ck, ref, first.active)
        assert again is not None
        try:
            _agree(ck, ref, again, first, "a repeat of the first call, after the others")
        except RuleCheckError as e:
            raise RuleCheckError(
                "statefulness", e.detail, e.argument, e.signature, e.input
            ) from None
    return "pass" + (f" ({'; '.join(notes)})" if notes else "")
