"""The `rulekit` command line (rulekit/_cli.py)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from rulepkgs import HELPERS

import rulekit
import testutils._packages
from rulekit import Array, registry
from rulekit._cli import main
from testutils._packages import owner

pytestmark = pytest.mark.usefixtures("registrations")  # (tests/conftest.py)


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
    assert "--module" in out and "MODULE" in out and "entry-point" in out


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
    assert "rules.numpy.copyto" in out  # the installed rule packages (rules), loaded first
    n, modules = len(registry.entries()), len({owner(r) for r in registry.entries()})
    assert out.rstrip().endswith(f"{n} rules in {modules} modules")


def test_rules_loads_what_rule_packages_defer(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "clidefer_rules.py").write_text(
        "import numpy as np\nimport rulekit\n"
        "@rulekit.primitive\ndef g(x):\n    return x\n"
        "rulekit.rrule.register(g, rulekit.Array)(lambda f, x: None)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "clidefer_rules", raising=False)
    registry.defer("clidefer_library_never_imported", "clidefer_rules")
    assert main(["rules", "--module", "clidefer_rules"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "clidefer_rules  (1 rules)",
        "  clidefer_rules.g(Array)  [rrule]",
        "1 rules in 1 modules",
    ]


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
    assert main(["rules", "rules.numpy.copyto", "--module", "rules.numpy.copyto"]) == 0
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


# -- a rule package written to tmp_path: its rules are registered by a helper of another module --


PACKAGE = """
import rulekit
from {prefix}_helpers import register_scaling


def _triple(x):
    return 3.0 * x


def _halve(x):
    return 0.5 * x


triple = rulekit.primitive(_triple)
halve = rulekit.primitive(_halve)
register_scaling(triple, 3.0)
register_scaling(halve, 0.5, slip={slip})
"""


def write_package(where: pathlib.Path, prefix: str, slip: float = 1.0) -> pathlib.Path:
    """`{prefix}_pkg`, whose two rules a helper of `{prefix}_helpers` registers; with
    `slip != 1` the rule of `halve` has a wrong gradient."""
    (where / f"{prefix}_helpers.py").write_text(HELPERS)
    pkg = where / f"{prefix}_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PACKAGE.format(prefix=prefix, slip=slip))
    return pkg


@pytest.fixture
def on_path(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    """tmp_path on sys.path; the modules imported from it are forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if str(tmp_path) in str(getattr(sys.modules[name], "__file__", "")):
            del sys.modules[name]


def _env(cwd: Any) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd or "."), *sys.path])}


def run_cli(*args: str, cwd: Any = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rulekit", *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=cwd, env=_env(cwd),
    )  # fmt: skip


# -- --version, python -m rulekit, exit codes ---------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"rulekit {rulekit.__version__} (numpy {np.__version__}, Python ")


def test_python_dash_m_rulekit() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith(f"rulekit {rulekit.__version__}")
    proc = run_cli("--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: rulekit")
    assert "exit codes: 0 success, 1 a rule failed" in " ".join(proc.stdout.split())


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check", "--no-such-option"])
    assert info.value.code == 2
    assert main(["check"]) == 2
    assert "name at least one module" in capsys.readouterr().err


# -- naming a package: module, entry-point name or path; clear errors ---------------------------


def test_a_missing_module_is_one_line_on_stderr_and_exit_2() -> None:
    proc = run_cli("check", "missing_pkg_for_rulekit_tests")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("rulekit check: no module named 'missing_pkg_for_rulekit_tests'")
    assert "entry point" in proc.stderr and "path" in proc.stderr


def test_not_a_module_name_nor_a_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "my-rules"]) == 2
    assert main(["rules", "my-rules"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("'my-rules' is not a module name, a path" in e for e in err)


def test_a_missing_path_says_how_to_pass_a_module(tmp_path: pathlib.Path) -> None:
    proc = run_cli("check", "./mod.py", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr == (
        "rulekit check: no such file or directory: ./mod.py (pass a .py file, a package "
        "directory, or an importable module name)\n"
    )
    (tmp_path / "project").mkdir()
    proc = run_cli("check", "project/", cwd=tmp_path)
    assert proc.returncode == 2 and "not a package (it has no __init__.py)" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_a_path_is_loaded_by_path(tmp_path: pathlib.Path) -> None:
    """A .py file, a package directory or its __init__.py: loaded from where it is."""
    write_package(tmp_path, "tkpath")
    (tmp_path / "single_rule.py").write_text(
        "import rulekit\nfrom tkpath_helpers import register_scaling\n\n"
        "def _double(x):\n    return 2.0 * x\n\n"
        "double = rulekit.primitive(_double)\nregister_scaling(double, 2.0)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # tmp_path is not on it
    for arg, counted in [
        ("./single_rule.py", "1 rule checked"),
        ("tkpath_pkg/", "2 rules checked"),
        (str(tmp_path / "tkpath_pkg" / "__init__.py"), "2 rules checked"),
    ]:
        proc = subprocess.run(
            [sys.executable, "-m", "rulekit", "check", arg],
            capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path, env=env,
        )  # fmt: skip
        assert proc.returncode == 0, (arg, proc.stdout + proc.stderr)
        assert counted in proc.stdout, (arg, proc.stdout)


def test_a_package_that_raises_on_import_shows_its_traceback(
    on_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (on_path / "tkraise_pkg.py").write_text("import numpy\nraise RuntimeError('boom')\n")
    assert main(["check", "tkraise_pkg"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rulekit check: importing tkraise_pkg failed: RuntimeError: boom\n")
    assert "Traceback" in err and "tkraise_pkg.py" in err


def test_entry_point_names_work_for_rules_and_check(
    on_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_package(on_path, "tkep")
    monkeypatch.setattr(
        testutils._packages, "installed_rule_packages", lambda: {"tk-example": "tkep_pkg"}
    )
    assert main(["rules", "tk-example", "--module", "tkep_pkg"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "tkep_pkg  (2 rules)" and "tkep_pkg._triple(" in out
    assert main(["check", "tk-example"]) == 0
    assert "2 rules checked" in capsys.readouterr().out


def test_rules_groups_helper_registered_rules_under_the_importing_module(
    on_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_package(on_path, "tkgroup")
    assert main(["rules", "tkgroup_pkg"]) == 0
    out = capsys.readouterr().out
    assert "tkgroup_pkg  (2 rules)" in out and "tkgroup_helpers" not in out


# -- output into a pipe that closes early -------------------------------------------------------


def _into_closed_pipe(*args: str, cwd: Any) -> subprocess.CompletedProcess[str]:
    """The CLI with stdout a pipe whose reading end is already closed (`| head`, at once)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "rulekit", *args],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
            cwd=cwd, env=_env(cwd),
        )  # fmt: skip
    finally:
        os.close(write)


def test_a_broken_pipe_is_quiet(tmp_path: pathlib.Path) -> None:
    write_package(tmp_path, "tkpipe")
    for args in (["rules"], ["check", "tkpipe_pkg", "--json"], ["check", "tkpipe_pkg", "-v"]):
        proc = _into_closed_pipe(*args, cwd=tmp_path)
        assert (proc.returncode, proc.stderr) == (141, ""), args


def test_a_pipe_closed_after_the_first_line(tmp_path: pathlib.Path) -> None:
    """`rulekit rules | head -1`: more output than the pipe holds; the reader leaves."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rulekit", "rules"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=_env(tmp_path),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=120) in (0, 141)  # 0 if it all fit in the pipe buffer first
    assert first.strip() and err == b""
