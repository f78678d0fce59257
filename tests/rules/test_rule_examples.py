"""Every example attached to every bundled rule, through the conformance kit.

Rule test cases are data written next to the rules (`examples=` at
registration); this one parametrized test runs them all through
`testutils.check_example`.
"""

from __future__ import annotations

from typing import Any

import pytest

import rules
from rulekit import Example, registry
from rulekit._registry import Registration, function_name
from testutils import check_example

assert rules  # importing the package registers every bundled rule


def _examples(reg: Registration) -> list[Example]:
    ex = reg.examples
    if ex is None:
        return []
    return list(ex() if callable(ex) else ex)


def _cases() -> list[Any]:
    cases = []
    regs = [r for r in registry.entries() if r.module.split(".")[0] in ("rules", "rulekit")]
    for reg in regs:
        for i, ex in enumerate(_examples(reg)):
            label = ex.name or str(i)
            cases.append(pytest.param(reg, ex, id=f"{reg.describe().split(' -> ')[0]}#{label}"))
    return cases


CASES = _cases()

# modules all of whose examples dispatch to stateful rules (a StatefulRRule per call)
STATEFUL_MODULES = ("rules.blas",)


def test_every_bundled_rule_has_examples() -> None:
    regs = [r for r in registry.entries() if r.module.split(".")[0] in ("rules", "rulekit")]
    missing = [r.describe() for r in regs if not _examples(r)]
    assert not missing, "rules without examples:\n" + "\n".join(missing)


@pytest.mark.parametrize(("reg", "ex"), CASES)
def test_rule_example(reg: Registration, ex: Example) -> None:
    report = check_example(reg.f, ex)
    assert report is not None, function_name(reg.f)
    # (the kit's allocation check already fails a stateful rule that allocates once warm)
    assert not report.stateful or report.allocations == 0, str(report)
    if reg.module in STATEFUL_MODULES:
        assert report.stateful, f"{reg.describe()}: not a stateful rule"
