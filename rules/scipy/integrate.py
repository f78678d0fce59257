"""Rules for scipy.integrate: `odeint(func, y0, t, args=...)` by the adjoint method.

`scipy.integrate.odeint` is a Python function around compiled code: call the
`rulekit.primitive` wrapper `rules.scipy.integrate.odeint` (scipy's name and signature).
The rule differentiates the solution y (shape (T, D)) with respect to the initial
state `y0`, the output times `t` and the float/array parameters in `args`.

`func(y, t, *args)` (or `func(t, y, *args)` with `tfirst=True`) is a plain Python
function of numpy arrays. The forward pass calls it on plain values inside scipy; the
pullback integrates the adjoint system backwards with scipy's odeint itself (as HIPS
autograd does, after Froehlich et al. 2017, arXiv:1711.08079, Sec. 2.4.2), and the
vector–Jacobian products of `func` inside it are computed by rulekit: `func` is traced
(`rulekit.build_rrule`), so it must be written with traceable numpy operations (no
`float(y[0])`, no `np.asarray` of its inputs). Parameters go through `args`, passed
*positionally* when they are traced (`odeint(func, y0, t, (k, w))`): a traced value
captured by `func`'s closure leaves the trace (TracingError), and keyword arguments
return no cotangent.

Accuracy: the gradient is the exact gradient of the ODE solution up to the error of the
two integrations (the forward one and the backward augmented one, which also recomputes
y backwards). Both use the `rtol`/`atol` of the call (scipy's defaults, 1.49e-8, when not
given), so the gradient's relative error is of the order of those tolerances, times the
conditioning of the ODE (integrating a strongly contracting system backwards amplifies
errors). Pass tighter tolerances for more accurate gradients. See
docs/conventions-scipy-more.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import numpy as np
import scipy.integrate

import rulekit
from rulekit import Array, CoDual, NoFData, NoRData, TracingError, Vararg
from rules._support.arguments import array_fdata
from rules._support.binding import binder
from rules._support.cotangents import NO_F, NO_R, accumulate, scalar_rdata
from rules._support.outputs import new_output
from rules.scipy._routing import route_module

__all__ = ["odeint"]

odeint = rulekit.primitive(scipy.integrate.odeint)
_bind = binder(scipy.integrate.odeint)

# Options of the forward call that also govern the backward (augmented) integration.
_BACKWARD_OPTS = ("rtol", "atol", "mxstep", "hmax", "hmin", "mxordn", "mxords")
_FLOATS = (float, np.floating)


def _is_float(v: Any) -> bool:
    return isinstance(v, _FLOATS) or (isinstance(v, np.ndarray) and v.dtype.kind == "f")


def _inexact_inside(v: Any) -> bool:
    if isinstance(v, (tuple, list)):
        return any(_inexact_inside(e) for e in v)
    if isinstance(v, dict):
        return any(_inexact_inside(e) for e in v.values())
    return isinstance(v, (complex, np.complexfloating)) or (
        isinstance(v, np.ndarray) and v.dtype.kind == "c"
    )


def _param_kind(v: Any, i: int) -> bool:
    """Whether element `i` of an active args tuple is differentiable (a float or float array);
    False for constants (integers, strings, callables, ...). Complex values and containers
    with float or complex data inside have no rule: raise rather than drop their cotangent."""
    if _is_float(v):
        return True
    if _inexact_inside(v) or (isinstance(v, (tuple, list, dict)) and _float_inside(v)):
        raise NotImplementedError(
            f"rules.scipy.integrate.odeint: args[{i}] is a {type(v).__name__} holding complex or "
            "nested float values, which the rule cannot differentiate. Pass parameters as a "
            "flat tuple of float scalars and float arrays."
        )
    return False


def _float_inside(v: Any) -> bool:
    if isinstance(v, (tuple, list)):
        return any(_float_inside(e) for e in v)
    if isinstance(v, dict):
        return any(_float_inside(e) for e in v.values())
    return _is_float(v)


class _Params:
    """The `args` tuple: its values, and which elements want a cotangent (flattened)."""

    def __init__(self, cd: Any) -> None:
        if isinstance(cd, CoDual):
            self.values = tuple(cd.x) if isinstance(cd.x, tuple) else cd.x
            dx = cd.dx
        else:  # a keyword (or default) value: constants
            self.values, dx = cd, None
            if isinstance(cd, tuple) and any(isinstance(v, rulekit.Traced) for v in cd):
                raise TracingError(
                    "rules.scipy.integrate.odeint: a traced value was passed in args= as a keyword "
                    "argument, which returns no cotangent. Pass the parameters positionally: "
                    "odeint(func, y0, t, (k, w), ...)."
                )
        if not isinstance(self.values, tuple):
            raise TypeError(
                "rules.scipy.integrate.odeint: args must be a tuple (as scipy requires)"
            )
        n = len(self.values)
        dxs = (None,) * n if dx is None else ((NO_F,) * n if isinstance(dx, NoFData) else dx)
        self.active = [
            dx is not None and _param_kind(v, i) and (isinstance(d, np.ndarray) or np.ndim(v) == 0)
            for i, (v, d) in enumerate(zip(self.values, dxs, strict=True))
        ]
        self.fdata = dxs
        self.sizes = [
            int(np.size(v)) if a else 0 for v, a in zip(self.values, self.active, strict=True)
        ]
        self.size = sum(self.sizes)

    def codual(self, i: int) -> CoDual:
        """The CoDual of element i for one vjp of func (fresh zero fdata when active)."""
        v = self.values[i]
        if not self.active[i]:
            return CoDual(v, None)
        return CoDual(v, np.zeros_like(v)) if isinstance(v, np.ndarray) else CoDual(v, NO_F)

    def flatten(self, cds: list[CoDual], rds: tuple[Any, ...]) -> np.ndarray:
        """The active elements' cotangents after a vjp, as one flat vector."""
        parts = []
        for i, a in enumerate(self.active):
            if a:
                g = cds[i].dx if isinstance(cds[i].dx, np.ndarray) else rds[i]
                parts.append(np.ravel(np.asarray(0.0 if isinstance(g, NoRData) else g, float)))
        return np.concatenate(parts) if parts else np.zeros(0)

    def rdata(self, flat: np.ndarray) -> Any:
        """Add the flat cotangent into the array elements' fdata; return the tuple rdata."""
        out, k = [], 0
        for v, a, d, n in zip(self.values, self.active, self.fdata, self.sizes, strict=True):
            g = flat[k : k + n]
            k += n
            if a and isinstance(d, np.ndarray):
                d += g.reshape(d.shape).astype(d.dtype, copy=False)
                out.append(NO_R)
            else:
                out.append(scalar_rdata(v, g[0]) if a else NO_R)
        return NO_R if all(isinstance(r, NoRData) for r in out) else tuple(out)


