"""Pytrees, and lifting the values a function captures out of its closure.

A rule that is given a Python function (`scan`'s body, `checkpoint`'s f, a
fixed-point map) must see every differentiable value that function reads, as an
argument of the rule: a value traced by the enclosing trace that the function
merely *captures* would otherwise be read by an inner trace, which refuses it.
`lift_closure(fn)` takes the captured values out: it walks `fn`'s closure cells
and defaults (into tuples, lists and dicts there, into `functools.partial`
arguments, and into the closures of functions found there, to a bounded depth),
and returns a `Lifted` (what is left: code and the other captured objects, with
a hashable `key`) and the lifted values. `lifted.rebuild(values)` makes the same
function with those values substituted (new cells; cells the function assigns
with `nonlocal` are left alone). Lifted are traced values, arrays and numbers:
a cached derived rule of the rebuilt function then depends only on its
arguments and on `key`.

Pytrees are tuples (NamedTuples too), lists and dicts of leaves; `None` is an
empty tree (JAX's convention). `flatten(x) -> (leaves, treedef)`,
`unflatten(treedef, leaves)`; treedefs are hashable and comparable.
"""

from __future__ import annotations

import dis
import functools
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from rulekit._engine._traced import Traced
from rulekit._errors import TracingError

__all__ = ["Lifted", "TreeDef", "flatten", "lift_closure", "unflatten"]

# -- pytrees ---------------------------------------------------------------------------------

#: A treedef: LEAF, or (node kind, node data, child treedefs...).
TreeDef = Any
LEAF = "*"
_NONE: TreeDef = ("none", None)


def flatten(x: Any) -> tuple[list[Any], TreeDef]:
    """The leaves of pytree `x` (left to right) and its structure."""
    leaves: list[Any] = []
    return leaves, _flatten(x, leaves)


def _flatten(x: Any, leaves: list[Any]) -> TreeDef:
    t = type(x)
    if x is None:
        return _NONE
    if t is tuple or t is list:
        return (t.__name__, None, *(_flatten(e, leaves) for e in x))
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return ("namedtuple", t, *(_flatten(e, leaves) for e in x))
    if t is dict:
        return ("dict", tuple(x), *(_flatten(v, leaves) for v in x.values()))
    leaves.append(x)
    return LEAF


def unflatten(treedef: TreeDef, leaves: Sequence[Any]) -> Any:
    """The pytree of structure `treedef` whose leaves are `leaves`."""
    it = iter(leaves)
    out = _unflatten(treedef, it)
    if next(it, it) is not it:
        raise ValueError("unflatten: more leaves than the tree has")
    return out


def _unflatten(td: TreeDef, it: Iterator[Any]) -> Any:
    if td == LEAF:
        return next(it)
    kind, data, *children = td
    if kind == "none":
        return None
    vals = [_unflatten(c, it) for c in children]
    if kind == "tuple":
        return tuple(vals)
    if kind == "list":
        return vals
    if kind == "namedtuple":
        return data(*vals)
    return dict(zip(data, vals, strict=True))


def describe_tree(td: TreeDef) -> str:
    """A treedef as it reads in Python (`(*, [*, *])`, `None`)."""
    if td == LEAF:
        return "*"
    kind, data, *children = td
    inner = ", ".join(describe_tree(c) for c in children)
    if kind == "none":
        return "None"
    if kind == "list":
        return f"[{inner}]"
    if kind == "dict":
        return (
            "{"
            + ", ".join(f"{k!r}: {describe_tree(c)}" for k, c in zip(data, children, strict=True))
            + "}"
        )
    name = "" if kind == "tuple" else data.__name__
    return f"{name}({inner}{',' if len(children) == 1 and kind == 'tuple' else ''})"


# -- lifting ---------------------------------------------------------------------------------

#: How deep `lift_closure` looks: functions in cells of functions in cells, containers in
#: containers. A traced value hidden deeper is refused when the inner trace reads it.
MAX_DEPTH = 6
#: Containers larger than this are not looked into (kept as they are, by identity).
MAX_ITEMS = 256

