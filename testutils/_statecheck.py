"""Checks 5 and 6 of `check_rule`: statefulness (reuse, reentrancy, shape change), allocation.

Both run *one* rule object many times, as the engine does with the rule it
keeps at a call site.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from rulekit import Example, NoRData, StatefulRRule, increment, split_tangent
from testutils._alloc import counting
from testutils._call import Call, Run
from testutils._reference import Reference
from testutils._trees import clone, leaves, same_value, tree_close, tree_map

if TYPE_CHECKING:
    from testutils._check import _Checker

__all__ = ["check_allocation", "check_statefulness", "shrink"]

#: rtol for "two runs of the same rule on the same inputs agree" (BLAS may pick other
#: kernels for other buffer alignments, so not bitwise).
AGREE = {"double": 1e-10, "single": 1e-5, "half": 1e-2}


def check_statefulness(
    ck: _Checker, ref: Reference, make: Callable[[], Any], shape_change: Any
) -> str:
    """Repeated and interleaved calls agree; a change of shape is handled. Returns a status."""
    from testutils._check import RuleCheckError, execute

    call, rule, active = ck.call, make(), ck.all_active()
    tol = AGREE[ref.precision]

    def run(values: list[Any] | None = None) -> Run:
        try:
            return execute(call, ref, rule, active, ref.seeds, values)
        except Exception as e:
            ck.fail("statefulness", f"a repeated call raised {type(e).__name__}: {e}")
            raise  # unreachable

    first = run()
    _agree(ck, run(), first, tol, "a second call of the same rule object")
    notes = []
    b_values = _perturbed(call, ck.seed)
    if b_values is None:
        notes.append("interleaving n/a (no perturbed inputs the primal accepts)")
    else:
        alone = run(clone(b_values))
        ra = Run(call, rule, active, ref.seeds)
        rb = Run(call, rule, active, ref.seeds, clone(b_values))
        try:
            ya, pba = ra.forward()
            yb, pbb = rb.forward()
            rb.y, ra.y = clone(yb.x), clone(ya.x)  # type: ignore[attr-defined]
            from testutils._check import seed_output

            rb.rdata = pbb(seed_output(yb, ref))  # type: ignore[attr-defined]
            ra.rdata = pba(seed_output(ya, ref))  # type: ignore[attr-defined]
        except Exception as e:
            ck.fail("statefulness", f"interleaved calls (forward a, forward b, pullback b, "
                    f"pullback a) raised {type(e).__name__}: {e}")  # fmt: skip
        what = "interleaved calls (forward a, forward b, pullback b, pullback a)"
        _agree(ck, rb, alone, tol, what + ", call b")
        _agree(ck, ra, first, tol, what + ", call a")
    args2, kwargs2, why = _shape_change_args(ck, shape_change)
    if args2 is None:
        notes.append(f"shape change n/a ({why})")
    else:
        sub = type(ck)(
            ck.f, args2, kwargs2, rule, ck.user_rtol, ck.user_atol, ck.seed + 1, ck.reference
        )
        try:
            ref2 = Reference.build(sub.call, sub.seed)
        except Exception as e:
            if shape_change is not None:
                raise ValueError(f"check_rule: the primal rejects shape_change: {e}") from e
            notes.append(f"shape change n/a (the primal rejects smaller inputs: {e})")
        else:
            try:
                sub.check_combination(ref2, rule, sub.all_active())
            except RuleCheckError as e:
                shapes = f"{_shapes(call.values)} → {_shapes(sub.call.values)}"
                ck.fail("statefulness", f"after a change of shape ({shapes}) the {e.check} check "
                        f"failed: {e}")  # fmt: skip
            _agree(ck, run(), first, tol, "a call after a change of shape and back")
    return "pass" if not notes else "pass; " + "; ".join(notes)


def _agree(ck: _Checker, got: Run, want: Run, rtol: float, what: str) -> None:
    parts = [("output", got.y, want.y), ("rdata", got.rdata, want.rdata)]  # type: ignore[attr-defined]
    parts += [(f"fdata of {ck.call.names[i]}", got.fdata[i], want.fdata[i]) for i in got.active]
    parts += [(f"{ck.call.names[i]} after the pullback", v, w)
              for i, (v, w) in enumerate(zip(got.values, want.values, strict=True))]  # fmt: skip
    for name, g, w in parts:
        why = tree_close(g, w, rtol, name)
        if why:
            ck.fail("statefulness", f"{what} disagrees with a fresh call: {why}")


def _perturbed(call: Call, seed: int) -> list[Any] | None:
    """The arguments with every float value scaled by 1 ± 5% (zeros, signs, structure kept)."""
    rng = np.random.default_rng(seed + 7)
    for size in (0.05, 0.005):

        def leaf(v: Any, size: float = size) -> Any:
            if isinstance(v, np.ndarray) and v.dtype.kind in "fc":
                out = clone(v)
                out.flags.writeable = True
                parts = (out.real, out.imag) if v.dtype.kind == "c" else (out,)
                for part in parts:  # (part by part: inf·0 would make a complex inf nan)
                    part *= np.asarray(1 + size * rng.uniform(-1, 1, v.shape), v.real.dtype)
                out.flags.writeable = v.flags.writeable
                return out
            if isinstance(v, (float, np.floating)) and not isinstance(v, bool):
                return type(v)(v * (1 + size * rng.uniform(-1, 1)))
            return clone(v)

        values = [tree_map(v, leaf) for v in call.values]
        if all(same_value(v, w) for v, w in zip(values, call.values, strict=True)):
            return None
        try:
            with np.errstate(all="ignore"):
                y = call.primal([clone(v) for v in values])
        except Exception:
            continue
        if all(np.all(np.isfinite(v)) for _, v in leaves(y) if _is_float(v)):
            return values
    return None


def _is_float(v: Any) -> bool:
    return isinstance(v, (np.ndarray, np.floating, float)) and np.asarray(v).dtype.kind in "fc"


def shrink(x: Any) -> Any:
    """Every float array one element shorter along each axis longer than one."""

    def leaf(v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.dtype.kind in "fc" and v.ndim:
            part = v[tuple(slice(0, n - 1) if n > 1 else slice(None) for n in v.shape)]
            return np.copy(part, order="K")
        return v

    return tree_map(x, leaf)


def _shape_change_args(ck: _Checker, given: Any) -> tuple[Any, Any, str]:
    if isinstance(given, Example):
        return given.args, given.kwargs, ""
    if given is not None:
        return tuple(given), ck.kwargs, ""
    args2 = shrink(ck.args)
    kwargs2 = {k: shrink(v) for k, v in ck.kwargs.items()}
    if _shapes(list(args2) + list(kwargs2.values())) == _shapes(
        list(ck.args) + list(ck.kwargs.values())
    ):
        return None, None, "no float array has an axis longer than one"
    return args2, kwargs2, ""


def _shapes(values: list[Any]) -> str:
    return ", ".join(str(v.shape) for _, v in leaves(values) if isinstance(v, np.ndarray))


def check_allocation(ck: _Checker, ref: Reference, make: Callable[[], Any]) -> tuple[int, str]:
    """Allocations of one warm forward + pullback; a StatefulRRule must make none."""
    rule, active = make(), ck.all_active()
    fpart, rpart = split_tangent(ref.y, ref.ybar)

    def once(run: Run) -> None:
        y, pb = run.forward()
        if y.dx is None:
            pb(NoRData())
        else:
            increment(y.dx, fpart)
            pb(rpart)

    for _ in range(2):
        once(Run(ck.call, rule, active, ref.seeds))
    run = Run(ck.call, rule, active, ref.seeds)
    with counting() as c:
        once(run)
    assert c.result is not None
    n = c.result.count
    if not isinstance(rule, StatefulRRule):
        return n, f"n/a: plain rule ({n} allocations per call; only stateful rules must make none)"
    if n:
        ck.fail(
            "allocation",
            f"after warm-up, forward + pullback allocated {c.result}. A StatefulRRule must "
            "allocate nothing once warm: take outputs and saved copies from its pool "
            "(push/save), work buffers from scratch(...), and accumulate with out=.",
        )
    return n, "pass"
