"""Differentiable pullbacks of the BLAS calls that write into nothing (overwrite flags off):
gemm, gemv, ger/geru/gerc, dot/dotu/dotc, nrm2, syrk, trmm, trsm. G is ȳ, op(X) as
in rules.blas.forward, ⟨U, V⟩ = Σ conj(U)·V; a transposed operand gets op's adjoint.

    gemm:  op(A)̄ = conj(α)·G·op(B)ᴴ, op(B)̄ = conj(α)·op(A)ᴴ·G, ᾱ = ⟨op(A)op(B), G⟩,
           C̄ = conj(β)·G, β̄ = ⟨C, G⟩
    gemv:  the same with x, y (the selected elements; y's others pass G through)
    ger:   Ā = G, ᾱ = ⟨x yᵀ, G⟩, x̄ = conj(α)·G·conj(y), ȳ = conj(α)·Gᵀ·conj(x)
           (gerc, A' = α x yᴴ + A: x̄ = conj(α)·G·y, ȳ = α·Gᴴ·x)
    dot:   x̄ = G·conj(y), ȳ = G·conj(x)   (dotc: x̄ = conj(G)·y, ȳ = G·x)
    nrm2:  x̄ = G·x/‖x‖ (0 at x = 0)
    syrk:  with Gₘ = G on the written triangle: P = op(A), P̄ = conj(α)(Gₘ + Gₘᵀ)·conj(P),
           ᾱ = ⟨PPᵀ, Gₘ⟩, C̄ = conj(β)·Gₘ + (G off the triangle), β̄ = ⟨C, Gₘ⟩
    trmm:  B' = α·T·B: B̄ = conj(α)·Tᴴ·G, T̄ = conj(α)·G·Bᴴ
           (side=1: B̄ = conj(α)·G·Tᴴ, T̄ = conj(α)·Bᴴ·G)
    trsm:  X = α·T⁻¹B: Z = T⁻ᴴG, B̄ = conj(α)·Z, T̄ = −Z·Xᴴ, ᾱ = ⟨B, Z⟩  (side=1: Z = G·T⁻ᴴ,
           T̄ = −Xᴴ·Z); T̄ lands on A's triangle (not on a unit diagonal)

The solves use the trsm wrappers themselves (their rules when traced).

A call that writes into its argument (overwrite_c/y/a/b=1 on an F-contiguous array of the
routine's dtype: scipy works in place) has no differentiable pullback: the rule refuses it
(NotImplementedError, before the call) and nested reverse mode says so. Such a call mutates
an argument. A traced keyword argument is refused too: a pullback returns cotangents for
the positional arguments only. The kit proves a vjp rule only on calls that mutate nothing
(in every layout it tries: an F-ordered copy of a C-ordered c is overwritten) and gives a
keyword array a cotangent, so the vjp registrations carry the reverse rules' examples
without those that set an overwrite flag or pass an array by keyword (`_served`; they are
checked as forward and reverse rules, the refusal by tests/rules/blas/test_forward.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Example
from rulekit._registry import vjp_registry
from rulekit._signature import unwrap
from rules._support.forward import register_like
from rules.blas import routines as _routines
from rules.blas._routine import f2py_inplace, f2py_params, op_of
from rules.numpy.reductions.forward_common import cot_like, kind

__all__ = ["register_vjps"]


_Bound = tuple[dict[str, Any], tuple[str, ...]]


def _bind(wrapper: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> _Bound:
    names, _ = f2py_params(wrapper.fn)
    b = dict(zip(names, args, strict=False))
    b.update(kwargs)
    return {k: v for k, v in b.items() if v is not None}, names


def _op(x: Any, flag: Any) -> Any:
    o = op_of(flag)
    if o == "N":
        return x
    return np.swapaxes(x, 0, 1) if o == "T" else np.conj(np.swapaxes(x, 0, 1))


def _op_adj(g: Any, flag: Any) -> Any:
    """The cotangent of X from that of op(X)."""
    o = op_of(flag)
    if o == "N":
        return g
    return np.swapaxes(g, 0, 1) if o == "T" else np.conj(np.swapaxes(g, 0, 1))


def _inner(u: Any, g: Any) -> Any:
    return np.sum(np.conj(u) * g)


def _take(v: Any, off: int, inc: int, n: int) -> Any:
    return v[off : off + (n - 1) * inc + 1 : inc] if n > 0 else v[0:0]


def _put(v: Any, off: int, inc: int, n: int, new: Any) -> Any:
    from rules.blas.forward import put

    return put(v, off, inc, n, new)


def _vec(b: dict[str, Any], v: str, n: int) -> tuple[Any, int, int]:
    off, inc = int(b.get("off" + v, 0)), int(b.get("inc" + v, 1))
    return _take(b[v], off, inc, n), off, inc


def _mask(n: int, lower: Any, unit: bool = False) -> Any:
    if lower:
        return np.tril(np.ones((n, n), bool), -1 if unit else 0)
    return np.triu(np.ones((n, n), bool), 1 if unit else 0)


def _tri(a: Any, lower: Any, unit: bool) -> Any:
    n = np.shape(a)[0]
    t = np.where(_mask(n, lower, unit), a, 0)
    return t + np.eye(n, dtype=np.result_type(a)) if unit else t


def _gemm(b: dict[str, Any], G: Any, name: str) -> dict[str, Any]:
    al, ta, tb = b["alpha"], b.get("trans_a", 0), b.get("trans_b", 0)
    oa, ob = _op(b["a"], ta), _op(b["b"], tb)
    r = {
        "alpha": lambda: _inner(oa @ ob, G),
        "a": lambda: _op_adj(np.conj(al) * (G @ np.conj(np.swapaxes(ob, 0, 1))), ta),
        "b": lambda: _op_adj(np.conj(al) * (np.conj(np.swapaxes(oa, 0, 1)) @ G), tb),
    }
    if b.get("c") is not None:
        r["beta"] = lambda: _inner(b["c"], G)
        r["c"] = lambda: np.conj(b.get("beta", 0.0)) * G
    return r


def _gemv(b: dict[str, Any], G: Any, name: str) -> dict[str, Any]:
    al, trans = b["alpha"], b.get("trans", 0)
    oa = _op(b["a"], trans)
    m, n = np.shape(oa)
    xs, offx, incx = _vec(b, "x", n)
    offy, incy = int(b.get("offy", 0)), int(b.get("incy", 1))
    gs = _take(G, offy, incy, m)
    r = {
        "alpha": lambda: _inner(oa @ xs, gs),
        "a": lambda: _op_adj(np.conj(al) * (np.reshape(gs, (-1, 1)) * np.reshape(np.conj(xs),
                                                                                (1, -1))), trans),
        "x": lambda: _put(np.zeros(np.shape(b["x"]), np.result_type(G)), offx, incx, n,
                          np.conj(al) * (np.conj(np.swapaxes(oa, 0, 1)) @ gs)),
    }  # fmt: skip
    if b.get("y") is not None:
        ys, _, _ = _vec(b, "y", m)
        r["beta"] = lambda: _inner(ys, gs)
        r["y"] = lambda: _put(G, offy, incy, m, np.conj(b.get("beta", 0.0)) * gs)
    return r


def _ger(b: dict[str, Any], G: Any, name: str) -> dict[str, Any]:
    al = b["alpha"]
    ix, iy = int(b.get("incx", 1)), int(b.get("incy", 1))  # (±1: x or x reversed)
    xs, ys = b["x"][::ix], b["y"][::iy]
    c = name.endswith("gerc")
    yy = np.conj(ys) if c else ys
    r = {
        "alpha": lambda: _inner(np.reshape(xs, (-1, 1)) * np.reshape(yy, (1, -1)), G),
        "x": lambda: (np.conj(al) * (G @ np.conj(yy)))[::ix],
        "y": lambda: ((al * (np.conj(np.swapaxes(G, 0, 1)) @ xs)) if c
                      else np.conj(al) * (np.swapaxes(G, 0, 1) @ np.conj(xs)))[::iy],
    }  # fmt: skip
    if b.get("a") is not None:
        r["a"] = lambda: G
    return r


def _dot(b: dict[str, Any], G: Any, name: str) -> dict[str, Any]:
    n = int(b["n"]) if b.get("n") is not None else (
        (np.shape(b["x"])[0] - int(b.get("offx", 0)) + int(b.get("incx", 1)) - 1)
        // int(b.get("incx", 1)))  # fmt: skip
    xs, offx, incx = _vec(b, "x", n)
    ys, offy, incy = _vec(b, "y", n)
    c = name.endswith("dotc")
    gx = np.conj(G) * ys if c else G * np.conj(ys)
    gy = G * xs if c else G * np.conj(xs)
    return {
        "x": lambda: _put(np.zeros(np.shape(b["x"]), np.result_type(gx)), offx, incx, n, gx),
        "y": lambda: _put(np.zeros(np.shape(b["y"]), np.result_type(gy)), offy, incy, n, gy),
    }


def _nrm2(b: dict[str, Any], G: Any, name: str, y: Any) -> dict[str, Any]:
    n = int(b["n"]) if b.get("n") is not None else (
        (np.shape(b["x"])[0] - int(b.get("offx", 0)) + int(b.get("incx", 1)) - 1)
        // int(b.get("incx", 1)))  # fmt: skip
    xs, offx, incx = _vec(b, "x", n)
    s = np.where(y != 0, G / np.where(y != 0, y, 1), 0)
    return {"x": lambda: _put(np.zeros(np.shape(b["x"]), np.result_type(xs)), offx, incx, n,
                              s * xs)}  # fmt: skip


def _syrk(b: dict[str, Any], G: Any, name: str) -> dict[str, Any]:
    al, trans = b["alpha"], b.get("trans", 0)
    P = _op(b["a"], trans)
    n = np.shape(P)[0]
    mask = _mask(n, b.get("lower", 0))
    Gm = np.where(mask, G, 0)
    r = {
        "alpha": lambda: _inner(P @ np.swapaxes(P, 0, 1), Gm),
        "a": lambda: _op_adj(np.conj(al) * ((Gm + np.swapaxes(Gm, 0, 1)) @ np.conj(P)), trans),
    }
    if b.get("c") is not None:
        r["beta"] = lambda: _inner(b["c"], Gm)
        r["c"] = lambda: np.where(mask, np.conj(b.get("beta", 0.0)) * G, G)
    return r


def _solve_h(wrapper: Any, A: Any, G: Any, side: int, lower: int, trans: Any, unit: int) -> Any:
    """op(T)⁻ᴴ·G (side=1: G·op(T)⁻ᴴ) with T = A's triangle, by the trsm wrapper."""
    o = op_of(trans)
    if o == "N":
        return wrapper(1.0, A, G, side, lower, 2, unit)
    if o == "C":
        return wrapper(1.0, A, G, side, lower, 0, unit)
    return np.conj(wrapper(1.0, A, np.conj(G), side, lower, 0, unit))


