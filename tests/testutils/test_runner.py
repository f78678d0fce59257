"""`rulekit check` (testutils._packages, _runner, _report) on third-party rule packages."""

from __future__ import annotations

import io
import json
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from rulepkgs import HELPERS

import rulekit
import rules  # noqa: F401  # registered before a test's registrations are snapshot
from rulekit import Array, registry
from testutils._packages import (
    IMPORTING,
    load,
    owner,
)
from testutils._report import LEGEND, _Printer, format_header, format_row
from testutils._runner import (
    RuleResult,
    check_registration,
)


def rulekit_check(*args: str, env: dict[str, str], cwd: Any = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "rulekit", "check", *args],
        capture_output=True, text=True, timeout=300, check=False, env=env, cwd=cwd,
    )  # fmt: skip


pytestmark = pytest.mark.usefixtures("registrations")  # (tests/conftest.py)


# -- the example packages, through the CLI ---------------------------------------------------


def test_a_package_found_through_its_entry_point_passes(env_with_examples: Any) -> None:
    proc = rulekit_check("example", env=env_with_examples)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Piped and all passing: no rows, just what was checked and the summary.
    lines = proc.stdout.splitlines()
    assert lines[0] == "checking 3 rules of rulekit_example_rules"
    assert lines[1].startswith("3 rules checked in") and "3 passed, 0 failed" in lines[1]
    assert len(lines) == 2


def test_verbose_prints_a_row_per_rule_and_the_legend(env_with_examples: Any) -> None:
    proc = rulekit_check("example", "-v", env=env_with_examples)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert format_header() in out and LEGEND in out
    start = format_header().index("rule")
    rows = {line[start:]: line for line in out.splitlines() if line.startswith("PASS")}
    assert len(rows) == 3
    # 0-d, broadcasting and an in-place stateful rule are all in the example package.
    plain = rows["rulekit_example_rules._softplus(Array[np.floating])"]
    stateful = next(v for k, v in rows.items() if "_scale_add_" in k)
    broadcasting = rows["rulekit_example_rules._add_bias(Array[np.floating], Array[np.floating])"]
    assert " n/a (plain) " in plain and " n/a (plain) " in broadcasting
    assert " ok (0) " in stateful and "allocs" not in out  # no `alloc=n/a allocs=11`
    assert "5 examples" in broadcasting and "3 examples" in plain


def test_the_broken_copy_fails_naming_the_check(env_with_examples: Any) -> None:
    proc = rulekit_check("example-broken", env=env_with_examples)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    # Only the rules of the broken package (not those of the package it imports), and only
    # the failing one printed, with check, argument, input and message in full.
    assert lines[0] == "checking 2 rules of rulekit_example_rules_broken"
    fail = [line for line in lines if line.startswith("FAIL")]
    assert len(fail) == 1 and "broken_scale_add_" in fail[0]
    i = lines.index(fail[0])
    assert lines[i + 1] == "    check:    mutation"
    assert lines[i + 2] == "    argument: argument 2"
    assert lines[i + 3] == "    input:    example 1 of 2"
    assert lines[i + 4].strip().startswith("argument 0: ") and "0.7" in lines[i + 4]
    assert lines[i + 5].strip().startswith("argument 1: float64 array")
    assert "(4, 3)" in lines[i + 5] and "C-contiguous" in lines[i + 5]
    message = next(line for line in lines if line.startswith("    message:"))
    assert "mutation check failed (argument 2)" in message and "not restored" in message
    assert not any(line.startswith("PASS") for line in lines)
    assert LEGEND in proc.stdout and "no rules registered" not in proc.stdout + proc.stderr
    assert lines[-1].startswith("2 rules checked") and "1 passed, 1 failed" in lines[-1]


def test_json_report(env_with_examples: Any) -> None:
    proc = rulekit_check("example-broken", "--json", env=env_with_examples)
    report = json.loads(proc.stdout)
    assert report["summary"] == {**report["summary"], "pass": 1, "fail": 1, "total": 2}
    failed = next(r for r in report["results"] if r["status"] == "fail")
    assert failed["checks"]["mutation"] == "FAIL" and "not restored" in failed["message"]
    assert failed["check"] == "mutation" and failed["argument"] == "argument 2"
    assert failed["input"].startswith("example 1 of 2\nargument 0: ")
    passed = next(r for r in report["results"] if r["status"] == "pass")
    assert set(passed["checks"]) >= {"interface", "correctness", "statefulness", "registered"}


