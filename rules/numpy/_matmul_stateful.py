"""`MatmulRule`: the stateful rule of np.matmul (and @), np.dot, np.inner and np.outer for
operands of one BLAS dtype (registered in `rules.numpy.matmul`).

    Y = A @ B  ⇒  Ā += Ȳ·Bᴴ,  B̄ += Aᴴ·Ȳ      (ᴴ = ᵀ for real arrays)

with 1-D operands promoted as numpy promotes them (inner(a, b) = a @ bᵀ, outer(a, b) =
a[:, None] @ b[None, :]) and broadcast batch dimensions summed out of the cotangent.
Outputs, output fdata and work buffers come from the rule's pool: after the first call,
forward + pullback allocate nothing. 2-D (and 1-D) operands go through
`BlasRule.gemm_adjoint` (one beta=1 gemm per cotangent, straight into the fdata, C- or
F-ordered without copies), C-ordered real 2-D ones straight through f2py's gemm/gemv/ger
(`_direct_blas`); batched operands through np.matmul into kept buffers, reduced over
broadcast dimensions with `out=`. The `out=` forms write into `out` and restore it in the
pullback (its fdata becomes zero: the old value was overwritten).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import CoDual, TracingError, free_list
from rules._support.arguments import is_active_array
from rules._support.blas_kernels import BlasRule
from rules._support.cotangents import NO_F, NO_R, add_to_fdata_pooled, broadcast_shape

__all__ = ["MatmulRule"]


class _Routines(dict[str, Any]):
    """{"d": d<name>, "f": s<name>} from scipy.linalg.blas, imported on first use (so that
    `import rules` does not import SciPy)."""

    def __init__(self, name: str) -> None:
        super().__init__(d=None, f=None)
        self.name = name

    def __getitem__(self, ch: str) -> Any:
        fn = dict.__getitem__(self, ch)
        if fn is None:
            import scipy.linalg.blas

            fn = self[ch] = getattr(scipy.linalg.blas, {"d": "d", "f": "s"}[ch] + self.name)
        return fn


_GEMM, _GEMV, _GER = _Routines("gemm"), _Routines("gemv"), _Routines("ger")


def _into(target: np.ndarray, result: np.ndarray) -> None:
    """f2py works in place on a contiguous target of the right dtype; should it ever have
    made a copy instead, write the result back rather than lose it."""
    if result is not target and not np.shares_memory(result, target):
        np.copyto(target, result)


def _one_gemm(am: Any, bm: Any, out: Any) -> bool:
    """A product that is one BLAS gemm: matrix·matrix or matrix·vector operands (as
    matmul sees them) of one BLAS dtype, into an output of that dtype."""
    return (
        type(out) is np.ndarray
        and 1 <= am.ndim <= 2
        and 1 <= bm.ndim <= 2
        and am.ndim + bm.ndim > 2
        and out.dtype.char in "fdFD"
        and am.dtype == out.dtype
        and bm.dtype == out.dtype
    )


def _c_ordered_real(g: Any, *arrays: Any) -> bool:
    """Ȳ and every operand/fdata present: C-contiguous, of Ȳ's real float dtype."""
    if type(g) is not np.ndarray or g.dtype.char not in _GEMM or not g.flags.c_contiguous:
        return False
    return all(x is None or (x.dtype == g.dtype and x.flags.c_contiguous) for x in arrays)


def _c_ordered_real_2d(g: Any, *arrays: Any) -> bool:
    """Ȳ and every operand/fdata present: 2-D, C-contiguous, one real float dtype."""
    if type(g) is not np.ndarray or g.ndim != 2 or g.dtype.char not in _GEMM:
        return False
    return (
        all(
            x is None or (x.ndim == 2 and x.dtype == g.dtype and x.flags.c_contiguous)
            for x in arrays
        )
        and g.flags.c_contiguous
    )


_NAMES = {"matmul": "np.matmul", "dot": "np.dot", "inner": "np.inner", "outer": "np.outer"}


def _promote(x: np.ndarray, first: bool) -> np.ndarray:
    """numpy's promotion of a 1-D matmul operand: a row (first) or a column (second)."""
    if x.ndim != 1:
        return x
    return x[None, :] if first else x[:, None]


