"""The kit's forward-rule and vjp-rule checks (`check_frule`, `check_vjp_rule`, the runner):
they pass correct rules and catch planted bugs, each naming the check that failed."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from typing import Any

import numpy as np
import pytest

import rulekit
import rulekit._cli
from rulekit import Array, CoDual, Dual, NoRData, example, zero_fdata
from rulekit._registry import forward_registry, registry, vjp_registry
from testutils import RuleCheckError, check_frule, check_vjp_rule
from testutils._runner import check_registration

X = np.random.default_rng(0).normal(size=(3, 4))


@pytest.fixture(autouse=True)
def own_registrations() -> Iterator[None]:
    """Every rule (reverse, forward, vjp) a test registers is removed after it."""
    registry.load_all()
    tables = (registry, forward_registry, vjp_registry)
    before = [set(t.entries()) for t in tables]
    yield
    for table, old in zip(tables, before, strict=True):
        for reg in table.entries():
            if reg not in old:
                table.remove(reg)


# -- the functions: primitives, so that the rules registered here are the ones that run ----


def _cube(x: Any) -> Any:
    return x**3


def _scale_(x: np.ndarray, a: float) -> None:
    x *= a


def _mul(x: Any, y: Any) -> Any:
    return x * y


def _register_rrule(f: Any, deriv: Callable[[Any], Any], slip: float = 1.0) -> None:
    """A correct reverse rule for elementwise y = f(x) with f′ = deriv (×`slip`: wrong)."""

    @rulekit.rrule.register(f, Array[np.floating])
    def rule(fc: CoDual, x: CoDual) -> tuple[CoDual, Any]:
        value = f.fn(x.x) if hasattr(f, "fn") else f(x.x)
        y = CoDual(value, zero_fdata(value))

        def pullback(dy: Any) -> tuple[Any, Any]:
            ybar = y.dx if isinstance(y.dx, np.ndarray) else dy  # (0-d x: a scalar output)
            if x.dx is not None:
                x.dx += slip * deriv(x.x) * ybar
            return NoRData(), NoRData()

        return y, pullback


def _cube_frule(f: Dual, x: Dual) -> Dual:
    """ẏ = 3x²·ẋ."""
    return Dual(x.x**3, None if x.dx is None else 3 * x.x**2 * x.dx)


@pytest.fixture
def cube() -> Any:
    f = rulekit.primitive(_cube)
    _register_rrule(f, lambda x: 3 * x**2)
    return f


def _frule(f: Any, rule: Any) -> Any:
    forward_registry.add("frule", f, (Array[np.floating],), rule, module=__name__)
    return f


# -- forward rules ---------------------------------------------------------------------


def test_a_correct_frule_passes_in_every_layout_and_dtype(cube: Any) -> None:
    _frule(cube, _cube_frule)
    for x in (X, X.astype(np.float32), X[::2], np.asfortranarray(X), np.array(0.7)):
        report = check_frule(cube, x)
        assert report.kind == "frule"
        assert set(report.checks) >= {
            "interface",
            "registered",
            "mutation",
            "correctness",
            "consistency",
            "statefulness",
        }
        assert report.checks["consistency"] == "pass", report.checks
    assert check_frule(cube, X).layouts == ["F", "strided", "negative"]


def test_a_wrong_tangent_fails_correctness(cube: Any) -> None:
    _frule(cube, lambda f, x: Dual(x.x**3, 2 * x.x**2 * x.dx))
    with pytest.raises(RuleCheckError) as e:
        check_frule(cube, X)
    assert e.value.check == "correctness" and e.value.argument == "argument 0"
    assert "wrong tangent" in str(e.value) and "finite differences" in str(e.value)


def test_a_tangent_wrong_only_in_other_layouts_fails(cube: Any) -> None:
    def rule(f: Dual, x: Dual) -> Dual:
        t = 3 * x.x**2 * x.dx
        if not x.x.flags.c_contiguous:  # (a kernel that assumes C order: wrong elsewhere)
            t = t.ravel(order="K").reshape(t.shape)[::-1]
        return Dual(x.x**3, t)

    _frule(cube, rule)
    with pytest.raises(RuleCheckError) as e:
        check_frule(cube, X)
    assert e.value.check == "correctness" and "[layout: " in str(e.value)


def test_an_frule_that_mutates_its_input_fails(cube: Any) -> None:
    def rule(f: Dual, x: Dual) -> Dual:
        y = x.x**3
        x.x[...] = 0.0  # (scribbles over its argument)
        return Dual(y, None if x.dx is None else 3 * y / 1.0)

    _frule(cube, rule)
    with pytest.raises(RuleCheckError) as e:
        check_frule(cube, X)
    assert e.value.check == "mutation" and e.value.argument == "argument 0"

    def writes_tangent(f: Dual, x: Dual) -> Dual:
        if x.dx is None:
            return Dual(x.x**3, None)
        x.dx *= 3 * x.x**2  # (the right tangent, computed in the argument's tangent)
        return Dual(x.x**3, x.dx)

    _frule(cube, writes_tangent)
    with pytest.raises(RuleCheckError) as e:
        check_frule(cube, X)
    assert e.value.check == "mutation" and "tangent" in str(e.value)


def test_a_mutating_function_updates_primal_and_tangent_in_place() -> None:
    scale_ = rulekit.primitive(_scale_)

    def rule(f: Dual, x: Dual, a: Dual, slip: float = 1.0) -> Dual:
        if x.dx is None and a.dx is not None:
            raise rulekit.TracingError("scale_: a tangent written into a constant")
        if x.dx is not None:  # ẋ' = a·ẋ + ȧ·x (before the write)
            t = a.x * x.dx + (0.0 if a.dx is None else a.dx * x.x)
            x.dx[...] = slip * t
        x.x *= a.x
        return Dual(None, None)

    forward_registry.add("frule", scale_, (Array[np.floating], float), rule, module=__name__)
    report = check_frule(scale_, X.copy(), 1.5, rrule=False)
    assert report.refused  # (a alone: written into the constant x, refused)
    assert report.checks["consistency"].startswith("n/a")

    forward_registry.add(
        "frule",
        scale_,
        (Array[np.floating], float),
        lambda f, x, a: rule(f, x, a, slip=1.1),
        module=__name__,
    )
    with pytest.raises(RuleCheckError) as e:
        check_frule(scale_, X.copy(), 1.5, rrule=False)
    assert e.value.check == "mutation" and "derivative of its value after the call" in str(e.value)


def test_an_frule_inconsistent_with_the_reverse_rule_fails_consistency() -> None:
    f = rulekit.primitive(_cube)
    _register_rrule(f, lambda x: 3 * x**2, slip=1.5)  # (the reverse rule is the wrong one)
    _frule(f, _cube_frule)
    with pytest.raises(RuleCheckError) as e:
        check_frule(f, X)
    assert e.value.check == "consistency" and "reverse rule" in str(e.value)
    assert check_frule(f, X, rrule=False).checks["consistency"].startswith("n/a")


def test_a_stale_cache_fails_statefulness(cube: Any) -> None:
    cache: dict[Any, Any] = {}

    def rule(f: Dual, x: Dual) -> Dual:
        slope = cache.setdefault(np.shape(x.x), 3 * x.x**2)  # (kept per shape: stale later)
        return Dual(x.x**3, None if x.dx is None else slope * x.dx)

    _frule(cube, rule)
    with pytest.raises(RuleCheckError) as e:
        check_frule(cube, X)
    assert e.value.check == "statefulness" and "other values" in str(e.value)


def test_wrong_output_tangent_type_fails_interface(cube: Any) -> None:
    _frule(cube, lambda f, x: Dual(x.x**3, (3 * x.x**2 * x.dx).astype(np.float32)))
    with pytest.raises(RuleCheckError) as e:
        check_frule(cube, X)
    assert e.value.check == "interface" and "dtype float64" in str(e.value)
    _frule(cube, lambda f, x: Dual(x.x**3, None))
    with pytest.raises(RuleCheckError) as e:
        check_frule(cube, X)
    assert e.value.check == "interface" and "tangent is None" in str(e.value)


def test_two_arguments_each_alone_and_together() -> None:
    mul = rulekit.primitive(_mul)

    def rule(f: Dual, x: Dual, y: Dual, slip: float = 1.0) -> Dual:
        t = None
        if x.dx is not None:
            t = x.dx * y.x
        if y.dx is not None:
            t = (0 if t is None else t) + slip * x.x * y.dx
        return Dual(x.x * y.x, t)

    pats = (Array[np.floating], Array[np.floating])
    forward_registry.add("frule", mul, pats, rule, module=__name__)
    check_frule(mul, X, X[::-1].copy())
    forward_registry.add("frule", mul, pats, lambda f, x, y: rule(f, x, y, 0.5), module=__name__)
    with pytest.raises(RuleCheckError) as e:
        check_frule(mul, X, X[::-1].copy())
    assert e.value.check == "correctness" and e.value.argument == "argument 1"


# -- vjp rules -------------------------------------------------------------------------


def _cube_vjp(slip: float = 1.0) -> Any:
    def rule(active: tuple[bool, ...], x: Any) -> tuple[Any, Any]:
        return x**3, lambda g: (slip * 3 * x**2 * g,)

    return rule


def test_a_correct_vjp_rule_passes_and_a_wrong_cotangent_fails(cube: Any) -> None:
    vjp_registry.add("vjp", cube, (Array[np.floating],), _cube_vjp(), module=__name__)
    for x in (X, X.astype(np.float32), np.asfortranarray(X), np.array(0.7)):
        report = check_vjp_rule(cube, x)
        assert report.kind == "vjp" and report.checks["correctness"] == "pass"
    vjp_registry.add("vjp", cube, (Array[np.floating],), _cube_vjp(1.01), module=__name__)
    with pytest.raises(RuleCheckError) as e:
        check_vjp_rule(cube, X)
    assert e.value.check == "correctness" and "reverse rule" in str(e.value)
    # Without a reverse rule to compare with: finite differences.
    assert check_vjp_rule(cube, X, rrule=False, rule=_cube_vjp()).checks["correctness"] == "pass"
    with pytest.raises(RuleCheckError) as e:
        check_vjp_rule(cube, X, rrule=False, rule=_cube_vjp(1.01))
    assert e.value.check == "correctness" and "finite differences" in str(e.value)


def test_a_vjp_rule_that_writes_or_keeps_state_fails(cube: Any) -> None:
    def writes(active: tuple[bool, ...], x: Any) -> tuple[Any, Any]:
        def pullback(g: Any) -> tuple[Any, ...]:
            g *= 3 * x**2  # (into the ȳ it was given)
            return (g,)

        return x**3, pullback

    with pytest.raises(RuleCheckError) as e:
        check_vjp_rule(cube, X, rule=writes)
    assert e.value.check == "mutation"

    cache: dict[Any, Any] = {}

    def stale(active: tuple[bool, ...], x: Any) -> tuple[Any, Any]:
        d = cache.setdefault(x.shape, 3 * x**2)
        return x**3, lambda g: (d * g,)

    with pytest.raises(RuleCheckError) as e:
        check_vjp_rule(cube, X, rule=stale)
    assert e.value.check == "statefulness"

    def wrong_shape(active: tuple[bool, ...], x: Any) -> tuple[Any, Any]:
        return x**3, lambda g: (np.sum(3 * x**2 * g),)

    with pytest.raises(RuleCheckError) as e:
        check_vjp_rule(cube, X, rule=wrong_shape)
    assert e.value.check == "interface" and "shape" in str(e.value)


# -- the runner and `rulekit check` ------------------------------------------------------


def test_a_crashing_frule_is_reported_not_raised(cube: Any) -> None:
    def boom(f: Dual, x: Dual) -> Dual:
        raise KeyError("not today")

    reg = forward_registry.add(
        "frule", cube, (Array[np.floating],), boom, module=__name__, examples=[example(X)]
    )
    result = check_registration(reg)
    assert result.kind == "forward" and result.status == "fail"
    assert result.check == "interface" and "KeyError" in result.message


def test_rulekit_check_counts_every_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    from testutils import _report

    f = rulekit.primitive(_cube)
    _register_rrule(f, lambda x: 3 * x**2)
    for reg in registry.entries():
        if reg.f is f:
            reg.examples = [example(X)]
    forward_registry.add(
        "frule", f, (Array[np.floating],), _cube_frule, module=__name__, examples=[example(X)]
    )
    vjp_registry.add(
        "vjp", f, (Array[np.floating],), _cube_vjp(2.0), module=__name__, examples=[example(X)]
    )

    def fake_load(name: str) -> Any:
        from testutils._packages import RulePackage

        mine = [r for r in registry.entries() if r.f is f]
        fwd = [r for r in forward_registry.entries() if r.f is f]
        vjp = [r for r in vjp_registry.entries() if r.f is f]
        return RulePackage(name, name, True, mine, {}, fwd, vjp)

    monkeypatch.setattr(_report, "load", fake_load)
    out = io.StringIO()
    with redirect_stdout(out):
        code = rulekit._cli.main(["check", "tkfwd"])
    lines = out.getvalue().splitlines()
    assert code == 1
    assert lines[0] == "checking 1 rule of tkfwd" and lines[1] == "  and 1 forward rule, 1 vjp rule"
    assert any(line.startswith("FAIL") and "cot" not in line for line in lines)
    assert "1 forward rule checked in" in out.getvalue() and "1 passed, 0 failed" in lines[-3]
    assert lines[-2].startswith("1 vjp rule checked in") and "0 passed, 1 failed" in lines[-2]
    assert lines[-1].startswith("1 rule checked in") and "1 passed, 0 failed" in lines[-1]
    with redirect_stdout(io.StringIO()):
        assert rulekit._cli.main(["check", "tkfwd", "--kind", "forward"]) == 0
