"""Forward rules and differentiable pullbacks of the scipy.stats methods (imported by
rules.scipy.stats after the reverse rules, whose patterns and examples they share).

Each method is re-implemented in plain NumPy / scipy.special on its arguments, with
scipy's own formulas, so that the values equal scipy's to rounding:

    univariate (norm, gamma, beta, chi2):  z = (x − loc)/scale (in x's dtype promoted to
        float64, as scipy), the distribution's `_logpdf`, `_pdf`, `_cdf`, `_logcdf`,
        `_sf`, `_logsf` formula where the point is in the support and the parameters are
        valid, and rv_continuous's constants elsewhere: −inf / 0 outside the support (1 or
        0 past its upper end for the cdf-type methods), NaN for invalid parameters or NaN
        points. The formula is evaluated at a point of the support where it is not used
        (the "double where"), so that no infinite or NaN derivative of an unused branch
        reaches a parameter shared by every point;
    multivariate_normal:  Σ from `cov` as scipy reads it (σ²·I, diag, or the lower
        triangle of a matrix), L = cholesky(Σ), logpdf = −½(d log 2π + 2 Σ log Lᵢᵢ +
        ‖L⁻¹(x − μ)‖²) per point, entropy = ½(d (log 2π + 1) + log det Σ);
    dirichlet:  logpdf = Σᵢ xlogy(αᵢ − 1, xᵢ) − (Σᵢ log Γ(αᵢ) − log Γ(Σ α)), x completed
        with 1 − Σ xᵢ when it has K − 1 components.

The rules are `rulekit.jvp` / `rulekit.vjp` of the re-implementation over the active
arguments only (the others are constants of it), so they are differentiable again, to any
order. Keyword arguments carry tangents in forward mode (`loc=`, `scale=`, `cov=`, ...:
the forward rules set `keyword_tangents`); differentiable pullbacks differentiate
positional arguments, as every vjp rule. The cdf-type methods refuse an active shape
parameter as their reverse rules do (NotImplementedError: the derivative of the incomplete
beta/gamma function in its parameters has no rule). Inputs that scipy rejects (a singular
covariance without allow_singular, a point off the simplex) raise scipy's own error: the
rules validate them with scipy's method on the primal values first; a differentiated
covariance that scipy would treat as singular with allow_singular=True raises
SingularCovarianceError, as in reverse mode.

The methods of `t` and `poisson` have reverse rules only: `t`'s log-normaliser is scipy's
log(poch(ν/2, ½)) and `t.cdf` is stdtr, which have no rules (a difference of log Γ's loses
digits for large ν), and `poisson` is not re-implemented here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special as sc
import scipy.stats as st

import rulekit
from rulekit import Dual
from rules._support.binding import Binder
from rules._support.forward import (
    dual_tangent,
    dual_value,
    name_rules,
    no_tangent,
    register_like,
)
from rules.numpy._traced_active import inexact_value
from rules.scipy.linalg import solve_triangular
from rules.scipy.stats import distributions as _dist
from rules.scipy.stats import multivariate as _mv
from rules.scipy.stats._common import refuse

__all__ = ["stats_rules"]

_NORM_PDF_C = np.sqrt(2 * np.pi)  # (scipy's constants, computed as scipy computes them)
_NORM_PDF_LOGC = np.log(_NORM_PDF_C)
_LOG_2PI = np.log(2 * np.pi)
_LOG_2 = np.log(2)

Fn = Callable[..., Any]


# -- the rules: jvp / vjp of a re-implementation, over the active arguments --------------------


def stats_rules(
    qualname: str,
    names: Sequence[str],
    defaults: dict[str, Any],
    impl: Fn,
    *,
    constants: dict[str, str] | None = None,
    check: Callable[[dict[str, Any], list[str]], None] | None = None,
) -> tuple[Fn, Fn]:
    """A forward rule and a differentiable pullback for a method with parameters `names`
    (positional or keyword, `defaults`) re-implemented as `impl(**arguments by name)`.

    Both differentiate `impl` in the active arguments only (`rulekit.jvp` / `rulekit.vjp`
    of it with the others closed over), so that a constant argument never reaches a rule
    as a traced value. `constants` maps the parameters that have no derivative to why
    (an active one raises NotImplementedError, as in the reverse rule); `check(values,
    active)` validates a call on the plain primal values before it is differentiated."""
    bind = Binder.from_names(names, defaults)
    refused = constants or {}

    def refuse_active(active: list[str]) -> None:
        for n in active:
            if n in refused:
                refuse(qualname, n, refused[n])

    def validate(values: dict[str, Any], active: list[str]) -> None:
        if check is not None and active:
            check({k: _plain(v) for k, v in values.items()}, active)

    def frule(f: Any, *args: Any, **kwargs: Any) -> Any:
        b = bind(args, kwargs)
        values = {n: dual_value(v) for n, v in b.items()}
        tangents = {n: dual_tangent(v) for n, v in b.items()}
        active = [n for n in names if not no_tangent(tangents[n])]
        if not active:
            return Dual(impl(**values), None)
        refuse_active(active)
        validate(values, active)

        def call(*xs: Any) -> Any:
            return impl(**{**values, **dict(zip(active, xs, strict=True))})

        y, dy = rulekit.jvp(
            call, tuple(values[n] for n in active), tuple(tangents[n] for n in active)
        )
        return Dual(y, dy)

    def vjp(act: Sequence[bool], *args: Any, **kwargs: Any) -> Any:
        b = dict(bind(args, kwargs))
        pos = list(names[: len(args)])
        active = [n for n, a in zip(pos, act, strict=True) if a and inexact_value(b[n])]
        refuse_active(active)
        validate(b, active)
        if not active:
            return impl(**b), lambda g: (None,) * len(args)

        def call(*xs: Any) -> Any:
            return impl(**{**b, **dict(zip(active, xs, strict=True))})

        y, vjp_fn = rulekit.vjp(call, *(b[n] for n in active))

        def pullback(g: Any) -> tuple[Any, ...]:
            cts = dict(zip(active, vjp_fn(g), strict=True))
            return tuple(cts.get(n) for n in pos)

        return y, pullback

    name = qualname.replace("scipy.stats.", "").replace(".", "_")
    name_rules(frule, vjp, name, f"{qualname}'s NumPy re-implementation")
    frule.keyword_tangents = True  # type: ignore[attr-defined]  # (see rulekit.frule)
    return frule, vjp


# -- helpers of the re-implementations ----------------------------------------------------------


def _arr(v: Any) -> Any:
    """`np.asarray(v)` for a plain Python number (never traced: as scipy, a strongly typed
    0-d array); any other value as it is (arrays, NumPy scalars, traced values)."""
    return np.asarray(v) if isinstance(v, (bool, int, float)) else v


def _as(v: Any, dtype: Any) -> Any:
    """`v` in `dtype` (a no-op when it has it)."""
    return v if v.dtype == dtype else np.astype(v, dtype)


def _reshape(v: Any, shape: tuple[int, ...]) -> Any:
    """np.reshape, also for a (traced) scalar, which np.reshape has no rule for."""
    return v * np.ones(shape, v.dtype) if np.ndim(v) == 0 else np.reshape(v, shape)


def _unpack(y: Any) -> Any:
    """A 0-d array as a NumPy scalar, as scipy returns it (`output[()]`): y·1, which NumPy
    returns as a scalar (and which has the same value, −0.0 and NaN included)."""
    return y * 1 if np.ndim(y) == 0 else y


_PLAIN = (bool, int, float, complex, str, np.generic, np.ndarray, type(None))


def _plain(v: Any) -> Any:
    """The value of `v` with no level's derivative (`rulekit.stop_gradient`; a traced scalar
    through a one-element array, as a NumPy scalar)."""
    if isinstance(v, _PLAIN):
        return v
    if np.ndim(v) == 0:
        return rulekit.stop_gradient(v * np.ones(1))[0]
    return rulekit.stop_gradient(v)


# -- univariate location-scale families ---------------------------------------------------------


@dataclass(frozen=True)
class _Family:
    """A family's standardized formulas (scipy's `_logpdf`, `_pdf`, ... on z and the shape
    parameters), its support [lo, hi] and a point `inside` it."""

    shapes: tuple[str, ...]
    lo: float
    hi: float
    inside: float
    formulas: dict[str, Fn]


def _gamma_logpdf(z: Any, a: Any) -> Any:
    return sc.xlogy(a - 1.0, z) - z - sc.gammaln(a)


def _beta_logpdf(z: Any, a: Any, b: Any) -> Any:
    return sc.xlog1py(b - 1.0, -z) + sc.xlogy(a - 1.0, z) - sc.betaln(a, b)


def _chi2_logpdf(z: Any, df: Any) -> Any:
    return sc.xlogy(df / 2.0 - 1, z) - z / 2.0 - sc.gammaln(df / 2.0) - (_LOG_2 * df) / 2.0


_FAMILIES = {
    "norm": _Family((), -np.inf, np.inf, 0.0, {
        "logpdf": lambda z: -(z**2) / 2.0 - _NORM_PDF_LOGC,
        "pdf": lambda z: np.exp(-(z**2) / 2.0) / _NORM_PDF_C,
        "cdf": lambda z: sc.ndtr(z),
        "logcdf": lambda z: sc.log_ndtr(z),
        "sf": lambda z: sc.ndtr(-z),
        "logsf": lambda z: sc.log_ndtr(-z),
    }),
    "gamma": _Family(("a",), 0.0, np.inf, 1.0, {
        "logpdf": _gamma_logpdf,
        "pdf": lambda z, a: np.exp(_gamma_logpdf(z, a)),
        "cdf": lambda z, a: sc.gammainc(a, z),
    }),
    "beta": _Family(("a", "b"), 0.0, 1.0, 0.5, {
        "logpdf": _beta_logpdf,
        # (scipy's beta._pdf is Boost's beta pdf: the same value to rounding)
        "pdf": lambda z, a, b: np.exp(_beta_logpdf(z, a, b)),
        "cdf": lambda z, a, b: sc.betainc(a, b, z),
    }),
    "chi2": _Family(("df",), 0.0, np.inf, 1.0, {
        "logpdf": _chi2_logpdf,
        "pdf": lambda z, df: np.exp(_chi2_logpdf(z, df)),
        "cdf": lambda z, df: sc.gammainc(df / 2.0, z / 2.0),  # (scipy's chdtr)
    }),
}  # fmt: skip

#: method → (closed support test, the end past which the value saturates, the value there,
#: the value elsewhere outside the support): rv_continuous's constants
_OUTSIDE: dict[str, tuple[bool, str | None, float, float]] = {
    "logpdf": (True, None, 0.0, -np.inf),
    "pdf": (True, None, 0.0, 0.0),
    "cdf": (False, "hi", 1.0, 0.0),
    "logcdf": (False, "hi", 0.0, -np.inf),
    "sf": (False, "lo", 1.0, 0.0),
    "logsf": (False, "lo", 0.0, -np.inf),
}


def _at_infinity(
    method: str, formula: Fn, at: Any, z: Any, shapes: list[Any], scale: Any, inside: float
) -> Any:  # fmt: skip
    """scipy's value at the points `at` where z = ±inf lies in the support (a density's
    limit, NaN where scipy's formula gives ∞ − ∞), on the plain values: no derivative."""
    zs = np.where(at, np.where(z > 0, np.inf, -np.inf), inside)
    value = formula(zs, *(np.where(at, _plain(s), 1) for s in shapes))
    scale_at = np.where(at, _plain(scale), 1)
    if method == "logpdf":
        return value - np.log(scale_at)
    return value / scale_at if method == "pdf" else value


