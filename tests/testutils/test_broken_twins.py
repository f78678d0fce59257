"""Verdicts both ways (issue #12): correct rules pass, their one-defect twins fail the right check.

The rules live in `broken_twins.py` beside this file. Each original passes every
check (0-d inputs, broadcasting, a stateful in-place GEMM in Mooncake's
convention, a BLAS rule that may copy C-ordered operands as the primal does);
each twin differs from one of them in one place and must be rejected by the
check its defect breaks, with the argument named where one is concerned.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from typing import Any

import numpy as np
import pytest

from rulekit import StatefulRRule
from testutils import RuleCheckError, check_rule


def _load() -> Any:
    path = pathlib.Path(__file__).with_name("broken_twins.py")
    spec = importlib.util.spec_from_file_location("broken_twins", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["broken_twins"] = module
    spec.loader.exec_module(module)
    return module


bt = _load()
RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 4))
Y = RNG.normal(size=(3, 4))
Z = X + 1j * Y
X0 = np.array(0.7)
A, B, C = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 5)), RNG.normal(size=(3, 5))
BIAS = RNG.normal(size=4)


# -- correct originals ------------------------------------------------------------------------

ORIGINALS = [
    ("softsign", bt.softsign, (X,), bt.softsign_rule),
    ("softsign 0-d", bt.softsign, (X0,), bt.softsign_rule),
    ("softsign float", bt.softsign, (0.3,), bt.softsign_rule),
    ("softsign float32", bt.softsign, (X.astype(np.float32),), bt.softsign_rule),
    ("csquare", bt.csquare, (Z,), bt.csquare_rule),
    ("cube", bt.cube, (X,), bt.CubeRule()),
    ("cube 0-d", bt.cube, (X0,), bt.CubeRule()),
    ("scal_", bt.scal_, (1.5, Y), bt.ScalRule()),
    ("gemm_", bt.gemm_, (0.7, A, B, -1.3, C), bt.GemmRule()),
    ("first_row", bt.first_row, (X,), bt.first_row_rule),
    ("flat_copy", bt.flat_copy, (X,), bt.flat_copy_rule),
    ("add_bias", bt.add_bias, (X, BIAS), bt.add_bias_rule),
    ("total", bt.total, (X,), bt.total_rule),
    ("blas_gemm", bt.blas_gemm, (A, B), bt.BlasGemmRule()),
]


@pytest.mark.parametrize(("name", "f", "args", "rule"), ORIGINALS, ids=[o[0] for o in ORIGINALS])
def test_correct_original_passes_every_check(name: str, f: Any, args: Any, rule: Any) -> None:
    report = check_rule(f, *args, rule=rule)
    for check in ("interface", "mutation", "aliasing", "correctness", "statefulness"):
        assert report.checks[check].startswith("pass"), report
    if isinstance(rule, StatefulRRule):
        assert report.checks["allocation"].startswith("pass"), report
    if any(isinstance(a, np.ndarray) and a.ndim for a in args):
        assert {"F", "strided", "negative"} & set(report.layouts), report.layouts


def test_the_inplace_gemm_refuses_writes_into_a_constant_c_and_allocates_nothing() -> None:
    report = check_rule(bt.gemm_, 0.7, A, B, -1.3, C, rule=bt.GemmRule())
    assert report.refused and all("constant: " in r and "argument 4" in r for r in report.refused)
    assert "refused with TracingError" in report.checks["correctness"]
    assert report.allocations == 0


def test_a_blas_rule_may_copy_c_ordered_operands_as_the_primal_does() -> None:
    report = check_rule(bt.blas_gemm, A, B, rule=bt.BlasGemmRule())
    assert report.allocations == 2 and report.primal_allocations == 3  # (2 copies + its output)
    assert report.checks["allocation"].startswith("pass (2 allocations")
    F = check_rule(bt.blas_gemm, np.asfortranarray(A), np.asfortranarray(B),
                   rule=bt.BlasGemmRule())  # fmt: skip
    assert F.allocations == 0  # nothing to copy


def test_tiny_derivatives_next_to_large_values_pass() -> None:
    """The rounding error of the difference quotient is part of the tolerance (item 1)."""
    check_rule(np.cos, 1e-8)  # the bundled rule; d/dx cos = -1e-8 where cos = 1
    check_rule(np.cos, np.array([1e-8, -2e-8]))
    check_rule(bt.tiny_slope, 2.0, 1e-90, rule=bt.tiny_slope_rule)  # ∂/∂c = x³ = 1e-270
    check_rule(bt.tiny_slope, 2.0, -3.1e-90, rule=bt.tiny_slope_rule)


# -- broken twins -----------------------------------------------------------------------------

F32 = X.astype(np.float32)

TWINS = [
    # (defect, primal, args, rule, check, argument or None, text in the message)
    ("overwrite instead of increment", bt.softsign, (X,), bt.overwrites_fdata, "correctness",
     "argument 0", "overwrote this argument's fdata"),
    ("missing conj for complex", bt.csquare, (Z,), bt.missing_conj, "correctness",
     "argument 0", "wrong cotangent"),
    ("stale per-shape cache (object)", bt.cube, (X,), bt.StaleCacheCube(), "statefulness",
     "argument 0", "other values of the same shape"),
    ("stale per-shape cache (module)", bt.cube, (X,), bt.global_cache_cube, "statefulness",
     "argument 0", "other values of the same shape"),
    ("gradient dropped for non-contiguous inputs", bt.softsign, (X,), bt.contiguous_only,
     "correctness", "argument 0", "[layout: F-ordered copies"),
    ("wrong restoration of a mutated argument", bt.scal_, (1.5, Y), bt.BadRestoreScal(),
     "mutation", "argument 1", "not restored"),
    ("fdata of a mutated argument not restored", bt.scal_, (1.5, Y), bt.ForgetsCotangentScal(),
     "mutation", "argument 1", "cotangent of its value before the call"),
    ("a view where numpy copies", bt.flat_copy, (X,), bt.views_a_copy, "aliasing", None,
     "is a view"),
    ("a copy where numpy returns a view", bt.first_row, (X,), bt.copies_a_view, "aliasing",
     None, "is new memory (a copy)"),
    ("interleaving: reads another call's cotangent", bt.cube, (X,), bt.NotReentrantCube(),
     "statefulness", None, "interleaved calls"),
    ("interleaving: one buffer for every pending call", bt.scal_, (1.5, Y),
     bt.SharedBufferScal(), "statefulness", None, "interleaved calls"),
    ("layout of the first call kept for later calls", bt.cube, (X,), bt.FirstLayoutCube(),
     "statefulness", None, "after calls on other layouts"),
    ("allocation in steady state", bt.cube, (X,), bt.AllocatingCube(), "allocation", None,
     "after warm-up"),
    ("allocation beyond the primal's copies", bt.blas_gemm, (A, B), bt.CopyingBlasGemm(),
     "allocation", None, "itself makes 3"),
    ("wrong 0-d handling", bt.softsign, (X0,), bt.arrays_only, "interface", None,
     "fails only for 0-d inputs"),
    ("wrong output dtype", bt.softsign, (F32,), bt.wrong_dtype, "interface", None,
     "dtype float64"),
    ("crashes on a constant argument", bt.softsign, (X,), bt.crashes_on_constant, "interface",
     None, "the pullback raised TypeError"),
    ("broadcast axes not summed", bt.add_bias, (X, BIAS), bt.forgets_broadcast_sum,
     "correctness", "argument 1", "wrong cotangent"),
    ("β̄ of an in-place GEMM forgotten", bt.gemm_, (0.7, A, B, -1.3, C), bt.NoBetaGemm(),
     "correctness", "argument 3", "wrong cotangent"),
    ("refuses a combination that writes into no constant", bt.gemm_, (0.7, A, B, -1.3, C),
     bt.OverRefusingGemm(), "interface", None, "raised TracingError"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("defect", "f", "args", "rule", "check", "argument", "text"), TWINS, ids=[t[0] for t in TWINS]
)
def test_broken_twin_is_rejected_by_the_right_check(
    defect: str, f: Any, args: Any, rule: Any, check: str, argument: str | None, text: str
) -> None:
    bt._SHARED.clear()  # (the module-level cache of one twin starts empty)
    with pytest.raises(RuleCheckError) as info:
        check_rule(f, *args, rule=rule)
    e = info.value
    assert e.check == check, f"{defect}: {e}"
    if argument is not None:
        assert e.argument == argument, f"{defect}: {e}"
    message = str(e)
    assert f"{check} check failed" in message and text in message, message
    assert "\ninput: " in message and "seed 0" in message, message  # the input is named


def test_twins_differ_from_their_originals_in_one_place() -> None:
    """Each twin's original passes on the twin's own inputs (so the defect is what fails)."""
    originals = {id(o[1]): o[3] for o in ORIGINALS}
    for _, f, args, _, _, _, _ in TWINS:
        check_rule(f, *args, rule=originals[id(f)])


def test_failure_names_the_primal_and_the_layout() -> None:
    with pytest.raises(RuleCheckError) as info:
        check_rule(bt.softsign, X, rule=bt.contiguous_only)
    message = str(info.value)
    assert "finite differences of the primal function" in message and "softsign" in message
    assert "F-contiguous" in message  # the input described is the F-ordered copy
    with pytest.raises(RuleCheckError) as info:
        check_rule(bt.softsign, F32, rule=bt.wrong_dtype)
    assert "the primal function broken_twins.softsign gives dtype float32" in str(info.value)
