"""Forward rules and differentiable pullbacks of the reductions (rules/numpy/reductions/forward*).

Each call: frule vs central differences, vjp vs frule (dot-product test), vjp vs the reverse
rule, over layouts, dtypes, options (axis, keepdims, dtype=, where=, initial=, ddof), ties,
zeros and NaNs; then second order (`check_traceable`) for sum/mean/max/prod/var/std and more.
The helpers are tests/rules/numpy/test_forward_products.py's.
"""

from __future__ import annotations

import importlib.util
import pathlib
from typing import Any

import numpy as np
import pytest

import rulekit
from rulekit import Dual

_spec = importlib.util.spec_from_file_location(
    "_forward_helpers", pathlib.Path(__file__).parents[1] / "test_forward_products.py"
)
assert _spec is not None and _spec.loader is not None
_h = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_h)
check_call, check_traceable, rnd = _h.check_call, _h.check_traceable, _h.rnd

_ORDERS = ("C", "F", "S", "N")
_DTS = (np.float64, np.complex128)


def _x(dt: Any = np.float64, order: str = "C", shape: tuple[int, ...] = (3, 4)) -> Any:
    return rnd(np.random.default_rng(1), shape, dt, order)


SUM_OPTIONS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {}),
    ((0,), {}),
    ((), {"axis": -1, "keepdims": True}),
    (((0, 1),), {}),
    ((1,), {"where": np.array([True, False, True, True])}),
]


@pytest.mark.parametrize("fn", [np.sum, np.mean, np.nansum, np.nanmean, np.prod])
@pytest.mark.parametrize("dt", _DTS)
@pytest.mark.parametrize("order", _ORDERS)
@pytest.mark.parametrize("opts", SUM_OPTIONS, ids=str)
def test_sums_and_products(fn: Any, dt: Any, order: str, opts: Any) -> None:
    args, kw = opts
    check_call(fn, _x(dt, order), *args, **kw)


@pytest.mark.parametrize("fn", [np.sum, np.prod, np.nansum])
def test_initial_and_dtype(fn: Any) -> None:
    x = _x()
    check_call(fn, x, axis=1, initial=1.5)
    check_call(fn, x.astype(np.float32), axis=-1, dtype=np.float64)
    check_call(fn, x, 0, dtype=np.complex128)  # a real input, complex result: x̄ gets Re
    check_call(fn, np.zeros((0, 3)), axis=0)
    check_call(fn, np.array(1.5))
    check_call(fn, 2.5)


def test_sum_positional_initial_is_differentiated() -> None:
    check_call(np.sum, _x(), (0, -1), None, None, True, 0.5, active=[0, 5])


def test_float32() -> None:
    x = _x(np.float32)
    for fn in (np.sum, np.mean, np.prod, np.max, np.var, np.std):
        check_call(fn, x, 1, rtol=1e-4, atol=1e-4)


def test_nan_skipping() -> None:
    x = _x()
    x[0, 1] = x[2, 3] = np.nan
    for fn in (np.nansum, np.nanmean, np.nanmax, np.nanmin):
        check_call(fn, x)
        check_call(fn, x, axis=0, keepdims=True)
    x[1] = np.nan  # an all-NaN lane: y is NaN there, its tangent and cotangent 0
    fr, vj = _h.impls(np.nanmean, [x, 1])
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        t = fr(Dual(np.nanmean, None), Dual(x, np.ones_like(x)), Dual(1, None)).dx
    assert t[1] == 0 and np.all(np.isfinite(t))
    with pytest.warns(RuntimeWarning):
        g = vj((True, False), x, 1)[1](np.ones(3))[0]
    assert np.all(g[1] == 0) and np.all(np.isfinite(g))


def test_prod_with_zeros_is_exact() -> None:
    z = _x()
    z[0, 1] = 0.0  # one zero in row 0, two in row 1
    z[1, 0] = z[1, 2] = 0.0
    check_call(np.prod, z, axis=1, keepdims=True)
    check_call(np.prod, z + 0.5j * _x(), (0, 1), initial=1.5)
    check_call(np.prod, z)


