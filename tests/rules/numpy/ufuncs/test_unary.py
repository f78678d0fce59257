"""Tests for the ufunc rules (rules.numpy.ufuncs.unary, .binary, .misc): the conformance kit
over shapes (broadcasting included) and dtypes; the engine on operators, in-place operators,
`out=`, scalar mixing and piecewise-constant functions against finite differences; and the
conventions at non-differentiable points (docs/conventions-ufuncs.md)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, check_pullback
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules.numpy.contractions
import rules.numpy.creation
import rules.numpy.ufuncs.unary  # noqa: F401  (registers the rules under test)
from rulekit import CoDual, MissingRuleError, NoFData, NoRData, registry, zero_codual
from testutils import check_rule

# The engine tests reduce with np.einsum (rules.numpy.contractions) and make traced buffers with
# np.zeros_like (rules.numpy.creation); everything else they call is a ufunc rule.

FAST = settings(max_examples=12, deadline=None, derandomize=True)
seeds = st.integers(0, 2**16)

# -- the examples attached to the registrations ----------------------------------------------

UFUNC_REGS = [r for r in registry.entries() if r.module.startswith("rules.numpy.ufuncs.")]


def test_every_registration_has_few_examples() -> None:
    assert len(UFUNC_REGS) > 100
    for reg in UFUNC_REGS:
        exs = reg.examples() if callable(reg.examples) else reg.examples
        assert 1 <= len(exs) <= 4, reg.describe()


# -- the kit over shapes and dtypes -----------------------------------------------------------


def _values(rng: np.random.Generator, shape: Any, dtype: Any, domain: str) -> Any:
    lo, hi = {"any": (-2.0, 2.0), "pos": (0.5, 2.0), "unit": (-0.8, 0.8)}[domain]
    v = rng.uniform(lo, hi, size=shape)
    if domain == "any":  # keep away from 0, where abs/sign-like functions kink
        v = np.where(np.abs(v) < 0.2, 0.7, v)
    if np.dtype(dtype).kind == "c":
        v = v + 1j * rng.uniform(0.3, 0.8, size=shape)
    return np.asarray(v, dtype=dtype) if shape != () else np.dtype(dtype).type(v)


UNARY = [
    (np.sin, "any", True),
    (np.exp, "any", True),
    (np.log, "pos", True),
    (np.sqrt, "pos", True),
    (np.tanh, "any", True),
    (np.arcsin, "unit", True),
    (np.absolute, "any", True),
    (np.reciprocal, "pos", True),
    (np.cbrt, "pos", False),
]


@FAST
@given(
    case=st.sampled_from(UNARY),
    shape=st.sampled_from([(), (1,), (4,), (2, 3), (2, 1, 3)]),
    dtype=st.sampled_from([np.float64, np.float32, np.complex128]),
    seed=seeds,
)
def test_unary_kit(case: Any, shape: Any, dtype: Any, seed: int) -> None:
    uf, domain, cplx = case
    if np.dtype(dtype).kind == "c" and not cplx:
        dtype = np.float64
    check_rule(uf, _values(np.random.default_rng(seed), shape, dtype, domain))


BINARY = [
    (np.add, "any", "any", True),
    (np.subtract, "any", "any", True),
    (np.multiply, "any", "any", True),
    (np.divide, "any", "pos", True),
    (np.power, "pos", "any", True),
    (np.float_power, "pos", "any", True),
    (np.maximum, "any", "any", False),
    (np.arctan2, "any", "any", False),
    (np.hypot, "any", "any", False),
    (np.logaddexp, "any", "any", False),
]
SHAPE_PAIRS = [((3,), (3,)), ((2, 3), (3,)), ((3, 1), (1, 4)), ((), (2, 2)), ((2, 3), ())]


@FAST
@given(
    case=st.sampled_from(BINARY),
    shapes=st.sampled_from(SHAPE_PAIRS),
    dtype=st.sampled_from([np.float64, np.float32, np.complex128]),
    seed=seeds,
)
def test_binary_kit(case: Any, shapes: Any, dtype: Any, seed: int) -> None:
    uf, da, db, cplx = case
    if np.dtype(dtype).kind == "c" and not cplx:
        dtype = np.float32
    rng = np.random.default_rng(seed)
    a, b = _values(rng, shapes[0], dtype, da), _values(rng, shapes[1], dtype, db)
    check_rule(uf, a, b)


@FAST
@given(
    case=st.sampled_from(BINARY),
    scalar=st.sampled_from([2.5, 2, np.float64(0.75), np.float32(1.5), True]),
    first=st.booleans(),
    seed=seeds,
)
def test_binary_kit_with_scalars(case: Any, scalar: Any, first: bool, seed: int) -> None:
    uf, da, db, _ = case
    arr = _values(np.random.default_rng(seed), (2, 3), np.float64, db if first else da)
    check_rule(uf, *((scalar, arr) if first else (arr, scalar)))


# -- the engine against finite differences ----------------------------------------------------


# Constant inputs (no generator is left for the tests to share; test_engine_out_arguments
# checks that X is not written to).
_G = np.random.default_rng(7)
X, Y, ROW = _G.normal(size=(3, 4)), _G.uniform(0.5, 2.0, size=(3, 4)), _G.normal(size=4)
del _G

OPERATORS: list[tuple[str, Callable[..., Any]]] = [
    ("x + y", lambda x, y: x + y),
    ("x - y", lambda x, y: x - y),
    ("x * y", lambda x, y: x * y),
    ("x / y", lambda x, y: x / y),
    ("y ** x", lambda x, y: y**x),
    ("x ** 2", lambda x, y: x**2),
    ("x ** 3 * y ** 0.5", lambda x, y: x**3 * y**0.5),
    ("-x + (+y)", lambda x, y: -x + (+y)),
    ("abs(x) * y", lambda x, y: abs(x) * y),
    ("2.0 - x / 3", lambda x, y: 2.0 - x / 3 + 1 / y),
    ("x % y", lambda x, y: x % y),
    ("divmod", lambda x, y: divmod(x, y)[1] * 2.0),
    ("x // y * x", lambda x, y: (x // y) * x),
    ("chain", lambda x, y: np.tanh(np.exp(-(x**2)) * np.log1p(y) - np.sin(x) / y)),
]


@pytest.mark.parametrize(("name", "f"), OPERATORS, ids=[n for n, _ in OPERATORS])
def test_engine_operators(name: str, f: Callable[..., Any]) -> None:
    W = np.random.default_rng(1).normal(size=X.shape)

    def loss(x: Any, y: Any) -> Any:
        return np.einsum("ij,ij->", W, f(x, y))

    check_grads(loss, X, Y)


def test_engine_broadcasting_and_constants() -> None:
    ints, mask = np.arange(4), np.array([True, False, True, True])

    def f(x: Any, row: Any) -> Any:
        return (x * row + ints) / (1.0 + row**2) - mask * x + np.maximum(x, row) * 2

    check_pullback(f, X, ROW)


def test_engine_inplace_operators() -> None:
    def f(x: Any, y: Any) -> Any:
        z = x * 1.0
        z += y
        z *= 2
        z -= x / 4
        z /= y
        z **= 2
        return z

    check_pullback(f, X, Y)


def test_engine_out_arguments() -> None:
    def f(x: Any, y: Any) -> Any:
        c = np.zeros_like(x)
        np.add(x, y, out=c)
        np.multiply(c, x, out=c)
        np.exp(x, out=x)  # overwrites an input: restored by the pullback
        return c + x

    x0 = X.copy()
    check_pullback(f, X, Y)
    np.testing.assert_array_equal(X, x0)


def test_engine_scalar_mixing() -> None:
    def f(x: Any, s: Any, t: Any) -> Any:
        total = np.einsum("ij->", x)  # a traced numpy float64 scalar
        u = np.multiply(s, 2.0) + total * 3.0 - 2.0 / t + np.exp(s) * np.int64(2)
        return x * u + np.sin(total) * t

    grads = check_pullback(f, X, np.float64(0.3), 1.7)
    assert type(grads[1]) is np.float64 and type(grads[2]) is float


def test_engine_scalar_output() -> None:
    def f(s: Any, t: Any) -> Any:
        return np.hypot(s, t) * np.arctan2(t, s) + np.maximum(s, t) ** 2 - np.sqrt(t)

    check_pullback(f, np.float64(0.4), np.float64(1.3))


def test_engine_float32_and_complex() -> None:
    x32, y32 = X.astype(np.float32), Y.astype(np.float32)
    g = check_pullback(lambda x, y: np.exp(x) * y - x / y, x32, y32)
    assert g[0].dtype == np.float32
    z = X + 1j * Y
    check_pullback(lambda z, y: np.sin(z) * np.conj(z) / y + np.sqrt(z) ** 3, z, Y)
    check_pullback(lambda z: np.abs(z) + np.real(z) * np.imag(z) + np.angle(z), z)


def test_engine_piecewise_constant_pass_through() -> None:
    def f(x: Any) -> Any:
        fl = np.floor(x)
        fl += x  # a float output of a piecewise-constant function is written into
        return (
            fl * np.sign(x)
            + (x > 0) * x
            + np.where(np.isfinite(x) & (x < 0.5), x, 0.0)
            + np.round(x, 1) * np.ceil(x)
            + np.trunc(x) * np.rint(x)
            + np.heaviside(x, 0.5)
        )

    x = X + 0.013  # away from integers and from the rounding jumps
    check_pullback(f, x)


def test_engine_clip_and_where() -> None:
    lo, hi = np.full(4, -0.5), 0.7

    def f(x: Any, lo: Any, top: Any) -> Any:
        return (
            np.clip(x, lo, hi) * 2
            + x.clip(-1.0, None)
            + np.clip(x, a_min=-0.2, a_max=top)  # a traced keyword bound gets its cotangent
            + np.where(x > 0, x**2, lo)
        )

    check_pullback(f, X, lo, ROW + 0.05)


# -- conventions at non-differentiable points -------------------------------------------------


def _vjp(f: Any, *args: Any) -> tuple[Any, ...]:
    y = f(*args)
    return rulekit.value_and_pullback(f, np.ones_like(y), *args)[1]


def test_maximum_minimum_ties_split_evenly() -> None:
    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, -1.0])
    for fn in (np.maximum, np.minimum, np.fmax, np.fmin):
        ga, gb = _vjp(fn, a, b)
        np.testing.assert_array_equal(ga + gb, np.ones(3))
        assert ga[0] == gb[0] == 0.5
    ga, gb = _vjp(np.maximum, a, b)
    np.testing.assert_array_equal(ga, [0.5, 0.0, 1.0])
    (g,) = _vjp(lambda x: np.maximum(x, 0.0), np.array([-1.0, 0.0, 2.0]))  # relu
    np.testing.assert_array_equal(g, [0.0, 0.5, 1.0])


def test_nan_operands_of_max_and_fmax() -> None:
    a, b = np.array([np.nan, 1.0]), np.array([2.0, np.nan])
    ga, gb = _vjp(np.fmax, a, b)  # fmax ignores the nan: ȳ goes to the other operand
    np.testing.assert_array_equal(ga, [0.0, 1.0])
    np.testing.assert_array_equal(gb, [1.0, 0.0])
    ga, gb = _vjp(np.maximum, a, b)  # maximum returns nan: nothing goes anywhere
    np.testing.assert_array_equal(ga + gb, [0.0, 0.0])


def test_abs_and_copysign_at_zero() -> None:
    (g,) = _vjp(np.abs, np.array([-2.0, 0.0, 3.0]))
    np.testing.assert_array_equal(g, [-1.0, 0.0, 1.0])
    (g,) = _vjp(np.abs, np.array([0j, 3 + 4j]))
    np.testing.assert_allclose(g, [0.0, 0.6 + 0.8j])
    ga, gb = _vjp(np.copysign, np.array([0.0, 2.0, -2.0]), np.array([1.0, -1.0, -1.0]))
    np.testing.assert_array_equal(ga, [0.0, -1.0, 1.0])
    np.testing.assert_array_equal(gb, [0.0, 0.0, 0.0])


def test_infinite_derivatives_are_inf_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (g,) = _vjp(np.sqrt, np.array([0.0, 4.0]))
        np.testing.assert_array_equal(g, [np.inf, 0.25])
        (g,) = _vjp(np.arcsin, np.array([1.0, 0.0]))
        np.testing.assert_array_equal(g, [np.inf, 1.0])
        (g,) = _vjp(np.cbrt, np.array([0.0]))
        assert g[0] == np.inf


def test_power_conventions() -> None:
    x, p = np.array([0.0, 0.0, 0.0, 2.0, -2.0]), np.array([0.0, 1.0, 2.5, 0.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gx, gp = _vjp(np.power, x, p)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 0.0, 0.0, -4.0])  # b·a^(b−1), 0 where b = 0
    # ∂/∂b: 0 where a = 0 (0ᵇ ≡ 0 for b > 0); no real derivative for a < 0: nan
    np.testing.assert_array_equal(gp[:3], [0.0, 0.0, 0.0])
    assert gp[3] == pytest.approx(np.log(2.0))
    assert np.isnan(gp[4])
    (g,) = _vjp(lambda x: x**0, np.array([0.0, 3.0]))  # x⁰ ≡ 1
    np.testing.assert_array_equal(g, [0.0, 0.0])


def test_clip_at_the_bounds_goes_to_a() -> None:
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    lo, hi = np.full(5, -0.5), np.full(5, 0.5)
    gx, glo, ghi = _vjp(np.clip, x, lo, hi)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 1.0, 1.0, 0.0])
    np.testing.assert_array_equal(glo, [1.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(ghi, [0.0, 0.0, 0.0, 0.0, 1.0])
    gx, glo, ghi = _vjp(np.clip, x, hi, lo)  # lo > hi: numpy returns hi everywhere
    np.testing.assert_array_equal(ghi, np.ones(5))
    np.testing.assert_array_equal(gx + glo, np.zeros(5))


def test_origin_conventions() -> None:
    z = np.zeros(1)
    ga, gb = _vjp(np.hypot, z, z)  # like |x| at 0
    assert ga[0] == gb[0] == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ga, gb = _vjp(np.arctan2, z, z)  # discontinuous there
    assert np.isnan(ga[0]) and np.isnan(gb[0])
    (g,) = _vjp(np.sinc, np.array([0.0, 0.5]))
    assert g[0] == 0.0 and g[1] == pytest.approx(-4 / np.pi)


def test_accuracy_where_the_textbook_formula_cancels() -> None:
    x = np.array([1e-9, 1e-7, 1e-5])
    (g,) = _vjp(np.sinc, x)  # (cos πx − sinc x)/x would be all rounding error here
    u = np.pi * x
    np.testing.assert_allclose(g, np.pi * (-u / 3 + u**3 / 30), rtol=1e-12)
    x = np.array([1 - 2.0**-40])
    (g,) = _vjp(np.arcsin, x)  # 1 − x² loses half the digits; (1 − x)(1 + x) does not
    np.testing.assert_allclose(g, 1 / np.sqrt((1 - x) * (1 + x)), rtol=1e-14)


# -- dispatch: what has a rule, and what does not -------------------------------------------------


def test_real_only_functions_have_no_complex_rule() -> None:
    z = np.array([1 + 1j])
    for fn in (np.arctan2, np.maximum, np.hypot, np.copysign, np.fmod, np.logaddexp):
        with pytest.raises(MissingRuleError):
            rulekit.rrule(zero_codual(fn), zero_codual(z), zero_codual(z))
    for fn in (np.cbrt, np.fabs, np.deg2rad, np.sign, np.floor):
        with pytest.raises(MissingRuleError):
            rulekit.rrule(zero_codual(fn), zero_codual(z))


def test_bool_outputs_are_inactive() -> None:
    x = np.array([0.5, -1.0])
    for fn, args in [(np.greater, (x, 0.0)), (np.isnan, (x,)), (np.logical_and, (x, x))]:
        y, pb = rulekit.rrule(zero_codual(fn), *map(zero_codual, args))
        assert y.dx is NoFData() and y.x.dtype == np.bool_
        rs = pb(NoRData())
        assert all(r is NoRData() or (r == 0 and type(r) is float) for r in rs)
    y, _ = rulekit.rrule(zero_codual(np.floor), zero_codual(x))
    np.testing.assert_array_equal(y.dx, np.zeros(2))  # a float output: zero fdata


def test_unsupported_keywords_raise() -> None:
    x = CoDual(np.ones(3), np.zeros(3))
    with pytest.raises(NotImplementedError, match="where="):
        rulekit.rrule(zero_codual(np.add), x, x, where=np.array([True, False, True]))
    with pytest.raises(NotImplementedError, match="astype"):
        rulekit.rrule(zero_codual(np.sin), x, signature="d->d")


def test_dtype_keyword_casts_first() -> None:
    check_pullback(lambda x, y: np.multiply(x, y, dtype=np.complex128) * (1 + 2j), X, Y)
    check_rule(np.sin, X, kwargs={"dtype": np.float32})
    check_rule(np.add, X, Y.astype(np.float32), kwargs={"dtype": np.float32})


def test_views_share_fdata() -> None:
    z = CoDual(np.array([1 + 2j, 3 - 1j]), np.zeros(2, complex))
    re, _ = rulekit.rrule(zero_codual(np.real), z)
    im, _ = rulekit.rrule(zero_codual(np.imag), z)
    re.dx += 1.0
    im.dx += 2.0
    np.testing.assert_array_equal(z.dx, [1 + 2j, 1 + 2j])
