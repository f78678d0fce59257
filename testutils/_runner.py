"""Run the conformance kit over whole rule packages (`rulekit check`, the pytest plugin).

A *rule package* is a module whose import registers rules. `load` imports it
and finds every registration it made (see "Discovery" below); for each one,
inputs come from the examples attached at registration or, failing that, from
hypothesis strategies built from the registration's type patterns (fixed
seed). Each registration gets one `RuleResult`: pass, fail (with the failing
check, argument, input and message), or *not checked* with the reason (never
skipped silently).

Discovery (`testutils._packages`): a registration belongs to the module whose top-level code was
running when it was made (the innermost module being imported), recorded in
`Registration.meta["importing"]`; so a rule registered through a helper
function defined elsewhere belongs to the module that called the helper while
it was being imported, and the rules of another rule package that it imports
(or that rulekit loads lazily meanwhile) belong to that other package.
The registry records it on every registration, so a package imported before
`load` (the bundled `rules`, say) is found the same way; a registration without
the record falls back to the module that called `register`. Modules a package
defers (`rulekit.registry.defer`) are imported by `load` whatever their
triggers, and count as the package's when they are its submodules.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rulekit import Example, Registration
from testutils._packages import label, owner

__all__ = [
    "CHECKS",
    "RuleResult",
    "check_registration",
    "describe_input",
    "run_checks",
]

CHECKS = (
    "interface",
    "registered",
    "mutation",
    "aliasing",
    "correctness",
    "statefulness",
    "allocation",
)


@dataclass
class RuleResult:
    """The kit's verdict on one registration."""

    signature: str
    module: str  # the rule package module it belongs to (`owner`)
    status: str  # "pass" | "fail" | "not checked"
    checks: dict[str, str] = field(default_factory=dict)
    allocations: int | None = None  # a stateful rule's, once warm (the most over its inputs)
    stateful: bool = False
    seconds: float = 0.0
    inputs: str = ""  # "3 examples" or "20 generated"
    message: str = ""
    check: str = ""  # the failing check ("" if the rule or the kit raised something else)
    argument: str = ""  # the argument the failing check concerns, if any
    input: str = ""  # the input it failed on: which example or generated call, and its values
    kind: str = "reverse"  # "reverse" (rrule or factory), "forward" (frule) or "vjp"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- finding rule packages and their registrations ---------------------------------------


# -- checking one registration -----------------------------------------------------------


def _examples(reg: Registration) -> list[Example]:
    ex = reg.examples
    if ex is None:
        return []
    return list(ex() if callable(ex) else ex)


def _layout(a: np.ndarray) -> str:
    if a.ndim == 0:
        return "0-d"
    if any(s < 0 for s in a.strides):
        return "negative strides"
    if a.ndim > 1 and a.flags.c_contiguous and a.flags.f_contiguous:
        return "C- and F-contiguous"
    if a.flags.c_contiguous:
        return "C-contiguous" if a.ndim > 1 else "contiguous"
    if a.flags.f_contiguous:
        return "F-contiguous"
    return "strided"


