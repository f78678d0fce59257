"""Rules for the numpy functions that write into their first argument: `np.fill_diagonal`,
`np.put`, `np.place`, `np.putmask`.

Each is a plain overwrite of some elements of the destination x by elements of v, so the
mutation convention of `x[idx] = v` applies (docs/concepts.md, rules.numpy.indexing.subscript):

    v̄ += x̄[written]  (each written element to the element of v it came from),
    then  x̄[written] ← 0  and  x[written] ← old

Which element of v lands where follows numpy: v is flattened (C order) and, if it has fewer
elements than there are targets, repeated cyclically (`fill_diagonal`, `put`, `place`: the
k-th target gets v.flat[k % v.size]; `putmask`: the target at flat position p gets
v.flat[p % v.size]). So an element of v used several times gets the sum of the cotangents
of its targets, a scalar v the sum of them all. With repeated targets (`np.put`) the last
write wins, and only that write's element of v gets the cotangent.

A traced value written into a plain destination raises TracingError. (`np.fill_diagonal`
dispatches on its destination only, so there numpy never hands rulekit the call: the
conversion of the traced value is refused, and the error names np.fill_diagonal.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from rulekit import Array, CoDual, NoFData, Vararg, build_primitive_rrule, example, rrule
from rules._support.cotangents import ADD_REDUCE, NO_F, NO_R, no_rdata
from rules._support.examples import randn
from rules._support.patterns import InexactArray
from rules.numpy.indexing.subscript import (
    _COMPLEX,
    _EXACT,
    _REAL,
    SetitemRule,
    _lost_write,
    _same,
    _value_rdata,
)

__all__ = ["FillDiagonalRule", "place_rrule", "put_rrule", "putmask_rrule"]


# -- np.fill_diagonal(x, v, wrap=False) ---------------------------------------------------------


def _check_fill_diagonal(a: np.ndarray) -> None:
    """numpy's own argument errors, raised before anything is written."""
    if a.ndim < 2:
        raise ValueError("array must be at least 2-d")
    if a.ndim > 2 and any(n != a.shape[0] for n in a.shape):
        raise ValueError("All dimensions of input must be of equal length")


def _diagonal(a: np.ndarray, wrap: bool) -> np.ndarray | None:
    """The elements np.fill_diagonal(a, v, wrap) writes, in its order, as a writeable 1-D view
    of `a`; None where no strided view holds them (wrap=True on a 2-D array more than one row
    taller than wide, unless C-contiguous: its wrapped diagonals restart after a skipped row)."""
    if a.ndim == 2:
        n, m = a.shape
        if wrap and n > m + 1:
            return a.reshape(-1)[:: m + 1] if a.flags.c_contiguous else None
        k = min(n, m)
    else:
        k = a.shape[0]
    return as_strided(a, shape=(k,), strides=(sum(a.strides),))


def _wrapped_index(a: np.ndarray) -> tuple[np.ndarray, ...]:
    """The multi-index of the elements np.fill_diagonal(a, v, wrap=True) writes (2-D a)."""
    n, m = a.shape
    return np.unravel_index(np.arange(0, n * m, m + 1), a.shape)


def _check_value(what: str, v: CoDual) -> None:
    """Refuse (before anything is written) a value whose cotangent these rules cannot pass
    back: a list or tuple holding traced values."""
    if v.dx is not None and not isinstance(v.dx, (np.ndarray, NoFData)):
        raise NotImplementedError(
            f"{what} with a {type(v.x).__name__} of traced values as the value has no rule. "
            "Fix: pass np.stack([...]) of the traced values instead."
        )


def _cyclic_write(d: np.ndarray, vf: np.ndarray) -> None:
    """d[k] = vf[k % vf.size] for every k (what `a.flat[...] = vf` does), allocation-free."""
    k, m = d.size, vf.size
    if m == 0:
        return
    if m >= k:
        d[...] = vf[:k]
        return
    q, r = divmod(k, m)
    d[: q * m].reshape(q, m)[...] = vf  # a view: d is 1-D
    if r:
        d[q * m :] = vf[:r]


