"""Plain SciPy calls on traced arrays (rules/scipy/_routing.py): every call style reaches the
bundled rule, gradients match finite differences, and plain calls are SciPy's own."""

from __future__ import annotations

import importlib
import inspect
import pickle

import numpy as np
import pytest
import scipy.linalg
import scipy.special
import scipy.stats
from fdcheck import check_grads, fd_grad

import rulekit
import rules
from rules.scipy._routing import original


def _spd(x: np.ndarray) -> np.ndarray:
    return x @ x.T + 4.0 * np.eye(x.shape[0])


def _gp_nll(x: np.ndarray) -> np.ndarray:
    """A Gaussian-process negative log likelihood written with plain scipy.linalg calls."""
    from scipy import linalg

    K = _spd(x)
    y = np.arange(1.0, x.shape[0] + 1)
    L = scipy.linalg.cholesky(K, lower=True)
    alpha = linalg.cho_solve((L, True), y)
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(L)))


def _softmax_xent(w: np.ndarray) -> np.ndarray:
    """A softmax classifier's loss written with plain scipy.special calls."""
    import scipy.special as sp

    X = np.linspace(-1.0, 1.0, 12).reshape(4, 3)
    logits = X @ w
    return -np.sum(sp.log_softmax(logits, axis=1)[np.arange(4), [0, 1, 2, 0]]) + sp.logsumexp(w)


PROGRAMS = {
    "gp": (_gp_nll, (4, 4)),
    "softmax": (_softmax_xent, (3, 3)),
    "solve_triangular": (
        lambda x: np.sum(scipy.linalg.solve_triangular(np.triu(x) + 3 * np.eye(3), x[0])),
        (3, 3),
    ),
    "lu": (lambda x: np.sum(scipy.linalg.lu_solve(scipy.linalg.lu_factor(_spd(x)), x[0])), (3, 3)),
    "solve_pos": (lambda x: np.sum(scipy.linalg.solve(_spd(x), x[:, 0], assume_a="pos")), (3, 3)),
    "expm": (lambda x: np.sum(scipy.linalg.expm(0.3 * x)), (3, 3)),
    "inv_det": (lambda x: scipy.linalg.det(_spd(x)) + np.sum(scipy.linalg.inv(_spd(x))), (3, 3)),
    "stats": (lambda x: np.sum(scipy.stats.norm.logpdf(x, loc=0.5, scale=2.0)), (5,)),
    "softmax_fn": (lambda x: np.sum(scipy.special.softmax(x) ** 2), (5,)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_plain_scipy_calls_match_finite_differences(name: str) -> None:
    f, shape = PROGRAMS[name]
    x = np.random.default_rng(sum(map(ord, name))).normal(size=shape)
    # three calls of one value_and_grad object (cached rules), then F and strided layouts
    check_grads(f, x, calls=3, layouts=("F", "strided"))


def test_every_call_style_reaches_the_rule() -> None:
    import scipy.linalg as sl
    from scipy import linalg
    from scipy.linalg import cholesky  # bound after the rules loaded: the routed function

    x = np.random.default_rng(0).normal(size=(3, 3))
    grads = [
        rulekit.grad(lambda x, ch=ch: np.sum(ch(_spd(x))))(x)
        for ch in (scipy.linalg.cholesky, linalg.cholesky, sl.cholesky, cholesky)
    ]
    for g in grads[1:]:
        np.testing.assert_array_equal(g, grads[0])
    np.testing.assert_allclose(
        grads[0], fd_grad(lambda x: np.sum(sl.cholesky(_spd(x))), (x,), 0), rtol=1e-6
    )


def test_plain_calls_are_scipys_own() -> None:
    K = _spd(np.random.default_rng(1).normal(size=(4, 4)))
    routed = scipy.linalg.cholesky
    assert routed is not original(routed)  # (so the comparisons below compare two functions)
    np.testing.assert_array_equal(routed(K), original(routed)(K))
    assert inspect.signature(routed) == inspect.signature(original(routed))
    assert routed.__name__ == "cholesky" and routed.__doc__ == original(routed).__doc__
    x = np.linspace(-2, 2, 7)
    assert (
        scipy.stats.norm.logpdf(x, 1.0).tolist()
        == original(scipy.stats.norm.logpdf)(x, 1.0).tolist()
    )
    # a frozen distribution is another instance: it runs scipy's method unchanged
    assert scipy.stats.norm(loc=1.0).logpdf(0.3) == scipy.stats.norm.logpdf(0.3, loc=1.0)
    # the distribution object itself is unchanged: it pickles as before
    assert pickle.loads(pickle.dumps(scipy.stats.norm)) is not None
    with pytest.raises(np.linalg.LinAlgError):  # scipy's own errors on plain input
        scipy.linalg.cholesky(-np.eye(2))


def test_reimporting_routes_nothing_twice() -> None:
    before = scipy.linalg.cholesky
    importlib.reload(importlib.import_module("rules.scipy.linalg"))
    assert scipy.linalg.cholesky is before


def test_every_bundled_scipy_wrapper_is_routed() -> None:
    """Each `rulekit.primitive` wrapper in rules.scipy/rules.blas with SciPy's own name is
    reachable from SciPy's namespace (solve_sylvester's wrapper fixes a SciPy bug, so its
    plain calls are not rerouted: see rules/scipy/linalg/equations.py)."""
    import scipy.integrate
    import scipy.linalg.blas
    import scipy.signal

    modules = {
        rules.scipy.linalg: scipy.linalg,
        rules.scipy.special: scipy.special,
        rules.scipy.signal: scipy.signal,
        rules.scipy.integrate: scipy.integrate,
        rules.blas: scipy.linalg.blas,
    }
    missing = []
    for ours, theirs in modules.items():
        for name, prim in vars(ours).items():
            if not isinstance(prim, rulekit.Primitive) or name == "solve_sylvester":
                continue
            if getattr(getattr(theirs, name, None), "__rulekit_primitive__", None) is not prim:
                missing.append(f"{theirs.__name__}.{name}")
    assert not missing, missing
