"""rulekit's modules import one way: errors → tangents → registry → stateful → engine → api.

Every import in every rulekit module is read with `ast`, including imports
inside functions (a function-level import that goes up a layer is a cycle all
the same, only hidden until the function runs). A module may import from its own
layer and the layers below it; nothing may form a cycle, within a layer either.
The package `rulekit` itself (the public surface) sits above the engine, and
the command line above everything.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "rulekit"

#: Layers, lowest first: module name (or a package prefix ending in ".") → layer.
LAYERS: list[tuple[str, list[str]]] = [
    ("errors", ["rulekit._errors"]),
    ("tangents", ["rulekit._tangent_types", "rulekit._layout", "rulekit._tangents",
                  "rulekit._codual", "rulekit._cotangents", "rulekit._dual"]),
    ("registry", ["rulekit._patterns", "rulekit._example", "rulekit._functions",
                  "rulekit._signature", "rulekit._loading", "rulekit._registry",
                  "rulekit._register", "rulekit._frule", "rulekit.patterns"]),
    ("stateful", ["rulekit._stateful"]),
    ("declarations", ["rulekit._declared_rules", "rulekit._elementwise", "rulekit._linear"]),
    ("engine", ["rulekit._engine."]),
    ("levels", ["rulekit._forward", "rulekit._reverse_level", "rulekit._nested"]),
    ("api", ["rulekit._api", "rulekit._pullback"]),
    ("transforms", ["rulekit._lifting", "rulekit._derived", "rulekit._scan_steps",
                    "rulekit._scan", "rulekit._checkpoint", "rulekit._jacobians",
                    "rulekit._transforms", "rulekit._optimize"]),
    ("public", ["rulekit"]),
    ("cli", ["rulekit._cli", "rulekit.__main__"]),
]  # fmt: skip
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}


def module_name(path: pathlib.Path) -> str:
    parts = ["rulekit", *path.relative_to(PACKAGE).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> str | None:
    for layer, members in LAYERS:
        for m in members:
            if module == m or (m.endswith(".") and module.startswith(m)):
                return layer
    if module == "rulekit._engine":  # (the engine package's own __init__)
        return "engine"
    return None


def imports(module: str, path: pathlib.Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """`(imported rulekit module, line)` for every import in the module, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "rulekit" or alias.name.startswith("rulekit."):
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base != "rulekit" and not base.startswith("rulekit."):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if sub in known else base), node.lineno


def graph() -> dict[str, list[tuple[str, int]]]:
    known = set(modules())
    return {m: [(t, n) for t, n in imports(m, p, known) if t != m] for m, p in modules().items()}


def test_every_module_has_a_layer() -> None:
    missing = [m for m in modules() if layer_of(m) is None]
    assert not missing, f"assign these modules a layer in LAYERS: {missing}"


def test_no_import_goes_up_a_layer() -> None:
    up = []
    for module, targets in graph().items():
        mine = layer_of(module)
        if mine is None:
            continue
        for target, line in targets:
            theirs = layer_of(target)
            if theirs is not None and RANK[theirs] > RANK[mine]:
                up.append(f"{module}:{line} ({mine}) imports {target} ({theirs})")
    assert not up, "imports that go up a layer:\n" + "\n".join(dict.fromkeys(up))


def test_no_import_cycles() -> None:
    edges = {m: sorted({t for t, _ in ts}) for m, ts in graph().items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in edges.get(m, []):
            if state.get(t) == 1:
                cycles.append([*path[path.index(t) :], t])
            elif t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("module", sorted(modules()))
def test_modules_stay_small(module: str) -> None:
    lines = len(modules()[module].read_text(encoding="utf-8").splitlines())
    assert lines <= 420, f"{module} has {lines} lines: split it by concept (aim at ≤ 400)"


def test_the_checker_sees_function_level_and_relative_imports(tmp_path: pathlib.Path) -> None:
    fake = tmp_path / "_x.py"
    fake.write_text(
        "import rulekit\n"
        "from . import _call\n"
        "def f():\n"
        "    from rulekit._api import grad\n"
        "    from .._registry import registry\n"
    )
    known = {"rulekit", "rulekit._engine._call", "rulekit._api", "rulekit._registry"}
    assert list(imports("rulekit._engine._x", fake, known)) == [
        ("rulekit", 1),
        ("rulekit._engine._call", 2),
        ("rulekit._api", 4),
        ("rulekit._registry", 5),
    ]


#: The header of each group in rulekit/__init__.py → the layers its names come from.
HEADERS = {
    "tangents": {"tangents"},
    "rules and the dispatch registry": {"registry"},
    "stateful rules": {"stateful"},
    "declaring rules": {"declarations"},
    "the AD engine": {"engine", "api", "transforms"},
    "errors": {"errors"},
}


def test_the_public_surface_is_grouped_under_true_headers() -> None:
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    lines = (PACKAGE / "__init__.py").read_text(encoding="utf-8").splitlines()
    headers = [
        (i + 1, line.removeprefix("# -- ").split(":")[0].rstrip(" -"))
        for i, line in enumerate(lines)
        if line.startswith("# -- ")
    ]
    assert [next((k for k in HEADERS if h.startswith(k)), h) for _, h in headers] == list(HEADERS)
    wrong = []
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        header = [h for line, h in headers if line < node.lineno][-1]
        wanted = next(v for k, v in HEADERS.items() if header.startswith(k))
        source = node.module if node.module != "rulekit" else f"rulekit.{node.names[0].name}"
        if layer_of(source) not in wanted:
            wrong.append(f"line {node.lineno}: {source} ({layer_of(source)}) under '{header}'")
    assert not wrong, "\n".join(wrong)