def _univariate_impl(family: str, method: str) -> Fn:
    """rv_continuous.<method>(x, *shapes, loc, scale) on scipy's formula for `family`."""
    fam = _FAMILIES[family]
    formula = fam.formulas[method]
    closed, end, at_end, outside = _OUTSIDE[method]

    def impl(**kw: Any) -> Any:
        shapes = [_arr(kw[s]) for s in fam.shapes]
        x, loc, scale = _arr(kw["x"]), _arr(kw["loc"]), _arr(kw["scale"])
        dtype = np.promote_types(x.dtype, np.float64)
        positive = scale > 0
        valid = positive
        for s in shapes:
            valid = valid & (s > 0)
        with np.errstate(invalid="ignore", divide="ignore"):  # (±inf, NaN points: masked)
            z = (x - loc) / np.where(positive, scale, 1)  # (compared only: plain masks)
            inside = (fam.lo <= z) & (z <= fam.hi) if closed else (fam.lo < z) & (z < fam.hi)
            use = valid & inside
            const = np.where(~valid | np.isnan(z), np.nan, outside)  # (scipy's NaN: invalid)
            if end is not None:
                past = valid & ((z >= fam.hi) if end == "hi" else (z <= fam.lo))
                const = np.where(past, at_end, const)
            at_inf = use & np.isinf(z)  # (±inf in a closed support: a constant there)
            use = use & ~at_inf
            if np.any(at_inf):
                const = np.where(at_inf, _at_infinity(method, formula, at_inf, z, shapes, scale,
                                                      fam.inside), const)  # fmt: skip
        # The formula on the points where it is used, at a point inside the support elsewhere:
        # no infinite or NaN derivative of an unused point reaches a shared parameter.
        scale_used = np.where(use, scale, 1)
        z_used = _as((np.where(use, x, 0) - np.where(use, loc, 0)) / scale_used, dtype)
        value = formula(np.where(use, z_used, fam.inside), *(np.where(use, s, 1) for s in shapes))
        if method == "logpdf":
            value = value - np.log(scale_used)
        elif method == "pdf":
            value = value / scale_used
        return _unpack(_as(np.where(use, value, const), dtype))

    impl.__name__ = impl.__qualname__ = f"{family}_{method}_impl"
    impl.__doc__ = f"scipy.stats.{family}.{method}, re-implemented in NumPy (see the module)."
    return impl


