"""Forward rules and differentiable pullbacks of the ufunc methods outer, accumulate and reduce
(rules/numpy/ufuncs/forward_methods.py).

For each method, over C/F/negative-stride/strided layouts and float32/float64 (complex where
the ufunc is holomorphic): the forward rule's tangent against central differences, the
pullback against the forward rule (⟨ȳ, J ẋ⟩ = ⟨x̄, ẋ⟩) and against the reverse rule, and
`rulekit.hessian` of Σ method(x)² in the three modes against central differences of the
reverse engine's gradient `rulekit.grad`. Then the values (bit for bit numpy's, in dtype and
type), 0-d and empty inputs, numpy's errors, and the conventions the reverse rules fix: ties
of a running maximum, a logaddexp.reduce lane of ±inf, Python numbers and lists in outer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from forward_rules import check_forward, check_pullback, check_twice, fd_hessian, jvp, vjp_of

import rulekit
from testutils._layouts import relayout

MODES = ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward")
LAYOUTS = ("C", "F", "negative", "strided")

OUTER = [np.add, np.subtract, np.multiply, np.divide, np.power, np.float_power, np.maximum,
         np.minimum, np.fmax, np.fmin, np.hypot, np.arctan2, np.logaddexp,
         np.logaddexp2]  # fmt: skip
#: the ufuncs whose own rules differentiate complex operands (their outer: complex too)
HOLOMORPHIC = [np.add, np.subtract, np.multiply, np.divide, np.power, np.float_power]
ACCUMULATE = [np.add, np.multiply, np.maximum, np.minimum, np.subtract, np.divide, np.power,
              np.float_power, np.fmax, np.fmin, np.hypot, np.copysign, np.fmod, np.remainder,
              np.heaviside, np.arctan2, np.logaddexp, np.logaddexp2]  # fmt: skip
REDUCE = [np.logaddexp, np.logaddexp2, np.subtract, np.divide, np.float_power, np.fmax, np.fmin,
          np.hypot, np.copysign, np.fmod, np.remainder, np.heaviside]  # fmt: skip

#: (id, method, extra positional arguments, keywords): every method, with its options
CASES: list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]] = [
    *[(f"{u.__name__}.accumulate", u.accumulate, (), {}) for u in ACCUMULATE],
    *[(f"{u.__name__}.accumulate-axis1", u.accumulate, (1,), {}) for u in ACCUMULATE],
    *[(f"{u.__name__}.reduce", u.reduce, (), {}) for u in REDUCE],
    *[
        (f"{u.__name__}.reduce-keepdims", u.reduce, (), {"axis": -1, "keepdims": True})
        for u in REDUCE
    ],
    ("logaddexp.reduce-all", np.logaddexp.reduce, (), {"axis": None}),
    ("logaddexp2.reduce-tuple", np.logaddexp2.reduce, ((0, 1),), {"keepdims": True}),
    ("add.accumulate-dtype", np.add.accumulate, (1, np.float64), {}),
    ("multiply.accumulate-dtype", np.multiply.accumulate, (), {"axis": -1, "dtype": np.float64}),
]
#: a representative of each kind of rule (traced, hand-written, fold), for every layout
REPRESENTATIVE = ["add.accumulate", "multiply.accumulate-axis1", "maximum.accumulate",
                  "minimum.accumulate-axis1", "logaddexp.reduce-keepdims", "logaddexp2.reduce",
                  "subtract.reduce", "divide.accumulate-axis1", "hypot.reduce-keepdims",
                  "power.accumulate", "fmod.accumulate", "fmax.reduce"]  # fmt: skip
BY_ID = {c[0]: c for c in CASES}


def _x(shape: tuple[int, ...], dt: Any = np.float64, layout: str = "C", seed: int = 0) -> Any:
    """Distinct values in [0.5, 1.5) (positive bases for power; no ties, no jumps of fmod
    within a difference step), in `layout`; complex: an imaginary part in [0.1, 0.4)."""
    rng = np.random.default_rng(seed)
    x = rng.permutation(int(np.prod(shape))).reshape(shape) / max(int(np.prod(shape)), 1)
    x = x + 0.5 + 0.01 * rng.uniform(size=shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.uniform(0.1, 0.4, size=shape)
    return relayout(np.asarray(x, dtype=dt), layout)


def _tangent(x: Any, seed: int = 1) -> Any:
    rng = np.random.default_rng(seed)
    t = rng.normal(size=np.shape(x))
    if np.iscomplexobj(x):
        t = t + 1j * rng.normal(size=np.shape(x))
    return np.asarray(t, dtype=np.result_type(x))


def _tols(dt: Any) -> dict[str, float]:
    """Tolerances of a tangent against differences: single precision is rounded at ~1e-7."""
    single = np.dtype(dt) in (np.float32, np.complex64)
    return {"rtol": 2e-3, "atol": 2e-4} if single else {"rtol": 1e-6, "atol": 1e-8}


def _check_call(fn: Any, args: tuple[Any, ...], kw: dict[str, Any], dt: Any) -> None:
    """jvp vs central differences; pullback vs the jvp and vs the reverse rule."""
    dots = (_tangent(args[0]),) + (None,) * (len(args) - 1)
    tol = _tols(dt)
    t = check_forward(fn, args, dots, kw, rtol=tol["rtol"], atol=tol["atol"],
                      h=1e-6 if tol["rtol"] < 1e-4 else 1e-4)  # fmt: skip
    ybar = _tangent(t, seed=2) if np.ndim(t) else np.result_type(t).type(0.7)
    check_pullback(fn, args, dots, ybar, kw, rtol=max(tol["rtol"], 1e-6))


# -- first order: jvp and pullback --------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_jvp_and_pullback(case: Any, dt: Any) -> None:
    _, fn, extra, kw = case
    _check_call(fn, (_x((4, 3), dt), *extra), kw, dt)


@pytest.mark.parametrize("name", REPRESENTATIVE)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_jvp_and_pullback_layouts(name: str, layout: str) -> None:
    _, fn, extra, kw = BY_ID[name]
    _check_call(fn, (_x((5, 4), layout=layout, seed=3), *extra), kw, np.float64)


@pytest.mark.parametrize("u", OUTER, ids=lambda u: u.__name__)
@pytest.mark.parametrize("dt", [np.float64, np.float32])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_outer(u: Any, dt: Any, layout: str) -> None:
    a, b = _x((3,), dt, layout, seed=4), _x((2, 2), dt, layout, seed=5)
    tol = _tols(dt)
    h = 1e-6 if tol["rtol"] < 1e-4 else 1e-4
    for args in ((a, b), (b, a), (b.T, b)):
        dots = (_tangent(args[0]), _tangent(args[1], seed=3))
        t = check_forward(u.outer, args, dots, rtol=tol["rtol"], atol=tol["atol"], h=h)
        check_forward(u.outer, args, (None, dots[1]), rtol=tol["rtol"], atol=tol["atol"], h=h)
        check_pullback(u.outer, args, dots, _tangent(t, seed=6), rtol=max(tol["rtol"], 1e-6))


@pytest.mark.parametrize("u", HOLOMORPHIC, ids=lambda u: u.__name__)
@pytest.mark.parametrize("dt", [np.complex128, np.complex64])
def test_outer_complex(u: Any, dt: Any) -> None:
    a, b = _x((3,), dt, "F", seed=7), _x((2, 2), dt, "negative", seed=8)
    dots = (_tangent(a), _tangent(b))
    tol = _tols(dt)
    t = check_forward(u.outer, (a, b), dots, rtol=tol["rtol"], atol=tol["atol"],
                      h=1e-6 if tol["rtol"] < 1e-4 else 1e-4)  # fmt: skip
    check_pullback(u.outer, (a, b), dots, _tangent(t, seed=9), rtol=max(tol["rtol"], 1e-6))


@pytest.mark.parametrize("fn", [np.add.accumulate, np.multiply.accumulate])
@pytest.mark.parametrize("dt", [np.complex128, np.complex64])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cumulative_complex(fn: Any, dt: Any, layout: str) -> None:
    _check_call(fn, (_x((4, 3), dt, layout), 1), {}, dt)


def test_outer_numbers_and_lists() -> None:
    """A Python number is a float64 operand (numpy's outer converts it: not a weak scalar); a
    list is an array, its elements differentiated (called through the rules: numpy converts
    a list holding traced values before it could dispatch the call)."""
    b = _x((2, 2), np.float32)
    cases = [((0.75, b), (0.5, _tangent(b))), ((b, 1.25), (_tangent(b), -1.0)),
             (([0.5, 1.5], b), ([1.0, -2.0], None)),
             (([[0.5], [1.5]], b), ([[1.0], [-2.0]], _tangent(b)))]  # fmt: skip
    for u in (np.multiply, np.power, np.arctan2):
        for args, dots in cases:
            y, t = jvp(u.outer, args, dots)
            want = u.outer(*args)
            assert y.dtype == want.dtype == t.dtype == np.float64
            np.testing.assert_array_equal(y, want)
            h = 1e-6
            at = [[np.asarray(a, np.float64) + s * np.asarray(0.0 if d is None else d)
                   for a, d in zip(args, dots, strict=True)] for s in (h, -h)]  # fmt: skip
            fd = (u.outer(*at[0]) - u.outer(*at[1])) / (2 * h)
            np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-8)
            if isinstance(args[0], list):
                active = tuple(d is not None for d in dots)
                _, pb = vjp_of(u.outer, *args)(active, *args)
                ybar = _tangent(y, seed=4)
                cts = pb(ybar)
                lhs = float(np.sum(ybar * t))
                rhs = sum(float(np.sum(np.asarray(c) * np.asarray(d)))
                          for c, d in zip(cts, dots, strict=True) if d is not None)  # fmt: skip
                assert lhs == pytest.approx(rhs, rel=1e-6)
                assert np.shape(cts[0]) == np.shape(args[0])


# -- second order: hessian in every mode --------------------------------------------------------


def _objective(fn: Any, extra: tuple[Any, ...], kw: dict[str, Any], cplx: bool = False) -> Any:
    def f(v: Any) -> Any:
        y = fn(v * (1.0 + 0.5j) if cplx else v, *extra, **kw)
        y2 = np.abs(y) ** 2 if cplx else y**2
        return np.sum(y2)  # (of a 0-d value too)

    return f


def _check_hessian(f: Any, x: np.ndarray, mode: str) -> None:
    single = x.dtype == np.float32
    ref = fd_hessian(f, x, 1e-5)
    H = rulekit.hessian(f, mode=mode)(x)
    assert np.shape(H) == x.shape + x.shape
    assert np.asarray(H).dtype == x.dtype
    scale = 1 + np.max(np.abs(ref), initial=0.0)
    np.testing.assert_allclose(H, ref, rtol=1e-3 if single else 1e-6,
                               atol=(1e-3 if single else 1e-6) * scale)  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("mode", MODES)
def test_hessian(case: Any, mode: str) -> None:
    _, fn, extra, kw = case
    _check_hessian(_objective(fn, extra, kw), _x((3, 3), seed=10), mode)


HESSIAN_LAYOUTS = [
    (name, mode, layout, dt)
    for name in REPRESENTATIVE
    for mode in MODES
    for layout in ("F", "negative")
    for dt in (np.float64, np.float32)
]


@pytest.mark.parametrize(("name", "mode", "layout", "dt"), HESSIAN_LAYOUTS,
                         ids=[f"{n}-{m}-{lay}-{np.dtype(d).name}"
                              for n, m, lay, d in HESSIAN_LAYOUTS])  # fmt: skip
def test_hessian_layouts(name: str, mode: str, layout: str, dt: Any) -> None:
    _, fn, extra, kw = BY_ID[name]
    _check_hessian(_objective(fn, extra, kw), _x((3, 2), dt, layout, seed=11), mode)


@pytest.mark.parametrize("u", OUTER, ids=lambda u: u.__name__)
@pytest.mark.parametrize("mode", MODES)
def test_hessian_outer(u: Any, mode: str) -> None:
    def f(v: Any) -> Any:
        return np.sum(u.outer(v[0], v[1:] * 1.25) ** 2) + np.sum(u.outer(1.5, v[2]) ** 2)

    _check_hessian(f, _x((3, 2), layout="negative", seed=12), mode)


@pytest.mark.parametrize("fn", [np.add.outer, np.multiply.accumulate, np.divide.outer,
                                np.power.outer, np.add.accumulate])  # fmt: skip
@pytest.mark.parametrize("mode", MODES)
def test_hessian_complex(fn: Any, mode: str) -> None:
    """Complex values inside a real function of a real x: the rules' complex paths."""
    if fn.__name__ == "outer":
        f = _objective(lambda z: fn(z[0], z[1:]), (), {}, cplx=True)
    else:
        f = _objective(fn, (1,), {}, cplx=True)
    _check_hessian(f, _x((3, 2), seed=13), mode)


@pytest.mark.parametrize("fn", [np.divide.reduce, np.hypot.reduce, np.logaddexp.reduce])
@pytest.mark.parametrize("mode", MODES)
def test_hessian_0d(fn: Any, mode: str) -> None:
    """numpy reduces a 0-d x to itself: ∂y/∂x = 1."""
    x = np.array(0.7)
    f = _objective(fn, (), {})
    assert rulekit.hessian(f, mode=mode)(x) == pytest.approx(2.0)


@pytest.mark.parametrize("name", ["maximum.accumulate", "logaddexp.reduce-keepdims",
                                  "fmod.reduce", "float_power.accumulate-axis1",
                                  "add.accumulate", "subtract.outer"])  # fmt: skip
def test_rule_bodies_differentiable(name: str) -> None:
    """Both rule bodies run under the reverse engine and are differentiated (check_twice)."""
    if name == "subtract.outer":
        a, b = _x((3,), seed=14), _x((2,), seed=15)
        check_twice(np.subtract.outer, (a, b), 0, _tangent(np.zeros((3, 2))))
        return
    _, fn, extra, kw = BY_ID[name]
    x = _x((4, 3), seed=16)
    y = fn(x, *extra, **kw)
    check_twice(fn, (x, *extra), 0, _tangent(y), kw)


# -- values, 0-d and empty inputs, errors ---------------------------------------------------------


def _rules_outputs(fn: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> list[tuple[Any, Any]]:
    """(y, ẏ or x̄) from jvp and from vjp (the two rules)."""
    dots = tuple(_tangent(a) if isinstance(a, np.ndarray) else None for a in args)
    y1, t = rulekit.jvp(lambda *a: fn(*a, **kw), args, dots)
    y2, vjp_fn = rulekit.vjp(lambda *a: fn(*a, **kw), *args)
    ybar = np.ones_like(y2) if np.ndim(y2) else np.asarray(y2).dtype.type(1)
    return [(y1, t), (y2, vjp_fn(ybar)[0])]


@pytest.mark.parametrize("dt", [np.float64, np.float32])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_values_are_numpys(dt: Any, layout: str) -> None:
    """Bit for bit numpy's value, dtype and type, on lanes long enough for numpy's own
    loops (pairwise, SIMD) to show; power/arctan2.accumulate included."""
    x = np.random.default_rng(17).uniform(0.5, 1.5, (11, 9, 5)).astype(dt)
    x = relayout(x, layout)
    calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []
    for ax in (0, 1, -1):
        calls += [(u.accumulate, (x, ax), {}) for u in ACCUMULATE]
        calls += [(u.reduce, (x,), {"axis": ax}) for u in REDUCE]
    calls += [(u.outer, (x[:3, 0], x[0, :4]), {}) for u in OUTER]
    calls += [(np.logaddexp.reduce, (x[:, 0, 0],), {}), (np.hypot.reduce, (x[:, 0, 0],), {})]
    for fn, args, kw in calls:
        want = fn(*args, **kw)
        (y, t), (y2, xbar) = _rules_outputs(fn, args, kw)
        for v in (y, y2):
            assert type(v) is type(want) and v.dtype == want.dtype, (fn, v.dtype, want.dtype)
            np.testing.assert_array_equal(v, want)
        assert t.dtype == want.dtype and t.shape == want.shape
        assert xbar.dtype == args[0].dtype and xbar.shape == args[0].shape


@pytest.mark.parametrize("fn", [np.add.accumulate, np.maximum.accumulate, np.fmod.accumulate,
                                np.hypot.reduce, np.logaddexp.reduce])  # fmt: skip
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0,)])
def test_empty(fn: Any, shape: tuple[int, ...]) -> None:
    x = np.ones(shape)
    want = fn(x)
    (y, t), (y2, xbar) = _rules_outputs(fn, (x,), {})
    for v in (y, y2):
        np.testing.assert_array_equal(v, want)
        assert v.dtype == want.dtype
    assert t.shape == want.shape and xbar.shape == shape
    np.testing.assert_array_equal(t, 0.0)
    np.testing.assert_array_equal(xbar, 0.0)
    for mode in MODES:
        H = rulekit.hessian(_objective(fn, (), {}), mode=mode)(x)
        assert H.shape == shape + shape


