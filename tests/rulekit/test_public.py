"""The public surface: `rulekit/__init__.py` exports public, documented names only, and
everything the kit (`testutils`) and the user docs use is among them."""

from __future__ import annotations

import ast
import pathlib
import re
import types

import pytest

import rulekit

ROOT = pathlib.Path(__file__).resolve().parents[2]
PUBLIC = sorted(n for n in vars(rulekit) if not n.startswith("_"))


def test_no_engine_internals_are_exported() -> None:
    for name in ("Record", "ValueAndGrad", "Tracer", "Tape", "Site", "CopyToRule"):
        assert not hasattr(rulekit, name), name


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_is_documented(name: str) -> None:
    obj = getattr(rulekit, name)
    if isinstance(obj, (int, float, str, frozenset)):
        return  # (constants: documented where they are defined and in the docs)
    doc = obj.__doc__ if isinstance(obj, (type, types.FunctionType, types.ModuleType)) else None
    doc = doc or type(obj).__doc__
    assert doc and doc.strip(), f"rulekit.{name} has no docstring"


def _private_rulekit_imports(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found += [
            f"{path.name}:{node.lineno} {n}"
            for n in names
            if n.startswith("rulekit.") and any(p.startswith("_") for p in n.split(".")[1:2])
        ]
    return found


def test_the_kit_uses_public_names_only() -> None:
    found = [
        f for p in sorted((ROOT / "testutils").glob("*.py")) for f in _private_rulekit_imports(p)
    ]
    assert not found, found


def test_the_user_docs_name_no_private_module() -> None:
    """(The architecture page names the private modules on purpose: it is for contributors.)"""
    pages = [
        *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "architecture.md"),
        ROOT / "README.md",
    ]
    found = [
        f"{p.name}: {m.group(0)}"
        for p in pages
        for m in re.finditer(r"rulekit\._[A-Za-z_.]+", p.read_text(encoding="utf-8"))
    ]
    assert not found, found


def test_sources_cite_the_docs_not_the_design_file() -> None:
    """DESIGN.md is the maintainers' contract, not shipped: comments point at docs/ instead."""
    dirs = ["rulekit", "testutils", "tests/rulekit", "tests/testutils"]
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for d in dirs
        for p in sorted((ROOT / d).rglob("*.py"))
        if p.name != "test_public.py"
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "DESIGN §" in line
    ]
    assert not found, found
