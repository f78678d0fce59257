"""Rules for scipy.signal: `convolve(in1, in2, mode, method)`, N-d, modes 'full', 'same', 'valid'.

`scipy.signal.convolve` is a Python function that converts its inputs with
`np.asarray`, which a traced value refuses: call the `rulekit.primitive` wrapper
`rules.scipy.signal.convolve` (scipy's name and signature). Plain calls go straight to scipy.

Every mode is a window of the full convolution F = in1 ∗ in2 (shape N1 + N2 − 1 per
axis), starting at offset s per axis: 0 ('full'), (N2 − 1)//2 with length N1 ('same'), and
min(N1, N2) − 1 with length |N1 − N2| + 1 ('valid'; scipy swaps the inputs when in2 is the
larger one, which changes nothing for a commutative product but is why the offset is
min(N1, N2) − 1). The adjoint pads ȳ into a zero F̄ at that window and correlates it with
the other input: in1̄ += F̄ ⋆ in2 = convolve(F̄, flip(conj(in2)), 'valid') and likewise
in2̄ += convolve(F̄, flip(conj(in1)), 'valid') (conj: the JAX/PyTorch convention for the
bilinear complex product).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.signal

import rulekit
from rulekit import Array, CoDual, Vararg
from rules._support.arguments import is_active
from rules._support.binding import binder
from rules._support.cotangents import NO_R, accumulate, output_cotangent
from rules._support.forward import register_like
from rules._support.outputs import new_output
from rules.scipy._routing import route_module

__all__ = ["convolve"]

convolve = rulekit.primitive(scipy.signal.convolve)
_bind = binder(scipy.signal.convolve)


def _window(n1: tuple[int, ...], n2: tuple[int, ...], mode: str) -> tuple[slice, ...]:
    """Where `convolve(in1, in2, mode)` sits inside the full convolution, per axis."""
    out = []
    for a, b in zip(n1, n2, strict=True):
        if mode == "full":
            s, n = 0, a + b - 1
        elif mode == "same":
            s, n = (b - 1) // 2, a
        else:
            s, n = min(a, b) - 1, abs(a - b) + 1
        out.append(slice(s, s + n))
    return tuple(out)


def _reversed_conj(x: np.ndarray) -> np.ndarray:
    r = np.flip(x)
    return np.conj(r) if np.iscomplexobj(r) else r


def _convolve_examples() -> list[rulekit.Example]:
    rng = np.random.default_rng(500)
    return [
        rulekit.example(rng.normal(size=6), rng.normal(size=3)),  # full, 1-D
        rulekit.example(rng.normal(size=(4, 5)), rng.normal(size=(2, 3)), "same"),
        rulekit.example(
            rng.normal(size=(2, 3)), rng.normal(size=(4, 4)) + 1j, mode="valid", method="fft"
        ),  # in2 larger (scipy swaps); complex
        rulekit.example(
            rng.normal(size=5).astype(np.float32),
            rng.normal(size=6).astype(np.float32),
            "same",
            "direct",
        ),
    ]


@rulekit.rrule.register(
    convolve, Array[np.number], Array[np.number], Vararg[Any], examples=_convolve_examples
)
def convolve_rrule(
    f: CoDual, in1: CoDual, in2: CoDual, *rest: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = window_mode(in1 ∗ in2)  ⇒  F̄ = pad(ȳ) at the window,
    in1̄ += convolve(F̄, flip(conj in2), 'valid'),  in2̄ += convolve(F̄, flip(conj in1), 'valid')."""
    o = _bind((in1, in2, *rest), kwargs)
    mode, method = (v.x if isinstance(v, CoDual) else v for v in (o["mode"], o["method"]))
    x1, x2 = in1.x, in2.x
    y = scipy.signal.convolve(x1, x2, mode=mode, method=method)
    out = new_output(y)

    def pullback(dy: Any) -> tuple[Any, ...]:
        nr = (NO_R, NO_R, NO_R, *(NO_R for _ in rest))
        need1, need2 = is_active(in1), is_active(in2)
        if not (need1 or need2):
            return nr
        g = output_cotangent(out, dy)
        if np.ndim(x1) == 0:  # 0-d inputs: a plain product
            r1 = accumulate(in1, g * np.conj(x2)) if need1 else NO_R
            r2 = accumulate(in2, g * np.conj(x1)) if need2 else NO_R
            return (NO_R, r1, r2, *nr[3:])
        if mode == "full":
            full = g
        else:
            shape = tuple(a + b - 1 for a, b in zip(x1.shape, x2.shape, strict=True))
            full = np.zeros(shape, np.result_type(g))
            full[_window(x1.shape, x2.shape, mode)] = g
        if need1:
            accumulate(in1, scipy.signal.convolve(full, _reversed_conj(x2), "valid", method))
        if need2:
            accumulate(in2, scipy.signal.convolve(full, _reversed_conj(x1), "valid", method))
        return nr

    return out, pullback