def _describe_value(x: Any) -> str:
    if isinstance(x, np.ndarray):
        with np.printoptions(threshold=24, edgeitems=3, precision=4):
            values = " ".join(np.array2string(x, separator=", ").split())
        return f"{x.dtype} array, shape {x.shape}, {_layout(x)}: {values}"
    if isinstance(x, (tuple, list)):
        inner = ", ".join(_describe_value(v) for v in x)
        return f"({inner})" if isinstance(x, tuple) else f"[{inner}]"
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def describe_input(args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> str:
    """A call's arguments, one line each: dtype, shape, layout and values."""
    parts = [f"argument {i}: {_describe_value(a)}" for i, a in enumerate(args)]
    parts += [f"{k}={_describe_value(v)}" for k, v in (kwargs or {}).items()]
    return "\n".join(parts) if parts else "no arguments"


def _flatten(e: BaseException) -> list[BaseException]:
    """The leaf exceptions of an exception group (hypothesis reports every distinct failure)."""
    inner = getattr(e, "exceptions", None)
    if isinstance(inner, (list, tuple)) and inner:
        return [leaf for sub in inner for leaf in _flatten(sub)]
    return [e]


def _raw_kit_input(e: BaseException) -> str:
    text = getattr(e, "input", "")
    return text if isinstance(text, str) else ""


def _kit_input(e: BaseException) -> str:
    """The input a `RuleCheckError` describes itself (with the kit's seeds), if it does,
    one part a line."""
    text = _raw_kit_input(e).strip().removeprefix("input: ")
    return "\n".join(part.strip() for part in text.split("; "))


def _message(e: BaseException) -> str:
    """A failure's message in full, without the input (reported on its own)."""
    from testutils import RuleCheckError

    if isinstance(e, RuleCheckError):
        text, kit_input = str(e), _raw_kit_input(e)
        if kit_input and text.endswith("\n" + kit_input):
            text = text[: -len(kit_input) - 1]
        return text
    # A crash inside the rule (or the kit) is a failure of the rule.
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-6))
    return f"{type(e).__name__}: {e}\n{tb.rstrip()}"


def _record_failure(result: RuleResult, error: BaseException, where: str, described: str) -> None:
    """Record a failure: `where` says which input (an example, a generated one), `described`
    its arguments (unless the kit's error describes them itself)."""
    from testutils import RuleCheckError

    result.status = "fail"
    leaves = _flatten(error)
    first = next((e for e in leaves if isinstance(e, RuleCheckError)), None)
    if first is not None:
        result.check = first.check
        result.argument = first.argument or ""
        result.checks[first.check] = "FAIL"
    lead = first if first is not None else leaves[0]
    result.input = "\n".join(t for t in (where, _kit_input(lead) or described) if t)
    if len(leaves) == 1:
        result.message = _message(leaves[0])
        return
    messages = []
    for i, e in enumerate(leaves):
        own_input = _kit_input(e) or getattr(e, "rulekit_input", "") or "unknown"
        messages.append(f"[failure {i + 1} of {len(leaves)}] {_message(e)}\ninput: {own_input}")
    result.message = "\n".join(messages)


#: The kind of rule a registration is, as reports name it.
KIND = {"rrule": "reverse", "factory": "reverse", "frule": "forward", "vjp": "vjp"}


def _checker(reg: Registration) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(check one example, check one call) for the registration's kind of rule."""
    import testutils

    if reg.kind == "frule":
        return testutils.check_frule_example, testutils.check_frule
    if reg.kind == "vjp":
        return testutils.check_vjp_example, testutils.check_vjp_rule
    return testutils.check_example, testutils.check_rule


def check_registration(reg: Registration, n_examples: int = 10, seed: int = 0) -> RuleResult:
    """Check one registration (a reverse, forward or vjp rule) on its examples, or on
    `n_examples` generated inputs. Whatever the rule (or the kit) raises is the rule's
    failure, reported in the result, never raised."""
    check_example, _ = _checker(reg)
    result = RuleResult(label(reg), owner(reg), "pass", stateful=reg.kind == "factory",
                        kind=KIND.get(reg.kind, reg.kind))  # fmt: skip
    start = time.perf_counter()
    where, described = "loading the registration's examples", ""
    try:
        examples = _examples(reg)
        if examples:
            result.inputs = f"{len(examples)} examples"
            reports = []
            for i, ex in enumerate(examples):
                name = f" ({ex.name})" if ex.name else ""
                where = f"example {i + 1} of {len(examples)}{name}"
                described = describe_input(ex.args, ex.kwargs)
                reports.append(check_example(reg.f, ex))
            _merge(result, reports)
        else:
            _fuzz(reg, n_examples, seed, result)
    except Exception as e:
        if result.status == "pass":
            _record_failure(result, e, where, described)
    result.seconds = time.perf_counter() - start
    return result


