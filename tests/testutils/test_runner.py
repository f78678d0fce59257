"""`rulekit check` (testutils._runner, testutils._report) on third-party rule packages."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import numpy as np

import rulekit
from rulekit import Array, registry
from testutils._runner import check_registration


def rulekit_check(*args: str, env: dict[str, str], cwd: Any = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "rulekit._cli", "check", *args],
        capture_output=True, text=True, timeout=600, check=False, env=env, cwd=cwd,
    )  # fmt: skip


def test_a_package_found_through_its_entry_point_passes(env_with_examples: Any) -> None:
    proc = rulekit_check("example", env=env_with_examples)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert sum(line.startswith("PASS") for line in lines) == 2
    assert "allocs=0" in proc.stdout  # the stateful rule's allocation count is reported
    assert lines[-1].startswith("2 rules checked in") and "2 passed, 0 failed" in lines[-1]


def test_the_broken_copy_fails_naming_the_check(env_with_examples: Any) -> None:
    proc = rulekit_check("example-broken", env=env_with_examples)
    assert proc.returncode == 1
    fail = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fail) == 1 and "broken_scale_add_" in fail[0] and "mut=FAIL" in fail[0]
    assert "mutation check failed (argument 2)" in proc.stdout
    assert "not restored" in proc.stdout


def test_json_report(env_with_examples: Any) -> None:
    proc = rulekit_check("example-broken", "--json", env=env_with_examples)
    report = json.loads(proc.stdout)
    assert report["summary"] == {**report["summary"], "pass": 1, "fail": 1, "total": 2}
    failed = next(r for r in report["results"] if r["status"] == "fail")
    assert failed["checks"]["mutation"] == "FAIL" and "not restored" in failed["message"]
    passed = next(r for r in report["results"] if r["status"] == "pass")
    assert set(passed["checks"]) >= {"interface", "correctness", "statefulness", "registered"}


def test_select_fail_fast_and_jobs(env_with_examples: Any) -> None:
    proc = rulekit_check("example-broken", "--select", "*softplus*", env=env_with_examples)
    assert proc.returncode == 0 and "1 rules checked" in proc.stdout
    proc = rulekit_check("example-broken", "--fail-fast", "--select", "scale_add",
                         env=env_with_examples)  # fmt: skip
    assert proc.returncode == 1 and "1 rules checked" in proc.stdout
    proc = rulekit_check("example", "example-broken", "--jobs", "2", env=env_with_examples)
    assert proc.returncode == 1 and "4 rules checked" in proc.stdout
    assert "2 failed" not in proc.stdout and "3 passed, 1 failed" in proc.stdout


def test_unchecked_rules_are_reported_and_fail_unless_allowed(
    tmp_path: pathlib.Path, env_with_examples: Any
) -> None:
    (tmp_path / "opaque_rules.py").write_text(
        "from typing import Any\nimport rulekit\n\n"
        "def opaque(x):\n    return x\n\n"
        "rulekit.rrule.register(opaque, Any)(lambda f, x: None)\n"
    )
    env = {**env_with_examples, "PYTHONPATH": f"{tmp_path}:{env_with_examples['PYTHONPATH']}"}
    proc = rulekit_check("opaque_rules", env=env)
    assert proc.returncode == 1
    assert "NOT CHECKED" in proc.stdout and "cannot be generated" in proc.stdout
    assert rulekit_check("opaque_rules", "--allow-unchecked", env=env).returncode == 0


def test_rules_without_examples_are_checked_on_generated_inputs() -> None:
    def halve(x: np.ndarray) -> Any:
        return x / 2

    def halve_rule(f: Any, x: Any) -> Any:
        y = rulekit.CoDual(x.x / 2, rulekit.zero_fdata(x.x / 2))

        def pullback(dy: Any) -> Any:
            if x.dx is not None:
                x.dx += (y.dx if isinstance(y.dx, np.ndarray) else dy) / 2
            return rulekit.NoRData(), rulekit.NoRData()

        return y, pullback

    reg = registry.add("rrule", halve, (Array[np.floating],), halve_rule, module=__name__)
    try:
        result = check_registration(reg, n_examples=8)
    finally:
        registry.remove(reg)
    assert result.status == "pass", result.message
    assert result.inputs.endswith("generated") and int(result.inputs.split()[0]) >= 1
