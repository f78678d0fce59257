"""What the forward-rule and vjp-rule checks share: the checker, tangents as Duals take them,
the finite-difference reference with a full output cotangent, and the reverse rule's answer.

A forward rule gets each positional argument as `Dual(x, ẋ)` (`ẋ` None: constant; a
tuple/list argument gets a tuple/list of tangents, None for its non-float elements) and a
keyword array (`out=`) as a `Dual` when active, as a plain value when not (as `rrule`
gets CoDuals). The finite-difference side is `_reference.Reference` with two changes:
the output cotangent ȳ is random on every output (also on outputs that alias an
argument: a forward rule has no fdata to share), and the pre-seeded "fdata" rᵢ is zero
for arguments the primal does not mutate, so that for argument j alone

    ⟨ȳ, ẏ⟩ + Σ_{i mutated, active} ⟨rᵢ, ẋᵢ'⟩  ≈  FD rhs(j)          (ẋᵢ': tangent after)

and, with every argument active, the reverse rule's ⟨x̄, ẋ⟩ summed over arguments is the
same number (its pullback starts from ȳ and the post-call cotangents rᵢ).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit import (
    NoFData,
    NoRData,
    NoTangent,
    build_primitive_rrule,
    increment,
    join_tangent,
    randn_tangent,
    registry,
    signature_of,
)
from testutils._call import Call, fdata_like
from testutils._check import RTOL
from testutils._dottest import UncheckableInput
from testutils._messages import describe_call, primal_label
from testutils._reference import Reference
from testutils._statecheck import _perturbed
from testutils._trees import clone, clone_array, leaves, tree_map
from testutils._verdict import RuleCheckError, RuleReport

__all__ = ["FwdChecker", "as_dx", "example_options", "later_call_failed", "tdot", "tnorm",
           "wide_leaves"]  # fmt: skip

_EMPTY = (NoTangent, NoFData, NoRData, type(None))
_SCALARS = (float, complex, np.floating, np.complexfloating)


def example_options(ex: Any, options: dict[str, Any]) -> dict[str, Any]:
    """A check's options for a registration's call example: its tolerances and reference
    unless given."""
    for name in ("rtol", "atol", "reference"):
        options.setdefault(name, getattr(ex, name))
    return options


def later_call_failed(e: RuleCheckError) -> RuleCheckError:
    """The statefulness failure for check `e` failing on a later call with other values."""
    return RuleCheckError(
        "statefulness",
        f"a later call on other values of the same shape failed the {e.check} check "
        f"(does the rule keep something that depends on the values?): {e.detail}",
        e.argument,
        e.signature,
        e.input,
    )


def on_other_values(ck: Any, check: Callable[[Any], object]) -> list[str]:
    """A later call of the rule under check on other values of the same shape: `check` runs
    on a checker derived from `ck` with them. Returns what could not be checked (notes);
    a failure is a statefulness failure (`later_call_failed`)."""
    b_values = _perturbed(ck.call, ck.seed)
    if b_values is None:
        return ["other values n/a (no perturbed inputs the primal accepts)"]
    args_b, kwargs_b = ck.call.plain(clone(b_values))
    sub = ck.derive(
        tuple(args_b), kwargs_b, f"{ck.context} [a later call, on other values of the same shape]"
    )
    try:
        check(sub)
    except UncheckableInput as e:
        return [f"finite differences on other values n/a ({e})"]
    except RuleCheckError as e:
        raise later_call_failed(e) from None
    return []


def as_dx(v: Any, t: Any) -> Any:
    """Full tangent `t` of value `v` as a Dual's `dx`: arrays laid out like `v` (fresh,
    writeable), None for non-differentiable parts (a container of only those: None)."""
    if isinstance(t, _EMPTY):
        return None
    if isinstance(v, np.ndarray):
        if v.dtype.kind not in "fc":
            return None
        out = clone_array(v, fill="empty") if v.size else np.empty(v.shape, v.dtype)
        out.flags.writeable = True
        np.copyto(out, np.asarray(t, dtype=v.dtype))
        return out
    if isinstance(v, (tuple, list)) and isinstance(t, (tuple, list)):
        parts = [as_dx(a, b) for a, b in zip(v, t, strict=True)]
        if all(p is None for p in parts):
            return None
        return tuple(parts) if isinstance(v, tuple) else parts
    if isinstance(v, _SCALARS) and not isinstance(v, bool):
        return t
    return None


def _float_leaf(x: Any) -> bool:
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "fc"
    return isinstance(x, _SCALARS) and not isinstance(x, bool)


def wide_leaves(v: Any, t: Any) -> list[np.ndarray | None]:
    """Tangent `t` of `v` per differentiable leaf of `v` (paths of `v`), in double precision;
    None where `t` has nothing (a zero)."""
    out: list[np.ndarray | None] = []
    for path, leaf in leaves(v):
        if isinstance(leaf, bool) or not (
            (isinstance(leaf, np.ndarray) and leaf.dtype.kind in "fc") or isinstance(leaf, _SCALARS)
        ):
            continue
        tl = _get(t, path)
        if isinstance(tl, _EMPTY):
            out.append(None)
            continue
        a = np.asarray(tl)
        out.append(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))
    return out


def _get(t: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        if isinstance(t, _EMPTY):
            return t
        try:
            t = t[p]
        except (TypeError, IndexError, KeyError):
            return None
    return t


def tdot(v: Any, a: Any, b: Any) -> float:
    """Real inner product ⟨a, b⟩ of two tangents of value `v` (None parts are zeros)."""
    total = 0.0
    for x, y in zip(wide_leaves(v, a), wide_leaves(v, b), strict=True):
        if x is None or y is None or x.size == 0:
            continue
        total += float(np.real(np.vdot(x.ravel(), y.ravel())))
    return total


def tnorm(v: Any, a: Any) -> float:
    return math.sqrt(max(tdot(v, a, a), 0.0))


class FwdChecker:
    """One call under check (forward or vjp rule): naming, failing, the reference."""

    kind = "frule"
    rule: Any = None  # (the rule under check, once looked up)

    def __init__(
        self,
        f: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        rule: Any,
        rtol: float | None,
        atol: float | None,
        seed: int,
        reference: Any,
        rrule: Any,
        context: str = "",
    ) -> None:
        self.f, self.args, self.kwargs, self.reference = f, args, kwargs, reference
        self.call = Call(f, args, kwargs, reference)
        self.sig = signature_of(f, *args, **kwargs)
        self.label = repr(self.sig)
        self.who = primal_label(f, reference)
        self.given, self.given_rrule = rule, rrule
        self.user_rtol, self.user_atol = rtol, atol
        self.seed = seed
        self.context = context
        self.report = RuleReport(self.label, kind=self.kind)

    def derive(self, args: tuple[Any, ...], kwargs: dict[str, Any], context: str) -> Any:
        sub = type(self)(
            self.f,
            args,
            kwargs,
            self.given,
            self.user_rtol,
            self.user_atol,
            self.seed,
            self.reference,
            self.given_rrule,
            context,
        )
        sub.rule = getattr(self, "rule", None)
        return sub

    def fail(self, check: str, message: str, var: int | None = None) -> None:
        name = None if var is None else self.call.names[var]
        where = describe_call(self.call.names, self.call.values, self.call.fixed_kwargs, self.seed)
        raise RuleCheckError(check, message + self.context, name, self.label, where)

    def rtols(self, ref: Reference) -> tuple[float, float]:
        rtol = RTOL[ref.precision] if self.user_rtol is None else self.user_rtol
        return rtol, 0.0 if self.user_atol is None else self.user_atol

    def differentiable(self) -> list[int]:
        """The variables with a float part (a list of ints has a tangent type, no tangent)."""
        return [
            i
            for i, (v, d) in enumerate(zip(self.call.values, self.call.differentiable, strict=True))
            if d and any(_float_leaf(x) for _, x in leaves(v))
        ]

    def lookup(self, table: Any, what: str) -> Any:
        """Check "registered": the rule this call dispatches to in `table` (or the given one)."""
        from rulekit import AmbiguousRuleError, MissingRuleError

        if self.given is not None:
            try:
                reg = table.find(self.sig)
            except AmbiguousRuleError:
                reg = None
            registered = reg is not None and reg.impl is self.given
            self.report.checks["registered"] = (
                "pass" if registered else "n/a: rule given explicitly, not registered"
            )
            return self.given
        try:
            reg = table.lookup(self.sig)
        except (MissingRuleError, AmbiguousRuleError) as e:
            raise RuleCheckError("registered", f"no {what}: {e}", None, self.label) from None
        self.report.checks["registered"] = "pass"
        return reg.impl

    # -- the reference -----------------------------------------------------------------

    def build_reference(
        self, fd: bool, steps: dict[int, list[float]] | None = None, like: Reference | None = None
    ) -> Reference:
        """The primal's behaviour, ȳ on every output, r zero except on mutated arguments, and
        (if `fd`) finite differences."""
        try:
            ref = Reference.build(self.call, self.seed, fd=False, like=like)
        except Exception as e:
            raise ValueError(
                f"check_{self.kind}: {self.who} raised {type(e).__name__} on {self.label}: {e}. "
                "Give arguments the primal function accepts."
            ) from e
        rng = np.random.default_rng(self.seed + 101)
        ref.ybar = NoTangent() if ref.y is None else randn_tangent(ref.y, rng)
        ref.seeds = [
            (s if i in ref.mutated else _zero_seed(self.call.values[i])) if s is not None else None
            for i, s in enumerate(ref.seeds)
        ]
        if fd:
            if steps is None:  # (one step first: `full_sweep` if a test fails there)
                steps = {j: [first_step(ref, j)] for j in self.differentiable()}
            ref._finite_differences(steps)
        return ref

    # -- the reverse rule ----------------------------------------------------------------

    def reverse_cotangents(self, ref: Reference) -> list[Any] | None:
        """x̄ of every variable from the reverse rule with every argument active, its pullback
        started from ȳ and the post-call cotangents r (None: no reverse rule, or it refuses)."""
        from rulekit import TracingError
        from testutils._check import execute

        if self.given_rrule is False:
            return None
        if self.given_rrule is not None:
            rule = self.given_rrule
        else:
            if registry.find(self.sig) is None:
                return None
            rule = build_primitive_rrule(self.sig)
        active = frozenset(self.differentiable())
        try:
            run = execute(self.call, ref, rule, active, list(ref.seeds))
        except TracingError:
            return None
        sums: dict[int, Any] = {}
        rdata = run.rdata if isinstance(run.rdata, tuple) else ()
        for k, var in enumerate(self.call.positional_vars()):
            if var in active and k + 1 < len(rdata):
                sums[var] = increment(sums.get(var, NoRData()), rdata[k + 1])
        return [
            join_tangent(v, run.fdata[i], sums.get(i, NoRData())) if i in active else None
            for i, v in enumerate(self.call.values)
        ]


def first_step(ref: Reference, j: int) -> float:
    """The step tried first for argument j: the middle of the kit's sweep (where central
    differences of smooth functions are best: truncation ~h², rounding ~ε/h)."""
    from testutils._fdmath import STEPS
    from testutils._trees import has_narrow

    wide = has_narrow(ref.call.values)  # (FD in double precision where it is allowed)
    steps = STEPS["double" if wide else ref.precision]
    return steps[len(steps) // 2]


def full_sweep(ref: Reference, js: list[int]) -> bool:
    """Finite differences along the arguments `js` at every step of the sweep (True if any
    of them had fewer before)."""
    from testutils._fdmath import LARGE, SMALL_STEPS, STEPS
    from testutils._trees import max_abs

    p = "double" if ref.wide else ref.precision
    want = {
        j: len(STEPS[p]) + (len(SMALL_STEPS[p]) if max_abs(ref.call.values[j]) > LARGE else 0)
        for j in js
    }
    if all(len(ref.fd[j].steps) >= want[j] for j in js):
        return False
    saved = dict(ref.fd)
    ref._finite_differences({k: [] for k in saved if k not in js})
    for k, term in saved.items():
        if k not in js:
            ref.fd[k] = term
    return True


def _zero_seed(v: Any) -> Any:
    fd = fdata_like(v)
    for _, a in leaves(fd):
        if isinstance(a, np.ndarray):
            a.flags.writeable = True
    return fd


def clone_values(values: list[Any]) -> list[Any]:
    return [clone(v) for v in values]


def relayout_tangents(values: list[Any], dxs: list[Any]) -> list[Any]:
    """Each Dual `dx` laid out like its (relaid) value."""
    out = []
    for v, t in zip(values, dxs, strict=True):
        out.append(None if t is None else as_dx(v, tree_map(t, lambda e: e)))
    return out