def _tr(b: dict[str, Any], G: Any, name: str, y: Any) -> dict[str, Any]:
    al, A, B = b["alpha"], b["a"], b["b"]
    side, lower = int(b.get("side", 0)), int(b.get("lower", 0))
    trans, unit = b.get("trans_a", 0), int(b.get("diag", 0))
    n = np.shape(A)[0]

    def to_a(tbar: Any) -> Any:  # T̄ of T = op(tri(A)) onto A's triangle
        return np.where(_mask(n, lower, bool(unit)), _op_adj(tbar, trans), 0)

    if name.endswith("trmm"):
        T = _op(_tri(A, lower, bool(unit)), trans)
        TH = np.conj(np.swapaxes(T, 0, 1))
        BH = np.conj(np.swapaxes(B, 0, 1))
        return {
            "alpha": lambda: _inner(B @ T if side else T @ B, G),
            "b": lambda: np.conj(al) * (G @ TH if side else TH @ G),
            "a": lambda: to_a(np.conj(al) * (BH @ G if side else G @ BH)),
        }
    Z = _solve_h(getattr(_routines, name), A, G, side, lower, trans, unit)
    XH = np.conj(np.swapaxes(y, 0, 1))
    return {
        "alpha": lambda: _inner(B, Z),
        "b": lambda: np.conj(al) * Z,
        "a": lambda: to_a(-(XH @ Z if side else Z @ XH)),
    }


