"""rulekit's gradient convention for complex inputs, checked against both definitions.

Write z = x + iy with x, y real, and let L be a real loss. The Wirtinger derivatives are

    ∂L/∂z = ½ (∂L/∂x − i ∂L/∂y),        ∂L/∂z̄ = ½ (∂L/∂x + i ∂L/∂y),

and, L being real, ∂L/∂z̄ = conj(∂L/∂z). The two conventions in use are

    PyTorch (and rulekit):  g     = 2 ∂L/∂z̄ = ∂L/∂x + i ∂L/∂y,    dL = Re Σ conj(g) · dz,
    JAX:                    g_jax = 2 ∂L/∂z = conj(2 ∂L/∂z̄) = ∂L/∂x − i ∂L/∂y = conj(g),
                                                                   dL = Re Σ g_jax · dz.

PyTorch's g is the gradient of L on ℂⁿ seen as ℝ²ⁿ (the direction of steepest ascent, so
z − t·g descends); a JAX user gets JAX's value from rulekit's with `np.conj(g)`.

For several real losses of complex64 and complex128 inputs, 0-d and arrays (drawn by
hypothesis), rulekit's g is checked against

1. the PyTorch definition computed by central differences along the real and the imaginary
   direction of each element separately: ∂L/∂x + i ∂L/∂y;
2. a closed-form ∂L/∂z̄ of each loss: g = 2 ∂L/∂z̄ (PyTorch), and conj(g) = conj(2 ∂L/∂z̄)
   = 2 ∂L/∂z (JAX), each convention's dL formula being checked by central differences along
   a random complex direction.

Only numpy and rulekit are used (neither torch nor jax is installed); the values PyTorch and
JAX document for |z|² at z = 3 + 4j are checked at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)
DTYPES = [np.complex64, np.complex128]
SHAPES = [(), (3,), (2, 3)]
H = 1e-6  # central-difference step (in complex128)


def _holo(z: Any) -> Any:
    """A holomorphic f(z) = exp(z)·sin(z) (numpy code, traced like any other)."""
    return np.exp(z) * np.sin(z)


def _holo_prime(z: Any) -> Any:
    return np.exp(z) * (np.sin(z) + np.cos(z))


def _matrix(z: Any) -> Any:
    """A fixed complex constant A for Σ|Az|²: a (3, n) matrix, or a 3-vector for 0-d z."""
    rng = np.random.default_rng(7)
    shape = (3, *z.shape[:1])
    return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(z.dtype)


def _times(a: Any, z: Any) -> Any:
    """Az: a matrix product, or a 3-vector times a 0-d z."""
    return a @ z if a.ndim == 2 else a * z


def _gram_times(z: Any, a: Any) -> Any:
    """AᴴAz, the ∂L/∂z̄ of L = Σ|Az|² = zᴴAᴴAz."""
    return np.conj(a).T @ (a @ z) if a.ndim == 2 else np.vdot(a, a) * z


@dataclass(frozen=True)
class Case:
    name: str
    loss: Callable[[Any, Any], Any]  # L(z, A): numpy code returning a real scalar
    dzbar: Callable[[Any, Any], Any]  # its closed-form ∂L/∂z̄
    min_magnitude: float = 0.0  # keep |z| away from a kink


CASES = [
    # L = Σ z z̄  →  ∂L/∂z̄ = z
    Case("|z|²", lambda z, a: np.sum(np.real(z * np.conj(z))), lambda z, a: z),
    # the same loss through abs: L = Σ |z|²
    Case("abs(z)**2", lambda z, a: np.sum(np.abs(z) ** 2), lambda z, a: z),
    # L = Σ Re z² = Σ (z² + z̄²)/2  →  ∂L/∂z̄ = z̄
    Case("Re(z²)", lambda z, a: np.sum(np.real(z * z)), lambda z, a: np.conj(z)),
    # L = Σ |Az|² = zᴴ Aᴴ A z  →  ∂L/∂z̄ = Aᴴ A z
    Case("Σ|Az|²", lambda z, a: np.sum(np.abs(_times(a, z)) ** 2), _gram_times),
    # L = Σ |z| = Σ (z z̄)^½  →  ∂L/∂z̄ = z / (2|z|)
    Case("Σ|z|", lambda z, a: np.sum(np.abs(z)), lambda z, a: z / (2 * np.abs(z)), 0.25),
    # L = Σ Re f(z) = Σ (f + conj f)/2, f holomorphic  →  ∂L/∂z̄ = conj(f'(z))/2
    Case(
        "Re f(z)",
        lambda z, a: np.sum(np.real(_holo(z))),
        lambda z, a: np.conj(_holo_prime(z)) / 2,
    ),
    # L = Σ Im f(z) = Σ (f − conj f)/(2i)  →  ∂L/∂z̄ = i·conj(f'(z))/2
    Case(
        "Im f(z)",
        lambda z, a: np.sum(np.imag(_holo(z))),
        lambda z, a: 1j * np.conj(_holo_prime(z)) / 2,
    ),
]


@st.composite
def complex_inputs(draw: Any, dtype: Any, min_magnitude: float) -> Any:
    """A 0-d or n-d array of `dtype` with entries of modulus in [min_magnitude, 2]."""
    elements = st.complex_numbers(
        min_magnitude=min_magnitude,
        max_magnitude=2.0,
        allow_nan=False,
        allow_infinity=False,
        width=64 if dtype == np.complex64 else 128,
    )
    return draw(hnp.arrays(dtype, st.sampled_from(SHAPES), elements=elements))


def _loss128(case: Case, z: Any) -> Callable[[Any], float]:
    """The case's loss in complex128 with its constant, for finite differences."""
    a = _matrix(z).astype(np.complex128)
    return lambda w: float(case.loss(np.asarray(w, np.complex128), a))


