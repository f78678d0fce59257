"""The steps of a `scan`: the plain loop, and the forward and reverse passes of its rule.

`Steps.loop` runs `body` on plain values (outside any trace, for `checkpoint=True`
forwards, and to learn the `y`s' shapes of a length-0 scan). A `Steps` object
holds one rule call's steps: their derived rules' pullbacks (or, with
checkpointing, the stored carries), and runs the reverse pass over them, last
step first (the adjoint is in `rulekit._scan`'s docstring).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._derived import DerivedRules
from rulekit._engine._state import trace_state
from rulekit._lifting import Lifted, TreeDef, describe_tree, flatten, unflatten
from rulekit._tangents import NoFData, NoRData

__all__ = ["Steps", "check_carry", "own_copy", "slice_leaf", "untraced"]

_NO_R = NoRData()
_NO_F = NoFData()
_BARRIER = object()  # (on trace_state.tapes: a value of an enclosing trace is refused)


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """Run plain code inside a trace: a value of an enclosing trace it meets is refused."""
    tapes = trace_state.tapes
    tapes.append(_BARRIER)
    try:
        yield
    finally:
        tapes.pop()


def _inexact(x: Any) -> bool:
    return np.result_type(x).kind in "fc"


def _kind(v: Any) -> str:
    k = np.result_type(v).kind
    return k if k in "fc" else "other"


def own_copy(x: Any, copy: bool = True) -> CoDual:
    """A carry leaf the scan owns: an array copied, with zero fdata if it is float or
    complex (inactive otherwise); a float or complex scalar active (NoFData), others not."""
    if isinstance(x, np.ndarray):
        y = x.copy() if copy else x
        return CoDual(y, np.zeros_like(y) if y.dtype.kind in "fc" else None)
    return CoDual(x, _NO_F if _inexact(x) else None)


def slice_leaf(c: CoDual, i: int) -> CoDual:
    """`xs[i]` of one xs leaf: a read-only view (0-d for a 1-d leaf, as in JAX), its
    fdata the view `x̄s[i]`, which the step's pullback increments in place."""
    v = c.x[i, ...]
    v.flags.writeable = False
    return CoDual(v, None if c.dx is None else c.dx[i, ...])


def check_carry(init: Sequence[Any], new: Sequence[Any], td: TreeDef, init_td: TreeDef) -> None:
    """The carry a step returned must keep init's structure, shapes and dtypes."""
    if td != init_td:
        raise TypeError(
            f"scan's body returned a carry of structure {describe_tree(td)}, but init has "
            f"{describe_tree(init_td)}: the carry must keep its structure (as in jax.lax.scan)."
        )
    for k, (a, b) in enumerate(zip(init, new, strict=True)):
        if np.ndim(a) >= 1:
            ok = isinstance(b, np.ndarray) and b.shape == a.shape and b.dtype == a.dtype
        else:
            ok = np.shape(b) == () and _kind(a) == _kind(b)
        if not ok:
            raise TypeError(
                f"scan's body returned a carry whose leaf {k} has shape {np.shape(b)} and dtype "
                f"{np.result_type(b)}, but init's has shape {np.shape(a)} and dtype "
                f"{np.result_type(a)}: the carry must keep its shapes and dtypes (as in "
                "jax.lax.scan). Fix: cast in the body (`.astype(...)`) or start from an init "
                "of the type the body returns."
            )


def _pair(out: Any) -> tuple[Any, Any]:
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"scan's body must return a pair (carry, y), got {type(out).__name__}")
    return out


def _pair_def(out_def: TreeDef) -> tuple[TreeDef, TreeDef]:
    if not (out_def[0] in ("tuple", "namedtuple") and len(out_def) == 4):
        raise TypeError(f"scan's body must return a pair (carry, y), got {describe_tree(out_def)}")
    return out_def[2], out_def[3]


def _stack(y: Any, n: int) -> np.ndarray:
    return np.empty((n, *np.shape(y)), dtype=np.result_type(y))


def _put(ys: list[np.ndarray], y_leaves: Sequence[Any], i: int) -> None:
    for a, y in zip(ys, y_leaves, strict=True):
        if np.shape(y) != a.shape[1:] or not np.can_cast(np.result_type(y), a.dtype, "same_kind"):
            raise TypeError(
                f"scan's body returned a y of shape {np.shape(y)} and dtype {np.result_type(y)} "
                f"at step {i}, but {a.shape[1:]} and {a.dtype} at step 0: the ys are stacked, "
                "so every step must return the same shapes and dtypes."
            )
        a[i] = y


def _y_dy(ys_dx: Any, i: int) -> Any:
    return ys_dx[i] if isinstance(ys_dx, np.ndarray) else _NO_R


