"""Tests for `rulekit.linear`: one declaration per linear function, both rules derived.

A third-party-style declaration of new linear functions (`rulekit.primitive`
wrappers, as a user package would write them) goes through the conformance kit
on every layout, 0-d and empty arrays, float32/float64/complex, every activity
combination; through the engine on repeated calls of one `value_and_grad` object;
and with a view output written in place afterwards. The derived forward rule is
checked against finite differences (exact for a linear map, up to rounding) and
against the reverse rule, ⟨ȳ, L ẋ⟩ = ⟨Lᴴ ȳ, ẋ⟩, for these and for every bundled
declaration on its registered examples.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import rulekit
from rulekit import Array, CoDual, NoRData, example, randn_tangent, registry
from rulekit._linear import LinearFunction, ViewMismatchError, declarations, linear
from rulekit._tangents import inner, join_tangent, split_tangent, zero_fdata
from testutils import check_rule

# -- a third-party package's linear functions ------------------------------------------------


def _half_prefix_sums(x: np.ndarray) -> np.ndarray:
    """y = ½·(prefix sums of x in C order), reshaped like x: linear, not symmetric."""
    return 0.5 * np.cumsum(x.ravel()).reshape(x.shape)


def _half_prefix_sums_adjoint(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 0.5 * np.cumsum(g.ravel()[::-1])[::-1].reshape(x.shape)


def _mix(a: np.ndarray, s: float) -> np.ndarray:
    """y = 2a − s: linear in the array a and the scalar s jointly."""
    return 2.0 * a - s


def _first_rows(x: np.ndarray, n: int) -> np.ndarray:
    """y = x[:n]: a view of x."""
    return x[:n]


def _first_rows_adjoint(g: np.ndarray, x: np.ndarray, n: int) -> np.ndarray:
    z = np.zeros(x.shape, np.result_type(x, g))
    z[:n] = g
    return z


half_prefix_sums = rulekit.primitive(_half_prefix_sums)
mix = rulekit.primitive(_mix)
first_rows = rulekit.primitive(_first_rows)


@pytest.fixture
def declared_here(registrations: None) -> Iterator[dict[str, LinearFunction]]:
    yield {
        "prefix": linear(
            half_prefix_sums,
            _half_prefix_sums_adjoint,
            patterns=[(Array[np.inexact],)],
            examples=[example(np.arange(4.0))],
        ),
        "mix": linear(
            mix,
            (lambda g, a, s: 2.0 * g, lambda g, a, s: -np.sum(g)),
            patterns=[(Array[np.inexact], float)],
            argnums=(0, 1),
        ),
        "rows": linear(
            first_rows, _first_rows_adjoint, patterns=[(Array[np.inexact], int)], view=True
        ),
    }


def _layouts(shape: tuple[int, ...], dtype: Any, seed: int) -> list[np.ndarray]:
    """C, F, strided and negative-stride copies of one random array (just C for 0-d)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.normal(size=shape)
    x = np.asarray(x, dtype)  # (0-d: an array, not a numpy scalar)
    if x.ndim == 0:
        return [x]
    big = np.zeros(tuple(2 * n for n in shape), dtype)
    strided = big[tuple(slice(None, None, 2) for _ in shape)]
    strided[...] = x
    return [x, np.asfortranarray(x), strided, x[tuple(slice(None, None, -1) for _ in shape)]]


