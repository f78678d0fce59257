"""Rule packages for the kit: find, import and select the rules a module registers.

A *rule package* is a module whose import registers rules. `load` imports it and
finds every registration it made. A registration belongs to the module whose
top-level code was running when it was made (the innermost module being imported),
recorded in `Registration.meta["importing"]`; so a rule registered through a helper
function defined elsewhere belongs to the module that called the helper while it was
being imported, and the rules of another rule package that it imports (or that rulekit
loads lazily meanwhile) belong to that other package. A package imported before
`load` (the bundled `rules`, say) is found the same way; a registration without the
record falls back to the module that called `register`. Modules a package defers
(`rulekit.registry.defer`) are imported by `load` whatever their triggers, and count
as the package's when they are its submodules.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path

from rulekit import Registration, RulePackageError, forward_registry, registry, vjp_registry

__all__ = [
    "IMPORTING",
    "KINDS",
    "PackageImportError",
    "RulePackage",
    "UsageError",
    "belongs_to",
    "collect",
    "installed_rule_packages",
    "label",
    "load",
    "of_kind",
    "owner",
    "resolve_module",
    "select_rules",
    "unique",
]

ENTRY_POINT_GROUP = "rulekit.rules"


#: The `Registration.meta` key naming the module being imported when the rule was registered.
IMPORTING = "importing"


class UsageError(Exception):
    """The command line names something that is not a loadable module (exit code 2)."""


class PackageImportError(Exception):
    """Importing the rule package raised: `.module`, and the exception as `__cause__`."""

    def __init__(self, module: str, error: BaseException) -> None:
        super().__init__(f"importing {module} failed: {type(error).__name__}: {error}")
        self.module = module
        self.error = error

    def details(self) -> str:
        """The traceback of the failed import."""
        return "".join(traceback.format_exception(self.error))


@dataclass
class RulePackage:
    """A loaded rule package: the registrations it owns, and what else its import registered."""

    name: str  # as given: a module name, an entry-point name or a path
    module: str  # the module imported
    fresh: bool  # imported now (False: it had been imported before the check)
    registrations: list[Registration]  # its reverse rules (rrules and factories)
    others: dict[str, int]  # rules registered while importing it, owned by other modules
    forward: list[Registration] = field(default_factory=list)  # its forward rules (frule)
    vjp: list[Registration] = field(default_factory=list)  # its vjp rules (vjp_rule)


def installed_rule_packages() -> dict[str, str]:
    """Every rule package registered in the `rulekit.rules` entry-point group: name → module."""
    return {ep.name: ep.value.split(":")[0] for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _is_path(name: str) -> bool:
    return (
        name.endswith(".py")
        or "/" in name
        or os.sep in name
        or (os.altsep is not None and os.altsep in name)
        or name in (".", "..")
    )


def resolve_module(name: str) -> str:
    """An entry-point name, a module name or a path (of a .py file or a package directory),
    as a module name. A path's root directory is put on `sys.path`; raises `UsageError`."""
    packages = installed_rule_packages()
    if name in packages:
        return packages[name]
    if _is_path(name):
        return _module_for_path(name)
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise UsageError(
            f"{name!r} is not a module name, a path, or an installed rulekit.rules entry-point "
            f"name ({_installed_names(packages)})"
        )
    return name


def _installed_names(packages: dict[str, str]) -> str:
    return "installed: " + ", ".join(sorted(packages)) if packages else "none installed"


def _module_for_path(name: str) -> str:
    path = Path(name).resolve()
    how = "pass a .py file, a package directory, or an importable module name"
    if not path.exists():
        raise UsageError(f"no such file or directory: {name} ({how})")
    if path.is_file():
        if path.suffix != ".py":
            raise UsageError(f"{name} is not a Python file ({how})")
        parts = [] if path.stem == "__init__" else [path.stem]
        directory = path.parent
    else:
        if not (path / "__init__.py").is_file():
            raise UsageError(
                f"{name} is a directory but not a package (it has no __init__.py); {how} "
                "(a project directory: pip install it, then pass its module or entry-point name)"
            )
        parts, directory = [], path
    while (directory / "__init__.py").is_file():  # climb to the top package
        parts.insert(0, directory.name)
        directory = directory.parent
    module = ".".join(parts)
    if not all(part.isidentifier() for part in parts):
        raise UsageError(f"{name}: {module!r} is not an importable module name ({how})")
    loaded = sys.modules.get(module)
    where = getattr(loaded, "__file__", None)
    if loaded is not None and where is not None:
        expected = path if path.is_file() else path / "__init__.py"
        if Path(where).resolve() != expected:
            raise UsageError(f"{name}: another module {module!r} is already loaded, from {where}")
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    return module