def _out_shape(a: np.ndarray, b: np.ndarray) -> tuple[int, ...] | None:
    """np.matmul's result shape, or None when numpy would raise."""
    if a.ndim == 0 or b.ndim == 0:
        return None
    A, B = _promote(a, True), _promote(b, False)
    if A.shape[-1] != B.shape[-2]:
        return None
    try:
        batch = broadcast_shape(A.shape[:-2], B.shape[:-2])
    except ValueError:
        return None
    core = (() if a.ndim == 1 else (A.shape[-2],)) + (() if b.ndim == 1 else (B.shape[-1],))
    return batch + core


class MatmulRule(BlasRule):
    """`kind(a, b)` for kind in matmul, dot, inner, outer: y = A @ B on matmul views.

    Pullback (Ȳ the output cotangent; 1-D operands promoted, batch dims summed):
        Ā += Ȳ·Bᴴ,   B̄ += Aᴴ·Ȳ;   with out=: then Ō ← 0 and out ← out_old.
    """

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.name = _NAMES[kind]
        self._pairs: dict[Any, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._direct = kind in ("matmul", "dot")

    def _views(self, x: Any, second: bool) -> Any:
        """The matmul operand (or its fdata) that `kind` makes of argument x."""
        if x is None:
            return None
        if self.kind == "outer":
            return x[None, :] if second else x[:, None]
        if self.kind == "inner" and second and x.ndim == 2:
            return x.T
        return x

    def _forward(self, a: np.ndarray, b: np.ndarray, am: Any, bm: Any, out: np.ndarray) -> None:
        if self.kind != "outer" and _one_gemm(am, bm, out):
            # A matrix product by scipy's BLAS, as the pullback's (`gemm_adjoint`): see
            # `_direct_blas` on mixing numpy's and scipy's thread pools.
            o = out if out.ndim == 2 else (out[None, :] if am.ndim == 1 else out[:, None])
            self.gemm_acc(o, 1.0, _promote(am, True), "N", _promote(bm, False), "N", beta=0.0)
        elif self.kind == "dot" and (a.ndim > 2 or b.ndim > 2):
            np.dot(a, b, out=out)  # (N-d dot is not matmul)
        elif self.kind == "dot":  # up to 2-D they agree; np.dot copies strided operands
            np.matmul(a, b, out=out)
        elif self.kind == "outer":
            np.multiply(am, bm, out=out)
        else:
            np.matmul(am, bm, out=out)

    def __call__(self, f: CoDual, a: CoDual, b: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        if not kwargs and self._direct:
            fast = self._direct_blas(a, b)
            if fast is not None:
                return fast
        o = kwargs.pop("out", None)
        if isinstance(o, tuple):
            o = o[0]
        if kwargs:
            raise NotImplementedError(
                f"{self.name}: keyword arguments {sorted(kwargs)} have no rule; call it without "
                "them (cast the operands first for dtype=)."
            )
        A, B = a.x, b.x
        shape: tuple[int, ...] | None
        if (
            o is None and A.ndim == 2 and 1 <= B.ndim <= 2 and self.kind in ("matmul", "dot")
            and A.dtype == B.dtype and A.shape[1] == B.shape[0]
        ):  # fmt: skip
            am, bm, shape, dt = A, B, (A.shape[0], *B.shape[1:]), A.dtype  # (the common case)
        else:
            am, bm = self._views(A, False), self._views(B, True)
            shape = _out_shape(am, bm)
            if shape is None:
                f.x(A, B)  # numpy's own error for these shapes
                raise ValueError(
                    f"{self.name}: operands of shapes {A.shape}, {B.shape} do not match"
                )
            dt = np.result_type(A, B)
        state: Any
        if o is not None:
            if not isinstance(o, CoDual):
                o = CoDual(o, None)
            if o.dx is None and (is_active_array(a) or is_active_array(b)):
                raise TracingError(
                    f"{self.name}(..., out=...) writes traced values into an untraced array; "
                    "make the destination traced (e.g. np.zeros_like of a traced array)."
                )
            if self.kind == "dot" and not (o.x.flags.c_contiguous and o.x.dtype == dt):
                raise ValueError(  # numpy's own error (np.matmul takes any out= layout)
                    "output array is not acceptable (must have the right datatype, number of "
                    "dimensions, and be a C-Array)"
                )
            if np.may_share_memory(o.x, A) or np.may_share_memory(o.x, B):
                raise NotImplementedError(
                    f"{self.name}: out= overlapping an operand has no rule (the pullback needs "
                    "the operands); write into a separate array."
                )
            state = self.save_like(o.x)
            self._forward(A, B, am, bm, o.x)
            y = CoDual(o.x, o.dx)
        elif shape == ():
            buf = self.scratch("y0", (), dt)
            self._forward(A, B, am, bm, buf)
            y, state = CoDual(buf[()], NO_F), None
        else:
            ytok, dtok = self.push(shape, dt), self.push(shape, dt)
            dtok.buffer.fill(0)
            self._forward(A, B, am, bm, ytok.buffer)
            y, state = CoDual(ytok.buffer, dtok.buffer), (ytok, dtok)

        def matmul_pullback(dy: Any) -> tuple[Any, ...]:
            g = y.dx
            if isinstance(g, np.ndarray) and (is_active_array(a) or is_active_array(b)):
                self._adjoint(g if g.ndim else g[()], am, a, bm, b)
            elif shape == () and (is_active_array(a) or is_active_array(b)):
                self._adjoint(dy, am, a, bm, b)
            if o is not None:
                if isinstance(o.dx, np.ndarray):
                    o.dx.fill(0)
                self.restore_like(state[0], state[1], o.x)
            elif state is not None:
                self.pop(state[1])
                self.pop(state[0])
            return (NO_R, NO_R, NO_R)

        return y, matmul_pullback

    def _direct_blas(self, a: CoDual, b: CoDual) -> tuple[CoDual, Any] | None:
        """The hot case, decided once in the forward pass: Y = A·B or y = A·b for C-ordered
        real float operands (and fdata), non-empty. The output and its fdata are a pooled
        pair (the fdata zero whenever it is in the pool); the pullback is two BLAS calls
        straight into the fdata (C-ordered matrices go to BLAS as their F-ordered
        transposes), then clears Ȳ and returns the pair:

            matrix:  Āᵀ += B·Ȳᵀ (gemm),  B̄ᵀ += Ȳᵀ·A (gemm)
            vector:  Āᵀ += b·ȳᵀ (ger),   b̄ += Aᵀ·ȳ (gemv)

        Returns None when the call is not of this kind (the general path handles it).
        """
        A, B = a.x, b.x
        if type(A) is not np.ndarray or type(B) is not np.ndarray or A.ndim != 2:
            return None
        dt = A.dtype
        ch = dt.char
        if ch not in _GEMM or B.dtype != dt or not (A.flags.c_contiguous and B.flags.c_contiguous):
            return None
        da, db = a.dx, b.dx
        if type(da) is not np.ndarray:
            da = None
        elif not (da.flags.c_contiguous and da.dtype == dt):
            return None
        if type(db) is not np.ndarray:
            db = None
        elif not (db.flags.c_contiguous and db.dtype == dt):
            return None
        m, k = A.shape
        if B.ndim == 2:
            if B.shape[0] != k:
                return None
            shape: tuple[int, ...] = (m, B.shape[1])
        elif B.ndim == 1 and B.shape[0] == k:
            shape = (m,)
        else:
            return None
        if not (m and k and shape[-1]):
            return None
        key = (shape, ch)
        free = free_list(self._pairs, key)  # (bounded: at most POOL_KEYS shapes kept)
        y, g = free.pop() if free else (np.empty(shape, dt), np.zeros(shape, dt))
        # The product by scipy's BLAS, as the pullback's: numpy and scipy each bundle an
        # OpenBLAS with its own thread pool, and alternating the two makes their idle
        # threads spin against each other (4x slower at 512x512 with 2 threads).
        if len(shape) == 2:  # Yᵀ = Bᵀ·Aᵀ on the F-ordered transposes: Y itself, C-ordered
            yt = y.T
            _into(yt, _GEMM[ch](1.0, B.T, A.T, 0.0, yt, 0, 0, 1))
        else:  # y = (Aᵀ)ᵀ·b
            _into(y, _GEMV[ch](1.0, A.T, B, 0.0, y, 0, 1, 0, 1, 1, 1))
        live = [True]

        def matmul_pullback(dy: Any) -> tuple[Any, ...]:
            if not live:
                raise RuntimeError(f"{self.name}: pullback called twice")
            live.clear()
            if len(shape) == 2:
                gemm = _GEMM[ch]
                if da is not None:
                    t = da.T
                    _into(t, gemm(1.0, B.T, g.T, 1.0, t, 1, 0, 1))
                if db is not None:
                    t = db.T
                    _into(t, gemm(1.0, g.T, A.T, 1.0, t, 0, 1, 1))
            else:
                if da is not None:
                    t = da.T
                    _into(t, _GER[ch](1.0, B, g, a=t, overwrite_a=1))
                if db is not None:
                    _into(db, _GEMV[ch](1.0, A.T, g, beta=1.0, y=db, overwrite_y=1))
            g.fill(0)
            free.append((y, g))
            return (NO_R, NO_R, NO_R)

        return CoDual(y, g), matmul_pullback

    def _adjoint(self, g: Any, am: np.ndarray, a: CoDual, bm: np.ndarray, b: CoDual) -> None:
        """Ā += Ȳ·Bᴴ, B̄ += Aᴴ·Ȳ (on the matmul views `am`, `bm` of the operands)."""
        if am.size == 0 or bm.size == 0:
            # An empty operand: Ā and B̄ are empty, or sums over an empty axis, i.e. zero
            # (and f2py's BLAS wrappers reject zero-size dimensions).
            return
        da = self._views(a.dx, False) if is_active_array(a) else None
        db = self._views(b.dx, True) if is_active_array(b) else None
        if am.ndim == 2 and bm.ndim == 1 and _c_ordered_real(g, am, bm, da, db):
            # y = A·b:  Āᵀ += b·ȳᵀ (one ger),  b̄ += Aᵀ·ȳ (one gemv, beta=1).
            ger, gemv = _GER[g.dtype.char], _GEMV[g.dtype.char]
            if da is not None:
                _into(da.T, ger(1.0, bm, g, a=da.T, overwrite_a=1))
            if db is not None:
                _into(db, gemv(1.0, am.T, g, beta=1.0, y=db, overwrite_y=1))
            return
        if _c_ordered_real_2d(g, am, bm, da, db):
            # The common case, straight to BLAS (one gemm per adjoint, beta=1 into the
            # fdata; C-ordered matrices are passed as their F-ordered transposes):
            # Āᵀ += B·Ȳᵀ,  B̄ᵀ += Ȳᵀ·A.
            gemm = _GEMM[g.dtype.char]
            if da is not None:
                _into(da.T, gemm(1.0, bm.T, g.T, beta=1.0, c=da.T, trans_a=1, overwrite_c=1))
            if db is not None:
                _into(db.T, gemm(1.0, g.T, am.T, beta=1.0, c=db.T, trans_b=1, overwrite_c=1))
            return
        if am.ndim == 1 and bm.ndim == 1:  # y = Σ a·b: ā += ȳ·conj(b), b̄ += ȳ·conj(a)
            if not isinstance(g, (int, float, complex, np.number)) or g == 0:
                return
            if da is not None:
                self.axpy(da, g, bm, conj=True)
            if db is not None:
                self.axpy(db, g, am, conj=True)
            return
        A, B = _promote(am, True), _promote(bm, False)
        G = g
        if am.ndim == 1:
            G = np.expand_dims(G, -2)
        if bm.ndim == 1:
            G = np.expand_dims(G, -1)
        dA = None if da is None else _promote(da, True)
        dB = None if db is None else _promote(db, False)
        if A.ndim <= 2 and B.ndim <= 2:
            self.gemm_adjoint(G, 1.0, False, A, dA, "N", B, dB, "N")
            return
        if dA is not None:  # Ā += Σ_batch Ȳ·Bᴴ
            self._batched_acc(dA, G, self._adj(B, "b"), "ga")
        if dB is not None:  # B̄ += Σ_batch Aᴴ·Ȳ
            self._batched_acc(dB, self._adj(A, "a"), G, "gb")

    def _adj(self, x: np.ndarray, name: str) -> np.ndarray:
        """xᴴ over the last two axes: a view for real x, a kept conjugated copy for complex."""
        if x.dtype.kind == "c":
            buf = self.scratch("conj" + name, x.shape, x.dtype)
            np.conjugate(x, out=buf)
            x = buf
        return np.swapaxes(x, -1, -2)

    def _batched_acc(self, t: np.ndarray, x: np.ndarray, y: np.ndarray, name: str) -> None:
        """T += (x @ y) summed over the batch dimensions T was broadcast along."""
        full_shape = (*broadcast_shape(x.shape[:-2], y.shape[:-2]), x.shape[-2], y.shape[-1])
        full = self.scratch(name, full_shape, t.dtype)
        np.matmul(x, y, out=full)
        add_to_fdata_pooled(self, name + "r", t, full)