def pytorch_fd(loss: Callable[[Any], float], z: Any) -> Any:
    """PyTorch's definition ∂L/∂x + i ∂L/∂y by central differences in complex128, along the
    real and the imaginary direction of each element separately."""
    z = np.array(z, dtype=np.complex128)
    g = np.zeros_like(z)
    for idx in np.ndindex(z.shape):
        for unit in (1.0, 1j):  # ∂/∂x, then ∂/∂y
            zp, zm = z.copy(), z.copy()
            zp[idx] += H * unit
            zm[idx] -= H * unit
            g[idx] += unit * (loss(zp) - loss(zm)) / (2 * H)
    return g


def directional_fd(loss: Callable[[Any], float], z: Any, v: Any) -> float:
    """dL along the complex direction v, by central differences in complex128."""
    z = np.array(z, dtype=np.complex128)
    return (loss(z + H * v) - loss(z - H * v)) / (2 * H)


def _tolerances(dtype: Any, expected: Any) -> dict[str, float]:
    """rtol = atol/(1 + max|expected|) for comparing rulekit's gradient with `expected`.

    complex128: what is off is the reference, a central difference in complex128 at
    H = 1e-6 (rounding ≈ ε·|L|/H ≈ 2e-10·|L|, |L| up to ~10² for |z| ≤ 2; truncation
    H²·|L‴|/6 ≈ 1e-12·|L‴|); 1e-7 bounds both. complex64: rulekit computes in single
    precision (ε = 1.2e-7 per rounding, several roundings per element, and Σ|Az|²'s AᴴAz
    sums terms of either sign); 2e-5 ≈ 170 ε. Measured (630 random inputs over every case
    and shape, 2026-11-25): worst error 4.5e-10 (complex128) and 7.9e-8 (complex64) in these
    units; the margin is for hypothesis's harder draws (near-cancelling sums)."""
    scale = 1.0 + float(np.max(np.abs(expected), initial=0.0))
    tol = 1e-7 if dtype == np.complex128 else 2e-5
    return {"rtol": tol, "atol": tol * scale}


def _rulekit_grad(case: Case, z: Any) -> Any:
    a = _matrix(z)
    g = rulekit.grad(lambda w: case.loss(w, a))(z.copy())
    assert isinstance(g, np.ndarray) and g.shape == z.shape and g.dtype == z.dtype
    return g


params = pytest.mark.parametrize(
    ("case", "dtype"),
    [(c, d) for c in CASES for d in DTYPES],
    ids=[f"{c.name}-{np.dtype(d).name}" for c in CASES for d in DTYPES],
)


