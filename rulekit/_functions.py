"""The functions rules are registered for: their readable names, and wrappers that stand for one.

Messages, signatures (`np.sin(Array[np.float64, 1])`) and the kit's reports name
a function by `function_name(f)`:

1. a name given by a rule package: `registry.set_name(f, "scipy.linalg.blas.dgemm")`,
   or `registry.set_names(scipy.special, "scipy.special")` for every callable of a
   namespace (functions that carry no importable `__module__`/`__qualname__`:
   ufuncs outside numpy, f2py wrappers, methods of distribution objects);
2. numpy's own functions and ufuncs as `np.<name>` (`np.linalg.<name>`);
3. otherwise `__module__` + `__qualname__`, with private module components dropped
   (`scipy.linalg._basic.solve` → `scipy.linalg.solve`).

A `FunctionWrapper` (the base of `rulekit.Primitive`) is a callable that dispatch
treats as standing for the function it wraps: it is named as that function, and
a call of it uses the rules registered for it or, failing that, for the wrapped
function.
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["FunctionWrapper", "call", "function_name", "set_name", "set_names"]


class FunctionWrapper:
    """A callable standing for `fn` in dispatch (see the module doc). Calling it calls `fn`;
    `rulekit.Primitive` routes traced calls through the registry instead."""

    __slots__ = ("__dict__", "__wrapped__", "fn")

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TypeError(f"rulekit.primitive expects a callable, got {fn!r}")
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


# -- names given by rule packages ----------------------------------------------------------

#: key → (the named object, kept alive so that an id key stays valid; its name)
_names: dict[Any, tuple[Any, str]] = {}


def _key(f: Any) -> Any:
    try:
        hash(f)
    except TypeError:
        return ("id", id(f))
    return f


def set_name(f: Any, name: str) -> None:
    """Name `f` `name` in messages, signatures and reports (replacing an earlier name).

    For callables whose `__module__` and `__qualname__` do not say how users
    reach them: `registry.set_name(scipy.linalg.blas.dgemm, "scipy.linalg.blas.dgemm")`.
    A bound method is named for its object and function (`scipy.stats.norm.pdf`
    is the same key each time it is looked up).
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"a function's name must be a non-empty string, got {name!r}")
    _names[_key(f)] = (f, name)


def set_names(namespace: Any, prefix: str, attrs: Iterable[str] | None = None) -> None:
    """Name each callable attribute `a` of `namespace` (a module or an object) `prefix.a`.

    `attrs` lists the attributes to name; by default every public attribute (for a
    module, every public callable in its dictionary, except those another package
    defines: `scipy.special.sinc` is numpy's `np.sinc` and keeps that name). Where
    two attributes hold one object (an alias), the one equal to the object's
    `__name__` names it. Example: `registry.set_names(scipy.special, "scipy.special")`.
    """
    if attrs is None:
        if isinstance(namespace, types.ModuleType):
            home = namespace.__name__.split(".")[0]
            items = [
                (a, v)
                for a, v in list(vars(namespace).items())
                if not a.startswith("_") and _defined_under(v, home)
            ]
        else:
            items = [(a, _get(namespace, a)) for a in dir(namespace) if not a.startswith("_")]
    else:
        items = [(a, _get(namespace, a)) for a in attrs]
    named: set[Any] = set()
    for attr, value in items:
        if value is None or not callable(value) or isinstance(value, type):
            continue
        key = _key(value)
        if key in named and getattr(value, "__name__", None) != attr:
            continue  # (an alias: the attribute of the object's own name wins)
        named.add(key)
        _names[key] = (value, f"{prefix}.{attr}")


def _defined_under(value: Any, package: str) -> bool:
    """Whether `value` is defined in `package` (or says nothing of where it is defined)."""
    module = getattr(value, "__module__", None)
    return not isinstance(module, str) or module == package or module.startswith(package + ".")


def _get(namespace: Any, attr: str) -> Any:
    try:
        return getattr(namespace, attr)
    except Exception:  # (a property that raises: not a function to name)
        return None


# -- the readable name ---------------------------------------------------------------------


def _numpy_module(module: str) -> str:
    """numpy's module `module`, as users write it: `np`, `np.linalg`, `np.fft`, ..."""
    short = "np" + module[len("numpy") :]
    if short.startswith(("np._core", "np.core", "np.lib._")):
        return "np"
    if short.startswith("np.linalg"):
        return "np.linalg"
    return ".".join(p for p in short.split(".") if not p.startswith("_"))


def _public_module(module: str, name: str) -> str:
    """`module` without private components after the first (`pkg._impl` → `pkg`); a private
    top-level module whose public twin exports the object (`_operator`) as that twin."""
    parts = module.split(".")
    top = parts[0]
    if top.startswith("_") and len(parts) == 1:
        twin = sys.modules.get(top.lstrip("_"))
        head = name.split(".")[0]
        if twin is not None and head in vars(twin):
            return top.lstrip("_")
        return module
    return ".".join([top, *(p for p in parts[1:] if not p.startswith("_"))])


def _ufunc_name(u: np.ufunc) -> str:
    given = _names.get(_key(u))
    if given is not None:
        return given[1]
    return f"np.{u.__name__}" if getattr(np, u.__name__, None) is u else u.__name__


def function_name(f: Any) -> str:
    """A readable name for a function: `np.sin`, `np.add.reduce`, `scipy.special.erf`, `mod.f`.

    A name given with `registry.set_name`/`set_names` first; see the module doc.
    """
    try:
        given = _names.get(_key(f))
    except TypeError:  # (a key whose __eq__ raises)
        given = None
    if given is not None:
        return given[1]
    if isinstance(f, np.ufunc):
        return _ufunc_name(f)
    owner = getattr(f, "__self__", None)
    if isinstance(owner, np.ufunc):
        return f"{_ufunc_name(owner)}.{f.__name__}"
    if isinstance(f, FunctionWrapper):
        return function_name(f.fn)  # named as what it stands for
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None)
    if not isinstance(name, str):
        return repr(f)
    module = getattr(f, "__module__", None)
    if not isinstance(module, str) or not module:
        return name
    if module == "numpy" or module.startswith("numpy."):
        module = _numpy_module(module)
    else:
        module = _public_module(module, name)
    return f"{module}.{name}"


_METHOD = type(np.ndarray.astype)


def call(f: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """`f(*args, **kwargs)`, with an ndarray method (`np.ndarray.astype`) called as the first
    argument's own method: a NumPy scalar and a traced value have it too, but the
    descriptor applies to ndarrays only."""
    if isinstance(f, _METHOD) and args:
        return getattr(args[0], f.__name__)(*args[1:], **kwargs)
    return f(*args, **kwargs)
