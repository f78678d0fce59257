"""`check_rule`: prove one rule right on one call (docs/testing-your-rules.md, checks 1–7).

The checks, in the order a failure is reported:

1. interface — the rule returns `(CoDual, pullback)`; the output primal equals
   the primal function's result (type, dtype, shape, values; a 0-d array may
   stand for a numpy scalar); output fdata has the right type/shape/dtype and
   starts at zero; the forward pass leaves every argument's fdata untouched; the
   pullback returns one rdata per positional input (the function first);
2. correctness — per argument, a dot-product test against central finite
   differences of the primal (`_reference`, `_dottest`), input fdata pre-seeded
   with random values, in every activity combination, and again with every
   array argument in other memory layouts (F order, strided, negative strides);
3. mutation — the rule mutates exactly the arguments the primal mutates, to
   the same values; after the pullback every argument is restored, and a
   mutated argument's fdata holds the cotangent of its pre-call value;
4. aliasing — an output shares memory with an argument exactly when the
   primal's does, and then its fdata is the same view of that argument's fdata;
5. statefulness — one rule object stays right over calls with other values,
   interleaved calls, other layouts and another shape (`_statecheck`), always
   compared with *fresh* rule objects;
6. allocation — after warm-up, forward + pullback of a `StatefulRRule` allocate
   no more numpy data buffers than the primal call itself makes besides its
   outputs (NEP 49 counter; plain rules: reported);
7. registered — the rule is the one the registry dispatches this call to.

A rule may refuse an activity combination that writes an active value into a
constant mutated argument by raising `rulekit.TracingError` (as the engine does).
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit import (
    AmbiguousRuleError,
    CoDual,
    Example,
    MissingRuleError,
    NoRData,
    StatefulRRule,
    build_primitive_rrule,
    increment,
    registry,
    signature_of,
    split_tangent,
)
from testutils._call import Call, Run
from testutils._dottest import UncheckableInput
from testutils._layouts import VARIANT_NAMES, layout_key, relayout_values
from testutils._messages import ZERO_D, describe_call, primal_label
from testutils._reference import Reference
from testutils._trees import clone, leaves, match_tangent, tree_map
from testutils._verdict import CHECKS, RuleCheckError, RuleReport

__all__ = [
    "CHECKS",
    "RTOL",
    "RuleCheckError",
    "RuleReport",
    "UncheckableInput",
    "check_example",
    "check_rule",
]

#: rtol of the dot-product test, by the least precise float type in the call (the dtype →
#: class table is `testutils._reference.PRECISION`). Double: FD truncation at the best step
#: is ~1e-8 relative; single: a pullback summing n products carries ~n·6e-8 relative
#: rounding, 2e-3 leaves room for n ≈ 10⁴; half likewise. The rounding error of the finite
#: difference itself is added separately (`testutils._reference.fd_noise`).
RTOL = {"double": 1e-6, "single": 2e-3, "half": 5e-2}
#: rtol for comparing the rule's output primal with numpy's (summation order may differ).
OUTPUT_RTOL = {"double": 1e-9, "single": 1e-4, "half": 1e-2}
#: The layouts every call is tried in again (when they differ from the caller's).
LAYOUT_VARIANTS = ("F", "strided", "negative")


def check_rule(
    f: Any,
    *args: Any,
    kwargs: dict[str, Any] | None = None,
    rule: Any = None,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    shape_change: tuple[Any, ...] | Example | None = None,
    reference: Any = None,
) -> RuleReport:
    """Check the rule for `f(*args, **kwargs)` (the registered one, or `rule`); see module doc.

    `rtol`/`atol` override the per-precision tolerances of the dot-product test
    (`RTOL`; atol defaults to 0). `shape_change` gives other arguments of a
    different shape for the statefulness check; by default every float array
    loses one element along each axis longer than one. Raises `RuleCheckError`
    naming the failing check, argument and input; returns a `RuleReport`.
    `reference` replaces `f` as the function compared against (the rule is still
    looked up for `f`), for primals whose results their inputs do not determine.
    """
    ck = _Checker(f, args, kwargs or {}, rule, rtol, atol, seed, reference)
    try:
        return ck.run(shape_change)
    except RuleCheckError as e:
        if _fails_only_for_0d(f, args, kwargs or {}, ck, rtol, atol, seed, reference):
            raise e.with_hint(ZERO_D) from None
        raise


def check_example(f: Any, ex: Example, **options: Any) -> RuleReport:
    """`check_rule` on a call example attached to a registration (its tolerances too)."""
    options.setdefault("rtol", ex.rtol)
    options.setdefault("atol", ex.atol)
    options.setdefault("reference", ex.reference)
    return check_rule(f, *ex.args, kwargs=ex.kwargs, **options)


class _Checker:
    def __init__(
        self,
        f: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        rule: Any,
        rtol: float | None,
        atol: float | None,
        seed: int,
        reference: Any = None,
        make: Callable[[], Any] | None = None,
        context: str = "",
        root_seed: int | None = None,
    ) -> None:
        self.f, self.args, self.kwargs = f, args, kwargs
        self.reference = reference
        self.call = Call(f, args, kwargs, reference)
        self.sig = signature_of(f, *args, **kwargs)
        self.label = repr(self.sig)
        self.who = primal_label(f, reference)
        self.given = rule
        self.user_rtol, self.user_atol = rtol, atol
        self.seed = seed
        self.root_seed = seed if root_seed is None else root_seed  # (the caller's `seed=`)
        self.report = RuleReport(self.label)
        self.context = context
        self.make: Callable[[], Any] = make if make is not None else self._maker()

    def derive(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], context: str, seed: int | None = None
    ) -> _Checker:
        """A checker of the same rule on other inputs (a layout, other values, a shape)."""
        return _Checker(self.f, args, kwargs, self.given, self.user_rtol, self.user_atol,
                        self.seed if seed is None else seed, self.reference, self.make,
                        context, self.root_seed)  # fmt: skip

    # -- helpers -------------------------------------------------------------------------

    def fail(self, check: str, message: str, var: int | None = None) -> None:
        name = None if var is None else self.call.names[var]
        call = self.call
        where = describe_call(call.names, call.values, call.fixed_kwargs, self.root_seed)
        raise RuleCheckError(check, message + self.context, name, self.label, where)

    def tolerances(self, ref: Reference) -> tuple[float, float]:
        rtol = RTOL[ref.precision] if self.user_rtol is None else self.user_rtol
        return rtol, 0.0 if self.user_atol is None else self.user_atol

    def describe(self, active: frozenset[int]) -> str:
        diff = [i for i, d in enumerate(self.call.differentiable) if d]
        on = [self.call.names[i] for i in diff if i in active]
        off = [self.call.names[i] for i in diff if i not in active]
        return f" [active: {', '.join(on) or 'none'}; constant: {', '.join(off) or 'none'}]"

    def build_reference(
        self,
        fd: bool = True,
        steps: dict[int, list[float]] | None = None,
        like: Reference | None = None,
    ) -> Reference:
        try:
            return Reference.build(self.call, self.seed, fd, steps, like)
        except Exception as e:
            raise ValueError(
                f"check_rule: {self.who} raised {type(e).__name__} on {self.label}: {e}. "
                "Give arguments the primal function accepts."
            ) from e

    # -- the run ----------------------------------------------------------------------------

    def run(self, shape_change: Any) -> RuleReport:
        from testutils._combination import check_combination
        from testutils._statecheck import check_allocation, check_statefulness

        start = time.perf_counter()
        self._registered()
        ref = self.build_reference()
        self.report.stateful = isinstance(self.make(), StatefulRRule)
        combos = self.combinations(ref)
        everything = self.all_active()
        first: Run | None = None  # a fresh object's run with every argument active
        for active in combos:
            run = check_combination(self, ref, self.make(), active)
            if run is None:
                self.report.refused.append(self.describe(active).strip())
            elif active == everything:
                first = run
        self.report.combinations = len(combos)
        if first is None:  # (a constant the primal mutates that cannot be active: int arrays)
            why = "n/a: the rule refuses the call with every argument active (TracingError)"
            for name in ("interface", "mutation", "aliasing", "correctness"):
                self.report.checks[name] = "pass"
            self.report.checks.update(statefulness=why, allocation=why)
            return self.report
        variants = self.check_layouts(ref)
        for name in ("interface", "mutation", "aliasing", "correctness"):
            self.report.checks[name] = "pass"
        if self.report.refused:
            n = len(self.report.refused)
            self.report.checks["correctness"] = (
                f"pass; {n} activity combination{'s' * (n > 1)} refused with TracingError "
                "(an active value written into a constant)"
            )
        self.report.checks["statefulness"] = check_statefulness(
            self, ref, first, shape_change, variants
        )
        self.report.allocations, self.report.checks["allocation"] = check_allocation(self, ref)
        self.report.seconds = time.perf_counter() - start
        return self.report

    def _maker(self) -> Callable[[], Any]:
        """A maker of *fresh* rule objects for this call: the registry's factory, or fresh
        copies of the given object as it was before the kit first used it."""
        if self.given is None:
            sig = self.sig
            return lambda: build_primitive_rrule(sig)
        given = self.given
        try:
            pristine = copy.deepcopy(given)
            copy.deepcopy(pristine)
        except Exception:
            try:
                type(given)()
            except Exception:
                return lambda: given  # (cannot be copied or rebuilt: the object itself)
            return lambda: type(given)()
        return lambda: copy.deepcopy(pristine)

    def _registered(self) -> None:
        """Check 7: the rule checked is the one the registry dispatches this call to."""
        sig = self.sig
        if self.given is None:
            try:
                registry.lookup(sig)  # (installed rule packages load before the first lookup)
            except (MissingRuleError, AmbiguousRuleError) as e:
                raise RuleCheckError("registered", str(e), None, self.label) from None
            self.report.checks["registered"] = "pass"
            return
        given = self.given
        try:
            reg = registry.find(sig)
        except AmbiguousRuleError:
            reg = None
        if reg is not None and (
            reg.impl is given or (reg.kind == "factory" and type(reg.impl(sig)) is type(given))
        ):
            self.report.checks["registered"] = "pass"
        else:
            self.report.checks["registered"] = "n/a: rule given explicitly, not registered"

    def combinations(self, ref: Reference) -> list[frozenset[int]]:
        """Activity combinations: all of them for ≤ 4 differentiable arguments, else a cover
        (none, each one alone, all but one, all)."""
        diff = [i for i, d in enumerate(self.call.differentiable) if d]
        k = len(diff)
        sizes = range(k + 1) if k <= 4 else sorted({0, 1, k - 1, k})
        return [frozenset(c) for n in sizes for c in itertools.combinations(diff, n)]

    def may_refuse(self, ref: Reference, active: frozenset[int]) -> bool:
        """Whether this combination writes active values into a constant the primal mutates:
        a rule may refuse it with TracingError, as the engine does before any rule runs."""
        return bool(active) and any(i not in active for i in ref.mutated)

    def all_active(self) -> frozenset[int]:
        return frozenset(i for i, d in enumerate(self.call.differentiable) if d)

    # -- other layouts -----------------------------------------------------------------------

    def check_layouts(self, ref: Reference) -> list[tuple[_Checker, Reference, Run]]:
        """Checks 1–4 (all arguments active) on copies of every array argument in each of
        `LAYOUT_VARIANTS`; returns the (checker, reference, run) of every variant tried."""
        from testutils._combination import check_combination
        from testutils._statecheck import AGREE

        values = [*self.args, *self.kwargs.values()]
        seen = {layout_key(values)}
        out = []
        for variant in LAYOUT_VARIANTS:
            both = relayout_values([*self.args, *self.kwargs.values()], variant)
            args2 = tuple(both[: len(self.args)])
            kwargs2 = dict(zip(self.kwargs, both[len(self.args) :], strict=True))
            key = layout_key(both)
            if key in seen:
                continue
            seen.add(key)
            sub = self.derive(args2, kwargs2, f"{self.context} [layout: {VARIANT_NAMES[variant]}]")
            try:
                vref = Reference.build(sub.call, sub.seed, fd=None)
            except Exception as e:
                sub._refused_layout(e)
                self.report.layouts.append(f"{variant}: refused, as by {self.who}")
                continue
            if vref.behaves_like(ref, AGREE[ref.precision]):
                vref.adopt(ref)
            else:  # the primal's own behaviour depends on the layout (BLAS overwrite flags)
                vref = sub.build_reference()
            run = check_combination(sub, vref, self.make(), sub.all_active())
            assert run is not None
            self.report.layouts.append(variant)
            out.append((sub, vref, run))
        return out

    def _refused_layout(self, error: Exception) -> None:
        """The primal raised on this layout: the rule must raise too (any exception)."""
        run = Run(self.call, self.make(), self.all_active(), [None] * len(self.call.values))
        try:
            run.forward()
        except Exception:
            return
        self.fail("interface", f"{self.who} raises {type(error).__name__} on these inputs "
                  f"({error}), the rule returned a result")  # fmt: skip


def seed_output(y: CoDual, ref: Reference) -> Any:
    """Put the output cotangent into the output's fdata (arrays); return its rdata part."""
    if y.dx is None:
        return NoRData()
    fpart, rpart = split_tangent(y.x, match_tangent(y.x, ref.ybar))
    increment(y.dx, fpart)
    return rpart