def test_select_fail_fast_and_jobs(env_with_examples: Any) -> None:
    proc = rulekit_check("example-broken", "--select", "*softplus*", env=env_with_examples)
    assert proc.returncode == 0 and "1 rule checked" in proc.stdout
    proc = rulekit_check("example-broken", "--fail-fast", "--select", "scale_add",
                         env=env_with_examples)  # fmt: skip
    assert proc.returncode == 1 and "1 rule checked" in proc.stdout
    proc = rulekit_check("example", "example-broken", "--jobs", "2", env=env_with_examples)
    assert proc.returncode == 1 and "5 rules checked" in proc.stdout
    assert "4 passed, 1 failed" in proc.stdout
    proc = rulekit_check("example-broken", "--select", "nothing-like-this", env=env_with_examples)
    assert proc.returncode == 1 and "matches 'nothing-like-this'" in proc.stderr


def test_all_installed_and_rules_by_entry_point_name(env_with_examples: Any) -> None:
    proc = rulekit_check("--all-installed", "--select", "rulekit_example", env=env_with_examples)
    assert proc.returncode == 1 and "5 rules checked" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "rulekit", "rules", "example-broken", "--module",
         "rulekit_example_rules_broken"],
        capture_output=True, text=True, timeout=120, check=False, env=env_with_examples,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "rulekit_example_rules_broken  (2 rules)"


def test_unchecked_rules_are_reported_and_fail_unless_allowed(
    tmp_path: pathlib.Path, env_with_examples: Any
) -> None:
    (tmp_path / "opaque_rules.py").write_text(
        "from typing import Any\nimport rulekit\n\n"
        "def opaque(x):\n    return x\n\n"
        "opaque = rulekit.primitive(opaque)\n"
        "rulekit.rrule.register(opaque, Any)(lambda f, x: None)\n"
    )
    env = {**env_with_examples, "PYTHONPATH": f"{tmp_path}:{env_with_examples['PYTHONPATH']}"}
    proc = rulekit_check("opaque_rules", env=env)
    assert proc.returncode == 1
    assert "NOT CHECKED" in proc.stdout and "    reason:   no examples attached" in proc.stdout
    assert "cannot be generated" in proc.stdout
    assert rulekit_check("opaque_rules", "--allow-unchecked", env=env).returncode == 0


# -- discovery: every rule registered while the package is imported ----------------------------


PACKAGE = """
import rulekit
from {prefix}_helpers import register_scaling
from {prefix}_pkg import sub  # a submodule registering through the helper too


def _halve(x):
    return 0.5 * x


halve = rulekit.primitive(_halve)
register_scaling(halve, 0.5, slip={slip})
"""

SUBMODULE = """
import rulekit
from {prefix}_helpers import register_scaling


def _triple(x):
    return 3.0 * x


triple = rulekit.primitive(_triple)
register_scaling(triple, 3.0)
"""

DEPENDENT = """
import rulekit
import {prefix}_pkg  # another rule package: its rules are its own
from {prefix}_helpers import register_scaling


def _negate(x):
    return -x


negate = rulekit.primitive(_negate)
register_scaling(negate, -1.0)
"""


def write_packages(where: pathlib.Path, prefix: str, slip: float = 1.0) -> None:
    """`{prefix}_pkg` (and its submodule `sub`), whose rules a helper of `{prefix}_helpers`
    registers, and `{prefix}_dependent`, which imports it; `slip != 1` breaks `halve`."""
    (where / f"{prefix}_helpers.py").write_text(HELPERS)
    pkg = where / f"{prefix}_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PACKAGE.format(prefix=prefix, slip=slip))
    (pkg / "sub.py").write_text(SUBMODULE.format(prefix=prefix))
    (where / f"{prefix}_dependent.py").write_text(DEPENDENT.format(prefix=prefix))


