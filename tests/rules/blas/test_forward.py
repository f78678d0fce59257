"""Forward rules and differentiable pullbacks of the BLAS wrappers (rules/blas/forward*.py).

Non-mutating calls: frule vs central differences, vjp vs frule (dot-product test), vjp vs
the reverse (stateful) rule, in s/d/c/z, with transposes, sides, triangles, offsets and
increments. Mutating calls (overwrite flags, axpy, scal): the frule writes the new value
and tangent into the overwritten argument, and refuses a constant one. Second order for
gemm/gemv/dot/nrm2/trsm through the reverse engine. Helpers: test_forward_products.py's.
"""

from __future__ import annotations

import importlib.util
import itertools
import pathlib
from typing import Any

import numpy as np
import pytest

import rules.blas as rb
from rulekit import Dual, TracingError
from rulekit._registry import forward_registry

_spec = importlib.util.spec_from_file_location(
    "_forward_helpers", pathlib.Path(__file__).parents[1] / "numpy" / "test_forward_products.py"
)
assert _spec is not None and _spec.loader is not None
_h = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_h)
check_call, check_traceable, impls, rnd = _h.check_call, _h.check_traceable, _h.impls, _h.rnd

_DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _tol(p: str) -> dict[str, Any]:
    return {"rtol": 2e-3, "atol": 2e-3, "eps": 1e-2} if p in "sc" else {}


def _s(p: str, v: float) -> Any:
    return complex(v, -v / 3) if p in "cz" else v


def _tri(rng: np.random.Generator, n: int, dt: Any, order: str = "F") -> Any:
    return np.array(rnd(rng, (n, n), dt) + 3 * np.eye(n), dtype=dt, order=order)  # type: ignore[call-overload]


@pytest.mark.parametrize("p", "sdcz")
def test_level3(p: str) -> None:
    rng, dt, kw = np.random.default_rng(1), _DT[p], _tol(p)
    g = getattr(rb, p + "gemm")
    check_call(g, _s(p, 1.5), rnd(rng, (3, 4), dt, "F"), rnd(rng, (4, 2), dt, "F"), **kw)
    check_call(g, _s(p, 0.7), rnd(rng, (4, 3), dt, "C"), rnd(rng, (2, 4), dt, "C"), _s(p, 0.5),
               rnd(rng, (3, 2), dt, "C"), 1, 1, **kw)  # fmt: skip
    if p in "cz":
        check_call(g, _s(p, 0.5), rnd(rng, (4, 3), dt), rnd(rng, (4, 2), dt), _s(p, -1.0),
                   rnd(rng, (3, 2), dt), 2, 0, **kw)  # fmt: skip
    sy = getattr(rb, p + "syrk")
    check_call(sy, _s(p, 0.8), rnd(rng, (3, 4), dt, "F"), **kw)
    check_call(sy, _s(p, 0.6), rnd(rng, (4, 3), dt, "C"), _s(p, 0.5), rnd(rng, (3, 3), dt, "C"),
               1, 1, **kw)  # fmt: skip
    for tr in ("trmm", "trsm"):
        f = getattr(rb, p + tr)
        check_call(f, _s(p, 1.2), _tri(rng, 3, dt), rnd(rng, (3, 2), dt, "C"), **kw)
        check_call(f, _s(p, 0.9), _tri(rng, 2, dt, "C"), rnd(rng, (3, 2), dt, "C"), 1, 1, 1,
                   **kw)  # fmt: skip
        check_call(f, -0.7, _tri(rng, 3, dt), rnd(rng, (2, 3), dt, "C"), 1, 0, 0, 1, **kw)
        if p in "cz":
            check_call(f, _s(p, 0.9), _tri(rng, 3, dt, "C"), rnd(rng, (3, 2), dt, "C"), 0, 0, 2,
                       **kw)  # fmt: skip


