"""What a traced value that is leaving the trace should have gone through instead.

When third-party Python code (e.g. `scipy.linalg.cholesky`) converts a traced
value to a plain array, the call would have worked through the `rulekit.primitive`
wrapper that a rule package exports for it (`rules.scipy.linalg.cholesky`).
`suggest_wrapper(frame)` walks the call stack from the conversion outwards and
names that wrapper, so that the error can say exactly what to call instead.

A frame is matched to the function *actually called*, two ways:

* the function the frame runs: its code object, and, because several functions
  can share one code object (scipy's batching decorator wraps `cholesky`, `qr`,
  `eigh`, ... in one `wrapper` closure; `scipy.stats.norm.cdf` and
  `scipy.stats.t.cdf` are one method), the values of its closure cells or the
  class of its `self`;
* the callee of the call the frame is executing, read from the call expression
  in its source (`blas.dgemm(...)`) and resolved in the frame's namespaces
  without running user code; this also finds C functions (f2py BLAS/LAPACK
  wrappers), which have no frame of their own.

The wrapper is named by a public, importable dotted name (`rules.scipy.stats.t.cdf`).
A numpy function with a rule whose implementation is running on a plain
destination (`np.fill_diagonal(plain, traced)`: numpy dispatches on the
destination only) gets a hint to make the destination traced.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
import types
from dataclasses import dataclass
from types import FrameType
from typing import Any

import numpy as np

from rulekit._functions import FunctionWrapper, function_name
from rulekit._registry import registry

__all__ = ["exported_name", "public_name", "suggest_wrapper"]

_MISSING: Any = object()

# numpy functions that write into their first argument: when their implementation runs on a
# plain destination with a traced value, numpy never handed the call to rulekit.
_WRITERS = ("fill_diagonal", "put", "place", "putmask", "copyto", "put_along_axis")


@dataclass(frozen=True)
class _Target:
    """One function object a wrapper stands for (its `fn`, what that wraps, ...)."""

    prim: FunctionWrapper
    module: str  # the module that registered the rule
    cells: tuple[tuple[str, Any], ...] = ()  # closure variables that tell shared code apart
    owner: type | None = None  # for a method: the class of `self`

    def runs_in(self, frame: FrameType) -> bool:
        """Whether `frame` (whose code is this target's) runs this very function."""
        if not self.cells and self.owner is None:
            return True
        local = frame.f_locals
        if self.owner is not None:
            code = frame.f_code
            first = code.co_varnames[0] if code.co_argcount else None
            if first is None or type(local.get(first)) is not self.owner:
                return False
        return all(local.get(name, _MISSING) is value for name, value in self.cells)


def _chain(fn: Any) -> list[Any]:
    """`fn`, what it wraps (`__wrapped__`, repeatedly), and the object its `__module__` and
    `__qualname__` name if that is another callable (a wrapper that impersonates it)."""
    out: list[Any] = []
    todo = [fn]
    while todo and len(out) < 16:
        f = todo.pop()
        if f is None or any(f is o for o in out):
            continue
        out.append(f)
        todo.append(getattr(f, "__wrapped__", None))
        if isinstance(f, types.MethodType):
            continue  # (its name is its class's function, which every instance shares)
        named = _by_name(f)
        if named is not _MISSING and callable(named):
            todo.append(named)
    return out


def _by_name(f: Any) -> Any:
    """The object `sys.modules[f.__module__].<f.__qualname__>`, without importing anything."""
    module = getattr(f, "__module__", None)
    qualname = getattr(f, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return _MISSING
    obj: Any = sys.modules.get(module, _MISSING)
    for part in qualname.split("."):
        if obj is _MISSING:
            break
        obj = _static_attr(obj, part)
    return obj


class _Index:
    """The registered `rulekit.primitive` wrappers, indexed by code object and by callee."""

    def __init__(self) -> None:
        self.by_code: dict[Any, list[_Target]] = {}
        self.by_callee: dict[Any, _Target] = {}
        self.writers: dict[Any, Any] = {}  # implementation code -> numpy writer with a rule
        seen: set[int] = set()
        writers = [getattr(np, n, None) for n in _WRITERS]
        for reg in registry.entries():
            f = reg.f
            if any(f is w for w in writers):
                impl = getattr(f, "_implementation", None)
                code = getattr(impl, "__code__", None)
                if code is not None:
                    self.writers[code] = f
            if not isinstance(f, FunctionWrapper) or id(f) in seen:
                continue
            seen.add(id(f))
            for obj in _chain(f.fn):
                self._add(f, reg.module, obj)

    def _add(self, prim: FunctionWrapper, module: str, obj: Any) -> None:
        if isinstance(obj, types.MethodType):
            func, owner = obj.__func__, type(obj.__self__)
            target = _Target(prim, module, owner=owner)
            self.by_callee.setdefault(("m", id(func), owner), target)
            code = getattr(func, "__code__", None)
        else:
            cells: tuple[tuple[str, Any], ...] = ()
            code = getattr(obj, "__code__", None) if isinstance(obj, types.FunctionType) else None
            if code is not None and obj.__closure__:
                cells = tuple(
                    (name, cell.cell_contents)
                    for name, cell in zip(code.co_freevars, obj.__closure__, strict=False)
                    if _filled(cell)
                )
            target = _Target(prim, module, cells=cells)
            self.by_callee.setdefault(("o", id(obj)), target)
        if code is not None:
            self.by_code.setdefault(code, []).append(target)

    def running(self, frame: FrameType) -> _Target | None:
        """The registered function that `frame` runs, if any (and if only one fits)."""
        cands = self.by_code.get(frame.f_code)
        if not cands:
            return None
        try:
            hits = [t for t in cands if t.runs_in(frame)]
        except Exception:  # (a frame whose locals cannot be read)
            return None
        checked = [t for t in hits if t.cells or t.owner is not None]
        hits = checked or hits  # a match by closure or `self` beats a bare code match
        prims = {id(t.prim) for t in hits}
        return hits[0] if len(prims) == 1 else None

    def called(self, frame: FrameType) -> _Target | None:
        """The registered function that `frame` is calling, if its call expression says so."""
        obj = _callee(frame)
        if obj is _MISSING:
            return None
        if isinstance(obj, types.MethodType):
            return self.by_callee.get(("m", id(obj.__func__), type(obj.__self__)))
        return self.by_callee.get(("o", id(obj)))


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises ValueError)
    except ValueError:
        return False
    return True


# -- reading the callee of the call a frame is executing ---------------------------------------


def _callee(frame: FrameType) -> Any:
    """The object called by the call expression that `frame` is executing, or _MISSING.

    Only `name` and `a.b.c` callees are resolved, statically: module dictionaries, the
    frame's locals/globals/builtins and `inspect.getattr_static` (no property runs).
    """
    code = frame.f_code
    positions = getattr(code, "co_positions", None)  # Python 3.11+
    if positions is None or frame.f_lasti < 0:
        return _MISSING
    try:
        pos = list(positions())[frame.f_lasti // 2]
    except IndexError:
        return _MISSING
    lineno, end_lineno, col, end_col = pos
    if lineno is None or end_lineno is None or col is None or end_col is None:
        return _MISSING
    lines = linecache.getlines(code.co_filename, frame.f_globals)
    if not 0 < lineno <= end_lineno <= len(lines):
        return _MISSING
    raw = [line.encode("utf-8") for line in lines[lineno - 1 : end_lineno]]  # (byte columns)
    raw[-1] = raw[-1][:end_col]
    raw[0] = raw[0][col:]
    try:
        node = ast.parse(b"".join(raw).decode("utf-8"), mode="eval").body
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return _MISSING
    if not isinstance(node, ast.Call):
        return _MISSING
    try:
        return _resolve(node.func, frame)
    except Exception:
        return _MISSING


def _resolve(node: ast.expr, frame: FrameType) -> Any:
    if isinstance(node, ast.Name):
        for space in (frame.f_locals, frame.f_globals, frame.f_builtins):
            if node.id in space:
                return space[node.id]
        return _MISSING
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, frame)
        return _MISSING if base is _MISSING else _static_attr(base, node.attr)
    return _MISSING


def _static_attr(obj: Any, name: str) -> Any:
    """`getattr(obj, name)` where that runs no user code (functions are bound), else _MISSING."""
    if isinstance(obj, types.ModuleType):
        return vars(obj).get(name, _MISSING)
    try:
        v = inspect.getattr_static(obj, name)
    except AttributeError:
        return _MISSING
    if isinstance(v, types.FunctionType):
        return v if isinstance(obj, type) else types.MethodType(v, obj)
    if isinstance(v, staticmethod):
        return v.__func__
    if isinstance(v, classmethod):
        return types.MethodType(v.__func__, obj if isinstance(obj, type) else type(obj))
    if hasattr(type(v), "__get__") and not isinstance(obj, type):
        return _MISSING  # a property or another descriptor: would run code
    return v


# -- naming -------------------------------------------------------------------------------------


def _public_modules(top: str) -> list[tuple[str, types.ModuleType]]:
    return [
        (name, mod)
        for name, mod in list(sys.modules.items())
        if isinstance(mod, types.ModuleType)
        and (name == top or name.startswith(top + "."))
        and not any(p.startswith("_") for p in name.split("."))
    ]


def exported_name(obj: Any, package: str) -> str | None:
    """The shortest public dotted name under `package` whose value is `obj`: a module
    attribute (`rules.scipy.linalg.cholesky`) or an attribute of a module attribute that is a
    plain namespace object (`rules.scipy.stats.t.cdf`). Looks only at imported modules."""
    top = package.split(".")[0]
    names: list[str] = []
    for modname, mod in _public_modules(top):
        for attr, value in list(vars(mod).items()):
            if attr.startswith("_"):
                continue
            if value is obj:
                names.append(f"{modname}.{attr}")
            elif not isinstance(value, (type, types.ModuleType)) and hasattr(value, "__dict__"):
                try:
                    inner = dict(vars(value))
                except TypeError:
                    continue
                names.extend(
                    f"{modname}.{attr}.{k}"
                    for k, v in inner.items()
                    if v is obj and not k.startswith("_")
                )
    return min(names, key=lambda n: (len(n), n)) if names else None


def public_name(fn: Any) -> str:
    """How to name `fn` in a message: its readable name if that imports to `fn` (or to the
    same bound method), else the shortest public name of its top-level package, else that
    readable name anyway (`scipy.linalg.blas.dgemm`, not `scipy.linalg.dgemm`)."""
    name = function_name(fn)
    if _imports_to(name, fn):
        return name
    top = getattr(fn, "__module__", None) or type(fn).__module__
    if isinstance(fn, types.MethodType):
        owner = exported_name(fn.__self__, top)
        if owner is not None:
            return f"{owner}.{fn.__func__.__name__}"
    found = exported_name(fn, top) if isinstance(top, str) else None
    return found or name


def _lookup(dotted: str) -> Any:
    """The object a dotted name (`np.` for `numpy.`) holds now, statically; else _MISSING."""
    parts = dotted.split(".")
    aliases = {"np": "numpy"}
    parts[0] = aliases.get(parts[0], parts[0])
    value: Any = sys.modules.get(parts[0], _MISSING)
    for p in parts[1:]:
        if value is _MISSING:
            return _MISSING
        value = _static_attr(value, p)
    return value


def _imports_to(dotted: str, obj: Any) -> bool:
    value = _lookup(dotted)
    if value is _MISSING:
        return False
    if isinstance(obj, types.MethodType) and isinstance(value, types.MethodType):
        return value.__func__ is obj.__func__ and value.__self__ is obj.__self__
    return value is obj


# -- the hint -----------------------------------------------------------------------------------


def _wrapper_hint(target: _Target) -> str:
    prim = target.prim
    called = public_name(prim.fn)
    where = exported_name(prim, target.module)
    if where is None:
        return (
            f" Fix: call the rulekit.primitive wrapper of {called} that {target.module} "
            f"registers a rule for instead of {called}(...) on traced values."
        )
    if getattr(_lookup(called), "__rulekit_primitive__", None) is prim:
        # The module's name is routed to the rule (rules/scipy/_routing.py): what ran is the
        # original function, bound to another name before the routing was installed.
        return (
            f" Fix: call {called}(...) through its module, or {where}(...), instead of the "
            f"function called here: that is the original {called}, bound to a name before "
            f"rulekit routed {called} to its rule (e.g. by a `from ... import` that ran "
            f"before the rules were loaded), and it converts its arguments to plain arrays. "
            f"{called} as its module holds it now, and {where} ({called} wrapped with "
            "rulekit.primitive), have the rule."
        )
    return (
        f" Fix: call {where}(...) instead of {called}(...) on traced values: {where} is "
        f"{called} wrapped with rulekit.primitive, and it has a rule ({called} itself "
        "converts its arguments to plain arrays)."
    )


def _writer_hint(frame: FrameType, func: Any) -> str | None:
    """np.fill_diagonal(plain, traced): numpy never handed the call to rulekit (it dispatches
    np.fill_diagonal on the destination only; np.put, ... look at no list of traced values)."""
    code = frame.f_code
    if not code.co_argcount:
        return None
    dest = code.co_varnames[0]
    if type(frame.f_locals.get(dest)) is not np.ndarray:
        return None  # a traced destination: the rule ran (or its implementation is traced)
    name = function_name(func)
    return (
        f" Fix: make the array that {name} writes into traced (e.g. `{dest} = np.zeros_like(x)` "
        f"or `{dest} = x.copy()` for a traced x): {name} has a rule for a traced destination, "
        f"and a traced value written into the plain array `{dest}` would lose its gradient."
    )


def suggest_wrapper(frame: FrameType | None, depth: int = 40) -> str | None:
    """A hint naming what to call instead, found on the stack from `frame` outwards.

    The hint starts with a space and `Fix:` (it is appended to a TracingError's text).
    """
    index = _Index()
    while frame is not None and depth > 0:
        writer = index.writers.get(frame.f_code)
        if writer is not None:
            hint = _writer_hint(frame, writer)
            if hint is not None:
                return hint
        target = index.running(frame) or index.called(frame)
        if target is not None:
            return _wrapper_hint(target)
        frame, depth = frame.f_back, depth - 1
    return None