@pytest.fixture
def on_path(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    """tmp_path on sys.path; the modules imported from it are forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if str(tmp_path) in str(getattr(sys.modules[name], "__file__", "")):
            del sys.modules[name]


def _names(regs: list[Any]) -> list[str]:
    return sorted(rulekit.function_name(r.f).split(".")[-1] for r in regs)


def test_rules_registered_through_a_helper_of_another_module_are_found(
    on_path: pathlib.Path,
) -> None:
    write_packages(on_path, "tkhelp")
    package = load("tkhelp_pkg")
    assert package.fresh and package.module == "tkhelp_pkg"
    assert _names(package.registrations) == ["_halve", "_triple"]
    # Registered by the helper's module, owned by the module being imported.
    assert {r.module for r in package.registrations} == {"tkhelp_helpers"}
    assert sorted(owner(r) for r in package.registrations) == ["tkhelp_pkg", "tkhelp_pkg.sub"]
    assert package.others == {}


def test_the_rules_of_another_rule_package_it_imports_are_not_its_own(
    on_path: pathlib.Path,
) -> None:
    write_packages(on_path, "tkdep")
    package = load("tkdep_dependent")
    assert _names(package.registrations) == ["_negate"]
    assert package.others == {"tkdep_pkg": 1, "tkdep_pkg.sub": 1}
    assert _names(load("tkdep_pkg").registrations) == ["_halve", "_triple"]  # imported before


def test_a_package_imported_before_the_check(on_path: pathlib.Path) -> None:
    """Already imported: the registry-side record of the importing module is used."""
    write_packages(on_path, "tkpre")
    import tkpre_pkg  # type: ignore[import-not-found]  # noqa: F401

    package = load("tkpre_pkg")
    assert not package.fresh and _names(package.registrations) == ["_halve", "_triple"]

    (on_path / "tkpre_direct.py").write_text(
        "import numpy as np\nimport rulekit\nfrom rulekit import Array, example\n\n"
        "def _sq(x):\n    return x * x\n\nsq = rulekit.primitive(_sq)\n"
        "rulekit.rrule.register(sq, Array[np.floating])(lambda f, x: None)\n"
    )
    import tkpre_direct  # type: ignore[import-not-found]  # noqa: F401

    package = load("tkpre_direct")
    assert not package.fresh and _names(package.registrations) == ["_sq"]
    assert all(r.meta[IMPORTING] == "tkpre_direct" for r in package.registrations)  # (registry)


def test_the_modules_a_package_defers_are_loaded_and_its_own(on_path: pathlib.Path) -> None:
    """`rulekit check PKG` imports what PKG defers (`registry.defer`), whatever the trigger."""
    write_packages(on_path, "tkdefer")
    lazy = on_path / "tkdefer_lazy"
    lazy.mkdir()
    (lazy / "__init__.py").write_text(
        "import rulekit\n"
        "rulekit.registry.defer('tkdefer_library_never_imported', 'tkdefer_lazy.more')\n"
    )
    (lazy / "more.py").write_text(SUBMODULE.format(prefix="tkdefer").replace("_triple", "_third"))
    package = load("tkdefer_lazy")
    assert _names(package.registrations) == ["_third"]
    assert [owner(r) for r in package.registrations] == ["tkdefer_lazy.more"]
    assert "tkdefer_library_never_imported" not in sys.modules
    assert ("tkdefer_library_never_imported", "tkdefer_lazy.more") not in registry.deferred()


def test_the_bundled_rules_when_already_imported(capsys: pytest.CaptureFixture[str]) -> None:
    """`rules` imported before (by rulekit, a test, a conftest): no fresh import is possible,
    every rule its modules registered is found."""
    from rulekit._cli import main

    package = load("rules")
    assert not package.fresh
    expected = [r for r in registry.entries() if r.module.split(".")[0] == "rules"]
    assert len(expected) > 400 and package.registrations == expected
    assert main(["check", "rules", "--select", "np.sinh(Union[Array[np.float32]*"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("checking ") and " of rules\n" in out and " 0 failed" in out


def test_no_rules_found_names_where_they_went(
    on_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rulekit._cli import main

    (on_path / "tkwrap_empty.py").write_text("import tkwrap_pkg\n")
    write_packages(on_path, "tkwrap")
    assert main(["check", "tkwrap_empty"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rulekit check: no rules registered by tkwrap_empty; importing it ")
    assert "tkwrap_pkg (1), tkwrap_pkg.sub (1)" in err and err.count("\n") == 1


def test_the_cli_checks_helper_registered_rules(
    on_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rulekit._cli import main

    write_packages(on_path, "tkcli", slip=2.0)  # halve's gradient is twice too large
    assert main(["check", "tkcli_pkg"]) == 1
    out = capsys.readouterr().out
    assert "no rules registered" not in out
    fail = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert len(fail) == 1 and fail[0].endswith("tkcli_pkg._halve(Array[np.floating])")
    assert "    check:    correctness" in out and "    argument: argument 0" in out
    assert "2 rules checked" in out and "1 passed, 1 failed" in out


# -- results and rows ----------------------------------------------------------------------


def _halve_rule(slip: float) -> Any:
    def rule(f: Any, x: Any) -> Any:
        y = rulekit.CoDual(x.x / 2, rulekit.zero_fdata(x.x / 2))

        def pullback(dy: Any) -> Any:
            if x.dx is not None:
                x.dx += slip * (y.dx if isinstance(y.dx, np.ndarray) else dy) / 2
            return rulekit.NoRData(), rulekit.NoRData()

        return y, pullback

    return rule


def _halve(x: np.ndarray) -> Any:
    return x / 2


def test_rules_without_examples_are_checked_on_generated_inputs() -> None:
    reg = registry.add("rrule", _halve, (Array[np.floating],), _halve_rule(1.0), module=__name__)
    result = check_registration(reg, n_examples=8)
    assert result.status == "pass", result.message
    assert result.inputs.endswith("generated") and int(result.inputs.split()[0]) >= 1


def test_a_failure_on_generated_inputs_names_the_input() -> None:
    reg = registry.add("rrule", _halve, (Array[np.floating],), _halve_rule(3.0), module=__name__)
    result = check_registration(reg, n_examples=8)
    assert result.status == "fail" and result.check == "correctness"
    assert result.argument == "argument 0" and "correctness check failed" in result.message
    assert result.input.startswith("generated input (hypothesis, seed 0)\nargument 0: float")
    assert "array" in result.input.splitlines()[1]


def test_a_crash_outside_the_checks_is_a_failure_with_its_traceback() -> None:
    def crash(f: Any, x: Any) -> Any:
        raise ValueError("no such luck")

    reg = registry.add(
        "rrule", _halve, (Array[np.floating],), crash, module=__name__,
        examples=[rulekit.example(np.ones(3))],
    )  # fmt: skip
    result = check_registration(reg)  # the rule raising: the kit names the check
    assert result.status == "fail" and result.check == "interface"
    assert "the forward pass raised ValueError: no such luck" in result.message
    assert result.input.startswith("example 1 of 1\nargument 0: float64 array")
    assert "(3,)" in result.input

    def broken_examples() -> list[Any]:
        raise KeyError("no examples today")

    reg = registry.add("rrule", _halve, (Array[np.float32],), crash, module=__name__,
                       examples=broken_examples)  # fmt: skip
    result = check_registration(reg)
    assert result.status == "fail" and result.check == ""
    assert result.message.startswith("KeyError: 'no examples today'\nTraceback")
    assert result.input == "loading the registration's examples"


def test_rows_read_without_contradictions() -> None:
    plain = RuleResult("f(Array)", "m", "pass", dict.fromkeys(
        ("interface", "registered", "mutation", "aliasing", "correctness", "statefulness"),
        "pass"), allocations=11, stateful=False, seconds=0.5, inputs="3 examples")  # fmt: skip
    plain.checks["allocation"] = "n/a: plain rule (11 allocations per call; ...)"
    stateful = RuleResult("g(Array)", "m", "pass", dict(plain.checks), allocations=0,
                          stateful=True, inputs="2 examples")  # fmt: skip
    stateful.checks["allocation"] = "pass"
    failed = RuleResult("h(Array)", "m", "fail", {"mutation": "FAIL"}, check="mutation")
    header, *rows = format_header(), format_row(plain), format_row(stateful), format_row(failed)
    assert header.split() == ["result", "intf", "reg", "mut", "alias", "grad", "state", "alloc",
                              "time", "inputs", "rule"]  # fmt: skip
    assert rows[0].split()[:9] == ["PASS", "ok", "ok", "ok", "ok", "ok", "ok", "n/a", "(plain)"]
    assert "11" not in rows[0]
    assert rows[1].split()[:9] == ["PASS", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "(0)"]
    assert rows[2].split()[:8] == ["FAIL", "-", "-", "FAIL", "-", "-", "-", "-"]
    # The columns line up under the header.
    starts = {row.index(name) for row, name in zip(rows, ("f(", "g(", "h("), strict=True)}
    assert starts == {header.index("rule")}


def test_live_progress_on_a_terminal() -> None:
    out = io.StringIO()
    printer = _Printer(["f(Array)", "g(Array)"], out, live=True, verbose=False)
    printer.start()
    printer(0, RuleResult("f(Array)", "m", "pass"))
    printer(1, RuleResult("g(Array)", "m", "fail", check="mutation", message="boom"))
    printer.finish()
    text = out.getvalue()
    assert text.startswith("[0/2] 0 not passing  checking f(Array)\r\033[K")
    assert "[1/2] 0 not passing  checking g(Array)\r\033[K" in text
    assert "FAIL" in text and "    check:    mutation\n" in text and "[2/2] 1 not passing" in text
    assert text.endswith("\r\033[K" + LEGEND + "\n")


def test_piped_output_has_no_control_characters(env_with_examples: Any) -> None:
    proc = rulekit_check("example-broken", "-v", env=env_with_examples)
    assert "\r" not in proc.stdout and "\033" not in proc.stdout
