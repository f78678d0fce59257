"""Stateful rules for level-2 BLAS: gemv and ger/geru/gerc (registered in `rules.blas`).

Both are a gemm with a vector for a thin matrix, so their pullbacks are
`BlasRule.gemm_adjoint` on (n, 1) views: y ← α·op(A)·x + β·y is C = α·P·Q + β·C
with P = op(A), Q = x; A ← α·x·yᵀ + A (yᴴ for gerc) is C = α·P·Q + C with
P = x, Q = yᵀ. Vectors may be strided through offx/incx/offy/incy (positive
increments); only the selected elements are read, written and differentiated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import CoDual
from rules._support.arguments import is_active_array, is_active_scalar
from rules._support.blas_kernels import cj
from rules.blas._routine import Routine, f2py_inplace, op_of, vec_view

__all__ = ["GemvRule", "GerRule"]


class GemvRule(Routine):
    """`y = ?gemv(alpha, a, x, beta, y, offx, incx, offy, incy, trans, overwrite_y)`.

    y ← α·op(A)·x + β·y on the selected elements of y. With ȳ the cotangent of y after
    the call (real arrays; complex: ᴴ, conj α, conj β):

        Ā += α·op⁻¹(ȳ·xᵀ),  x̄ += α·op(A)ᵀ·ȳ,  ᾱ = ⟨ȳ, op(A)·x⟩,  β̄ = ⟨ȳ, y_old⟩,
        then ȳ ← β·ȳ on the selected elements and y ← y_old
    """

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        bd = self.bind(args, kwargs)
        alpha, a, x, beta, y = (bd.cd(n) for n in ("alpha", "a", "x", "beta", "y"))
        assert alpha is not None and a is not None and x is not None
        dt, name = self.dtype, self.name
        self.check_io(name, "a", a, dt, 2)
        self.check_io(name, "x", x, dt, 1)
        self.check_io(name, "y", y, dt, 1)
        op = op_of(bd.get("trans", 0))
        A = a.x
        m, n = A.shape if op == "N" else A.shape[::-1]
        offx, incx = int(bd.get("offx", 0)), int(bd.get("incx", 1))
        offy, incy = int(bd.get("offy", 0)), int(bd.get("incy", 1))
        xs = vec_view(x.x, offx, incx, n, name, "x")
        ly = y.x.shape[0] if y is not None else offy + (m - 1) * abs(incy) + 1

        def ysub(v: np.ndarray) -> np.ndarray:
            return vec_view(v, offy, incy, m, name, "y")

        if y is not None:
            ysub(y.x)  # validates the length
        al, be = self.scalar(alpha, 1.0), self.scalar(beta, 0.0)
        inplace = y is not None and bool(bd.get("overwrite_y", 0)) and f2py_inplace(y.x, dt, 1)
        others = (
            is_active_array(a)
            or is_active_array(x)
            or is_active_scalar(alpha)
            or is_active_scalar(beta)
        )
        target, out, state = self.begin_output(
            name, y, "y", inplace, (ly,), dt, others, True, reads=(("a", a), ("x", x))
        )
        if m and n:
            ab, code = self.operand("a", A, op)
            self.fn(al, ab, self.contig("x", x.x), beta=be, y=target, offx=offx, incx=incx,
                    offy=offy, incy=incy, trans=code, overwrite_y=1)  # fmt: skip
        elif m:
            self.scal(ysub(target), be)

        def gemv_pullback(dy: Any) -> tuple[Any, ...]:
            g = out.dx
            abar = bbar = None
            if g is not None:
                gs = ysub(g)
                dxs = vec_view(x.dx, offx, incx, n, name, "x") if is_active_array(x) else None
                abar = self.gemm_adjoint(
                    gs[:, None],
                    al,
                    is_active_scalar(alpha),
                    A,
                    a.dx if is_active_array(a) else None,
                    op,
                    xs[:, None],
                    None if dxs is None else dxs[:, None],
                    "N",
                )
                if is_active_scalar(beta):
                    y_old = None if y is None else (state[1] if inplace else y.x)
                    bbar = 0.0 if y_old is None else self.dot(ysub(y_old), gs)
                if inplace:
                    self.scal(gs, cj(be))
                elif is_active_array(y):
                    self.add_subset(y.dx, g, ysub, cj(be))
            self.end_output(state, y, inplace)
            return bd.rdata(alpha=abar, beta=bbar)

        return out, gemv_pullback


class GerRule(Routine):
    """`a = ?ger(alpha, x, y, incx, incy, a, ...)` (and geru, gerc): A ← α·x·yᵀ + A (gerc: yᴴ).

    With Ā the cotangent of A after the call (real arrays; complex: conj α, and gerc
    conjugates y):

        x̄ += α·Ā·y,   ȳ += α·Āᵀ·x,   ᾱ = ⟨Ā, x·yᵀ⟩,   Ā unchanged,   A ← A_old
    """

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        bd = self.bind(args, kwargs)
        alpha, x, y, a = (bd.cd(n) for n in ("alpha", "x", "y", "a"))
        assert alpha is not None and x is not None and y is not None
        dt, name = self.dtype, self.name
        self.check_io(name, "x", x, dt, 1)
        self.check_io(name, "y", y, dt, 1)
        self.check_io(name, "a", a, dt, 2)
        if int(bd.get("incx", 1)) != 1 or int(bd.get("incy", 1)) != 1:
            raise NotImplementedError(
                f"{name}: incx/incy other than 1 have no rule; pass x[::inc] instead."
            )
        oy = "C" if self.fn.__name__.endswith("gerc") else "T"
        X, Y = x.x, y.x
        m, n = X.shape[0], Y.shape[0]
        if a is not None and a.x.shape != (m, n):
            raise ValueError(f"{name}: a has shape {a.x.shape}, expected {(m, n)}")
        al = self.scalar(alpha, 1.0)
        inplace = a is not None and bool(bd.get("overwrite_a", 0)) and f2py_inplace(a.x, dt, 2)
        others = is_active_array(x) or is_active_array(y) or is_active_scalar(alpha)
        target, out, state = self.begin_output(
            name, a, "a", inplace, (m, n), dt, others, True, reads=(("x", x), ("y", y))
        )
        if m and n:
            self.fn(al, self.contig("x", X), self.contig("y", Y), a=target, overwrite_a=1)

        def ger_pullback(dy: Any) -> tuple[Any, ...]:
            g = out.dx
            abar = None
            if g is not None:
                abar = self.gemm_adjoint(
                    g,
                    al,
                    is_active_scalar(alpha),
                    X[:, None],
                    x.dx[:, None] if is_active_array(x) else None,
                    "N",
                    Y[:, None],
                    y.dx[:, None] if is_active_array(y) else None,
                    oy,
                )
                if not inplace and is_active_array(a):
                    self.axpy(a.dx, 1.0, g)
            self.end_output(state, a, inplace)
            return bd.rdata(alpha=abar)

        return out, ger_pullback