class FillDiagonalRule(SetitemRule):
    """np.fill_diagonal(x, v, wrap): x[diag] = v (v flattened, repeated cyclically)  ⇒
    v̄.flat[j] += Σ_{k ≡ j mod v.size} x̄[diag][k]  (a scalar v: Σ x̄[diag]),
    x̄[diag] ← 0,  x[diag] ← old.

    The diagonal is a strided view of x (and of x̄), saved in a pooled buffer: once warm,
    forward and pullback allocate nothing. A wrapped tall array that is not C-contiguous
    has no such view and goes through a (allocating) fancy index instead."""

    def __call__(  # type: ignore[override]
        self, f: CoDual, x: CoDual, v: CoDual, *rest: CoDual, wrap: bool = False
    ) -> tuple[CoDual, Any]:
        if rest:
            wrap = bool(rest[0].x)
        xp, dx, vp = x.x, x.dx, v.x
        _check_fill_diagonal(xp)
        if dx is None and v.dx is not None:
            raise _lost_write("np.fill_diagonal(a, val)")
        _check_value("np.fill_diagonal(a, val)", v)
        d = _diagonal(xp, wrap)
        dd = None if dx is None or d is None else _diagonal(dx, wrap)
        if d is None or (dx is not None and dd is None):
            return _fill_diagonal_indexed(x, v, len(rest))
        scalar = isinstance(vp, _REAL) or (isinstance(vp, _COMPLEX) and xp.dtype.kind == "c")
        vf = None if scalar else np.asarray(vp).reshape(-1)
        tail = no_rdata(len(rest))
        if vf is not None and vf.size == 0:  # numpy writes nothing
            return CoDual(None, NO_F), lambda dy: (NO_R, NO_R, NO_R, *tail)
        token = self.save(d)
        if vf is None:
            d.fill(_EXACT.get(type(vp), _same)(vp))
        else:
            _cyclic_write(d, vf)

        def fill_diagonal_pullback(dy: Any) -> tuple[Any, ...]:
            rv = NO_R
            if dd is not None:
                if vf is None or v.dx is None or np.ndim(vp) == 0:
                    rv = self._value_rdata(v, dd)  # (reads x̄[diag] before it is zeroed)
                    dd.fill(0)
                else:  # gather by element of v before zeroing: v may alias x
                    acc = self._gather(dd, vf.size)
                    dd.fill(0)
                    rv = self._value_rdata(v, acc.reshape(np.shape(vp)))
            self.restore(token, into=d)
            return (NO_R, NO_R, rv, *tail)

        return CoDual(None, NO_F), fill_diagonal_pullback

    def _gather(self, g: np.ndarray, m: int) -> np.ndarray:
        """acc[j] = Σ_{k ≡ j mod m} g[k] (the adjoint of `_cyclic_write`), in a scratch buffer."""
        k = g.size
        acc = self.scratch("acc", (m,), g.dtype)
        if m >= k:
            acc[:k] = g
            acc[k:].fill(0)  # (`= 0` would allocate a 0-d array)
            return acc
        q, r = divmod(k, m)
        ADD_REDUCE(g[: q * m].reshape(q, m), 0, None, acc)  # np.sum(..., axis=0, out=acc)
        if r:
            acc[:r] += g[q * m :]
        return acc


def _fill_diagonal_indexed(x: CoDual, v: CoDual, nrest: int) -> tuple[CoDual, Any]:
    """FillDiagonalRule with wrap=True through a fancy index (no strided view holds the
    wrapped diagonals of x)."""
    xp, dx = x.x, x.dx
    vsize = int(np.size(v.x))
    idx = _wrapped_index(xp) if vsize else (np.zeros(0, np.intp),) * 2  # (nothing written)
    old = xp[idx]
    np.fill_diagonal(xp, v.x, wrap=True)
    tail = no_rdata(nrest)

    def fill_diagonal_pullback(dy: Any) -> tuple[Any, ...]:
        rv = NO_R
        if dx is not None:
            g = dx[idx]  # a copy: zeroing x̄[diag] does not change it
            dx[idx] = 0
            if v.dx is not None and vsize:
                acc = np.zeros(vsize, g.dtype)
                np.add.at(acc, np.arange(g.size) % vsize, g)
                rv = _value_rdata(v, acc.reshape(np.shape(v.x)))
        xp[idx] = old
        return (NO_R, NO_R, rv, *tail)

    return CoDual(None, NO_F), fill_diagonal_pullback


