"""`scipy_objective`: fun/jac/hessp/hess for scipy.optimize.minimize.

The objective is L2-penalised logistic regression written in plain NumPy,

    L(w) = (1/n) Σᵢ [log(1 + e^{zᵢ}) − yᵢ zᵢ] + (λ/2)‖w‖²,   z = Xw,
    ∇L   = Xᵀ(σ(z) − y)/n + λw,
    ∇²L  = Xᵀ diag(σ(z)(1 − σ(z))) X/n + λI,

checked against a hand-written gradient (itself checked by finite differences) and the
closed-form Hessian.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import scipy.optimize as optimize

from rulekit import ScipyObjective, scipy_objective

LAM = 0.1


def loss(w: Any, X: Any, y: Any) -> Any:
    z = X @ w
    return np.sum(np.logaddexp(0.0, z) - y * z) / X.shape[0] + 0.5 * LAM * np.sum(w * w)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def hand_grad(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.asarray(X.T @ (sigmoid(X @ w) - y) / X.shape[0] + LAM * w)


def hand_hess(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    s = sigmoid(X @ w)
    return np.asarray((X.T * (s * (1 - s))) @ X / X.shape[0] + LAM * np.eye(X.shape[1]))


@pytest.fixture
def data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n, d = 300, 8
    X = rng.standard_normal((n, d))
    p = sigmoid(X @ rng.standard_normal(d))
    return X, (rng.random(n) < p).astype(float)


def fd(f: Any, x: np.ndarray, v: np.ndarray, eps: float = 1e-6) -> Any:
    """Central difference of f at x along v."""
    return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)


def test_hand_gradient_matches_finite_differences(data: Any, rng: np.random.Generator) -> None:
    X, y = data
    w = rng.standard_normal(X.shape[1])
    for _ in range(3):
        v = rng.standard_normal(w.size)
        np.testing.assert_allclose(
            fd(lambda u: loss(u, X, y), w, v), hand_grad(w, X, y) @ v, rtol=1e-7, atol=1e-9
        )


def test_trust_ncg_reaches_the_lbfgs_optimum(data: Any) -> None:
    X, y = data
    obj = scipy_objective(loss, args=(X, y))
    w0 = np.zeros(X.shape[1])
    res = optimize.minimize(obj.fun, w0, jac=obj.jac, hessp=obj.hessp, method="trust-ncg",
                            options={"gtol": 1e-10})  # fmt: skip
    ref = optimize.minimize(loss, w0, args=(X, y), jac=hand_grad, method="L-BFGS-B",
                            options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 1000})  # fmt: skip
    assert res.success, res.message
    np.testing.assert_allclose(res.x, ref.x, rtol=0, atol=1e-6)
    assert np.linalg.norm(hand_grad(res.x, X, y)) < 1e-8
    assert res.fun == pytest.approx(ref.fun, rel=1e-10)
    assert res.nit < 20  # Newton-type: a handful of iterations
    assert obj.nhev > 0 and obj.nfev <= res.nfev + res.njev  # (one evaluation per point)


def test_trust_exact_with_hess_and_newton_cg(data: Any) -> None:
    X, y = data
    obj = scipy_objective(loss, args=(X, y))
    w0 = np.zeros(X.shape[1])
    a = optimize.minimize(obj.fun, w0, jac=obj.jac, hess=obj.hess, method="trust-exact",
                          options={"gtol": 1e-8})  # fmt: skip
    b = optimize.minimize(obj.fun_and_jac, w0, jac=True, hessp=obj.hessp, method="Newton-CG",
                          options={"xtol": 1e-12})  # fmt: skip
    assert a.success and b.success, (a.message, b.message)
    np.testing.assert_allclose(a.x, b.x, atol=1e-7)
    assert np.linalg.norm(hand_grad(a.x, X, y)) < 1e-8
    assert obj.nhess > 0


MODES = ["forward-over-reverse", "reverse-over-reverse", "reverse-over-forward"]


@pytest.mark.parametrize("mode", MODES)
def test_hessp_is_the_derivative_of_the_gradient(data: Any, rng: np.random.Generator,
                                                 mode: str) -> None:  # fmt: skip
    X, y = data
    obj = scipy_objective(loss, args=(X, y), mode=mode)
    w = rng.standard_normal(X.shape[1])
    for _ in range(3):
        p = rng.standard_normal(w.size)
        hv = obj.hessp(w, p)
        np.testing.assert_allclose(hv, fd(lambda u: hand_grad(u, X, y), w, p), rtol=1e-6,
                                   atol=1e-8)  # fmt: skip
        np.testing.assert_allclose(hv, hand_hess(w, X, y) @ p, rtol=1e-10, atol=1e-12)
    assert obj.nhev == 3


@pytest.mark.parametrize("mode", MODES)
def test_hess_is_the_closed_form_hessian(data: Any, rng: np.random.Generator, mode: str) -> None:
    X, y = data
    obj = scipy_objective(loss, args=(X, y), mode=mode)
    w = rng.standard_normal(X.shape[1])
    np.testing.assert_allclose(obj.hess(w), hand_hess(w, X, y), rtol=1e-10, atol=1e-12)


def test_fun_and_jac_share_one_evaluation(data: Any, rng: np.random.Generator) -> None:
    X, y = data
    obj = scipy_objective(loss, args=(X, y))
    w = rng.standard_normal(X.shape[1])
    assert obj.fun(w) == pytest.approx(loss(w, X, y), rel=1e-14)
    np.testing.assert_allclose(obj.jac(w.copy()), hand_grad(w, X, y), rtol=1e-10, atol=1e-13)
    assert obj.nfev == 1
    obj.fun_and_jac(w)
    assert obj.nfev == 1


@pytest.mark.parametrize("compile", [False, True])
def test_the_cache_is_never_stale(data: Any, rng: np.random.Generator, compile: bool) -> None:
    X, y = data
    obj: ScipyObjective = scipy_objective(loss, args=(X, y), compile=compile)
    x1, x2 = rng.standard_normal(X.shape[1]), rng.standard_normal(X.shape[1])
    obj.fun(x1)
    np.testing.assert_allclose(obj.jac(x2), hand_grad(x2, X, y), rtol=1e-10, atol=1e-13)
    assert obj.fun(x1) == pytest.approx(loss(x1, X, y), rel=1e-14)
    # the caller writes into its x between calls: compared by value, not by identity
    x = x1.copy()
    obj.fun(x)
    x[3] += 0.5
    np.testing.assert_allclose(obj.jac(x), hand_grad(x, X, y), rtol=1e-10, atol=1e-13)
    x *= 2.0
    assert obj.fun(x) == pytest.approx(loss(x, X, y), rel=1e-14)
    # writing into a returned gradient does not change the next one
    g = obj.jac(x)
    g[:] = 0.0
    np.testing.assert_allclose(obj.jac(x), hand_grad(x, X, y), rtol=1e-10, atol=1e-13)
    # a point equal in value (not the same object) reuses the evaluation
    n = obj.nfev
    obj.jac(x.copy())
    assert obj.nfev == n


def test_importing_does_not_import_scipy() -> None:
    code = "import sys, rulekit._optimize; assert 'scipy' not in sys.modules, 'scipy imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