def _vjp_maker(fn: Callable[..., Any], tfirst: bool, params: _Params, need_t: bool) -> Any:
    """vjp(y, t, w) → (func(y, t), wᵀ∂f/∂y, wᵀ∂f/∂t, flat wᵀ∂f/∂args), func traced by rulekit."""
    rule = rulekit.build_rrule(fn)
    n = len(params.values)

    def vjp(y: np.ndarray, t: float, w: np.ndarray) -> tuple[Any, ...]:
        cy = CoDual(y, np.zeros_like(y))
        ct = CoDual(t, NO_F if need_t else None)
        cargs = [params.codual(i) for i in range(n)]
        first = (ct, cy) if tfirst else (cy, ct)
        out, pb = rule(CoDual(fn, NO_F), *first, *cargs)
        f = np.asarray(out.x, dtype=float)
        if isinstance(out.dx, np.ndarray):
            out.dx += w.reshape(out.dx.shape)
            rd = pb(NO_R)
        elif isinstance(out.x, (list, tuple)):
            rd = pb(type(out.x)(float(e) for e in w))
        else:  # a scalar
            rd = pb(type(out.x)(w[0]))
        rt = rd[1] if tfirst else rd[2]
        vt = 0.0 if isinstance(rt, NoRData) or not need_t else float(rt)
        return f.ravel(), cy.dx, vt, params.flatten(cargs, rd[3:])

    return vjp


def _backward_opts(o: dict[str, Any], extra: int) -> dict[str, Any]:
    """Options for the augmented integration: the forward's, with vector tolerances extended
    (the adjoint components get the smallest tolerance given for y)."""
    kw = {k: o[k] for k in _BACKWARD_OPTS}
    for k in ("rtol", "atol"):
        v = kw[k]
        if v is not None and np.ndim(v) > 0:
            kw[k] = np.concatenate([np.ravel(v), np.full(extra, np.min(v))])
    return kw


def _odeint_examples() -> list[rulekit.Example]:
    # ODE tolerances: the kit's dot-product test compares the adjoint gradient with central
    # differences of an adaptive solver; both carry an error of the order of the ODE
    # tolerance (the differences: tolerance / step). rtol=atol=1e-11 keeps both well below
    # the kit's double-precision rtol (1e-6), so its default applies.
    tight = {"rtol": 1e-11, "atol": 1e-11}
    t = np.linspace(0.0, 1.0, 4)
    E = rulekit.Example
    return [
        E((_decay, np.array([1.0, 2.0]), t, (0.7,)), tight),
        E((_oscillator, np.array([1.0, 0.0]), t, (1.3, np.array([0.2, -0.1]))), tight),
        E((_forced, 0.5, np.array([0.0, 0.5, 1.5])), {**tight, "tfirst": True}),  # scalar y0
        E((_decay, np.array([1.0, 2.0]), t[::-1], (np.float64(0.3),))),  # decreasing t, default tol
    ]


