"""Rules for the scipy.stats distributions that HIPS autograd differentiates.

`norm.{pdf, logpdf, cdf, logcdf, sf, logsf}`, `t.{pdf, logpdf, cdf, logcdf}`,
`beta/gamma/chi2.{pdf, logpdf, cdf}` and `poisson.{pmf, logpmf, cdf}` (here);
`multivariate_normal.{pdf, logpdf, entropy}` and `dirichlet.{pdf, logpdf}` (in
rules.scipy.stats, re-exported here).

These are methods of scipy distribution objects, Python code that calls
`np.asarray` (which a traced value refuses), so numpy's protocols do not reach
them. Each name below is a namespace whose attributes are `rulekit.primitive`
wrappers of scipy's bound methods with scipy's names and signatures:
`rules.scipy.stats.norm.logpdf(x, loc=0, scale=1)`,
`rules.scipy.stats.t.cdf(x, df, loc=0, scale=1)`,
... Plain calls go straight to scipy; traced calls dispatch to the rules below.

Every univariate continuous distribution is a location-scale family: with
z = (x − loc)/scale, logpdf = log g(z; θ) − log scale. From the score
s = ∂ log g/∂z and the shape scores ∂ log g/∂θ the rules get every partial:

    logpdf:  ∂x = s/scale,  ∂loc = −s/scale,  ∂scale = −(z·s + 1)/scale,  ∂θ
    pdf:     pdf · (the partials of logpdf)
    cdf:     ∂x = pdf,  ∂loc = −pdf,  ∂scale = −pdf·z        (sf: the negatives)
    logcdf:  the cdf's with pdf → r = exp(logpdf − logcdf)   (logsf: −exp(logpdf − logsf))

so logcdf/logsf are as stable as scipy's own logpdf/logcdf/logsf (for norm,
log_ndtr). Shape parameters of the cdf-type methods need derivatives of the
incomplete beta/gamma functions w.r.t. their parameters, which scipy lacks: an
active one raises NotImplementedError. See docs/conventions-stats.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special as sp
import scipy.stats as st

import rulekit
from rulekit import CoDual, Vararg
from rules._support.arguments import is_active
from rules._support.cotangents import NO_R, output_cotangent
from rules._support.outputs import new_output
from rules.scipy.stats._common import (
    REAL,
    Namespace,
    Signature,
    accumulate_from_output,
    masked,
    ratio,
    refuse,
)

__all__ = ["beta", "chi2", "gamma", "norm", "poisson", "t"]

norm = Namespace("norm", st.norm, ("pdf", "logpdf", "cdf", "logcdf", "sf", "logsf"))
t = Namespace("t", st.t, ("pdf", "logpdf", "cdf", "logcdf"))
beta = Namespace("beta", st.beta, ("pdf", "logpdf", "cdf"))
gamma = Namespace("gamma", st.gamma, ("pdf", "logpdf", "cdf"))
chi2 = Namespace("chi2", st.chi2, ("pdf", "logpdf", "cdf"))
poisson = Namespace("poisson", st.poisson, ("pmf", "logpmf", "cdf"))

Arr = Any  # float64 arrays (or numpy scalars) inside the derivative formulas
ShapeScores = Callable[..., list[Any]]  # (need, z, *θ) -> [∂ log g/∂θᵢ, or None if not needed]


@dataclass(frozen=True)
class _Family:
    """A location-scale family: its standardized log-density's z-score and shape scores."""

    name: str
    dist: Any
    shapes: tuple[str, ...]
    score: Callable[..., Arr]  # (z, *θ) -> ∂ log g/∂z
    shape_scores: ShapeScores
    sample_z: tuple[float, float]  # example z's: uniform in this interval (inside the support)
    sample_shapes: tuple[tuple[float, float], ...]  # example shape parameters (densities)
    int_shapes: tuple[int, ...]  # example shape parameters of cdf-type calls (constants)


# log g(z) = −z²/2 − ½ log 2π
def _norm_score(z: Arr) -> Arr:
    return -z


# log g(z; ν) = log Γ((ν+1)/2) − log Γ(ν/2) − ½ log νπ − (ν+1)/2 · log(1 + z²/ν); ν = ∞: normal
def _t_score(z: Arr, df: Arr) -> Arr:
    return np.where(np.isinf(df), -z, -(df + 1) * z / (df + z * z))


def _t_shapes(need: tuple[bool, ...], z: Arr, df: Arr) -> list[Any]:
    if not need[0]:
        return [None]
    z2 = z * z
    d = 0.5 * (
        sp.digamma((df + 1) / 2)
        - sp.digamma(df / 2)
        - 1 / df
        - np.log1p(z2 / df)
        + (df + 1) * z2 / (df * (df + z2))
    )
    return [np.where(np.isinf(df), 0.0, d)]


# log g(z; a, b) = (a−1) log z + (b−1) log(1−z) − log B(a, b)
def _beta_score(z: Arr, a: Arr, b: Arr) -> Arr:
    return ratio(a - 1, z) - ratio(b - 1, 1 - z)


