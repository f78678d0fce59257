"""Stateful rules for level-3 BLAS: gemm, syrk, trmm, trsm (registered in `rules.blas`).

Each routine writes into one argument (gemm/syrk: `c`, trmm/trsm: `b`). When f2py
works on it in place (overwrite flag set, an F-contiguous array of the routine's
dtype) the rule does too: the forward pushes the old value into a pooled
buffer and the pullback turns that argument's fdata into the cotangent of its
old value and pops the old value back (the mutation convention, docs/concepts.md).
Otherwise the primal
returns a new F-ordered array, and so does the rule, from its pool. Ops follow
the BLAS flags (N, T, C = conjugate transpose); complex cotangents follow JAX
(x̄ = conj(∂y/∂x)·ȳ), so every formula below holds for real arrays with ᴴ = ᵀ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import get_blas_funcs

from rulekit import CoDual
from rules._support.arguments import is_active_array, is_active_scalar
from rules._support.blas_kernels import ADJ, TR, cj
from rules._support.layout import flat_view
from rules.blas._routine import Routine, f2py_inplace, op_of

__all__ = ["GemmRule", "SyrkRule", "TriRule"]


def _flat_diag(x: np.ndarray) -> np.ndarray:
    """A writable view of the diagonal of a contiguous square matrix (never a copy)."""
    return flat_view(x)[:: x.shape[0] + 1]


class GemmRule(Routine):
    """`c = ?gemm(alpha, a, b, beta, c, trans_a, trans_b, overwrite_c)`: C ← α·op(A)·op(B) + β·C.

    Pullback, with C̄ the cotangent of C after the call (for real arrays; complex: ᴴ, conj α):

        Ā += α C̄ Bᵀ,   B̄ += α Aᵀ C̄,   ᾱ = ⟨C̄, AB⟩,   β̄ = ⟨C̄, C_old⟩,   C̄ ← β C̄,   C ← C_old

    (with op(A), op(B) in place of A, B, and Ā, B̄ mapped back through the ops).
    Ā and B̄ are each one gemm with beta=1 into the fdata; ᾱ reuses the product
    formed for B̄ (`BlasRule.gemm_adjoint`); C̄ is scaled in place, C_old comes
    back from the pool. C-ordered operands are passed to BLAS as their
    F-ordered transposes, so nothing is copied.
    """

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        bd = self.bind(args, kwargs)
        alpha, a, b, beta, c = (bd.cd(n) for n in ("alpha", "a", "b", "beta", "c"))
        assert alpha is not None and a is not None and b is not None
        oa, ob = op_of(bd.get("trans_a", 0), "trans_a"), op_of(bd.get("trans_b", 0), "trans_b")
        dt = self.dtype
        for name, x in (("a", a), ("b", b)):
            self.check_io(self.name, name, x, dt, 2)
        self.check_io(self.name, "c", c, dt, 2)
        A, B = a.x, b.x
        m, ka = A.shape[::-1] if oa != "N" else A.shape
        kb, n = B.shape[::-1] if ob != "N" else B.shape
        if ka != kb or (c is not None and c.x.shape != (m, n)):
            raise ValueError(
                f"{self.name}: shapes do not match: op(a) is {(m, ka)}, op(b) is {(kb, n)}"
                + ("" if c is None else f", c is {c.x.shape}")
            )
        al, be = self.scalar(alpha, 1.0), self.scalar(beta, 0.0)
        inplace = c is not None and bool(bd.get("overwrite_c", 0)) and f2py_inplace(c.x, dt, 2)
        others = (
            is_active_array(a)
            or is_active_array(b)
            or is_active_scalar(alpha)
            or is_active_scalar(beta)
        )
        target, out, state = self.begin_output(
            self.name, c, "c", inplace, (m, n), dt, others, fill=be != 0, reads=(("a", a), ("b", b))
        )
        self.gemm_acc(target, al, A, oa, B, ob, beta=be)

        def gemm_pullback(dy: Any) -> tuple[Any, ...]:
            g = out.dx
            abar = bbar = None
            if g is not None:
                da, db = a.dx if is_active_array(a) else None, b.dx if is_active_array(b) else None
                abar = self.gemm_adjoint(g, al, is_active_scalar(alpha), A, da, oa, B, db, ob)
                c_old = None if c is None else (state[1] if inplace else c.x)
                if is_active_scalar(beta):
                    bbar = 0.0 if c_old is None else self.dot(c_old, g)
                if inplace:
                    self.scal(g, cj(be))
                elif is_active_array(c):
                    self.axpy(c.dx, cj(be), g)
            self.end_output(state, c, inplace)
            return bd.rdata(alpha=abar, beta=bbar)

        return out, gemm_pullback


class SyrkRule(Routine):
    """`c = ?syrk(alpha, a, beta, c, trans, lower, overwrite_c)`: tri(C) ← α·P·Pᵀ + β·tri(C).

    P = A (trans=0) or Aᵀ; only the `lower` (or upper) triangle of C is written, the
    other keeps C's old value (zeros when c is not given). With Gt = tri(C̄) and
    S = Gt + Gtᵀ (symmetric):

        P̄ = conj(α)·S·conj(P),   ᾱ = ½⟨P, S·conj(P)⟩,   β̄ = ⟨tri(C_old), Gt⟩,
        then tri(C̄) ← conj(β)·tri(C̄) and C ← C_old

    S is a kept copy of C̄ with a doubled diagonal; ?symm reads its one triangle.
    """

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        bd = self.bind(args, kwargs)
        alpha, a, beta, c = (bd.cd(n) for n in ("alpha", "a", "beta", "c"))
        assert alpha is not None and a is not None
        dt = self.dtype
        self.check_io(self.name, "a", a, dt, 2)
        self.check_io(self.name, "c", c, dt, 2)
        op = op_of(bd.get("trans", 0))
        if self.k.complex and op == "C":
            raise ValueError(f"{self.name}: trans must be 0 or 1 for complex syrk")
        op = "N" if op == "N" else "T"
        lower = bool(bd.get("lower", 0))
        A = a.x
        n, _kk = A.shape if op == "N" else A.shape[::-1]
        if c is not None and c.x.shape != (n, n):
            raise ValueError(f"{self.name}: c has shape {c.x.shape}, expected {(n, n)}")
        al, be = self.scalar(alpha, 1.0), self.scalar(beta, 0.0)
        inplace = c is not None and bool(bd.get("overwrite_c", 0)) and f2py_inplace(c.x, dt, 2)
        others = is_active_array(a) or is_active_scalar(alpha) or is_active_scalar(beta)
        target, out, state = self.begin_output(
            self.name, c, "c", inplace, (n, n), dt, others, fill=True, reads=(("a", a),)
        )
        if n:
            ab, code = self.operand("a", A, op)
            syrk = get_blas_funcs("syrk", dtype=dt)
            syrk(al, ab, beta=be, c=target, trans=code, lower=lower, overwrite_c=1)

        def syrk_pullback(dy: Any) -> tuple[Any, ...]:
            g = out.dx
            abar = bbar = None
            if g is not None and n:
                mask = self.tri_mask(n, lower, False)
                if is_active_array(a) or is_active_scalar(alpha):
                    abar = self._p_bar(
                        g, lower, al, A, a.dx if is_active_array(a) else None, op, alpha
                    )
                c_old = None if c is None else (state[1] if inplace else c.x)
                if is_active_scalar(beta):
                    bbar = 0.0
                    if c_old is not None:
                        z = self.scratch_like("z", g)
                        z.fill(0)
                        np.copyto(z, g, where=mask)
                        bbar = self.dot(c_old, z)
                cbe = self.scalar0d(cj(be), dt)
                if inplace:
                    np.multiply(g, cbe, out=g, where=mask)
                elif is_active_array(c):
                    z = self.scratch_like("z", g)
                    np.copyto(z, g)
                    np.multiply(z, cbe, out=z, where=mask)
                    self.axpy(c.dx, 1.0, z)
            self.end_output(state, c, inplace)
            return bd.rdata(alpha=abar, beta=bbar)

        return out, syrk_pullback

    def _p_bar(
        self, g: np.ndarray, lower: bool, al: Any, A: np.ndarray, da: Any, op: str, alpha: Any
    ) -> Any:
        """Ā += conj(α)·conj(W) with W = conj(S)·A (trans 0) or A·conj(S); returns ᾱ or None."""
        n = g.shape[0]
        s = self.fscratch("s", (n, n), g.dtype)
        np.copyto(s, g)
        d = _flat_diag(s)
        np.add(d, d, out=d)
        self.conj_inplace(s)  # ?symm reads the `lower` triangle of s: conj(S) there
        side = 0 if op == "N" else 1
        if not is_active_scalar(alpha):
            self.conj_inplace(da)  # conj(Ā) += α·conj(S)·A, then conjugate back
            self._symm_acc(da, al, s, lower, A, side, 1.0)
            self.conj_inplace(da)
            return None
        w = self.scratch_like("w", A)
        self._symm_acc(w, 1.0, s, lower, A, side, 0.0)
        self.conj_inplace(w)
        abar = 0.5 * self.dot(A, w)
        if da is not None:
            self.axpy(da, cj(al), w)
        return abar

    def _symm_acc(
        self,
        t: np.ndarray,
        s: Any,
        sym: np.ndarray,
        lower: bool,
        y: np.ndarray,
        side: int,
        beta: Any,
    ) -> None:
        """T ← beta·T + s·S·Y (side 0) or s·Y·S (side 1), S symmetric in `sym`'s triangle."""
        if not t.flags.f_contiguous:
            if t.flags.c_contiguous:  # Tᵀ = s·Yᵀ·S (side 0) or s·S·Yᵀ: S is symmetric
                self._symm_acc(t.T, s, sym, lower, y.T, 1 - side, beta)
                return
            tmp = self.fscratch("symm_t", t.shape, t.dtype)
            self._symm_acc(tmp, s, sym, lower, y, side, 0.0)
            if beta == 0:
                np.copyto(t, tmp)
            else:
                np.add(t, tmp, out=t)
            return
        if t.size == 0 or sym.size == 0:
            return
        yb = y
        if not y.flags.f_contiguous:  # ?symm has no transpose flag for its other operand
            yb = self.fscratch("symm_y", y.shape, y.dtype)
            np.copyto(yb, y)
        symm = self.k.symm
        k = self.k.scalar
        symm(k(s), sym, yb, beta=k(beta), c=t, side=side, lower=int(lower), overwrite_c=1)


