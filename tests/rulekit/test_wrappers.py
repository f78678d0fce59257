"""Plain SciPy calls on traced values: routed to the bundled rule, or a TracingError naming the fix.

SciPy's public names that have a bundled rule are routed to it (rules/scipy/_routing.py,
docs/scipy-calls.md), so `scipy.special.logsumexp(traced)` differentiates. What still
converts a traced value is code with no rule, and SciPy's *original* function bound to
a name before the routing was installed; the TracingError of the latter names the fix
(the message is rulekit/_engine/_wrappers.py's).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.linalg
import scipy.linalg.blas
import scipy.special
import scipy.stats
from fdcheck import check_grads

import rulekit
import rules.blas
import rules.scipy.linalg
import rules.scipy.special
import rules.scipy.stats
from rules.scipy._routing import original

# -- routed: plain calls differentiate, through every way of reaching the name -------------------


def test_plain_scipy_calls_are_routed_to_their_rules(rng: np.random.Generator) -> None:
    from scipy import linalg as sl

    x = rng.normal(size=4)
    a = np.triu(rng.normal(size=(3, 3))) + 3 * np.eye(3)
    assert original(scipy.special.logsumexp) is not scipy.special.logsumexp  # routed
    check_grads(lambda x: scipy.special.logsumexp(x), x, calls=2)
    check_grads(lambda a: np.sum(scipy.linalg.solve_triangular(a, np.ones(3))), a, calls=2)
    check_grads(lambda a: np.sum(sl.solve_triangular(a, np.ones(3))), a)
    check_grads(lambda x: scipy.linalg.blas.ddot(x, np.sin(x)), x, calls=2)  # an f2py routine


def test_routed_plain_call_equals_the_bundled_wrapper(rng: np.random.Generator) -> None:
    k = rng.normal(size=(3, 3))
    k = k @ k.T + 3 * np.eye(3)

    def loss(chol: Any) -> Any:
        return lambda k: np.sum(np.sin(chol(k, lower=True)))

    v1, g1 = rulekit.value_and_grad(loss(scipy.linalg.cholesky))(k)
    v2, g2 = rulekit.value_and_grad(loss(rules.scipy.linalg.cholesky))(k)
    assert v1 == v2
    np.testing.assert_array_equal(g1, g2)
    check_grads(loss(scipy.linalg.cholesky), k)


# -- a name bound to SciPy's original function: the message names both fixes, first ------------


def _tracing_error(f: Any, x: np.ndarray) -> str:
    with pytest.raises(rulekit.TracingError) as info:
        rulekit.grad(f)(x)
    return str(info.value)


@pytest.mark.parametrize(
    ("routed", "name", "wrapper", "x"),
    [
        (scipy.linalg.cholesky, "scipy.linalg.cholesky", "rules.scipy.linalg", np.eye(3) + 0.5),
        (scipy.special.logsumexp, "scipy.special.logsumexp", "rules.scipy.special", np.ones(3)),
        # an f2py routine: no frame of its own, found from the call expression
        (scipy.linalg.blas.ddot, "scipy.linalg.blas.ddot", "rules.blas", np.ones(3)),
        # a distribution's method (routed on its class, for that one object)
        (scipy.stats.norm.logpdf, "scipy.stats.norm.logpdf", "rules.scipy.stats.norm", np.ones(3)),
    ],
    ids=["cholesky", "logsumexp", "ddot", "norm.logpdf"],
)
def test_prebound_original_names_the_module_call_and_the_wrapper(
    routed: Any, name: str, wrapper: str, x: np.ndarray
) -> None:
    fn = original(routed)  # what `from scipy.linalg import cholesky` binds before routing
    assert fn != routed and getattr(fn, "__rulekit_primitive__", None) is None
    args = (lambda x: (x, x)) if name.endswith("ddot") else (lambda x: (x,))
    msg = _tracing_error(lambda x: np.sum(fn(*args(x))), x)
    fix = msg[msg.index("Fix:") :]
    short = name.rsplit(".", 1)[1]
    assert fix.startswith(
        f"Fix: call {name}(...) through its module, or {wrapper}.{short}(...), "
    ), msg
    assert "rules.lapack" not in msg and "rules._" not in msg


def test_unrouted_wrapper_is_named_as_the_fix() -> None:
    # solve_sylvester's wrapper also corrects SciPy, so the plain name is deliberately not routed
    assert original(scipy.linalg.solve_sylvester) is scipy.linalg.solve_sylvester
    msg = _tracing_error(
        lambda a: np.sum(scipy.linalg.solve_sylvester(a, np.eye(2), np.ones((2, 2)))),
        3 * np.eye(2) + 0.5,
    )
    assert (
        "Fix: call rules.scipy.linalg.solve_sylvester(...) instead of "
        "scipy.linalg.solve_sylvester(...)" in msg
    ), msg


# -- no rule at all: refused, and no wrapper is suggested --------------------------------------


@pytest.mark.parametrize(
    "f",
    [
        lambda x: scipy.linalg.blas.drot(x, x, 0.6, 0.8)[0][0],  # an f2py routine with no rule
        lambda x: np.sum(scipy.linalg.hessenberg(np.outer(x, x) + np.eye(3))),
    ],
    ids=["drot", "hessenberg"],
)
def test_scipy_function_without_a_rule_raises_without_a_wrong_hint(f: Any) -> None:
    assert getattr(scipy.linalg.blas.drot, "__rulekit_primitive__", None) is None
    assert getattr(scipy.linalg.hessenberg, "__rulekit_primitive__", None) is None
    msg = _tracing_error(f, np.arange(1.0, 4.0))
    assert "Fix: call rules." not in msg and "through its module" not in msg, msg


def test_no_hint_for_code_without_a_wrapper() -> None:
    def opaque(x: np.ndarray) -> np.ndarray:
        return np.asarray(x) * 2

    msg = _tracing_error(lambda x: np.sum(opaque(x)), np.ones(3))
    assert "Fix: call rules." not in msg and "through its module" not in msg, msg
