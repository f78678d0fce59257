"""Pooled outputs and broadcast plans of the fused ufunc rules (`rules.numpy.ufuncs.fused`).

`Pooled` rules take each output and its fdata from a per-shape pool of `Pair`s (zero
fdata whenever in the pool) and hand it back from the pullback; `bcast_plan` and
`bcast_fdata` decide whether a broadcast `a ∘ b` can run through the declaration's
row or column kernel (`rules.numpy.ufuncs._kernels`) and prepare its arguments.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import StatefulRRule, free_list
from rules._support.cotangents import add_to_fdata_pooled as add_unbroadcast
from rules._support.layout import flat_view, like_scratch

__all__ = ["Pair", "Pooled", "bcast_fdata", "bcast_plan", "twice"]


class Pair:
    """A pooled output and its fdata (zero whenever it is in the pool), with flat views."""

    __slots__ = ("flat_g", "flat_in", "flat_y", "g", "plan", "y")

    def __init__(
        self, operands: tuple[np.ndarray, ...], shape: tuple[int, ...], dtype: np.dtype
    ) -> None:
        # numpy's own layout for an elementwise result of these operands (its iterator's
        # "K" order: the operands' axis order, e.g. F for F-ordered ones, or (8, 64, 32)-like
        # strides for a transposed 3-d one), so that a later reshape/ravel is a view or a
        # copy exactly as in numpy (which decides what an in-place write changes). The
        # layout depends on the operands' shapes and strides only: np.add/np.positive
        # of them (once per new pair) shows it.
        if not operands:
            template = np.empty(shape, dtype)
        elif len(operands) == 1:
            template = np.positive(operands[0])
        else:
            template = np.add(*operands)
        self.y = np.empty_like(template, dtype=dtype)
        self.g = np.zeros_like(template, dtype=dtype)
        self.flat_y, self.flat_g = flat_view(self.y), flat_view(self.g)
        # the broadcast kernel's arguments for the last operands (see `FusedBinary._arrays`)
        self.plan: tuple[Any, ...] | None = None
        self.flat_in: tuple[Any, ...] = ()  # (see `flat_views`)

    def flat_views(self, x: Any, dx: Any) -> tuple[Any, Any] | None:
        """Flat views of input x and its fdata dx (None: a dummy), or None when one is not
        laid out like the output. Cached for the very same objects (the cache holds them,
        so the same objects have the same memory layout)."""
        c = self.flat_in
        if len(c) == 3 and c[0] is x and c[1] is dx:
            return c[2]
        s = self.y.strides
        views = None
        if x.strides == s and (dx is None or dx.strides == s):
            views = (flat_view(x), self.flat_y if dx is None else flat_view(dx))
        self.flat_in = (x, dx, views)
        return views

    def flat_views2(self, a: Any, b: Any, da: Any, db: Any) -> tuple[Any, ...] | None:
        """`flat_views` for two same-shape inputs and their fdata."""
        c = self.flat_in
        if len(c) == 5 and c[0] is a and c[1] is b and c[2] is da and c[3] is db:
            return c[4]
        views = None
        va, vb = self.flat_views(a, da), self.flat_views(b, db)
        if va is not None and vb is not None:
            views = (va[0], vb[0], va[1], vb[1])
        self.flat_in = (a, b, da, db, views)
        return views


class Pooled(StatefulRRule):
    """Outputs and fdata from a per-shape pool of pairs, owned by each call's pullback.

    Lighter than the base class's stack: a pair is taken in the forward pass, held by
    the pullback's closure and put back, its fdata zero, by the pullback. Interleaved
    calls hold different pairs; a forward pass whose pullback never runs just never
    returns its pair (nothing leaks: the closure owns it); a second call of the same
    pullback raises.
    """

    def __init__(self) -> None:
        super().__init__()
        self._pairs: dict[Any, list[Pair]] = {}
        self._zerod: dict[str, np.ndarray] = {}  # (`filled_0d`: scalar operands)

    def _take(  # type: ignore[override]
        self, operands: tuple[np.ndarray, ...], shape: tuple[int, ...], dtype: np.dtype
    ) -> tuple[Pair, Any]:
        """A pair for the result of an elementwise op of `operands` (the array ones)."""
        key = (shape, tuple((o.shape, o.strides) for o in operands), dtype.char)
        free = free_list(self._pairs, key)  # (bounded; a pair put back on a dropped list is freed)
        pair = free.pop() if free else Pair(operands, shape, dtype)
        return pair, free

    def _like(self, name: str, pair: Pair) -> np.ndarray:
        """A scratch buffer laid out like the pair's output: flat views pair elements."""
        return like_scratch(self.scratch, name, pair.y)

    def _accumulate(self, dx: np.ndarray, contrib: Any) -> None:
        """dx += contrib (contrib in output shape), reduced over broadcast axes, no alloc."""
        add_unbroadcast(self, "reduce", dx, contrib)


def twice() -> RuntimeError:
    return RuntimeError("a fused ufunc rule's pullback was called twice")


def bcast_plan(A: Any, B: Any, y: Any, g: Any) -> tuple[Any, ...] | None:
    """The operands' side of a row/column broadcast kernel call, or None when the call is
    not of that kind: `(kind, sf, F, S, Y, G, rows, dummy)`, kind "row" or "col" (the
    declaration's kernel, `rules.numpy.ufuncs._kernels`).

    One operand F has the output's shape; the other, S, is a row (shape (…, 1, n), the
    output read as rows of n) or a column (shape (m, 1) against a 2-D (m, n) output).
    Everything C-contiguous, so every reshape here is a view (the kernel clears G through
    its view; `bcast_fdata` checks the fdata likewise). (`dummy`, writable and never
    written, stands in for an inactive S's fdata; Y for an inactive F's.)
    """
    if A.shape == y.shape:
        F, S, sf = A, B, False
    elif B.shape == y.shape:
        F, S, sf = B, A, True
    else:
        return None
    if not (y.size and y.flags.c_contiguous and F.flags.c_contiguous and S.flags.c_contiguous):
        return None
    n = y.shape[-1]
    if S.ndim and S.shape[-1] == n and S.size == n:
        kind, rows = "row", (-1, n)
    elif y.ndim == 2 and S.shape == (y.shape[0], 1):
        kind, rows = "col", y.shape
    else:
        return None
    Y2 = y.reshape(rows)
    return kind, sf, F.reshape(rows), S.reshape(-1), Y2, g.reshape(rows), rows, Y2.reshape(-1)


def bcast_fdata(plan: tuple[Any, ...], da: Any, db: Any) -> tuple[Any, Any, bool, bool] | None:
    """`(F̄, S̄, want F̄, want S̄)` for the kernel (the plan's dummies for inactive operands),
    or None when an fdata is not laid out like its C-contiguous primal."""
    dF, dS = (db, da) if plan[1] else (da, db)
    dt = plan[4].dtype
    if dF is not None and not (dF.flags.c_contiguous and dF.dtype == dt):
        return None
    if dS is not None and not (dS.flags.c_contiguous and dS.dtype == dt):
        return None
    return (
        plan[4] if dF is None else dF.reshape(plan[6]),
        plan[7] if dS is None else dS.reshape(-1),
        dF is not None,
        dS is not None,
    )