class TriRule(Routine):
    """`?trmm` (B ← α·op(T)·B, or B·op(T) for side=1) and `?trsm` (B ← α·op(T)⁻¹·B, or B·op(T)⁻¹).

    T is the `lower` (or upper) triangle of A, with a unit diagonal if diag=1 (then
    A's diagonal is not read and gets no cotangent). With Z = op(T)ᴴ·C̄ for trmm,
    Z = op(T)⁻ᴴ·C̄ for trsm (C̄·op(T)ᴴ, C̄·op(T)⁻ᴴ for side=1), X the result:

        trmm: op(T)̄ = conj(α)·C̄·B_oldᴴ,  trsm: op(T)̄ = −Z·Xᴴ   (side 1: B_oldᴴ·C̄, −Xᴴ·Z)
        B̄_old = conj(α)·Z,   ᾱ = ⟨B_old, Z⟩,   Ā += tri(op⁻¹ applied to op(T)̄)

    Z is one trmm/trsm computed in place on C̄ (in-place calls) or on a kept copy.
    """

    def __init__(self, fn: Any, dtype: Any, solve: bool) -> None:
        super().__init__(fn, dtype)
        self.solve = solve

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        bd = self.bind(args, kwargs)
        alpha, a, b = (bd.cd(n) for n in ("alpha", "a", "b"))
        assert alpha is not None and a is not None and b is not None
        dt = self.dtype
        self.check_io(self.name, "a", a, dt, 2)
        self.check_io(self.name, "b", b, dt, 2)
        side, lower = int(bool(bd.get("side", 0))), bool(bd.get("lower", 0))
        op, unit = op_of(bd.get("trans_a", 0), "trans_a"), bool(bd.get("diag", 0))
        if not self.k.complex and op == "C":
            op = "T"
        A, B = a.x, b.x
        nt = B.shape[side]
        if A.shape != (nt, nt):
            raise ValueError(f"{self.name}: a has shape {A.shape}, expected {(nt, nt)}")
        al = self.scalar(alpha, 1.0)
        inplace = bool(bd.get("overwrite_b", 0)) and f2py_inplace(B, dt, 2)
        others = is_active_array(a) or is_active_scalar(alpha)
        target, out, state = self.begin_output(
            self.name, b, "b", inplace, B.shape, dt, others, fill=True, reads=(("a", a),)
        )
        self._apply(target, al, A, lower, op, unit, side, self.solve)

        def tri_pullback(dy: Any) -> tuple[Any, ...]:
            g = out.dx
            abar = None
            b_old = state[1] if inplace else B
            if g is not None and g.size:
                z = g if inplace else self.scratch_like("z", g)
                if not self.solve and is_active_array(a):  # needs C̄ before Z overwrites it
                    self._t_bar(a.dx, g, b_old, "N", al, op, lower, unit, side)
                if not inplace:
                    np.copyto(z, g)
                self._apply(z, 1.0, A, lower, ADJ[op], unit, side, self.solve)
                if self.solve and is_active_array(a):
                    self._t_bar(a.dx, z, out.x, "C", -1.0, op, lower, unit, side)
                if is_active_scalar(alpha):
                    abar = self.dot(b_old, z)
                if inplace:
                    self.scal(g, cj(al))
                elif is_active_array(b):
                    self.axpy(b.dx, cj(al), z)
            self.end_output(state, b, inplace)
            return bd.rdata(alpha=abar)

        return out, tri_pullback

    def _t_bar(
        self,
        da: np.ndarray,
        g: np.ndarray,
        x: np.ndarray,
        kind: str,
        s: Any,
        op: str,
        lower: bool,
        unit: bool,
        side: int,
    ) -> None:
        """Ā += tri(op applied back to M), M = s'·G·Xᴴ (side 0) or s'·Xᴴ·G (side 1).

        trmm (kind N): s' = conj(α), G = C̄, X = B_old; trsm (kind C): s' = −1, G = Z, X = result.
        """
        nt = da.shape[0]
        m = self.fscratch("m", (nt, nt), da.dtype)
        sc = cj(s) if kind == "N" else s
        if side == 0:
            self.gemm_acc(m, sc, g, "N", x, "C", beta=0.0, tt=op)
        else:
            self.gemm_acc(m, sc, x, "C", g, "N", beta=0.0, tt=op)
        np.add(da, m, out=da, where=self.tri_mask(nt, lower, unit))

    def _apply(
        self,
        z: np.ndarray,
        s: Any,
        A: np.ndarray,
        lower: bool,
        op: str,
        unit: bool,
        side: int,
        solve: bool,
    ) -> None:
        """Z ← s·op(T)·Z, s·Z·op(T) (side 1), or with op(T)⁻¹ when `solve`, in place."""
        if z.size == 0:
            return
        if not z.flags.f_contiguous:
            if z.flags.c_contiguous:  # Zᵀ ← s·Zᵀ·op(T)ᵀ: the other side, the transposed op
                self._apply(z.T, s, A, lower, TR[op], unit, 1 - side, solve)
                return
            tmp = self.fscratch("tri_z", z.shape, z.dtype)
            np.copyto(tmp, z)
            self._apply(tmp, s, A, lower, op, unit, side, solve)
            np.copyto(z, tmp)
            return
        if op == "R":  # conj(T)·Z = conj(T·conj(Z))
            self.conj_inplace(z)
            self._apply(z, cj(s), A, lower, "N", unit, side, solve)
            self.conj_inplace(z)
            return
        if not self.k.complex and op == "C":
            op = "T"
        if A.flags.f_contiguous:
            ab, lo, code = A, lower, "NTC".index(op)
        elif A.flags.c_contiguous and TR[op] != "R":  # tri(A) = tri'(Aᵀ)ᵀ
            ab, lo, code = A.T, not lower, "NTC".index(TR[op])
        else:
            ab = self.fscratch("tri_a", A.shape, A.dtype)
            np.copyto(ab, A)
            lo, code = lower, "NTC".index(op)
        fn = self.k.trsm if solve else self.k.trmm
        r = fn(self.k.scalar(s), ab, z, side=side, lower=int(lo), trans_a=code, diag=int(unit),
               overwrite_b=1)  # fmt: skip
        if r is not z:
            np.copyto(z, r)
