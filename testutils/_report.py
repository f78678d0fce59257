"""`rulekit check`: the conformance report over whole rule packages.

By default the report is the failures (a table row per failing rule, then its
check, argument, input and message in full) and a summary line; `-v` prints a
row for every rule. On a terminal a live progress line shows where the run is.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from typing import Any, TextIO

from testutils._packages import (
    PackageImportError,
    RulePackage,
    UsageError,
    installed_rule_packages,
    label,
    load,
    select_rules,
    unique,
)
from testutils._runner import (
    CHECKS,
    RuleResult,
    run_checks,
)

__all__ = [
    "LEGEND",
    "add_check_arguments",
    "cmd_check",
    "format_details",
    "format_failure",
    "format_header",
    "format_row",
    "format_summary",
]

#: Column titles of the checks, in report order.
SHORT = {
    "interface": "intf",
    "registered": "reg",
    "mutation": "mut",
    "aliasing": "alias",
    "correctness": "grad",
    "statefulness": "state",
    "allocation": "alloc",
}
_WIDTH = {c: max(len(SHORT[c]), 4) for c in CHECKS}
_WIDTH["allocation"] = len("n/a (plain)")

LEGEND = (
    "columns: intf = interface, reg = the registered rule ran, mut = mutation and restore,\n"
    "  alias = aliasing, grad = gradient (dot-product test against finite differences),\n"
    "  state = statefulness, alloc = allocation-free once warm (stateful rules; count in ())\n"
    "cells: ok = passed, FAIL = failed, n/a = does not apply, n/a (plain) = not a stateful "
    "rule,\n  - = not reached (the kit stops at a rule's first failure)"
)


def add_check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "modules",
        nargs="*",
        metavar="MODULE",
        help="rule packages: module names, rulekit.rules entry-point names, or paths of a .py "
        "file or package directory",
    )
    p.add_argument(
        "--all-installed",
        action="store_true",
        help="check every package registered in the rulekit.rules entry-point group",
    )
    p.add_argument("--select", metavar="PATTERN", help="only signatures containing/matching this")
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="a row for every rule (default: only failures, and the summary)",
    )
    p.add_argument(
        "--examples",
        type=int,
        default=10,
        metavar="N",
        help="generated inputs per rule without attached examples (default 10)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for generated inputs (default 0)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failing rule")
    p.add_argument("--json", action="store_true", help="print a machine-readable report")
    p.add_argument(
        "--allow-unchecked",
        action="store_true",
        help="exit 0 even if some rules could not be checked",
    )


# -- rows --------------------------------------------------------------------------------

_VERDICT = {"pass": "PASS", "fail": "FAIL", "not checked": "NOT CHECKED"}


def _cell(r: RuleResult, check: str) -> str:
    status = r.checks.get(check)
    if status is None:
        return "-"
    if status == "FAIL" or not (status.startswith("pass") or status.startswith("n/a")):
        return "FAIL"
    if check == "allocation":
        if not r.stateful:
            return "n/a (plain)"
        if status.startswith("n/a"):
            return "n/a"
        return "ok" if r.allocations is None else f"ok ({r.allocations})"
    return "ok" if status.startswith("pass") else "n/a"


def format_header() -> str:
    """The column titles of `format_row`."""
    cells = " ".join(f"{SHORT[c]:{_WIDTH[c]}}" for c in CHECKS)
    return f"{'result':11}  {cells}  {'time':>6}  {'inputs':12}  rule"


def format_row(r: RuleResult) -> str:
    """One rule, one line: verdict, a cell per check, time, inputs, signature."""
    cells = " ".join(f"{_cell(r, c):{_WIDTH[c]}}" for c in CHECKS)
    inputs = r.inputs or "-"
    return f"{_VERDICT[r.status]:11}  {cells}  {r.seconds:5.2f}s  {inputs:12}  {r.signature}"


def _field(name: str, text: str) -> list[str]:
    lines = text.strip().splitlines() or [""]
    head = f"    {name + ':':10}"
    return [head + lines[0]] + ["    " + " " * 10 + line for line in lines[1:]]


def format_details(r: RuleResult) -> str:
    """What failed, in full: the check, the argument, the input and the message."""
    if r.status == "not checked":
        return "\n".join(_field("reason", r.message))
    lines = _field("check", r.check or "none (the rule, or the kit, raised an exception)")
    if r.argument:
        lines += _field("argument", r.argument)
    lines += _field("input", r.input or "-")
    lines += _field("message", r.message)
    return "\n".join(lines)


def format_failure(r: RuleResult) -> str:
    """A failing (or unchecked) rule: its verdict and signature, then `format_details`."""
    return f"{_VERDICT[r.status]}  {r.signature}\n{format_details(r)}"


def format_summary(results: list[RuleResult], seconds: float) -> str:
    counts = _counts(results)
    return (
        f"{_plural(len(results), 'rule')} checked in {seconds:.1f}s: {counts['pass']} passed, "
        f"{counts['fail']} failed, {counts['not checked']} not checked"
    )


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _counts(results: list[RuleResult]) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in ("pass", "fail", "not checked")}


class _Printer:
    """Rows (every rule with `verbose`, else the failures) as results come in, and on a
    terminal a live progress line below them naming the rule being checked."""

    def __init__(self, labels: list[str], out: TextIO, live: bool, verbose: bool) -> None:
        self.labels, self.out, self.live, self.verbose = labels, out, live, verbose
        self.not_passing = 0
        self.rows = 0

    def start(self) -> None:
        if self.live and self.labels:
            self._progress(0)
            self.out.flush()

    def _progress(self, done: int) -> None:
        total = len(self.labels)
        line = f"[{done}/{total}] {self.not_passing} not passing"
        if done < total:
            line += f"  checking {self.labels[done]}"
        width = shutil.get_terminal_size().columns
        self.out.write(line[: max(width - 1, 20)])

    def __call__(self, i: int, r: RuleResult) -> None:
        self.not_passing += r.status != "pass"
        if self.live:
            self.out.write("\r\033[K")
        if self.verbose or r.status != "pass":
            if not self.rows:
                self.out.write(format_header() + "\n")
            self.rows += 1
            self.out.write(format_row(r) + "\n")
            if r.status != "pass":
                self.out.write(format_details(r) + "\n")
        if self.live:
            self._progress(i + 1)
        self.out.flush()

    def finish(self) -> None:
        if self.live:
            self.out.write("\r\033[K")
        if self.rows:
            self.out.write(LEGEND + "\n")


# -- the command -------------------------------------------------------------------------


def _err(message: str) -> None:
    print(f"rulekit check: {message}", file=sys.stderr)


def _no_rules_message(packages: list[RulePackage], select: str | None) -> str:
    names = ", ".join(p.module for p in packages)
    if select:
        return f"no rule registered by {names} matches {select!r}"
    msg = f"no rules registered by {names}"
    others = {m: n for p in packages for m, n in p.others.items()}
    if others:
        owners = ", ".join(f"{m} ({n})" for m, n in others.items())
        msg += (
            f"; importing it registered rules that belong to the modules {owners}, which "
            "were being imported when they were registered: check those by name"
        )
    stale = [p.module for p in packages if not p.fresh]
    if stale:
        msg += (
            f"; {', '.join(stale)} had been imported before the check, so rules it registered "
            "through helpers defined in other modules could not be attributed to it"
        )
    return msg


def cmd_check(args: argparse.Namespace) -> int:
    names = list(args.modules)
    if args.all_installed:
        names += [m for m in installed_rule_packages().values() if m not in names]
    if not names:
        _err("name at least one module (e.g. `rulekit check rules`), or pass --all-installed")
        return 2
    try:
        packages = [load(name) for name in names]
    except UsageError as e:
        _err(str(e))
        return 2
    except PackageImportError as e:
        _err(f"{e}\n{e.details()}".rstrip())
        return 1
    regs = select_rules(unique(r for p in packages for r in p.registrations), args.select)
    if not regs:
        _err(_no_rules_message(packages, args.select))
        return 1
    modules = [p.module for p in packages]
    printer = None
    if not args.json:
        live = sys.stdout.isatty()
        printer = _Printer([label(r) for r in regs], sys.stdout, live, args.verbose)
        print(f"checking {_plural(len(regs), 'rule')} of {', '.join(modules)}", flush=True)
        printer.start()
    start = time.perf_counter()
    results = run_checks(regs, args.examples, args.seed, args.jobs, args.fail_fast, printer)
    elapsed = time.perf_counter() - start
    counts = _counts(results)
    if args.json:
        payload: dict[str, Any] = {
            "modules": modules,
            "results": [r.to_json() for r in results],
            "summary": {**counts, "total": len(results), "seconds": elapsed},
        }
        print(json.dumps(payload, indent=2))
    else:
        assert printer is not None
        printer.finish()
        print(format_summary(results, elapsed))
    if counts["fail"]:
        return 1
    if counts["not checked"] and not args.allow_unchecked:
        return 1
    return 0
