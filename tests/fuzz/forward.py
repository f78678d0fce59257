"""Forward mode in the fuzzer: each round's `rulekit.jvp` against the finite differences.

After the eager `value_and_grad` object got a round's inputs right, `check_jvp` runs
`rulekit.jvp` on fresh copies of the same inputs along a random tangent for each
differentiated input (None for the constants) and compares the output tangent with
the directional derivative the round's central differences give, Σᵢ Re⟨∇ᵢL, vᵢ⟩
(complex inputs: the gradient is ∂L/∂x + i ∂L/∂y, so the derivative along a + ib is
Re(conj(g)·v)). The tolerance is the gradient tolerance of each element, weighted by
|vᵢ|, plus the value tolerance. A TracingError naming a missing forward rule is
counted (`forward refused`), not a defect: the program uses a function with only a
reverse rule. So is forward mode's refusal of a write into an array whose view and
tangent are laid out differently (`forward refused (layout)`: a reshape of a
non-contiguous value that copies where its tangent's reshape is a view, or the reverse;
docs/forward-and-higher-order.md lists it). Any other exception, or a mismatch, is a
defect.

`check_hvp` does the same at second order, for programs whose differentiated inputs are
all float64: `rulekit.hvp` in each of its three modes along a random direction v against
central differences of the (first-order, already checked) gradient along v, with steps h
and 2h. The two difference quotients' gap measures their truncation error; a program
where they disagree by more than 1e-3 of the scale (a kink of abs/maximum/where near x)
is counted (`hvp ill-conditioned`), not compared. A refusal — a TracingError or a
MissingRuleError: a missing forward rule or differentiable pullback, a reverse rule
missing for a scalar that a forward rule's body meets in reverse-over-forward mode, an
in-place write nested reverse mode cannot follow — is counted (`hvp refused`), not a
defect: this check is about wrong second derivatives, and the gaps are listed in
docs/forward-and-higher-order.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit

__all__ = ["check_hvp", "check_jvp"]


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
        if "laid out differently" in str(e):  # (a documented refusal: see the module doc)
            stats["forward refused (layout)"] += 1
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


HVP_MODES = ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward")
_H2 = 1e-4  # the step of the gradient's differences (the gradient is exact: no O(eps/h²))


def check_hvp(
    f: Any, build: Any, vals: list[Any], pos: dict[int, int], seed: int, stats: Any
) -> tuple[str, list[str]] | None:
    """None if every `rulekit.hvp` mode agrees with differences of the gradient (or refused
    cleanly, or the program is not float64 / ill-conditioned at x), else `(defect kind,
    reproducer comment lines)`. `build(vals)` lays the input values out as the round does
    (fresh arrays: a layout can change what a program computes, reshape copying or not);
    `pos` maps each differentiated input to its parameter position."""
    xs = build(vals)
    inputs = sorted(pos)
    active = [pos[i] for i in inputs]
    if not active or any(np.result_type(xs[i]) != np.float64 for i in active):
        return None
    rng = np.random.default_rng(seed + 7)
    vs = [_tangent(xs[i], rng) for i in active]

    def g(*a: Any) -> Any:
        full = build(vals)
        for i, x in zip(active, a, strict=True):
            full[i] = x
        return f(*full)

    gradient = rulekit.grad(g, argnums=tuple(range(len(active))))

    def moved(h: float) -> list[Any]:
        """x + h·v, laid out as the round lays x out."""
        shifted = list(vals)
        for i, v in zip(inputs, vs, strict=True):
            y = np.asarray(np.asarray(vals[i]) + h * np.reshape(v, np.shape(vals[i])))
            shifted[i] = y if isinstance(vals[i], np.ndarray) else type(vals[i])(y[()])
        full = build(shifted)
        return [full[i] for i in active]

    def along(h: float) -> list[np.ndarray]:
        plus, minus = gradient(*moved(h)), gradient(*moved(-h))
        return [(np.asarray(p) - np.asarray(m)) / (2 * h) for p, m in zip(plus, minus, strict=True)]

    try:
        ref, ref2 = along(_H2), along(2 * _H2)
    except (rulekit.TracingError, rulekit.MissingRuleError):
        return None  # (the first-order check reports the gradient's own refusals)
    scale = 1.0 + max((float(np.max(np.abs(r), initial=0.0)) for r in ref), default=0.0)
    gap = [np.abs(a - b) for a, b in zip(ref, ref2, strict=True)]
    if any(float(np.max(d, initial=0.0)) > 1e-3 * scale for d in gap):
        stats["hvp ill-conditioned"] += 1
        return None
    for mode in HVP_MODES:
        try:
            hv = rulekit.hvp(g, tuple(xs[i] for i in active), tuple(vs), mode=mode)[1]
        except (rulekit.TracingError, rulekit.MissingRuleError):
            stats["hvp refused"] += 1  # (a clear error, never a wrong value: see the doc)
            continue
        hvs = hv if len(active) > 1 else (hv,)
        stats["hvps compared"] += 1
        for k, (got, want, d) in enumerate(zip(hvs, ref, gap, strict=True)):
            tol = 2 * d + 1e-7 * scale
            err = np.abs(np.asarray(got, np.float64) - want)
            if np.shape(got) != np.shape(want) or np.any(err > tol):
                return f"wrong Hessian-vector product (hvp, {mode})", [
                    f"# v = {[np.asarray(v).tolist() for v in vs]}",
                    f"# rulekit.hvp(g, active inputs, v, mode={mode!r})[1][{k}]: "
                    f"{np.asarray(got).tolist()!r}",
                    f"# differences of the gradient along v: {np.asarray(want).tolist()!r} "
                    f"(max |error| {float(np.max(err, initial=0)):.3g}, tolerance "
                    f"{float(np.max(tol, initial=0)):.3g})",
                ]
    return None