@pytest.mark.parametrize("fn", [np.subtract.reduce, np.fmax.reduce, np.logaddexp2.reduce,
                                np.heaviside.reduce])  # fmt: skip
@pytest.mark.parametrize("kw", [{}, {"keepdims": True}, {"axis": -1}])
def test_0d_reduce(fn: Any, kw: dict[str, Any]) -> None:
    """numpy reduces a 0-d x to itself: ẏ = ẋ, x̄ = ȳ."""
    x = np.array(-0.3)
    want = fn(x, **kw)
    for y, _ in _rules_outputs(fn, (x,), kw):
        assert y == want and type(y) is type(want)
    y, t = rulekit.jvp(lambda v: fn(v, **kw), (x,), (np.array(2.5),))
    assert t == 2.5
    _, vjp_fn = rulekit.vjp(lambda v: fn(v, **kw), x)
    assert vjp_fn(np.float64(1.5))[0] == 1.5


@pytest.mark.parametrize("call", [
    lambda v: np.add.accumulate(v[0, 0]),  # a scalar: numpy's TypeError
    lambda v: np.maximum.accumulate(v[0, 0]),
    lambda v: np.divide.accumulate(v[0, 0]),
    lambda v: np.multiply.accumulate(v, axis=None),  # several axes: numpy's ValueError
    lambda v: np.minimum.accumulate(v, axis=None),
    lambda v: np.subtract.reduce(v[:0]),  # no identity: numpy's ValueError
])  # fmt: skip
def test_numpys_errors(call: Any) -> None:
    x = _x((3, 2))
    with pytest.raises(Exception) as numpy_error:
        call(x)
    with pytest.raises(type(numpy_error.value)):
        rulekit.jvp(call, (x,), (_tangent(x),))
    with pytest.raises(type(numpy_error.value)):
        rulekit.hessian(lambda v: np.sum(call(v)))(x)


