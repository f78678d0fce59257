"""Every docs page is linked from docs/index.md, every relative link points at a file, and
every module or function of rulekit, rules and testutils that a page names exists."""

from __future__ import annotations

import pathlib
import re

from test_docs_architecture import named_dotted, resolve

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_every_page_is_linked_from_the_index() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    linked = set(re.findall(r"\]\(([\w-]+\.md)\)", index))
    assert pages <= linked, f"not linked from docs/index.md: {sorted(pages - linked)}"


def test_relative_links_resolve() -> None:
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([\w./-]+)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_named_modules_and_functions_exist() -> None:
    """A name in backticks such as `rules.scipy.special.logsumexp` or `rulekit.registry.defer`
    resolves (a module, then attributes), so that a rename leaves no stale name in the docs."""
    problems = [
        f"{page.relative_to(ROOT)}: `{name}`: {why}"
        for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
        for name in sorted(named_dotted(page))
        if (why := resolve(name))
    ]
    assert not problems, "names that do not exist:\n" + "\n".join(problems)
