"""Forward rules and differentiable pullbacks of rules.numpy.ufuncs.forward (piecewise-constant
and comparison functions, |x|, conj, Re, Im, angle, modf, frexp, divmod, clip, where) and of
rules.numpy.forward_misc / forward_calculus (sort, partition, select, *_like, copyto,
nan_to_num, pad, diff, linspace, interp, convolve, correlate, polyval): tangents against
finite differences, pullbacks against the forward rules and the reverse rules, and the rules
run on traced values (twice differentiable)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from forward_rules import (
    check_forward,
    check_pullback,
    check_twice,
    frule_of,
    is_floating,
    jvp,
    vjp_of,
)

import rulekit
import rules.numpy.forward_misc  # noqa: F401  (registers the rules tested here)
from rulekit import Dual

R = np.random.default_rng(2)


def randn(*shape: int, dtype: Any = np.float64) -> Any:
    x = R.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * R.normal(size=shape)
    return x.astype(dtype)


def layouts(x: np.ndarray) -> list[np.ndarray]:
    """x in C order, Fortran order, a strided view and a negative-stride view."""
    out = [x, np.asfortranarray(x), np.repeat(x, 2, axis=-1)[..., ::2]]
    if x.ndim:
        out.append(np.flip(np.flip(x, 0).copy(), 0))
    return out


def run(f: Any, args: list[Any], kw: dict[str, Any] | None = None, *, diff: Sequence[int] = (0,),
        twice: bool = True, rtol: float = 1e-6, reverse: bool = True) -> None:  # fmt: skip
    """check_forward, check_pullback (and check_twice for real float64 arguments)."""
    kw = kw or {}
    dots = [randn(*np.shape(a), dtype=np.result_type(a)) if i in diff else None
            for i, a in enumerate(args)]  # fmt: skip
    dots = [float(d) if d is not None and np.ndim(args[i]) == 0 and isinstance(args[i], float)
            else d for i, d in enumerate(dots)]  # fmt: skip
    y = f(*args, **kw)
    loose = any(np.result_type(a) in (np.float32, np.complex64) for a in args if is_floating(a))
    r = 1e-3 if loose else rtol
    check_forward(f, args, dots, kw, rtol=r, atol=1e-3 if loose else 1e-8)
    yb = (tuple(randn(*np.shape(e), dtype=np.result_type(e)) if is_floating(e) else None for e in y)
          if isinstance(y, tuple) else randn(*np.shape(y), dtype=np.result_type(y)))  # fmt: skip
    check_pullback(f, args, dots, yb, kw, rtol=1e-4 if loose else 1e-8, reverse=reverse)
    if twice and not loose and all(np.result_type(args[i]) == np.float64 for i in diff):
        for i in diff:
            check_twice(f, args, i, yb, kw, diff=diff)


# -- piecewise constant and comparisons --------------------------------------------------------

FLAT = [np.floor, np.ceil, np.trunc, np.fix, np.rint, np.sign, np.spacing, np.round, np.around]


@pytest.mark.parametrize("fn", FLAT, ids=lambda f: f.__name__)
def test_piecewise_constant(fn: Any) -> None:
    for x in [*layouts(randn(3, 4) * 3), randn(4, dtype=np.float32), np.float64(1.3)]:
        y, t = jvp(fn, [x], [np.ones_like(x)])
        np.testing.assert_array_equal(y, fn(x))
        assert np.shape(t) == np.shape(y) and np.asarray(t).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(t, 0)
        _, pb = vjp_of(fn, x)((True,), x)
        (c,) = pb(np.ones_like(y))
        np.testing.assert_array_equal(c, 0)
        assert np.shape(c) == np.shape(x)
    y, t = jvp(np.round, [randn(3)], [np.ones(3)], {"decimals": 2})
    np.testing.assert_array_equal(t, 0)


BOOL1: list[Any] = [np.isnan, np.isinf, np.isfinite, np.signbit, np.logical_not]
BOOL2: list[Any] = [np.greater, np.greater_equal, np.less, np.less_equal, np.equal, np.not_equal,
         np.logical_and, np.logical_or, np.logical_xor]  # fmt: skip


@pytest.mark.parametrize("fn", BOOL1 + BOOL2, ids=lambda f: f.__name__)
def test_comparisons(fn: Any) -> None:
    args = [randn(3, 4)] if fn in BOOL1 else [randn(3, 4), randn(4)]
    y, t = jvp(fn, args, [np.ones_like(a) for a in args])
    np.testing.assert_array_equal(y, fn(*args))
    assert t is None
    _, pb = vjp_of(fn, *args)((True,) * len(args), *args)
    assert pb(None) == (None,) * len(args)


def test_floor_divide_and_where1() -> None:
    a, b = randn(3, 4), randn(4) + 3
    _, t = jvp(np.floor_divide, [a, b], [a, b])
    np.testing.assert_array_equal(t, 0)
    assert jvp(np.where, [randn(4)], [np.ones(4)])[1] is None


# -- |x|, conj, Re, Im, angle ---------------------------------------------------------------------


@pytest.mark.parametrize("fn", [np.absolute, np.conjugate, np.real, np.imag, np.angle],
                         ids=lambda f: f.__name__)  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_parts(fn: Any, dtype: Any) -> None:
    for x in layouts(randn(3, 4, dtype=dtype)):
        run(fn, [x], reverse=not (fn is np.imag and np.dtype(dtype).kind == "f"))
    if np.dtype(dtype).kind == "c":
        run(fn, [dtype(1.5 - 0.5j)], twice=False)


def test_angle_deg_and_abs_at_zero() -> None:
    z = randn(4, dtype=np.complex128)
    run(np.angle, [z, True])
    run(np.angle, [z], {"deg": True})
    _, t = jvp(np.absolute, [np.array([0j, 1 + 0j])], [np.array([1 + 1j, 1j])])
    np.testing.assert_array_equal(t, [0.0, 0.0])


def test_modf_frexp_divmod() -> None:
    x = randn(3, 4) * 3 + 0.25
    run(np.modf, [x])
    run(np.frexp, [np.abs(x) + 0.3])
    run(np.divmod, [x, np.abs(randn(4)) + 0.5], diff=(0, 1))


# -- clip, where --------------------------------------------------------------------------------

CLIPS = [
    ([randn(3, 4), -0.5, 0.7], {}, (0,)),
    ([randn(3, 4), randn(4) - 0.5, randn(3, 1) + 0.5], {}, (0, 1, 2)),
    ([randn(3, 4).astype(np.float32), randn(4).astype(np.float32) - 1, None], {}, (0, 1)),
    ([np.float64(1.3)], {"max": 0.4}, (0,)),
    ([randn(3, 4)], {"a_min": -0.3, "a_max": 0.3}, (0,)),
]


@pytest.mark.parametrize(("args", "kw", "diff"), CLIPS)
def test_clip(args: list[Any], kw: dict[str, Any], diff: tuple[int, ...]) -> None:
    run(np.clip, args, kw, diff=diff)


def test_clip_layouts() -> None:
    for x in layouts(randn(3, 4)):
        run(np.clip, [x, -0.5, 0.5])


WHERES = [
    [randn(3, 4) > 0, randn(3, 4), randn(3, 4)],
    [randn(3, 4) > 0, randn(4).astype(np.float32), 0.0],
    [randn(3, 1) > 0, np.float64(2.5), randn(3, 4) + 1j],
    [randn(3, 4) > 0, randn(3, 4), randn(4)],
]


@pytest.mark.parametrize("args", WHERES)
def test_where(args: list[Any]) -> None:
    diff = tuple(i for i in (1, 2) if is_floating(args[i]) and not isinstance(args[i], float))
    run(np.where, args, diff=diff)


# -- sort, partition, select --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kw"),
    [([randn(5)], {}), ([randn(3, 4, dtype=np.float32)], {"axis": 0}), ([randn(2, 3), None], {}),
     ([randn(4, dtype=np.complex128)], {"kind": "stable"}), ([np.asfortranarray(randn(3, 4))], {})],
)  # fmt: skip
def test_sort(args: list[Any], kw: dict[str, Any]) -> None:
    run(np.sort, args, kw)


def test_sort_ties_keep_order() -> None:
    x = np.array([1.0, 0.0, 1.0])
    _, t = jvp(np.sort, [x], [np.array([10.0, 20.0, 30.0])])
    np.testing.assert_array_equal(t, [20.0, 10.0, 30.0])


@pytest.mark.parametrize(
    ("args", "kw"),
    [([randn(6), 2], {}), ([randn(3, 4, dtype=np.float32), [0, 2]], {"axis": 0}),
     ([randn(2, 3), 4, None], {})],
)  # fmt: skip
def test_partition(args: list[Any], kw: dict[str, Any]) -> None:
    run(np.partition, args, kw)


def test_select() -> None:
    x = randn(2, 3)
    a, b = randn(2, 3), randn(3)
    conds = [x > 0, x < 0.5]
    y = np.select(conds, [a, b], randn(2, 3))
    d = randn(2, 3)
    da, db, dd = randn(2, 3), randn(3), randn(2, 3)
    yy, t = jvp(np.select, [conds, [a, b], d], [None, [da, db], dd])
    np.testing.assert_allclose(yy, y * 0 + np.select(conds, [a, b], d))
    np.testing.assert_allclose(t, np.select(conds, [da, db * np.ones((2, 3))], dd))
    yb = randn(2, 3)
    _, pb = vjp_of(np.select, conds, [a, b], d)((False, True, True), conds, [a, b], d)
    _, ca, cd = pb(yb)
    lhs = np.vdot(yb, t)
    rhs = np.vdot(ca[0], da) + np.vdot(ca[1], db) + np.vdot(cd, dd)
    np.testing.assert_allclose(lhs, rhs)


# -- creation, copyto, nan_to_num, pad, diff ----------------------------------------------------


def test_like_functions() -> None:
    x = randn(3, 4)
    for fn in (np.zeros_like, np.ones_like, np.empty_like):
        y, t = jvp(fn, [x], [x])
        np.testing.assert_array_equal(t, 0)
        assert t.shape == y.shape and t.dtype == y.dtype
        assert jvp(fn, [x], [None])[1] is None
    y, t = jvp(np.full_like, [x, 2.5], [None, 0.5])
    np.testing.assert_array_equal(t, np.full_like(x, 0.5))
    _, pb = vjp_of(np.full_like, x, 2.5)((True, True), x, 2.5)
    assert pb(np.ones((3, 4))) == (None, 12.0)


@pytest.mark.parametrize("where", [None, randn(4) > 0])
@pytest.mark.parametrize("src", [randn(3, 4), randn(4), 2.5])
def test_copyto(src: Any, where: Any) -> None:
    dst, ddst = randn(3, 4), randn(3, 4)
    dsrc = None if isinstance(src, float) else randn(*np.shape(src))
    kw = {} if where is None else {"where": where}
    want_x, want_dx = dst.copy(), ddst.copy()
    np.copyto(want_x, src, **kw)
    np.copyto(want_dx, 0.0 if dsrc is None else dsrc, **kw)
    frule_of(np.copyto, dst, src)(Dual(np.copyto), Dual(dst, ddst), Dual(src, dsrc), **kw)
    np.testing.assert_array_equal(dst, want_x)
    np.testing.assert_array_equal(ddst, want_dx)
    with pytest.raises(rulekit.TracingError):
        frule_of(np.copyto, dst, src)(Dual(np.copyto), Dual(dst), Dual(src, randn(3, 4)))


def test_nan_to_num() -> None:
    x = randn(2, 4)
    x[0, 1], x[1, 2], x[1, 3] = np.nan, np.inf, -np.inf
    _, t = jvp(np.nan_to_num, [x], [np.ones_like(x)])
    np.testing.assert_array_equal(t, np.isfinite(x).astype(float))
    run(np.nan_to_num, [randn(2, 4)])
    run(np.nan_to_num, [randn(3, dtype=np.complex128)], {"nan": 1.5})
    _, pb = vjp_of(np.nan_to_num, x)((True,), x)
    np.testing.assert_array_equal(pb(np.ones_like(x))[0], np.isfinite(x))


@pytest.mark.parametrize(
    ("args", "kw"),
    [([randn(3), 2], {}), ([randn(2, 3, dtype=np.float32), ((1, 0), (2, 1))],
      {"constant_values": 1.5}), ([randn(3, 2), ((2, 3), (1, 1)), "reflect"], {}),
     ([randn(4), 3], {"mode": "wrap"}), ([randn(2, 3), 1, "edge"], {})],
)  # fmt: skip
def test_pad(args: list[Any], kw: dict[str, Any]) -> None:
    run(np.pad, args, kw)


@pytest.mark.parametrize(
    ("args", "kw", "diff"),
    [([randn(5)], {}, (0,)), ([randn(3, 4, dtype=np.float32), 2, 0], {}, (0,)),
     ([randn(2, 4)], {"prepend": randn(2, 1), "append": 0.5}, (0,)),
     ([randn(4), 1, -1, randn(1), randn(2)], {}, (0, 3, 4)),
     ([randn(4, dtype=np.complex128), 2], {}, (0,))],
)  # fmt: skip
def test_diff(args: list[Any], kw: dict[str, Any], diff: tuple[int, ...]) -> None:
    run(np.diff, args, kw, diff=diff)


# -- linspace, interp, convolve, polyval --------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kw"),
    [([0.5, 2.0, 5], {}), ([randn(3), randn(3), 4], {"axis": 1}),
     ([randn(2), 3.0, 6], {"endpoint": False}), ([1.0, randn(2, 1), 3], {"retstep": True})],
)  # fmt: skip
def test_linspace(args: list[Any], kw: dict[str, Any]) -> None:
    run(np.linspace, args, kw, diff=(0, 1))


@pytest.mark.parametrize("kw", [{}, {"left": -1.0, "right": 2.0}])
def test_interp(kw: dict[str, Any]) -> None:
    xp = np.sort(randn(6))
    x = np.concatenate([R.uniform(xp[0], xp[-1], 5), [xp[0] - 1, xp[-1] + 1]])
    run(np.interp, [x, xp, randn(6)], kw, diff=(0, 2))


@pytest.mark.parametrize("fn", [np.convolve, np.correlate], ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize(("n", "m", "dtype"), [(5, 3, np.float64), (3, 6, np.float64),
                                               (4, 4, np.complex128)])  # fmt: skip
def test_convolution(fn: Any, mode: str, n: int, m: int, dtype: Any) -> None:
    run(fn, [randn(n, dtype=dtype), randn(m, dtype=dtype), mode], diff=(0, 1))


@pytest.mark.parametrize(
    "args", [[randn(4), randn(3, 2)], [randn(3), 1.5], [randn(3, dtype=np.complex128),
                                                        randn(2, dtype=np.complex128)]]
)  # fmt: skip
def test_polyval(args: list[Any]) -> None:
    run(np.polyval, args, diff=(0, 1))


@pytest.mark.parametrize("kw", [{}, {"left": -1.0, "right": 2.0}])
def test_interp_ends_match_reverse(kw: dict[str, Any]) -> None:
    xp, fp = np.sort(randn(5)), randn(5)
    x = np.array([xp[0] - 1, xp[-1], xp[-1] + 1, xp[0], 0.5 * (xp[1] + xp[2])])
    yb = randn(5)
    cts = vjp_of(np.interp, x, xp, fp)((True, False, True), x, xp, fp, **kw)[1](yb)
    _, ref = rulekit.value_and_pullback(lambda x, fp: np.interp(x, xp, fp, **kw), yb, x, fp)
    np.testing.assert_allclose(cts[0], ref[0])
    np.testing.assert_allclose(cts[2], ref[1])


# -- cross, trapezoid ---------------------------------------------------------------------------

_OLD2 = pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")


@pytest.mark.parametrize(
    ("args", "kw"),
    [([randn(3), randn(3)], {}), ([randn(2, 3), randn(4, 1, 3)], {}),
     ([randn(3, 2), randn(3, 2, dtype=np.complex128)], {"axisa": 0, "axisb": 0, "axisc": -1}),
     ([randn(2, 3, 4), randn(4, 3)], {"axis": 1}),
     pytest.param([randn(4, 2), randn(4, 2)], {}, marks=_OLD2),
     pytest.param([randn(2), randn(3)], {}, marks=_OLD2)],
)  # fmt: skip
def test_cross(args: list[Any], kw: dict[str, Any]) -> None:
    run(np.cross, args, kw, diff=(0, 1))


@pytest.mark.parametrize(
    ("args", "kw", "diff"),
    [([randn(3, 5)], {}, (0,)), ([randn(3, 5), np.sort(randn(5))], {}, (0, 1)),
     ([randn(3, 5), np.cumsum(np.abs(randn(3, 5)), axis=0)], {"axis": 0}, (0, 1)),
     ([randn(3, 5).astype(np.float32)], {"dx": 0.5, "axis": 0}, (0,)),
     ([randn(3, 5, dtype=np.complex128), None, 0.25], {}, (0, 2)), ([randn(4)], {}, (0,))],
)  # fmt: skip
def test_trapezoid(args: list[Any], kw: dict[str, Any], diff: tuple[int, ...]) -> None:
    run(np.trapezoid, args, kw, diff=diff)
