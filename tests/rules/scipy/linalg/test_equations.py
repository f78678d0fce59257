"""Tests for rules.scipy.linalg (solve_banded, solve_sylvester, sqrtm): check_rule over band
widths, right-hand sides, dtypes and stacks; and the engine against finite differences."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import scipy.linalg
from fdcheck import check_grads, fd_grad
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions
import rules.numpy.linalg.basic
from rules.scipy.linalg import equations as L
from testutils import check_rule

FAST = settings(max_examples=12, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
cplx_or_f32 = st.sampled_from(["f64", "f32", "c128"])


def cast(x: np.ndarray, kind: str, rng: np.random.Generator) -> Any:
    if kind == "f32":
        return x.astype(np.float32)
    if kind == "c128":
        return x + 0.5j * rng.normal(size=x.shape)
    return x


# -- solve_banded ---------------------------------------------------------------------------------


@FAST
@given(st.integers(0, 2), st.integers(0, 2), st.integers(1, 6), st.sampled_from([None, 1, 2]),
       cplx_or_f32, seeds)  # fmt: skip
def test_solve_banded(lower: int, upper: int, m: int, k: Any, kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ab = cast(L._banded(rng, lower, upper, m), kind, rng)
    b = cast(rng.normal(size=m if k is None else (m, k)), kind, rng)
    check_rule(L.solve_banded, (lower, upper), ab, b)


def test_solve_banded_stack_and_options() -> None:
    rng = np.random.default_rng(1)
    ab = np.stack([L._banded(rng, 1, 2, 4) for _ in range(2)])
    check_rule(L.solve_banded, (1, 2), ab, rng.normal(size=(2, 4, 3)))  # scipy's batching
    ab, b = L._banded(rng, 2, 0, 5), rng.normal(size=5)
    check_rule(L.solve_banded, [2, 0], ab, b, kwargs={"check_finite": False})
    # overwrite_* are permissions (the contents afterwards are unspecified): the rule does not
    # forward them, so nothing is mutated and the gradient is that of the plain call.
    kw = {"overwrite_ab": True, "overwrite_b": True}
    ab0, b0 = ab.copy(), b.copy()
    g = rulekit.grad(lambda b: np.sum(L.solve_banded((2, 0), ab, b, **kw)))(b)
    assert np.array_equal(ab, ab0) and np.array_equal(b, b0)
    assert np.allclose(
        g, fd_grad(lambda b: np.sum(scipy.linalg.solve_banded((2, 0), ab, b)), (b,), 0)
    )


def test_solve_banded_unused_corners_get_no_cotangent() -> None:
    """ab[u + i − j, j] outside 0 ≤ i < M is never read by scipy: zero cotangent there."""
    rng = np.random.default_rng(2)
    ab, b = L._banded(rng, 2, 1, 4), rng.normal(size=4)
    g = rulekit.grad(lambda ab: np.sum(L.solve_banded((2, 1), ab, b) ** 2))(ab)
    assert g[0, 0] == 0 and g[2, 3] == 0 and g[3, 2] == 0 and g[3, 3] == 0
    dense = np.zeros((4, 4))  # and it equals the dense solve's gradient on the band
    for i in range(4):
        for j in range(max(0, i - 2), min(4, i + 2)):
            dense[i, j] = ab[1 + i - j, j]
    gd = rulekit.grad(lambda a: np.sum(rules.numpy.linalg.basic.np.linalg.solve(a, b) ** 2))(dense)
    for i in range(4):
        for j in range(max(0, i - 2), min(4, i + 2)):
            assert np.isclose(g[1 + i - j, j], gd[i, j])


# -- solve_sylvester ------------------------------------------------------------------------------


@FAST
@given(st.integers(1, 4), st.integers(1, 4), st.sampled_from([(), (2,)]), cplx_or_f32, seeds)
def test_solve_sylvester(n: int, m: int, batch: Any, kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = cast(rules.numpy.linalg.basic.wellcond(rng, (*batch, n, n)), kind, rng)
    b = cast(rules.numpy.linalg.basic.wellcond(rng, (*batch, m, m)), kind, rng)
    q = cast(rng.normal(size=(*batch, n, m)), kind, rng)
    check_rule(L.solve_sylvester, a, b, q)


def test_solve_sylvester_mixed_real_complex() -> None:
    """Real A and B with a complex Q (and the other mixes): A and B get the real part of their
    cotangents. scipy 1.17 gets these wrong when a real A or B has complex eigenvalues (its
    real Schur factor goes to the complex ztrsyl); the wrapper computes them in complex."""
    rng = np.random.default_rng(3)
    a = np.array([[1.0, -2.0, 0.0], [2.0, 1.0, 0.5], [0.0, 0.3, 3.0]])  # eigenvalues 1 ± 2i, ...
    b = rules.numpy.linalg.basic.wellcond(rng, (2, 2))
    q = rng.normal(size=(3, 2)) + 1j * rng.normal(size=(3, 2))
    for args in ((a, b, q), (a + 0.5j, b, q.real), (a, b + 0.5j, q.real)):
        x = L.solve_sylvester(*args)
        assert np.allclose(args[0] @ x + x @ args[1], args[2], atol=1e-12)
        check_rule(L.solve_sylvester, *args)


# -- sqrtm ----------------------------------------------------------------------------------------


@FAST
@given(st.integers(1, 4), st.sampled_from([(), (2,)]), st.sampled_from(["spd", "general", "c"]),
       st.booleans(), seeds)  # fmt: skip
def test_sqrtm(n: int, batch: Any, kind: str, f32: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (*batch, n, n)
    if kind == "spd":
        a = rules.numpy.linalg.basic.spd(rng, shape)
    elif kind == "general":  # eigenvalues near 1: away from the branch cut and from 0
        a = np.eye(n) + 0.3 * rng.normal(size=shape)
    else:
        a = np.eye(n) + 0.3 * (rng.normal(size=shape) + 1j * rng.normal(size=shape))
    check_rule(L.sqrtm, a.astype(np.complex64 if kind == "c" else np.float32) if f32 else a)


def test_sqrtm_negative_eigenvalue_and_disp() -> None:
    """A real matrix with a negative eigenvalue has a complex principal root; Ā is real."""
    a = np.array([[-2.0, 1.0], [0.5, 3.0]])
    assert np.iscomplexobj(scipy.linalg.sqrtm(a))
    check_rule(L.sqrtm, a)
    g = rulekit.grad(lambda a: np.sum(np.abs(L.sqrtm(a)) ** 2))(a)
    assert g.dtype == np.float64
    assert np.allclose(g, fd_grad(lambda a: np.sum(np.abs(scipy.linalg.sqrtm(a)) ** 2), (a,), 0))
    with warnings.catch_warnings():  # disp= is deprecated in scipy (a DeprecationWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        check_rule(L.sqrtm, rules.numpy.linalg.basic.spd(np.random.default_rng(4), (3, 3)), False)


def test_sqrtm_adjoint_is_the_sylvester_solution() -> None:
    """Ā solves Yᴴ Ā + Ā Yᴴ = Ȳ."""
    rng = np.random.default_rng(5)
    a, ybar = rules.numpy.linalg.basic.spd(rng, (3, 3)), rng.normal(size=(3, 3))
    _, (g,) = rulekit.value_and_pullback(L.sqrtm, ybar, a)
    y = scipy.linalg.sqrtm(a)
    assert np.allclose(y.T @ g + g @ y.T, ybar)


# -- the engine -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cplx", [False, True])
def test_engine(cplx: bool) -> None:
    rng = np.random.default_rng(6)
    ab, b = L._banded(rng, 1, 1, 4), rng.normal(size=(4, 2))
    a, c = (
        rules.numpy.linalg.basic.wellcond(rng, (3, 3)),
        rules.numpy.linalg.basic.wellcond(rng, (2, 2)),
    )
    q = rng.normal(size=(3, 2)) + (0.5j * rng.normal(size=(3, 2)) if cplx else 0)

    def loss(ab: Any, b: Any, a: Any, c: Any) -> Any:
        x = L.solve_banded((1, 1), ab, b)  # (4, 2)
        s = L.solve_sylvester(a, c, q * np.sum(x))
        r = L.sqrtm(a @ a.T + np.eye(3))
        return np.sum(np.abs(s) ** 2) + np.einsum("ij,ij->", r, a)

    check_grads(loss, ab, b, a, c)
