"""Every ```python block in README.md and docs/*.md runs as written.

The blocks of one page run in order in one namespace, like a doctest session, with
the page's own line numbers in tracebacks. A block that is not Python to run says
so by its fence's language, one of `NOT_RUN`: `text` (program output, a call
synopsis, a snippet that cannot run on its own), `console` and `sh` (shell commands:
`pip install`, `rulekit check`), `toml`. A fence with no language, or another one
(a typo such as ```py would silently skip the block), fails. A Python block meant
to raise shows it with `try`/`except` and an assertion on the error, so it still runs.
"""

from __future__ import annotations

import pathlib
import re
import textwrap
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]

RUN = "python"
#: fence languages of blocks that are deliberately not run (see the module docstring)
NOT_RUN = frozenset({"text", "console", "sh", "toml"})

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<lang>[^\s`]*)[^`]*$")


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # the line of the opening fence, counted from 1
    code: str  # dedented to the fence's indentation


def fenced_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, in order (indented ones in lists too)."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        close = re.compile(rf"^ {{0,{indent}}}{re.escape(fence[0]) * len(fence)}+\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        if j == len(lines):
            raise ValueError(f"line {i + 1}: the code block opened here is never closed")
        body = "\n".join(ln[indent:] if ln[:indent].isspace() else ln for ln in lines[i + 1 : j])
        blocks.append(Block(m["lang"], i + 1, textwrap.dedent(body) + "\n"))
        i = j + 1
    return blocks


def run_page(page: str) -> int:
    """Run the python blocks of `page` in one namespace; return how many ran."""
    path = ROOT / page
    blocks = [b for b in fenced_blocks(path.read_text(encoding="utf-8")) if b.lang == RUN]
    namespace: dict[str, object] = {"__name__": "docs_" + path.stem.replace("-", "_")}
    for b in blocks:
        # Padded so that a traceback names the Markdown page's own line numbers.
        code = compile("\n" * b.line + b.code, str(path), "exec", dont_inherit=True)
        exec(code, namespace)
    return len(blocks)


@pytest.mark.parametrize("page", PAGES)
def test_page_code_runs(page: str, registrations: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's python blocks run, in order; the `registrations` fixture loads every bundled
    rule first and removes only what the page registers itself."""
    monkeypatch.chdir(ROOT)
    run_page(page)


@pytest.mark.parametrize("page", PAGES)
def test_every_block_is_run_or_says_why_not(page: str) -> None:
    for b in fenced_blocks((ROOT / page).read_text(encoding="utf-8")):
        assert b.lang == RUN or b.lang in NOT_RUN, (
            f"{page}:{b.line}: a code block fenced ```{b.lang} is neither run (```python) "
            f"nor marked as not Python to run ({', '.join(sorted(NOT_RUN))})"
        )


def test_pages_have_python_blocks() -> None:
    """The discovery finds the blocks (a parser that found none would pass every page)."""
    counts = {p: sum(b.lang == RUN for b in fenced_blocks((ROOT / p).read_text())) for p in PAGES}
    for page in ["README.md", "docs/tutorial.md", "docs/concepts.md", "docs/allocation-counter.md"]:
        assert counts[page] >= 1, f"{page} lost its python blocks"
    # (the minimums the pages' former runs in tests/rules/ asserted)
    least = {
        "docs/stateful-rules.md": 8,
        "docs/conventions-ufuncs.md": 5,
        "docs/conventions-reductions.md": 1,
    }
    for page, n in least.items():
        assert counts[page] >= n, f"{page}: {counts[page]} python blocks, want ≥ {n}"
    assert sum(counts.values()) >= 50


def test_fenced_blocks_parser() -> None:
    text = textwrap.dedent(
        """\
        intro
        ```python
        a = 1
        ```
        * a list item:

          ```python
          b = a + 1
          if b:
              c = b
          ```
        ````text
        ```python
        not a block of its own
        ```
        ````
        ```
        bare
        ```
        """
    )
    blocks = fenced_blocks(text)
    assert [(b.lang, b.line) for b in blocks] == [
        ("python", 2),
        ("python", 7),
        ("text", 12),
        ("", 17),
    ]
    assert blocks[1].code == "b = a + 1\nif b:\n    c = b\n"
    assert "not a block of its own" in blocks[2].code
    with pytest.raises(ValueError, match="never closed"):
        fenced_blocks("```python\nx = 1\n")