DTYPES = [np.float32, np.float64, np.complex128]
SHAPES = [(), (0,), (3, 0), (5,), (3, 4), (2, 3, 2)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_a_declared_function_passes_the_kit(
    declared_here: dict[str, LinearFunction], shape: tuple[int, ...], dtype: Any
) -> None:
    for x in _layouts(shape, dtype, seed=len(shape)):
        report = check_rule(half_prefix_sums, x)
        assert "correctness: pass" in str(report), report
        report = check_rule(mix, x, 1.5)  # (every activity combination of a and s)
        assert "correctness: pass" in str(report), report
        if x.ndim:
            check_rule(first_rows, x, 2)


def test_registered_by_the_declaring_module(declared_here: dict[str, LinearFunction]) -> None:
    reg = registry.which(half_prefix_sums, np.ones(3))
    assert reg.module == __name__
    assert reg.impl is declared_here["prefix"].rrule
    assert declared_here["prefix"] in declarations()


def test_inactive_arguments_get_no_work(declared_here: dict[str, LinearFunction]) -> None:
    def adjoint_never_called(g: Any, *args: Any) -> Any:
        raise AssertionError("the adjoint of an inactive argument ran")

    decl = linear(mix, (lambda g, a, s: 2.0 * g, adjoint_never_called), argnums=(0, 1))
    a = CoDual(np.ones(3), np.zeros(3))
    y, pb = decl.rrule(CoDual(mix, None), a, CoDual(1.5, None))
    y.dx[...] = 1.0
    assert pb(NoRData()) == (NoRData(), NoRData(), NoRData())
    np.testing.assert_array_equal(a.dx, 2.0)
    out, _ = decl.rrule(CoDual(mix, None), CoDual(np.ones(3), None), CoDual(1.5, None))
    assert out.dx is None


@pytest.mark.parametrize("layout", [0, 1, 2, 3])
def test_engine_repeated_calls_and_a_view_written_in_place(
    declared_here: dict[str, LinearFunction], layout: int
) -> None:
    """v = first_rows(x) aliases x; `v *= 3` changes x; the gradient of Σ x² afterwards
    sees it (18x on the first rows, 2x elsewhere) only if v's fdata is a view of x̄."""

    def f(x: np.ndarray) -> Any:
        v = first_rows(x, 2)
        v *= 3.0
        return np.sum(half_prefix_sums(x) * 0.0 + x * x)

    vg = rulekit.value_and_grad(f)
    for call in range(3):  # the first and later calls of one object, every layout
        x = _layouts((4, 3), np.float64, seed=call)[layout]
        x0 = x.copy()
        value, grad = vg(x)
        want = np.where(np.arange(4)[:, None] < 2, 18.0, 2.0) * x0
        np.testing.assert_allclose(grad, want, rtol=1e-12)
        after = x0.copy()
        after[:2] *= 3.0
        np.testing.assert_allclose(value, np.sum(after**2), rtol=1e-12)


def test_view_output_shares_fdata(declared_here: dict[str, LinearFunction]) -> None:
    x = CoDual(np.arange(6.0).reshape(3, 2), np.zeros((3, 2)))
    y, pb = declared_here["rows"].rrule(CoDual(first_rows, None), x, CoDual(2, None))
    assert np.shares_memory(y.dx, x.dx)
    y.dx[...] += 1.0  # what a later pullback does: it lands in x̄
    pb(NoRData())
    np.testing.assert_array_equal(x.dx, [[1, 1], [1, 1], [0, 0]])


def test_a_view_the_fdata_cannot_follow_is_refused(
    declared_here: dict[str, LinearFunction],
) -> None:
    decl = linear(np.ravel, lambda g, x: g.reshape(x.shape), view=True)
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ViewMismatchError, match="strides"):  # C primal, F fdata
        decl.rrule(CoDual(np.ravel, None), CoDual(x, np.zeros((3, 2)).T))


def test_declaration_errors() -> None:
    with pytest.raises(rulekit.RuleRegistrationError, match="one adjoint per"):
        linear(mix, lambda g, a, s: g, argnums=(0, 1))
    with pytest.raises(rulekit.RuleRegistrationError, match="view"):
        linear(mix, (lambda g, a, s: g, lambda g, a, s: g), argnums=(0, 1), view=True)


def test_a_traced_keyword_is_refused(declared_here: dict[str, LinearFunction]) -> None:
    decl = declared_here["mix"]
    with pytest.raises(NotImplementedError, match="keyword"):
        decl.rrule(CoDual(mix, None), CoDual(np.ones(2), None), s=CoDual(1.0, rulekit.NoFData()))


# -- forward rules: against finite differences and against the reverse rule -----------------


def _axpy(x: Any, t: Any, h: float) -> Any:
    """x + h·t for arrays, scalars and lists/tuples of them; an array result is laid out
    like x (`ravel(order='K')` reads memory order: a perturbed x must keep x's strides)."""
    if isinstance(x, (list, tuple)):
        return type(x)(_axpy(a, b, h) for a, b in zip(x, t, strict=True))
    if isinstance(x, np.ndarray) and x.dtype.kind in "fc":
        out = zero_fdata(x)
        out[...] = x + h * t
        return out
    return x + h * t


