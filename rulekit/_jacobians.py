"""Jacobians' structure (JAX's): unit bases of an argument, and the assembly of per-element
derivatives into `output.shape + input.shape` blocks, over output and argument pytrees.

`jacfwd` pushes the unit tangents of `tree_basis` through `jvp`; `jacrev` pulls the unit
cotangents of each output leaf back through one `vjp_fn`; `jacobian_tree` stacks either
into each output leaf's Jacobian with respect to each differentiated argument (for a
pytree argument, a pytree of them: a dict of parameters gives a dict of blocks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit._api import _is_int
from rulekit._engine._levels import inexact, plain

__all__ = ["assemble", "check_float_leaves", "jacobian_tree", "tree_basis", "tree_leaves",
           "tree_rebuild", "unit_basis"]  # fmt: skip


def tree_leaves(tree: Any) -> list[Any]:
    """The leaves of an output: tuples, lists and dicts are containers (None is a leaf)."""
    if isinstance(tree, (tuple, list)):
        return [leaf for e in tree for leaf in tree_leaves(e)]
    if isinstance(tree, dict):
        return [leaf for e in tree.values() for leaf in tree_leaves(e)]
    return [tree]


def tree_rebuild(tree: Any, leaves: list[Any]) -> Any:
    """`tree`'s structure with its leaves replaced by `leaves`, in order."""
    it = iter(leaves)

    def build(t: Any) -> Any:
        if isinstance(t, (tuple, list)):
            vals = [build(e) for e in t]
            return type(t)(*vals) if hasattr(t, "_fields") else type(t)(vals)
        if isinstance(t, dict):
            return {k: build(e) for k, e in t.items()}
        return next(it)

    return build(tree)


def unit_basis(x: Any) -> list[Any]:
    """The unit vectors of `x`'s shape (its dtype; one per element, C order)."""
    p = plain(x)
    shape, dt = np.shape(p), np.result_type(p)
    n = int(np.prod(shape))
    out = []
    for k in range(n):
        e = np.zeros(n, dt)
        e[k] = 1
        out.append(e.reshape(shape))
    return out


def tree_basis(x: Any) -> list[Any]:
    """The unit tangents of argument `x`, a pytree (tuples, lists, dicts) or a leaf: per
    float leaf in order, per element, x's structure with that unit vector at the leaf and
    None (a constant) at the others."""
    leaves = tree_leaves(x)
    if len(leaves) == 1 and leaves[0] is x:
        return unit_basis(x)
    out = []
    for p, leaf in enumerate(leaves):
        if inexact(leaf):
            nones = [None] * len(leaves)
            out += [tree_rebuild(x, [*nones[:p], e, *nones[p + 1 :]]) for e in unit_basis(leaf)]
    return out


def check_float_leaves(args: tuple[Any, ...], nums: tuple[int, ...], fname: str) -> None:
    """A Jacobian's differentiated arguments: float or complex leaves only, as `grad` (and
    JAX) require; other values are constants, passed outside `argnums`."""
    for i in nums:
        for leaf in tree_leaves(args[i]):
            if not inexact(leaf):
                raise TypeError(
                    f"argument {i} of {fname} holds a {type(plain(leaf)).__name__} of dtype "
                    f"{np.result_type(plain(leaf))}, which is not differentiable. Differentiate "
                    "with respect to float or complex arrays and scalars (or tuples/lists/dicts "
                    "of them); pass other values as constants (leave them out of argnums)."
                )


def assemble(columns: list[Any], out_shape: tuple[int, ...], in_shape: tuple[int, ...],
              dtype: Any, rows: bool) -> Any:  # fmt: skip
    """Stack per-element derivatives into a Jacobian of shape out_shape + in_shape."""
    if not columns:
        return np.zeros(out_shape + in_shape, dtype)
    # (a scalar becomes a 1-vector by a product: reshaping a traced scalar has no rule)
    flat = [np.reshape(c, (-1,)) if np.ndim(plain(c)) else c * np.ones(1, np.result_type(plain(c)))
            for c in columns]  # fmt: skip
    j = np.stack(flat, axis=0 if rows else 1)  # rows: (out, in); columns: (out, in)
    return np.reshape(j, out_shape + in_shape)


def jacobian_tree(out: Any, args: tuple[Any, ...], nums: tuple[int, ...], argnums: Any,
                   derivs: Callable[[int, int], list[Any]], rows: bool) -> Any:  # fmt: skip
    """JAX's Jacobian structure: `out`'s structure, each leaf replaced by its Jacobian with
    respect to the differentiated argument (a tuple over them for a tuple `argnums`): of
    shape leaf.shape + argument.shape, or for a pytree argument (a dict of parameters) the
    argument's structure holding leaf.shape + its leaf's shape. `derivs(l, k)`: leaf l's
    derivatives per element of argument k's float leaves (columns, `tree_basis` order) or
    per element of leaf l (rows: pytrees like argument k); non-float leaves get zeros."""
    jac_leaves = []
    for m, leaf in enumerate(tree_leaves(out)):
        pl, jk = plain(leaf), []
        for k, i in enumerate(nums):
            ds = derivs(m, k) if inexact(leaf) else None
            in_leaves, per_leaf, start = tree_leaves(args[i]), [], 0
            single = len(in_leaves) == 1 and in_leaves[0] is args[i]  # (not a pytree)
            for p, a in enumerate(in_leaves):
                pa = plain(a)
                shape = np.shape(pl) + np.shape(pa)
                if ds is None or not inexact(a):
                    per_leaf.append(np.zeros(shape, np.result_type(pa)))
                    continue
                if rows:
                    parts = [d if single else tree_leaves(d)[p] for d in ds]
                else:
                    n = int(np.prod(np.shape(pa)))
                    parts, start = ds[start : start + n], start + n
                per_leaf.append(assemble(parts, np.shape(pl), np.shape(pa),
                                          np.result_type(pl, pa), rows))  # fmt: skip
            jk.append(per_leaf[0] if single else tree_rebuild(args[i], per_leaf))
        jac_leaves.append(jk[0] if _is_int(argnums) else tuple(jk))
    return tree_rebuild(out, jac_leaves)