def _register_univariate() -> None:
    why = ("it needs the derivative of an incomplete beta/gamma function with respect to its "
           "parameters")  # fmt: skip
    for family, fam in _FAMILIES.items():
        shape_names = fam.shapes
        ns = getattr(_dist, family)
        for method in ns.methods:
            names = ("x", *shape_names, "loc", "scale")
            constants = {} if method in ("pdf", "logpdf") else dict.fromkeys(shape_names, why)
            frule, vjp = stats_rules(
                f"scipy.stats.{family}.{method}",
                names,
                {"loc": 0, "scale": 1},
                _univariate_impl(family, method),
                constants=constants,
            )
            register_like(getattr(ns, method), frule=frule, vjp=vjp)


_register_univariate()


# -- multivariate normal ------------------------------------------------------------------------


def _mvn_params(mean: Any, cov: Any) -> tuple[int, Any, Any]:
    """(dim, μ, Σ) as scipy's `_process_parameters_psd` makes them (float64; Σ read from the
    lower triangle of a 2-d cov, as scipy's eigh(lower=True))."""
    c = _as(_arr(1.0 if cov is None else cov), np.float64)
    if mean is None:
        dim = 1 if c.ndim < 2 else c.shape[0]
        m = np.zeros(dim)
    else:
        m = _as(_arr(mean), np.float64)
        dim = int(np.size(m))
        m = _reshape(m, (dim,))
    if dim == 1:
        return dim, m, _reshape(c, (1, 1))
    if c.ndim == 0:
        return dim, m, c * np.eye(dim)
    if c.ndim == 1:
        return dim, m, np.diag(c)
    return dim, m, np.tril(c) + np.transpose(np.tril(c, -1))


