"""Rules for scipy.stats.multivariate_normal.{pdf, logpdf, entropy} and
scipy.stats.dirichlet.{pdf, logpdf} (exported as `rules.scipy.stats.multivariate_normal`,
`rules.scipy.stats.dirichlet`: namespaces of `rulekit.primitive` wrappers with scipy's names
and signatures; see rules.scipy.stats and docs/conventions-stats.md).

Multivariate normal, with r = x − μ, α = Σ⁻¹r (one Cholesky factor of Σ), per point:

    logpdf = −½(d log 2π + log det Σ + rᵀα)
    x̄ += −ȳ α,   μ̄ += Σ_points ȳ α,   Σ̄ = ½ Σ_points ȳ (α αᵀ − Σ⁻¹)
    pdf: the same with ȳ → ȳ·pdf;   entropy = ½ log det(2πe Σ):  Σ̄ = ½ ȳ Σ⁻¹

scipy reads only the lower triangle of a 2-D `cov` (`eigh(lower=True)`), so, as for every
triangle-reading routine (docs/conventions-linalg.md), the symmetric Σ̄ is folded onto it:
cov̄ = tril(Σ̄ + Σ̄ᵀ, −1) + diag(Σ̄), exact for every perturbation; its symmetric part is
the usual symmetric gradient. A scalar cov (σ²·I) gets tr Σ̄, a 1-d cov (diagonal) diag Σ̄.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.linalg
import scipy.special as sp
import scipy.stats as st

import rulekit
from rulekit import CoDual, RulekitError, Vararg
from rules._support.arguments import is_active
from rules._support.cotangents import NO_R, accumulate, output_cotangent
from rules._support.linalg import fold
from rules._support.outputs import new_output
from rules.scipy.stats._common import (
    PARAM,
    Namespace,
    Signature,
    ratio,
)

__all__ = ["SingularCovarianceError", "dirichlet", "multivariate_normal"]

multivariate_normal = Namespace(
    "multivariate_normal", st.multivariate_normal, ("pdf", "logpdf", "entropy")
)
dirichlet = Namespace("dirichlet", st.dirichlet, ("pdf", "logpdf"))


class SingularCovarianceError(RulekitError, np.linalg.LinAlgError):
    """A multivariate normal with a singular covariance (allow_singular=True) was differentiated.

    Its density lives on a subspace (pseudo-determinant, pseudo-inverse) and is not
    differentiable with respect to the covariance across rank changes.
    """


def _params(mean: Any, cov: Any) -> tuple[int, np.ndarray, np.ndarray]:
    """(dim, mean vector, covariance matrix) as scipy's `_process_parameters_psd` makes them
    (the forward already ran scipy, so the inputs are valid)."""
    c = np.asarray(1.0 if cov is None else cov, dtype=float)
    if mean is None:
        dim = 1 if c.ndim < 2 else c.shape[0]
        m = np.zeros(dim)
    else:
        m = np.asarray(mean, dtype=float).reshape(-1)
        dim = m.size
    if dim == 1:
        c = c.reshape(1, 1)
    elif c.ndim == 0:
        c = c * np.eye(dim)
    elif c.ndim == 1:
        c = np.diag(c)
    return dim, m, c


def _check_nonsingular(C: np.ndarray, qualname: str) -> None:
    """Raise SingularCovarianceError where scipy's rank test (its `_PSD`) calls C singular."""
    s = np.linalg.eigvalsh(C)  # the lower triangle, as scipy's eigh(lower=True)
    eps = 1e6 * np.finfo(np.float64).eps * np.max(np.abs(s))  # scipy's _eigvalsh_to_eps
    if np.min(s) <= eps:
        raise SingularCovarianceError(
            f"{qualname}: the covariance is singular (smallest eigenvalue {np.min(s):.3g}, "
            f"rank cutoff {eps:.3g}). Fix: differentiate at a nonsingular covariance (e.g. add "
            "a small multiple of the identity). With allow_singular=True scipy evaluates a "
            "degenerate density on a subspace, which has no rule."
        )


def _cov_cotangent(G: np.ndarray, cov: Any) -> Any:
    """Map the symmetric cotangent G of the full matrix Σ to the form `cov` was given in."""
    c = np.asarray(cov)
    if G.shape == (1, 1):  # dim 1: scipy reshapes any one-element cov to (1, 1)
        return G.reshape(c.shape)
    if c.ndim == 0:
        return np.trace(G)
    if c.ndim == 1:
        return np.diagonal(G).copy()
    return fold(G, lower=True)


