"""Forward rules and differentiable pullbacks for the scipy.special functions that are not
plain `declare`d ufuncs (those get theirs from their declaration, `_common.declare`).

    logsumexp:   y = log|Σ b·eᵃ|, s = sign Σ b·eᵃ
                 ẏ = Σ s·e^{a−y}·(b·ȧ + ḃ);   ā = s·b·e^{a−y}·ȳ,  b̄ = s·e^{a−y}·ȳ
    softmax:     ẏ = s ⊙ (ẋ − Σ s ⊙ ẋ);        x̄ = s ⊙ ȳ − s·Σ s ⊙ ȳ
    log_softmax: ẏ = ẋ − Σ e^y ⊙ ẋ;            x̄ = ȳ − e^y·Σ ȳ
    polygamma:   ẏ = ψ⁽ⁿ⁺¹⁾(x)·ẋ;               x̄ = ψ⁽ⁿ⁺¹⁾(x)·ȳ   (n a constant)
    multigammaln: ẏ = Σ_{j<d} ψ(a − j/2)·ȧ;     ā = Σ_{j<d} ψ(a − j/2)·ȳ
    gammasgn:    ẏ = 0,  x̄ = 0 (piecewise constant)
    zeta(x, q):  q̇ term −x·ζ(x+1, q)·q̇ (x: refused when active); zeta(x): refused
    lambertw:    ż term W′(z)·ż, W′ = W/(z(1 + W))

The bodies call the `rulekit.primitive` wrappers (`rules.scipy.special.logsumexp`, ...)
and numpy functions only, so they trace: these functions are differentiable to any order.
`xlogy`, `xlog1py`, `rel_entr` are re-declared here with partials written without
`np.asarray` (their reverse-rule partials convert their operands), so that their derived
pullbacks trace too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.special as sp
from scipy.special import _ufuncs

from rulekit import Dual, unbroadcast
from rulekit._declared_rules import elementwise_frule, elementwise_vjp, shaped_like
from rulekit._elementwise import Elementwise
from rules._support.forward import bind_by_name, dual_tangent, dual_value, register_like
from rules.scipy.special import wrapped
from rules.scipy.special._common import refusing_forward
from rules.scipy.special.binary import polygamma
from rules.scipy.special.gamma_bessel import gammasgn, multigammaln
from rules.scipy.special.reductions import log_softmax, logsumexp, softmax

__all__: list[str] = []


def _inexact(x: Any) -> bool:
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return bool(dt.kind in "fc")
    return isinstance(x, (float, complex, np.inexact))


def _to_arg(g: Any, x: Any) -> Any:
    """Cotangent `g` for argument `x`: x's shape (broadcasting summed), real for a real x,
    x's float dtype; a 0-d result for a scalar x."""
    if np.shape(g) != np.shape(x):
        g = unbroadcast(g, np.shape(x))
    if np.iscomplexobj(g) and not np.iscomplexobj(x):
        g = np.real(g)
    dt = getattr(x, "dtype", None)
    if dt is not None and getattr(g, "dtype", dt) != dt:
        g = g.astype(dt)
    if np.ndim(x) == 0 and np.ndim(g) != 0:
        g = np.reshape(g, ())
    return g


def _zeros_like(y: Any) -> Any:
    """Zeros of `y`'s shape and dtype (a numpy scalar for a scalar `y`)."""
    dt = getattr(y, "dtype", None)
    if dt is None:
        return type(y)(0)
    if isinstance(y, np.generic):
        return dt.type(0)
    return np.zeros(np.shape(y), dt)


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    return tuple(sorted(int(a) % max(ndim, 1) for a in axes))


# -- logsumexp ----------------------------------------------------------------------------------


def _keep(v: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """Reduced value `v` with the reduced `axes` of `shape` kept as length 1 (a scalar
    broadcasts as it is)."""
    if np.ndim(v) == 0:
        return v
    return np.reshape(v, tuple(1 if k in axes else n for k, n in enumerate(shape)))


def _lse_parts(a: Any, b: Any, axis: Any, keepdims: bool, rs: bool) -> tuple[Any, Any, Any]:
    """(result, w, sign): the primal result, w = e^{a − y} (y broadcast back over `axis`)
    and the sign broadcast back likewise (None without return_sign)."""
    res = logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=rs)
    lse, sign = res if rs else (res, None)
    shape = np.broadcast_shapes(np.shape(a), np.shape(b)) if b is not None else np.shape(a)
    axes = _axes(axis, len(shape))
    if not keepdims:
        lse = _keep(lse, shape, axes)
        sign = None if sign is None else _keep(sign, shape, axes)
    with np.errstate(invalid="ignore"):  # −inf − (−inf) where a slice has no mass: NaN
        w = np.exp(a - lse)
    if sign is not None:
        w = w * sign
    return res, w, axes


