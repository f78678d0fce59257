"""Run the conformance kit over whole rule packages (`rulekit check`, the pytest plugin).

A *rule package* is a module whose import registers rules. `load` imports it
and finds every registration it made (see "Discovery" below); for each one,
inputs come from the examples attached at registration or, failing that, from
hypothesis strategies built from the registration's type patterns (fixed
seed). Each registration gets one `RuleResult`: pass, fail (with the failing
check, argument, input and message), or *not checked* with the reason (never
skipped silently).

Discovery. A registration belongs to the module whose top-level code was
running when it was made (the innermost module being imported), recorded in
`Registration.meta["importing"]`; so a rule registered through a helper
function defined elsewhere belongs to the module that called the helper while
it was being imported, and the rules of another rule package that it imports
(or that rulekit loads lazily meanwhile) belong to that other package.
The registry records it on every registration, so a package imported before
`load` (the bundled `rules`, say) is found the same way; a registration without
the record falls back to the module that called `register`.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Generator, Iterable
from dataclasses import asdict, dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import numpy as np

from rulekit import Example, registry
from rulekit._registry import Registration

__all__ = [
    "CHECKS",
    "IMPORTING",
    "PackageImportError",
    "RulePackage",
    "RuleResult",
    "UsageError",
    "belongs_to",
    "check_registration",
    "collect",
    "describe_input",
    "installed_rule_packages",
    "label",
    "load",
    "owner",
    "resolve_module",
    "run_checks",
    "select_rules",
    "unique",
]

ENTRY_POINT_GROUP = "rulekit.rules"
#: The `Registration.meta` key naming the module being imported when the rule was registered.
IMPORTING = "importing"
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- finding rule packages and their registrations ---------------------------------------


class UsageError(Exception):
    """The command line names something that is not a loadable module (exit code 2)."""


class PackageImportError(Exception):
    """Importing the rule package raised: `.module`, and the exception as `__cause__`."""

    def __init__(self, module: str, error: BaseException) -> None:
        super().__init__(f"importing {module} failed: {type(error).__name__}: {error}")
        self.module = module
        self.error = error

    def details(self) -> str:
        """The traceback of the failed import."""
        return "".join(traceback.format_exception(self.error))


@dataclass
class RulePackage:
    """A loaded rule package: the registrations it owns, and what else its import registered."""

    name: str  # as given: a module name, an entry-point name or a path
    module: str  # the module imported
    fresh: bool  # imported now (False: it had been imported before the check)
    registrations: list[Registration]
    others: dict[str, int]  # rules registered while importing it, owned by other modules


def installed_rule_packages() -> dict[str, str]:
    """Every rule package registered in the `rulekit.rules` entry-point group: name → module."""
    return {ep.name: ep.value.split(":")[0] for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _is_path(name: str) -> bool:
    return (
        name.endswith(".py")
        or "/" in name
        or os.sep in name
        or (os.altsep is not None and os.altsep in name)
        or name in (".", "..")
    )


def resolve_module(name: str) -> str:
    """An entry-point name, a module name or a path (of a .py file or a package directory),
    as a module name. A path's root directory is put on `sys.path`; raises `UsageError`."""
    packages = installed_rule_packages()
    if name in packages:
        return packages[name]
    if _is_path(name):
        return _module_for_path(name)
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise UsageError(
            f"{name!r} is not a module name, a path, or an installed rulekit.rules entry-point "
            f"name ({_installed_names(packages)})"
        )
    return name


def _installed_names(packages: dict[str, str]) -> str:
    return "installed: " + ", ".join(sorted(packages)) if packages else "none installed"


