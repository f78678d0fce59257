"""Every ```python block of docs/concepts.md runs, in order, in one namespace."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator

import pytest

from rulekit import registry

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "concepts.md"
MODULE = "docs_concepts"


def python_blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), re.S | re.M)


@pytest.fixture
def registrations() -> Iterator[None]:
    """Remove the registrations the page makes (the registry is process-global)."""
    yield
    for reg in registry.entries(module=MODULE):
        registry.remove(reg)


def test_concepts_code_blocks_run(registrations: None, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = python_blocks(PAGE)
    assert len(blocks) >= 10, "docs/concepts.md lost its code blocks"
    namespace: dict[str, object] = {"__name__": MODULE}
    for i, block in enumerate(blocks):
        code = compile(block, f"{PAGE.name} (block {i + 1})", "exec", dont_inherit=True)
        exec(code, namespace)
    assert registry.entries(module=MODULE)  # the page registered its rules
    out = capsys.readouterr().out
    assert "scale(Array[np.float64, 1], float)" in out
