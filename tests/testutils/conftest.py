"""Fixtures: the example rule packages of `examples/`, installed into a temporary directory."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def example_packages(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """`examples/thirdparty` and `examples/thirdparty_broken`, pip-installed into a directory.

    Installed (not just put on sys.path) so that their `rulekit.rules` entry points exist.
    """
    target = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
         str(target), str(ROOT / "examples" / "thirdparty"),
         str(ROOT / "examples" / "thirdparty_broken")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return target


@pytest.fixture
def env_with_examples(example_packages: pathlib.Path) -> Iterator[dict[str, str]]:
    """An environment whose PYTHONPATH has the installed example packages."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(example_packages), env.get("PYTHONPATH", "")])
    yield env