@pytest.mark.parametrize("order", _ORDERS)
@pytest.mark.parametrize("dt", _DTS)
def test_cumprod(order: str, dt: Any) -> None:
    z = _x(dt, order)
    check_call(np.cumprod, z)
    check_call(np.cumprod, z, axis=1)
    z[0, 0] = z[1, 2] = z[2, 1] = z[2, 3] = 0.0  # a leading zero, a middle one, two in a row
    check_call(np.cumprod, z, 0)
    check_call(np.cumprod, z, axis=-1)
    check_call(np.cumprod, z.real.astype(np.float32), 1, np.float64)


def _tied() -> Any:
    x = np.random.default_rng(20).permutation(12).reshape(3, 4) / 4.0 - 1.0
    x[0, 3] = x[0, 0] = x.max() + 1  # two tied maxima (exactly two: FD is their mean)
    x[2, 1] = x[2, 2] = x.min() - 1  # two tied minima
    return x


@pytest.mark.parametrize("fn", [np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin])
@pytest.mark.parametrize("order", _ORDERS)
def test_extrema(fn: Any, order: str) -> None:
    x = np.array(_tied(), order="F" if order == "F" else "C")
    if order == "S":
        big = np.zeros((6, 8))
        big[::2, ::2] = x
        x = big[::2, ::2]
    check_call(fn, x, rrule=True)
    check_call(fn, x, axis=1, keepdims=True)  # ties split: FD is exactly the split
    check_call(fn, x, 0, where=np.array([True, True, False, True]), initial=0.3)
    check_call(fn, x, (0, -1))


def test_extrema_complex_and_methods() -> None:
    rng = np.random.default_rng(21)
    z = rng.permutation(12).reshape(3, 4) / 4.0 - 1.0 + 1j * rng.normal(size=(3, 4))
    for fn in (np.max, np.min):
        check_call(fn, z)
        check_call(fn, z, axis=1)
    x = _tied()
    check_call(np.ptp, x)
    check_call(np.ptp, x, axis=1)
    for m in (np.add.reduce, np.multiply.reduce, np.maximum.reduce, np.minimum.reduce):
        check_call(m, x)
        check_call(m, x, 1)
        check_call(m, x, axis=None, keepdims=True)
    check_call(np.maximum.reduce, x, 0, None, None, True)  # reduce's positional dtype slot


@pytest.mark.parametrize("fn", [np.var, np.std])
@pytest.mark.parametrize("dt", _DTS)
def test_var_std(fn: Any, dt: Any) -> None:
    x = _x(dt, "F")
    check_call(fn, x)
    check_call(fn, x, axis=0, ddof=1, keepdims=True)
    check_call(fn, x, (0, 1), where=np.array([True, True, False, True]))
    # (a complex dtype= makes var's result complex with Im 0, so Im ȳ must meet nothing; the
    # reverse rule multiplies by the complex ȳ, and is not compared with here)
    check_call(fn, x.astype(np.complex64 if dt is np.complex128 else np.float32), -1,
               dtype=dt, correction=1, rtol=1e-4, atol=1e-4, rrule=dt is np.float64)  # fmt: skip
    check_call(fn, x, 1, mean=np.mean(x, axis=1, keepdims=True))


def test_std_at_zero_variance() -> None:
    c = _x()
    c[:, 2] = 0.5  # a constant column: std's kink gets 0, the central difference
    check_call(np.std, c, axis=0)


def test_average() -> None:
    rng = np.random.default_rng(31)
    x, w = rng.normal(size=(3, 4)), rng.uniform(0.5, 1.5, size=(3, 4))
    check_call(np.average, x, weights=w, active=[0])
    check_call(np.average, x, 1, w[0], active=[0, 2])
    check_call(np.average, x, 1, w[0], True, active=[0, 2])  # returned=(avg, Σw)
    check_call(np.average, x, 0, w, active=[0, 2])
    check_call(np.average, x + 1j * w, None, w - 0.5j, active=[0, 2], keepdims=True)
    check_call(np.average, x, axis=0, returned=True)


