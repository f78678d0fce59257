"""The `rulekit` command line (rulekit/_cli.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import rulekit
from rulekit import Array, registry
from rulekit._cli import main


@pytest.fixture(autouse=True)
def registrations() -> Iterator[None]:
    """Remove every registration a test makes (the registry is process-global)."""
    before = set(registry.entries())
    yield
    for reg in registry.entries():
        if reg not in before:
            registry.remove(reg)


@rulekit.primitive
def _f(*args: Any) -> None:
    """A private function to register rules for (wrapped: traced calls reach its rules)."""


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: rulekit") and "rules" in out


def test_rules_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["rules", "--help"])
    out = capsys.readouterr().out
    assert "--module" in out and "modules" in out


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "usage: rulekit" in capsys.readouterr().err


def test_rules_lists_every_registration_by_module(capsys: pytest.CaptureFixture[str]) -> None:
    rulekit.rrule.register(_f, Array[np.float64, 2], float)(lambda f, x, y: None)
    rulekit.build_primitive_rrule.register(_f, Array[np.float32])(lambda sig: None)
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    assert f"{__name__}  (2 rules)" in out
    assert "_f(Array[np.float64, 2], float)  [rrule]" in out
    assert "_f(Array[np.float32])  [factory]" in out
    assert "rulekit._outrule" in out  # the core's own rules (np.copyto, the generic out=)
    n, modules = len(registry.entries()), len({r.module for r in registry.entries()})
    assert out.rstrip().endswith(f"{n} rules in {modules} modules")


def test_rules_filtered_by_module(capsys: pytest.CaptureFixture[str]) -> None:
    rulekit.rrule.register(_f, Array)(lambda f, x: None)
    assert main(["rules", "--module", __name__]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"{__name__}  (1 rules)",
        f"  {__name__}._f(Array)  [rrule]",
        "1 rules in 1 modules",
    ]


def test_rules_imports_the_named_modules_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "rulekit._outrule", "--module", "rulekit._outrule"]) == 0
    out = capsys.readouterr().out
    assert "np.copyto(Array[np.inexact], Array[np.number])  [factory]" in out


def test_help_via_python_dash_m() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rulekit._cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: rulekit") and "rules" in proc.stdout