def _quantiles(x: Any, dim: int) -> np.ndarray:
    """x with the last axis the components, as scipy's `_process_quantiles`."""
    X = np.asarray(x, dtype=float)
    if X.ndim == 0:
        return X[np.newaxis]
    if X.ndim == 1:
        return X[:, np.newaxis] if dim == 1 else X[np.newaxis, :]
    return X


def _mvn_density_rule(method: str) -> Callable[..., tuple[CoDual, Any]]:
    fn = getattr(st.multivariate_normal, method)
    names = ("x", "mean", "cov", "allow_singular")
    sig = Signature(
        f"scipy.stats.multivariate_normal.{method}",
        names,
        {"mean": None, "cov": 1, "allow_singular": False},
    )

    def rule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        b, v, y = sig.call(fn, args, kwargs)
        out = new_output(y)
        pos = sig.positional(args)
        need = {n: is_active(b[n]) for n in ("x", "mean", "cov")}
        dim, M, C = 0, np.empty(0), np.empty((0, 0))
        if any(need.values()):
            dim, M, C = _params(v["mean"], v["cov"])
            if v["allow_singular"]:
                _check_nonsingular(C, sig.qualname)

        def pullback(dy: Any) -> tuple[Any, ...]:
            if not any(need.values()):
                return (NO_R,) * (len(args) + 1)
            X = _quantiles(v["x"], dim)
            batch = X.shape[:-1]
            w = np.reshape(np.asarray(output_cotangent(out, dy), dtype=float), batch)
            if method == "pdf":
                w = w * np.reshape(y, batch)
            w = w.reshape(-1)
            factor = (np.linalg.cholesky(C), True)
            A = scipy.linalg.cho_solve(factor, (X - M).reshape(-1, dim).T).T  # rows Σ⁻¹(x − μ)
            wA = w[:, None] * A
            rd = {}
            if need["x"]:
                rd["x"] = accumulate(b["x"], -wA.reshape(np.shape(v["x"])))
            if need["mean"]:
                rd["mean"] = accumulate(b["mean"], wA.sum(0).reshape(np.shape(v["mean"])))
            if need["cov"]:
                Cinv = scipy.linalg.cho_solve(factor, np.eye(dim))
                G = 0.5 * ((A.T * w) @ A - w.sum() * Cinv)
                rd["cov"] = accumulate(b["cov"], _cov_cotangent(G, v["cov"]))
            return (NO_R, *(rd.get(n, NO_R) for n in pos))

        return out, pullback

    rule.__name__ = rule.__qualname__ = f"multivariate_normal_{method}_rrule"
    rule.__doc__ = __doc__
    return rule


def _spd(rng: np.random.Generator, d: int) -> np.ndarray:
    a = rng.normal(size=(d, d))
    return a @ a.T / d + np.eye(d)


def _mvn_examples(seed: int) -> Callable[[], list[rulekit.Example]]:
    """Points (3, 2) with a full cov; one point with mean=None; a (2, 1, 3) stack (scipy
    squeezes the output) with a scalar cov; keyword arrays with a diagonal cov and
    allow_singular=True."""

    def make() -> list[rulekit.Example]:
        rng = np.random.default_rng(seed)
        ex = rulekit.example
        return [
            ex(rng.normal(size=(3, 2)), rng.normal(size=2), _spd(rng, 2)),
            ex(rng.normal(size=2), None, _spd(rng, 2)),
            ex(rng.normal(size=(2, 1, 3)).astype(np.float32), rng.normal(size=3), 1.5),
            ex(
                rng.normal(size=(2, 3)),
                mean=rng.normal(size=3),
                cov=rng.uniform(0.5, 2, 3),
                allow_singular=True,
            ),
        ]

    return make


for _j, _m in enumerate(("logpdf", "pdf")):
    rulekit.rrule.register(
        getattr(multivariate_normal, _m), Vararg[PARAM], examples=_mvn_examples(170 + _j)
    )(_mvn_density_rule(_m))


def _mvn_entropy_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(172)
    ex = rulekit.example
    return [
        ex(None, _spd(rng, 3)),
        ex(rng.normal(size=2), rng.uniform(0.5, 2, 2)),
        ex(cov=_spd(rng, 2)),
        ex(0.5, 2.0),
    ]


_ENTROPY = Signature(
    "scipy.stats.multivariate_normal.entropy", ("mean", "cov"), {"mean": None, "cov": 1}
)