@pytest.mark.parametrize("p", "sdcz")
def test_level2(p: str) -> None:
    rng, dt, kw = np.random.default_rng(2), _DT[p], _tol(p)
    gv = getattr(rb, p + "gemv")
    check_call(gv, _s(p, 1.5), rnd(rng, (3, 4), dt, "F"), rnd(rng, (4,), dt), **kw)
    check_call(gv, _s(p, 0.8), rnd(rng, (4, 3), dt, "C"), rnd(rng, (4,), dt), _s(p, 0.5),
               rnd(rng, (3,), dt), 0, 1, 0, 1, 1 if p in "sd" else 2, **kw)  # fmt: skip
    check_call(
        gv,
        1.1,
        rnd(rng, (3, 2), dt),
        rnd(rng, (5,), dt),
        0.3,
        rnd(rng, (8,), dt),
        1,
        2,
        1,
        3,
        0,
        **kw,
    )  # strided x (elements 1, 3), y (elements 1, 4, 7)
    # y=None with offy/incy: a new y with zeros between (the reverse rule refuses y=None)
    check_call(gv, 1.1, rnd(rng, (3, 2), dt), rnd(rng, (2,), dt), 0.0, None, 0, 1, 2, 3,
               rrule=False, **kw)  # fmt: skip
    for name in ("ger",) if p in "sd" else ("geru", "gerc"):
        ge = getattr(rb, p + name)
        check_call(ge, _s(p, 1.5), rnd(rng, (3,), dt), rnd(rng, (4,), dt), **kw)
        check_call(ge, _s(p, -0.5), rnd(rng, (3,), dt), rnd(rng, (2,), dt), 1, 1,
                   rnd(rng, (3, 2), dt, "C"), **kw)  # fmt: skip
        check_call(ge, _s(p, 0.7), rnd(rng, (3,), dt), rnd(rng, (2,), dt), -1, 1,
                   rnd(rng, (3, 2), dt, "F"), rrule=False, **kw)  # x reversed  # fmt: skip


@pytest.mark.parametrize("p", "sdcz")
def test_level1(p: str) -> None:
    rng, dt, kw = np.random.default_rng(3), _DT[p], _tol(p)
    for name in ("dot",) if p in "sd" else ("dotu", "dotc"):
        d = getattr(rb, p + name)
        check_call(d, rnd(rng, (5,), dt), rnd(rng, (5,), dt), **kw)
        check_call(d, rnd(rng, (6,), dt), rnd(rng, (6,), dt), 2, 1, 2, 0, 3, **kw)
    nrm = getattr(rb, {"s": "snrm2", "d": "dnrm2", "c": "scnrm2", "z": "dznrm2"}[p])
    check_call(nrm, rnd(rng, (5,), dt), **kw)
    check_call(nrm, rnd(rng, (7,), dt), 3, 1, 2, **kw)


def _fd(fn: Any, args: list[Any], tans: dict[int, Any], eps: float = 1e-6) -> Any:
    def at(s: float) -> Any:
        a = [np.array(v, order="K") if isinstance(v, np.ndarray) else v for v in args]
        for i, t in tans.items():
            a[i] = a[i] + s * t if not isinstance(a[i], np.ndarray) else np.asfortranarray(
                a[i] + s * t) if a[i].flags.f_contiguous else a[i] + s * t  # fmt: skip
        return np.array(fn(*a))

    return (at(eps) - at(-eps)) / (2 * eps)


def _frule(fn: Any, args: list[Any], tans: dict[int, Any]) -> Dual:
    fr = forward_registry.lookup_call(fn, list(args))[1].impl
    return fr(Dual(fn, None), *[Dual(a, tans.get(i)) for i, a in enumerate(args)])


def test_gemm_overwrite_writes_value_and_tangent_in_place() -> None:
    rng = np.random.default_rng(4)
    a, b, c = rnd(rng, (3, 4), order="F"), rnd(rng, (4, 2), order="F"), rnd(rng, (3, 2), order="F")
    args = [1.5, a, b, 0.5, c, 0, 0, 1]
    tans = {0: 0.3, 1: rnd(rng, (3, 4)), 2: rnd(rng, (4, 2)), 3: -0.2,
            4: np.asfortranarray(rnd(rng, (3, 2)))}  # fmt: skip
    want_y = rb.dgemm(1.5, a, b, 0.5, c.copy(order="F"))
    want_t = _fd(rb.dgemm, args, tans)
    cdx = tans[4]
    out = _frule(rb.dgemm, args, tans)
    assert out.x is c and out.dx is cdx, "overwritten in place: the argument and its tangent"
    np.testing.assert_allclose(c, want_y, rtol=1e-12)
    np.testing.assert_allclose(cdx, want_t, rtol=1e-6, atol=1e-8)


