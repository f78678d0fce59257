"""Every example attached to every bundled rule, through the conformance kit, once.

Rule test cases are data written next to the rules (`examples=` at registration).
README's main job, `rulekit check rules`, runs them all; here it runs in-process
through the `rulekit` console script's entry function, and CI runs it only here
(`.ci/run`), not a second time from the shell. The tests below read its exit
status and summary line, and the kit's report on every example it checked.

To check a few rules while working on them: `rulekit check rules --select PATTERN`,
or one pytest item per rule with `pytest --rulekit-check=rules -k PATTERN`.
"""

from __future__ import annotations

import io
import re
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import pytest

import rulekit._cli
import testutils
from rulekit import Example, Registration, registry
from testutils import RuleReport, check_example
from testutils._packages import load

#: The bundled rule packages' top-level modules (the engine registers np.copyto's rules).
BUNDLED = ("rules", "rulekit")
#: Modules whose rules are all stateful (a StatefulRRule per call).
STATEFUL_PACKAGE = "rules.blas"


def _examples(reg: Registration) -> list[Example]:
    ex = reg.examples
    if ex is None:
        return []
    return list(ex() if callable(ex) else ex)


def _bundled() -> list[Registration]:
    load("rules")  # (imports the bundled rules if nothing has yet)
    return [r for r in registry.entries() if r.module.split(".")[0] in BUNDLED]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@dataclass
class CheckRun:
    """One `rulekit check rules`: exit status, output, and the kit's report per example."""

    code: int
    out: str
    err: str
    reports: list[tuple[Any, RuleReport]] = field(default_factory=list)  # (primal, report)


@pytest.fixture(scope="module")
def check_rules() -> CheckRun:
    """README's main job, `rulekit check rules`, run by the function the `rulekit` command
    runs; the kit's report on each example is recorded on the way (`check_example`)."""
    (script,) = entry_points(group="console_scripts", name="rulekit")
    main = script.load()
    run = CheckRun(code=-1, out="", err="")

    def recording(f: Any, ex: Example, **options: Any) -> RuleReport:
        report = check_example(f, ex, **options)
        run.reports.append((f, report))
        return report

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, redirect_stdout(out), redirect_stderr(err):
        mp.setattr(testutils, "check_example", recording)  # (the runner imports it per rule)
        run.code = main(["check", "rules"])
    run.out, run.err = out.getvalue(), err.getvalue()
    return run


def test_the_rulekit_command_runs_the_cli() -> None:
    (script,) = entry_points(group="console_scripts", name="rulekit")
    assert script.value == "rulekit._cli:main"
    assert script.load() is rulekit._cli.main


def test_every_bundled_rule_has_examples() -> None:
    bundled = _bundled()
    assert len(bundled) > 500
    missing = [r.describe() for r in bundled if not _examples(r)]
    assert not missing, "rules without examples:\n" + "\n".join(missing)


def test_rulekit_check_rules_passes(check_rules: CheckRun) -> None:
    n = len(load("rules").registrations)
    lines = check_rules.out.strip().splitlines()
    assert check_rules.code == 0, check_rules.out + check_rules.err
    assert lines[0] == f"checking {n} rules of rules", check_rules.out
    summary = rf"{n} rules checked in [0-9.]+s: {n} passed, 0 failed, 0 not checked"
    assert re.fullmatch(summary, lines[-1]), check_rules.out


def test_every_example_went_through_the_kit(check_rules: CheckRun) -> None:
    """Each rule was checked on its own examples (none on generated inputs instead)."""
    examples = sum(len(_examples(r)) for r in load("rules").registrations)
    assert examples > 1000
    assert len(check_rules.reports) == examples, (
        f"{len(check_rules.reports)} of {examples} examples checked (a rule's check stops at "
        "its first failing example)"
    )


def test_stateful_rules_allocate_nothing_once_warm(check_rules: CheckRun) -> None:
    """Stricter than the kit, which allows as many allocations as the primal call itself
    makes besides its outputs: the bundled stateful rules make none."""
    stateful = [(f, rep) for f, rep in check_rules.reports if rep.stateful]
    assert stateful
    for _, rep in stateful:
        assert rep.allocations == 0, str(rep)


def test_blas_rules_are_stateful(check_rules: CheckRun) -> None:
    blas = {r.f for r in _bundled() if _within(r.module, STATEFUL_PACKAGE)}
    reports = [(f, rep) for f, rep in check_rules.reports if f in blas]
    assert blas and reports
    for _, rep in reports:
        assert rep.stateful, f"{rep.signature}: not a stateful rule"


def test_bundled_rules_outside_the_rules_package() -> None:
    """The examples of the bundled registrations `rulekit check rules` does not cover (the
    engine's own: np.copyto, the generic `out=`), through the kit."""
    covered = set(load("rules").registrations)
    for reg in _bundled():
        if reg not in covered:
            for ex in _examples(reg):
                check_example(reg.f, ex)