def _close(a: Any, b: Any, rtol: float) -> bool:
    if isinstance(a, (list, tuple)):
        return all(_close(p, q, rtol) for p, q in zip(a, b, strict=True))
    a, b = np.asarray(a), np.asarray(b)
    scale = max(1.0, float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)))
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= rtol * scale))


def _rtol(*values: Any) -> float:
    """Rounding-level tolerance: single precision if any input or output is single."""
    flat: list[Any] = []
    for v in values:
        for a in v if isinstance(v, (list, tuple)) else [v]:
            flat.extend(a if isinstance(a, (list, tuple)) else [a])
    single = any(np.asarray(a).dtype in (np.float32, np.complex64) for a in flat)
    return 2e-5 if single else 1e-11


def check_forward_rule(decl: LinearFunction, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The derived tangent map: against central differences (exact for linear maps: the
    step is 1), and ⟨ȳ, ẏ⟩ from the forward rule = ⟨x̄, ẋ⟩ from the reverse rule."""
    rng = np.random.default_rng(0)
    nums = [i for i in decl.argnums if i < len(args)]
    x_dots = [randn_tangent(args[i], rng) for i in nums]
    y, y_dot = decl.jvp(args, x_dots, **kwargs)
    if not (isinstance(y, (list, tuple)) or np.asarray(y).dtype.kind in "fc"):
        return  # (an integer dtype=: no derivative)
    plus, minus = list(args), list(args)
    for i, t in zip(nums, x_dots, strict=True):
        plus[i], minus[i] = _axpy(args[i], t, 1.0), _axpy(args[i], t, -1.0)
    fd = _axpy(decl.fn(*plus, **kwargs), decl.fn(*minus, **kwargs), -1.0)
    fd = _axpy(fd, fd, -0.5)  # (y₊ − y₋)/2
    rtol = _rtol(args, y)
    assert _close(y_dot, fd, rtol), f"{decl}: JVP {y_dot} != finite differences {fd}"

    # the reverse rule, on zero fdata: x̄ = Lᴴ ȳ
    coduals = [CoDual(a, zero_fdata(a) if i in nums else None) for i, a in enumerate(args)]
    out, pb = decl.rrule(CoDual(decl.fn, None), *coduals, **kwargs)
    y_bar = randn_tangent(out.x, rng)
    fpart, rpart = split_tangent(out.x, y_bar)
    if isinstance(out.dx, np.ndarray):
        out.dx[...] += fpart
    elif isinstance(out.dx, (list, tuple)):
        for d, p in zip(out.dx, fpart, strict=True):
            d[...] += p
    rdata = pb(rpart)
    x_bars = [join_tangent(args[i], coduals[i].dx, rdata[1 + i]) for i in nums]
    lhs = inner(y_bar, y_dot)
    rhs = sum(inner(b, t) for b, t in zip(x_bars, x_dots, strict=True))
    assert abs(lhs - rhs) <= rtol * max(1.0, abs(lhs)), f"{decl}: {lhs} != {rhs}"


def test_forward_rules_of_the_declarations_here(
    declared_here: dict[str, LinearFunction],
) -> None:
    for dtype in DTYPES:
        for x in _layouts((3, 4), dtype, seed=5):
            check_forward_rule(declared_here["prefix"], (x,), {})
            check_forward_rule(declared_here["mix"], (x, 0.5), {})
            check_forward_rule(declared_here["rows"], (x, 2), {})


def _bundled_cases() -> list[Any]:
    registry.load_all("rules")  # (at collection: the bundled declarations, lazily loaded)
    cases = []
    for decl in declarations():
        regs = [r for r in registry.entries(decl.module) if r.f is decl.fn and r.examples]
        for reg in regs:
            ex = reg.examples() if callable(reg.examples) else reg.examples
            for k, e in enumerate(ex):
                cases.append(pytest.param(decl, e.args, e.kwargs, id=f"{decl.name}#{k}"))
    assert cases, "no bundled linear declaration with examples: the test would check nothing"
    return cases


@pytest.mark.parametrize(("decl", "args", "kwargs"), _bundled_cases())
def test_forward_rules_of_the_bundled_declarations(
    decl: LinearFunction, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    check_forward_rule(decl, args, kwargs)
