"""Forward rules and differentiable pullbacks of the products (rules/numpy/forward_products.py).

Every case is checked four ways (`check_call`): the frule's tangent against central
differences of the primal, the vjp pullback against the frule (⟨ȳ, J ẋ⟩ = Σ⟨x̄ᵢ, ẋᵢ⟩), the
vjp cotangents against the reverse rule's (`rulekit.value_and_pullback`), and, for
second-order differentiability, both rule bodies run under the reverse engine
(`check_traceable`: `rulekit.grad` of ⟨w, pullback(ȳ)⟩ and of ⟨w, ẏ⟩ against central
differences of the same function evaluated in plain numpy). The helpers here are shared
with tests/rules/blas/test_forward.py and tests/rules/numpy/reductions/test_forward.py.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from fdcheck import fd_grad

import rulekit
from rulekit import Dual
from rulekit._registry import forward_registry, vjp_registry

# -- shared helpers ------------------------------------------------------------------------------


def rnd(rng: np.random.Generator, shape: Any, dt: Any = np.float64, order: str = "C") -> Any:
    """Random values of `shape`/`dtype` in `order` ("C", "F", "S" strided, "N" negative)."""
    big = tuple(2 * n for n in shape) if order == "S" else shape
    x = rng.standard_normal(big)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.standard_normal(big)
    x = np.array(x, dtype=dt, order="F" if order == "F" else "C")
    if order == "S":
        x = x[tuple(slice(None, None, 2) for _ in shape)]
    if order == "N" and x.ndim:
        x = np.array(x[::-1], order="C")[::-1]
    return x


def _inexact(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_, str)) or v is None:
        return False
    if isinstance(v, (list, tuple)):
        return False
    return bool(np.asarray(v).dtype.kind in "fc")


def _like(rng: np.random.Generator, v: Any) -> Any:
    """A random value of v's shape and dtype (a scalar's type)."""
    r = rnd(rng, np.shape(v), np.result_type(v))
    return r if isinstance(v, np.ndarray) else type(v)(r[()]) if np.ndim(r) == 0 else r


def rdot(a: Any, b: Any) -> float:
    """Re⟨a, b⟩ of two values of the same structure (tuples: summed; None: 0)."""
    if isinstance(a, tuple):
        return sum(rdot(x, y) for x, y in zip(a, b, strict=True))
    if a is None or b is None:
        return 0.0
    return float(np.vdot(np.asarray(a, np.complex128), np.asarray(b, np.complex128)).real)


def _flat(v: Any) -> Any:
    return tuple(np.asarray(e) for e in v) if isinstance(v, tuple) else np.asarray(v)


def _close(got: Any, want: Any, rtol: float, atol: float, what: str) -> None:
    if isinstance(want, tuple):
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            _close(g, w, rtol, atol, f"{what}[{k}]")
        return
    if want is None:
        assert got is None, what
        return
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol,
                               err_msg=what)  # fmt: skip


def impls(fn: Any, args: Sequence[Any]) -> tuple[Any, Any]:
    """The registered frule and vjp rule of the call (looked up on the concrete values)."""
    fr = forward_registry.lookup_call(fn, list(args))[1].impl
    vj = vjp_registry.lookup_call(fn, list(args))[1].impl
    return fr, vj


def _wide(v: Any) -> Any:
    """v in float64/complex128 (the finite differences of a float32 call are taken wide)."""
    if isinstance(v, np.ndarray) and v.dtype.kind in "fc":
        return v.astype(np.result_type(v.dtype, np.float64))
    if isinstance(v, (np.float32, np.complex64)):
        return np.result_type(v, np.float64).type(v)
    return v


def _fd_jvp(fn: Any, args: list[Any], kw: dict[str, Any], tans: dict[int, Any], eps: float) -> Any:
    def at(s: float) -> Any:
        a = [_wide(v) for v in args]
        for i, t in tans.items():
            a[i] = a[i] + s * _wide(t)
        return fn(*a, **kw)

    hi, lo = at(eps), at(-eps)
    if isinstance(hi, tuple):
        return tuple(
            (np.asarray(h) - np.asarray(low)) / (2 * eps) for h, low in zip(hi, lo, strict=True)
        )
    return (np.asarray(hi) - np.asarray(lo)) / (2 * eps)


def check_call(
    fn: Any,
    *args: Any,
    active: Sequence[int] | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-7,
    eps: float = 1e-6,
    rrule: bool = True,
    **kw: Any,
) -> None:
    """frule vs finite differences, vjp vs frule (dot-product test), vjp vs the rrule."""
    rng = np.random.default_rng(0)
    args_l = list(args)
    act = [i for i, a in enumerate(args_l) if _inexact(a)] if active is None else list(active)
    tans = {i: _like(rng, args_l[i]) for i in act}
    fr, vj = impls(fn, args_l)
    duals = [Dual(a, tans.get(i)) for i, a in enumerate(args_l)]
    before = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args_l]
    out = fr(Dual(fn, None), *duals, **kw)
    y = fn(*args_l, **kw)
    _close(_flat(out.x), _flat(y), 1e-12, 0, "frule primal")
    for a, b in zip(args_l, before, strict=True):  # nothing mutated
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
    yd = out.dx
    ys = y if isinstance(y, tuple) else (y,)
    yds = yd if isinstance(y, tuple) else (yd,)
    for e, t in zip(ys, yds, strict=True):
        if t is not None:
            assert np.shape(t) == np.shape(e), ("tangent shape", np.shape(t), np.shape(e))
            assert np.result_type(t) == np.result_type(e), ("tangent dtype", np.result_type(t))
    # float32 inputs: FD and comparisons in float64 of the same function
    fd = _fd_jvp(fn, args_l, kw, tans, eps)
    yd_f = tuple(np.zeros(np.shape(e)) if t is None else t for e, t in zip(ys, yds, strict=True))
    _close(_flat(yd_f if isinstance(y, tuple) else yd_f[0]), fd, rtol, atol, "frule vs FD")
    # vjp rule: the dot-product test against the frule
    flags = tuple(i in act for i in range(len(args_l)))
    y2, pb = vj(flags, *args_l, **kw)
    _close(_flat(y2), _flat(y), 1e-12, 0, "vjp primal")
    ybar = tuple(_like(rng, e) for e in ys) if isinstance(y, tuple) else _like(rng, y)
    cots = pb(ybar)
    assert len(cots) == len(args_l), f"{len(cots)} cotangents for {len(args_l)} arguments"
    for i in act:
        assert cots[i] is not None, f"no cotangent for argument {i}"
        assert np.shape(cots[i]) == np.shape(args_l[i]), ("cotangent shape", i)
        if isinstance(args_l[i], np.ndarray):
            assert np.result_type(cots[i]) == args_l[i].dtype, ("cotangent dtype", i)
    lhs = rdot(ybar, yd_f if isinstance(y, tuple) else yd_f[0])
    rhs = sum(rdot(cots[i], tans[i]) for i in act)
    assert abs(lhs - rhs) <= rtol * 10 * (abs(lhs) + abs(rhs)) + atol, ("dot test", lhs, rhs)
    if rrule:  # the reverse rule's cotangents

        def f(*xs: Any) -> Any:
            a = list(args_l)
            for i, x in zip(act, xs, strict=True):
                a[i] = x
            return fn(*a, **kw)

        _, want = rulekit.value_and_pullback(f, ybar, *[args_l[i] for i in act])
        for k, i in enumerate(act):
            _close(cots[i], want[k], rtol, atol, f"vjp vs rrule, argument {i}")


def _rsum(w: Any, v: Any) -> Any:
    """Re Σ conj(w)·v, traceable."""
    return np.sum(np.real(np.conj(w) * v))


def check_traceable(
    fn: Any,
    *args: Any,
    wrt: int = 0,
    active: Sequence[int] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    **kw: Any,
) -> None:
    """Second order: the vjp pullback and the frule, run on traced values, are differentiated
    by the reverse engine; compared with central differences of the same plain-numpy call.

    g₁(x, ȳ) = Re⟨w, pullback(ȳ)[wrt]⟩ and g₂(x, ẋ) = Re⟨v, ẏ⟩, x = args[wrt].
    """
    rng = np.random.default_rng(1)
    args_l = list(args)
    act = [i for i, a in enumerate(args_l) if _inexact(a)] if active is None else list(active)
    fr, vj = impls(fn, args_l)
    flags = tuple(i in act for i in range(len(args_l)))
    y = fn(*args_l, **kw)
    ybar0 = tuple(_like(rng, e) for e in y) if isinstance(y, tuple) else _like(rng, y)
    w = _like(rng, args_l[wrt])
    tan0 = {i: _like(rng, args_l[i]) for i in act}
    v = tuple(_like(rng, e) for e in y) if isinstance(y, tuple) else _like(rng, y)

    def with_x(x: Any) -> list[Any]:
        a = list(args_l)
        a[wrt] = x
        return a

    def g1(x: Any, ybar: Any) -> Any:
        return _rsum(w, vj(flags, *with_x(x), **kw)[1](ybar)[wrt])

    def g2(x: Any, t: Any) -> Any:
        a = with_x(x)
        duals = [Dual(e, t if i == wrt else tan0.get(i)) for i, e in enumerate(a)]
        out = fr(Dual(fn, None), *duals, **kw)
        if isinstance(y, tuple):
            return sum(_rsum(vk, dk) for vk, dk in zip(v, out.dx, strict=True) if dk is not None)
        return _rsum(v, out.dx)

    x0 = args_l[wrt]
    for name, g, second in (("vjp", g1, ybar0), ("frule", g2, tan0[wrt])):
        if isinstance(second, tuple):  # tuple outputs: differentiate w.r.t. x only
            got = rulekit.grad(lambda x, g=g, s=second: g(x, s))(x0)
            want = fd_grad(lambda x, g=g, s=second: g(x, s), (x0,), 0)
            _close(got, want, rtol, atol, f"{name}: d/dx")
            continue
        got = rulekit.grad(g, argnums=(0, 1))(x0, second)
        for k in range(2):
            want = fd_grad(g, (x0, second), k)
            _close(got[k], want, rtol, atol, f"{name}: d/d(argument {k})")


def registered_examples(modules: Sequence[str]) -> list[Any]:
    """pytest params (f, example) for every example of the frules defined in `modules`."""
    out = []
    for r in forward_registry.entries():
        if r.impl.__module__ in modules and r.examples is not None:
            for k, e in enumerate(r.examples() if callable(r.examples) else r.examples):
                out.append(pytest.param(r.f, e, id=f"{rulekit.function_name(r.f)}-{k}"))
    return out


def check_example(fn: Any, ex: Any) -> None:
    """check_call on a registered example (float32/complex64: looser, wider steps)."""
    args = [np.copy(a, order="K") if isinstance(a, np.ndarray) else a for a in ex.args]
    low = any(isinstance(a, np.ndarray) and a.dtype in (np.float32, np.complex64) for a in args)
    tol: dict[str, Any] = {"rtol": 2e-3, "atol": 2e-3, "eps": 1e-2} if low else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (NaN examples: nanmax of a NaN lane)
        check_call(fn, *args, **tol, **ex.kwargs)


# -- the products --------------------------------------------------------------------------------

_DTS = (np.float64, np.complex128)

MATMUL_SHAPES = [
    ((3, 4), (4, 2)),
    ((4,), (4, 2)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((2, 3, 4), (4, 2)),
    ((2, 1, 3, 4), (3, 4, 2)),
    ((3,), (2, 3, 2)),
    ((0, 3), (3, 2)),
]


@pytest.mark.parametrize("dt", _DTS)
@pytest.mark.parametrize("shapes", MATMUL_SHAPES)
@pytest.mark.parametrize("order", ["C", "F", "S", "N"])
def test_matmul(dt: Any, shapes: Any, order: str) -> None:
    rng = np.random.default_rng(3)
    a, b = rnd(rng, shapes[0], dt, order), rnd(rng, shapes[1], dt, "C")
    check_call(np.matmul, a, b)


def test_matmul_mixed_and_float32() -> None:
    rng = np.random.default_rng(4)
    a32, b = rnd(rng, (3, 4), np.float32), rnd(rng, (4, 2))
    check_call(np.matmul, a32, b)
    check_call(np.matmul, a32, rnd(rng, (4, 2), np.float32), rtol=1e-5, atol=1e-5)
    check_call(np.matmul, rnd(rng, (3, 4)), rnd(rng, (4, 2), np.complex128))
    check_call(np.matmul, np.arange(12.0).reshape(3, 4).astype(int), b, active=[1])


DOT_SHAPES = [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)),
              ((2, 3, 4), (2, 4, 3)), ((2, 3, 4), (4,)), ((3, 4), (2, 4, 2))]  # fmt: skip
INNER_SHAPES = [((3, 4), (2, 4)), ((4,), (2, 4)), ((3, 4), (4,)), ((4,), (4,)),
                ((2, 3, 4), (2, 2, 4)), ((2, 3, 4), (4,))]  # fmt: skip


@pytest.mark.parametrize("dt", _DTS)
@pytest.mark.parametrize(
    "fn,shapes", [(np.dot, s) for s in DOT_SHAPES] + [(np.inner, s) for s in INNER_SHAPES]
)
def test_dot_inner(fn: Any, dt: Any, shapes: Any) -> None:
    rng = np.random.default_rng(5)
    check_call(fn, rnd(rng, shapes[0], dt, "F"), rnd(rng, shapes[1], dt))


@pytest.mark.parametrize("fn", [np.dot, np.inner, np.kron])
def test_scalar_operands(fn: Any) -> None:
    rng = np.random.default_rng(6)
    x = rnd(rng, (2, 3))
    check_call(fn, 2.5, x)
    check_call(fn, x, np.float64(-1.5))
    check_call(fn, rnd(rng, (2, 2), np.complex128), 0.75)
    check_call(np.tensordot, 2.5, x, 0)


def test_outer_vdot() -> None:
    rng = np.random.default_rng(7)
    for dt in _DTS:
        check_call(np.outer, rnd(rng, (3,), dt), rnd(rng, (4,), dt))
        check_call(np.outer, rnd(rng, (2, 2), dt), rnd(rng, (3,), dt))
        check_call(np.vdot, rnd(rng, (5,), dt), rnd(rng, (5,), dt))
        check_call(np.vdot, rnd(rng, (2, 3), dt, "F"), rnd(rng, (3, 2), dt))


EINSUM_CASES: list[tuple[Any, ...]] = [
    ("ij,jk->ik", (2, 3), (3, 4)),
    ("ij,jk", (2, 3), (3, 4)),
    ("ii->i", (3, 3)),
    ("ii", (3, 3)),
    ("iij->ji", (3, 3, 2)),
    ("i,i", (4,), (4,)),
    ("...ij,...jk->...ik", (2, 2, 3), (3, 2)),
    ("bi,bj,bk->ijk", (2, 3), (2, 2), (2, 2)),
    ("ij->", (2, 3)),
    ("ij,k->ijk", (2, 1), (3,)),
    ("ij,ij->ij", (2, 1), (2, 3)),
    ("ij,jk,kl->il", (2, 3), (3, 3), (3, 2)),
    ("ijk,j->", (2, 3, 2), (3,)),
]


@pytest.mark.parametrize("dt", _DTS)
@pytest.mark.parametrize("case", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum(case: tuple[Any, ...], dt: Any) -> None:
    rng = np.random.default_rng(8)
    spec, *shapes = case
    ops = [rnd(rng, s, dt, "F" if k else "C") for k, s in enumerate(shapes)]
    check_call(np.einsum, spec, *ops)


def test_einsum_interleaved_and_optimize() -> None:
    rng = np.random.default_rng(9)
    a, b = rnd(rng, (2, 3)), rnd(rng, (3, 4))
    check_call(np.einsum, a, [0, 1], b, [1, 2], [0, 2])
    check_call(np.einsum, a, [0, 1], b, [1, 2])
    check_call(np.einsum, rnd(rng, (2, 3, 3)), [Ellipsis, 0, 0], [Ellipsis, 0])
    check_call(np.einsum, "ij,jk,kl->il", a, b, rnd(rng, (4, 2)), optimize=True)


@pytest.mark.parametrize("fn", [np.tensordot, np.linalg.tensordot])
def test_tensordot(fn: Any) -> None:
    rng = np.random.default_rng(10)
    check_call(fn, rnd(rng, (2, 3, 4)), rnd(rng, (3, 4, 2)))
    check_call(fn, rnd(rng, (2, 3, 4), np.complex128), rnd(rng, (3, 4, 2), np.complex128, "F"))
    if fn is np.tensordot:
        check_call(fn, rnd(rng, (2, 3)), rnd(rng, (3, 4)), 1)
        check_call(fn, rnd(rng, (2, 3, 4)), rnd(rng, (4, 2, 3)), ([1, 2], [2, 0]))
        check_call(fn, rnd(rng, (2, 3)), rnd(rng, (4,)), 0)
        check_call(fn, rnd(rng, (3, 2)), rnd(rng, (2, 3)), axes=([0], [1]))


def test_kron() -> None:
    rng = np.random.default_rng(11)
    check_call(np.kron, rnd(rng, (2, 3)), rnd(rng, (3, 2)))
    check_call(np.kron, rnd(rng, (3,)), rnd(rng, (2, 2)))
    check_call(np.kron, rnd(rng, (2, 2), np.complex128), rnd(rng, (2,)))


# -- second order ----------------------------------------------------------------------------


@pytest.mark.parametrize("dt", _DTS)
@pytest.mark.parametrize("shapes", [((3, 4), (4, 2)), ((4,), (4, 2)), ((2, 3, 4), (4,))])
def test_matmul_twice_differentiable(dt: Any, shapes: Any) -> None:
    rng = np.random.default_rng(13)
    a, b = rnd(rng, shapes[0], dt), rnd(rng, shapes[1], dt)
    check_traceable(np.matmul, a, b, wrt=0)
    check_traceable(np.matmul, a, b, wrt=1)


def test_dot_family_twice_differentiable() -> None:
    rng = np.random.default_rng(14)
    check_traceable(np.dot, rnd(rng, (3, 4)), rnd(rng, (4,)), wrt=0)
    check_traceable(np.dot, rnd(rng, (2, 3, 4)), rnd(rng, (2, 4, 3)), wrt=1)
    check_traceable(np.inner, rnd(rng, (3, 4)), rnd(rng, (2, 4)), wrt=1)
    check_traceable(np.outer, rnd(rng, (3,)), rnd(rng, (2,)), wrt=0)
    check_traceable(np.vdot, rnd(rng, (3,), np.complex128), rnd(rng, (3,), np.complex128))
    check_traceable(np.tensordot, rnd(rng, (2, 3)), rnd(rng, (3, 2)), 1, wrt=1)
    check_traceable(np.kron, rnd(rng, (2,)), rnd(rng, (2, 2)), wrt=0)
    check_traceable(np.dot, 2.0, rnd(rng, (2, 2)), wrt=1)


@pytest.mark.parametrize(
    "case", [c for c in EINSUM_CASES if c[0] in ("ij,jk->ik", "ii->i", "ij->", "ij,ij->ij",
                                                   "...ij,...jk->...ik", "bi,bj,bk->ijk")],
    ids=str,
)  # fmt: skip
def test_einsum_twice_differentiable(case: tuple[Any, ...]) -> None:
    rng = np.random.default_rng(15)
    spec, *shapes = case
    ops = [rnd(rng, s) for s in shapes]
    check_traceable(np.einsum, spec, *ops, wrt=1)
    if len(ops) > 1:
        check_traceable(np.einsum, spec, *ops, wrt=2)


def test_broken_pullback_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks can fail: a pullback that forgets the conjugate fails the dot test."""
    import rules.numpy.forward_products as fp

    monkeypatch.setattr(fp.np, "conj", lambda v: v)
    rng = np.random.default_rng(16)
    with pytest.raises(AssertionError):
        check_call(np.matmul, rnd(rng, (2, 3), np.complex128), rnd(rng, (3, 2), np.complex128),
                   rrule=False)  # fmt: skip


@pytest.mark.parametrize("fn,ex", registered_examples(["rules.numpy.forward_products"]))
def test_registered_examples(fn: Any, ex: Any) -> None:
    """Every example the product rules are registered with (the kit's inputs)."""
    check_example(fn, ex)
