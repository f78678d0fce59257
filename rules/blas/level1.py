"""Stateful rules for level-1 BLAS: axpy, scal, dot/dotu/dotc, nrm2 (registered in `rules.blas`).

Vectors may be strided through n/offx/incx/offy/incy (positive increments); the
rules read, write and differentiate only the selected elements, through views.
axpy and scal write into `y` and `x`: in place whenever f2py does (a contiguous
vector of the routine's dtype: these have no overwrite flag), else into a
pooled copy, exactly as the primal. Complex: x̄ = conj(∂y/∂x)·ȳ (dotc
conjugates its first argument, so x̄ = conj(ȳ)·y there).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import CoDual, NoRData
from rules._support.arguments import is_active_array, is_active_scalar
from rules._support.blas_kernels import cj
from rules._support.cotangents import NO_F
from rules.blas._routine import Bound, Routine, f2py_inplace, vec_view

__all__ = ["AxpyRule", "DotRule", "Nrm2Rule", "ScalRule"]


class _Vectors(Routine):
    """Level-1 argument handling: n, offx/incx, offy/incy and the selected views."""

    def views(self, bd: Bound, names: tuple[str, ...]) -> tuple[int, dict[str, Any]]:
        """n (default from the first vector) and each vector's offset and increment."""
        first = bd.get(names[0], None)
        offs = {v: (int(bd.get("off" + v, 0)), int(bd.get("inc" + v, 1))) for v in names}
        off0, inc0 = offs[names[0]]
        n = bd.get("n", None)
        n = (first.shape[0] - off0) // abs(inc0) if n is None else int(n)
        return n, offs

    def sub(self, v: np.ndarray, offinc: tuple[int, int], n: int, which: str) -> np.ndarray:
        return vec_view(v, offinc[0], offinc[1], n, self.name, which)

    def kw(self, n: int, offs: dict[str, Any]) -> dict[str, int]:
        out = {"n": n}
        for v, (off, inc) in offs.items():
            out["off" + v], out["inc" + v] = off, inc
        return out


class DotRule(_Vectors):
    """`xy = ?dot(x, y, n, offx, incx, offy, incy)` (dotu: Σ x·y; dotc: Σ conj(x)·y).

    dot, dotu: x̄ += ȳ·conj(y), ȳ_vec += ȳ·conj(x);   dotc: x̄ += conj(ȳ)·y, ȳ_vec += ȳ·x.
    """

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        bd = self.bind(args, kwargs)
        x, y = bd.cd("x"), bd.cd("y")
        assert x is not None and y is not None
        for nm, v in (("x", x), ("y", y)):
            self.check_io(self.name, nm, v, self.dtype, 1)
        n, offs = self.views(bd, ("x", "y"))
        xs, ys = self.sub(x.x, offs["x"], n, "x"), self.sub(y.x, offs["y"], n, "y")
        r = self.fn(self.contig("x", x.x), self.contig("y", y.x), **self.kw(n, offs))
        conj_x = self.fn.__name__.endswith("dotc")

        def dot_pullback(dy: Any) -> tuple[Any, ...]:
            if not isinstance(dy, NoRData) and dy != 0:
                if is_active_array(x):
                    dxs = self.sub(x.dx, offs["x"], n, "x")
                    if conj_x:
                        self.axpy(dxs, cj(dy), ys)
                    else:
                        self.axpy(dxs, dy, ys, conj=True)
                if is_active_array(y):
                    self.axpy(self.sub(y.dx, offs["y"], n, "y"), dy, xs, conj=not conj_x)
            return bd.rdata()

        return CoDual(r, NO_F), dot_pullback


