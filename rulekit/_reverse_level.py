"""Nested reverse mode: the `ReverseLevel` that `grad` runs inside another transformation.

The outermost `value_and_grad` is the reverse engine (`rulekit._engine`): fast
rules that write into fdata and restore what they overwrote. Their pullbacks are
not meant to be differentiated again. Inside another transformation (grad of
grad, `jacrev(grad(f))`, `hvp`), `grad` runs this level instead: a functional
tape. Each call runs the function's differentiable pullback rule
(`rulekit.vjp_rule`), which returns the output and a pullback written in plain
NumPy; the backward pass calls those pullbacks on cotangents that the enclosing
levels trace, so the gradient itself is differentiable.

The tape is a list of `Node`s in call order; a `ReverseValue` points at the node
(and output position) that made it. Cotangents are values, added functionally.

Writes: `x[i] = v` (and `out=`, `x += y`) make a new node, with the primal
copied before the write (earlier pullbacks keep the value they saw). NumPy
would change every view of `x` too; a copy cannot, so a write into an array
that has views (or is one), or into a differentiated argument, raises
TracingError instead of giving a wrong value.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._cotangents import unbroadcast
from rulekit._engine._levels import Level, LevelValue, base_array, inexact, plain
from rulekit._errors import TracingError
from rulekit._functions import function_name
from rulekit._registry import vjp_registry

__all__ = ["Node", "ReverseLevel", "ReverseValue"]


class Node:
    """One recorded call: its pullback and, per positional argument, where the argument
    came from (`(node, output index)`, a list of those for a list argument, or None)."""

    __slots__ = ("f", "n_out", "parents", "pullback")

    def __init__(
        self, pullback: Callable[..., Any] | None, parents: list[Any], n_out: int, f: Any = None
    ) -> None:
        self.pullback = pullback
        self.parents = parents
        self.n_out = n_out  # 0: a single output; k: a tuple of k outputs
        self.f = f  # (the function called: named when its pullback fails)


class ReverseValue(LevelValue):
    """A value traced by a `ReverseLevel`: its primal and the node (and output) that made it."""

    __slots__ = ("index", "node")

    def __init__(self, primal: Any, level: Level, node: Node, index: int | None) -> None:
        super().__init__(primal, level)
        self.node = node
        self.index = index


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


class ReverseLevel(Level):
    """A running nested `grad`/`vjp`: records vjp rules' pullbacks; `backward` runs them."""

    kind = "nested grad"
    table = vjp_registry
    rule_kind = "differentiable pullback (rulekit.vjp_rule.register)"

    def __init__(self) -> None:
        super().__init__()
        self.nodes: list[Node] = []
        self.pinned: dict[int, tuple[Any, str]] = {}  # base arrays a write must not touch

    # -- values ----------------------------------------------------------------------

    def input(self, x: Any) -> ReverseValue:
        """An argument being differentiated: a leaf node."""
        node = Node(None, [], 0)
        self.nodes.append(node)
        b = base_array(x)
        if b is not None:
            self.pinned[id(b)] = (b, "a differentiated argument")
        return ReverseValue(x, self, node, None)

    def _where(self, x: Any) -> Any:
        """Where argument `x` comes from: `(node, index)`, a list for a list, or None."""
        if isinstance(x, ReverseValue) and x.level is self:
            return (x.node, x.index)
        if isinstance(x, (list, tuple)) and self.owns(x):
            return [self._where(e) for e in x]
        return None

    # -- calls -----------------------------------------------------------------------

    def apply(self, impl: Any, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        parents = [self._where(a) for a in args]
        active = tuple(p is not None for p in parents)
        prims = self.primal_of(args)
        y, pullback = impl(active, *prims, **kwargs)
        many = isinstance(y, (tuple, list))  # (a namedtuple: slogdet, eigh, ...; a list: split)
        node = Node(pullback, parents, len(y) if many else 0, f)
        self.nodes.append(node)
        if many:
            outs = [self._wrap(e, node, i, prims) for i, e in enumerate(y)]
            out = type(y)(*outs) if hasattr(y, "_fields") else type(y)(outs)
        else:
            out = self._wrap(y, node, None, prims)
        return out

    def _wrap(self, y: Any, node: Node, index: int | None, prims: Any) -> Any:
        if isinstance(y, (list, dict)):
            raise TracingError(
                f"a differentiable pullback returned a {type(y).__name__} output ({len(y)} "
                "values), whose values would lose their derivative. Fix: return a tuple."
            )
        if not inexact(y):
            return y
        b = base_array(y)
        if b is not None:
            for p in _arrays(prims):
                if np.may_share_memory(plain(p), b):
                    self.pinned[id(b)] = (b, "a view (or an array with views)")
                    pb = base_array(p)
                    if pb is not None:
                        self.pinned[id(pb)] = (pb, "a view (or an array with views)")
        return ReverseValue(y, self, node, index)

    def setitem(self, target: Any, idx: Any, value: Any) -> None:
        """`target[idx] = value` as a new node; the primal is copied first."""
        b = base_array(target.primal)
        if b is not None and id(b) in self.pinned:
            what = self.pinned[id(b)][1]
            raise TracingError(
                f"an in-place write into {what} inside a nested differentiation (grad of "
                "grad, hessian, jacrev inside a transformation). The nested reverse mode "
                "copies an array before writing into it, so views and the caller's array "
                "would not see the write. Fix: write into a copy (x = x.copy(); x[i] = v) "
                "or build the value with np.where / np.concatenate."
            )
        if self.owns(idx):
            raise TracingError("an index computed with a derivative: use integer indices")
        if (
            idx is Ellipsis
            and isinstance(value, ReverseValue)
            and value.level is self
            and np.shape(value.primal) == np.shape(target.primal)
            and value.dtype == target.dtype
        ):  # (`x += y`, `np.add(a, b, out=x)`: the whole value replaced, nothing to mask)
            target.primal, target.node, target.index = value.primal, value.node, value.index
            return
        shape = np.shape(target.primal)
        new = np.copy(target.primal)
        new[idx] = self.primal_of(value)
        vshape = np.shape(self.primal_of(value))
        real_value = not np.iscomplexobj(plain(self.primal_of(value)))
        mask = np.zeros(shape, bool)
        mask[idx] = True

        def setitem_pullback(g: Any) -> tuple[Any, ...]:
            gv = g[idx]
            if real_value and np.iscomplexobj(plain(gv)):
                gv = np.real(gv)
            return (np.where(mask, 0, g), None, unbroadcast(gv, vshape) if vshape else np.sum(gv))

        node = Node(setitem_pullback, [(target.node, target.index), None, self._where(value)], 0,
                    operator.setitem)  # fmt: skip
        self.nodes.append(node)
        target.primal, target.node, target.index = new, node, None
        nb = base_array(new)
        if nb is not None:
            self.pinned.pop(id(nb), None)

    # -- the backward pass -----------------------------------------------------------

    def backward(self, seeds: list[tuple[ReverseValue, Any]]) -> dict[int, Any]:
        """Run the pullbacks from outputs (values of this level) with their cotangents,
        `[(output, cotangent), ...]`; returns the cotangent reaching each leaf, by node id.
        It writes nothing, so it can run again with other cotangents."""
        cts: dict[int, Any] = {}
        for out, seed in seeds:
            _give(cts, (out.node, out.index), seed)
        leaves: dict[int, Any] = {}
        for node in reversed(self.nodes):
            ct = cts.pop(id(node), None)
            if ct is None:
                continue
            if node.pullback is None:
                leaves[id(node)] = ct
                continue
            if node.n_out:
                ct = tuple(ct)
            try:
                res = node.pullback(ct)
            except TracingError as e:  # (on values of an enclosing transformation)
                raise TracingError(
                    f"the differentiable pullback of {function_name(node.f)} "
                    f"({getattr(node.pullback, '__qualname__', node.pullback)}) cannot be "
                    f"differentiated again: {e}"
                ) from e
            if len(res) != len(node.parents):
                raise TracingError(
                    f"the pullback {getattr(node.pullback, '__qualname__', node.pullback)} "
                    f"returned {len(res)} cotangents for {len(node.parents)} arguments"
                )
            for where, c in zip(node.parents, res, strict=True):
                if where is not None and c is not None:
                    _give(cts, where, c)
        return leaves


def _give(cts: dict[int, Any], where: Any, c: Any) -> None:
    """Add cotangent `c` to what `where` (`(node, index)` or a list of those) has."""
    if isinstance(where, list):
        for w, e in zip(where, c, strict=True):
            if w is not None and e is not None:
                _give(cts, w, e)
        return
    node, index = where
    if index is None:
        cts[id(node)] = _add(cts.get(id(node)), c)
        return
    acc = cts.get(id(node))
    if acc is None:
        acc = cts[id(node)] = [None] * node.n_out
    acc[index] = _add(acc[index], c)


def _arrays(x: Any) -> list[Any]:
    out: list[Any] = []
    for e in x if isinstance(x, (list, tuple)) else [x]:
        if isinstance(e, (list, tuple)):
            out.extend(_arrays(e))
        elif isinstance(plain(e), np.ndarray):
            out.append(e)
    return out