# -- the reverse rules' conventions ---------------------------------------------------------------


@pytest.mark.parametrize("fn", [np.maximum.accumulate, np.minimum.accumulate])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_running_extremum_ties_and_nans(fn: Any, layout: str) -> None:
    """Ties split ȳᵢ equally among the xⱼ (j ≤ i) equal to yᵢ, a NaN result among the NaNs so
    far, as the reverse rule: the pullback equals the reverse rule's and is the jvp's
    transpose (the frule splits the same way)."""
    t = np.array([[0.5, 2.0, 2.0, -1.0, 2.0, 3.0, 3.0],
                  [1.0, 1.0, 1.0, 0.0, -5.0, -5.0, 4.0],
                  [0.0, np.nan, 2.0, np.nan, 1.0, 1.0, 1.0],
                  [-np.inf, -np.inf, np.inf, 1.0, np.inf, 0.0, 0.0]])  # fmt: skip
    for x, axis in ((relayout(t, layout), 1), (relayout(t.T.copy(), layout), 0)):
        dots = (_tangent(x), None)
        check_pullback(fn, (x, axis), dots, _tangent(x, seed=3))
    _, ydot = rulekit.jvp(lambda v: fn(v, axis=1), (t,), (np.ones_like(t),))
    np.testing.assert_array_equal(ydot, np.ones_like(t))  # (a split of equal tangents)