def _mvn_logpdf(x: Any, mean: Any = None, cov: Any = 1, allow_singular: Any = False) -> Any:
    """logpdf per point: −½(d log 2π + log det Σ + ‖L⁻¹(x − μ)‖²), L = cholesky(Σ)."""
    dim, m, c = _mvn_params(mean, cov)
    X = _as(_arr(x), np.float64)  # (scipy's _process_quantiles)
    if X.ndim == 0:
        X = _reshape(X, (1,))
    if X.ndim == 1:
        X = np.reshape(X, (-1, 1) if dim == 1 else (1, -1))
    dev = X - m
    L = np.linalg.cholesky(c)
    W = solve_triangular(L, np.transpose(np.reshape(dev, (-1, dim))), lower=True)
    maha = np.reshape(np.sum(W * W, axis=0), dev.shape[:-1])
    return -0.5 * (dim * _LOG_2PI + _log_det(L) + maha)


def _log_det(L: Any) -> Any:
    """log det Σ = 2 Σ log Lᵢᵢ (the diagonal by an index: np.diagonal's pullback writes
    into a view, which a nested reverse level refuses)."""
    i = np.arange(L.shape[0])
    return 2.0 * np.sum(np.log(L[i, i]))


def _squeezed(y: Any) -> Any:
    """scipy's `_squeeze_output`: the size-1 axes dropped; one value as a NumPy scalar (by
    an index: a squeeze to 0-d has a scalar cotangent, which np.reshape has no rule for)."""
    if np.ndim(y) == 0:
        return _unpack(y)
    return np.reshape(y, (-1,))[0] if np.size(y) == 1 else np.squeeze(y)


