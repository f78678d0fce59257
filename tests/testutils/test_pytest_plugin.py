"""The pytest plugin: `pytest --rulekit-check=MODULE` makes each rule of MODULE a test item."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any

from rulepkgs import HELPERS


def run_pytest(*args: str, env: dict[str, str], cwd: pathlib.Path) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        capture_output=True, text=True, timeout=300, check=False, env=env, cwd=cwd,
    )  # fmt: skip


def test_every_rule_is_a_test_item_with_a_readable_id(
    tmp_path: pathlib.Path, env_with_examples: Any
) -> None:
    proc = run_pytest("--rulekit-check=example", "-v", env=env_with_examples, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rulekit[rulekit_example_rules._softplus(Array[np.floating])] PASSED" in proc.stdout
    assert "3 passed" in proc.stdout


def test_a_broken_rule_fails_its_item_with_check_argument_input_and_message(
    tmp_path: pathlib.Path, env_with_examples: Any
) -> None:
    proc = run_pytest(
        "--rulekit-check=rulekit_example_rules_broken", env=env_with_examples, cwd=tmp_path
    )
    assert proc.returncode == 1
    assert "1 failed, 1 passed" in proc.stdout
    out = proc.stdout
    assert "FAIL  rulekit_example_rules_broken.broken_scale_add_(" in out
    assert "    check:    mutation\n    argument: argument 2\n    input:    example 1 of 2\n" in out
    assert "mutation check failed (argument 2)" in out and "not restored" in out


PACKAGE = """
import rulekit
from tkplug_helpers import register_scaling


def _triple(x):
    return 3.0 * x


def _halve(x):
    return 0.5 * x


triple = rulekit.primitive(_triple)
halve = rulekit.primitive(_halve)
register_scaling(triple, 3.0)
register_scaling(halve, 0.5)
"""


def test_helper_registered_rules_even_when_a_conftest_imported_the_package_first(
    tmp_path: pathlib.Path, env_with_examples: Any
) -> None:
    (tmp_path / "tkplug_helpers.py").write_text(HELPERS)
    (tmp_path / "tkplug_pkg.py").write_text(PACKAGE)
    (tmp_path / "conftest.py").write_text("import tkplug_pkg  # noqa: F401\n")
    env = {**env_with_examples, "PYTHONPATH": f"{tmp_path}:{env_with_examples['PYTHONPATH']}"}
    proc = run_pytest("--rulekit-check=tkplug_pkg", "-v", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rulekit[tkplug_pkg._triple(Array[np.floating])] PASSED" in proc.stdout
    assert "2 passed" in proc.stdout
    # -k selects among the rule items; a path names the package as well as a module name.
    proc = run_pytest("--rulekit-check=./tkplug_pkg.py", "-k", "halve", env=env, cwd=tmp_path)
    assert proc.returncode == 0 and "1 passed, 1 deselected" in proc.stdout


def test_an_unknown_package_is_a_usage_error(
    tmp_path: pathlib.Path, env_with_examples: Any
) -> None:
    proc = run_pytest("--rulekit-check=missing_pkg_xyz", env=env_with_examples, cwd=tmp_path)
    assert proc.returncode == 4  # pytest's usage error
    assert "--rulekit-check: no module named 'missing_pkg_xyz'" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