def test_overwrite_of_a_constant_is_refused() -> None:
    rng = np.random.default_rng(5)
    c = rnd(rng, (3, 2), order="F")
    args = [1.5, rnd(rng, (3, 4)), rnd(rng, (4, 2)), 0.5, c, 0, 0, 1]
    with pytest.raises(TracingError, match="overwrite"):
        _frule(rb.dgemm, args, {1: rnd(rng, (3, 4))})
    # a C-ordered c is copied by scipy: c and its tangent stay, the result is new
    cc = rnd(rng, (3, 2), order="C")
    before, cdx = cc.copy(), rnd(rng, (3, 2))
    out = _frule(rb.dgemm, [1.5, args[1], args[2], 0.5, cc, 0, 0, 1], {1: rnd(rng, (3, 4)),
                                                                        4: cdx})  # fmt: skip
    assert out.x is not cc and out.dx is not cdx
    np.testing.assert_array_equal(cc, before)


def _overwriting_call(name: str, p: str) -> tuple[list[Any], int]:
    """A call of `p + name` that scipy makes in place, and the index of the argument it
    overwrites (F-contiguous arrays of the routine's dtype, overwrite flag set)."""
    rng, dt = np.random.default_rng(11), _DT[p]

    def f(*shape: int) -> Any:
        return rnd(rng, shape, dt, "F")

    calls: dict[str, tuple[list[Any], int]] = {
        "gemm": ([_s(p, 1.5), f(3, 4), f(4, 2), _s(p, 0.5), f(3, 2), 0, 0, 1], 4),
        "axpy": ([f(5), f(5), 5, _s(p, 0.7)], 1),
        "scal": ([_s(p, 0.7), f(5)], 1),
        "gemv": ([_s(p, 1.5), f(3, 4), f(4), _s(p, 0.5), f(3), 0, 1, 0, 1, 0, 1], 4),
        "ger": ([_s(p, 1.5), f(3), f(2), 1, 1, f(3, 2), 1, 1, 1], 5),
        "syrk": ([_s(p, 0.8), f(3, 4), _s(p, 0.5), f(3, 3), 0, 0, 1], 3),
        "trmm": ([_s(p, 1.2), _tri(rng, 3, dt), f(3, 2), 0, 0, 0, 0, 1], 2),
        "trsm": ([_s(p, 1.2), _tri(rng, 3, dt), f(3, 2), 0, 0, 0, 0, 1], 2),
    }
    return calls[name]


@pytest.mark.parametrize("p", "sdcz")
@pytest.mark.parametrize("name", ["gemm", "axpy", "scal", "gemv", "ger", "syrk", "trmm", "trsm"])
def test_refused_combination_changes_nothing(name: str, p: str) -> None:
    """An active value written in place into a constant argument is refused before the call:
    the output buffer, every other argument and every tangent keep their values."""
    fname = p + (name if name != "ger" or p in "sd" else "geru")
    fn = getattr(rb, fname)
    args, io = _overwriting_call(name, p)
    probe = [_copy(a) for a in args]
    assert fn(*probe) is probe[io], "the call must be one scipy makes in place"
    inputs = [i for i, a in enumerate(args) if _h._inexact(a) and i != io]
    rng = np.random.default_rng(12)
    for k in range(1, len(inputs) + 1):
        for active in itertools.combinations(inputs, k):
            tans = {i: _h._like(rng, args[i]) for i in active}
            before = [_copy(a) for a in args]
            tans_before = {i: _copy(t) for i, t in tans.items()}
            with pytest.raises(TracingError, match=rf"^{fname}: .*overwrites its argument"):
                _frule(fn, args, tans)
            for i, (a, b) in enumerate(zip(args, before, strict=True)):
                np.testing.assert_array_equal(a, b, err_msg=f"argument {i}, active {active}")
            for i, t in tans.items():
                np.testing.assert_array_equal(t, tans_before[i], err_msg=f"tangent {i}")
    # with the overwritten argument active too, the same call is made (in place)
    tans = {i: _h._like(rng, args[i]) for i in [*inputs, io]}
    out = _frule(fn, args, tans)
    assert out.x is args[io] and out.dx is tans[io]