def _mvn_logpdf_impl(x: Any, mean: Any, cov: Any, allow_singular: Any) -> Any:
    return _squeezed(_mvn_logpdf(x, mean, cov, allow_singular))


def _mvn_pdf_impl(x: Any, mean: Any, cov: Any, allow_singular: Any) -> Any:
    return _squeezed(np.exp(_mvn_logpdf(x, mean, cov, allow_singular)))


def _mvn_entropy_impl(mean: Any, cov: Any) -> Any:
    """½(d (log 2π + 1) + log det Σ)."""
    dim, _, c = _mvn_params(mean, cov)
    return 0.5 * (dim * (_LOG_2PI + 1) + _log_det(np.linalg.cholesky(c)))


def _mvn_check(method: str) -> Callable[[dict[str, Any], list[str]], None]:
    """Run scipy's method on the primals (its errors: shapes, a singular cov without
    allow_singular), and refuse a differentiated singular cov (SingularCovarianceError)."""
    fn = getattr(st.multivariate_normal, method)
    qualname = f"scipy.stats.multivariate_normal.{method}"

    def check(v: dict[str, Any], active: list[str]) -> None:
        fn(**v)
        if method == "entropy" and "cov" not in active:
            return
        if method == "entropy" or v["allow_singular"]:
            _, _, C = _mv._params(v["mean"], v["cov"])
            _mv._check_nonsingular(C, qualname)

    return check


def _register_multivariate() -> None:
    mvn = _mv.multivariate_normal
    density_names = ("x", "mean", "cov", "allow_singular")
    density_defaults = {"mean": None, "cov": 1, "allow_singular": False}
    for method, impl in (("logpdf", _mvn_logpdf_impl), ("pdf", _mvn_pdf_impl)):
        frule, vjp = stats_rules(
            f"scipy.stats.multivariate_normal.{method}",
            density_names,
            density_defaults,
            impl,
            check=_mvn_check(method),
        )
        register_like(getattr(mvn, method), frule=frule, vjp=vjp)
    frule, vjp = stats_rules(
        "scipy.stats.multivariate_normal.entropy",
        ("mean", "cov"),
        {"mean": None, "cov": 1},
        _mvn_entropy_impl,
        check=_mvn_check("entropy"),
    )
    register_like(mvn.entropy, frule=frule, vjp=vjp)


_register_multivariate()


# -- dirichlet ----------------------------------------------------------------------------------


def _dirichlet_impl(method: str) -> Fn:
    """−log B(α) + Σᵢ xlogy(αᵢ − 1, xᵢ) (x's first axis the components; with K − 1 of them,
    x_K = 1 − Σ xᵢ), scipy's `_logpdf`; pdf = its exp."""

    def impl(x: Any, alpha: Any) -> Any:
        x, alpha = _arr(x), _arr(alpha)
        if x.shape[0] != alpha.shape[0]:
            x = np.concatenate([x, 1 - np.sum(x, axis=0, keepdims=True)], axis=0)
        ln_b = np.sum(sc.gammaln(alpha)) - sc.gammaln(np.sum(alpha))
        out = -ln_b + np.sum(np.transpose(sc.xlogy(alpha - 1, np.transpose(x))), axis=0)
        return _squeezed(np.exp(out) if method == "pdf" else out)

    impl.__name__ = impl.__qualname__ = f"dirichlet_{method}_impl"
    return impl


def _dirichlet_check(method: str) -> Callable[[dict[str, Any], list[str]], None]:
    fn = getattr(st.dirichlet, method)

    def check(v: dict[str, Any], active: list[str]) -> None:
        fn(v["x"], v["alpha"])  # (scipy's errors: x off the simplex, alpha <= 0, shapes)

    return check


def _register_dirichlet() -> None:
    for method in ("logpdf", "pdf"):
        frule, vjp = stats_rules(
            f"scipy.stats.dirichlet.{method}",
            ("x", "alpha"),
            {},
            _dirichlet_impl(method),
            check=_dirichlet_check(method),
        )
        register_like(getattr(_mv.dirichlet, method), frule=frule, vjp=vjp)


_register_dirichlet()