def _fill_diagonal_examples() -> list[Any]:
    return [
        example(randn(3, 3), 1.5),  # a Python float
        example(randn(4, 3, seed=1), randn(2, seed=2)),  # v repeated cyclically: 3 = 2 + 1
        example(randn(6, 2, seed=3), randn(3, seed=4), wrap=True),  # wrapped diagonals
        example(randn(3, 3, 3, dtype=np.complex128, seed=5), randn(1, 2, seed=6)),  # 3-d, real v
        example(randn(2, 4, dtype=np.float32, seed=7), np.float32(0.5)),  # a float32 scalar
        example(randn(2, 2, seed=8), randn(2, 3, seed=9)),  # v longer than the diagonal
    ]


build_primitive_rrule.register(
    np.fill_diagonal, InexactArray, Any, Vararg[bool], examples=_fill_diagonal_examples
)(lambda sig: FillDiagonalRule())


# -- np.put, np.place, np.putmask: writes at flat positions -------------------------------------


def _flat_write(
    what: str,
    x: CoDual,
    v: CoDual,
    targets: np.ndarray,
    source: Callable[[int], np.ndarray],
    write: Callable[[], Any],
    nargs: int,
) -> tuple[CoDual, Any]:
    """x.flat[targets[k]] = v.flat[source(v.size)[k]] for each k (done by numpy's `write()`;
    later writes win)  ⇒  v̄.flat[source[k]] += x̄.flat[targets[k]] for each write that
    survived, then x̄.flat[targets] ← 0 and x.flat[targets] ← old."""
    xp, dx = x.x, x.dx
    if dx is None and v.dx is not None:
        raise _lost_write(what)
    _check_value(what, v)
    vsize = int(np.size(v.x))
    if vsize == 0:
        targets = targets[:0]
    idx = np.unravel_index(targets, xp.shape)
    old = xp[idx]  # advanced indexing: a copy
    write()
    tail = no_rdata(nargs - 4)
    kept = None
    if v.dx is not None and targets.size > 1:
        probe = np.full(xp.size, -1, dtype=np.intp)
        order = np.arange(targets.size, dtype=np.intp)
        probe[targets] = order  # (numpy's sequential writes: the last one is kept)
        kept = probe[targets] == order
        kept = None if kept.all() else kept

    def flat_write_pullback(dy: Any) -> tuple[Any, ...]:
        rv = NO_R
        if dx is not None:
            g = dx[idx]  # a copy: zeroing x̄[targets] does not change it
            dx[idx] = 0
            if v.dx is not None and vsize:
                if kept is not None:
                    g = np.where(kept, g, 0)
                acc = np.zeros(vsize, g.dtype)
                np.add.at(acc, source(vsize), g)
                rv = _value_rdata(v, acc.reshape(np.shape(v.x)))
        xp[idx] = old
        return (NO_R, NO_R, NO_R, rv, *tail)  # f, x, the index or mask, v, (mode)

    return CoDual(None, NO_F), flat_write_pullback


def _flat_targets(ind: Any, n: int, mode: str) -> np.ndarray:
    """np.put's flat indices, normalised as numpy does for `mode` (IndexError for 'raise')."""
    t = np.asarray(ind).astype(np.intp, casting="safe").reshape(-1)
    if n == 0 or t.size == 0:
        return t[:0]
    if mode == "wrap":
        return t % n
    if mode == "clip":
        return np.clip(t, 0, n - 1)
    bad = (t < -n) | (t >= n)
    if bad.any():
        raise IndexError(f"index {t[bad][0]} is out of bounds for axis 0 with size {n}")
    return np.where(t < 0, t + n, t)


