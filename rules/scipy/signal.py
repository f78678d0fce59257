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


# Plain calls (`scipy.signal.convolve(traced)`) reach the rule: see rules/scipy/_routing.py.
route_module(scipy.signal, [(n, globals()[n]) for n in ["convolve"]])
