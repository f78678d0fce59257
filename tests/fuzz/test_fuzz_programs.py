"""Differential fuzzing of `rulekit.value_and_grad` on random NumPy programs (issue #11), eager
and with `compile=True` (issue #15: each program also gets a compiled object, its `copy` drawn).

The fuzzer runs hypothesis *campaigns* with fixed seeds 0, 1, 2, ... until its budget is spent.
A campaign stops generating soon after it finds a defect and shrinks it; the next campaign skips
the defects already reported (see `_known`) and looks for new ones. Every distinct defect is
reported at the end, each with its shrunk, runnable reproducer.

Budget (see docs/fuzzing.md):

- CI (no variable set): CI_EXAMPLES programs, and no new campaign after CI_SECONDS;
- RULEKIT_FUZZ_EXAMPLES=N: N programs;
- RULEKIT_FUZZ_SECONDS=T: T seconds (with RULEKIT_FUZZ_EXAMPLES too: whichever ends first);
- RULEKIT_FUZZ_SEED=S: campaigns from seed S on (S, S + 1, ...; default 0).

    RULEKIT_FUZZ_SECONDS=3600 python -m pytest tests/fuzz -k random_programs -s
"""

from __future__ import annotations

import math
import os
import time

from fuzz.generate import programs
from fuzz.oracle import (
    CLOCK,
    CLOSEST,
    FIRST,
    REFUSALS,
    STATS,
    CallPlan,
    Defect,
    check_program,
)
from fuzz.program import Program
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.internal.conjecture import engine as hypothesis_engine
from hypothesis.reporting import current_reporter, with_reporter

CI_EXAMPLES = 1500  # with a compile=True object each, the time 2000 eager-only programs took
CI_SECONDS = 75.0  # no new campaign after this (defects found: each costs up to ~40 s to shrink)
CAMPAIGN = 2000  # programs per campaign at most
EXAMPLES = int(os.environ.get("RULEKIT_FUZZ_EXAMPLES", "0") or 0)
SECONDS = float(os.environ.get("RULEKIT_FUZZ_SECONDS", "0") or 0)
# the seed of the first campaign (the next ones count up): another start, other programs
FIRST_SEED = int(os.environ.get("RULEKIT_FUZZ_SEED", "0") or 0)
# Shrinking stops after this long: the failing examples are reported as shrunk so far (hypothesis
# can spend many minutes shrinking several defects of these large examples). Hypothesis has no
# setting for it; its engine's MAX_SHRINKING_SECONDS (default 300) is set for each campaign.
SHRINK_SECONDS = float(os.environ.get("RULEKIT_FUZZ_SHRINK_SECONDS", "0") or 0) or 20.0
CALLS = 3  # rounds of fresh inputs per program (eager objects: 3 calls, compiled: 6)
PLANS = CALLS + 2  # spare input draws for calls whose inputs leave the smooth region
MAX_INPUTS = 4  # inputs of a generated program at most (fuzz.generate: 3 arrays, an int)

_layouts = st.tuples(*[st.integers(0, 4)] * MAX_INPUTS)
# How the layouts of one side (the inputs of copy=True objects, or of copy=False ones) go from
# round to round. "free": drawn anew each round (an object sees layout changes); "same": the
# first round's every round, and "alternate": A, B, A, B, ... (a compiled object replays its
# trace on later calls, and in "alternate" picks one of two recorded traces: calls 2+ are the
# replay path only where the layouts come back).
PATTERNS = ("free", "same", "alternate")


@st.composite
def plans(draw: st.DrawFn) -> list[CallPlan]:
    drawn = [draw(st.tuples(_layouts, _layouts, st.integers(0, 5))) for _ in range(PLANS)]
    copy_pattern, nocopy_pattern = draw(st.sampled_from(PATTERNS)), draw(st.sampled_from(PATTERNS))

    def layouts(pattern: str, k: int, side: int) -> tuple[int, ...]:
        j = {"free": k, "same": 0, "alternate": k % 2}[pattern]
        return drawn[j][side]

    return [
        CallPlan(
            seed=draw(st.integers(0, 2**32 - 1)),
            layouts_copy=layouts(copy_pattern, k, 0),
            layouts_nocopy=layouts(nocopy_pattern, k, 1),
            flip=flip == 5,
        )
        for k, (_, _, flip) in enumerate(drawn)
    ]


_failing: set[str] = set()  # examples that raised a Defect: always re-run (hypothesis replays)
_deadline = {"run": math.inf}
# defect signature -> step families of the (shrunk) programs already reported. A later program
# with the same signature and a superset of those families is taken for the same defect and
# passes, so hypothesis keeps searching for new defects instead of re-finding the first.
_known: dict[str, list[frozenset[str]]] = {}


def _kinds(program: Program) -> frozenset[str]:
    return frozenset(s.kind for s in program.steps)