def _module_for_path(name: str) -> str:
    path = Path(name).resolve()
    how = "pass a .py file, a package directory, or an importable module name"
    if not path.exists():
        raise UsageError(f"no such file or directory: {name} ({how})")
    if path.is_file():
        if path.suffix != ".py":
            raise UsageError(f"{name} is not a Python file ({how})")
        parts = [] if path.stem == "__init__" else [path.stem]
        directory = path.parent
    else:
        if not (path / "__init__.py").is_file():
            raise UsageError(
                f"{name} is a directory but not a package (it has no __init__.py); {how} "
                "(a project directory: pip install it, then pass its module or entry-point name)"
            )
        parts, directory = [], path
    while (directory / "__init__.py").is_file():  # climb to the top package
        parts.insert(0, directory.name)
        directory = directory.parent
    module = ".".join(parts)
    if not all(part.isidentifier() for part in parts):
        raise UsageError(f"{name}: {module!r} is not an importable module name ({how})")
    loaded = sys.modules.get(module)
    where = getattr(loaded, "__file__", None)
    if loaded is not None and where is not None:
        expected = path if path.is_file() else path / "__init__.py"
        if Path(where).resolve() != expected:
            raise UsageError(f"{name}: another module {module!r} is already loaded, from {where}")
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    return module


def owner(reg: Registration) -> str:
    """The module a registration belongs to: the module being imported when it was made,
    or (if that was not recorded, or was the main script) the module that called `register`."""
    importing = reg.meta.get(IMPORTING)
    if isinstance(importing, str) and importing != "__main__":
        return importing
    return reg.module


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def belongs_to(reg: Registration, module: str) -> bool:
    """Whether a registration belongs to `module` or one of its submodules (see `owner`)."""
    return _within(owner(reg), module)


def unique(regs: Iterable[Registration]) -> list[Registration]:
    """The registrations in order, each once."""
    seen: set[Registration] = set()
    out: list[Registration] = []
    for reg in regs:
        if reg not in seen:
            seen.add(reg)
            out.append(reg)
    return out


def load(name: str) -> RulePackage:
    """Import a rule package and find the registrations it owns (see the module doc).

    Raises `UsageError` if `name` names no module, `PackageImportError` if its import raises.
    """
    module = resolve_module(name)
    fresh = module not in sys.modules
    before = set(registry.entries())
    try:
        importlib.import_module(module)  # (each registration records the module being imported)
    except ModuleNotFoundError as e:
        if e.name is not None and _within(module, e.name):
            packages = installed_rule_packages()
            raise UsageError(
                f"no module named {e.name!r}, and no rulekit.rules entry point of that name "
                f"({_installed_names(packages)}); pass an importable module name, an entry-point "
                "name, or a path to a .py file or package directory"
            ) from None
        raise PackageImportError(module, e) from e
    except Exception as e:
        raise PackageImportError(module, e) from e
    entries = registry.entries()
    new = [r for r in entries if r not in before]
    owned = [r for r in entries if belongs_to(r, module)]
    owned_set = set(owned)
    others = Counter(owner(r) for r in new if r not in owned_set)
    return RulePackage(name, module, fresh, owned, dict(sorted(others.items())))


def collect(modules: Iterable[str], select: str | None = None) -> list[Registration]:
    """The registrations the named rule packages own (in registry order, without repeats)."""
    regs = unique(reg for name in modules for reg in load(name).registrations)
    return select_rules(regs, select)


def select_rules(regs: list[Registration], select: str | None) -> list[Registration]:
    """The registrations whose label contains `select` or matches it as a glob."""
    if not select:
        return regs
    return [r for r in regs if _matches(select, label(r))]


def _matches(pattern: str, text: str) -> bool:
    from fnmatch import fnmatchcase

    return pattern in text or fnmatchcase(text, pattern)


def label(reg: Registration) -> str:
    """The signature a registration covers, as the report prints it."""
    return reg.describe().split(" -> ")[0]


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


def check_registration(reg: Registration, n_examples: int = 10, seed: int = 0) -> RuleResult:
    """Check one registration on its examples, or on `n_examples` generated inputs."""
    from testutils import check_example

    result = RuleResult(label(reg), owner(reg), "pass", stateful=reg.kind == "factory")
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

    from testutils import check_rule, strategies

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
