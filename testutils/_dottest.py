"""The dot-product test of check 2 (and 3, for mutated arguments), and its diagnoses.

For argument j, with the rule's cotangent x̄ⱼ and the finite-difference
right-hand side of `_reference`, at some step h of the sweep

    |⟨x̄ⱼ, ẋⱼ⟩ − rhs(h)| ≤ atol + rtol·max(|⟨x̄ⱼ, ẋⱼ⟩|, |rhs(h)|, B(h)/√n) + R(h)

B(h) is the Cauchy–Schwarz bound of the right-hand side's terms, n the number
of elements involved (a random inner product is ~B/√n), and R(h) the rounding
error of the central differences themselves (`_reference.fd_noise`). When the
test fails, the kit looks for a likely cause it can name: fdata overwritten
instead of incremented, or a complex cotangent conjugated.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from rulekit import NoRData, inner, join_tangent
from testutils._call import Run
from testutils._messages import CONJUGATED, OVERWROTE
from testutils._reference import FDTerm, Reference
from testutils._trees import leaves

if TYPE_CHECKING:
    from testutils._check import _Checker

__all__ = ["UncheckableInput", "dot_tests"]


class UncheckableInput(ValueError):
    """Finite differences of the primal are not finite at any step on these inputs (they
    lie outside its domain, or are infinite): the kit cannot check the rule there."""


def _within(lhs: float, term: FDTerm, active: frozenset[int], rtol: float, atol: float) -> tuple[
    bool, tuple[float, float, float, float, float]
]:  # fmt: skip
    """Whether `lhs` passes at some step, and the best step's (rhs, err, tol, noise, h): the
    one with the smallest error relative to its tolerance."""
    best: tuple[float, float, float, float, float] | None = None
    for step in term.steps:
        rhs, bound, noise = step.rhs(active)
        scale = max(abs(lhs), abs(rhs), bound / math.sqrt(step.size))
        err, tol = abs(lhs - rhs), atol + rtol * scale + noise
        if best is None or err / max(tol, 1e-300) < best[1] / max(best[2], 1e-300):
            best = (rhs, err, tol, noise, step.h)
    assert best is not None
    return best[1] <= best[2], best


def _converges(term: FDTerm, active: frozenset[int]) -> bool:
    """Whether the right-hand sides at the three smallest steps agree to 1e-3 and their
    rounding error (a function that is not differentiable at the point gives values that
    drift with h, or blow up)."""
    parts = [step.rhs(active) for step in term.steps[-3:]]
    if len(parts) < 2:
        return True
    values = [p[0] for p in parts]
    spread = max(values) - min(values)
    return spread <= 1e-3 * max(abs(v) for v in values) + 4 * max(p[2] for p in parts)


def dot_tests(ck: _Checker, ref: Reference, run: Run, sums: dict[int, Any]) -> None:
    """The dot-product test of every active argument of one run (after its pullback)."""
    rtol, atol = ck.tolerances(ref)
    for j in sorted(run.active):
        term = ref.fd.get(j)
        if term is None:
            continue
        if not term.steps:
            raise UncheckableInput(
                f"check_rule: finite differences of {ck.who} along {ck.call.names[j]} "
                "are not finite at any step; choose inputs inside the function's domain."
            )
        xbar = join_tangent(ck.call.values[j], run.fdata[j], sums.get(j, NoRData()))
        lhs = inner(xbar, ref.directions[j])
        ok, (rhs, err, tol, noise, h) = _within(lhs, term, run.active, rtol, atol)
        if ok:
            ref.passed_at[j] = h
            continue
        if not _converges(term, run.active):
            raise UncheckableInput(
                f"check_rule: {ck.who} is not differentiable along {ck.call.names[j]} at this "
                f"input (a kink, jump or branch cut): the pullback gives ⟨x̄, ẋ⟩ = {lhs:.6g}, "
                "and finite differences do not converge as the step shrinks "
                f"({', '.join(f'{st.rhs(run.active)[0]:.3g}' for st in term.steps)}); choose "
                "inputs where it is differentiable." + ck.context
            )
        mutated = j in ref.mutated
        numbers = (
            f"⟨x̄, ẋ⟩ = {lhs:.9g} from the pullback, finite differences of {ck.who} give "
            f"{rhs:.9g} (at the best step, h={h:g}: error {err:.3g} > tolerance {tol:.3g} = "
            f"rtol {rtol:g} × scale + {noise:.3g} rounding of the difference"
            f"{f' + atol {atol:g}' if atol else ''})"
        )
        hint = None if mutated else _diagnose(ck, ref, run, j, xbar, rtol, atol)
        if hint is not None:
            ck.fail("correctness", f"{hint}. Dot-product test: {numbers}", j)
        what = (
            "after the pullback, its fdata is not the cotangent of its value before the call: "
            if mutated
            else "wrong cotangent: "
        )
        ck.fail("mutation" if mutated else "correctness", what + numbers, j)


def _diagnose(
    ck: _Checker, ref: Reference, run: Run, j: int, xbar: Any, rtol: float, atol: float
) -> str | None:
    """A likely cause of argument j's failure: an overwrite, or a conjugated cotangent."""
    seed = ref.seed_tangent(j)
    seeded = [a for _, a in leaves(run.fdata[j]) if isinstance(a, np.ndarray)]
    if seeded and any(np.any(a != 0) for _, a in leaves(ref.seeds[j]) if isinstance(a, np.ndarray)):
        seeds = list(ref.seeds)
        seeds[j] = None
        try:
            from testutils._check import execute

            zero = execute(ck.call, ref, ck.make(), run.active, seeds)
        except Exception:
            zero = None
        if zero is not None:
            alone = [a for _, a in leaves(zero.fdata[j]) if isinstance(a, np.ndarray)]
            seeds = [a for _, a in leaves(ref.seeds[j]) if isinstance(a, np.ndarray)]
            if len(alone) == len(seeded) == len(seeds) and all(
                _lost(a, b, r) for a, b, r in zip(seeded, alone, seeds, strict=True)
            ):
                return OVERWROTE
    if any(np.iscomplexobj(v) for _, v in leaves(xbar)):
        contribution = _minus(xbar, seed)
        flipped = _plus(seed, _conj(contribution))
        ok, _ = _within(inner(flipped, ref.directions[j]), ref.fd[j], run.active, rtol, atol)
        if ok:
            return CONJUGATED
    return None