_FAMILY = {"gemm": _gemm, "gemv": _gemv, "ger": _ger, "geru": _ger, "gerc": _ger,
           "dot": _dot, "dotu": _dot, "dotc": _dot, "syrk": _syrk}  # fmt: skip
_WRITES = {"gemm": ("c", 2), "gemv": ("y", 1), "ger": ("a", 2), "geru": ("a", 2),
           "gerc": ("a", 2), "syrk": ("c", 2), "trmm": ("b", 2), "trsm": ("b", 2)}  # fmt: skip
_DT = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _overwrites(name: str, b: dict[str, Any]) -> str | None:
    """The argument the call `name(**b)` writes into in place (scipy's rule: overwrite flag
    set, an F-contiguous array of the routine's dtype), None if it writes into nothing."""
    io = _WRITES.get("nrm2" if name.endswith("nrm2") else name[1:])
    if io is None or b.get(io[0]) is None or not b.get("overwrite_" + io[0], 0):
        return None
    return io[0] if f2py_inplace(b[io[0]], np.dtype(_DT[name[0]]), io[1]) else None


def _vjp(wrapper: Any) -> Any:
    name = wrapper.fn.__name__.split()[-1]
    family = "nrm2" if name.endswith("nrm2") else name[1:]

    def rule(active: Sequence[bool], *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        b, names = _bind(wrapper, args, kwargs)
        io = _overwrites(name, b)
        if io is not None:  # (before the call: it would write into `io`)
            raise NotImplementedError(
                f"{name} with overwrite_{io}=1 writes into {io}: it has no differentiable "
                f"pullback (nested reverse mode); pass overwrite_{io}=0."
            )
        for k, v in kwargs.items():
            if v is not None and not isinstance(v, (np.ndarray, np.generic, int, float, complex,
                                                    str)):  # fmt: skip
                raise NotImplementedError(
                    f"{name}: the traced keyword argument {k}= gets no cotangent from this "
                    "differentiable pullback; pass it positionally."
                )
        y = wrapper(*args, **kwargs)

        def blas_pullback(G: Any) -> tuple[Any, ...]:
            if family == "nrm2":
                parts = _nrm2(b, G, name, y)
            elif family in ("trmm", "trsm"):
                parts = _tr(b, G, name, y)
            else:
                parts = _FAMILY[family](b, G, name)
            parts.setdefault("beta", lambda: np.zeros(()))  # (no c/y: β meets nothing)
            res: list[Any] = []
            for i, a in enumerate(args):
                nm = names[i] if i < len(names) else ""
                if active[i] and nm in parts and kind(a) in "fc":
                    res.append(cot_like(parts[nm](), a))
                else:
                    res.append(None)
            return tuple(res)

        return y, blas_pullback

    rule.__name__ = rule.__qualname__ = f"{name}_vjp"
    rule.__doc__ = __doc__
    return rule


def _served(wrapper: Any, examples: Any) -> Any:
    """`examples` (a list or a callable returning one) without the calls that set an
    overwrite flag (in place in some layout) or pass an array by keyword: the calls the vjp
    rule serves, in every layout (see the module docstring)."""
    name = wrapper.fn.__name__.split()[-1]
    io = _WRITES.get(name[1:])

    def keep(ex: Example) -> bool:
        if any(isinstance(v, np.ndarray) for v in ex.kwargs.values()):
            return False
        return io is None or not _bind(wrapper, ex.args, ex.kwargs)[0].get("overwrite_" + io[0])

    def filtered() -> list[Example]:
        return [ex for ex in (examples() if callable(examples) else examples) if keep(ex)]

    return None if examples is None else filtered


def register_vjps() -> None:
    """Register the differentiable pullbacks (all families but axpy and scal, which write),
    with the examples of the calls they serve (`_served`)."""
    for n in _routines.__all__:
        w = getattr(_routines, n)
        if not (n.endswith("axpy") or n.endswith("scal")):
            register_like(w, vjp=_vjp(w))
            for r in vjp_registry.entries():
                if r.f == unwrap(w) and r.kind == "vjp":
                    r.examples = _served(w, r.examples)
