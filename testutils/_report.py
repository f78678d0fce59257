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
    KINDS,
    PackageImportError,
    RulePackage,
    UsageError,
    installed_rule_packages,
    label,
    load,
    of_kind,
    select_rules,
    unique,
)
from testutils._runner import (
    CHECKS,
    RuleResult,
    run_checks,
)
from testutils._verdict import FORWARD_CHECKS, VJP_CHECKS

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
    "consistency": "rrule",
}
_WIDTH = {c: max(len(SHORT[c]), 4) for c in SHORT}
_WIDTH["allocation"] = len("n/a (plain)")
#: Per kind of rule: its columns, how its rows' last column is titled, and the short
#: titles that differ from the reverse rules' (a forward rule's `correctness` is its JVP).
COLUMNS = {"reverse": CHECKS, "forward": FORWARD_CHECKS, "vjp": VJP_CHECKS}
_TITLE = {"reverse": "rule", "forward": "forward rule (frule)", "vjp": "vjp rule"}
_SHORT_OF = {"forward": {"correctness": "jvp"}, "vjp": {"correctness": "cot"}}
#: How summaries and progress lines name each kind ("" for reverse rules: plain "rules").
_NOUN = {"reverse": "rule", "forward": "forward rule", "vjp": "vjp rule"}

LEGEND = (
    "columns: intf = interface, reg = the registered rule ran, mut = mutation and restore,\n"
    "  alias = aliasing, grad = gradient (dot-product test against finite differences),\n"
    "  state = statefulness, alloc = allocation-free once warm (stateful rules; count in ())\n"
    "cells: ok = passed, FAIL = failed, n/a = does not apply, n/a (plain) = not a stateful "
    "rule,\n  - = not reached (the kit stops at a rule's first failure)"
)
#: The legend of the forward and vjp rule rows.
FORWARD_LEGEND = (
    "forward rules: jvp = tangents against finite differences (each argument alone, all, "
    "every layout),\n  rrule = consistency with the reverse rule (<ȳ, J ẋ> = <Jᵀȳ, ẋ>), state "
    "= right on later calls with other values\n"
    "vjp rules: cot = cotangents equal the reverse rule's (every layout), mut = writes nothing"
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
        "--kind",
        action="append",
        choices=KINDS,
        metavar="KIND",
        help="check only rules of this kind: reverse, forward (frule) or vjp (repeatable; "
        "default: all three)",
    )
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


def format_header(kind: str = "reverse") -> str:
    """The column titles of `format_row` for rules of `kind`."""
    short = {**SHORT, **_SHORT_OF.get(kind, {})}
    cells = " ".join(f"{short[c]:{_WIDTH[c]}}" for c in COLUMNS[kind])
    return f"{'result':11}  {cells}  {'time':>6}  {'inputs':12}  {_TITLE[kind]}"


def format_row(r: RuleResult) -> str:
    """One rule, one line: verdict, a cell per check, time, inputs, signature."""
    cells = " ".join(f"{_cell(r, c):{_WIDTH[c]}}" for c in COLUMNS.get(r.kind, CHECKS))
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


def format_summary(results: list[RuleResult], seconds: float, kind: str = "reverse") -> str:
    """`N rules checked in Ts: ...` (`N forward rules ...`, `N vjp rules ...`)."""
    counts = _counts(results)
    return (
        f"{_plural(len(results), _NOUN[kind])} checked in {seconds:.1f}s: {counts['pass']} "
        f"passed, {counts['fail']} failed, {counts['not checked']} not checked"
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
        self.offset = 0  # (the index of the first rule of the kind being checked)
        self.kinds: list[str] = []  # the kinds whose rows were printed, in order

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
        i += self.offset
        self.not_passing += r.status != "pass"
        if self.live:
            self.out.write("\r\033[K")
        if self.verbose or r.status != "pass":
            if not self.kinds or self.kinds[-1] != r.kind:
                self.kinds.append(r.kind)
                self.out.write(format_header(r.kind) + "\n")
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
        if "reverse" in self.kinds:
            self.out.write(LEGEND + "\n")
        if "forward" in self.kinds or "vjp" in self.kinds:
            self.out.write(FORWARD_LEGEND + "\n")


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
    kinds = [k for k in KINDS if k in (getattr(args, "kind", None) or KINDS)]
    by_kind = {
        k: select_rules(unique(r for p in packages for r in of_kind(p, k)), args.select)
        for k in kinds
    }
    by_kind = {k: regs for k, regs in by_kind.items() if regs}
    if not by_kind:
        _err(_no_rules_message(packages, args.select))
        return 1
    modules = [p.module for p in packages]
    printer = None
    if not args.json:
        live = sys.stdout.isatty()
        labels = [_label(r, k) for k, regs in by_kind.items() for r in regs]
        printer = _Printer(labels, sys.stdout, live, args.verbose)
        print(_checking_line(by_kind, modules), flush=True)
        printer.start()
    results: dict[str, list[RuleResult]] = {}
    seconds: dict[str, float] = {}
    for kind, regs in by_kind.items():
        start = time.perf_counter()
        results[kind] = run_checks(regs, args.examples, args.seed, args.jobs, args.fail_fast,
                                   printer)  # fmt: skip
        seconds[kind] = time.perf_counter() - start
        if printer is not None:
            printer.offset += len(regs)
        if args.fail_fast and any(r.status == "fail" for r in results[kind]):
            break
    everything = [r for rs in results.values() for r in rs]
    counts = _counts(everything)
    if args.json:
        payload: dict[str, Any] = {
            "modules": modules,
            "results": [r.to_json() for r in everything],
            "summary": {**counts, "total": len(everything), "seconds": sum(seconds.values()),
                        "kinds": {k: {**_counts(rs), "total": len(rs), "seconds": seconds[k]}
                                  for k, rs in results.items()}},
        }  # fmt: skip
        print(json.dumps(payload, indent=2))
    else:
        assert printer is not None
        printer.finish()
        # (the reverse rules' line last: what a script reading the last line has always read)
        for kind in sorted(results, key=lambda k: k == "reverse"):
            print(format_summary(results[kind], seconds[kind], kind))
    if counts["fail"]:
        return 1
    if counts["not checked"] and not args.allow_unchecked:
        return 1
    return 0


def _label(reg: Any, kind: str) -> str:
    return label(reg) if kind == "reverse" else f"{_NOUN[kind]} {label(reg)}"


def _checking_line(by_kind: dict[str, list[Any]], modules: list[str]) -> str:
    """`checking 12 rules of pkg`, then `  and 5 forward rules, 4 vjp rules` on a line of its
    own (the first line names the reverse rules alone, as it always has)."""
    parts = [_plural(len(regs), _NOUN[k]) for k, regs in by_kind.items() if k != "reverse"]
    if "reverse" not in by_kind:
        return f"checking {', '.join(parts)} of {', '.join(modules)}"
    line = f"checking {_plural(len(by_kind['reverse']), 'rule')} of {', '.join(modules)}"
    return line + (f"\n  and {', '.join(parts)}" if parts else "")
