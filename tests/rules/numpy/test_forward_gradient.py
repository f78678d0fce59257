"""Forward rules and differentiable pullbacks of np.gradient and np.real_if_close
(rules/numpy/forward_numeric.py: numpy's computation without writes into a buffer).

Over C/F/negative-stride/strided layouts and float32/float64 (complex128 for gradient):
`rulekit.jvp` against central differences, and `rulekit.hessian` of a scalar function of the
call in the three modes against central differences of the reverse engine's gradient
`rulekit.grad`; then the values (numpy's, bit for bit) and the refusal of a traced
coordinate array."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from forward_rules import HESSIAN_GRID, HESSIAN_IDS, MODES, fd_hessian

import rulekit
import rules  # noqa: F401  (registers the rules)
from testutils._layouts import relayout

LAYOUTS = ("C", "F", "negative", "strided")
DTYPES = (np.float64, np.float32)
COORDS = np.array([0.0, 1.0, 2.5, 4.0])

#: (id, spacing arguments, keywords) for a (4, 3) array
CASES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("default", (), {}),
    ("scalar-h", (0.5,), {}),
    ("per-axis-h", (0.5, np.float64(2.0)), {"edge_order": 2}),
    ("coordinates-axis0", (COORDS,), {"axis": 0}),
    ("coordinates-and-h", (COORDS, 0.3), {"edge_order": 2}),
    ("uniform-coordinates", (np.arange(3),), {"axis": -1}),
    ("axis-tuple", (0.7,), {"axis": (1, 0)}),
]
IDS = [c[0] for c in CASES]


def _x(dtype: Any, layout: str, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(4, 3))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.normal(size=(4, 3))
    return relayout(np.asarray(x, dtype=dtype), layout)


def _sum_cubes(y: Any) -> Any:
    ys = y if isinstance(y, tuple) else (y,)
    return sum(np.sum(np.real(e) ** 3 + np.imag(e) ** 2) for e in ys)


# -- gradient -------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [*DTYPES, np.complex128], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradient_jvp(case: Any, dtype: Any, layout: str) -> None:
    _, h, kw = case
    x = _x(dtype, layout)
    v = _x(dtype, "C", seed=1)
    y, t = rulekit.jvp(lambda a: np.gradient(a, *h, **kw), (x,), (v,))
    want = np.gradient(x, *h, **kw)
    ys, ts, ws = (e if isinstance(e, tuple) else (e,) for e in (y, t, want))
    assert type(y) is type(want) and len(ys) == len(ws) == len(ts)
    for a, b, c in zip(ys, ws, ts, strict=True):
        assert a.dtype == b.dtype == c.dtype and a.shape == b.shape == c.shape
        np.testing.assert_array_equal(a, b)
        # (gradient is linear in x: its tangent is the gradient of the tangent)
    tv = np.gradient(v, *h, **kw)
    for c, d in zip(ts, tv if isinstance(tv, tuple) else (tv,), strict=True):
        np.testing.assert_allclose(c, d, rtol=1e-6 if dtype == np.float32 else 1e-14)


@pytest.mark.parametrize("dtype,layout,mode", HESSIAN_GRID, ids=HESSIAN_IDS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradient_hessian(case: Any, dtype: Any, layout: str, mode: str) -> None:
    _, h, kw = case
    x = _x(dtype, layout)

    def f(a: Any) -> Any:
        return _sum_cubes(np.gradient(a, *h, **kw))

    ref = fd_hessian(f, x)
    H = rulekit.hessian(f, mode=mode)(x)
    tol = 1e-3 if dtype == np.float32 else 1e-6
    np.testing.assert_allclose(H, ref, rtol=tol, atol=tol * (1 + np.max(np.abs(ref))))


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_spacing_traced(edge_order: int) -> None:
    """A scalar spacing is differentiable (y scales by 1/h): jvp in (x, h) against central
    differences; hessian in (x's scale, h₀, h₁) in the three modes."""
    x = _x(np.float64, "C")

    def g(a: Any, h0: Any, h1: Any) -> Any:
        return np.gradient(a, h0, h1, edge_order=edge_order)

    prim = (x, 0.6, np.float64(1.7))
    tans = (_x(np.float64, "C", seed=2), 0.3, np.float64(-0.8))
    _, t = rulekit.jvp(g, prim, tans)
    eps = 1e-6
    plus = g(*(p + eps * d for p, d in zip(prim, tans, strict=True)))
    minus = g(*(p - eps * d for p, d in zip(prim, tans, strict=True)))
    for c, a, b in zip(t, plus, minus, strict=True):
        np.testing.assert_allclose(c, (a - b) / (2 * eps), rtol=1e-7, atol=1e-8)

    def f(p: Any) -> Any:
        return _sum_cubes(np.gradient(x * p[0], p[1], p[2], edge_order=edge_order))

    p = np.array([1.2, 0.6, 1.7])
    ref = fd_hessian(f, p, h=1e-6)
    for mode in MODES:
        H = rulekit.hessian(f, mode=mode)(p)
        np.testing.assert_allclose(H, ref, rtol=1e-5, atol=1e-5 * (1 + np.max(np.abs(ref))))


def test_gradient_traced_coordinates_refused() -> None:
    """A traced coordinate array raises NotImplementedError in every mode, as in reverse mode
    (coordinate arrays are constants; a plain one is fine)."""
    x = _x(np.float64, "C")
    c = COORDS.copy()
    with pytest.raises(NotImplementedError, match="coordinate"):
        rulekit.jvp(lambda s: np.gradient(x, s, axis=0), (c,), (np.ones(4),))
    with pytest.raises(NotImplementedError, match="coordinate"):
        rulekit.hessian(lambda s: np.sum(np.gradient(x, s, axis=0) ** 3))(c)
    with pytest.raises(NotImplementedError, match="coordinate"):
        rulekit.grad(lambda s: np.sum(np.gradient(x, s, axis=0) ** 3))(c)


def test_gradient_errors_as_numpys() -> None:
    x = _x(np.float64, "C")
    for h, kw, err in [((0.5, 0.5, 0.5), {}, TypeError), ((), {"edge_order": 3}, ValueError),
                       ((np.ones(3),), {"axis": 0}, ValueError)]:  # fmt: skip
        with pytest.raises(err):
            np.gradient(x, *h, **kw)
        with pytest.raises(err):
            rulekit.jvp(lambda a, h=h, kw=kw: np.gradient(a, *h, **kw), (x,), (x,))


# -- real_if_close --------------------------------------------------------------------------------

RIC = [
    ("real", np.float64, 0.0, 100),
    ("real-f32", np.float32, 0.0, 100),
    ("negligible-imaginary", np.complex128, 1e-16, 100),
    ("negligible-c64", np.complex64, 1e-9, 1000),
    ("imaginary-kept", np.complex128, 0.5, 100),
    ("absolute-tol", np.complex128, 1e-4, 1e-3),
]


def _ric_x(dtype: Any, imag: float, layout: str) -> Any:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 4)) + (1j * imag * rng.uniform(0.5, 1.0, (3, 4)) if imag else 0)
    return relayout(np.asarray(x, dtype=dtype), layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", RIC, ids=[c[0] for c in RIC])
def test_real_if_close_jvp(case: Any, layout: str) -> None:
    _, dtype, imag, tol = case
    x = _ric_x(dtype, imag, layout)
    v = np.asarray(_ric_x(np.complex128 if imag else np.float64, 1.0 if imag else 0, "C"), dtype)
    y, t = rulekit.jvp(lambda a: np.real_if_close(a, tol), (x,), (v,))
    want = np.real_if_close(x, tol)
    assert y.dtype == want.dtype == t.dtype
    np.testing.assert_array_equal(y, want)
    # (the tangent: Re ẋ where the value is Re x, ẋ where it is x)
    np.testing.assert_array_equal(t, np.real(v) if x.dtype != want.dtype else v)


@pytest.mark.parametrize("dtype,layout,mode", HESSIAN_GRID, ids=HESSIAN_IDS)
@pytest.mark.parametrize("imag", [1e-18, 0.5])
def test_real_if_close_hessian(imag: float, dtype: Any, layout: str, mode: str) -> None:
    """A function of real_if_close(x + iε) of a real x: its real part (ε negligible) or x
    itself (ε kept)."""
    x = relayout(np.asarray(np.random.default_rng(4).normal(size=(2, 3)), dtype), layout)

    def f(a: Any) -> Any:
        # (complex64 for a float32 a, complex128 for the differences' widened one)
        c = np.full(a.shape, imag * 1j, np.result_type(a.dtype, np.complex64))
        y = np.real_if_close(a + c)
        return np.sum(np.real(y) ** 3 + np.imag(y * y))

    ref = fd_hessian(f, x)
    H = rulekit.hessian(f, mode=mode)(x)
    tol = 1e-3 if dtype == np.float32 else 1e-6
    np.testing.assert_allclose(H, ref, rtol=tol, atol=tol * (1 + np.max(np.abs(ref))))
