"""Rules for numpy.linalg's matrix products: multi_dot and matrix_power.

Both are chains of matrix products P = L·R, whose adjoint is L̄ += P̄·Rᴴ, R̄ += Lᴴ·P̄
(ᴴ = ᵀ for real arrays); the pullbacks run the chain backwards.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

import rulekit
from rulekit import Array, CoDual
from rules._support.arguments import array_fdata
from rules._support.cotangents import NO_R, accumulate, add_to_fdata, zero_rdata_of
from rules._support.linalg import mH
from rules._support.outputs import new_output

__all__ = ["matrix_power_rrule", "multi_dot_rrule"]


def _multi_dot_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(43)
    n = rng.normal
    return [
        rulekit.example([n(size=(2, 3)), n(size=(3, 4)), n(size=(4, 2))]),
        rulekit.example([n(size=3), n(size=(3, 4)), n(size=(4, 2)), n(size=2)]),
        rulekit.example([n(size=(2, 3)), n(size=3)]),
        rulekit.example((n(size=(2, 2)) + 1j * n(size=(2, 2)), n(size=(2, 3)), n(size=(3, 2)))),
    ]


@rulekit.rrule.register(np.linalg.multi_dot, Union[list, tuple], examples=_multi_dot_examples)
def multi_dot_rrule(f: CoDual, arrays: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """Y = A₁A₂…Aₙ (1-D ends as row/column) ⇒ Āₖ += (A₁…Aₖ₋₁)ᵀ Ȳ (Aₖ₊₁…Aₙ)ᵀ."""
    xs = list(arrays.x)
    dxs = arrays.dx if isinstance(arrays.dx, (list, tuple)) else [None] * len(xs)
    if any(np.ndim(x) not in (1, 2) for x in xs):
        raise NotImplementedError("np.linalg.multi_dot: the rule supports 1-D and 2-D arrays")
    y = np.linalg.multi_dot(xs, **kwargs)
    res = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        ms = [np.asarray(x) for x in xs]
        if ms[0].ndim == 1:
            ms[0] = ms[0][None, :]
        if ms[-1].ndim == 1:
            ms[-1] = ms[-1][:, None]
        g = res.dx if isinstance(res.dx, np.ndarray) else np.asarray(dy)
        g = np.reshape(g, (ms[0].shape[0], ms[-1].shape[1]))
        right = [g]  # right[k] = Ȳ (A_{k+1}…A_n)ᵀ, built from the end
        for m in ms[:0:-1]:
            right.append(right[-1] @ mH(m))
        right.reverse()
        left = None  # A_1…A_{k−1}
        for k, m in enumerate(ms):
            d = dxs[k]
            if isinstance(d, np.ndarray):
                gk = right[k] if left is None else mH(left) @ right[k]
                add_to_fdata(d, gk.reshape(np.shape(xs[k])))
            left = m if left is None else left @ m
        return (NO_R, zero_rdata_of(arrays))

    return res, pullback


def _matrix_power_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(44)
    a = rng.normal(size=(3, 3)) / 2 + np.eye(3)
    ex = rulekit.example
    return [
        ex(a, 0),
        ex(a, 1),
        ex(a, 2),
        ex(a, 3),
        ex(a, 5),
        ex(a, 6),
        ex(a, -1),
        ex(a, -3),
        ex(rng.normal(size=(2, 3, 3)) / 2 + np.eye(3), 4),
        ex(a + 0.3j * rng.normal(size=(3, 3)), 3),
        ex(a, np.int64(4)),
    ]


@rulekit.rrule.register(
    np.linalg.matrix_power,
    Array[np.inexact],
    Union[int, np.integer],
    examples=_matrix_power_examples,
)
def matrix_power_rrule(f: CoDual, a: CoDual, n: CoDual) -> tuple[CoDual, Any]:
    """Y = Aⁿ by numpy's own squaring chain (same products, same result), recorded on a tape;
    the pullback runs it backwards: P = L·R ⇒ L̄ += P̄ Rᵀ, R̄ += Lᵀ P̄. n < 0: B = A⁻¹
    first, Ā += −Bᵀ B̄ Bᵀ. n = 1 returns A itself (numpy does), so the fdata is A's."""
    A, p = a.x, int(n.x)
    if p == 1:
        return CoDual(A, a.dx), lambda dy: (NO_R, NO_R, NO_R)
    if p == 0:
        return new_output(np.linalg.matrix_power(A, 0)), lambda dy: (NO_R, NO_R, NO_R)
    base = np.linalg.inv(A) if p < 0 else A
    vals, tape = [base], []  # tape: (out, left, right) indices into vals

    def mul(i: int, j: int) -> int:
        vals.append(np.matmul(vals[i], vals[j]))
        tape.append((len(vals) - 1, i, j))
        return len(vals) - 1

    q = abs(p)
    if q == 1:
        r = 0
    elif q == 2:
        r = mul(0, 0)
    elif q == 3:
        r = mul(mul(0, 0), 0)
    else:
        z = r = -1
        while q > 0:
            z = 0 if z < 0 else mul(z, z)
            q, bit = divmod(q, 2)
            if bit:
                r = z if r < 0 else mul(r, z)
    out = new_output(vals[r])

    def pullback(dy: Any) -> tuple[Any, ...]:
        if array_fdata(a) is None:
            return (NO_R, NO_R, NO_R)
        bars: list[Any] = [None] * len(vals)
        bars[r] = out.dx
        for o, i, j in reversed(tape):
            g = bars[o]
            if g is None:
                continue
            for idx, contrib in ((i, g @ mH(vals[j])), (j, mH(vals[i]) @ g)):
                bars[idx] = contrib if bars[idx] is None else bars[idx] + contrib
        g0 = bars[0]
        if g0 is not None:
            accumulate(a, -(mH(base) @ g0 @ mH(base)) if p < 0 else g0)
        return (NO_R, NO_R, NO_R)

    return out, pullback