def _check(program: Program, call_plans: list[CallPlan], compiled_copy: bool) -> None:
    key = repr(program) + repr(call_plans) + repr(compiled_copy)
    if time.monotonic() > _deadline["run"] and key not in _failing:
        return  # past the deadline: only known failures still fail (hypothesis replays them)
    try:
        status = check_program(program, call_plans, CALLS, compiled=(compiled_copy,))
    except Defect as d:
        if key not in _failing and any(k <= _kinds(program) for k in _known.get(d.kind, ())):
            STATS["known defects seen again"] += 1
            return
        _failing.add(key)
        raise
    if status == "ill-posed":
        reject()


def _campaign(n_examples: int, seed_value: int) -> None:
    """One hypothesis run over `n_examples` programs, reproducible from `seed_value`."""

    @settings(
        max_examples=n_examples,
        deadline=None,
        database=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(program=programs(), call_plans=plans(), compiled_copy=st.booleans())
    def campaign(program: Program, call_plans: list[CallPlan], compiled_copy: bool) -> None:
        _check(program, call_plans, compiled_copy)

    saved = hypothesis_engine.MAX_SHRINKING_SECONDS
    hypothesis_engine.MAX_SHRINKING_SECONDS = max(1, round(SHRINK_SECONDS))
    outer = current_reporter()

    def report(text: object) -> None:  # hypothesis's warning would say "five minutes"
        if str(text).startswith("WARNING: Hypothesis has spent more than five minutes"):
            text = f"(shrinking stopped after RULEKIT_FUZZ_SHRINK_SECONDS={SHRINK_SECONDS:g} s)"
        outer(text)

    try:
        with with_reporter(report):
            hypothesis_seed(seed_value)(campaign)()
    finally:
        hypothesis_engine.MAX_SHRINKING_SECONDS = saved


def summary(elapsed: float, campaigns: int) -> str:
    keys = ["programs ok", "programs refused", "programs ill-posed", "engine calls"]
    head = ", ".join(f"{k}: {STATS[k]}" for k in keys)
    first = "".join(
        f"\n  program {n:6d} ({t:7.1f} s): {sig}"
        for sig, (n, t) in sorted(FIRST.items(), key=lambda kv: kv[1])
    )
    refusals = "".join(f"\n  {n} x {msg}" for msg, n in REFUSALS.most_common(8))
    closest = ", ".join(f"{k} {v:.2g}" for k, v in sorted(CLOSEST.items()))
    replayed = f"{STATS['compiled calls replayed']} of {STATS['compiled calls']}"
    return (
        f"fuzz: {STATS['programs']} programs in {elapsed:.1f} s, {campaigns} campaigns ({head}; "
        f"{STATS['gradients compared']} gradients compared; {STATS['tangents compared']} jvp "
        f"tangents compared, {STATS['forward refused']} jvp refused for a missing forward rule; "
        f"{STATS['forward refused (layout)']} jvp refused a write into a view laid out unlike "
        f"its tangent; {STATS['hvps compared']} hvps compared, {STATS['hvp refused']} refused, "
        f"{STATS['hvp ill-conditioned']} programs too close to a kink for second order; "
        "compile=True calls that replayed a "
        f"trace: {replayed})\n"
        f"largest |error| / tolerance of a passing gradient: {closest or 'none'}\n"
        f"defects, first seen at:{first or ' none'}\n"
        f"most common refusals:{refusals or ' none'}"
    )


def _defects(e: BaseException) -> list[BaseException]:
    subs = getattr(e, "exceptions", None)  # an ExceptionGroup: hypothesis found several bugs
    if subs is not None:
        return [x for sub in subs for x in _defects(sub)]
    return [e]


def test_random_programs_against_numpy_and_finite_differences() -> None:
    start = CLOCK["start"] = time.monotonic()
    for counter in (STATS, REFUSALS, FIRST, CLOSEST):
        counter.clear()
    if SECONDS or EXAMPLES:
        budget, seconds = (EXAMPLES or math.inf), (SECONDS or math.inf)
    else:
        budget, seconds = CI_EXAMPLES, CI_SECONDS
    _deadline["run"] = start + seconds
    found: list[BaseException] = []
    seed_value = FIRST_SEED
    while STATS["programs"] < budget and time.monotonic() < _deadline["run"]:
        try:
            _campaign(int(min(CAMPAIGN, budget - STATS["programs"])), seed_value)
        except Exception as e:  # collect every distinct defect, report all at the end
            for d in _defects(e):
                found.append(d)
                if isinstance(d, Defect) and d.program is not None:
                    _known.setdefault(d.kind, []).append(_kinds(d.program))
        seed_value += 1
    print(summary(time.monotonic() - start, seed_value - FIRST_SEED))
    if found:
        raise AssertionError(
            f"{len(found)} distinct defects:\n\n"
            + "\n\n".join("\n".join([str(d), *getattr(d, "__notes__", ())]) for d in found)
        )
