"""Forward rules and differentiable pullbacks of indexing (rules.numpy.indexing.forward):
x[idx] for basic, integer-array and boolean indices in several layouts and dtypes, the
`scatter_add` primitive, np.take / np.take_along_axis pullbacks, and the forward rules of
the writes (x[idx] = v, np.put, np.place, np.putmask, np.fill_diagonal, np.add.at). The
pullbacks and forward rules are also run on traced values (twice differentiable)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest
from forward_rules import check_forward, check_pullback, check_twice, fd_jvp, frule_of, vjp_of

import rulekit
from rulekit import Dual
from rules.numpy.indexing.forward import scatter_add

R = np.random.default_rng(1)


def randn(*shape: int, dtype: Any = np.float64) -> Any:
    x = R.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * R.normal(size=shape)
    return x.astype(dtype)


def relayout(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "F":
        return np.asfortranarray(x)
    if kind == "strided":
        return np.repeat(x, 2, axis=-1)[..., ::2]
    if kind == "reversed":
        return np.flip(np.flip(x, 0).copy(), 0)  # same values, negative strides
    return x


MASK = np.array([True, False, True])
INDICES = [
    (slice(1, None), slice(None, None, 2)),
    (slice(None, None, -1), 1),
    2,
    (1, 3),
    (Ellipsis, None, 0),
    ([0, 2, 2], slice(None)),
    (np.array([[0, 1], [2, 0]]), np.array([3, 3])),
    (MASK, slice(1, 3)),
    np.array([[True, False, True, False]] * 3),
    (slice(None), [1, 1, -1]),
]
IDS = ["slices", "neg-step", "int", "element", "ellipsis-none", "int-rows", "int-2d", "mask-slice",
       "mask-2d", "int-cols"]  # fmt: skip


@pytest.mark.parametrize("kind", ["C", "F", "strided", "reversed"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("idx", INDICES, ids=IDS)
def test_getitem(idx: Any, dtype: Any, kind: str) -> None:
    x = relayout(randn(3, 4, dtype=dtype), kind)
    dx = relayout(randn(3, 4, dtype=dtype), kind)
    y = x[idx]
    yb = randn(*np.shape(y), dtype=dtype)
    yb = yb[()] if np.ndim(y) == 0 else yb
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    t = check_forward(operator.getitem, [x, idx], [dx, None], rtol=rtol, atol=1e-6)
    np.testing.assert_array_equal(t, dx[idx])
    check_pullback(operator.getitem, [x, idx], [dx, None], yb, rtol=rtol)


@pytest.mark.parametrize("idx", INDICES, ids=IDS)
def test_getitem_twice(idx: Any) -> None:
    x = randn(3, 4)
    yb = randn(*np.shape(x[idx]))
    check_twice(operator.getitem, [x, idx], 0, yb)
    check_twice(operator.getitem, [x * x, idx], 0, yb)


def test_getitem_repeats_accumulate() -> None:
    x = randn(4)
    _, pb = vjp_of(operator.getitem, x, [1, 1, 3])((True, False), x, [1, 1, 3])
    np.testing.assert_array_equal(pb(np.array([1.0, 2.0, 3.0]))[0], [0.0, 3.0, 0.0, 3.0])


@pytest.mark.parametrize(
    ("g", "shape", "idx"),
    [
        (randn(2, 2), (3, 4), (slice(1, 3), slice(None, None, 2))),
        (randn(3, 4), (5, 4), ([0, 2, 2], slice(None))),
        (1.5, (4,), 2),
        (randn(2, 2, dtype=np.complex128), (3, 4), (MASK, slice(1, 3))),
        (randn(4), (3, 4), ([0, 0, 1],)),  # g broadcast to the indexed shape
    ],
)
def test_scatter_add(g: Any, shape: tuple[int, ...], idx: Any) -> None:
    dg = randn(*np.shape(g), dtype=np.result_type(g))
    dg = float(dg) if np.ndim(g) == 0 else dg
    yb = randn(*shape, dtype=np.result_type(g))
    check_forward(scatter_add, [g, shape, idx], [dg, None, None])
    check_pullback(scatter_add, [g, shape, idx], [dg, None, None], yb)
    if np.isrealobj(g) and np.ndim(g):
        check_twice(scatter_add, [g, shape, idx], 0, yb)


TAKES = [
    (np.take, (randn(2, 3), np.array([0, 5, 5, -1])), {}),
    (np.take, (randn(3, 4), [[0, 2], [2, 2]]), {"axis": 1}),
    (np.take, (randn(3, 2, dtype=np.complex128), [4, -1], 0), {"mode": "wrap"}),
    (np.take_along_axis, (randn(3, 4), np.argsort(randn(3, 4), axis=1)), {"axis": 1}),
    (np.take_along_axis, (randn(3, 4), np.array([[0, 0, 2, 1]]), 0), {}),
]


@pytest.mark.parametrize(("fn", "args", "kw"), TAKES)
def test_take(fn: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    x = args[0]
    dots = [randn(*x.shape, dtype=x.dtype)] + [None] * (len(args) - 1)
    y = fn(*args, **kw)
    yb = randn(*y.shape, dtype=y.dtype)
    check_forward(fn, list(args), dots, kw)
    check_pullback(fn, list(args), dots, yb, kw)
    if x.dtype.kind == "f":
        check_twice(fn, list(args), 0, yb, kw)


# -- writes: forward rules ----------------------------------------------------------------------


def _fresh(write: Any, after: Any = None) -> Any:
    """A functional version of the mutating `write(x, *consts, v)`: returns the new x."""

    def f(x: Any, *rest: Any) -> Any:
        x = np.array(x, copy=True)
        write(x, *rest)
        return x

    return f


WRITES = [
    (operator.setitem, randn(3, 4), (slice(1, 3),), randn(2, 4)),
    (operator.setitem, randn(3, 4), ((slice(None), 1),), randn(3)),  # one column
    (operator.setitem, randn(3, 4), (2,), 1.5),  # a Python float
    (operator.setitem, randn(3, 4), (([0, 2, 0], 1),), randn(3)),  # repeated target
    (operator.setitem, randn(3, 4, dtype=np.complex128), (MASK,), randn(4)),  # real v, complex x
    (np.put, randn(2, 3), ([0, 4, 5],), randn(3)),
    (np.place, randn(3, 4), (randn(3, 4) > 0,), randn(2)),
    (np.putmask, randn(3, 4), (randn(3, 4) > 0,), randn(3, 4)),
    (np.fill_diagonal, randn(3, 3), (), randn(3)),
    (np.add.at, randn(5), (np.array([0, 1, 1, 4]),), randn(4)),
    (np.subtract.at, randn(4), ([1, 1, 3],), randn(3)),
]


@pytest.mark.parametrize(("write", "x", "consts", "v"), WRITES)
@pytest.mark.parametrize("v_const", [False, True])
def test_write_frule(write: Any, x: Any, consts: tuple[Any, ...], v: Any, v_const: bool) -> None:
    dx = randn(*x.shape, dtype=x.dtype)
    dv = None if v_const else (float(R.normal()) if np.ndim(v) == 0 else randn(*np.shape(v)))
    f = _fresh(write)
    want = f(x, *consts, v)
    fd = fd_jvp(f, [x, *consts, v], [dx, *[None] * len(consts), dv], {}, 1e-6)
    X, DX = x.copy(), dx.copy()
    out = frule_of(write, X, *consts, v)(
        Dual(write, None), Dual(X, DX), *[Dual(c, None) for c in consts], Dual(v, dv)
    )
    assert out.x is None
    np.testing.assert_allclose(X, want, rtol=1e-12)
    np.testing.assert_allclose(DX, fd, rtol=1e-6, atol=1e-8)


def test_write_into_constant_refused() -> None:
    x, v = randn(3), randn(2)
    rule = frule_of(operator.setitem, x, slice(1, None), v)
    with pytest.raises(rulekit.TracingError, match="tangent"):
        rule(Dual(operator.setitem, None), Dual(x, None), Dual(slice(1, None)), Dual(v, v))
    # a constant value into a constant array: just the write
    rule(Dual(operator.setitem, None), Dual(x, None), Dual(slice(1, None)), Dual(v, None))
    np.testing.assert_array_equal(x[1:], v)
