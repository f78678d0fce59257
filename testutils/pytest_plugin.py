"""pytest plugin: `pytest --rulekit-check=mypkg.rules` makes every rule of that module a test item.

Registered through the `pytest11` entry point, so it is active wherever rulekit
is installed; without the option it does nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["RuleCheckItem"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rulekit")
    group.addoption(
        "--rulekit-check",
        action="append",
        default=[],
        metavar="MODULE",
        help="check every rule registered by MODULE (or a rulekit.rules entry-point name) "
        "with the rulekit conformance kit; one test item per rule",
    )
    group.addoption(
        "--rulekit-examples",
        type=int,
        default=10,
        metavar="N",
        help="generated inputs per rule without attached examples (default 10)",
    )


class RuleCheckItem(pytest.Item):
    """One registered rule, checked by `testutils.check_registration`."""

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
            from testutils._report import format_row

            return format_row(excinfo.value.result)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.reg.module, None, f"rulekit check: {self.name}"


class RuleCheckFailed(Exception):
    def __init__(self, result: Any) -> None:
        super().__init__(result.signature)
        self.result = result


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    modules = config.getoption("--rulekit-check")
    if not modules:
        return
    from testutils._runner import collect, label

    n = config.getoption("--rulekit-examples")
    for reg in collect(modules):
        items.append(
            RuleCheckItem.from_parent(session, name=f"rulekit[{label(reg)}]", reg=reg, n_examples=n)
        )