def test_nothing_written_is_not_refused() -> None:
    """n=0: axpy writes no element, so a constant y stays a constant (no refusal)."""
    x, y = np.ones(3), np.zeros(3)
    out = _frule(rb.daxpy, [x, y, 0, 2.0], {3: 1.0})
    assert out.x is y and out.dx is None
    np.testing.assert_array_equal(y, 0.0)


@pytest.mark.parametrize("p", "dz")
def test_axpy_scal_and_trsm_overwrite(p: str) -> None:
    rng, dt = np.random.default_rng(6), _DT[p]
    x, y = rnd(rng, (7,), dt), rnd(rng, (7,), dt)
    args = [x, y, 3, _s(p, -0.4), 0, 2, 1, 2]  # x elements 0, 2, 4 into y elements 1, 3, 5
    tans = {0: rnd(rng, (7,), dt), 1: rnd(rng, (7,), dt), 3: _s(p, 0.25)}
    want_t, want_y = _fd(getattr(rb, p + "axpy"), args, tans), getattr(rb, p + "axpy")(
        x, y.copy(), 3, _s(p, -0.4), 0, 2, 1, 2)  # fmt: skip
    ydx = tans[1]
    out = _frule(getattr(rb, p + "axpy"), args, tans)
    assert out.x is y and out.dx is ydx
    np.testing.assert_allclose(y, want_y, rtol=1e-12)
    np.testing.assert_allclose(ydx, want_t, rtol=1e-6, atol=1e-8)
    x = rnd(rng, (7,), dt)
    args, tans = [_s(p, 1.3), x, 3, 1, 2], {0: _s(p, 0.5), 1: rnd(rng, (7,), dt)}
    want_t = _fd(getattr(rb, p + "scal"), args, tans)
    out = _frule(getattr(rb, p + "scal"), args, tans)
    assert out.x is x and out.dx is tans[1]
    np.testing.assert_allclose(tans[1], want_t, rtol=1e-6, atol=1e-8)
    a, bb = _tri(rng, 3, dt), rnd(rng, (3, 2), dt, "F")
    args = [_s(p, 0.9), a, bb, 0, 1, 0, 0, 1]
    tans = {1: rnd(rng, (3, 3), dt), 2: np.asfortranarray(rnd(rng, (3, 2), dt))}
    want_t = _fd(getattr(rb, p + "trsm"), args, tans)
    out = _frule(getattr(rb, p + "trsm"), args, tans)
    assert out.x is bb and out.dx is tans[2]
    np.testing.assert_allclose(tans[2], want_t, rtol=1e-6, atol=1e-8)


def test_vjp_refuses_overwrite() -> None:
    rng = np.random.default_rng(7)
    c = rnd(rng, (3, 2), order="F")
    _, vj = impls(rb.dgemm, [1.0, rnd(rng, (3, 4)), rnd(rng, (4, 2)), 1.0, c, 0, 0, 1])
    with pytest.raises(NotImplementedError, match="overwrite_c"):
        vj((True,) * 8, 1.0, rnd(rng, (3, 4)), rnd(rng, (4, 2)), 1.0, c, 0, 0, 1)


def test_twice_differentiable() -> None:
    rng = np.random.default_rng(8)
    a, b = rnd(rng, (3, 4), order="F"), rnd(rng, (4, 2), order="F")
    check_traceable(rb.dgemm, 1.5, a, b, wrt=1)
    check_traceable(rb.dgemm, 1.5, rnd(rng, (4, 3)), b, 0.5, rnd(rng, (3, 2)), 1, 0, wrt=2)
    check_traceable(rb.dgemv, 1.5, a, rnd(rng, (3,)), 0.5, rnd(rng, (4,)), 0, 1, 0, 1, 1, wrt=1)
    check_traceable(rb.ddot, rnd(rng, (5,)), rnd(rng, (5,)), wrt=0)
    check_traceable(rb.dnrm2, rnd(rng, (5,)), wrt=0)
    check_traceable(rb.zdotc, rnd(rng, (4,), np.complex128), rnd(rng, (4,), np.complex128))
    check_traceable(rb.dtrsm, 1.2, _tri(rng, 3, np.float64), rnd(rng, (3, 2), order="F"), wrt=1)
    check_traceable(rb.dtrsm, 1.2, _tri(rng, 3, np.float64), rnd(rng, (3, 2), order="F"), wrt=2)
    check_traceable(rb.dsyrk, 0.8, rnd(rng, (3, 4), order="F"), wrt=1)