_NUMBERS = (int, float, complex, np.number, np.bool_)
_BY_VALUE = (str, bytes, type(None), type(Ellipsis), range, slice)


def _liftable(v: Any) -> bool:
    return isinstance(v, (Traced, np.ndarray, *_NUMBERS))


def _too_big(v: Any) -> bool:
    return isinstance(v, (tuple, list, dict)) and len(v) > MAX_ITEMS


class _Ident:
    """A key element that compares by identity (and keeps its object alive)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Ident) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def _static_key(v: Any) -> Any:
    if isinstance(v, _BY_VALUE):
        return (type(v), v)
    if isinstance(v, (type, types.ModuleType, types.BuiltinFunctionType, np.ufunc)):
        return v
    return _Ident(v)


@functools.lru_cache(maxsize=1024)
def _assigned_freevars(code: types.CodeType) -> frozenset[str]:
    """The free variables `code` rebinds (`nonlocal x; x = ...`): their cells stay shared."""
    free = set(code.co_freevars)
    return frozenset(
        ins.argval
        for ins in dis.get_instructions(code)
        if ins.opname in ("STORE_DEREF", "DELETE_DEREF") and ins.argval in free
    )


class _Lifter:
    """One walk over a function's captures: collects lifted values, builds the template."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.values: list[Any] = []
        self.path: set[int] = set()

    def hole(self, v: Any) -> tuple[Any, Any]:
        self.values.append(v)
        return ("hole", len(self.values) - 1), "v"

    def visit(self, v: Any, depth: int) -> tuple[Any, Any]:
        """(template node, key) for captured value `v`; a node is ("hole", i), ("static", v),
        or a container / function / partial node whose children are nodes."""
        if _liftable(v):
            return self.hole(v)
        if depth >= MAX_DEPTH or id(v) in self.path or _too_big(v):
            return ("static", v), _static_key(v)
        t = type(v)
        self.path.add(id(v))
        try:
            if t is tuple or t is list or (isinstance(v, tuple) and hasattr(v, "_fields")):
                parts = [self.visit(e, depth + 1) for e in v]
                return self.node(("seq", t, v), parts, ("seq", t))
            if t is dict:
                parts = [self.visit(e, depth + 1) for e in v.values()]
                return self.node(("dict", tuple(v), v), parts, ("dict", tuple(v)))
            if t is functools.partial:
                parts = [self.visit(v.func, depth + 1), self.visit(v.args, depth + 1),
                         self.visit(v.keywords, depth + 1)]  # fmt: skip
                return self.node(("partial", None, v), parts, ("partial",))
            if t is types.FunctionType:
                return self.function(v, depth)
        finally:
            self.path.discard(id(v))
        return ("static", v), _static_key(v)

    def node(self, head: Any, parts: list[Any], key_head: Any) -> tuple[Any, Any]:
        nodes = [p[0] for p in parts]
        key = (key_head, *(p[1] for p in parts))
        if all(n[0] == "static" for n in nodes):
            return ("static", head[2]), key
        return (head[0], head[1], *nodes), key

    def function(self, fn: types.FunctionType, depth: int) -> tuple[Any, Any]:
        code = fn.__code__
        assigned = _assigned_freevars(code)
        cells: list[Any] = []
        keys: list[Any] = []
        for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=True):
            try:
                v = cell.cell_contents
            except ValueError:  # (an empty cell: a variable not assigned yet)
                cells.append(("cell", cell))
                keys.append(("empty",))
                continue
            if name in assigned:  # rebound by fn: must stay the caller's cell
                if isinstance(v, Traced):
                    raise _assigned_error(self.what, name)
                cells.append(("cell", cell))
                keys.append(_Ident(cell))
                continue
            node, key = self.visit(v, depth + 1)
            cells.append(("cell", cell) if node[0] == "static" else node)
            keys.append(key)
        defaults = self.visit(fn.__defaults__, depth + 1)
        kwdefaults = self.visit(fn.__kwdefaults__, depth + 1)
        key = ("fn", code, tuple(keys), defaults[1], kwdefaults[1])
        if all(c[0] == "cell" for c in cells) and defaults[0][0] == kwdefaults[0][0] == "static":
            return ("static", fn), key
        return ("fn", fn, tuple(cells), defaults[0], kwdefaults[0]), key


