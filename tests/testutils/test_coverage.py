"""docs/coverage.md is generated from the registry (`rulekit coverage`), never edited by hand."""

from __future__ import annotations

import pathlib

from testutils._coverage import coverage_markdown

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_coverage_page_is_the_registry_s_output() -> None:
    page = (ROOT / "docs" / "coverage.md").read_text(encoding="utf-8")
    assert page == coverage_markdown(["rules"]), (
        "docs/coverage.md is out of date: regenerate it with `rulekit coverage > docs/coverage.md`"
    )


def test_the_page_lists_every_bundled_registration() -> None:
    text = coverage_markdown(["rules"])
    assert "## Side by side with HIPS autograd" in text
    assert "| `numpy.sum` | yes | yes |" in text
    assert "`np.matmul(" in text and "stateful factory" in text