def owner(reg: Registration) -> str:
    """The module a registration belongs to: the module being imported when it was made,
    or (if that was not recorded, or was the main script) the module that called `register`."""
    importing = reg.meta.get(IMPORTING)
    if isinstance(importing, str) and importing != "__main__":
        return importing
    return reg.module


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def belongs_to(reg: Registration, module: str) -> bool:
    """Whether a registration belongs to `module` or one of its submodules (see `owner`)."""
    return _within(owner(reg), module)


def unique(regs: Iterable[Registration]) -> list[Registration]:
    """The registrations in order, each once."""
    seen: set[Registration] = set()
    out: list[Registration] = []
    for reg in regs:
        if reg not in seen:
            seen.add(reg)
            out.append(reg)
    return out


def load(name: str) -> RulePackage:
    """Import a rule package and find the registrations it owns (see the module doc).

    Raises `UsageError` if `name` names no module, `PackageImportError` if its import raises.
    """
    module = resolve_module(name)
    fresh = module not in sys.modules
    try:
        before = set(registry.entries())  # (imports the installed rule packages first)
    except RulePackageError as e:
        raise PackageImportError(e.name or module, e) from e
    try:
        importlib.import_module(module)  # (each registration records the module being imported)
        registry.load_all(module)  # (the modules it deferred, whatever their triggers)
    except ModuleNotFoundError as e:
        if e.name is not None and _within(module, e.name):
            packages = installed_rule_packages()
            raise UsageError(
                f"no module named {e.name!r}, and no rulekit.rules entry point of that name "
                f"({_installed_names(packages)}); pass an importable module name, an entry-point "
                "name, or a path to a .py file or package directory"
            ) from None
        raise PackageImportError(module, e) from e
    except Exception as e:
        raise PackageImportError(module, e) from e
    entries = registry.entries()
    new = [r for r in entries if r not in before]
    owned = [r for r in entries if belongs_to(r, module)]
    owned_set = set(owned)
    others = Counter(owner(r) for r in new if r not in owned_set)
    forward = [r for r in forward_registry.entries() if belongs_to(r, module)]
    vjp = [r for r in vjp_registry.entries() if belongs_to(r, module)]
    return RulePackage(name, module, fresh, owned, dict(sorted(others.items())), forward, vjp)


def collect(
    modules: Iterable[str], select: str | None = None, kinds: Iterable[str] = ("reverse",)
) -> list[Registration]:
    """The registrations the named rule packages own (in registry order, without repeats):
    of each of `kinds` ("reverse", "forward", "vjp"), in that order."""
    packages = [load(name) for name in modules]
    regs = unique(reg for kind in kinds for p in packages for reg in of_kind(p, kind))
    return select_rules(regs, select)


#: The kinds of rules a package can register, in the order the kit checks them.
KINDS = ("reverse", "forward", "vjp")


def of_kind(package: RulePackage, kind: str) -> list[Registration]:
    """A package's registrations of one kind: "reverse", "forward" or "vjp"."""
    return {"reverse": package.registrations, "forward": package.forward,
            "vjp": package.vjp}[kind]  # fmt: skip


def select_rules(regs: list[Registration], select: str | None) -> list[Registration]:
    """The registrations whose label contains `select` or matches it as a glob."""
    if not select:
        return regs
    return [r for r in regs if _matches(select, label(r))]


def _matches(pattern: str, text: str) -> bool:
    from fnmatch import fnmatchcase

    return pattern in text or fnmatchcase(text, pattern)


def label(reg: Registration) -> str:
    """The signature a registration covers, as the report prints it."""
    return reg.describe().split(" -> ")[0]
