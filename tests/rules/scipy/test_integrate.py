"""Tests for rules.scipy.integrate (scipy.integrate.odeint by the adjoint method): check_rule over
initial states, output times and parameters; agreement with closed-form gradients at the
accuracy the ODE tolerances allow; the engine; and the errors for untraceable uses.

Tolerances. The rule's gradient is exact up to the error of two adaptive integrations (the
forward solve and the backward augmented one), which is of the order of the ODE tolerances
rtol/atol; finite differences of an adaptive solver carry an error of about tol/h. The
tests therefore pass rtol=atol=1e-11 to odeint (except where the tolerance itself is the
subject), which keeps both below the comparison tolerances used (1e-6 in check_rule's
default dot-product test and in fdcheck's; 1e-6 relative against closed forms)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.integrate
from fdcheck import check_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions  # noqa: F401  (np.einsum; with it np.stack, operators)
from rules.scipy import integrate as I
from testutils import check_rule

FAST = settings(max_examples=6, deadline=None, derandomize=True)
TIGHT = {"rtol": 1e-11, "atol": 1e-11}
seeds = st.integers(0, 2**16)


def decay(y: Any, t: Any, k: Any) -> Any:
    return -k * y


def pendulum(y: Any, t: Any, b: Any, c: Any) -> Any:
    return np.stack([y[1], -b * y[1] - c * np.sin(y[0])])


def forced(y: Any, t: Any, w: Any, n: int) -> Any:
    """Non-autonomous, with an array parameter and an integer (constant) one."""
    return w * np.cos(n * t) - 0.5 * y


def as_list(y: Any, t: Any, a: Any) -> Any:
    """A right-hand side returning a list of traced scalars (a common odeint idiom)."""
    return [y[1], -a * y[0]]


@FAST
@given(st.integers(1, 4), st.booleans(), st.sampled_from(["f64", "f32", "scalar"]), seeds)
def test_odeint_decay(n_t: int, decreasing: bool, y0_kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, 1.5, n_t))
    t = t[::-1] if decreasing else t
    y0: Any = rng.uniform(0.5, 2.0, 3)
    y0 = {"f64": y0, "f32": y0.astype(np.float32), "scalar": float(y0[0])}[y0_kind]
    check_rule(I.odeint, decay, y0, t, (float(rng.uniform(0.2, 1.5)),), kwargs=TIGHT)


@FAST
@given(st.integers(2, 4), seeds)
def test_odeint_pendulum_and_forced(n_t: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 2.0, n_t)
    y0 = rng.uniform(-1.0, 1.0, 2)
    check_rule(I.odeint, pendulum, y0, t, (0.3, float(rng.uniform(0.5, 2.0))), kwargs=TIGHT)
    w = rng.normal(size=2)
    check_rule(I.odeint, forced, y0, t, (w, 3), kwargs=TIGHT)


def test_odeint_keyword_args_tfirst_and_list_output() -> None:
    t = np.linspace(0.0, 1.0, 3)
    y0 = np.array([0.3, -0.2])
    check_rule(I.odeint, decay, y0, t, kwargs={"args": (0.8,), **TIGHT})  # constant args=
    check_rule(I.odeint, lambda t, y: np.sin(t) - y * y, y0, t, kwargs={"tfirst": True, **TIGHT})
    check_rule(I.odeint, as_list, y0, t, (1.7,), kwargs=TIGHT)
    check_rule(I.odeint, decay, y0, t[:1], (0.8,))  # one output time: y = [y0]


def test_odeint_closed_form_and_tolerance() -> None:
    """y = y₀ e^{−k(t − t₀)}: ∂/∂k, ∂/∂y₀, ∂/∂t in closed form; the error follows the tolerance."""
    y0, k, t = np.array([1.5, 0.5]), 0.7, np.array([0.2, 0.9, 1.6])

    def loss(y0: Any, t: Any, k: Any, **tol: Any) -> Any:
        return np.sum(I.odeint(decay, y0, t, (k,), **tol)[-1])

    e = np.exp(-k * (t[-1] - t[0]))
    exact_k = -(t[-1] - t[0]) * e * y0.sum()
    exact_t = np.array([k * e * y0.sum(), 0.0, -k * e * y0.sum()])
    errors = []
    for tol in (1e-6, 1e-11):
        g_y0, g_t, g_k = rulekit.grad(
            lambda y0, t, k, tol=tol: loss(y0, t, k, rtol=tol, atol=tol), argnums=(0, 1, 2)
        )(y0, t, k)
        assert np.allclose(g_y0, e, rtol=100 * tol)  # a factor 100: the solver's error
        assert np.allclose(g_t, exact_t, rtol=100 * tol, atol=100 * tol)  # estimate is local
        errors.append(abs(g_k - exact_k) / abs(exact_k))
        assert errors[-1] < 100 * tol
    assert errors[1] < errors[0]  # tighter tolerances, a more accurate gradient


def test_engine_vs_finite_differences() -> None:
    t = np.linspace(0.0, 3.0, 5)

    def loss(y0: Any, b: Any, c: Any) -> Any:
        sol = I.odeint(pendulum, np.tanh(y0), t, (b, c * c), **TIGHT)
        return np.einsum("ij,ij->", sol, sol)

    # Default tolerances: tol/h = 1e-11/1e-6 bounds the differences' error by 1e-5, but
    # the solver's error is smooth in the inputs: measured 1e-10..1.2e-9 relative.
    check_grads(loss, np.array([0.4, -0.3]), 0.25, 1.2)


def test_engine_output_times() -> None:
    y0 = np.array([1.0, 0.0])

    def loss(t: Any) -> Any:
        return np.sum(I.odeint(pendulum, y0, t, (0.1, 2.0), **TIGHT)[1:] ** 2)

    check_grads(loss, np.array([0.0, 0.5, 1.25]))  # (measured: 2e-9..6e-9 relative)


def test_untraceable_uses_raise() -> None:
    y0, t = np.array([1.0, 2.0]), np.linspace(0.0, 1.0, 3)
    with pytest.raises(rulekit.TracingError, match="positionally"):  # traced args= keyword
        rulekit.grad(lambda k: np.sum(I.odeint(decay, y0, t, args=(k,))))(0.5)
    with pytest.raises(rulekit.TracingError):  # a traced value captured by func's closure
        rulekit.grad(lambda k: np.sum(I.odeint(lambda y, s: -k * y, y0, t)))(0.5)
    with pytest.raises(NotImplementedError, match="flat tuple"):  # nested parameters
        rulekit.grad(lambda k: np.sum(I.odeint(decay, y0, t, ((k, 1.0),))))(0.5)
    with pytest.raises(NotImplementedError, match="full_output"):
        rulekit.grad(lambda y: np.sum(I.odeint(decay, y, t, (0.5,), full_output=True)[0]))(y0)


def test_plain_call_is_scipy() -> None:
    y0, t = np.array([1.0, 2.0]), np.linspace(0.0, 1.0, 3)
    ref = scipy.integrate.odeint(decay, y0, t, args=(0.5,))
    assert np.array_equal(I.odeint(decay, y0, t, (0.5,)), ref)
