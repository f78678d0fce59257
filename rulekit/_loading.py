"""Rule packages that rulekit imports by itself: entry points, and modules deferred to a trigger.

`import rulekit` registers no rule and imports neither SciPy nor numba. Before the
first lookup (and before a registration or a listing), the registry imports
every module named in the `rulekit.rules` entry-point group, once; the bundled
`rules` package is one. A rule package can defer part of itself until the
library it covers is in use: `registry.defer("scipy.special", "rules.scipy.special")`
imports `rules.scipy.special` at the first lookup (or registration) that finds
`scipy.special` in `sys.modules`. `registry.load_all()` imports everything now,
whatever the triggers: listings, coverage and `rulekit check` use it.

Thread safety and re-entrance: Python's import locks serialise the imports
themselves (a thread that needs a module another thread is importing waits for
it). A thread that is importing a rule package itself, through the loader or
directly (`import rules`), imports nothing more on the way: a lookup or a
registration inside that import goes on with what is registered so far, and no
other rule package is imported halfway through it (it could import the first
one half-initialised). A module stays pending until its import has finished;
one that fails stays pending, and raises `RulePackageError` again at the next
lookup.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any, NamedTuple

from rulekit._errors import RulePackageError

__all__ = ["ENTRY_POINT_GROUP", "RuleLoader", "caller_module", "importing_module"]

#: The entry-point group whose modules rulekit imports before the first lookup.
ENTRY_POINT_GROUP = "rulekit.rules"


class _Pending(NamedTuple):
    """A module still to import: always (`trigger` None: an entry point) or once `trigger` is."""

    module: str
    trigger: str | None
    source: str  # how it was declared, for messages
    owner: str | None  # the module that deferred it (None: an entry point)


def importing_module(depth: int = 1) -> str | None:
    """`__name__` of the innermost module whose top-level code is running (being imported).

    A rule registered through a helper of another module belongs to the package
    whose import called the helper: `rulekit check PKG` finds it by this.
    """
    frame: Any = sys._getframe(depth)
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            name = frame.f_globals.get("__name__")
            return name if isinstance(name, str) else None
        frame = frame.f_back
    return None


def caller_module(depth: int) -> str:
    """`__name__` of the module running `depth` frames above the caller: in a function `g`,
    `caller_module(1)` is the module whose code called `g`."""
    try:
        return str(sys._getframe(depth + 1).f_globals.get("__name__", "?"))
    except ValueError:
        return "?"


def _initializing(module: Any) -> bool:
    """Whether `module` is still being imported (importlib's own flag on its spec)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


class _Busy(threading.local):
    def __init__(self) -> None:
        self.modules: set[str] = set()  # modules this thread is importing through the loader


class RuleLoader:
    """The modules the registry still has to import (see the module doc)."""

    def __init__(self, group: str = ENTRY_POINT_GROUP) -> None:
        self.group = group
        self._lock = threading.Lock()
        self._read = False  # whether the entry points have been read
        self._pending: list[_Pending] = []
        self._busy = _Busy()

    # -- declaring -------------------------------------------------------------------

    def defer(self, trigger: str, module: str, owner: str | None) -> None:
        """Import `module` at the first lookup that finds `trigger` in `sys.modules`."""
        for name, what in ((trigger, "trigger"), (module, "module")):
            if not isinstance(name, str) or not all(p.isidentifier() for p in name.split(".")):
                raise TypeError(
                    f"registry.defer: {what} must be a dotted module name, got {name!r}"
                )
        source = f"registry.defer({trigger!r}, {module!r})" + (f" in {owner}" if owner else "")
        with self._lock:
            if not any(p.module == module and p.trigger == trigger for p in self._pending):
                self._pending.append(_Pending(module, trigger, source, owner))

    def _read_entry_points(self) -> None:
        from importlib.metadata import entry_points  # (not at `import rulekit`: it is slow)

        found: dict[str, _Pending] = {}
        for ep in sorted(entry_points(group=self.group), key=lambda e: e.name):
            module = ep.value.split(":")[0].strip()
            dist = getattr(getattr(ep, "dist", None), "name", None)
            source = f"the {self.group} entry point {ep.name} = {ep.value!r}" + (
                f" of the distribution {dist}" if dist else ""
            )
            found.setdefault(module, _Pending(module, None, source, None))
        with self._lock:
            if not self._read:
                self._pending[:0] = found.values()
                self._read = True

    # -- loading ---------------------------------------------------------------------

    def load_pending(self) -> None:
        """Import the entry points (the first time) and every deferred module whose trigger
        is imported. Cheap when nothing is due: a loop over the few pending modules.

        Nothing is imported while this thread is importing a rule package (through the
        loader, or directly: `import rules`): a rule package that looks a rule up or
        registers one at import goes on with what is registered, and no other package
        is imported halfway through it (which could import it half-initialised).
        """
        if not self._read:
            self._read_entry_points()
        pending = self._pending
        if not pending or self._busy.modules:
            return
        modules = sys.modules
        tried: set[_Pending] = set()
        while True:  # (a module loaded may defer more whose trigger is imported: scipy's)
            due = [
                p for p in self._pending
                if p not in tried and (p.trigger is None or p.trigger in modules)
            ]  # fmt: skip
            if not due:
                return
            for p in due:
                mod = modules.get(p.module)
                if mod is not None and _initializing(mod):
                    mod = importlib.import_module(p.module)  # (waits for another thread)
                    if _initializing(mod):
                        return  # (this thread is importing it)
            for p in due:
                tried.add(p)
                self._load(p)

    def load_all(self, package: str | None = None) -> None:
        """Import the entry points and every deferred module now, whatever its trigger
        (only those deferred by `package` or its submodules, if given)."""
        if not self._read:
            self._read_entry_points()
        tried: set[_Pending] = set()
        while True:  # (a deferred module may defer more)
            due = [
                p
                for p in self._pending
                if p not in tried
                and (
                    p.trigger is None
                    or package is None
                    or (p.owner is not None and _within(p.owner, package))
                )
            ]
            if not due:
                return
            for p in due:
                tried.add(p)
                self._load(p)

    def deferred(self) -> list[tuple[str, str]]:
        """The deferred modules not imported yet, as `(trigger, module)` pairs."""
        return [(p.trigger, p.module) for p in self._pending if p.trigger is not None]

    def _load(self, p: _Pending) -> None:
        busy = self._busy.modules
        if p.module in busy:
            return  # (a lookup inside this very import: go on with what is registered)
        busy.add(p.module)
        try:
            mod = importlib.import_module(p.module)
        except Exception as e:
            raise RulePackageError(
                f"importing the rule package {p.module}, named by {p.source}, failed: "
                f"{type(e).__name__}: {e}. rulekit imports it before looking up a rule; fix "
                "the package (its own error is the cause, above), or uninstall it.",
                name=p.module,
            ) from e
        finally:
            busy.discard(p.module)
        if not _initializing(mod):  # (else this thread is importing it: it stays pending)
            with self._lock:
                if p in self._pending:
                    self._pending.remove(p)