# -- second order ----------------------------------------------------------------------------


_SECOND_ORDER = [
    (np.sum, (), {}),
    (np.sum, (1,), {"keepdims": True}),
    (np.mean, (0,), {}),
    (np.nansum, (1,), {}),
    (np.prod, (1,), {}),
    (np.prod, (), {}),
    (np.cumprod, (1,), {}),
    (np.var, (0,), {"ddof": 1}),
    (np.std, (1,), {}),
    (np.max, (1,), {}),
    (np.min, (), {}),
    (np.nanmax, (0,), {}),
    (np.ptp, (1,), {}),
    (np.add.reduce, (), {}),
    (np.maximum.reduce, (1,), {}),
]
# complex max/min order complex numbers lexicographically: no complex derivative to take
# twice (their first order is checked above)
_LEXICOGRAPHIC = (np.max, np.min, np.nanmax, np.ptp, np.maximum.reduce)


@pytest.mark.parametrize(
    "fn,args,kw,dt",
    [
        pytest.param(fn, args, kw, dt, id=f"{getattr(fn, '__name__', fn)}-{args}-{np.dtype(dt)}")
        for fn, args, kw in _SECOND_ORDER
        for dt in _DTS
        if not (dt is np.complex128 and fn in _LEXICOGRAPHIC)
    ],
)
def test_twice_differentiable(fn: Any, args: Any, kw: Any, dt: Any) -> None:
    x = _x(dt)
    check_traceable(fn, x, *args, **kw)


def test_prod_with_zeros_twice_differentiable() -> None:
    z = _x()
    z[0, 1] = 0.0
    z[1, 0] = z[1, 2] = 0.0
    check_traceable(np.prod, z, 1)
    check_traceable(np.cumprod, z, 1)


def test_average_twice_differentiable() -> None:
    rng = np.random.default_rng(32)
    x, w = rng.normal(size=(3, 4)), rng.uniform(0.5, 1.5, size=(4,))
    check_traceable(np.average, x, 1, w, wrt=0, active=[0, 2])
    check_traceable(np.average, x, 1, w, wrt=2, active=[0, 2])


_MODULES = [f"rules.numpy.reductions.forward{m}" for m in ("", "_stats", "_extrema", "_methods")]


@pytest.mark.parametrize("fn,ex", _h.registered_examples(_MODULES))
def test_registered_examples(fn: Any, ex: Any) -> None:
    """Every example the reduction rules are registered with (the kit's inputs)."""
    _h.check_example(fn, ex)


_EMPTY = [((0, 0), 1), ((0, 3), 1), ((3, 0), 1), ((0, 3), 0), ((2, 0, 3), (1, 2))]


@pytest.mark.parametrize(
    ("fn", "shape", "axis"),
    [(np.prod, s, a) for s, a in _EMPTY] + [(np.cumprod, s, a) for s, a in _EMPTY[:4]],
)
def test_products_of_empty_arrays_to_second_order(fn: Any, shape: Any, axis: Any) -> None:
    """Empty lanes and empty batches: the exclusive products' reshape must not be
    (lead, -1), which numpy cannot resolve for an empty lead (the fuzzer found it). Every
    element of x is in an empty array, so every derivative is an exact 0."""
    x, v = np.ones(shape), np.full(shape, 0.5)

    def f(x: Any) -> Any:
        return np.sum(fn(x, axis=axis) ** 2)

    y, t = rulekit.jvp(f, (x,), (v,))
    assert y == f(x) and t == 0.0
    for mode in ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward"):
        g, hv = rulekit.hvp(f, (x,), (v,), mode=mode)
        assert g.shape == hv.shape == shape and not np.any(hv)