def _copy(v: Any) -> Any:
    return np.copy(v, order="K") if isinstance(v, np.ndarray) else v


def check_mutating(fn: Any, args: list[Any], io: int, **tol: Any) -> None:
    """A call that overwrites args[io]: the frule writes scipy's value into args[io] and the
    tangent (central differences) into its dx, both in place."""
    rng = np.random.default_rng(9)
    tans = {i: _h._like(rng, a) for i, a in enumerate(args) if _h._inexact(a)}
    want_y = np.array(fn(*[_copy(a) for a in args]))
    want_t = _fd(fn, args, tans, tol.get("eps", 1e-6))
    io_dx = tans[io]
    out = _frule(fn, args, tans)
    assert out.x is args[io] and out.dx is io_dx, "the overwritten argument and its tangent"
    rtol, atol = tol.get("rtol", 1e-6), tol.get("atol", 1e-8)
    np.testing.assert_allclose(args[io], want_y, rtol=1e-5)
    np.testing.assert_allclose(io_dx, want_t, rtol=rtol, atol=atol)


def _examples() -> list[Any]:
    out = []
    for r in forward_registry.entries():
        if r.impl.__module__ == "rules.blas.forward" and r.examples is not None:
            for k, e in enumerate(r.examples() if callable(r.examples) else r.examples):
                out.append(pytest.param(r.f, e, id=f"{r.f.fn.__name__.split()[-1]}-{k}"))
    return out


@pytest.mark.parametrize("fn,ex", _examples())
def test_registered_examples(fn: Any, ex: Any) -> None:
    """Every example the BLAS rules are registered with (the kit's inputs), in its layout."""
    args = [_copy(a) for a in ex.args]
    low = any(isinstance(a, np.ndarray) and a.dtype in (np.float32, np.complex64) for a in args)
    tol: dict[str, Any] = {"rtol": 2e-3, "atol": 2e-3, "eps": 1e-2} if low else {}
    probe = [_copy(a) for a in args]
    y = fn(*probe, **ex.kwargs)
    io = next((i for i, a in enumerate(probe) if a is y), None)
    if io is not None:
        assert not ex.kwargs
        check_mutating(fn, args, io, **tol)
    else:
        name = fn.fn.__name__.split()[-1]
        check_call(fn, *args, rrule=not name.endswith(("axpy", "scal")), **tol, **ex.kwargs)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.complex128])
def test_jvp_through_a_keyword_output_buffer(dt: Any) -> None:
    """`gemm(alpha, a, b, beta=..., c=C)` with a traced C passed by keyword: the BLAS forward
    rule binds arguments by name (`keyword_tangents`), so the tangent of C reaches it."""
    import rulekit

    prefix = {np.float32: "s", np.float64: "d", np.complex128: "z"}[dt]
    gemm = getattr(rb, f"{prefix}gemm")
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(3, 4)).astype(dt), rng.normal(size=(4, 2)).astype(dt)
    c, da, dc = (rng.normal(size=s).astype(dt) for s in ((3, 2), (3, 4), (3, 2)))

    def f(a: Any, c: Any) -> Any:
        return gemm(1.5, a, b, beta=0.5, c=c)

    y, t = rulekit.jvp(f, (a, c), (da, dc))
    tol = 1e-5 if dt is np.float32 else 1e-12
    np.testing.assert_allclose(y, 1.5 * a @ b + 0.5 * c, rtol=tol)
    np.testing.assert_allclose(t, 1.5 * da @ b + 0.5 * dc, rtol=tol, atol=tol)
