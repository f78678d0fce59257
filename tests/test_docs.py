"""The code in README.md and the guide runs as written (blocks of a page share one namespace)."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/tutorial.md", "docs/testing-your-rules.md"]


def python_blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("page", PAGES)
def test_page_code_runs(page: str) -> None:
    blocks = python_blocks(ROOT / page)
    assert blocks, f"{page} has no python code blocks"
    namespace: dict[str, object] = {"__name__": f"docs_{pathlib.Path(page).stem}"}
    for block in blocks:
        exec(compile(block, f"{page}", "exec"), namespace)