def put_rrule(
    f: CoDual, a: CoDual, ind: CoDual, v: CoDual, *rest: CoDual, mode: Any = "raise"
) -> tuple[CoDual, Any]:
    """np.put(a, ind, v, mode): a.flat[ind[k]] = v.flat[k % v.size]  ⇒
    v̄.flat[k % v.size] += ā.flat[ind[k]] (the surviving write of a repeated index only),
    ā.flat[ind] ← 0,  a.flat[ind] ← old."""
    if rest:
        mode = rest[0].x
    t = _flat_targets(ind.x, a.x.size, mode)
    return _flat_write(
        "np.put(a, ind, v)",
        a,
        v,
        t,
        lambda m: np.arange(t.size) % m,
        lambda: np.put(a.x, ind.x, v.x, mode=mode),
        4 + len(rest),
    )


def _mask_targets(what: str, a: np.ndarray, mask: Any) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.size != a.size:
        raise ValueError(f"{what}: mask and data must be the same size")
    return np.flatnonzero(mask)


def place_rrule(f: CoDual, arr: CoDual, mask: CoDual, vals: CoDual) -> tuple[CoDual, Any]:
    """np.place(arr, mask, vals): the k-th True of mask gets vals.flat[k % vals.size]  ⇒
    v̄.flat[k % vals.size] += ā.flat[t_k] (t_k: flat position of the k-th True),
    ā.flat[mask] ← 0,  arr.flat[mask] ← old."""
    t = _mask_targets("place", arr.x, mask.x)
    return _flat_write(
        "np.place(arr, mask, vals)",
        arr,
        vals,
        t,
        lambda m: np.arange(t.size) % m,
        lambda: np.place(arr.x, mask.x, vals.x),
        4,
    )


def putmask_rrule(f: CoDual, a: CoDual, mask: CoDual, values: CoDual) -> tuple[CoDual, Any]:
    """np.putmask(a, mask, values): a.flat[p] = values.flat[p % values.size] where mask.flat[p]
    ⇒  v̄.flat[p % values.size] += ā.flat[p],  ā.flat[mask] ← 0,  a.flat[mask] ← old."""
    t = _mask_targets("putmask", a.x, mask.x)
    return _flat_write(
        "np.putmask(a, mask, values)",
        a,
        values,
        t,
        lambda m: t % m,
        lambda: np.putmask(a.x, mask.x, values.x),
        4,
    )


def _put_examples() -> list[Any]:
    return [
        example(randn(5), np.array([0, 3, 0]), randn(3, seed=1)),  # a repeated index
        example(randn(2, 3, seed=2), [1, -1, 7], randn(2, seed=3), mode="wrap"),  # v cycles
        example(randn(4, dtype=np.float32, seed=4), 2, np.float32(1.5)),  # a scalar index
        example(randn(2, 2, dtype=np.complex128, seed=5), [3, 9], randn(2, seed=6), "clip"),
    ]


def _place_examples() -> list[Any]:
    x = randn(2, 3)
    return [
        example(x, x > 0, randn(2, seed=1)),  # vals repeated cyclically
        example(randn(4, dtype=np.complex128, seed=2), np.array([1, 0, 1, 1], bool), 2.5),
        example(randn(3, seed=3), np.array([True, False, True]), randn(2, 2, seed=4)),
    ]


def _putmask_examples() -> list[Any]:
    x = randn(2, 3)
    return [
        example(x, x > 0, randn(4, seed=1)),  # values indexed by position modulo 4
        example(randn(5, dtype=np.float32, seed=2), np.array([1, 0, 1, 1, 0], bool), 0.5),
        example(randn(2, 2, seed=3), np.ones((2, 2), bool), randn(2, 2, seed=4)),
    ]


# The destination pattern is any array: a plain (untraced, maybe integer) destination with a
# traced value is dispatched here and refused with TracingError.
rrule.register(np.put, Array, Any, Any, Vararg[str], examples=_put_examples)(put_rrule)
rrule.register(np.place, Array, Any, Any, examples=_place_examples)(place_rrule)
rrule.register(np.putmask, Array, Any, Any, examples=_putmask_examples)(putmask_rrule)
