"""`rulekit check`: the conformance report over whole rule registries."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

from testutils._runner import (
    CHECKS,
    RuleResult,
    collect,
    installed_rule_packages,
    resolve_module,
    run_checks,
)

__all__ = ["add_check_arguments", "cmd_check", "format_row"]

_SHORT = {
    "interface": "intf",
    "registered": "reg",
    "mutation": "mut",
    "aliasing": "alias",
    "correctness": "grad",
    "statefulness": "state",
    "allocation": "alloc",
}


def add_check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("modules", nargs="*", help="rule modules or rulekit.rules entry-point names")
    p.add_argument(
        "--all-installed",
        action="store_true",
        help="check every package registered in the rulekit.rules entry-point group",
    )
    p.add_argument("--select", metavar="PATTERN", help="only signatures containing/matching this")
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


def _cell(status: str | None) -> str:
    if status is None:
        return "-"
    if status.startswith("pass"):
        return "ok"
    if status.startswith("n/a"):
        return "n/a"
    return "FAIL"


def format_row(r: RuleResult) -> str:
    cells = " ".join(f"{_SHORT[c]}={_cell(r.checks.get(c))}" for c in CHECKS)
    alloc = "" if r.allocations is None else f" allocs={r.allocations}"
    verdict = {"pass": "PASS", "fail": "FAIL", "not checked": "NOT CHECKED"}[r.status]
    line = f"{verdict:11} {r.signature}  [{cells}{alloc}] {r.seconds:.2f}s {r.inputs}"
    if r.status != "pass" and r.message:
        line += "\n" + "\n".join("      " + m for m in r.message.strip().splitlines()[:12])
    return line


class _Progress:
    """A live one-line progress display on a terminal; plain lines otherwise."""

    def __init__(self, total: int, out: TextIO, live: bool) -> None:
        self.total, self.out, self.live = total, out, live
        self.failed = 0

    def __call__(self, i: int, r: RuleResult) -> None:
        self.failed += r.status != "pass"
        if self.live:
            self.out.write("\r\033[K")
            if r.status != "pass":
                self.out.write(format_row(r) + "\n")
            self.out.write(f"[{i + 1}/{self.total}] {self.failed} not passing  {r.signature[:60]}")
            self.out.flush()
        else:
            self.out.write(format_row(r) + "\n")


def cmd_check(args: argparse.Namespace) -> int:
    modules = list(args.modules)
    if args.all_installed:
        modules += list(installed_rule_packages().values())
    if not modules:
        print(
            "rulekit check: name at least one module (e.g. `rulekit check rules`)", file=sys.stderr
        )
        return 2
    modules = [resolve_module(m) for m in modules]
    regs = collect(modules, args.select)
    if not regs:
        print(
            f"rulekit check: no rules registered by {', '.join(modules)}"
            + (f" match {args.select!r}" if args.select else ""),
            file=sys.stderr,
        )
        return 1
    live = sys.stdout.isatty() and not args.json
    progress = None if args.json else _Progress(len(regs), sys.stdout, live)
    start = time.perf_counter()
    results = run_checks(
        regs, args.examples, args.seed, args.jobs, args.fail_fast, progress, modules
    )
    elapsed = time.perf_counter() - start
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "not checked")}
    summary = (
        f"{len(results)} rules checked in {elapsed:.1f}s: {counts['pass']} passed, "
        f"{counts['fail']} failed, {counts['not checked']} not checked"
    )
    if args.json:
        payload: dict[str, Any] = {
            "modules": modules,
            "results": [r.to_json() for r in results],
            "summary": {**counts, "total": len(results), "seconds": elapsed},
        }
        print(json.dumps(payload, indent=2))
    else:
        if live:
            sys.stdout.write("\r\033[K")
        print(summary)
    if counts["fail"]:
        return 1
    if counts["not checked"] and not args.allow_unchecked:
        return 1
    return 0
