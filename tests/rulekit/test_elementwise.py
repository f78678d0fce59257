"""The elementwise declaration vocabulary (`rulekit.elementwise`), as a third party uses it.

Functions the bundled rules do not cover are declared here by their partials and checked
with the conformance kit and against finite differences in every layout, precision and
shape kind; then the parts fast paths build on: the partials (evaluated, quiet, skipped
for inactive operands), the Python-float variants, and the numba kernels generated from
a declaration (their on-disk module and the fallback when it cannot be written).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Union

import numpy as np
import pytest
import scipy.special as sp
from fdcheck import EVERY_LAYOUT, check_grads, check_pullback
from forward_rules import fd_hessian

import rulekit
import rules  # noqa: F401  (the bundled rules of the numpy code around the declared functions)
from rulekit._elementwise import Elementwise, accumulate, differentiable, elementwise
from testutils import check_rule

pytestmark = pytest.mark.usefixtures("registrations")

_TWO_OVER_SQRT_PI = 2 / np.sqrt(np.pi)


def _declare_erfcx() -> Elementwise:
    """erfcx(x) = exp(x²)·erfc(x) ⇒ x̄ += (2x·y − 2/√π)·ȳ: a ufunc no bundled rule covers,
    declared with the default patterns (its float loops) and examples (from `domain`)."""
    return elementwise(sp.erfcx, lambda x, y: 2 * x * y - _TWO_OVER_SQRT_PI, domain=(-1.5, 2.0))


def _declare_softclip() -> tuple[Any, Elementwise]:
    """A Python function made a primitive: a = softclip(x, c) = c·tanh(x/c), both partials."""
    softclip = rulekit.primitive(lambda x, c: c * np.tanh(x / c))
    real = Union[rulekit.Array[np.floating], float, np.floating]
    decl = elementwise(
        softclip,
        lambda x, c, y: 1 - (y / c) ** 2,  # ∂x = 1 − tanh²(x/c)
        lambda x, c, y: y / c - (x / c) * (1 - (y / c) ** 2),  # ∂c = tanh(u) − u·(1 − tanh²u)
        patterns=[(real, real)],
        examples=[rulekit.example(np.linspace(-2, 2, 6), 1.5)],
    )
    return softclip, decl


# -- a third-party unary ufunc ----------------------------------------------------------------


def test_declaration_keeps_its_partials_and_registers_the_rule() -> None:
    d = _declare_erfcx()
    assert d.nargs == 1 and d.fn is sp.erfcx and not d.holomorphic
    x = np.array([0.3, -0.7])
    np.testing.assert_allclose(
        d.derivs[0](x, sp.erfcx(x)), 2 * x * sp.erfcx(x) - 2 / np.sqrt(np.pi)
    )
    reg = rulekit.registry.lookup(rulekit.Signature(sp.erfcx, (np.float64,)))
    assert reg.impl is d.rule and reg.module == __name__  # the declaring module, not rulekit's


@pytest.mark.parametrize(
    "x",
    [
        np.linspace(-1.0, 2.0, 12).reshape(3, 4),  # C (the kit also tries F, strided, reversed)
        np.asfortranarray(np.linspace(-1.0, 2.0, 12).reshape(3, 4)),
        np.linspace(-1.0, 2.0, 24).reshape(4, 6)[:, ::2],  # strided
        np.linspace(-1.0, 2.0, 8)[::-1],  # negative stride
        np.array(0.4),  # 0-d: numpy returns a scalar
        np.zeros((0, 3)),  # empty
        np.linspace(-1.0, 2.0, 5).astype(np.float32),
        0.35,  # a Python float
        np.float32(-0.6),
    ],
    ids=["C", "F", "strided", "negative", "0-d", "empty", "float32", "float", "np.float32"],
)
def test_third_party_unary_passes_the_kit(x: Any) -> None:
    _declare_erfcx()
    check_rule(sp.erfcx, x)


def test_third_party_unary_against_finite_differences_in_every_layout() -> None:
    _declare_erfcx()
    x = np.linspace(-1.0, 2.0, 12).reshape(3, 4)
    f = lambda v: np.sum(np.tanh(sp.erfcx(v)))  # noqa: E731
    check_grads(f, x, layouts=EVERY_LAYOUT, calls=3)  # one value_and_grad, repeated calls


def test_default_examples_pass_the_kit() -> None:
    d = _declare_erfcx()
    reg = rulekit.registry.lookup(rulekit.Signature(sp.erfcx, (np.float64,)))
    exs = reg.examples()
    assert len(exs) == 3  # float64, float32, Python float (erfcx is not holomorphic)
    for ex in exs:
        check_rule(sp.erfcx, *ex.args)
    assert d.rule.__name__ == "erfcx_rrule"


# -- a holomorphic function, and a binary one with broadcasting -------------------------------


def test_holomorphic_declaration_complex_and_real() -> None:
    expm1_minus = rulekit.primitive(lambda z: np.expm1(z) - z)
    inexact = Union[rulekit.Array[np.inexact], float, complex, np.inexact]
    elementwise(
        expm1_minus, lambda z, y: y + z, holomorphic=True, patterns=[(inexact,)], examples=[]
    )  # fmt: skip  (d/dz (eᶻ − 1 − z) = eᶻ − 1 = y + z)
    z = np.array([0.3 + 0.4j, -0.2 + 1.1j, 1.5 - 0.3j])
    for v in (z, z.astype(np.complex64), z.real.copy(), complex(z[0]), np.complex128(z[1])):
        check_rule(expm1_minus, v)
    check_pullback(lambda v: expm1_minus(v) * (1 - 2j), z, layouts=EVERY_LAYOUT)


@pytest.mark.parametrize(
    ("x", "c"),
    [
        (np.linspace(-2, 2, 12).reshape(3, 4), np.array([1.5, 2.0, 0.7, 3.0])),  # a row
        (np.linspace(-2, 2, 12).reshape(3, 4), np.array([[1.5], [2.0], [0.7]])),  # a column
        (np.linspace(-2, 2, 4).astype(np.float32), np.float32(1.3)),
        (0.8, np.array([1.5, 2.5])),  # a scalar against an array
        (np.array(0.8), 1.2),  # 0-d and a Python float
        (np.zeros((2, 0)), 1.5),  # empty
    ],
    ids=["row", "column", "float32", "scalar-array", "0-d", "empty"],
)
def test_binary_declaration_unbroadcasts(x: Any, c: Any) -> None:
    softclip, _ = _declare_softclip()
    check_rule(softclip, x, c)


def test_binary_declaration_against_finite_differences() -> None:
    softclip, _ = _declare_softclip()
    x, c = np.linspace(-2, 2, 12).reshape(3, 4), np.array([1.5, 2.0, 0.7, 3.0])
    check_grads(lambda a, b: np.sum(softclip(a, b) ** 2), x, c, layouts=EVERY_LAYOUT, calls=2)


# -- what the plain rule does and skips --------------------------------------------------------


def test_inactive_and_integer_operands_cost_nothing() -> None:
    calls: list[str] = []

    def da(a: Any, b: Any, y: Any) -> Any:
        calls.append("a")
        return b

    def db(a: Any, b: Any, y: Any) -> Any:
        calls.append("b")
        return a

    times = rulekit.primitive(lambda a, b: a * b)
    num = Union[rulekit.Array[np.number], float, int]
    elementwise(times, da, db, patterns=[(num, num)], examples=[])
    x = np.arange(3.0)
    g = rulekit.value_and_grad(lambda a, b: np.sum(times(a, b)), argnums=0)(x, x + 1)[1]
    np.testing.assert_array_equal(g, x + 1)
    assert calls == ["a"]  # b's partial: not evaluated (b is not differentiated)
    calls.clear()
    g = rulekit.value_and_grad(lambda a: np.sum(times(a, np.arange(3))))(x)[1]
    assert calls == ["a"]  # an integer operand is a constant


def test_quiet_partials_do_not_warn() -> None:
    root = rulekit.primitive(np.sqrt)
    real = Union[rulekit.Array[np.floating], float]
    elementwise(root, lambda x, y: 1 / (2 * y), patterns=[(real,)], examples=[], quiet=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = rulekit.grad(lambda v: np.sum(root(v)))(np.array([0.0, 4.0]))
    np.testing.assert_array_equal(g, [np.inf, 0.25])


def test_refused_keywords_and_dtype_casting() -> None:
    _declare_erfcx()
    x = np.linspace(-1, 1, 4)
    with pytest.raises(NotImplementedError, match="where="):
        rulekit.grad(lambda v: np.sum(sp.erfcx(v, where=v > 0)))(x)
    check_pullback(lambda v: sp.erfcx(v, dtype=np.float32), x)  # float32 evaluation


CAST_CALLS = {  # name → (f, whether numpy accepts it)
    "add-int": (lambda v: np.add(v, v, dtype=int), False),  # float → int: not same_kind
    "sin-int": (lambda v: np.sin(v, dtype=np.int64), False),  # no integer loop
    "multiply-float32": (lambda v: np.multiply(v, 2.0, dtype=np.float32), True),
    "scalar-float32": (lambda v: np.multiply(v[0], 2.0, dtype=np.float32) * v, True),
    "exp-complex": (lambda v: np.real(np.exp(v, dtype=np.complex128)), True),
    "unsafe-int": (lambda v: np.multiply(v, 2.0, dtype=np.int32, casting="unsafe") + v, True),
}


@pytest.mark.parametrize("layout", ["C", "negative", "strided"])
@pytest.mark.parametrize("name", CAST_CALLS)
def test_dtype_keyword_casts_as_numpy_does(name: str, layout: str) -> None:
    """dtype= on traced operands: numpy's casting and loop errors, raised by every engine
    (the operands were cast unsafely before: a zero gradient, or sin of truncated values);
    an accepted cast differentiated through (three calls of one value_and_grad object), in
    forward mode and to second order."""
    from testutils._layouts import relayout

    f, accepted = CAST_CALLS[name]
    x = relayout(np.array([0.5, 1.5]), layout)
    vg = rulekit.value_and_grad(lambda v: np.sum(f(v) ** 2))
    runs = {
        "grad": lambda: [vg(x)[1] for _ in range(3)][-1],
        "jvp": lambda: rulekit.jvp(f, (x,), (np.ones(2),))[1],
        "hessian": lambda: rulekit.hessian(lambda v: np.sum(f(v) ** 2))(x),
    }
    if not accepted:
        with pytest.raises(TypeError) as numpy_error:
            f(x)
        for run in runs.values():
            with pytest.raises(type(numpy_error.value), match=str(numpy_error.value)[:30]):
                run()
        return
    single = "float32" in name  # (float32 values: a wider step; f is a polynomial here)
    h, tol = (1e-2, 1e-2) if single else (1e-6, 1e-6)
    fd = (np.sum(f(x + h) ** 2) - np.sum(f(x - h) ** 2)) / (2 * h)  # (along ones)
    np.testing.assert_allclose(np.sum(runs["grad"]()), fd, rtol=tol)
    y_dot = (f(x + h) - f(x - h)) / (2 * h)
    np.testing.assert_allclose(runs["jvp"](), y_dot, rtol=tol, atol=tol)
    ref = fd_hessian(lambda v: np.sum(f(v) ** 2), x, h=1e-2 if single else 1e-5)
    np.testing.assert_allclose(runs["hessian"](), ref, rtol=10 * tol, atol=10 * tol)


def test_activity_test_and_accumulate() -> None:
    CoDual = rulekit.CoDual
    assert differentiable(CoDual(np.zeros(2), np.zeros(2)))
    assert not differentiable(CoDual(np.zeros(2), None)) and not differentiable(None)
    assert not differentiable(CoDual(3, rulekit.NoFData())) and differentiable(
        CoDual(3.0, rulekit.NoFData())
    )
    dx = np.zeros((2, 1), np.float32)
    accumulate(CoDual(dx, dx), np.ones((2, 3)) + 1j)  # real part, summed over the broadcast axis
    np.testing.assert_array_equal(dx, [[3], [3]])
    assert accumulate(CoDual(np.float64(1.0), rulekit.NoFData()), np.array([1.0, 2.0])) == 3.0


def test_scalar_partials_are_the_declared_ones_on_python_floats() -> None:
    d = _declare_erfcx()
    (fast,) = d.scalar_partials()
    for x in (-0.7, 0.0, 1.9):
        assert fast(x, float(sp.erfcx(x))) == d.derivs[0](x, float(sp.erfcx(x)))
    sin = Elementwise(
        np.sin, [lambda x, y: np.cos(x)], holomorphic=True, quiet=False, module=__name__
    )
    (cos,) = sin.scalar_partials()
    assert type(cos(0.5, 0.0)) is float and cos(0.5, 0.0) == np.cos(0.5)  # math.cos, same bits


# -- numba kernels generated from a declaration ---------------------------------------------------


@pytest.fixture
def kernel_cache(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("RULEKIT_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_generated_kernels_match_the_plain_cotangents(kernel_cache: Any) -> None:
    from rules.numpy.ufuncs._kernels import kernels_of

    _, d = _declare_softclip()
    k = kernels_of(d)
    assert kernels_of(d) is k and os.listdir(kernel_cache)  # a module file in the cache dir
    r = np.random.default_rng(1)
    a, b, g = r.normal(size=50), r.uniform(0.5, 2, 50), r.normal(size=50)
    y = d.fn(a, b)
    want_a, want_b = d.cotangents([a, b], y, g, [True, True])
    da, db, gg = np.zeros(50), np.zeros(50), g.copy()
    k.binary(a, b, y, gg, da, db, True, True)
    np.testing.assert_allclose(da, want_a, rtol=1e-14)
    np.testing.assert_allclose(db, want_b, rtol=1e-14)
    assert not gg.any()  # ȳ cleared
    dx, gg = np.zeros(50), g.copy()
    dc = k.scalar_right(a, 1.5, d.fn(a, 1.5), gg, dx, True, True)
    wa, wc = d.cotangents([a, 1.5], d.fn(a, 1.5), g, [True, True])
    np.testing.assert_allclose(dx, wa, rtol=1e-14)
    assert dc == pytest.approx(np.sum(wc), rel=1e-12)


def test_generated_module_is_reused_and_unwritable_dirs_fall_back(
    kernel_cache: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rules.numpy.ufuncs._kernels import kernels_of

    d = _declare_erfcx()
    kernels_of(d)
    files = sorted(os.listdir(kernel_cache))
    d.kernels = None
    kernels_of(d)  # the same source: the same file, not rewritten
    assert sorted(os.listdir(kernel_cache)) == files
    blocked = kernel_cache / "file"
    blocked.write_text("")
    monkeypatch.setenv("RULEKIT_CACHE_DIR", str(blocked / "kernels"))  # (not a directory)
    d.kernels = None
    k = kernels_of(d)
    x = np.linspace(-1, 1, 5)
    y, g, dx = sp.erfcx(x), np.ones(5), np.zeros(5)
    k.unary(x, y, g, dx, True)
    np.testing.assert_allclose(dx, d.derivs[0](x, y), rtol=1e-14)


def test_rulekit_does_not_import_numba() -> None:
    import subprocess
    import sys

    code = "import sys, rulekit._elementwise; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