class Nrm2Rule(_Vectors):
    """`n2 = ?nrm2(x, n, offx, incx)` = ‖x‖₂:  x̄ += ȳ·x/‖x‖ (0 at x = 0, the minimum-norm
    subgradient; PyTorch's convention)."""

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        bd = self.bind(args, kwargs)
        x = bd.cd("x")
        assert x is not None
        self.check_io(self.name, "x", x, self.dtype, 1)
        n, offs = self.views(bd, ("x",))
        xs = self.sub(x.x, offs["x"], n, "x")
        r = self.fn(self.contig("x", x.x), **self.kw(n, offs))

        def nrm2_pullback(dy: Any) -> tuple[Any, ...]:
            if is_active_array(x) and not isinstance(dy, NoRData) and r != 0:
                self.axpy(self.sub(x.dx, offs["x"], n, "x"), float(np.real(dy)) / r, xs)
            return bd.rdata()

        return CoDual(r, NO_F), nrm2_pullback


class ScalRule(_Vectors):
    """`x = ?scal(a, x, n, offx, incx)`: x ← a·x on the selected elements, in place.

    ā = ⟨x_old, x̄⟩ (selected elements), then x̄ ← conj(a)·x̄ there and x ← x_old.
    """

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        bd = self.bind(args, kwargs)
        a, x = bd.cd("a"), bd.cd("x")
        assert a is not None and x is not None
        dt = self.dtype
        self.check_io(self.name, "x", x, dt, 1)
        n, offs = self.views(bd, ("x",))

        def sub(v: np.ndarray) -> np.ndarray:
            return self.sub(v, offs["x"], n, "x")

        sub(x.x)
        al = self.scalar(a, 1.0)
        inplace = f2py_inplace(x.x, dt, 1)
        target, out, state = self.begin_output(
            self.name, x, "x", inplace, x.x.shape, dt, is_active_scalar(a), True
        )
        if n > 0:
            self.fn(al, target, **self.kw(n, offs))

        def scal_pullback(dy: Any) -> tuple[Any, ...]:
            g, abar = out.dx, None
            if g is not None:
                gs = sub(g)
                if is_active_scalar(a):
                    abar = self.dot(sub(state[1] if inplace else x.x), gs)
                if inplace:
                    self.scal(gs, cj(al))
                elif is_active_array(x):
                    self.add_subset(x.dx, g, sub, cj(al))
            self.end_output(state, x, inplace)
            return bd.rdata(a=abar)

        return out, scal_pullback


class AxpyRule(_Vectors):
    """`z = ?axpy(x, y, n, a, offx, incx, offy, incy)`: y ← a·x + y on the selected elements.

    x̄ += conj(a)·ȳ,  ā = ⟨x, ȳ⟩ (selected elements),  ȳ unchanged,  y ← y_old.
    """

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        bd = self.bind(args, kwargs)
        x, y, a = bd.cd("x"), bd.cd("y"), bd.cd("a")
        assert x is not None and y is not None
        dt = self.dtype
        for nm, v in (("x", x), ("y", y)):
            self.check_io(self.name, nm, v, dt, 1)
        n, offs = self.views(bd, ("x", "y"))
        xs = self.sub(x.x, offs["x"], n, "x")
        self.sub(y.x, offs["y"], n, "y")
        al = self.scalar(a, 1.0)
        inplace = f2py_inplace(y.x, dt, 1)
        others = is_active_array(x) or is_active_scalar(a)
        target, out, state = self.begin_output(
            self.name, y, "y", inplace, y.x.shape, dt, others, True, reads=(("x", x),)
        )
        if n > 0:
            self.fn(self.contig("x", x.x), target, a=al, **self.kw(n, offs))

        def axpy_pullback(dy: Any) -> tuple[Any, ...]:
            g, abar = out.dx, None
            if g is not None:
                gs = self.sub(g, offs["y"], n, "y")
                if is_active_array(x):
                    self.axpy(self.sub(x.dx, offs["x"], n, "x"), cj(al), gs)
                if is_active_scalar(a):
                    abar = self.dot(xs, gs)
                if not inplace and is_active_array(y):
                    self.axpy(y.dx, 1.0, g)
            self.end_output(state, y, inplace)
            return bd.rdata(a=abar)

        return out, axpy_pullback