def _beta_shapes(need: tuple[bool, ...], z: Arr, a: Arr, b: Arr) -> list[Any]:
    ab = sp.digamma(a + b)
    return [
        np.log(z) - sp.digamma(a) + ab if need[0] else None,
        np.log1p(-z) - sp.digamma(b) + ab if need[1] else None,
    ]


# log g(z; a) = (a−1) log z − z − log Γ(a)
def _gamma_score(z: Arr, a: Arr) -> Arr:
    return ratio(a - 1, z) - 1


def _gamma_shapes(need: tuple[bool, ...], z: Arr, a: Arr) -> list[Any]:
    return [np.log(z) - sp.digamma(a) if need[0] else None]


# log g(z; k) = (k/2 − 1) log z − z/2 − (k/2) log 2 − log Γ(k/2)
def _chi2_score(z: Arr, df: Arr) -> Arr:
    return ratio(df / 2 - 1, z) - 0.5


def _chi2_shapes(need: tuple[bool, ...], z: Arr, df: Arr) -> list[Any]:
    return [0.5 * (np.log(z / 2) - sp.digamma(df / 2)) if need[0] else None]


def _no_shapes(need: tuple[bool, ...], z: Arr) -> list[Any]:
    return []


_FAMILIES = (
    _Family("norm", st.norm, (), _norm_score, _no_shapes, (-2.5, 2.5), (), ()),
    _Family("t", st.t, ("df",), _t_score, _t_shapes, (-3.0, 3.0), ((2.0, 6.0),), (3,)),
    _Family(
        "beta",
        st.beta,
        ("a", "b"),
        _beta_score,
        _beta_shapes,
        (0.1, 0.9),
        ((1.5, 4.0), (1.5, 4.0)),
        (2, 3),
    ),
    _Family(
        "gamma", st.gamma, ("a",), _gamma_score, _gamma_shapes, (0.3, 4.0), ((1.5, 4.0),), (2,)
    ),
    _Family("chi2", st.chi2, ("df",), _chi2_score, _chi2_shapes, (0.3, 5.0), ((2.5, 6.0),), (3,)),
)

_DENSITIES = ("pdf", "logpdf")
_CDFS = {"cdf": (1.0, False), "sf": (-1.0, False), "logcdf": (1.0, True), "logsf": (-1.0, True)}


def _partials(
    fam: _Family, method: str, v: dict[str, Any], need: dict[str, bool], y: Any
) -> dict[str, Any]:
    """∂y/∂(name) for every needed name, elementwise (broadcastable to y)."""
    x, loc, scale = (np.asarray(v[k], dtype=float) for k in ("x", "loc", "scale"))
    th = tuple(np.asarray(v[s], dtype=float) for s in fam.shapes)
    z = (x - loc) / scale
    d: dict[str, Any] = {}
    if method in _DENSITIES:
        if need["x"] or need["loc"] or need["scale"]:
            s = fam.score(z, *th)
            d = {"x": s / scale, "loc": -s / scale, "scale": -(z * s + 1) / scale}
        shape_need = tuple(need[s] for s in fam.shapes)
        d.update(zip(fam.shapes, fam.shape_scores(shape_need, z, *th), strict=True))
        if method == "pdf":
            d = {k: None if g is None else y * g for k, g in d.items()}
        zero = y == 0 if method == "pdf" else y == -np.inf
    else:
        sign, log = _CDFS[method]
        if log:  # r = pdf/cdf (or pdf/sf) from the logs: no underflow in the tails
            lp = fam.dist.logpdf(x, *th, loc, scale)
            r, zero = np.exp(lp - y), lp == -np.inf
        else:
            r = fam.dist.pdf(x, *th, loc, scale)
            zero = r == 0
        d = {"x": sign * r, "loc": -sign * r, "scale": -sign * r * z}
    return {k: masked(g, y, zero) for k, g in d.items() if need[k] and g is not None}


def _univariate_rule(fam: _Family, method: str) -> Callable[..., tuple[CoDual, Any]]:
    fn = getattr(fam.dist, method)
    names = ("x", *fam.shapes, "loc", "scale")
    sig = Signature(f"scipy.stats.{fam.name}.{method}", names, {"loc": 0, "scale": 1})

    def rule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        b, v, y = sig.call(fn, args, kwargs)
        if method not in _DENSITIES:
            for s in fam.shapes:
                if is_active(b[s]):
                    refuse(
                        sig.qualname,
                        s,
                        "it needs the derivative of an incomplete beta/gamma "
                        "function with respect to its parameters",
                    )
        out = new_output(y)
        pos = sig.positional(args)

        def pullback(dy: Any) -> tuple[Any, ...]:
            need = {n: is_active(b[n]) for n in names}
            if not any(need.values()):
                return (NO_R,) * (len(args) + 1)
            g = output_cotangent(out, dy)
            with np.errstate(all="ignore"):  # ±inf/NaN at support edges are masked
                parts = _partials(fam, method, v, need, y)
                rd = {n: accumulate_from_output(b[n], g * d, np.shape(y)) for n, d in parts.items()}
            return (NO_R, *(rd.get(n, NO_R) for n in pos))

        return out, pullback

    rule.__name__ = rule.__qualname__ = f"{fam.name}_{method}_rrule"
    rule.__doc__ = f"{sig.qualname}{names}: see the module docstring for the partials."
    return rule


