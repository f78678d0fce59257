"""Tests for rules.scipy.linalg (scipy.linalg wrappers): check_rule over random
well-conditioned inputs, and cho_factor → cho_solve / lu_factor → lu_solve end to end."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.linalg
from fdcheck import check_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions
import rules.numpy.linalg.basic
import rules.scipy.linalg as la
from rules.scipy._routing import original
from testutils import check_rule

FAST = settings(max_examples=12, deadline=None)
sizes = st.integers(1, 4)
seeds = st.integers(0, 2**16)


def wellcond(seed: int, shape: tuple[int, ...], cplx: bool = False) -> Any:
    return rules.numpy.linalg.basic.wellcond(np.random.default_rng(seed), shape, cplx)


def spd(seed: int, shape: tuple[int, ...], cplx: bool = False) -> Any:
    return rules.numpy.linalg.basic.spd(np.random.default_rng(seed), shape, cplx)


def rhs(seed: int, n: int, k: int | None, cplx: bool = False) -> Any:
    rng = np.random.default_rng(seed + 1)
    b = rng.normal(size=n if k is None else (n, k))
    return b + 1j * rng.normal(size=b.shape) if cplx else b


@FAST
@given(sizes, st.sampled_from([None, 2]), st.booleans(), st.sampled_from([0, 1, 2, "T"]),
       st.booleans(), st.booleans(), seeds)  # fmt: skip
def test_solve_triangular(n: int, k: Any, lower: bool, trans: Any, unit: bool, cplx: bool,
                          seed: int) -> None:  # fmt: skip
    a = wellcond(seed, (n, n), cplx)  # the other triangle is garbage scipy must not read
    kw = {"lower": lower, "trans": trans, "unit_diagonal": unit}
    check_rule(la.solve_triangular, a, rhs(seed, n, k, cplx), kwargs=kw)


@FAST
@given(sizes, st.sampled_from([None, 2]), st.booleans(), st.booleans(), seeds)
def test_cho_factor_cho_solve(n: int, k: Any, lower: bool, cplx: bool, seed: int) -> None:
    a = spd(seed, (n, n), cplx)
    check_rule(la.cho_factor, a, kwargs={"lower": lower})
    check_rule(la.cho_solve, scipy.linalg.cho_factor(a, lower=lower), rhs(seed, n, k, cplx))
    check_rule(la.cholesky, a, kwargs={"lower": lower})


@FAST
@given(sizes, st.sampled_from([None, 2]), st.sampled_from([0, 1, 2]), st.booleans(), seeds)
def test_lu_factor_lu_solve(n: int, k: Any, trans: int, cplx: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n)) + n * np.diag(rng.choice([-1, 1], n))  # pivots get swapped
    a = np.roll(a, 1, axis=0) + (1j * rng.normal(size=(n, n)) if cplx else 0)
    check_rule(la.lu_factor, a)
    check_rule(la.lu_solve, scipy.linalg.lu_factor(a), rhs(seed, n, k, cplx),
               kwargs={"trans": trans})  # fmt: skip


@FAST
@given(sizes, st.sampled_from([(), (2,)]), st.booleans(), seeds)
def test_expm_inv_det_solve(n: int, batch: tuple[int, ...], cplx: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(*batch, n, n)) + (1j * rng.normal(size=(*batch, n, n)) if cplx else 0)
    check_rule(la.expm, a)
    w = wellcond(seed, (*batch, n, n), cplx)
    check_rule(la.inv, w)
    check_rule(la.det, w)
    check_rule(la.solve, w, rng.normal(size=(*batch, n, 2)) + 0j * cplx)


@settings(max_examples=6, deadline=None)
@given(st.integers(1, 3), seeds)
def test_logm(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    check_rule(la.logm, np.eye(n) + 0.3 * rng.normal(size=(n, n)) / n)
    check_rule(la.logm, spd(seed, (n, n)))


@pytest.mark.parametrize("assume_a", ["pos", "sym", "her", "gen", "lower triangular"])
@pytest.mark.parametrize("lower", [False, True])
def test_solve_and_inv_structures(assume_a: str, lower: bool) -> None:
    a = spd(7, (3, 3), cplx=assume_a == "her")
    if assume_a == "lower triangular":
        a = np.tril(wellcond(7, (3, 3)))
    b = rhs(7, 3, None, cplx=assume_a == "her")
    kw = {"assume_a": assume_a, "lower": lower}
    check_rule(la.solve, a, b, kwargs=kw)
    check_rule(la.inv, a, kwargs=kw)


# -- end to end through the engine: the factorization flows between the two calls -------------


@pytest.mark.parametrize("lower", [False, True])
def test_cho_factor_then_cho_solve_end_to_end(lower: bool) -> None:
    a, b = spd(20, (4, 4)), rhs(20, 4, 2)
    w = np.random.default_rng(21).normal(size=(4, 2))

    def f(a: Any, b: Any) -> Any:
        c = la.cho_factor(a, lower=lower)
        return np.einsum("ij,ij", la.cho_solve(c, b), w)

    check_grads(f, a, b)  # reads one triangle of a: the gradient is exact for that


@pytest.mark.parametrize("trans", [0, 1])
def test_lu_factor_then_lu_solve_end_to_end(trans: int) -> None:
    rng = np.random.default_rng(22)
    a, b, w = rng.normal(size=(4, 4)), rng.normal(size=4), rng.normal(size=4)

    def f(a: Any, b: Any) -> Any:
        lu_piv = la.lu_factor(a)
        x = la.lu_solve(lu_piv, b, trans=trans)
        return np.einsum("i,i", la.lu_solve(lu_piv, x), w)  # the factors are used twice

    check_grads(f, a, b)


def test_plain_calls_go_straight_to_scipy() -> None:
    a = spd(23, (3, 3))
    for name in ["cho_factor", "expm", "cholesky"]:
        wrapper, routed = getattr(la, name), getattr(scipy.linalg, name)
        own = original(routed)  # scipy's own function, behind the routed public name
        assert wrapper.fn is own and own is not routed
        assert routed.__rulekit_primitive__ is wrapper  # the public name routes to this wrapper
        assert routed.__doc__ == own.__doc__ and routed.__name__ == own.__name__
    # plain calls, through the wrapper and through the routed name, return scipy's results
    # bit for bit
    own_c, own_lower = original(scipy.linalg.cho_factor)(a)
    for c, lower in (la.cho_factor(a), scipy.linalg.cho_factor(a)):
        np.testing.assert_array_equal(c, own_c, strict=True)
        assert lower is own_lower
    own_e = original(scipy.linalg.expm)(a / 10)
    np.testing.assert_array_equal(la.expm(a / 10), own_e, strict=True)
    np.testing.assert_array_equal(scipy.linalg.expm(a / 10), own_e, strict=True)


def test_traced_calls_through_scipy_names() -> None:
    """The routed public name differentiates; scipy's own function, bound before the routing
    (`from scipy.linalg import cholesky` run earlier), refuses naming the fix."""
    a = spd(24, (3, 3))
    w = np.random.default_rng(25).normal(size=(3, 3))
    check_grads(lambda a: np.einsum("ij,ij", scipy.linalg.cholesky(a, lower=True), w), a)
    check_grads(lambda a: np.einsum("ij,ij", scipy.linalg.expm(a / 10), w), a)

    def solve(a: Any, b: Any) -> Any:  # the factorization flows between the two routed calls
        return np.einsum("i,i", scipy.linalg.cho_solve(scipy.linalg.cho_factor(a), b), w[0])

    check_grads(solve, a, w[1])
    own = original(scipy.linalg.cholesky)
    with pytest.raises(rulekit.TracingError) as info:
        rulekit.grad(lambda a: np.sum(own(a)))(a)
    msg = str(info.value)
    assert "Fix: call scipy.linalg.cholesky(...) through its module, or " in msg, msg
    assert "rules.scipy.linalg.cholesky(...)" in msg, msg
