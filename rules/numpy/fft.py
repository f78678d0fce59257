"""Rules for numpy.fft: fft, ifft, rfft, irfft and their 2-D/n-D forms, fftshift, ifftshift.

Every one of them is linear in its array argument and declared once
(`rulekit.linear`): the function and its adjoint below; the reverse rule and the
forward rule (`ẏ = fft(ẋ, ...)`, the transform of the tangent) follow.

Every transform is a sequence of 1-D steps along one axis each, exactly as numpy
runs them (`fftn` from the last axis to the first; `rfftn` the real step on the
last axis first; `irfftn` the real step last). Each step resizes its input to n
points (crop or zero-pad), transforms, and scales by the norm's factor
(backward: 1 forward / 1/n inverse; ortho: 1/√n; forward: 1/n forward / 1 inverse).
The pullback runs the steps' adjoints in reverse order. With F the unscaled DFT
(e^{−2πi jk/n}) and c the step's factor (complex convention x̄ = Jᴴȳ):

    y = c·F x       (fft)    ⇒  x̄ = c·Fᴴȳ = ifft(ȳ, norm=dual)
    y = c·Fᴴx       (ifft)   ⇒  x̄ = c·F ȳ = fft(ȳ, norm=dual)
    y = c·(F x)[:m] (rfft, m = n//2 + 1)
                             ⇒  x̄ = c·Re(Fᴴ [ȳ; 0]) = irfft(w·ȳ, n, norm=dual),
                                w = 1 at DC and Nyquist (n even), ½ at the other bins
                                (irfft counts those bins twice: Hermitian symmetry)
    y = irfft(z, n)          ⇒  z̄ = c·w′·(F ȳ)[:m] = w′·rfft(ȳ, n, norm=dual),
                                w′ = 1 at DC and Nyquist, 2 at the other bins; the
                                imaginary parts of the DC/Nyquist bins, which numpy
                                ignores, get cotangent 0

then x̄ is resized back (the adjoint of crop is zero-pad and vice versa). `dual`
swaps 'backward' and 'forward' (the adjoint of a transform scaled by c is the
opposite-direction transform scaled by the same c). A real input of a complex
transform gets the real part of its cotangent.

    y = fftshift(x, axes)  ⇒  x̄ += ifftshift(ȳ, axes)   (and the reverse)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit import LinearFunction, Vararg, example, linear
from rules._support.binding import binder
from rules._support.examples import randn
from rules._support.patterns import InexactArray

__all__ = ["TRANSFORMS", "fft_adjoint"]

_DUAL = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}

C2C, R2C, C2R = "c2c", "r2c", "c2r"


# -- the 1-D steps of each transform -----------------------------------------------------------

Step = tuple[str, bool, Any, int]  # (kind, forward?, n or None, axis)

#: function → (kind of the 1-D steps, forward?, n-D?, default axes of a 2-D form)
_KINDS: dict[Any, tuple[str, bool, bool, Any]] = {
    np.fft.fft: (C2C, True, False, None),
    np.fft.ifft: (C2C, False, False, None),
    np.fft.rfft: (R2C, True, False, None),
    np.fft.irfft: (C2R, False, False, None),
    np.fft.fft2: (C2C, True, True, (-2, -1)),
    np.fft.ifft2: (C2C, False, True, (-2, -1)),
    np.fft.rfft2: (R2C, True, True, (-2, -1)),
    np.fft.irfft2: (C2R, False, True, (-2, -1)),
    np.fft.fftn: (C2C, True, True, None),
    np.fft.ifftn: (C2C, False, True, None),
    np.fft.rfftn: (R2C, True, True, None),
    np.fft.irfftn: (C2R, False, True, None),
}


def _nd_axes(shape: tuple[int, ...], s: Any, axes: Any, kind: str) -> tuple[list[Any], list[int]]:
    """numpy's `_cook_nd_args`: the n of each step (None: the 1-D default) and its axis."""
    nd = len(shape)
    if s is None:
        axes = list(range(nd)) if axes is None else list(axes)
        ns: list[Any] = [shape[a] for a in axes]
        if kind == C2R:
            ns[-1] = None  # irfft's default: 2(m − 1)
    else:
        ns = list(s)
        axes = list(range(-len(ns), 0)) if axes is None else list(axes)
        ns = [shape[a] if k == -1 else k for k, a in zip(ns, axes, strict=True)]
    return ns, [a % nd for a in axes]