def _lost(seeded: np.ndarray, alone: np.ndarray, seed: np.ndarray) -> bool:
    """Whether the fdata after a seeded pullback lacks the seed: it equals the unseeded
    result to well within the seed's size, and rounding could not hide a seed that size."""
    size = float(np.max(np.abs(seed), initial=0.0))
    with np.errstate(all="ignore"):
        level = 1e3 * float(np.finfo(alone.dtype).eps) * float(np.max(np.abs(alone), initial=0.0))
        gap = float(np.max(np.abs(seeded - alone), initial=0.0))
    return size > 0 and level < 0.01 * size and gap < 0.01 * size


_NUM = (np.ndarray, np.number, float, complex)


def _tree(op: Any, a: Any, b: Any) -> Any:
    """`op` leaf by leaf over two full tangents (empty tangents count as 0)."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        out = [_tree(op, x, y) for x, y in zip(a, b, strict=True)]
        return tuple(out) if isinstance(a, tuple) else out
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _tree(op, v, b[k]) for k, v in a.items()}
    if not isinstance(a, _NUM) and not isinstance(b, _NUM):
        return a
    return op(a if isinstance(a, _NUM) else 0, b if isinstance(b, _NUM) else 0)


def _minus(a: Any, b: Any) -> Any:
    return _tree(lambda x, y: x - y, a, b)


def _plus(a: Any, b: Any) -> Any:
    return _tree(lambda x, y: x + y, a, b)


def _conj(a: Any) -> Any:
    return _tree(lambda x, _: np.conj(x), a, a)