@rulekit.rrule.register(multivariate_normal.entropy, Vararg[PARAM], examples=_mvn_entropy_examples)
def mvn_entropy_rrule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """h = ½(d log 2πe + log det Σ)  ⇒  Σ̄ = ½ h̄ Σ⁻¹ (folded onto cov's form); μ̄ = 0."""
    b, v, y = _ENTROPY.call(st.multivariate_normal.entropy, args, kwargs)
    C = np.empty((0, 0))
    if is_active(b["cov"]):  # scipy's entropy always allows a singular cov: check it here
        _, _, C = _params(v["mean"], v["cov"])
        _check_nonsingular(C, _ENTROPY.qualname)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        rd = NO_R
        if is_active(b["cov"]):
            g = float(output_cotangent(out, dy))
            Cinv = scipy.linalg.cho_solve((np.linalg.cholesky(C), True), np.eye(C.shape[0]))
            rd = accumulate(b["cov"], _cov_cotangent(0.5 * g * Cinv, v["cov"]))
        return (NO_R, *(rd if n == "cov" else NO_R for n in _ENTROPY.positional(args)))

    return out, pullback


# -- dirichlet ----------------------------------------------------------------------------------


def _dirichlet_rule(method: str) -> Callable[..., tuple[CoDual, Any]]:
    """log p = Σᵢ (αᵢ−1) log xᵢ − log B(α), x on the simplex (x's first axis the components;
    with K−1 of them, x_K = 1 − Σ xᵢ):  x̄ᵢ += ȳ (αᵢ−1)/xᵢ (K−1 form: minus ȳ (α_K−1)/x_K),
    ᾱᵢ += ȳ (log xᵢ − ψ(αᵢ) + ψ(Σα)); pdf: ȳ → ȳ·pdf."""
    fn = getattr(st.dirichlet, method)
    sig = Signature(f"scipy.stats.dirichlet.{method}", ("x", "alpha"), {})

    def rule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        b, v, y = sig.call(fn, args, kwargs)
        out = new_output(y)
        pos = sig.positional(args)

        def pullback(dy: Any) -> tuple[Any, ...]:
            if not (is_active(b["x"]) or is_active(b["alpha"])):
                return (NO_R,) * (len(args) + 1)
            alpha = np.asarray(v["alpha"], dtype=float)
            x0 = np.asarray(v["x"], dtype=float)
            K = alpha.shape[0]
            short = x0.shape[0] == K - 1
            X = np.concatenate([x0, (1 - x0.sum(0))[None]], 0) if short else x0
            X = X.reshape(K, -1)
            w = np.asarray(output_cotangent(out, dy), dtype=float).reshape(-1)
            yv = np.reshape(y, -1)
            if method == "pdf":
                w = w * yv
            # logpdf = −inf (some xᵢ = 0 with αᵢ > 1): locally constant, no cotangent
            w = np.where(yv == (0 if method == "pdf" else -np.inf), 0.0, w)
            rd = {}
            with np.errstate(divide="ignore", invalid="ignore"):
                if is_active(b["x"]):
                    xb = w * ratio((alpha - 1)[:, None], X)
                    xb = xb[:-1] - xb[-1:] if short else xb
                    rd["x"] = accumulate(b["x"], xb.reshape(x0.shape))
                if is_active(b["alpha"]):
                    ab = sp.xlogy(w, X).sum(1) + w.sum() * (
                        sp.digamma(alpha.sum()) - sp.digamma(alpha)
                    )
                    rd["alpha"] = accumulate(b["alpha"], ab.reshape(np.shape(v["alpha"])))
            return (NO_R, *(rd.get(n, NO_R) for n in pos))

        return out, pullback

    rule.__name__ = rule.__qualname__ = f"dirichlet_{method}_rrule"
    rule.__doc__ = _dirichlet_rule.__doc__
    return rule


def _dirichlet_examples(seed: int) -> Callable[[], list[rulekit.Example]]:
    """x with K−1 components (the last is 1 − Σ; a full-K x cannot be perturbed off the
    simplex by the kit's finite differences): one point, five points, float32 alpha, keywords."""

    def make() -> list[rulekit.Example]:
        rng = np.random.default_rng(seed)
        alpha = rng.uniform(1.5, 4.0, 4)
        pts = rng.dirichlet(np.full(4, 6.0), size=5).T  # (4, 5), every component ≳ 0.05
        return [
            rulekit.example(pts[:3, 0], alpha),
            rulekit.example(pts[:3], alpha),
            rulekit.example(pts[:3, 1], alpha.astype(np.float32)),
            rulekit.example(x=pts[:3, 2], alpha=rng.uniform(0.5, 3.0, 4)),
        ]

    return make


for _j, _m in enumerate(("logpdf", "pdf")):
    rulekit.rrule.register(
        getattr(dirichlet, _m), Vararg[PARAM], examples=_dirichlet_examples(180 + _j)
    )(_dirichlet_rule(_m))