def execute(
    call: Call, ref: Reference, rule: Any, active: frozenset[int], seeds: list[Any],
    values: list[Any] | None = None,
) -> Run:  # fmt: skip
    """Forward + pullback of `rule` without checks; the run keeps values, fdata and results."""
    run = Run(call, rule, active, seeds, values)
    y, pb = run.forward()
    run.y = clone(y.x)
    run.rdata = pb(seed_output(y, ref))
    return run


def _fails_only_for_0d(
    f: Any, args: tuple[Any, ...], kwargs: dict[str, Any], ck: _Checker, *options: Any
) -> bool:
    """Whether the call has 0-d array arguments and passes once they have shape (1,)."""
    found = []

    def promote(v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.ndim == 0:
            found.append(v)
            out = v.reshape(1).copy()
            out.flags.writeable = v.flags.writeable
            return out
        return v

    args2 = tree_map(args, promote)
    kwargs2 = {k: tree_map(v, promote) for k, v in kwargs.items()}
    if not found or any(isinstance(v, np.ndarray) and v.ndim == 0 for _, v in leaves(args2)):
        return False
    rtol, atol, seed, reference = options
    try:
        check_rule(f, *args2, kwargs=kwargs2, rule=None if ck.given is None else ck.make(),
                   rtol=rtol, atol=atol, seed=seed, reference=reference)  # fmt: skip
    except Exception:
        return False
    return True