class Steps:
    """The steps of one scan rule call (see the module docstring)."""

    def __init__(self, rules: DerivedRules, lifted: Lifted, args_def: TreeDef, carry_def: TreeDef,
                 xs: Sequence[CoDual], consts: Sequence[CoDual]) -> None:  # fmt: skip
        self.rules = rules
        self.lifted = lifted
        self.args_def = args_def
        self.carry_def = carry_def
        self.xs = xs
        self.consts = consts
        self.pbs: list[tuple[Callable[..., Any], list[CoDual], int]] = []
        self.stored: list[list[Any]] = []
        self.acc: list[Any] = [None] * len(consts)
        self.ys_def: TreeDef = ("none", None)

    @staticmethod
    def loop(body: Callable[..., Any], carry_leaves: Sequence[Any], carry_def: TreeDef,
             xs_leaves: Sequence[Any], xs_def: TreeDef, n: int,
             store: list[list[Any]] | None = None,
             ) -> tuple[list[Any], list[np.ndarray], TreeDef]:  # fmt: skip
        """The scan on plain values: `(final carry leaves, stacked ys, ys treedef)`.

        `store`, if given, receives a copy of each step's input carry."""
        cur = [np.copy(v) if isinstance(v, np.ndarray) else v for v in carry_leaves]
        ys: list[np.ndarray] = []
        ys_def: TreeDef = ("none", None)
        for i in range(max(n, 1)):
            if n == 0:  # (run once on zeros to learn the ys' structure, shapes and dtypes)
                xs_i = [np.zeros(np.shape(a)[1:], np.result_type(a)) for a in xs_leaves]
                carry_in = [np.copy(v) for v in cur]
            else:
                xs_i = [a[i, ...] for a in xs_leaves]
                for v in xs_i:
                    v.flags.writeable = False
                carry_in = cur
                if store is not None:
                    store.append([np.copy(v) if isinstance(v, np.ndarray) else v for v in cur])
            c, y = _pair(body(unflatten(carry_def, carry_in), unflatten(xs_def, xs_i)))
            c_leaves, c_def = flatten(c)
            check_carry(carry_leaves, c_leaves, c_def, carry_def)
            y_leaves, y_def = flatten(y)
            if i == 0:
                ys, ys_def = [_stack(y, n) for y in y_leaves], y_def
            elif y_def != ys_def:
                raise TypeError(f"scan's body returned ys of changing structure at step {i}")
            if n:
                _put(ys, y_leaves, i)
                cur = c_leaves
        return cur, ys, ys_def

    def forward(self, carry: list[CoDual], n: int) -> tuple[list[CoDual], list[np.ndarray]]:
        """Run every step by the body's derived rule, keeping their pullbacks."""
        nc, nx = len(carry), len(self.xs)
        init_x = [c.x for c in carry]
        ys: list[np.ndarray] = []
        for i in range(n):
            ins = [*carry, *(slice_leaf(c, i) for c in self.xs), *self.consts]
            outs, out_def, pb = self.rules.flat(self.lifted, self.args_def, nc + nx, ins)
            self.pbs.append((pb, carry, len(outs)))
            c_def, y_def = _pair_def(out_def)
            check_carry(init_x, [o.x for o in outs[:nc]], c_def, self.carry_def)
            y_leaves = [o.x for o in outs[nc:]]
            if i == 0:
                ys, self.ys_def = [_stack(y, n) for y in y_leaves], y_def
            elif y_def != self.ys_def:
                raise TypeError(f"scan's body returned ys of changing structure at step {i}")
            _put(ys, y_leaves, i)
            carry = outs[:nc]
        return carry, ys

    def _collect(self, r: Sequence[Any], i: int, nc: int) -> None:
        """After step i's pullback: the lifted scalars' cotangents are summed."""
        off = nc + len(self.xs)
        for k in range(len(self.consts)):
            rk = r[off + k]
            if not isinstance(rk, NoRData) and rk is not None:
                self.acc[k] = rk if self.acc[k] is None else self.acc[k] + rk

    def reverse(self, cot: list[Any], ys_dx: Sequence[Any]) -> list[Any]:
        """The step pullbacks, last to first: c̄₀ (arrays: the fdata of the first carry).

        `cot` is c̄ₙ: the outputs' fdata for array leaves, rdata for scalars. A carry's
        fdata is shared by the step that makes it and the one that reads it, so array
        cotangents are passed once, to the last step, and flow in place after that."""
        nc = len(cot)
        pbs = self.pbs
        if not pbs:
            return cot
        for i in range(len(pbs) - 1, -1, -1):
            pb, carry_in, _ = pbs.pop()
            r = pb((*cot, *(_y_dy(d, i) for d in ys_dx)))
            cot = [_NO_R if isinstance(c.dx, np.ndarray) else r[k] for k, c in enumerate(carry_in)]
            self._collect(r, i, nc)
        return [
            c.dx if isinstance(c.dx, np.ndarray) else r for c, r in zip(carry_in, cot, strict=True)
        ]

    def reverse_stored(self, cot: list[Any], ys_dx: Sequence[Any]) -> list[Any]:
        """checkpoint=True: recompute step k from its stored carry, then its pullback."""
        nc, nx = len(cot), len(self.xs)
        stored = self.stored
        for i in range(len(stored) - 1, -1, -1):
            carry_in = [own_copy(v, copy=False) for v in stored.pop()]
            ins = [*carry_in, *(slice_leaf(c, i) for c in self.xs), *self.consts]
            _, _, pb = self.rules.flat(self.lifted, self.args_def, nc + nx, ins)
            r = pb((*cot, *(_y_dy(d, i) for d in ys_dx)))
            cot = [c.dx if isinstance(c.dx, np.ndarray) else r[k] for k, c in enumerate(carry_in)]
            self._collect(r, i, nc)
        return cot

    def const_rdata(self) -> list[Any]:
        return [_NO_R if a is None else a for a in self.acc]

    def unwind(self) -> None:
        """After an error in the forward pass: the pullbacks so far restore what they changed."""
        while self.pbs:
            pb, _, nout = self.pbs.pop()
            with contextlib.suppress(Exception):
                pb((_NO_R,) * nout)