def _univariate_examples(fam: _Family, method: str, seed: int) -> Callable[[], list[Any]]:
    """float64 (2, 3) x with default loc/scale; float32 x with broadcast array parameters;
    all scalars; array loc and float scale as keywords. The shape parameters of cdf-type
    calls are integers (constants: their derivative is not provided)."""
    ex = rulekit.example
    lo, hi = fam.sample_z

    def make() -> list[rulekit.Example]:
        rng = np.random.default_rng(seed)

        def shapes(size: tuple[int, ...]) -> list[Any]:
            if method not in _DENSITIES:
                return list(fam.int_shapes)
            return [
                rng.uniform(a, b, size) if size else rng.uniform(a, b) for a, b in fam.sample_shapes
            ]

        loc, scale = rng.uniform(-1, 1, (3, 1)), rng.uniform(0.5, 2.0, (1, 4))
        x32 = (loc + scale * rng.uniform(lo, hi, (3, 4))).astype(np.float32)
        loc2, sc2 = rng.uniform(-1, 1, (2, 1)), float(rng.uniform(0.5, 2.0))
        return [
            ex(rng.uniform(lo, hi, (2, 3)), *shapes(())),
            ex(x32, *shapes((1, 4)), loc, scale),
            ex(np.float64(0.4 + 1.3 * rng.uniform(lo, hi)), *shapes(()), 0.4, 1.3),
            ex(loc2 + sc2 * rng.uniform(lo, hi, (2, 3)), *shapes(()), loc=loc2, scale=sc2),
        ]

    return make


for _i, _fam in enumerate(_FAMILIES):
    _ns = globals()[_fam.name]
    for _j, _m in enumerate(_ns.methods):
        rulekit.rrule.register(
            getattr(_ns, _m),
            Vararg[REAL],
            examples=_univariate_examples(_fam, _m, 100 + 10 * _i + _j),
        )(_univariate_rule(_fam, _m))


# -- poisson (discrete): k is a count, mu is differentiable -----------------------------------


def _poisson_rule(method: str) -> Callable[..., tuple[CoDual, Any]]:
    """log pmf(k; μ) = k log μ − μ − log k!, k' = k − loc:
    logpmf: μ̄ += ȳ·(k'/μ − 1);  pmf: μ̄ += ȳ·pmf·(k'/μ − 1);  cdf: μ̄ += −ȳ·pmf(⌊k'⌋; μ)."""
    fn = getattr(st.poisson, method)
    sig = Signature(f"scipy.stats.poisson.{method}", ("k", "mu", "loc"), {"loc": 0})

    def rule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        b, v, y = sig.call(fn, args, kwargs)
        for n in ("k", "loc"):
            if is_active(b[n]):
                refuse(sig.qualname, n, "a count: the pmf and cdf are piecewise constant in it")
        out = new_output(y)
        pos = sig.positional(args)

        def pullback(dy: Any) -> tuple[Any, ...]:
            if not is_active(b["mu"]):
                return (NO_R,) * (len(args) + 1)
            g = output_cotangent(out, dy)
            mu = np.asarray(v["mu"], dtype=float)
            k = np.asarray(v["k"], dtype=float) - np.asarray(v["loc"], dtype=float)
            with np.errstate(all="ignore"):
                if method == "cdf":
                    d = masked(-st.poisson.pmf(np.floor(k), mu), y, False)
                else:
                    dlog = ratio(k, mu) - 1
                    d = masked(
                        y * dlog if method == "pmf" else dlog,
                        y,
                        y == (0 if method == "pmf" else -np.inf),
                    )
                rd = accumulate_from_output(b["mu"], g * d, np.shape(y))
            return (NO_R, *(rd if n == "mu" else NO_R for n in pos))

        return out, pullback

    rule.__name__ = rule.__qualname__ = f"poisson_{method}_rrule"
    rule.__doc__ = _poisson_rule.__doc__
    return rule


def _poisson_examples(seed: int) -> Callable[[], list[Any]]:
    """Integer k (arrays, a Python int), mu as a float, a float32 array, a broadcast array."""

    def make() -> list[rulekit.Example]:
        rng = np.random.default_rng(seed)
        k = rng.integers(0, 7, (2, 3))
        return [
            rulekit.example(k, float(rng.uniform(0.5, 5.0))),
            rulekit.example(k, rng.uniform(0.5, 5.0, (2, 1)).astype(np.float32)),
            rulekit.example(3, np.float64(rng.uniform(0.5, 5.0))),
            rulekit.example(rng.integers(1, 8, 4), rng.uniform(0.5, 5.0, (3, 1)), loc=1),
        ]

    return make


for _j, _m in enumerate(poisson.methods):
    rulekit.rrule.register(
        getattr(poisson, _m), Vararg[REAL], examples=_poisson_examples(160 + _j)
    )(_poisson_rule(_m))
