"""The code in README.md and the guide runs as written (blocks of a page share one namespace)."""

from __future__ import annotations

import pytest
from fdcheck import run_doc_page

PAGES = [
    "README.md",
    "docs/tutorial.md",
    "docs/testing-your-rules.md",
    "docs/performance.md",
]


@pytest.mark.parametrize("page", PAGES)
def test_page_code_runs(page: str) -> None:
    run_doc_page(page)