@params
@SETTINGS
@given(data=st.data())
def test_gradient_is_the_pytorch_definition(case: Case, dtype: Any, data: Any) -> None:
    """rulekit's g = ∂L/∂x + i ∂L/∂y, by central differences along x and y separately."""
    z = data.draw(complex_inputs(dtype, case.min_magnitude))
    g = _rulekit_grad(case, z)
    expected = pytorch_fd(_loss128(case, z), z)
    np.testing.assert_allclose(g, expected, **_tolerances(dtype, expected))


@params
@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_gradient_is_twice_dL_dzbar_and_the_conjugate_of_jax(
    case: Case, dtype: Any, data: Any, seed: int
) -> None:
    """g = 2 ∂L/∂z̄ (PyTorch) and conj(g) = conj(2 ∂L/∂z̄) = 2 ∂L/∂z (JAX), from the closed-form
    ∂L/∂z̄; each convention's dL formula holds along a random complex direction v."""
    z = data.draw(complex_inputs(dtype, case.min_magnitude))
    g = _rulekit_grad(case, z)
    dzbar = case.dzbar(z.astype(np.complex128), _matrix(z).astype(np.complex128))  # ∂L/∂z̄
    pytorch = 2 * dzbar
    jax = np.conj(2 * dzbar)  # = 2 ∂L/∂z for real L
    np.testing.assert_allclose(g, pytorch, **_tolerances(dtype, pytorch))
    np.testing.assert_allclose(np.conj(g), jax, **_tolerances(dtype, jax))

    rng = np.random.default_rng(seed)
    v = rng.normal(size=z.shape) + 1j * rng.normal(size=z.shape)
    dl = directional_fd(_loss128(case, z), z, v)
    # dl is a complex128 central difference (its error as in `_tolerances`, ≲ 1e-9 in units
    # of this scale; measured worst 2.4e-10); both formulas use the complex128 ∂L/∂z̄.
    scale = 1.0 + float(np.sum(np.abs(pytorch) * np.abs(v)))
    assert np.real(np.sum(np.conj(pytorch) * v)) == pytest.approx(dl, abs=1e-6 * scale)
    assert np.real(np.sum(jax * v)) == pytest.approx(dl, abs=1e-6 * scale)


@pytest.mark.parametrize(
    "z",
    [3 + 4j, np.complex128(3 + 4j), np.complex64(3 + 4j), np.array(3 + 4j), np.array([3 + 4j])],
    ids=["complex", "complex128", "complex64", "0-d", "1-d"],
)
def test_the_documented_values_of_pytorch_and_jax(z: Any) -> None:
    """L = x² + y² at z = 3 + 4j: PyTorch's gradient is 2z = 6 + 8j, JAX's `grad` gives
    2z̄ = 6 − 8j (its autodiff cookbook's example). rulekit gives PyTorch's, not JAX's;
    `np.conj(g)` is JAX's."""

    def loss(w: Any) -> Any:
        return np.sum(np.real(w) ** 2 + np.imag(w) ** 2)

    g = rulekit.grad(loss)(z)
    assert type(g) is type(z) and np.shape(g) == np.shape(z)
    np.testing.assert_array_equal(g, np.full(np.shape(z), 6 + 8j))
    np.testing.assert_array_equal(np.conj(g), np.full(np.shape(z), 6 - 8j))
    assert not np.allclose(g, 6 - 8j)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_abs_of_tiny_and_huge_complex_values(dtype: Any) -> None:
    """|z|'s adjoint z/|z|·ȳ stays finite where the complex division z/|z| would overflow
    (a subnormal complex64, found by hypothesis): ∇Σ|z|² = 2z and ∇Σ|z| = z/|z| exactly."""
    tiny = np.finfo(dtype).smallest_subnormal
    big = np.finfo(dtype).max / 4
    z = np.array([tiny * (3 + 4j), tiny + 0j, 3e-3 - 4e-3j, big * (0.6 + 0.8j), 0j], dtype)
    unit = rulekit.grad(lambda z: np.sum(np.abs(z)))(z)[:4]
    want = [0.6 + 0.8j, 1, 0.6 - 0.8j, 0.6 + 0.8j]
    np.testing.assert_allclose(unit, want, rtol=4 * np.finfo(dtype).eps)  # (a few roundings)
    assert rulekit.grad(lambda z: np.sum(np.abs(z)))(z)[4] == 0  # (the convention at 0)
    g = rulekit.grad(lambda z: np.sum(np.abs(z[:3]) ** 2))(z)
    assert np.all(np.isfinite(g))
