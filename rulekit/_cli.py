"""The `rulekit` command line: `rulekit rules`, `rulekit check` (see `rulekit --help`)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from rulekit._registry import registry


def _import_all(modules: Sequence[str]) -> None:
    for name in modules:
        importlib.import_module(name)


def _cmd_rules(args: argparse.Namespace) -> int:
    _import_all(args.modules)
    entries = registry.entries()
    if args.module:
        entries = [e for e in entries if e.module.startswith(args.module)]
    by_module: dict[str, list[str]] = {}
    for e in entries:
        by_module.setdefault(e.module, []).append(e.describe().split(" -> ")[0] + f"  [{e.kind}]")
    for module in sorted(by_module):
        print(f"{module}  ({len(by_module[module])} rules)")
        for line in sorted(by_module[module]):
            print(f"  {line}")
    print(f"{len(entries)} rules in {len(by_module)} modules")
    return 0


def _cmd_coverage(args: argparse.Namespace) -> int:
    from testutils._coverage import coverage_markdown

    print(coverage_markdown(list(args.modules)), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rulekit",
        description="Rules for reverse-mode AD of NumPy/SciPy/BLAS code, and their test kit.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_rules = sub.add_parser("rules", help="list registered rule signatures, by module")
    p_rules.add_argument(
        "modules", nargs="*", default=["rules"], help="modules to import first (default: rules)"
    )
    p_rules.add_argument("--module", help="only rules registered by this module (prefix)")
    p_rules.set_defaults(func=_cmd_rules)
    p_check = sub.add_parser(
        "check",
        help="run the conformance kit over every rule a module registers",
        description="Run testutils.check_rule on every rule registered by the named modules "
        "(or rulekit.rules entry points) and print a conformance report. Exit code 0 only if "
        "every rule passes.",
    )
    from testutils._report import add_check_arguments, cmd_check

    p_cov = sub.add_parser("coverage", help="print the coverage page (docs/coverage.md)")
    p_cov.add_argument("modules", nargs="*", default=["rules"], help="default: rules")
    p_cov.set_defaults(func=_cmd_coverage)

    add_check_arguments(p_check)
    p_check.set_defaults(func=cmd_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