def _merge(result: RuleResult, reports: list[Any]) -> None:
    """One status per check over all inputs: a failure is raised, so here pass beats n/a."""
    for rep in reports:
        for name, status in rep.checks.items():
            if result.checks.get(name) is None or not result.checks[name].startswith("pass"):
                result.checks[name] = status
        if rep.allocations is not None and result.stateful:  # a plain rule's count: in checks
            result.allocations = max(result.allocations or 0, rep.allocations)


def _fuzz(reg: Registration, n: int, seed: int, result: RuleResult) -> None:
    """Check on `n` generated inputs; `not checked` if they cannot be generated."""
    from hypothesis import HealthCheck, given, reject, settings
    from hypothesis import seed as hseed
    from hypothesis.errors import Unsatisfiable

    from testutils import strategies

    _, check_rule = _checker(reg)

    try:
        strategy = strategies.args_for(reg)
    except strategies.Unsupported as e:
        result.status = "not checked"
        result.message = f"no examples attached, and inputs cannot be generated: {e}"
        return
    reports: list[Any] = []
    last: list[tuple[Any, ...]] = []  # the input checked last (after shrinking: the minimal one)

    @hseed(seed)
    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(args: tuple[Any, ...]) -> None:
        if not strategies.accepted(reg.f, args):
            reject()  # the primal refuses these inputs: not a case for the rule
        last[:] = [args]
        described = describe_input(args)  # before the call: the rule may (wrongly) mutate
        try:
            reports.append(check_rule(reg.f, *args))
        except Exception as e:
            e.rulekit_input = described  # type: ignore[attr-defined]
            raise

    try:
        run()
    except Unsatisfiable:
        reports.clear()
    except Exception as e:
        leaves = _flatten(e)
        described = getattr(leaves[0], "rulekit_input", None)
        if described is None:
            described = describe_input(last[0]) if last else "unknown"
        _record_failure(result, e, f"generated input (hypothesis, seed {seed})", described)
        result.inputs = f"generated (seed {seed})"
        return
    if not reports:
        result.status = "not checked"
        result.message = (
            "no examples attached, and the primal rejected every generated input (it raised or "
            "returned non-finite values): attach examples to the registration"
        )
        return
    result.inputs = f"{len(reports)} generated"
    _merge(result, reports)


# -- checking many -----------------------------------------------------------------------


def run_checks(
    regs: list[Registration],
    n_examples: int = 10,
    seed: int = 0,
    jobs: int = 1,
    fail_fast: bool = False,
    on_result: Callable[[int, RuleResult], None] | None = None,
) -> list[RuleResult]:
    """Check every registration (in `jobs` worker processes), in order."""
    results: list[RuleResult] = []
    it = _iter_results(regs, n_examples, seed, jobs)
    try:
        for i, res in enumerate(it):
            results.append(res)
            if on_result is not None:
                on_result(i, res)
            if fail_fast and res.status == "fail":
                break
    finally:
        it.close()  # stop the workers (fail fast, or the reader of our output went away)
    return results


#: The registrations being checked, inherited by forked worker processes.
_WORK: list[Registration] = []


def _iter_results(
    regs: list[Registration], n: int, seed: int, jobs: int
) -> Generator[RuleResult, None, None]:
    import multiprocessing as mp

    if jobs <= 1 or len(regs) < 2 or "fork" not in mp.get_all_start_methods():
        for reg in regs:
            yield check_registration(reg, n, seed)
        return
    from concurrent.futures import ProcessPoolExecutor

    global _WORK
    _WORK = list(regs)
    pool = ProcessPoolExecutor(
        min(jobs, len(regs)), mp_context=mp.get_context("fork"), initializer=_init_worker
    )
    try:
        futures = [pool.submit(_check_by_index, i, n, seed) for i in range(len(regs))]
        for future in futures:
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _WORK = []


def _init_worker() -> None:
    np.seterr(all="warn")


def _check_by_index(index: int, n: int, seed: int) -> RuleResult:
    return check_registration(_WORK[index], n, seed)
