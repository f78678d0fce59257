"""The pytest plugin: `pytest --rulekit-check=MODULE` makes each rule of MODULE a test item."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any


def run_pytest(*args: str, env: dict[str, str], cwd: pathlib.Path) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        capture_output=True, text=True, timeout=600, check=False, env=env, cwd=cwd,
    )  # fmt: skip


def test_every_rule_is_a_test_item_with_a_readable_id(
    tmp_path: pathlib.Path, env_with_examples: Any
) -> None:
    proc = run_pytest("--rulekit-check=example", "-v", env=env_with_examples, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rulekit[rulekit_example_rules._softplus(Array[np.floating])] PASSED" in proc.stdout
    assert "2 passed" in proc.stdout


def test_a_broken_rule_fails_its_item_with_the_report_row(
    tmp_path: pathlib.Path, env_with_examples: Any
) -> None:
    proc = run_pytest(
        "--rulekit-check=rulekit_example_rules_broken", env=env_with_examples, cwd=tmp_path
    )
    assert proc.returncode == 1
    assert "1 failed, 1 passed" in proc.stdout
    assert "mutation check failed (argument 2)" in proc.stdout