def _assigned_error(what: str, name: str) -> TracingError:
    return TracingError(
        f"{what} assigns `nonlocal {name}`, which holds a value traced by the enclosing trace; "
        "such a variable cannot be lifted out of the closure. Fix: pass the value through the "
        "arguments (scan's carry or xs), or capture it in a variable the function only reads."
    )


def _build(node: Any, values: Sequence[Any]) -> Any:
    kind = node[0]
    if kind == "static":
        return node[1]
    if kind == "hole":
        return values[node[1]]
    if kind == "seq":
        t = node[1]
        items = [_build(n, values) for n in node[2:]]
        return t(*items) if hasattr(t, "_fields") else t(items)
    if kind == "dict":
        return dict(zip(node[1], (_build(n, values) for n in node[2:]), strict=True))
    if kind == "partial":
        func, args, kw = (_build(n, values) for n in node[2:])
        return functools.partial(func, *args, **kw)
    _, fn, cells, defaults, kwdefaults = node
    closure = tuple(c[1] if c[0] == "cell" else types.CellType(_build(c, values)) for c in cells)
    g = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, _build(defaults, values),
                           closure)  # fmt: skip
    g.__kwdefaults__ = _build(kwdefaults, values)
    g.__qualname__ = fn.__qualname__
    g.__dict__.update(fn.__dict__)
    return g


class Lifted:
    """A function with the values it captures taken out (see `lift_closure`).

    `key` is hashable: two `Lifted` with equal keys rebuild functions that compute
    the same thing from the same lifted values (same code, same other captures).
    `rebuild(values)` returns the function with `values` (one per lifted value, in
    order; e.g. the primals, or traced values of another trace) substituted.
    """

    __slots__ = ("fn", "key", "n", "template")

    def __init__(self, fn: Callable[..., Any], template: Any, key: Any, n: int) -> None:
        self.fn = fn
        self.template = template
        self.key = key
        self.n = n

    def rebuild(self, values: Sequence[Any]) -> Callable[..., Any]:
        """`fn` with the lifted values replaced by `values`."""
        if len(values) != self.n:
            raise ValueError(f"rebuild: {self.n} lifted values expected, got {len(values)}")
        return self.fn if self.template[0] == "static" else _build(self.template, values)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function this was made from (with the values it captured)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        return f"Lifted({name}, {self.n} lifted value(s))"


def lift_closure(
    fn: Callable[..., Any], what: str = "the function"
) -> tuple[Lifted, tuple[Any, ...]]:
    """Take traced values, arrays and numbers out of `fn`'s closure: `(lifted, values)`.

    Looks into closure cells and defaults, tuples/lists/dicts there, `functools.partial`
    arguments and the closures of functions found there, `MAX_DEPTH` levels deep.
    `lifted.rebuild(values)` is equivalent to `fn`. `what` names `fn` in errors.
    """
    if not callable(fn):
        raise TypeError(f"{what} must be callable, got {type(fn).__name__}")
    lifter = _Lifter(what)
    template, key = lifter.visit(fn, 0)
    return Lifted(fn, template, key, len(lifter.values)), tuple(lifter.values)


def foreign_value_error(what: str, e: TracingError) -> TracingError:
    """The error for a traced value `what` reached although it could not be lifted."""
    return TracingError(
        f"{what} read a value traced by the enclosing rulekit trace that rulekit could not "
        "lift out of its closure (it is held in an attribute of a captured object, a global, "
        f"or deeper than {MAX_DEPTH} levels of containers/closures). Fix: pass it through "
        "the arguments (scan's carry or xs, checkpoint's arguments), or capture it directly "
        "in a local variable of the enclosing function.\n(The inner trace said: " + str(e) + ")"
    )


def is_foreign_error(e: BaseException) -> bool:
    """Whether `e` is the engine's refusal of a value of an enclosing trace."""
    return isinstance(e, TracingError) and "traced by an outer" in str(e)