def test_running_max_tie_values() -> None:
    x = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    _, ydot = rulekit.jvp(np.maximum.accumulate, (x,), (np.array([1.0, 2.0, 4.0, 8.0, 16.0]),))
    np.testing.assert_allclose(ydot, [1.0, 2.0, 3.0, 3.0, 22.0 / 3.0])


@pytest.mark.parametrize("fn", [np.logaddexp.reduce, np.logaddexp2.reduce])
def test_logaddexp_reduce_infinite_lanes(fn: Any) -> None:
    """A lane whose result is ±inf (or NaN): the elements equal to it share ȳ, as the reverse
    rule; finite lanes: the softmax weights (base 2 for logaddexp2)."""
    x = np.array([[-np.inf, -np.inf, -np.inf], [1.0, -np.inf, 2.0], [np.inf, 0.5, np.inf],
                  [0.25, -1.0, 3.0]])  # fmt: skip
    dots = (_tangent(x),)
    with np.errstate(invalid="ignore"):
        check_pullback(fn, (x,), dots, _tangent(np.zeros(4)), {"axis": 1})
        y, ydot = rulekit.jvp(lambda v: fn(v, axis=1), (x,), (np.ones_like(x),))
    np.testing.assert_allclose(ydot, np.ones(4))
    base = 2.0 if fn == np.logaddexp2.reduce else np.e
    w = base ** (x[3] - y[3])
    _, vjp_fn = rulekit.vjp(lambda v: fn(v, axis=1), x)
    np.testing.assert_allclose(vjp_fn(np.array([0.0, 0.0, 0.0, 1.0]))[0][3], w)


