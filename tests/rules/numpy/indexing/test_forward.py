"""Forward rules and differentiable pullbacks of indexing (rules.numpy.indexing.forward):
x[idx] for basic, integer-array and boolean indices in several layouts and dtypes, the
`scatter_add` primitive, np.take / np.take_along_axis pullbacks, and the forward rules of
the writes (x[idx] = v, np.put, np.place, np.putmask, np.fill_diagonal, np.add.at). The
pullbacks and forward rules are also run on traced values (twice differentiable)."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import rulekit
from rulekit import Dual
from rulekit._registry import forward_registry, vjp_registry
from rules.numpy.indexing.forward import scatter_add

# -- helpers: the rules called directly (forward rule, differentiable pullback) ------------------


def frule_of(f: Any, *args: Any) -> Any:
    """The forward rule registered for `f(*args)` (looked up on the primal values)."""
    return forward_registry.lookup_call(f, list(args))[1].impl


def vjp_of(f: Any, *args: Any) -> Any:
    """The differentiable pullback registered for `f(*args)`."""
    return vjp_registry.lookup_call(f, list(args))[1].impl


def jvp(f: Any, args: Sequence[Any], dots: Sequence[Any], kw: dict[str, Any] | None = None) -> Any:
    """(y, ẏ) from the forward rule; `dots[i]` None: a constant."""
    out = frule_of(f, *args)(Dual(f, None), *map(Dual, args, dots), **(kw or {}))
    return out.x, out.dx


def inner(a: Any, b: Any) -> float:
    """Real inner product of two trees (None: zero)."""
    if a is None or b is None:
        return 0.0
    if isinstance(a, (tuple, list)):
        return sum(inner(u, v) for u, v in zip(a, b, strict=True))
    return float(np.vdot(np.asarray(a), np.asarray(b)).real)


def tree_close(a: Any, b: Any, rtol: float, atol: float) -> None:
    if a is None:  # (no tangent: a constant output)
        assert not np.any(np.asarray(b)), b
        return
    if isinstance(a, (tuple, list)):
        for u, v in zip(a, b, strict=True):
            tree_close(u, v, rtol, atol)
        return
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def _wide(a: Any) -> Any:
    if isinstance(a, (np.ndarray, np.generic)) and a.dtype in (np.float32, np.float16):
        return a.astype(np.float64)
    if isinstance(a, (np.ndarray, np.generic)) and a.dtype == np.complex64:
        return a.astype(np.complex128)
    return a


def fd_jvp(f: Any, args: Sequence[Any], dots: Sequence[Any], kw: dict[str, Any], h: float) -> Any:
    """Central difference of f along the tangents (computed in double precision)."""
    wa = [_wide(a) for a in args]

    def at(s: float) -> Any:
        return f(*[a if d is None else a + s * _wide(d) for a, d in zip(wa, dots, strict=True)],
                 **kw)  # fmt: skip

    p, m = at(h), at(-h)
    if isinstance(p, tuple):
        return tuple((np.asarray(u) - np.asarray(v)) / (2 * h) for u, v in zip(p, m, strict=True))
    return (np.asarray(p) - np.asarray(m)) / (2 * h)


def like(t: Any, y: Any) -> None:
    """Tangent t has y's shape and dtype."""
    if t is None:
        return
    if isinstance(y, tuple):
        for u, v in zip(t, y, strict=True):
            like(u, v)
        return
    assert np.shape(t) == np.shape(y), (np.shape(t), np.shape(y))
    if isinstance(y, (np.ndarray, np.generic)):
        assert np.asarray(t).dtype == y.dtype, (np.asarray(t).dtype, y.dtype)


def check_forward(
    f: Any, args: Sequence[Any], dots: Sequence[Any], kw: dict[str, Any] | None = None,
    rtol: float = 1e-6, atol: float = 1e-8, h: float = 1e-6,
) -> Any:  # fmt: skip
    """The forward rule's value is f's, its tangent has y's shape/dtype and matches central
    differences. Returns ẏ."""
    kw = kw or {}
    y, t = jvp(f, args, dots, kw)
    tree_close(y, f(*args, **kw), 1e-6, 0)
    like(t, y)
    tree_close(t, fd_jvp(f, args, dots, kw, h), rtol, atol)
    return t


