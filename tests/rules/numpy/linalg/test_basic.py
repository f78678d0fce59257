"""Tests for rules.numpy.linalg.basic and rules.numpy.linalg.decomp (numpy.linalg).

Hypothesis draws well-conditioned inputs of random sizes and runs them through
`testutils.check_rule`; targeted tests cover repeated eigen/singular values,
complex gauge invariance, singular matrices and the tuple-output conventions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.linalg.basic
from rulekit import CoDual, NoFData, NoRData, zero_codual
from rules._support.linalg import DegenerateSpectrumError, GaugeDependentError
from testutils import check_rule

FAST = settings(max_examples=12, deadline=None)
sizes = st.integers(1, 4)
batches = st.sampled_from([(), (2,)])
seeds = st.integers(0, 2**16)


def wellcond(seed: int, shape: tuple[int, ...], cplx: bool = False) -> Any:
    return rules.numpy.linalg.basic.wellcond(np.random.default_rng(seed), shape, cplx)


def spd(seed: int, shape: tuple[int, ...], cplx: bool = False) -> Any:
    return rules.numpy.linalg.basic.spd(np.random.default_rng(seed), shape, cplx)


def distinct_sym(seed: int, n: int, batch: tuple[int, ...] = (), cplx: bool = False) -> Any:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(*batch, n, n)) + (1j * rng.normal(size=(*batch, n, n)) if cplx else 0)
    q = np.linalg.qr(z)[0]
    w = np.arange(1.0, n + 1) + rng.uniform(-0.3, 0.3, n)  # gaps ≥ 0.4
    return (q * w) @ np.conj(np.swapaxes(q, -1, -2))


def distinct_svd(seed: int, m: int, n: int, batch: tuple[int, ...] = (), cplx: bool = False) -> Any:
    rng = np.random.default_rng(seed)
    k = min(m, n)

    def orth(r: int) -> Any:
        z = rng.normal(size=(*batch, r, r)) + (1j * rng.normal(size=(*batch, r, r)) if cplx else 0)
        return np.linalg.qr(z)[0][..., :k]

    s = np.arange(1.0, k + 1) + rng.uniform(-0.3, 0.3, k)
    return (orth(m) * s) @ np.conj(np.swapaxes(orth(n), -1, -2))


# -- hypothesis: check_rule over random well-conditioned inputs ------------------------------


@FAST
@given(sizes, batches, st.booleans(), seeds)
def test_inv(n: int, batch: tuple[int, ...], cplx: bool, seed: int) -> None:
    check_rule(np.linalg.inv, wellcond(seed, (*batch, n, n), cplx))


@FAST
@given(sizes, batches, st.sampled_from([None, 1, 3]), seeds)
def test_solve(n: int, batch: tuple[int, ...], k: int | None, seed: int) -> None:
    rng = np.random.default_rng(seed)
    b = rng.normal(size=n) if k is None else rng.normal(size=(*batch, n, k))
    check_rule(np.linalg.solve, wellcond(seed, (*batch, n, n)), b)


@FAST
@given(sizes, batches, st.booleans(), seeds)
def test_det_slogdet(n: int, batch: tuple[int, ...], cplx: bool, seed: int) -> None:
    a = wellcond(seed, (*batch, n, n), cplx)
    check_rule(np.linalg.det, a)
    check_rule(np.linalg.slogdet, a)


@FAST
@given(sizes, batches, st.booleans(), st.booleans(), seeds)
def test_cholesky(n: int, batch: tuple[int, ...], upper: bool, cplx: bool, seed: int) -> None:
    check_rule(np.linalg.cholesky, spd(seed, (*batch, n, n), cplx), kwargs={"upper": upper})


@FAST
@given(sizes, sizes, batches, st.sampled_from(["reduced", "r"]), st.booleans(), seeds)
def test_qr(m: int, n: int, batch: tuple[int, ...], mode: str, cplx: bool, seed: int) -> None:
    a = distinct_svd(seed, m, n, batch, cplx)  # full rank, well conditioned
    check_rule(np.linalg.qr, a, kwargs={"mode": mode})


@FAST
@given(sizes, batches, st.sampled_from(["L", "U"]), seeds)
def test_eigh(n: int, batch: tuple[int, ...], uplo: str, seed: int) -> None:
    a = distinct_sym(seed, n, batch)
    check_rule(np.linalg.eigh, a, kwargs={"UPLO": uplo})
    check_rule(np.linalg.eigvalsh, a, kwargs={"UPLO": uplo})


@FAST
@given(sizes, batches, seeds)
def test_eigvalsh_complex(n: int, batch: tuple[int, ...], seed: int) -> None:
    check_rule(np.linalg.eigvalsh, distinct_sym(seed, n, batch, cplx=True))


@FAST
@given(sizes, sizes, batches, seeds)
def test_svd(m: int, n: int, batch: tuple[int, ...], seed: int) -> None:
    a = distinct_svd(seed, m, n, batch)
    check_rule(np.linalg.svd, a, kwargs={"full_matrices": False})
    check_rule(np.linalg.svd, a, kwargs={"compute_uv": False})
    check_rule(np.linalg.svdvals, distinct_svd(seed, m, n, batch, cplx=True))


@FAST
@given(sizes, sizes, st.booleans(), seeds)
def test_pinv_lstsq(m: int, n: int, cplx: bool, seed: int) -> None:
    a = distinct_svd(seed, m, n, cplx=cplx)
    check_rule(np.linalg.pinv, a)
    b = np.random.default_rng(seed).normal(size=m)
    check_rule(np.linalg.lstsq, a.real.copy(), b)


# -- outputs: types, fdata, dy ----------------------------------------------------------------


def _run(f: Any, *args: Any, **kwargs: Any) -> tuple[CoDual, Any, list[CoDual]]:
    cds = [zero_codual(a) for a in args]
    y, pb = rulekit.rrule(zero_codual(f), *cds, **kwargs)
    return y, pb, cds


def test_namedtuple_outputs_keep_numpys_type_with_plain_tuple_fdata() -> None:
    a = distinct_sym(1, 3)
    for f, kw in [(np.linalg.eigh, {}), (np.linalg.svd, {}), (np.linalg.qr, {})]:
        y, _, _ = _run(f, a, **kw)
        assert type(y.x) is type(f(a))
        assert type(y.dx) is tuple and all(isinstance(d, np.ndarray) for d in y.dx)
    y, pb, (ca,) = _run(np.linalg.slogdet, a)  # 2-D: numpy scalars, dy is (s̄, l̄)
    assert type(y.x) is type(np.linalg.slogdet(a)) and isinstance(y.dx, NoFData)
    assert pb((np.float64(0.0), np.float64(1.0)))[1] == NoRData()
    np.testing.assert_allclose(ca.dx, np.linalg.inv(a).T, rtol=1e-12)


def test_primal_values_match_numpy() -> None:
    a, b = wellcond(2, (4, 4)), np.random.default_rng(2).normal(size=(4, 2))
    assert np.array_equal(_run(np.linalg.solve, a, b)[0].x, np.linalg.solve(a, b))
    assert np.array_equal(_run(np.linalg.inv, a)[0].x, np.linalg.inv(a))
    np.testing.assert_allclose(_run(np.linalg.det, a)[0].x, np.linalg.det(a), rtol=1e-14)


def test_solve_singular_raises_like_numpy() -> None:
    with pytest.raises(np.linalg.LinAlgError):
        _run(np.linalg.solve, np.ones((3, 3)), np.ones(3))


def test_det_gradient_at_singular_matrix_is_the_cofactor_matrix() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 3)) @ rng.normal(size=(3, 4))  # rank 3: det = 0, adj(A) ≠ 0
    _, pb, (ca,) = _run(np.linalg.det, a)
    pb(np.float64(1.0))
    cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                     for j in range(4)] for i in range(4)])  # fmt: skip
    np.testing.assert_allclose(ca.dx, cof)  # (relative error measured: 2e-15)


# -- repeated eigenvalues / singular values ---------------------------------------------------


def test_eigh_repeated_eigenvalues_raise_for_vector_cotangents() -> None:
    a = np.diag([1.0, 2.0, 2.0])
    y, pb, _ = _run(np.linalg.eigh, a)
    y.dx[1][...] = np.random.default_rng(4).normal(size=(3, 3))
    with pytest.raises(DegenerateSpectrumError, match="repeated"):
        pb(NoRData())


def test_eigh_repeated_eigenvalues_fine_for_values_and_invariant_cotangents() -> None:
    q = np.linalg.qr(np.random.default_rng(5).normal(size=(3, 3)))[0]
    a = (q * [1.0, 2.0, 2.0]) @ q.T
    y, pb, (ca,) = _run(np.linalg.eigh, a)
    y.dx[0][...] = [1.0, 3.0, 3.0]
    pb(NoRData())
    assert np.all(np.isfinite(ca.dx))
    # f(A) = ⟨W, P⟩ with P the projector on the repeated eigenspace: V̄ = 2WV (restricted)
    w = np.random.default_rng(6).normal(size=(3, 3))
    w = w + w.T

    def proj_loss(m: Any) -> float:
        v = np.linalg.eigh(m)[1][:, 1:]
        return float(np.sum(w * (v @ v.T)))

    y, pb, (ca,) = _run(np.linalg.eigh, a)
    v = y.x.eigenvectors
    y.dx[1][:, 1:] = 2 * w @ v[:, 1:]
    pb(NoRData())
    d = np.random.default_rng(7).normal(size=(3, 3))
    h = 1e-6
    fd = (proj_loss(a + h * d) - proj_loss(a - h * d)) / (2 * h)
    # fdcheck's default tolerances (the error measured: 1.3e-9, |fd| = 3.4)
    assert np.isclose(np.sum(ca.dx * d), fd, rtol=1e-6, atol=1e-8)


def test_svd_repeated_singular_values_raise_for_vector_cotangents() -> None:
    a = np.diag([3.0, 1.0, 1.0])[:, :3]
    y, pb, _ = _run(np.linalg.svd, a)
    y.dx[0][...] = np.random.default_rng(8).normal(size=(3, 3))
    with pytest.raises(DegenerateSpectrumError, match="repeated"):
        pb(NoRData())
    y, pb, (ca,) = _run(np.linalg.svd, a, compute_uv=False)
    y.dx[...] = 1.0
    pb(NoRData())
    np.testing.assert_allclose(ca.dx, np.eye(3))  # d Σs / dA = U Vᵀ


def test_svd_full_matrices_extra_vectors_raise() -> None:
    a = distinct_svd(9, 4, 2)
    y, pb, _ = _run(np.linalg.svd, a)  # full_matrices=True: U is 4×4
    y.dx[0][:, 3] = 1.0
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        pb(NoRData())


# -- complex eigenvectors: phase-invariant cotangents -----------------------------------------


def _phase_invariant_check(f: Any, a: Any, which: int, make: Any) -> None:
    """Check Ā for L(A) = Σ W∘|V|² (V = output `which`), invariant under column phases."""
    rng = np.random.default_rng(10)
    w = rng.normal(size=np.shape(f(a)[which]))

    def loss(m: Any) -> float:
        return float(np.sum(w * np.abs(f(m)[which]) ** 2))

    y, pb, (ca,) = _run(f, a)
    y.dx[which][...] = 2 * w * y.x[which]
    pb(NoRData())
    d = make(rng)
    h = 1e-6
    fd = (loss(a + h * d) - loss(a - h * d)) / (2 * h)
    # fdcheck's default tolerances (the errors measured: ≤ 2.3e-10, |fd| ≈ 0.3-0.45)
    assert np.isclose(rulekit.inner(ca.dx, d), fd, rtol=1e-6, atol=1e-8)


def test_complex_eigh_and_svd_phase_invariant_losses() -> None:
    def cplx(r: Any) -> Any:
        return r.normal(size=(3, 3)) + 1j * r.normal(size=(3, 3))

    _phase_invariant_check(np.linalg.eigh, distinct_sym(11, 3, cplx=True), 1, cplx)
    _phase_invariant_check(np.linalg.svd, distinct_svd(12, 3, 3, cplx=True), 0, cplx)
    _phase_invariant_check(np.linalg.svd, distinct_svd(13, 3, 3, cplx=True), 2, cplx)


def test_complex_eigh_phase_dependent_cotangent_raises() -> None:
    y, pb, _ = _run(np.linalg.eigh, distinct_sym(14, 3, cplx=True))
    y.dx[1][...] = 1j * y.x.eigenvectors  # pure phase direction
    with pytest.raises(GaugeDependentError):
        pb(NoRData())


def test_svd_hermitian_not_supported() -> None:
    with pytest.raises(NotImplementedError, match="hermitian"):
        _run(np.linalg.svd, distinct_sym(15, 3), hermitian=True)