@pytest.mark.parametrize("u", [np.fmax, np.fmin])
def test_fmax_fold_ties(u: Any) -> None:
    """fmax/fmin folds: a tie splits ½/½ at the step where it happens (the declaration's
    partials, as the reverse fold), NaNs are ignored."""
    x = np.array([2.0, 2.0, np.nan, 2.0])
    _, ydot = rulekit.jvp(u.reduce, (x,), (np.array([1.0, 2.0, 4.0, 8.0]),))
    assert ydot == pytest.approx(0.25 * 1 + 0.25 * 2 + 0.5 * 8)
    check_pullback(u.reduce, (x,), (np.arange(4.0),), np.float64(1.0))
    check_pullback(u.accumulate, (x,), (np.arange(4.0),), np.arange(4.0) - 1.5)


def test_every_method_has_the_three_rules() -> None:
    """Every ufunc outer/reduce/accumulate with a reverse rule has a forward rule and a
    differentiable pullback (those of docs/coverage.md's modes table), on the same patterns."""
    from rulekit._registry import forward_registry, registry, vjp_registry

    def methods(reg: Any) -> set[tuple[str, str, Any]]:
        out = set()
        for e in reg.entries():
            u = getattr(e.f, "__self__", None)
            method = isinstance(u, np.ufunc) and e.f.__name__ in ("outer", "reduce", "accumulate")
            if method and getattr(e, "out", None) is None:  # (not the out= variants)
                out.add((u.__name__, e.f.__name__, e.patterns))
        return out

    reverse = methods(registry)
    assert len({(u, m) for u, m, _ in reverse}) >= 48
    assert reverse <= methods(forward_registry)
    assert reverse <= methods(vjp_registry)
