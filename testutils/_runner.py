"""Run the conformance kit over whole rule registries (`rulekit check`, the pytest plugin).

For every registration a module made, inputs come from the examples attached
at registration or, failing that, from hypothesis strategies built from the
registration's type patterns (fixed seed). Each registration gets one
`RuleResult`: pass, fail (with the failing check), or *not checked* with the
reason (never skipped silently).
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from rulekit import Example, registry
from rulekit._registry import Registration

__all__ = ["RuleResult", "check_registration", "collect", "resolve_module", "run_checks"]

ENTRY_POINT_GROUP = "rulekit.rules"
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
    module: str
    status: str  # "pass" | "fail" | "not checked"
    checks: dict[str, str] = field(default_factory=dict)
    allocations: int | None = None
    stateful: bool = False
    seconds: float = 0.0
    inputs: str = ""  # "3 examples" or "20 generated"
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def resolve_module(name: str) -> str:
    """An entry-point name of the `rulekit.rules` group, or a module name, as a module name."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.value.split(":")[0]
    return name


def installed_rule_packages() -> dict[str, str]:
    """Every rule package registered in the `rulekit.rules` entry-point group: name → module."""
    return {ep.name: ep.value.split(":")[0] for ep in entry_points(group=ENTRY_POINT_GROUP)}


def collect(modules: Iterable[str], select: str | None = None) -> list[Registration]:
    """Import the modules and list the registrations they (and their submodules) made."""
    regs: list[Registration] = []
    for name in modules:
        module = resolve_module(name)
        importlib.import_module(module)
        regs.extend(registry.entries(module=module))
    if select:
        regs = [r for r in regs if _matches(select, label(r))]
    return regs


def _matches(pattern: str, text: str) -> bool:
    from fnmatch import fnmatchcase

    return pattern in text or fnmatchcase(text, pattern)


def label(reg: Registration) -> str:
    """The signature a registration covers, as the report prints it."""
    return reg.describe().split(" -> ")[0]


def _examples(reg: Registration) -> list[Example]:
    ex = reg.examples
    if ex is None:
        return []
    return list(ex() if callable(ex) else ex)


def check_registration(reg: Registration, n_examples: int = 10, seed: int = 0) -> RuleResult:
    """Check one registration on its examples, or on generated inputs."""
    from testutils import RuleCheckError, check_example

    result = RuleResult(label(reg), reg.module, "pass", stateful=reg.kind == "factory")
    start = time.perf_counter()
    try:
        examples = _examples(reg)
        reports: list[Any] | None
        if examples:
            result.inputs = f"{len(examples)} examples"
            reports = [check_example(reg.f, ex) for ex in examples]
        else:
            reports = _fuzz(reg, n_examples, seed, result)
            if reports is None:
                result.seconds = time.perf_counter() - start
                return result
        _merge(result, reports)
    except RuleCheckError as e:
        result.status = "fail"
        result.checks[e.check] = "FAIL"
        result.message = str(e)
    except Exception as e:  # a crash inside the rule is a failure of the rule
        result.status = "fail"
        result.message = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"
    result.seconds = time.perf_counter() - start
    return result


def _merge(result: RuleResult, reports: list[Any]) -> None:
    """One status per check over all inputs: a failure is raised, so here pass beats n/a."""
    for rep in reports:
        for name, status in rep.checks.items():
            if result.checks.get(name) is None or not result.checks[name].startswith("pass"):
                result.checks[name] = status
        if rep.allocations is not None:
            result.allocations = max(result.allocations or 0, rep.allocations)


def _fuzz(reg: Registration, n: int, seed: int, result: RuleResult) -> list[Any] | None:
    """Check on `n` generated inputs; None (and `not checked`) if they cannot be generated."""
    from hypothesis import HealthCheck, given, reject, settings
    from hypothesis import seed as hseed
    from hypothesis.errors import Unsatisfiable

    from testutils import check_rule, strategies

    try:
        strategy = strategies.args_for(reg)
    except strategies.Unsupported as e:
        result.status = "not checked"
        result.message = f"no examples attached, and inputs cannot be generated: {e}"
        return None
    reports: list[Any] = []

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
        reports.append(check_rule(reg.f, *args))

    try:
        run()
    except Unsatisfiable:
        reports.clear()
    if not reports:
        result.status = "not checked"
        result.message = (
            "no examples attached, and the primal rejected every generated input (it raised or "
            "returned non-finite values): attach examples to the registration"
        )
        return None
    result.inputs = f"{len(reports)} generated"
    return reports


def run_checks(
    regs: list[Registration],
    n_examples: int = 10,
    seed: int = 0,
    jobs: int = 1,
    fail_fast: bool = False,
    on_result: Callable[[int, RuleResult], None] | None = None,
    modules: Iterable[str] = (),
) -> list[RuleResult]:
    """Check every registration (in `jobs` worker processes), in order."""
    results: list[RuleResult] = []
    for i, res in enumerate(_iter_results(regs, n_examples, seed, jobs, list(modules))):
        results.append(res)
        if on_result is not None:
            on_result(i, res)
        if fail_fast and res.status == "fail":
            break
    return results


def _iter_results(
    regs: list[Registration], n: int, seed: int, jobs: int, modules: list[str]
) -> Iterator[RuleResult]:
    if jobs <= 1 or len(regs) < 2:
        for reg in regs:
            yield check_registration(reg, n, seed)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    keys = [_key(r) for r in regs]
    ctx = mp.get_context("fork")
    with ProcessPoolExecutor(
        jobs, mp_context=ctx, initializer=_init_worker, initargs=(modules,)
    ) as pool:
        yield from pool.map(_check_by_key, keys, [n] * len(keys), [seed] * len(keys))


def _key(reg: Registration) -> tuple[str, int]:
    same = registry.entries(module=reg.module)
    same = [r for r in same if r.module == reg.module]
    return reg.module, same.index(reg)


def _init_worker(modules: list[str]) -> None:
    np.seterr(all="warn")
    for m in modules:
        importlib.import_module(resolve_module(m))


def _check_by_key(key: tuple[str, int], n: int, seed: int) -> RuleResult:
    module, index = key
    regs = [r for r in registry.entries(module=module) if r.module == module]
    return check_registration(regs[index], n, seed)