def logsumexp_frule(f: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """ẏ = Σ_axis s·e^{a−y}·(b·ȧ + ḃ) (the sign output: a zero tangent)."""
    p = bind_by_name(sp.logsumexp, args, kwargs)
    a, b = p["a"], p["b"]
    axis, keepdims, rs = (
        dual_value(p["axis"]),
        bool(dual_value(p["keepdims"])),
        bool(dual_value(p["return_sign"])),
    )
    da, db = dual_tangent(a), dual_tangent(b)
    res, w, axes = _lse_parts(a.x, dual_value(b), axis, keepdims, rs)
    if da is None and db is None:
        return Dual(res, None)
    t: Any = None
    if da is not None:
        t = w * da if dual_value(b) is None else w * (dual_value(b) * da)
    if db is not None:
        t = w * db if t is None else t + w * db
    dy = np.sum(t, axis=axes, keepdims=keepdims)
    if rs:
        return Dual(res, (shaped_like(dy, res[0]), _zeros_like(res[1])))
    return Dual(res, shaped_like(dy, res))


def logsumexp_vjp(active: Sequence[bool], *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """ā = s·b·e^{a−y}·ȳ, b̄ = s·e^{a−y}·ȳ (b passed positionally; a keyword b gets none)."""
    p = bind_by_name(sp.logsumexp, args, kwargs)
    a, b = p["a"], p["b"]
    axis, keepdims, rs = p["axis"], bool(p["keepdims"]), bool(p["return_sign"])
    res, w, axes = _lse_parts(a, b, axis, keepdims, rs)
    n = len(args)

    def pullback(g: Any) -> tuple[Any, ...]:
        if rs:
            g = g[0] if isinstance(g, tuple) else g
        out: list[Any] = [None] * n
        if g is None:
            return tuple(out)
        ge = g if keepdims else _keep(g, np.shape(w), axes)
        wg = w * ge
        if active[0]:
            out[0] = _to_arg(wg if b is None else wg * b, a)
        if n > 2 and active[2] and b is not None and _inexact(b):
            out[2] = _to_arg(wg, b)
        return tuple(out)

    return res, pullback


register_like(logsumexp, frule=logsumexp_frule, vjp=logsumexp_vjp)


# -- softmax, log_softmax -----------------------------------------------------------------------


def softmax_frule(f: Dual, x: Dual, *rest: Dual, **kwargs: Any) -> Dual:
    """s = softmax(x) ⇒ ṡ = s ⊙ (ẋ − Σ_axis s ⊙ ẋ)."""
    axis = dual_value(bind_by_name(sp.softmax, (x, *rest), kwargs)["axis"])
    s = softmax(x.x, axis=axis)
    if x.dx is None:
        return Dual(s, None)
    sd = s * x.dx
    return Dual(s, shaped_like(sd - s * np.sum(sd, axis=axis, keepdims=True), s))


def softmax_vjp(active: Sequence[bool], x: Any, *rest: Any, **kwargs: Any) -> tuple[Any, Any]:
    """x̄ = s ⊙ ȳ − s·Σ_axis s ⊙ ȳ."""
    axis = bind_by_name(sp.softmax, (x, *rest), kwargs)["axis"]
    s = softmax(x, axis=axis)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None or not active[0]:
            return (None,) * (1 + len(rest))
        sg = s * g
        return (_to_arg(sg - s * np.sum(sg, axis=axis, keepdims=True), x), *(None,) * len(rest))

    return s, pullback


def log_softmax_frule(f: Dual, x: Dual, *rest: Dual, **kwargs: Any) -> Dual:
    """y = x − logsumexp(x) ⇒ ẏ = ẋ − Σ_axis e^y ⊙ ẋ."""
    axis = dual_value(bind_by_name(sp.log_softmax, (x, *rest), kwargs)["axis"])
    y = log_softmax(x.x, axis=axis)
    if x.dx is None:
        return Dual(y, None)
    return Dual(y, shaped_like(x.dx - np.sum(np.exp(y) * x.dx, axis=axis, keepdims=True), y))


def log_softmax_vjp(active: Sequence[bool], x: Any, *rest: Any, **kwargs: Any) -> tuple[Any, Any]:
    """x̄ = ȳ − e^y·Σ_axis ȳ."""
    axis = bind_by_name(sp.log_softmax, (x, *rest), kwargs)["axis"]
    y = log_softmax(x, axis=axis)

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None or not active[0]:
            return (None,) * (1 + len(rest))
        gx = g - np.exp(y) * np.sum(g, axis=axis, keepdims=True)
        return (_to_arg(gx, x), *(None,) * len(rest))

    return y, pullback


register_like(softmax, frule=softmax_frule, vjp=softmax_vjp)
register_like(log_softmax, frule=log_softmax_frule, vjp=log_softmax_vjp)


# -- polygamma, multigammaln --------------------------------------------------------------------


def polygamma_frule(f: Dual, n: Dual, x: Dual) -> Dual:
    """y = ψ⁽ⁿ⁾(x) ⇒ ẏ = ψ⁽ⁿ⁺¹⁾(x)·ẋ (n: a constant integer)."""
    y = polygamma(n.x, x.x)
    if x.dx is None:
        return Dual(y, None)
    return Dual(y, shaped_like(polygamma(np.add(n.x, 1), x.x) * x.dx, y))


def polygamma_vjp(active: Sequence[bool], n: Any, x: Any) -> tuple[Any, Any]:
    """x̄ = ψ⁽ⁿ⁺¹⁾(x)·ȳ."""
    y = polygamma(n, x)

    def pullback(g: Any) -> tuple[Any, Any]:
        if g is None or not active[1]:
            return (None, None)
        return (None, _to_arg(polygamma(np.add(n, 1), x) * g, x))

    return y, pullback


def _psi_sum(a: Any, d: Any) -> Any:
    """Σ_{j<d} ψ(a − j/2)."""
    half = (np.arange(int(d)) / 2.0).astype(np.result_type(getattr(a, "dtype", float), np.float32))
    return np.sum(
        sp.digamma((np.reshape(a, (*np.shape(a), 1)) if np.ndim(a) else a) - half), axis=-1
    )


def multigammaln_frule(f: Dual, a: Dual, d: Dual) -> Dual:
    """y = log Γ_d(a) ⇒ ẏ = Σ_{j<d} ψ(a − j/2)·ȧ (d: a constant integer)."""
    y = multigammaln(a.x, d.x)
    if a.dx is None:
        return Dual(y, None)
    return Dual(y, shaped_like(_psi_sum(a.x, d.x) * a.dx, y))


def multigammaln_vjp(active: Sequence[bool], a: Any, d: Any) -> tuple[Any, Any]:
    """ā = Σ_{j<d} ψ(a − j/2)·ȳ."""
    y = multigammaln(a, d)

    def pullback(g: Any) -> tuple[Any, Any]:
        if g is None or not active[0]:
            return (None, None)
        return (_to_arg(_psi_sum(a, d) * g, a), None)

    return y, pullback


register_like(polygamma, frule=polygamma_frule, vjp=polygamma_vjp)
register_like(multigammaln, frule=multigammaln_frule, vjp=multigammaln_vjp)


# -- gammasgn: piecewise constant ---------------------------------------------------------------


def gammasgn_frule(f: Dual, x: Dual, **kwargs: Any) -> Dual:
    """y = sign Γ(x): ẏ = 0."""
    y = gammasgn(x.x, **kwargs)
    return Dual(y, None if x.dx is None else _zeros_like(y))


def gammasgn_vjp(active: Sequence[bool], x: Any, **kwargs: Any) -> tuple[Any, Any]:
    """x̄ = 0."""
    y = gammasgn(x, **kwargs)
    return y, lambda g: (_zeros_like(x) if active[0] and _inexact(x) else None,)


register_like(gammasgn, frule=gammasgn_frule, vjp=gammasgn_vjp)


# -- zeta, lambertw (Python functions over private ufuncs) ---------------------------------------

_NO_DX = "scipy has no derivative of the zeta function in its exponent x"
_zeta_frule, _zeta_vjp = refusing_forward(wrapped._hurwitz, {0: "x"}, _NO_DX, name="zeta")
register_like(_ufuncs._zeta, frule=_zeta_frule, vjp=_zeta_vjp)
_rz_frule, _rz_vjp = refusing_forward(wrapped._riemann, {0: "x"}, _NO_DX, name="zeta")
register_like(_ufuncs._riemann_zeta, frule=_rz_frule, vjp=_rz_vjp)
register_like(
    _ufuncs._lambertw,
    frule=elementwise_frule(wrapped._lambertw),
    vjp=elementwise_vjp(wrapped._lambertw),
)


# -- xlogy, xlog1py, rel_entr: partials that trace ----------------------------------------------


def _where0(x: Any, v: Any) -> Any:
    """v, with 0 where x == 0 (the partial of a function identically 0 at x = 0)."""
    return np.where(np.equal(x, 0), 0.0, v)


def _rel_entr_dx(x: Any, y: Any, out: Any) -> Any:
    inside = np.logical_and(np.greater(x, 0), np.greater(y, 0))
    d = np.where(inside, np.log(x) - np.log(y) + 1, np.nan)
    return np.where(np.logical_and(np.equal(x, 0), np.greater(y, 0)), -np.inf, d)


def _rel_entr_dy(x: Any, y: Any, out: Any) -> Any:
    inside = np.logical_and(np.greater(x, 0), np.greater(y, 0))
    edge = np.logical_and(np.equal(x, 0), np.greater_equal(y, 0))
    return np.where(inside, -(x / y), np.where(edge, 0.0, np.nan))


_TRACEABLE = [
    (sp.xlogy, (lambda x, y, out: np.log(y), lambda x, y, out: _where0(x, x / y)), True),
    (sp.xlog1py, (lambda x, y, out: np.log1p(y), lambda x, y, out: _where0(x, x / (y + 1))), True),
    (sp.rel_entr, (_rel_entr_dx, _rel_entr_dy), False),
]
for _fn, _derivs, _cplx in _TRACEABLE:
    _decl = Elementwise(
        _fn, _derivs, holomorphic=_cplx, quiet=True, module=__name__, name=_fn.__name__
    )
    register_like(_fn, frule=elementwise_frule(_decl), vjp=elementwise_vjp(_decl))
