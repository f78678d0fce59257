"""Rules for scipy.special functions written in Python on top of private ufuncs: `zeta` and
`lambertw`.

`scipy.special.zeta(x, q)` calls the ufunc `scipy.special._ufuncs._zeta(x, q)` (Hurwitz),
`zeta(x)` calls `_riemann_zeta(x)`, and `lambertw(z, k, tol)` calls `_lambertw(z, k, tol)`.
A traced argument reaches those ufuncs through `__array_ufunc__`, so the rules are
registered for them: unchanged user code (`scipy.special.zeta(s, q)` on a traced q) works,
and so does `scipy.special.polygamma(n, x)` traced through (it computes
(−1)ⁿ⁺¹ n! ζ(n+1, x)). Errors name the public functions.

    ζ(x, q) = Σₖ (k + q)^{−x}:  q̄ += conj(−x·ζ(x+1, q))·ȳ   (x: no rule, scipy has no ∂ζ/∂x)
    W(z) e^{W(z)} = z:          z̄ += conj(W′(z))·ȳ,  W′ = W/(z(1 + W)) = e^{−W}/(1 + W)

(k, the branch of W, is an integer; tol only stops W's iteration: neither gets a cotangent.)
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import scipy.special as sp
from scipy.special import _ufuncs

import rulekit
from rulekit import Array, CoDual, elementwise
from rules.scipy.special._common import CONST, active, no_partial, operand_pattern

__all__ = ["lambertw", "zeta"]

zeta, lambertw = sp.zeta, sp.lambertw  # (re-exported: the functions these rules serve)


def _refuse(call: str, label: str, why: str) -> None:
    raise NotImplementedError(
        f"{call}: the derivative with respect to {label} is not implemented, and {label} is "
        f"active here. Fix: pass {label} as a constant (a plain value, not traced and not in "
        f"argnums, or an integer). ({why}.)"
    )


_NO_DX = "scipy has no derivative of the zeta function in its exponent x"


# -- Hurwitz zeta ζ(x, q) -----------------------------------------------------------------------


def _d_zeta_q(x: Any, q: Any, y: Any) -> Any:
    """∂q ζ(x, q) = −x·ζ(x + 1, q)."""
    return np.negative(x) * _ufuncs._zeta(np.add(x, 1), q)


_hurwitz = elementwise(
    _ufuncs._zeta, no_partial, _d_zeta_q, patterns=(), quiet=True,
    doc="q̄ += conj(−x·ζ(x+1, q))·ȳ",
)  # fmt: skip


def zeta_rrule(f: CoDual, x: CoDual, q: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """scipy.special.zeta(x, q) = ζ(x, q) (the ufunc `_zeta`)  ⇒  q̄ += conj(−x·ζ(x+1, q))·ȳ;
    an active x is refused (NotImplementedError)."""
    if active(x):
        _refuse("scipy.special.zeta(x, q)", "x", _NO_DX)
    return _hurwitz.rule(f, x, q, **kwargs)


def _zeta_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(400)
    q = rng.uniform(0.5, 3.0, (2, 3))
    return [
        rulekit.example(np.array([2, 3, 4]), q),  # integer exponents (as in polygamma)
        rulekit.example(3, q[0].astype(np.float32)),
        rulekit.example(2, 1.7),
        rulekit.example(np.array([[2], [5]]), np.float64(0.8)),
    ]


_X = operand_pattern(_ufuncs._zeta, complex_=True, const=True)
_Q = operand_pattern(_ufuncs._zeta, const=True)
rulekit.rrule.register(_ufuncs._zeta, _X, _Q, examples=_zeta_examples)(zeta_rrule)


# -- Riemann zeta ζ(x) --------------------------------------------------------------------------


def riemann_zeta_rrule(f: CoDual, x: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
    """scipy.special.zeta(x) = ζ(x) (the ufunc `_riemann_zeta`): no derivative in x (scipy has
    none), so an active x is refused with NotImplementedError; a constant one is computed."""
    if active(x):
        _refuse("scipy.special.zeta(x)", "x", _NO_DX)
    return _riemann.rule(f, x, **kwargs)


_riemann = elementwise(_ufuncs._riemann_zeta, no_partial, patterns=(), doc="no derivative")


def _riemann_zeta_examples() -> list[rulekit.Example]:
    # Only constant (integer) arguments: an active x is refused (tests/rules/test_messages.py).
    return [rulekit.example(np.array([2, 3, 4])), rulekit.example(6)]


rulekit.rrule.register(
    _ufuncs._riemann_zeta,
    operand_pattern(_ufuncs._riemann_zeta, complex_=True, const=True),
    examples=_riemann_zeta_examples,
)(riemann_zeta_rrule)


# -- Lambert W ----------------------------------------------------------------------------------


def _d_lambertw(z: Any, k: Any, tol: Any, w: Any) -> Any:
    """W′(z) = W/(z(1 + W)), and e^{−W}/(1 + W) at z = 0 (where W = 0 on the principal
    branch: W′ = 1); infinite at the branch point z = −1/e (W = −1)."""
    z = np.asarray(z)
    at0 = z == 0
    return np.where(at0, np.exp(np.negative(w)), w / np.where(at0, 1, z)) / np.add(w, 1)


# (k: an integer, never differentiated; tol only stops the iteration: its partial is 0)
_lambertw = elementwise(
    _ufuncs._lambertw, _d_lambertw, no_partial, lambda z, k, tol, w: 0.0, patterns=(),
    quiet=True, doc="z̄ += conj(W/(z(1 + W)))·ȳ",
)  # fmt: skip


def lambertw_rrule(f: CoDual, z: CoDual, k: CoDual, tol: CoDual, **kw: Any) -> tuple[CoDual, Any]:
    """scipy.special.lambertw(z, k, tol) = W_k(z) (the ufunc `_lambertw`)  ⇒
    z̄ += conj(W′(z))·ȳ with W′ = W/(z(1 + W)) (1 at z = 0 on the principal branch).
    W is complex: for a real z, z̄ takes the real part. k and tol get no cotangent."""
    return _lambertw.rule(f, z, k, tol, **kw)


def _lambertw_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(410)
    z = rng.uniform(-0.3, 4.0, (2, 3))
    z[0, 0] = 0.0  # W′(0) = 1
    # tol = 1e-5 (Halley's method converges cubically: W is then exact to rounding): the kit
    # also differentiates tol by finite differences, whose steps (≥ 1e-6) must keep tol > 0;
    # atol: tol ± a step may change W by an ulp, a finite difference of ~1e-11 (W′ in tol: 0).
    tol = 1e-5
    calls = [
        (z, np.array(0), tol),  # as scipy calls it: k a 0-d integer array
        (rng.uniform(-0.3, -0.05, 3), np.array(-1), tol),  # the real k = −1 branch
        (rng.normal(size=3) + 1j * rng.normal(size=3), np.array([0, 1, -1]), tol),
        (rng.uniform(0.5, 2.0, 4).astype(np.float32), np.array(0), tol),
    ]
    return [rulekit.Example(args, atol=1e-9) for args in calls]


#: z: real or complex (its loops are complex: a real z is cast, and W is complex)
_Z: Any = Union[
    (
        *(Array[t] for t in (np.float16, np.float32, np.float64, np.complex64, np.complex128)),
        *(float, complex, np.float32, np.float64, np.complex64, np.complex128),
    )
]
_TOL = Union[float, np.floating, int, np.integer]
rulekit.rrule.register(_ufuncs._lambertw, _Z, CONST, _TOL, examples=_lambertw_examples)(
    lambertw_rrule
)