def check_pullback(
    f: Any, args: Sequence[Any], dots: Sequence[Any], ybar: Any, kw: dict[str, Any] | None = None,
    rtol: float = 1e-6, reverse: bool = True,
) -> Any:  # fmt: skip
    """⟨ȳ, J ẋ⟩ (forward rule) == Σ⟨x̄ᵢ, ẋᵢ⟩ (pullback); x̄ᵢ has xᵢ's shape; and (`reverse`)
    x̄ᵢ equals the reverse rule's cotangent."""
    kw = kw or {}
    active = tuple(d is not None for d in dots)
    y, pb = vjp_of(f, *args)(active, *args, **kw)
    tree_close(y, f(*args, **kw), 1e-6, 0)
    cts = pb(ybar)
    assert len(cts) == len(args)
    for c, a, d in zip(cts, args, dots, strict=True):
        if d is not None and c is not None:
            assert np.shape(c) == np.shape(a), (np.shape(c), np.shape(a))
    _, t = jvp(f, args, dots, kw)
    lhs, rhs = inner(ybar, t), inner(cts, dots)
    assert abs(lhs - rhs) <= rtol * (1 + abs(lhs)), (lhs, rhs)
    if reverse:
        _, ref = rulekit.value_and_pullback(lambda *a: f(*a, **kw), ybar, *args)
        for c, r, d in zip(cts, ref, dots, strict=True):
            if d is not None:
                want = 0 if isinstance(r, rulekit.NoTangent) else r
                np.testing.assert_allclose(np.asarray(c), want, rtol=rtol * 10, atol=1e-10)
    return cts


def _fd_grad(s: Any, x: np.ndarray, h: float = 1e-5) -> np.ndarray:
    g = np.zeros(x.shape)
    for k in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[k] = h
        g[k] = (s(x + e) - s(x - e)) / (2 * h)
    return g


def _floating(a: Any) -> bool:
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype.kind in "fc"
    return isinstance(a, (float, complex))


def check_twice(
    f: Any, args: Sequence[Any], i: int, ybar: Any, kw: dict[str, Any] | None = None,
    rtol: float = 1e-5, atol: float = 1e-7, diff: Sequence[int] | None = None,
) -> None:  # fmt: skip
    """The pullback and the forward rule of f run on values traced by rulekit's reverse
    engine (argument i traced; the arguments `diff`, default every float one, active) and
    the gradient in argument i of a weighted sum of their results matches finite
    differences: the rules are differentiable again (mixed second derivatives included)."""
    kw = kw or {}
    rng = np.random.default_rng(7)
    x = np.asarray(args[i], dtype=np.float64)
    if diff is None:
        diff = [k for k, a in enumerate(args) if _floating(a)]
    dots = [rng.normal(size=np.shape(a)) if k in diff else None for k, a in enumerate(args)]
    wts = [rng.normal(size=np.shape(a)) if _floating(a) else None for a in args]
    active = tuple(k in diff for k in range(len(args)))
    vjp = vjp_of(f, *args)
    fwd = frule_of(f, *args)

    def put(v: Any) -> list[Any]:
        a = list(args)
        a[i] = v
        return a

    def s_vjp(v: Any) -> Any:
        cts = vjp(active, *put(v), **kw)[1](ybar)
        return sum(np.sum(np.real(c) * w) for c, w in zip(cts, wts, strict=True) if c is not None)

    def s_jvp(v: Any) -> Any:
        t = fwd(Dual(f, None), *map(Dual, put(v), dots), **kw).dx
        t = t[0] if isinstance(t, tuple) else t
        yb = ybar[0] if isinstance(ybar, tuple) else ybar
        return np.sum(np.real(t * np.conjugate(yb)))

    for s in (s_vjp, s_jvp):
        g = rulekit.grad(s)(x)
        np.testing.assert_allclose(g, _fd_grad(s, x), rtol=rtol, atol=atol)


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
