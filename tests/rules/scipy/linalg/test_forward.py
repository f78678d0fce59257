"""Forward rules and differentiable pullbacks of scipy.linalg (rules.scipy.linalg.forward*):
finite differences of the frule in every layout, the vjp rule against the frule and the
reverse rule, and traceability (the reverse engine differentiates both rule bodies). The
harness is tests/rules/numpy/linalg/test_forward.py's.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from typing import Any

import numpy as np
import pytest
import scipy.linalg as sl

import rulekit
import rules.scipy.linalg as w
from rulekit import Dual
from rules.numpy.linalg.basic import spd, wellcond

_path = pathlib.Path(__file__).parents[2] / "numpy" / "linalg" / "test_forward.py"
_spec = importlib.util.spec_from_file_location("_linalg_forward_harness", _path)
assert _spec is not None and _spec.loader is not None
H = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
if not hasattr(H, "Case"):
    _spec.loader.exec_module(H)
Case = H.Case

R = np.random.default_rng(2)
n_ = R.normal
E: dict[str, Any] = {"diff": (0, 1)}


def tri(shape: tuple[int, ...], lower: bool, complex_: bool = False) -> Any:
    a = wellcond(R, shape, complex_)
    return np.tril(a) if lower else np.triu(a)


CASES = [
    Case("st-lower-vec", w.solve_triangular, [tri((3, 3), True), n_(size=3)], {"lower": True}, **E),
    Case("st-upper-mat", w.solve_triangular, [tri((3, 3), False), n_(size=(3, 2))], **E),
    Case(
        "st-trans-T",
        w.solve_triangular,
        [tri((3, 3), True), n_(size=(3, 2))],
        {"lower": True, "trans": "T"},
        **E,
    ),
    Case("st-full-A", w.solve_triangular, [wellcond(R, (3, 3)), n_(size=3)], {"trans": 1}, **E),
    Case(
        "st-unit",
        w.solve_triangular,
        [wellcond(R, (3, 3)), n_(size=3)],
        {"unit_diagonal": True},
        **E,
    ),
    Case(
        "st-stack",
        w.solve_triangular,
        [tri((2, 3, 3), True), n_(size=(2, 3, 2))],
        {"lower": True},
        **E,
    ),
    Case(
        "st-c-C",
        w.solve_triangular,
        [wellcond(R, (3, 3), True), n_(size=3) + 1j],
        {"trans": "C", "lower": True},
        **E,
    ),
    Case(
        "st-c-T",
        w.solve_triangular,
        [wellcond(R, (3, 3), True), n_(size=3) + 1j],
        {"trans": 1},
        **E,
    ),
    Case(
        "st-f32",
        w.solve_triangular,
        [tri((3, 3), True).astype("f4"), n_(size=3).astype("f4")],
        {"lower": True},
        rtol=2e-3,
        nested=False,
        **E,
    ),
    Case("cholesky", w.cholesky, [spd(R, (3, 3))]),
    Case("cholesky-lower", w.cholesky, [spd(R, (3, 3)), True]),
    Case("cholesky-stack", w.cholesky, [spd(R, (2, 3, 3))], {"lower": True}),
    Case("cholesky-c", w.cholesky, [spd(R, (3, 3), True)]),
    Case("cho_factor", w.cho_factor, [spd(R, (3, 3))], skip_out=(1,)),
    Case("cho_factor-lower-c", w.cho_factor, [spd(R, (3, 3), True), True], skip_out=(1,)),
    Case("cho_solve", w.cho_solve, [sl.cho_factor(spd(R, (3, 3))), n_(size=3)], **E),
    Case(
        "cho_solve-lower",
        w.cho_solve,
        [sl.cho_factor(spd(R, (3, 3)), lower=True), n_(size=(3, 2))],
        **E,
    ),
    Case("cho_solve-c", w.cho_solve, [sl.cho_factor(spd(R, (3, 3), True)), n_(size=3) + 1j], **E),
    Case(
        "cho_solve-stack", w.cho_solve, [sl.cho_factor(spd(R, (2, 3, 3))), n_(size=(2, 3, 1))], **E
    ),
    Case("inv", w.inv, [wellcond(R, (3, 3))]),
    Case("inv-stack", w.inv, [wellcond(R, (2, 3, 3))]),
    Case("inv-pos", w.inv, [spd(R, (3, 3))], {"assume_a": "pos", "lower": True}),
    Case("inv-her", w.inv, [spd(R, (3, 3), True)], {"assume_a": "her"}),
    Case("inv-upper", w.inv, [tri((3, 3), False)], {"assume_a": "upper triangular"}),
    Case("solve", w.solve, [wellcond(R, (3, 3)), n_(size=3)], **E),
    Case("solve-T", w.solve, [wellcond(R, (3, 3)), n_(size=(3, 2))], {"transposed": True}, **E),
    Case("solve-c", w.solve, [wellcond(R, (3, 3), True), n_(size=(3, 2)) + 1j], **E),
    Case("solve-stack", w.solve, [wellcond(R, (2, 3, 3)), n_(size=(2, 3, 2))], **E),
    Case("solve-pos", w.solve, [spd(R, (3, 3)), n_(size=3)], {"assume_a": "pos"}, **E),
    Case(
        "solve-her",
        w.solve,
        [spd(R, (3, 3), True), n_(size=3) + 1j],
        {"assume_a": "her", "lower": True},
        **E,
    ),
    Case(
        "solve-sym-c",
        w.solve,
        [wellcond(R, (3, 3), True) * (1 + np.eye(3)), n_(size=3) + 1j],
        {"assume_a": "sym"},
        **E,
    ),
    Case(
        "solve-lower",
        w.solve,
        [tri((3, 3), True), n_(size=3)],
        {"assume_a": "lower triangular"},
        **E,
    ),
    Case("det", w.det, [wellcond(R, (3, 3))]),
    Case("det-stack", w.det, [wellcond(R, (2, 3, 3))]),
    Case("det-c", w.det, [wellcond(R, (3, 3), True)]),
    Case("lu_factor", w.lu_factor, [n_(size=(4, 4))], skip_out=(1,)),
    Case("lu_factor-stack", w.lu_factor, [n_(size=(2, 3, 3))], skip_out=(1,)),
    Case("lu_solve", w.lu_solve, [sl.lu_factor(n_(size=(3, 3))), n_(size=3)], **E),
    Case(
        "lu_solve-T",
        w.lu_solve,
        [sl.lu_factor(n_(size=(3, 3))), n_(size=(3, 2))],
        {"trans": 1},
        **E,
    ),
    Case(
        "lu_solve-c-C",
        w.lu_solve,
        [sl.lu_factor(wellcond(R, (3, 3), True)), n_(size=3) + 0j],
        {"trans": 2},
        **E,
    ),
    Case("expm", w.expm, [n_(size=(3, 3))]),
    Case("expm-stack", w.expm, [n_(size=(2, 3, 3))]),
    Case("expm-c", w.expm, [n_(size=(3, 3)) + 1j * n_(size=(3, 3))]),
    Case("logm", w.logm, [np.eye(3) + 0.3 * n_(size=(3, 3))]),
    Case("logm-spd", w.logm, [spd(R, (3, 3))]),
    Case("sqrtm", w.sqrtm, [spd(R, (3, 3))]),
    Case("sqrtm-nonsym", w.sqrtm, [np.eye(3) + 0.4 * n_(size=(3, 3))]),
    Case("sqrtm-c-stack", w.sqrtm, [spd(R, (2, 2, 2), True)]),
    Case(
        "sylvester",
        w.solve_sylvester,
        [wellcond(R, (3, 3)), wellcond(R, (2, 2)), n_(size=(3, 2))],
        diff=(0, 1, 2),
    ),
    Case(
        "sylvester-c",
        w.solve_sylvester,
        [wellcond(R, (2, 2), True), wellcond(R, (2, 2), True), n_(size=(2, 2)) + 0j],
        diff=(0, 1, 2),
    ),
]


@pytest.mark.parametrize("layout", H.LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_frule_matches_finite_differences(case: Any, layout: str) -> None:
    H.check_frule_fd(case, layout)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_vjp_matches_frule_and_rrule(case: Any) -> None:
    H.check_vjp(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.nested], ids=repr)
def test_rules_are_traceable(case: Any) -> None:
    H.check_traceable(case)


def test_plain_scipy_names_reach_the_rules() -> None:
    """scipy.linalg.cholesky is routed to the wrapper the forward rule is registered for; the
    rule reads the upper triangle (scipy's default)."""
    assert sl.cholesky.__rulekit_primitive__ is w.cholesky
    a, d = spd(R, (3, 3)), n_(size=(3, 3))
    got = rulekit.frule(Dual(w.cholesky, None), Dual(a, d)).dx
    lower = np.linalg.cholesky(a)
    dS = np.triu(d, 1) + np.triu(d, 1).T + np.diag(np.diag(d))
    X = np.linalg.solve(lower, np.linalg.solve(lower, dS).T)
    want = (lower @ (np.tril(X, -1) + np.diag(np.diag(X)) / 2)).T
    np.testing.assert_allclose(got, want, rtol=1e-10)
