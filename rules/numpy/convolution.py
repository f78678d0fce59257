"""Rules for np.convolve and np.correlate (1-d, every mode).

Both are a slice of a full convolution: convolve(a, v) of y_full = a ∗ v, and
correlate(a, v) of y_full = a ∗ w with w = conj(v[::-1]) (numpy's definition,
yₖ = Σₙ a[n+k]·conj(v[n])). Mode "same"/"valid" keep y = y_full[o : o+L]. With
ȳ_full the cotangent ȳ placed at offset o (zeros elsewhere):

    ā += correlate(ȳ_full, k, "valid"),  k̄ += correlate(ȳ_full, a, "valid")

for the kernel k = v (convolve) or w (correlate, then v̄ += conj(w̄[::-1])). Both
are bilinear, so there is no convention to state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import CoDual, Vararg, example
from rules._support.cotangents import accumulate, no_rdata, output_cotangent
from rules._support.examples import randn
from rules._support.outputs import new_output

__all__ = ["convolution_rrule"]

_DEFAULT_MODE = {np.convolve: "full", np.correlate: "valid"}


def _offset(corr: bool, mode: str, n: int, m: int) -> int:
    """Where numpy's mode-`mode` result starts within the full result (measured per mode)."""
    if mode == "full":
        return 0
    if mode == "valid":
        return min(n, m) - 1
    return n // 2 if corr and n < m else (min(n, m) - 1) // 2  # "same"


def convolution_rrule(
    f: CoDual, a: CoDual, v: CoDual, *args: CoDual, **kwargs: Any
) -> tuple[CoDual, Any]:
    """y = (a ∗ k)[o:o+L] ⇒ ā += correlate(ȳ_full, k, valid), k̄ += correlate(ȳ_full, a, valid)."""
    fn = f.x
    y = fn(a.x, v.x, *[c.x for c in args], **kwargs)
    out = new_output(y)
    none = no_rdata(len(args) + 3)
    if args and args[0].dx is not None:
        raise NotImplementedError(f"np.{fn.__name__}: mode= must be a constant")
    mode = kwargs.get("mode", args[0].x if args else _DEFAULT_MODE[fn])
    mode = {"f": "full", "s": "same", "v": "valid"}.get(str(mode)[:1].lower(), mode)
    corr = fn is np.correlate
    A, V = np.asarray(a.x), np.asarray(v.x)
    K = np.conj(V[::-1]) if corr else V
    n, m = A.size, V.size
    off = _offset(corr, mode, n, m)

    def convolution_pullback(dy: Any) -> tuple[Any, ...]:
        g = np.asarray(output_cotangent(out, dy))
        full = np.zeros(n + m - 1, np.result_type(g, A, V))
        full[off : off + g.size] = g
        ra = accumulate(a, np.correlate(full, K, "valid")) if a.dx is not None else none[1]
        rv = none[2]
        if v.dx is not None:
            kbar = np.correlate(full, A, "valid")
            rv = accumulate(v, np.conj(kbar[::-1]) if corr else kbar)
        return (none[0], ra, rv, *none[3:])

    return out, convolution_pullback


def _examples() -> list[Any]:
    a, v = randn(6, seed=15), randn(3, seed=16)
    c = randn(4, seed=17) + 1j * randn(4, seed=18)
    return [
        example(a, v),
        example(v, a, "same"),  # the shorter first: numpy swaps them
        example(a, v, mode="valid"),
        example(randn(4, seed=19), randn(5, seed=20), "same"),
        example(a.astype(np.float32), v.astype(np.float32), "same"),
        example(c, a, "full"),
        example(a, c, mode="same"),
        example(c, c[:3].conj(), "valid"),
    ]


for _fn in (np.convolve, np.correlate):
    rulekit.rrule.register(_fn, Any, Any, Vararg[Any], examples=_examples)(convolution_rrule)