# Example right-hand sides (module level: the examples must be reproducible objects).
def _decay(y: np.ndarray, t: float, k: float) -> np.ndarray:
    return -k * y


def _oscillator(y: np.ndarray, t: float, w: float, c: np.ndarray) -> np.ndarray:
    return np.stack([y[1], -w * w * y[0]]) + c * y


def _forced(t: float, y: np.ndarray) -> np.ndarray:
    return np.sin(3.0 * t) - y * y


@rulekit.rrule.register(
    odeint,
    Any,
    Union[Array[np.floating], float, np.floating],
    Union[Array[np.floating], Array[np.integer]],
    Vararg[Any],
    examples=_odeint_examples,
)
def odeint_rrule(
    f: CoDual, func: CoDual, y0: CoDual, t: CoDual, *rest: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = odeint(func, y0, t, args): y(tᵢ) solves y' = f(y, t, p), y(t₀) = y₀. Adjoint method:
    between outputs, integrate backwards [y, a, t̄, p̄]' = [f, −aᵀf_y, −aᵀf_t, −aᵀf_p] from
    tᵢ to tᵢ₋₁, with a jumps a += ȳ(tᵢ) at each output and t̄ᵢ = ȳ(tᵢ)ᵀf(yᵢ, tᵢ) (t̄₀ −= each
    such term). Then ȳ₀ += a(t₀), t̄₀ += t̄(t₀), p̄ += p̄(t₀)."""
    o = {k: (v.x if isinstance(v, CoDual) and k != "args" else v)
         for k, v in _bind((func, y0, t, *rest), kwargs).items()}  # fmt: skip
    if o["full_output"]:
        raise NotImplementedError(
            "rules.scipy.integrate.odeint: full_output=True has no rule; call it without "
            "full_output "
            "(the info dict is not differentiable)."
        )
    params = _Params(o["args"])
    fn, tfirst = o["func"], bool(o["tfirst"])
    fwd = {k: v for k, v in o.items() if k not in ("func", "y0", "t", "args")}
    try:
        y = scipy.integrate.odeint(fn, y0.x, t.x, args=params.values, **fwd)
    except TracingError as e:
        raise TracingError(
            f"rules.scipy.integrate.odeint: func produced a traced value on plain inputs ({e}). "
            "Parameters func depends on must be passed through args (positionally), not "
            "captured from the enclosing traced code."
        ) from e
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        need_y0 = array_fdata(y0) is not None or (
            y0.dx is not None and not isinstance(y0.x, np.ndarray)
        )
        need_t = array_fdata(t) is not None and t.x.dtype.kind == "f"
        nr = (NO_R, NO_R, NO_R, NO_R, *(NO_R for _ in rest))
        if not (need_y0 or need_t or params.size):
            return nr
        g, ts, n, d = out.dx, np.asarray(t.x, float), y.shape[0], y.shape[1]
        vjp = _vjp_maker(fn, tfirst, params, need_t)

        def aug(s: np.ndarray, tau: float) -> np.ndarray:
            fy, vy, vt, vp = vjp(s[:d].copy(), float(tau), -s[d : 2 * d])
            return np.concatenate([fy, vy, [vt], vp])

        opts = _backward_opts(o, d + 1 + params.size)
        a, t0bar, pbar, tbar = g[-1].copy(), 0.0, np.zeros(params.size), np.zeros(n)
        for i in range(n - 1, 0, -1):
            if need_t:
                yi = (ts[i], y[i]) if tfirst else (y[i], ts[i])
                tbar[i] = np.dot(np.ravel(fn(*yi, *params.values)), g[i])
                t0bar -= tbar[i]
            s0 = np.concatenate([y[i], a, [t0bar], pbar])
            s1 = scipy.integrate.odeint(aug, s0, np.array([ts[i], ts[i - 1]]), **opts)[1]
            a, t0bar, pbar = s1[d : 2 * d] + g[i - 1], s1[2 * d], s1[2 * d + 1 :]
        if n == 1:
            a = g[0].copy()
        tbar[0] = t0bar
        r_y0 = accumulate(y0, a) if need_y0 else NO_R
        if need_t:
            accumulate(t, tbar)
        r_args = params.rdata(pbar) if params.size else NO_R
        if "args" in kwargs or len(rest) == 0:
            return (NO_R, NO_R, r_y0, NO_R, *nr[4:])
        return (NO_R, NO_R, r_y0, NO_R, r_args, *nr[5:])

    return out, pullback


# Plain calls (`scipy.integrate.odeint(traced)`) reach the rule: see rules/scipy/_routing.py.
route_module(scipy.integrate, [(n, globals()[n]) for n in ["odeint"]])
