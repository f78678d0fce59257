"""pytest plugin: `pytest --rulekit-check=mypkg.rules` makes every rule of that package a test item.

Reverse rules are items `rulekit[SIGNATURE]`; forward rules `rulekit-forward[SIGNATURE]`
and vjp rules `rulekit-vjp[SIGNATURE]` (checked by `check_frule` / `check_vjp_rule`).

Registered through the `pytest11` entry point, so it is active wherever rulekit
is installed; without the option it does nothing. The package is named as for
`rulekit check`: a module name, a `rulekit.rules` entry-point name, or a path.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["RuleCheckFailed", "RuleCheckItem"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rulekit")
    group.addoption(
        "--rulekit-check",
        action="append",
        default=[],
        metavar="MODULE",
        help="check every rule registered by MODULE (a module name, a rulekit.rules "
        "entry-point name, or a path) with the rulekit conformance kit; one test item per rule",
    )
    group.addoption(
        "--rulekit-examples",
        type=int,
        default=10,
        metavar="N",
        help="generated inputs per rule without attached examples (default 10)",
    )


class RuleCheckItem(pytest.Item):
    """One registered rule, checked by `testutils._runner.check_registration`."""

    def __init__(self, *, reg: Any, n_examples: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reg = reg
        self.n_examples = n_examples

    def runtest(self) -> None:
        from testutils._runner import check_registration

        result = check_registration(self.reg, self.n_examples)
        if result.status != "pass":
            raise RuleCheckFailed(result)

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, RuleCheckFailed):
            from testutils._report import format_failure

            return format_failure(excinfo.value.result)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.nodeid.split("::")[0], None, f"rulekit check: {self.name}"


class RuleCheckFailed(Exception):
    """A rule failed (or could not be checked); `.result` is its `RuleResult`."""

    def __init__(self, result: Any) -> None:
        super().__init__(result.signature)
        self.result = result


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect items
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    names = config.getoption("--rulekit-check")
    if not names:
        return
    from testutils._packages import KINDS, PackageImportError, UsageError, collect, label, owner
    from testutils._runner import KIND

    try:
        regs = collect(names, kinds=KINDS)
    except UsageError as e:
        raise pytest.UsageError(f"--rulekit-check: {e}") from None
    except PackageImportError as e:
        raise pytest.UsageError(f"--rulekit-check: {e}\n{e.details()}") from None
    if not regs:
        raise pytest.UsageError(f"--rulekit-check: no rules registered by {', '.join(names)}")
    n = config.getoption("--rulekit-examples")
    for reg in regs:  # (reverse rules `rulekit[...]`, `rulekit-forward[...]`, `rulekit-vjp[...]`)
        kind = KIND.get(reg.kind, reg.kind)
        name = f"rulekit[{label(reg)}]" if kind == "reverse" else f"rulekit-{kind}[{label(reg)}]"
        items.append(
            RuleCheckItem.from_parent(
                session, name=name, nodeid=f"{owner(reg)}::{name}", reg=reg, n_examples=n
            )
        )
