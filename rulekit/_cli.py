"""The `rulekit` command line: `rulekit rules`, `rulekit check`, `rulekit coverage`
(see `rulekit --help`).

Exit codes: 0 success (every checked rule passed), 1 a rule failed or could not
be checked (or a rule package raised while being imported), 2 a usage error (a
bad option, or a name that is no module, entry point or path), 130 interrupted,
141 the reader of the output went away (`rulekit rules | head`), as for other
command-line tools killed by SIGPIPE.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Sequence

import numpy as np

import rulekit
from rulekit import registry

EXIT_EPILOG = (
    "exit codes: 0 success, 1 a rule failed or was not checked, 2 usage error "
    "(e.g. an unknown module), 141 output pipe closed early"
)


def _err(command: str, message: str) -> None:
    print(f"rulekit {command}: {message}", file=sys.stderr)


def _cmd_rules(args: argparse.Namespace) -> int:
    from testutils._packages import PackageImportError, UsageError, belongs_to, load, owner

    try:
        for name in args.modules:
            load(name)
        if not args.modules:
            _load_installed()
    except UsageError as e:
        _err("rules", str(e))
        return 2
    except PackageImportError as e:
        _err("rules", f"{e}\n{e.details()}".rstrip())
        return 1
    entries = registry.entries()
    if args.module:
        entries = [r for r in entries if belongs_to(r, args.module)]
    by_module: dict[str, list[str]] = {}
    for r in entries:
        by_module.setdefault(owner(r), []).append(r.describe().split(" -> ")[0] + f"  [{r.kind}]")
    for module in sorted(by_module):
        print(f"{module}  ({len(by_module[module])} rules)")
        for line in sorted(by_module[module]):
            print(f"  {line}")
    print(f"{len(entries)} rules in {len(by_module)} modules")
    return 0


def _cmd_coverage(args: argparse.Namespace) -> int:
    from testutils._coverage import coverage_markdown, modes_markdown

    if args.modes or args.missing:
        print(modes_markdown(list(args.modules), missing=args.missing), end="")
    else:
        print(coverage_markdown(list(args.modules)), end="")
    return 0


def _load_installed() -> None:
    """Import every installed rule package and everything it defers (`rulekit rules`)."""
    from testutils._packages import PackageImportError

    try:
        registry.load_all()
    except rulekit.RulePackageError as e:
        raise PackageImportError(e.name or "?", e) from e


def version() -> str:
    """`rulekit --version`: rulekit's version, and numpy's and Python's."""
    return (
        f"rulekit {rulekit.__version__} (numpy {np.__version__}, "
        f"Python {platform.python_version()})"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rulekit",
        description="Rules for reverse-mode AD of NumPy/SciPy/BLAS code, and their test kit.",
        epilog=EXIT_EPILOG,
    )
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command", required=True)
    p_rules = sub.add_parser(
        "rules",
        help="list registered rule signatures, by module",
        description="Import rule packages and list every registered rule signature, grouped by "
        "the module it belongs to (the module being imported when it was registered).",
        epilog=EXIT_EPILOG,
    )
    p_rules.add_argument(
        "modules",
        nargs="*",
        default=[],
        metavar="MODULE",
        help="rule packages to import first: module names, rulekit.rules entry-point names, or "
        "paths (default: every installed rule package, with everything it defers)",
    )
    p_rules.add_argument("--module", help="only rules belonging to this module (a prefix)")
    p_rules.set_defaults(func=_cmd_rules)
    p_check = sub.add_parser(
        "check",
        help="run the conformance kit over every rule a package registers",
        description="Run testutils.check_rule on every rule registered by the named packages "
        "(module names, rulekit.rules entry-point names, or paths) and print a conformance "
        "report: the failures and a summary (every rule with -v).",
        epilog=EXIT_EPILOG,
    )
    from testutils._report import add_check_arguments, cmd_check

    add_check_arguments(p_check)
    p_check.set_defaults(func=cmd_check)
    p_cov = sub.add_parser(
        "coverage",
        help="print the coverage page (docs/coverage.md)",
        description="Print the coverage page (docs/coverage.md is its output for `rules`): "
        "the registered signatures, each function's modes of differentiation (reverse rule, "
        "forward rule, vjp rule: twice differentiable) and a comparison with HIPS autograd.",
    )
    p_cov.add_argument("modules", nargs="*", default=["rules"], help="default: rules")
    p_cov.add_argument(
        "--modes",
        action="store_true",
        help="only the table of functions: reverse | forward | twice (has a vjp rule)",
    )
    p_cov.add_argument(
        "--missing",
        action="store_true",
        help="only the functions without a forward rule or without a vjp rule",
    )
    p_cov.set_defaults(func=_cmd_coverage)
    return parser


def _stdout_to_devnull() -> None:
    """After a broken pipe: send what is still buffered for stdout nowhere, quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a real file (e.g. captured by a test)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = int(args.func(args))
        sys.stdout.flush()
    except BrokenPipeError:  # `rulekit rules | head`: the reader has gone, stop quietly
        _stdout_to_devnull()
        return 141
    except KeyboardInterrupt:
        print("rulekit: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