def _steps(fn: Any, shape: tuple[int, ...], b: Any) -> list[Step]:
    """The 1-D steps numpy runs for `fn` on an input of `shape`, in order."""
    kind, fwd, nd, _ = _KINDS[fn]
    if not nd:
        return [(kind, fwd, b.value("n"), b.value("axis") % len(shape))]
    ns, axes = _nd_axes(shape, b.value("s"), b.value("axes"), kind)
    if kind == C2C:
        return [(C2C, fwd, ns[i], axes[i]) for i in reversed(range(len(axes)))]
    if kind == R2C:
        return [(R2C, True, ns[-1], axes[-1])] + [
            (C2C, True, ns[i], axes[i]) for i in range(len(axes) - 2, -1, -1)
        ]
    return [(C2C, False, ns[i], axes[i]) for i in range(len(axes) - 1)] + [
        (C2R, False, ns[-1], axes[-1])
    ]


def _resize(g: np.ndarray, axis: int, length: int) -> np.ndarray:
    """g cropped or zero-padded to `length` points along `axis`."""
    have = g.shape[axis]
    if have == length:
        return g
    if have > length:
        return g[(slice(None),) * axis + (slice(0, length),)]
    pad = [(0, 0)] * g.ndim
    pad[axis] = (0, length - have)
    return np.pad(g, pad)


def _interior(m: int, n: int, axis: int) -> tuple[Any, ...]:
    """Index of the bins of an n-point real transform that Hermitian symmetry counts twice."""
    stop = m - 1 if n % 2 == 0 else m  # the Nyquist bin (n even) is its own mirror image
    return (slice(None),) * axis + (slice(1, stop),)


def _step_adjoint(g: np.ndarray, step: Step, length: int, norm: Any) -> np.ndarray:
    """The cotangent of one step's input (of `length` points along the axis) given g."""
    kind, fwd, n, axis = step
    dual: Any = _DUAL[norm]
    if kind == C2C:
        t: Any = np.fft.ifft if fwd else np.fft.fft
        return _resize(t(g, axis=axis, norm=dual), axis, length)
    if kind == R2C:  # g has m = n//2 + 1 bins; the step's input has `length` points
        npts = length if n is None else n
        w = g.copy()
        w[_interior(g.shape[axis], npts, axis)] *= 0.5
        return _resize(np.fft.irfft(w, npts, axis=axis, norm=dual), axis, length)
    npts = g.shape[axis]  # C2R: g is the real n-point output
    z = np.fft.rfft(g, npts, axis=axis, norm=dual)
    z[_interior(z.shape[axis], npts, axis)] *= 2
    lead: Any = (slice(None),) * axis
    z[(*lead, 0)] = z[(*lead, 0)].real  # numpy ignores Im of the DC bin ...
    if npts % 2 == 0:
        z[(*lead, -1)] = z[(*lead, -1)].real  # ... and of the Nyquist bin
    return _resize(z, axis, length)


def _lengths(shape: tuple[int, ...], steps: Sequence[Step]) -> list[int]:
    """Each step's input length along its axis (the shapes numpy's steps see)."""
    shape_ = list(shape)
    out = []
    for kind, _, n, axis in steps:
        have = shape_[axis]
        out.append(have)
        if kind == C2C:
            shape_[axis] = have if n is None else n
        elif kind == R2C:
            shape_[axis] = (have if n is None else n) // 2 + 1
        else:
            shape_[axis] = 2 * (have - 1) if n is None else n
    return out


# -- the declarations -------------------------------------------------------------------------


