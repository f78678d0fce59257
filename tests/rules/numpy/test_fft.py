"""Tests for rules.numpy.fft: the numpy.fft transforms (c2c, real, inverse real; 1-D, 2-D, n-D)
and fftshift/ifftshift.

Hypothesis draws shapes, dtypes, transform lengths (cropping and zero-padding),
axes (repeated ones included) and every norm, and runs each transform through
`testutils.check_rule` — a dot-product test against finite differences, which is
what pins down the Hermitian weighting of rfft/irfft. Engine tests differentiate
spectral code (power spectra, filtering round trips, shifted spectra).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, rand
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions
import rules.numpy.fft
import rules.numpy.reductions.sums  # np.sum
import rules.numpy.ufuncs.binary  # np.multiply and friends
import rules.numpy.ufuncs.unary  # noqa: F401  (registers np.abs, np.real, np.imag)
from rulekit import CoDual, NoRData, zero_codual
from testutils import check_rule

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)
norms = st.sampled_from([None, "backward", "ortho", "forward"])
ONE_D = [np.fft.fft, np.fft.ifft, np.fft.rfft, np.fft.irfft]
N_D = [np.fft.fft2, np.fft.ifft2, np.fft.rfft2, np.fft.irfft2,
       np.fft.fftn, np.fft.ifftn, np.fft.rfftn, np.fft.irfftn]  # fmt: skip
REAL_IN = {np.fft.rfft, np.fft.rfft2, np.fft.rfftn}


def _input(data: Any, fn: Any, seed: int, shape: tuple[int, ...]) -> np.ndarray:
    real = [np.float64, np.float32]
    cplx = [np.complex128, np.complex64]
    choices = real if fn in REAL_IN else real + cplx
    x = rand(seed, shape, data.draw(st.sampled_from(choices)))
    if data.draw(st.booleans()) and x.ndim > 1:
        x = x.T  # a non-contiguous input
    return x


def _valid(fn: Any, x: np.ndarray, kwargs: dict[str, Any]) -> bool:
    try:
        fn(x, **kwargs)
    except ValueError:
        return False
    return True


@SETTINGS
@given(st.sampled_from(ONE_D), st.lists(st.integers(1, 5), min_size=1, max_size=3), st.data(),
       seeds, norms)  # fmt: skip
def test_1d_random(fn: Any, shape: list[int], data: Any, seed: int, norm: Any) -> None:
    x = _input(data, fn, seed, tuple(shape))
    kwargs = {
        "n": data.draw(st.one_of(st.none(), st.integers(1, 7))),
        "axis": data.draw(st.integers(-x.ndim, x.ndim - 1)),
        "norm": norm,
    }
    assume(_valid(fn, x, kwargs))
    check_rule(fn, x, kwargs=kwargs)


@SETTINGS
@given(st.sampled_from(N_D), st.lists(st.integers(1, 4), min_size=2, max_size=3), st.data(),
       seeds, norms)  # fmt: skip
def test_nd_random(fn: Any, shape: list[int], data: Any, seed: int, norm: Any) -> None:
    x = _input(data, fn, seed, tuple(shape))
    nd = x.ndim
    two = fn in (np.fft.fft2, np.fft.ifft2, np.fft.rfft2, np.fft.irfft2)
    k = 2 if two else data.draw(st.integers(1, nd))
    axes = data.draw(st.lists(st.integers(-nd, nd - 1), min_size=k, max_size=k))  # may repeat
    kwargs: dict[str, Any] = {"axes": tuple(axes), "norm": norm}
    if data.draw(st.booleans()):
        kwargs["s"] = tuple(data.draw(st.lists(st.integers(1, 6), min_size=k, max_size=k)))
    elif not two and data.draw(st.booleans()):
        del kwargs["axes"]  # every axis
    assume(_valid(fn, x, kwargs))
    check_rule(fn, x, kwargs=kwargs)


@SETTINGS
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.data(), seeds)
def test_shifts_random(shape: list[int], data: Any, seed: int) -> None:
    x = rand(seed, tuple(shape), data.draw(st.sampled_from([np.float64, np.complex64])))
    nd = x.ndim
    some = st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd)
    axes = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1), some))
    for fn in (np.fft.fftshift, np.fft.ifftshift):
        check_rule(fn, x, kwargs={"axes": axes})


def test_irfft_ignores_the_imaginary_parts_of_dc_and_nyquist() -> None:
    """numpy's irfft drops Im of the DC and Nyquist bins: their cotangent is 0."""
    for n in (6, 5):
        z = rand(0, (4,), np.complex128)
        cz = zero_codual(z)
        y, pb = rulekit.rrule(zero_codual(np.fft.irfft), cz, CoDual(n))
        y.dx[...] = rand(1, (n,))
        pb(NoRData())
        assert cz.dx[0].imag == 0
        assert (cz.dx[n // 2].imag == 0) == (n % 2 == 0)
        zi = z.copy()
        zi[0] += 1j
        np.testing.assert_allclose(np.fft.irfft(zi, n), y.x)


def test_real_input_of_a_complex_transform_gets_a_real_cotangent() -> None:
    x = zero_codual(rand(0, (2, 5), np.float32))
    y, pb = rulekit.rrule(zero_codual(np.fft.fft2), x)
    y.dx[...] = rand(1, (2, 5), np.complex64)
    pb(NoRData())
    assert x.dx.dtype == np.float32 and np.any(x.dx != 0)


# -- through the engine -------------------------------------------------------------------------

W = rand(9, (6, 6))


def power_spectrum(x: Any) -> Any:
    X = np.fft.rfft(x, axis=0)
    return np.sum(np.abs(X) ** 2 * W[: X.shape[0]])


def filtering(x: Any) -> Any:
    X = np.fft.fft2(x, norm="ortho")
    y = np.fft.ifft2(X * W[:6, :6], norm="ortho")
    z = np.fft.irfftn(np.fft.rfftn(x) * (1 + 0.5j), s=(6, 6), axes=(0, 1))
    return np.sum(np.real(y) * W) + np.sum(np.imag(y) ** 2) + np.sum(z * W)


def shifted(x: Any) -> Any:
    s = np.fft.fftshift(np.fft.fft(x, n=8, norm="forward"), axes=-1)
    back = np.fft.ifftshift(s * np.arange(8.0))
    return np.sum(np.abs(back)) + np.sum(np.real(np.fft.ifftn(x, s=(4, 4), axes=(1, 0))))


def with_out(x: Any) -> Any:
    buf = np.zeros_like(x, dtype=np.complex128)
    np.fft.fft(x, axis=0, out=buf)  # the engine's generic out= (a recorded copy)
    buf *= 2.0
    back = np.fft.ifft(buf, out=buf)  # out= aliasing the input
    return np.sum(np.abs(buf) ** 2) + np.sum(np.real(back) ** 3)


@pytest.mark.parametrize("f", [power_spectrum, filtering, shifted, with_out])
def test_engine_gradients(f: Any) -> None:
    check_grads(f, rand(3, (6, 6)))
