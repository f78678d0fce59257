"""Memory layout never changes a rule's result, on its first call or any later one (issue #11).

For every example attached to every bundled registration, a *fresh* rule object
computes the reference on the example as given: the primal output, the rdata,
every argument's cotangent (pullback with a fixed random output cotangent on
every output, fdata pre-seeded with fixed random values) and the arguments after
the pullback. Then *one* rule object runs three rounds over copies of every
array argument in each layout (C-, F-ordered, negative strides, a strided view,
and a mix of those per argument), plus per round one call whose fdata is laid
out unlike its primal, and every run must agree with the reference. Rounds and
layouts alternate on the one object, so that a pooled buffer that a pullback
returns dirty, or laid out for another call, shows up as a wrong second or third
call (issue #11: a kernel cleared a *copy* of a pooled gradient that `reshape`
had silently made). A plain rule (not a `StatefulRRule`) keeps nothing between
calls and gets one round.

Each run also checks the invariant that an output's fdata has its primal's
strides: views of the output must alias its fdata exactly as they alias the
output (`rules._support.shape.view_or_new`, `rules._support.layout.zeros_like_exact`).
Where numpy's own result depends on the layout (`ravel(order="K")`, scipy BLAS
overwriting only an F-contiguous `c`) the reference is a fresh rule on that
layout; where numpy refuses a layout (`np.dot(out=)` of an F-ordered out), the
rule must refuse it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rules  # noqa: F401  (importing the package registers every bundled rule)
from rulekit import (
    Example,
    NoRData,
    Registration,
    StatefulRRule,
    build_primitive_rrule,
    increment,
    randn_tangent,
    registry,
    signature_of,
    split_tangent,
)
from rules._support.shape import ViewMismatchError
from testutils._call import Call, Run, writable_fdata
from testutils._layouts import VARIANTS, relayout_values
from testutils._reference import precision_of
from testutils._statecheck import AGREE
from testutils._trees import clone, leaves, same_value, tree_close

ROUNDS = 3


def _examples(reg: Registration) -> list[Example]:
    ex = reg.examples
    if ex is None:
        return []
    return list(ex() if callable(ex) else ex)


def _cases() -> list[Any]:
    cases = []
    for reg in registry.entries():
        if reg.module.split(".")[0] not in ("rules", "rulekit"):
            continue
        for i, ex in enumerate(_examples(reg)):
            label = ex.name or str(i)
            cases.append(pytest.param(reg, ex, id=f"{reg.describe().split(' -> ')[0]}#{label}"))
    return cases


# -- layouts (copies in C, F, negative-stride and strided layouts: testutils._layouts) -----------


def primal_behaviour(call: Call, values: list[Any]) -> tuple[Any, frozenset[int]] | None:
    """The primal's output and the arguments it writes into, on copies of `values`;
    None when the primal rejects them."""
    after = [clone(v) for v in values]
    try:
        y = call.primal(after)
    except Exception:
        return None
    changed = frozenset(i for i, (a, b) in enumerate(zip(after, values, strict=True))
                        if not same_value(a, b))  # fmt: skip
    return y, changed


def draw_fdata(v: Any, rng: np.random.Generator) -> Any:
    """Random pre-seeded fdata for argument value `v` (its arrays laid out like `v`'s)."""
    fd = writable_fdata(v)
    for _, a in leaves(fd):
        if isinstance(a, np.ndarray):
            np.copyto(a, randn_tangent(a, rng))
    return fd


# -- one run ----------------------------------------------------------------------------------


class Outcome:
    """What one forward + pullback produced: output, rdata, fdata, arguments afterwards."""

    def __init__(self, run: Run, y: Any, rdata: Any, determined: bool) -> None:
        # (an example with a `reference`, e.g. np.empty_like, has an arbitrary output)
        self.parts = [("output", y if determined else None), ("rdata", rdata)]
        self.parts += [(f"fdata of argument {i}", run.fdata[i]) for i in sorted(run.active)]
        self.parts += [(f"argument {i} after the pullback", v) for i, v in enumerate(run.values)]


def fdata_layout_error(y: Any, dy: Any) -> str | None:
    """Why output fdata `dy` is not laid out like output `y` (None: it is).

    A read-only output whose elements overlap (`np.broadcast_to`: a zero stride) has
    compact fdata of its own: a view with its strides could not accumulate.
    """
    for (path, a), (_, d) in zip(leaves(y), leaves(dy), strict=False):
        if not (isinstance(a, np.ndarray) and isinstance(d, np.ndarray)) or a.size == 0:
            continue
        dims = [(s, t) for s, t, n in zip(a.strides, d.strides, a.shape, strict=True) if n > 1]
        if any(s == 0 for s, _ in dims):
            continue
        if any(s != t for s, t in dims):
            return (
                f"output{''.join(f'[{p}]' for p in path)} has strides {a.strides} but its "
                f"fdata has strides {d.strides}: views of it would not alias its fdata"
            )
    return None


def run_once(
    call: Call, rule: Any, seeds: list[Any], ybar: Any, values: list[Any], fdata: str | None = None
) -> Outcome:
    """Forward + pullback (fdata pre-seeded with `seeds`, output cotangent `ybar`) on
    `values`; `fdata` names a layout for every array fdata (default: the primal's)."""
    active = frozenset(i for i, d in enumerate(call.differentiable) if d)
    run = Run(call, rule, active, seeds, values)
    if fdata is not None:
        run.fdata = relayout_values(run.fdata, fdata)
        run.args, run.kwargs = call.coduals(run.values, run.fdata, active)
    out, pb = run.forward()
    y = clone(out.x)
    if out.dx is None:
        rdata = pb(NoRData())
    else:
        if fdata is None:
            why = fdata_layout_error(out.x, out.dx)
            assert why is None, why
        fpart, rpart = split_tangent(out.x, ybar)
        increment(out.dx, fpart)
        rdata = pb(rpart)
    return Outcome(run, y, rdata, call.reference is call.f)


def agree(got: Outcome, want: Outcome, rtol: float, what: str) -> None:
    for (name, g), (_, w) in zip(got.parts, want.parts, strict=True):
        if same_value(g, w):  # (most are bitwise equal: skip the slower tolerance test)
            continue
        why = tree_close(g, w, rtol, name)
        assert why is None, f"{what}: {why}"


# -- the test -----------------------------------------------------------------------------------

#: per round, primal and fdata laid out differently: fdata the engine should never make, but
#: which a rule must still handle (right, or refused with ViewMismatchError for a view it
#: cannot alias); F primal with C fdata is the case of issue #11
MISMATCHED = (("F", "C"), ("C", "F"), ("negative", "strided"))

CASES = _cases()


@pytest.mark.parametrize(("reg", "ex"), CASES)
def test_layouts_agree(reg: Registration, ex: Example) -> None:
    call = Call(reg.f, ex.args, ex.kwargs, ex.reference)
    base = primal_behaviour(call, call.values)
    assert base is not None
    rng = np.random.default_rng(0)
    seeds = [
        draw_fdata(v, rng) if d else None
        for v, d in zip(call.values, call.differentiable, strict=True)
    ]
    # A cotangent on every output, aliased ones too (a view or a copy, depending on the
    # layout, must give the same input cotangents: the engine seeds its shared fdata).
    ybar = randn_tangent(base[0], rng)
    sig = signature_of(reg.f, *ex.args, **ex.kwargs)
    make: Callable[[], Any] = lambda: build_primitive_rrule(sig)  # noqa: E731
    rtol = AGREE[precision_of([call.values, base[0]])]
    want = run_once(call, make(), seeds, ybar, call.fresh())
    plan: dict[str, tuple[list[Any], Outcome | None]] = {}
    for variant in VARIANTS:
        values = relayout_values(call.values, variant)
        behaviour = primal_behaviour(call, values)
        if behaviour is None:
            # numpy refuses this layout (np.dot(out=) wants a C-contiguous out): so must
            # the rule, on every call.
            plan[variant] = (values, None)
        elif behaviour[1] == base[1] and tree_close(behaviour[0], base[0], rtol) is None:
            plan[variant] = (values, want)
        else:
            # The primal's own result depends on the layout: ravel/reshape(order="K"/"A")
            # read memory order; scipy's BLAS wrappers overwrite `c`/`y` (overwrite_c=1)
            # only when it is F-contiguous of the routine's dtype, else return a new
            # array, another state map. Compare with a fresh rule on this layout instead.
            plan[variant] = (values, run_once(call, make(), seeds, ybar, clone(values)))
    rule = make()  # one object for every later call: pooled state carries over
    # A plain rule keeps no state between calls: one round of every layout suffices.
    stateful = isinstance(rule, StatefulRRule)
    for r in range(ROUNDS if stateful else 1):
        for variant, (values, expect) in plan.items():
            what = f"call {r + 1} of one rule object on {variant} layouts"
            if expect is None:
                with pytest.raises(Exception):  # noqa: B017  (numpy's own error)
                    run_once(call, rule, seeds, ybar, clone(values))
                continue
            agree(run_once(call, rule, seeds, ybar, clone(values)), expect, rtol, what)
        for primal, fdata in MISMATCHED[r : r + 1] if stateful else MISMATCHED:
            values, expect = plan[primal]
            if expect is None:
                continue
            what = f"call {r + 1} of one rule object on {primal} layouts with {fdata} fdata"
            try:
                got = run_once(call, rule, seeds, ybar, clone(values), fdata)
            except ViewMismatchError:
                continue  # a view of the primal that the fdata cannot follow: refused
            agree(got, expect, rtol, what)
