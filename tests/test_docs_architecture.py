"""docs/architecture.md stays true: every module it names exists, and its map is complete.

The page names modules in backticks, dotted (`rulekit._engine._tape`,
`rules.numpy.ufuncs.unary`, `rulekit.registry.defer`: a module and attributes) or as
paths (`rules/numpy/ufuncs/`, `rules/numpy/ufuncs/unary.py`). Each dotted name must
import as far as it is a module and resolve as attributes after that; each path
must exist and, under a package, import. Every package of `rulekit/`, `rules/` and
`testutils/` must be named on the page (the package map).
"""

from __future__ import annotations

import importlib
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGES = ("rulekit", "rules", "testutils")
#: dotted names in the docs that are not Python names, and what they are
NOT_MODULES = {"rulekit.rules": "the entry-point group rule packages are found through"}

_CODE = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(rf"(?<![\w.])(?:{'|'.join(PACKAGES)})(?:\.\w+)*(?![\w/])")
_PATH = re.compile(rf"(?<![\w./])(?:{'|'.join(PACKAGES)}|tests|docs|benchmarks)/[\w./-]*")


def _spans(page: pathlib.Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^ *```.*?^ *```", "", text, flags=re.S | re.M)  # (code blocks: test_docs)
    return _CODE.findall(text)


def named_dotted(page: pathlib.Path = PAGE) -> set[str]:
    """The dotted names under rulekit, rules or testutils in the page's backticks."""
    return {m for span in _spans(page) for m in _DOTTED.findall(span)} - NOT_MODULES.keys()


def named_paths(page: pathlib.Path = PAGE) -> set[str]:
    return {m for span in _spans(page) for m in _PATH.findall(span)}


def resolve(dotted: str) -> str | None:
    """None if `dotted` is a module, or a module followed by attributes; else why not."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            obj: object = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and not name.startswith(e.name):
                raise  # (the module exists, but imports something that does not)
            continue
        for k, attr in enumerate(parts[i:], i):
            if not hasattr(obj, attr):
                return f"{'.'.join(parts[:k])} has no attribute or submodule {attr!r}"
            obj = getattr(obj, attr)
        return None
    return f"no module {parts[0]!r}"


def _module_of(path: str) -> str | None:
    """The module a path under one of PACKAGES stands for (None for other paths)."""
    p = pathlib.PurePosixPath(path.rstrip("/"))
    if p.parts[0] not in PACKAGES:
        return None
    if p.suffix == ".py":
        p = p.with_suffix("") if p.name != "__init__.py" else p.parent
    if p.name == "__main__":  # (importing it would run the command line)
        return None
    return ".".join(p.parts)


def packages() -> set[str]:
    """Every package (a directory with an __init__.py) of rulekit/, rules/ and testutils/."""
    return {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in PACKAGES
        for init in (ROOT / top).rglob("__init__.py")
    }


def test_the_page_names_modules() -> None:
    """The parser finds what the page names (a parser finding nothing would pass the rest)."""
    names = named_dotted()
    assert {"rulekit._api", "rules.numpy.ufuncs", "rulekit.registry"} <= names, sorted(names)
    assert "rules.numpy.ufuncs.unary" in named_dotted() | {
        m for p in named_paths() if (m := _module_of(p))
    }


def test_every_named_module_exists() -> None:
    problems = [f"`{d}`: {why}" for d in sorted(named_dotted()) if (why := resolve(d))]
    for path in sorted(named_paths()):
        if not (ROOT / path).exists():
            problems.append(f"`{path}`: no such file or directory")
        elif (module := _module_of(path)) is not None and (why := resolve(module)):
            problems.append(f"`{path}`: {why}")
    assert not problems, "docs/architecture.md names what does not exist:\n" + "\n".join(problems)


def test_every_package_is_on_the_map() -> None:
    named = named_dotted() | {m for p in named_paths() if (m := _module_of(p)) is not None}
    missing = sorted(packages() - named)
    assert not missing, (
        "packages missing from docs/architecture.md's package map (name each in backticks, "
        f"`rules.numpy.ufuncs` or `rules/numpy/ufuncs/`): {missing}"
    )


def test_parsing() -> None:
    spans = ["rulekit._engine._tape", "rulekit.registry.defer(t, m)", "see rules/numpy/"]
    found = {m for s in spans for m in _DOTTED.findall(s)}
    assert found == {"rulekit._engine._tape", "rulekit.registry.defer"}
    assert _PATH.findall(spans[2]) == ["rules/numpy/"]
    assert _module_of("rules/numpy/ufuncs/") == "rules.numpy.ufuncs"
    assert _module_of("rules/numpy/ufuncs/unary.py") == "rules.numpy.ufuncs.unary"
    assert _module_of("rules/__init__.py") == "rules"
    assert _module_of("tests/rules/") is None
    assert resolve("rulekit._api.value_and_grad") is None
    assert resolve("rulekit._no_such_module") is not None
    assert resolve("rulekit.registry.no_such_method") is not None
    assert {"rulekit", "rules", "rules.numpy.ufuncs", "testutils"} <= packages()
