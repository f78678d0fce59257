"""Rules for np.matmul (and the @ operator), np.dot, np.inner, np.outer and np.vdot.

    Y = A @ B  ⇒  Ā += Ȳ·Bᴴ,  B̄ += Aᴴ·Ȳ      (ᴴ = ᵀ for real arrays)

with 1-D operands promoted as numpy promotes them, and broadcast batch dimensions
summed out. inner(a, b) is a @ bᵀ, outer(a, b) is a[:, None] @ b[None, :], vdot
conjugates its first argument (ā += conj(ȳ)·b, b̄ += ȳ·a).

Same-dtype calls get stateful rules whose outputs, output fdata and work buffers come
from their pool, so that after the first call forward + pullback allocate nothing:
`MatmulRule` (`rules.numpy._matmul_stateful`: BLAS gemm for 2-D and 1-D operands, np.matmul
into kept buffers for batched ones, the `out=` forms) and `VdotRule` (here). Mixed dtypes,
and np.dot/np.inner beyond 2-D, get plain rules that allocate (`rules.numpy._matmul_generic`).
The registrations below state which rule serves which call; the plain rules are registered
last, as the fallback.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import Array, CoDual, Example, NoRData, build_primitive_rrule, example
from rules._support.arguments import is_active_array
from rules._support.blas_kernels import BlasRule, cj
from rules._support.cotangents import NO_F, NO_R
from rules.numpy._matmul_generic import register_generic
from rules.numpy._matmul_stateful import MatmulRule

__all__ = ["MatmulRule", "VdotRule"]


class VdotRule(BlasRule):
    """`np.vdot(a, b)` = Σ conj(a)·b over the flattened arrays: ā += conj(ȳ)·b, b̄ += ȳ·a."""

    def __call__(self, f: CoDual, a: CoDual, b: CoDual) -> tuple[CoDual, Any]:
        A, B = a.x, b.x
        if A.size != B.size:
            np.vdot(A, B)  # numpy's own error
        if A.shape != B.shape:  # pair elements in C order, as np.vdot flattens
            A = A.reshape(-1) if A.flags.c_contiguous else self._copy_in("a", A, "C").reshape(-1)
            B = B.reshape(-1) if B.flags.c_contiguous else self._copy_in("b", B, "C").reshape(-1)
        buf = self.scratch("r", (), A.dtype)
        buf[...] = self.dot(A, B)
        r = buf[()]  # np.float32(x) would allocate a 0-d array; reading one does not

        def vdot_pullback(dy: Any) -> tuple[Any, ...]:
            if not isinstance(dy, NoRData) and dy != 0:
                if is_active_array(a):
                    self.axpy(a.dx, cj(dy), self._like(b.x, a.x.shape, "pb"))
                if is_active_array(b):
                    self.axpy(b.dx, dy, self._like(a.x, b.x.shape, "pa"))
            return (NO_R, NO_R, NO_R)

        return CoDual(r, NO_F), vdot_pullback

    def _like(self, x: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
        """x with the other operand's shape, elements paired in C order (a view if possible)."""
        if x.shape == shape:
            return x
        if not x.flags.c_contiguous:
            x = self._copy_in(name, x, "C")
        return x.reshape(shape)


# -- registrations ----------------------------------------------------------------------------

_TYPES = (np.float32, np.float64, np.complex64, np.complex128)


def _arr(rng: np.random.Generator, shape: Any, dt: Any, order: str = "C") -> np.ndarray:
    x = rng.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.array(x, dtype=dt, order=order)  # type: ignore[call-overload]


def _examples(kind: str, dt: Any, nd: tuple[Any, Any], out: bool) -> list[Example]:
    """Small examples for one registration: both memory orders for 2-D operands."""
    rng = np.random.default_rng(sum(map(ord, f"{kind}{nd}{out}")))
    full = dt is np.float64
    shapes: dict[Any, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {
        (1, 1): [((4,), (4,))],
        (1, 2): [((3,), (3, 2) if kind != "inner" else (2, 3))],
        (2, 1): [((2, 3), (3,))],
        (2, 2): [((3, 4), (4, 2) if kind != "inner" else (2, 4))],
        (None, None): [((2, 3, 4), (4, 2)), ((3,), (2, 3, 2)), ((2, 1, 2, 3), (3, 3, 2))],
    }
    inner_dims = shapes[nd]
    if kind == "outer":
        inner_dims = [((3,), (4,))]
    r = []
    for i, (sa, sb) in enumerate(inner_dims if full else inner_dims[:1]):
        orders = ("C", "F") if (full and len(sa) == 2 and nd == (2, 2)) else ("C",)
        for order in orders:
            A, B = _arr(rng, sa, dt, order), _arr(rng, sb, dt, order)
            if out:
                y = np.zeros_like(getattr(np, kind)(A, B)) + 0.5
                r.append(Example((A, B), {"out": y}, name=f"{order}{i}-out"))
            else:
                r.append(Example((A, B), {}, name=f"{order}{i}"))
    if full and nd == (2, 2) and not out:
        r.append(example(_arr(rng, (1, 1), dt), _arr(rng, (1, 1), dt)))
    return r


def _vdot_examples(dt: Any) -> list[Example]:
    rng = np.random.default_rng(41)
    r = [example(_arr(rng, 5, dt), _arr(rng, 5, dt))]
    if dt is np.float64:
        r.append(example(_arr(rng, (2, 3), dt, "F"), _arr(rng, (2, 3), dt)))
        r.append(example(_arr(rng, (2, 3), dt, "F"), _arr(rng, (3, 2), dt)))
    return r


def _register(fn: Any, kind: str, dt: Any, nd: tuple[Any, Any], out: bool) -> None:
    pats = [Array[dt] if n is None else Array[dt, n] for n in nd]
    out_pat = None
    if out:  # the output's ndim: 2 for outer, the operands' ndims minus the contracted ones
        out_nd = None if nd[0] is None else (2 if kind == "outer" else nd[0] + nd[1] - 2)
        out_pat = Array[dt] if out_nd is None else Array[dt, out_nd]

    def build(sig: Any) -> MatmulRule:
        return MatmulRule(kind)

    build.__qualname__ = f"build_{kind}_rule"
    build_primitive_rrule.register(
        fn, *pats, out=out_pat, examples=lambda: _examples(kind, dt, nd, out)
    )(build)


for _dt in _TYPES:
    # matmul and @: the 2-D rule, and everything else (1-D, batched, broadcast)
    for _nd in ((2, 2), (None, None)):
        _register(np.matmul, "matmul", _dt, _nd, out=False)
        _register(np.matmul, "matmul", _dt, _nd, out=True)
    for _nd in ((1, 1), (1, 2), (2, 1), (2, 2)):
        _register(np.dot, "dot", _dt, _nd, out=False)
        _register(np.inner, "inner", _dt, _nd, out=False)
    _register(np.dot, "dot", _dt, (2, 2), out=True)
    _register(np.outer, "outer", _dt, (1, 1), out=False)
    _register(np.outer, "outer", _dt, (1, 1), out=True)
    build_primitive_rrule.register(
        np.vdot, Array[_dt], Array[_dt], examples=lambda dt=_dt: _vdot_examples(dt)
    )(lambda sig: VdotRule())

register_generic()