# -- forward rule and differentiable pullback -------------------------------------------------
#
# Both call `convolve` (the primitive) on the arguments and tangents / cotangents, so that
# an enclosing transformation differentiates them again through these same rules:
#     ẏ = convolve(in1̇, in2, mode) + convolve(in1, in2̇, mode)                 (bilinear)
#     in1̄ = convolve(F̄, flip(conj in2), 'valid'),  in2̄ = convolve(F̄, flip(conj in1), 'valid')
# with F̄ = ȳ padded with zeros to the full convolution's shape at the mode's window.


def _mode_method(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str]:
    o = _bind(args, kwargs)
    mode, method = (v.x if isinstance(v, rulekit.Dual) else v for v in (o["mode"], o["method"]))
    return mode, method


def convolve_frule(f: Any, in1: Any, in2: Any, *rest: Any, **kwargs: Any) -> rulekit.Dual:
    """ẏ = convolve(in1̇, in2) + convolve(in1, in2̇) (mode and method as the call's)."""
    mode, method = _mode_method((in1, in2, *rest), kwargs)
    y = convolve(in1.x, in2.x, mode, method)
    dy = None
    if in1.dx is not None:
        dy = convolve(in1.dx, in2.x, mode, method)
    if in2.dx is not None:
        t = convolve(in1.x, in2.dx, mode, method)
        dy = t if dy is None else dy + t
    return rulekit.Dual(y, dy)


def _like(c: Any, x: Any) -> Any:
    """Cotangent `c` in argument `x`'s dtype (its real part for a real x)."""
    dtype = np.result_type(x)
    if np.result_type(c).kind == "c" and dtype.kind != "c":
        c = np.real(c)
    return c if np.result_type(c) == dtype or dtype.kind not in "fc" else np.astype(c, dtype)


def convolve_vjp(active: Any, in1: Any, in2: Any, *rest: Any, **kwargs: Any) -> tuple[Any, Any]:
    """in1̄ = convolve(F̄, flip(conj in2), 'valid'), in2̄ = convolve(F̄, flip(conj in1), 'valid'),
    F̄ = ȳ zero-padded to the full convolution at the mode's window (0-d: a product)."""
    mode, method = _mode_method((in1, in2, *rest), kwargs)
    y = convolve(in1, in2, mode, method)
    n1, n2 = np.shape(in1), np.shape(in2)

    def conj(v: Any) -> Any:
        return np.conj(v) if np.result_type(v).kind == "c" else v

    def pullback(g: Any) -> tuple[Any, ...]:
        if not n1:  # 0-d inputs: a plain product
            full, r1, r2 = g, conj(in2), conj(in1)
        else:
            win = _window(n1, n2, mode)
            pad = [(w.start, a + b - 1 - w.stop) for w, a, b in zip(win, n1, n2, strict=True)]
            full = g if mode == "full" else np.pad(g, pad)
            r1, r2 = np.flip(conj(in2)), np.flip(conj(in1))
        c1 = c2 = None
        if active[0]:
            c1 = _like(full * r1 if not n1 else convolve(full, r1, "valid", method), in1)
        if active[1]:
            c2 = _like(full * r2 if not n1 else convolve(full, r2, "valid", method), in2)
        return (c1, c2, *(None for _ in rest))

    return y, pullback


register_like(convolve, frule=convolve_frule, vjp=convolve_vjp)

# Plain calls (`scipy.signal.convolve(traced)`) reach the rule: see rules/scipy/_routing.py.
route_module(scipy.signal, [(n, globals()[n]) for n in ["convolve"]])
