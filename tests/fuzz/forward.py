"""Forward mode in the fuzzer: each round's `rulekit.jvp` against the finite differences.

After the eager `value_and_grad` object got a round's inputs right, `check_jvp` runs
`rulekit.jvp` on fresh copies of the same inputs along a random tangent for each
differentiated input (None for the constants) and compares the output tangent with
the directional derivative the round's central differences give, Σᵢ Re⟨∇ᵢL, vᵢ⟩
(complex inputs: the gradient is ∂L/∂x + i ∂L/∂y, so the derivative along a + ib is
Re(conj(g)·v)). The tolerance is the gradient tolerance of each element, weighted by
|vᵢ|, plus the value tolerance. A TracingError naming a missing forward rule is
counted (`forward refused`), not a defect: the program uses a function with only a
reverse rule. Any other exception, or a mismatch, is a defect.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit

__all__ = ["check_jvp"]


def _tangent(x: Any, rng: np.random.Generator) -> Any:
    a = np.asarray(x)
    t = rng.normal(size=a.shape)
    if a.dtype.kind == "c":
        t = t + 1j * rng.normal(size=a.shape)
    t = t.astype(a.dtype)
    return t if isinstance(x, np.ndarray) else t[()]


def check_jvp(
    f: Any,
    xs: list[Any],
    fds: dict[int, np.ndarray],
    tols: dict[int, np.ndarray],
    value_tol: float,
    seed: int,
    stats: Any,
) -> tuple[str, list[str]] | None:
    """None if `jvp` agrees with the finite differences (or refused cleanly), else
    `(defect kind, reproducer comment lines)`. `fds` and `tols`: per position in `xs` of a
    differentiated argument, its central differences and their tolerance."""
    active = sorted(fds)
    rng = np.random.default_rng(seed)
    tangents = [_tangent(x, rng) if i in active else None for i, x in enumerate(xs)]
    try:
        _, t = rulekit.jvp(f, tuple(xs), tuple(tangents))
    except rulekit.TracingError as e:
        if "has no forward rule" in str(e) or "has no differentiable" in str(e):
            stats["forward refused"] += 1
            return None
        raise
    want = sum(
        float(np.sum(np.real(np.conj(fds[i]) * np.asarray(tangents[i], complex)))) for i in active
    )
    tol = value_tol + sum(float(np.sum(tols[i] * np.abs(tangents[i]))) for i in active)
    stats["tangents compared"] += 1
    got = complex(np.asarray(t))
    if abs(got.imag) > tol or abs(got.real - want) > tol:
        return "wrong tangent (jvp)", [
            f"# tangents = {[None if v is None else np.asarray(v).tolist() for v in tangents]}",
            f"# out_tangent = rulekit.jvp(f, inputs, tangents)[1]: {got!r}",
            f"# expected Σ Re⟨∇L, v⟩ (central differences): {want!r} (tolerance {tol:.2e})",
        ]
    return None
