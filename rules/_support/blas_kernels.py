"""Allocation-free linear-algebra kernels shared by the BLAS and matmul rules.

`BlasRule` is a `StatefulRRule` whose methods do the linear algebra of a pullback
*in place*, on pooled buffers, without numpy temporaries:

* `gemm_acc(T, s, X, ox, Y, oy, beta, tT)`: ``T ← beta·T + tT(s·ox(X)·oy(Y))`` with one
  BLAS gemm (``beta=1`` accumulates into fdata). Operand ops are ``"N"`` (as is),
  ``"T"`` (transpose), ``"C"`` (conjugate transpose) and ``"R"`` (conjugate only).
  A C-contiguous array is handed to BLAS as its F-contiguous transpose (flipping
  the op), a C-contiguous target by transposing the whole product, so neither is
  copied; only what BLAS cannot express (a strided array, a conjugate-only op)
  goes through a scratch buffer that the rule keeps.
* `axpy`, `scal`, `dot`: level-1 BLAS on flat views of contiguous arrays, with
  the same scratch fallback; scalars for ufuncs live in a kept 0-d array (a
  Python scalar operand would allocate one on every call).
* `save_like`/`restore_like`, `push_f`: pooled copies and outputs in the memory
  layout of their source (F-ordered outputs, as f2py returns them).

Conventions: ops and cotangents follow the JAX/PyTorch rule for complex values,
``x̄ = conj(∂y/∂x)·ȳ`` (docs/conventions-linalg.md), so every real formula holds
with ᵀ read as ᴴ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit import SaveToken, StatefulRRule
from rules._support.layout import flat_view

__all__ = [
    "ADJ",
    "CJ",
    "TR",
    "BlasRule",
    "cj",
    "kernels",
]

#: transpose, conjugate and conjugate-transpose of an op
TR = {"N": "T", "T": "N", "C": "R", "R": "C"}
CJ = {"N": "R", "R": "N", "T": "C", "C": "T"}
ADJ = {"N": "C", "C": "N", "T": "R", "R": "T"}
_CODE = {"N": 0, "T": 1, "C": 2}
_REAL_OP = {"N": "N", "T": "T", "C": "T", "R": "N"}


def cj(s: Any) -> Any:
    """conj(s) of a scalar, as a Python number (numpy scalar ufuncs allocate 0-d arrays)."""
    if isinstance(s, (complex, np.complexfloating)):
        return complex(s).conjugate()
    return float(s)


def _flat(x: np.ndarray, order: str | None = None) -> np.ndarray:
    """A 1-D view of a contiguous array in memory order `order` ('C' or 'F'; default: its
    own), never a copy (BLAS writes through it); ValueError if `x` is not so laid out."""
    f = x.flags
    if order is not None and order != _order(x) and not (f.c_contiguous and f.f_contiguous):
        raise ValueError(f"rulekit internal error: strides {x.strides} are not {order}-ordered")
    return flat_view(x)  # (C- and F-ordered at once: one long axis, both orders agree)


def _order(x: np.ndarray) -> str | None:
    """'C' or 'F' for a contiguous array (C when both), None for a strided one."""
    f = x.flags
    if f.c_contiguous:
        return "C"
    return "F" if f.f_contiguous else None


class _Kernels:
    """The BLAS routines of one dtype."""

    def __init__(self, dtype: np.dtype) -> None:
        names = ("gemm", "axpy", "scal", "dotc" if dtype.kind == "c" else "dot", "trmm", "trsm")
        from scipy.linalg import get_blas_funcs  # (not at import: `import rules` stays light)

        self.gemm, self.axpy, self.scal, self.dot, self.trmm, self.trsm = get_blas_funcs(
            names, dtype=dtype
        )
        self.symm = get_blas_funcs("symm", dtype=dtype)
        self.complex = dtype.kind == "c"
        self.scalar: Callable[[Any], Any] = complex if self.complex else float


_KERNELS: dict[Any, _Kernels] = {}


def kernels(dtype: Any) -> _Kernels:
    """The BLAS routines for `dtype` (an np.dtype, or anything np.dtype accepts)."""
    k = _KERNELS.get(dtype)
    if k is None:
        k = _KERNELS[dtype] = _Kernels(np.dtype(dtype))
    return k


class BlasRule(StatefulRRule):
    """A stateful rule with in-place BLAS kernels (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._masks: dict[tuple[int, bool, bool], np.ndarray] = {}
        self._kept: dict[tuple[str, tuple[int, ...], Any], np.ndarray] = {}

    # -- buffers ------------------------------------------------------------------

    def scratch(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """`StatefulRRule.scratch`, one buffer per (name, shape, dtype).

        A kernel may need the same work buffer at several shapes within one pullback
        (gemm operands of different shapes); keying by shape keeps each one warm
        instead of reallocating it on every call. Bounded: past 64 buffers, the
        kept ones are forgotten (they are re-made at the next use).
        """
        key = (name, shape, dtype)
        buf = self._kept.get(key)
        if buf is None:
            if len(self._kept) >= 64:
                self._kept.clear()
            buf = self._kept[key] = np.empty(shape, dtype)
        return buf

    def fscratch(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A kept Fortran-ordered work buffer."""
        return self.scratch(name + ":F", shape[::-1], dtype).T

    def scratch_like(self, name: str, x: np.ndarray, dtype: Any = None) -> np.ndarray:
        """A kept work buffer with `x`'s shape and memory order (C when `x` is strided)."""
        dt = x.dtype if dtype is None else dtype
        if _order(x) == "F":
            return self.fscratch(name, x.shape, dt)
        return self.scratch(name + ":C", x.shape, dt)

    def push_f(self, shape: tuple[int, ...], dtype: Any) -> tuple[SaveToken, np.ndarray]:
        """Push a pooled Fortran-ordered buffer (for an output as f2py returns it)."""
        tok = self.push(tuple(shape[::-1]), dtype)
        return tok, tok.buffer.T

    def save_like(self, x: np.ndarray) -> tuple[SaveToken, np.ndarray]:
        """Push a pooled copy of `x` in `x`'s memory order; returns (token, the copy)."""
        if _order(x) == "F":
            tok, buf = self.push_f(x.shape, x.dtype)
        else:
            tok = self.push(x.shape, x.dtype)
            buf = tok.buffer
        np.copyto(buf, x)
        return tok, buf

    def restore_like(self, tok: SaveToken, buf: np.ndarray, into: np.ndarray) -> None:
        """Copy a `save_like` copy back into `into` and pop it."""
        np.copyto(into, buf)
        self.pop(tok)

    def scalar0d(self, s: Any, dtype: Any) -> np.ndarray:
        """`s` in a kept 0-d array (ufunc operands that allocate nothing)."""
        buf = self.scratch("_k_s0", (), dtype)
        buf[...] = s
        return buf

    def tri_mask(self, n: int, lower: bool, unit: bool) -> np.ndarray:
        """The (n, n) boolean mask of the triangle a triangular routine reads (kept)."""
        key = (n, lower, unit)
        m = self._masks.get(key)
        if m is None:
            if len(self._masks) > 8:
                self._masks.clear()
            k = -1 if unit else 0
            m = np.tri(n, k=k, dtype=bool) if lower else np.tri(n, k=k, dtype=bool).T.copy()
            self._masks[key] = m
        return m

    # -- level 1 ------------------------------------------------------------------

    def dot(self, x: np.ndarray, y: np.ndarray) -> Any:
        """Σ conj(x)·y over two arrays of the same shape (a Python float or complex)."""
        if x.size == 0:
            return 0.0
        ox, oy = _order(x), _order(y)
        if ox is None:
            ox = oy or "C"
            x = self._copy_in("_k_dotx", x, ox)
        if oy != ox:
            y = self._copy_in("_k_doty", y, ox)
        return kernels(x.dtype).dot(_flat(x, ox), _flat(y, ox))

    def _copy_in(self, name: str, x: np.ndarray, order: str, conj: bool = False) -> np.ndarray:
        """A kept copy of `x` (conjugated if `conj`) in memory order `order`."""
        if order == "F":
            buf = self.fscratch(name, x.shape, x.dtype)
        else:
            buf = self.scratch(name + ":C", x.shape, x.dtype)
        if conj:
            np.conjugate(x, out=buf)
        else:
            np.copyto(buf, x)
        return buf

    def axpy(self, y: np.ndarray, s: Any, x: np.ndarray, conj: bool = False) -> None:
        """y += s·x (s·conj(x) when `conj`), in place, for arrays of the same shape."""
        if y.size == 0 or s == 0:
            return
        k = kernels(y.dtype)
        s = k.scalar(s)
        conj = conj and k.complex
        oy = _order(y)
        if conj or oy is None or _order(x) != oy:
            x = self._copy_in("_k_axpy", x, oy or "C", conj)
        if oy is None:
            np.multiply(x, self.scalar0d(s, y.dtype), out=x)
            np.add(y, x, out=y)
            return
        k.axpy(_flat(x, oy), _flat(y, oy), y.size, s)

    def scal(self, x: np.ndarray, s: Any) -> None:
        """x *= s, in place."""
        if x.size == 0 or s == 1:
            return
        if s == 0:  # C̄ ← 0·C̄ is zero, even where C̄ holds inf/NaN
            x.fill(0)
            return
        k = kernels(x.dtype)
        s = k.scalar(s)
        order = _order(x)
        if order is None:
            np.multiply(x, self.scalar0d(s, x.dtype), out=x)
        else:
            k.scal(s, _flat(x, order))

    # -- level 3 ------------------------------------------------------------------

    def operand(self, name: str, x: np.ndarray, op: str) -> tuple[np.ndarray, int]:
        """(F-contiguous array, BLAS trans code) computing op(x), copying only if BLAS cannot."""
        f = x.flags
        if f.f_contiguous and op != "R":
            return x, _CODE[op]
        if f.c_contiguous and TR[op] != "R":
            return x.T, _CODE[TR[op]]
        v = x if op in ("N", "R") else x.T
        buf = self.fscratch(name, v.shape, x.dtype)
        if op in ("C", "R"):
            np.conjugate(v, out=buf)
        else:
            np.copyto(buf, v)
        return buf, 0

    def gemm_acc(
        self,
        t: np.ndarray,
        s: Any,
        x: np.ndarray,
        ox: str,
        y: np.ndarray,
        oy: str,
        beta: Any = 1.0,
        tt: str = "N",
    ) -> None:
        """T ← beta·T + tt(s·ox(X)·oy(Y)) in place with one gemm (`tt` as the ops)."""
        k = kernels(t.dtype)
        if tt != "N":
            if tt in ("C", "R"):
                s, ox, oy = cj(s), CJ[ox], CJ[oy]
            if tt in ("T", "C"):
                (x, ox), (y, oy) = (y, TR[oy]), (x, TR[ox])
        if not k.complex:
            ox, oy = _REAL_OP[ox], _REAL_OP[oy]
        if t.size == 0:
            return
        inner = x.shape[0] if ox in ("T", "C") else x.shape[1]
        if inner == 0 or s == 0:
            if beta != 1:
                self.scal(t, beta)
            return
        tf = t.flags
        if tf.f_contiguous:
            tgt = t
        elif tf.c_contiguous:
            tgt = t.T
            (x, ox), (y, oy) = (y, TR[oy]), (x, TR[ox])
        else:  # a strided target: compute into a kept buffer, then add
            tgt = self.fscratch("_k_acc", t.shape, t.dtype)
            self.gemm_acc(tgt, s, x, ox, y, oy, beta=0.0)
            if beta == 0:
                np.copyto(t, tgt)
            else:
                if beta != 1:
                    self.scal(t, beta)
                np.add(t, tgt, out=t)
            return
        xb, cx = self.operand("_k_gx", x, ox)
        yb, cy = self.operand("_k_gy", y, oy)
        r = k.gemm(k.scalar(s), xb, yb, k.scalar(beta), tgt, cx, cy, 1)
        if r is not tgt:  # never expected: f2py works in place on an F-contiguous target
            np.copyto(tgt, r)

    def conj_inplace(self, x: np.ndarray) -> None:
        """x ← conj(x) (a no-op for real arrays)."""
        if x.dtype.kind == "c":
            np.conjugate(x, out=x)

    def gemm_adjoint(
        self,
        g: np.ndarray,
        alpha: Any,
        want_alpha: bool,
        a: np.ndarray,
        da: np.ndarray | None,
        oa: str,
        b: np.ndarray,
        db: np.ndarray | None,
        ob: str,
    ) -> Any:
        """Pull C̄ = g back through C = α·P·Q (+ …), P = oa(a), Q = ob(b); returns ᾱ or None.

            P̄ = conj(α)·C̄·Qᴴ,  Q̄ = conj(α)·Pᴴ·C̄,  ᾱ = ⟨P·Q, C̄⟩

        `da += oa(P̄)` and `db += ob(Q̄)` (the cotangent of a through its op) are one
        beta=1 gemm each. For ᾱ, W = ob(Pᴴ·C̄) is formed in a kept buffer instead
        (ᾱ = ⟨b, W⟩, then db += conj(α)·W): no extra GEMM.
        """
        sa = cj(alpha)
        if not want_alpha:
            if da is not None:
                self.gemm_acc(da, sa, g, "N", b, ADJ[ob], tt=oa)
            if db is not None:
                self.gemm_acc(db, sa, a, ADJ[oa], g, "N", tt=ob)
            return None
        if db is not None or da is None:
            w = self.scratch_like("_w", b if db is None else db)
            self.gemm_acc(w, 1.0, a, ADJ[oa], g, "N", beta=0.0, tt=ob)
            abar, scale = self.dot(b, w), sa
            if ob == "C":  # W = (Pᴴ C̄)ᴴ: ⟨Bᴴ, PᴴC̄⟩ = conj⟨B, W⟩ and B̄ = α·W
                abar, scale = cj(abar), alpha
            if db is not None:
                self.axpy(db, scale, w)
            if da is not None:
                self.gemm_acc(da, sa, g, "N", b, ADJ[ob], tt=oa)
            return abar
        w = self.scratch_like("_w", da)
        self.gemm_acc(w, 1.0, g, "N", b, ADJ[ob], beta=0.0, tt=oa)
        abar, scale = self.dot(a, w), sa
        if oa == "C":
            abar, scale = cj(abar), alpha
        self.axpy(da, scale, w)
        return abar