def fft_adjoint(fn: Any) -> Callable[..., Any]:
    """The adjoint of transform `fn`: x̄ = the adjoints of numpy's 1-D steps in reverse order
    (see the module docstring); a real x takes Re x̄ (`rulekit.linear` does)."""
    bind = binder(fn)

    def adjoint(g: np.ndarray, a: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
        b = bind((a, *args), kwargs)
        steps = _steps(fn, a.shape, b)
        lengths = _lengths(a.shape, steps)
        norm = b.value("norm")
        for step, length in zip(reversed(steps), reversed(lengths), strict=True):
            g = _step_adjoint(g, step, length, norm)
        return g

    adjoint.__name__ = f"{fn.__name__}_adjoint"
    return adjoint


def _fft_examples() -> list[Any]:
    return [
        example(randn(5, dtype=np.complex128)),
        example(randn(2, 4), 6, 0, "ortho"),
        example(randn(3, 5, dtype=np.complex64), n=3, norm="forward"),
        example(randn(4, 2, dtype=np.float32), axis=0, norm="backward"),
    ]


def _rfft_examples() -> list[Any]:
    return [
        example(randn(6)),
        example(randn(3, 5, dtype=np.float32), 4, 0, "ortho"),
        example(randn(2, 7), n=9, norm="forward"),
    ]


def _irfft_examples() -> list[Any]:
    return [
        example(randn(4, dtype=np.complex128)),
        example(randn(3, 4, dtype=np.complex64), 5, 0, "ortho"),
        example(randn(2, 5, dtype=np.complex128), n=6, norm="forward"),
        example(randn(2, 3), 3),
    ]


def _fftn_examples(two: bool, real_in: bool) -> Callable[[], list[Any]]:
    def examples() -> list[Any]:
        dt = np.float64 if real_in else np.complex128
        dt32 = np.float32 if real_in else np.complex64
        axes = (0, 1) if two else (2, 0)
        return [
            example(randn(3, 4, dtype=dt)),
            example(randn(2, 3, 4, dtype=dt32), (4, 5), axes, "ortho"),
            example(randn(3, 4, 2, dtype=dt), s=(2, 6), axes=(1, 0), norm="forward"),
            example(randn(2, 5, dtype=dt), None, (1, 0) if two else (1,)),
        ]

    return examples


def _irfftn_examples(two: bool) -> Callable[[], list[Any]]:
    def examples() -> list[Any]:
        axes = (0, 1) if two else (2, 0)
        return [
            example(randn(3, 4, dtype=np.complex128)),
            example(randn(2, 3, 4, dtype=np.complex64), (4, 5), axes, "ortho"),
            example(randn(3, 4, 2, dtype=np.complex128), s=(3, 5), axes=(0, 1), norm="forward"),
            example(randn(2, 3), (2, 4), (1, 0) if two else (0, 1)),
        ]

    return examples


#: every transform's declaration, by function
TRANSFORMS: dict[Any, LinearFunction] = {}
_fn: Any
for _fn, _ex in (
    (np.fft.fft, _fft_examples),
    (np.fft.ifft, _fft_examples),
    (np.fft.rfft, _rfft_examples),
    (np.fft.irfft, _irfft_examples),
    (np.fft.fft2, _fftn_examples(True, False)),
    (np.fft.ifft2, _fftn_examples(True, False)),
    (np.fft.rfft2, _fftn_examples(True, True)),
    (np.fft.irfft2, _irfftn_examples(True)),
    (np.fft.fftn, _fftn_examples(False, False)),
    (np.fft.ifftn, _fftn_examples(False, False)),
    (np.fft.rfftn, _fftn_examples(False, True)),
    (np.fft.irfftn, _irfftn_examples(False)),
):
    TRANSFORMS[_fn] = linear(
        _fn, fft_adjoint(_fn), patterns=[(InexactArray, Vararg[Any])], examples=_ex
    )


# -- fftshift, ifftshift ----------------------------------------------------------------------

# y = fftshift(x, axes) (a roll by ⌊n/2⌋)  ⇒  x̄ += ifftshift(ȳ, axes); and the reverse
_SHIFT_ADJOINT = {np.fft.fftshift: np.fft.ifftshift, np.fft.ifftshift: np.fft.fftshift}


def _shift_examples() -> list[Any]:
    return [
        example(randn(5)),
        example(randn(3, 4, dtype=np.complex64), (1,)),
        example(randn(2, 3, 5, dtype=np.float32), axes=-1),
        example(randn(4, 3), [0, 1]),
    ]


for _fn in (np.fft.fftshift, np.fft.ifftshift):
    _back = _SHIFT_ADJOINT[_fn]
    TRANSFORMS[_fn] = linear(
        _fn,
        lambda g, x, axes=None, _back=_back: _back(g, axes),
        patterns=[(InexactArray, Vararg[Any])],
        examples=_shift_examples,
    )
