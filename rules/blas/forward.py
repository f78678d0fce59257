"""Forward rules (and differentiable pullbacks of the non-mutating calls) for the
scipy.linalg.blas wrappers of `rules.blas`: gemm, gemv, ger/geru/gerc, axpy, scal,
dot/dotu/dotc, nrm2, syrk, trmm, trsm in their s/d/c/z variants.

    gemm:  C' = α·op(A)·op(B) + β·C       Ċ' = α̇·op(A)op(B) + α(op(Ȧ)op(B) + op(A)op(Ḃ)) + β̇C + βĊ
    gemv:  y' = α·op(A)·x + β·y           ẏ' = α̇·op(A)x + α(op(Ȧ)x + op(A)ẋ) + β̇y + βẏ
    ger:   A' = α·x·yᵀ + A (gerc: yᴴ)     Ȧ' = α̇·xyᵀ + α(ẋyᵀ + xẏᵀ) + Ȧ
    axpy:  y' = a·x + y                   ẏ' = ȧx + aẋ + ẏ
    scal:  x' = a·x                       ẋ' = ȧx + aẋ
    dot:   Σ x·y (dotc: Σ conj(x)·y)      Σ ẋ·y + x·ẏ (dotc: conj(ẋ)·y + conj(x)·ẏ)
    nrm2:  ‖x‖                            Re Σ conj(x)·ẋ / ‖x‖  (0 at x = 0)
    syrk:  C' = α·op(A)op(A)ᵀ + βC (one triangle; the other keeps C, or 0 without c)
    trmm:  B' = α·op(T)·B (side=1: α·B·op(T)), T = A's triangle (unit diagonal: diag=1)
    trsm:  X = α·op(T)⁻¹·B ⇒ Ẋ = op(T)⁻¹(α̇B + αḂ − op(Ṫ)X)  (side=1: (α̇B + αḂ − X op(Ṫ))op(T)⁻¹)

op = N, T, C for the flags 0, 1, 2; offsets and increments select the vector elements
(the others keep their values and tangents). The primal is the wrapper's own call
(scipy on plain arrays, its rule on traced ones); tangents are NumPy (trsm's: the trsm
wrapper), so the rules are traceable.

Mutation: where scipy writes into an argument (overwrite_c/y/a/b set and the array
F-contiguous of the routine's dtype; axpy's y and scal's x whenever contiguous), the
frule writes the new tangent into that argument's `dx` in place too. A constant argument
(dx None) that would receive a tangent is refused with TracingError (`_refusal`) before
scipy runs and before any tangent is written: every argument is left as it was. The vjp
rules cover the calls that write into nothing (they refuse the others: the nested engine
then says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Dual, TracingError
from rulekit._declared_rules import shaped_like
from rules._support.forward import register_like
from rules.blas import routines as _routines
from rules.blas._routine import f2py_inplace, f2py_params, op_of
from rules.blas.forward_vjp import register_vjps
from rules.numpy.reductions.forward_common import kind

__all__ = ["bind", "blas_frule", "op", "put", "take"]


# -- argument handling (shared with rules.blas.forward_vjp) -------------------------------------


def bind(wrapper: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's values by scipy's parameter names (positional first, then keywords)."""
    names, _ = f2py_params(wrapper.fn)
    out = dict(zip(names, args, strict=False))
    out.update(kwargs)
    return {k: v for k, v in out.items() if _val(v) is not None}  # (None: not given)


def op(x: Any, flag: Any) -> Any:
    """op(x) for a BLAS transpose flag: x, xᵀ or xᴴ."""
    o = op_of(_val(flag))
    if o == "N":
        return x
    return np.swapaxes(x, 0, 1) if o == "T" else np.conj(np.swapaxes(x, 0, 1))


def take(v: Any, off: int, inc: int, n: int) -> Any:
    """The n elements v[off], v[off + inc], ... (a strided view)."""
    return v[off : off + (n - 1) * inc + 1 : inc] if n > 0 else v[0:0]


def put(v: Any, off: int, inc: int, n: int, new: Any) -> Any:
    """v with the elements `take(v, off, inc, n)` replaced by `new`, built functionally."""
    if n == 0:
        return v
    if off == 0 and inc == 1 and n == np.shape(v)[0]:
        return new
    end = off + (n - 1) * inc + 1
    parts = [v[:off]]
    if n > 1:
        mid = np.reshape(v[off : end - 1], (n - 1, inc))
        cols = [np.reshape(new[:-1], (n - 1, 1))] + ([mid[:, 1:]] if inc > 1 else [])
        parts.append(np.reshape(np.concatenate(cols, axis=1), (-1,)))
    parts += [new[-1:], v[end:]]
    return np.concatenate(parts)


def _val(v: Any) -> Any:
    return v.x if isinstance(v, Dual) else v


def _tan(v: Any) -> Any:
    return v.dx if isinstance(v, Dual) and kind(v.x) in "fc" else None


def _scale(s: Any, t: Any) -> Any:
    """s·t for a constant s and a tangent t (None: no tangent)."""
    return None if t is None else s * t


def _mul(t: Any, v: Any) -> Any:
    """t·v for a tangent t (None: no tangent) and a value v."""
    return None if t is None else t * v


def _sum(*terms: Any) -> Any:
    out = None
    for t in terms:
        if t is not None:
            out = t if out is None else out + t
    return out


def _tri(a: Any, lower: Any, unit: bool) -> Any:
    """A's lower or upper triangle (unit diagonal: the diagonal set to 1)."""
    n = np.shape(a)[0]
    mask = np.tril(np.ones((n, n), bool), -1 if unit else 0) if lower else np.triu(
        np.ones((n, n), bool), 1 if unit else 0)  # fmt: skip
    t = np.where(mask, a, 0)
    return t + np.eye(n, dtype=np.result_type(a)) if unit else t


def _dtri(a: Any, lower: Any, unit: bool) -> Any:
    """The tangent of `_tri`: the triangle of Ȧ (no diagonal when unit)."""
    n = np.shape(a)[0]
    mask = np.tril(np.ones((n, n), bool), -1 if unit else 0) if lower else np.triu(
        np.ones((n, n), bool), 1 if unit else 0)  # fmt: skip
    return np.where(mask, a, 0)


def _vec(b: dict[str, Any], v: str, n: int) -> tuple[Any, Any, int, int]:
    """(selected primal, selected tangent, offset, increment) of vector argument `v`."""
    off, inc = int(_val(b.get("off" + v, 0))), int(_val(b.get("inc" + v, 1)))
    x, dx = _val(b[v]), _tan(b[v])
    return take(x, off, inc, n), None if dx is None else take(dx, off, inc, n), off, inc


def _n(b: dict[str, Any], v: str) -> int:
    if b.get("n") is not None:
        return int(_val(b["n"]))
    x = _val(b[v])
    off, inc = int(_val(b.get("off" + v, 0))), int(_val(b.get("inc" + v, 1)))
    return (np.shape(x)[0] - off + inc - 1) // inc if inc > 0 else 0


# -- the tangents, family by family -----------------------------------------------------------


def _gemm(b: dict[str, Any], name: str) -> tuple[str | None, Any]:
    al, A, B = _val(b["alpha"]), _val(b["a"]), _val(b["b"])
    oa, ob = op(A, b.get("trans_a", 0)), op(B, b.get("trans_b", 0))
    dA, dB = _tan(b["a"]), _tan(b["b"])
    t = _sum(
        _mul(_tan(b["alpha"]), oa @ ob),
        None if dA is None else al * (op(dA, b.get("trans_a", 0)) @ ob),
        None if dB is None else al * (oa @ op(dB, b.get("trans_b", 0))),
    )
    if b.get("c") is not None:
        be = _val(b.get("beta", 0.0))
        t = _sum(t, _mul(_tan(b.get("beta")), _val(b["c"])), _scale(be, _tan(b["c"])))
    return ("c" if b.get("c") is not None else None), t


def _gemv(b: dict[str, Any], name: str) -> tuple[str | None, Any]:
    al, A = _val(b["alpha"]), _val(b["a"])
    trans = b.get("trans", 0)
    oa = op(A, trans)
    m, n = np.shape(oa)
    xs, dxs, _, _ = _vec(b, "x", n)
    dA = _tan(b["a"])
    t = _sum(
        _mul(_tan(b["alpha"]), oa @ xs),
        None if dA is None else al * (op(dA, trans) @ xs),
        None if dxs is None else al * (oa @ dxs),
    )
    offy, incy = int(_val(b.get("offy", 0))), int(_val(b.get("incy", 1)))
    if b.get("y") is None:
        return None, t if t is None else ("put", offy, incy, m, t)
    ys, dys, _, _ = _vec(b, "y", m)
    be = _val(b.get("beta", 0.0))
    t = _sum(t, _mul(_tan(b.get("beta")), ys), _scale(be, dys))
    return "y", ("put", offy, incy, m, t)


def _ger(b: dict[str, Any], name: str) -> tuple[str | None, Any]:
    al = _val(b["alpha"])
    x, y = _val(b["x"]), _val(b["y"])
    ix, iy = int(_val(b.get("incx", 1))), int(_val(b.get("incy", 1)))
    xs, ys = x[::ix], y[::iy]
    dx, dy = _tan(b["x"]), _tan(b["y"])
    dxs, dys = (None if dx is None else dx[::ix]), (None if dy is None else dy[::iy])
    cj = np.conj if name.endswith("gerc") else (lambda v: v)

    def outer(u: Any, v: Any) -> Any:
        return np.reshape(u, (-1, 1)) * np.reshape(cj(v), (1, -1))

    t = _sum(
        _mul(_tan(b["alpha"]), outer(xs, ys)),
        None if dxs is None else al * outer(dxs, ys),
        None if dys is None else al * outer(xs, dys),
        _tan(b["a"]) if b.get("a") is not None else None,
    )
    return ("a" if b.get("a") is not None else None), t


def _axpy(b: dict[str, Any], name: str) -> tuple[str | None, Any]:
    n = _n(b, "x")
    xs, dxs, _, _ = _vec(b, "x", n)
    _, dys, offy, incy = _vec(b, "y", n)
    a = _val(b.get("a", 1.0))
    t = _sum(_mul(_tan(b.get("a")), xs), _scale(a, dxs), dys)
    return "y", ("put", offy, incy, n, t)


def _scal(b: dict[str, Any], name: str) -> tuple[str | None, Any]:
    n = _n(b, "x")
    xs, dxs, offx, incx = _vec(b, "x", n)
    t = _sum(_mul(_tan(b["a"]), xs), _scale(_val(b["a"]), dxs))
    return "x", ("put", offx, incx, n, t)


def _dot(b: dict[str, Any], name: str) -> tuple[str | None, Any]:
    n = _n(b, "x")
    xs, dxs, _, _ = _vec(b, "x", n)
    ys, dys, _, _ = _vec(b, "y", n)
    cj = np.conj if name.endswith("dotc") else (lambda v: v)
    t = _sum(
        None if dxs is None else np.sum(cj(dxs) * ys), None if dys is None else np.sum(cj(xs) * dys)
    )
    return None, t


def _nrm2(b: dict[str, Any], name: str, y: Any) -> Any:
    n = _n(b, "x")
    xs, dxs, _, _ = _vec(b, "x", n)
    if dxs is None:
        return None
    s = np.sum(np.real(np.conj(xs) * dxs))
    return np.where(y != 0, s / np.where(y != 0, y, 1), 0)


def _syrk(b: dict[str, Any], name: str) -> tuple[str | None, Any]:
    al, A = _val(b["alpha"]), _val(b["a"])
    trans = b.get("trans", 0)
    oa = op(A, trans)
    dA = _tan(b["a"])
    t = _sum(
        _mul(_tan(b["alpha"]), oa @ np.swapaxes(oa, 0, 1)),
        None if dA is None else al * (op(dA, trans) @ np.swapaxes(oa, 0, 1)
                                      + oa @ np.swapaxes(op(dA, trans), 0, 1)),
    )  # fmt: skip
    c = b.get("c")
    if c is not None:
        t = _sum(t, _mul(_tan(b.get("beta")), _val(c)), _scale(_val(b.get("beta", 0.0)),
                                                                 _tan(c)))  # fmt: skip
    n = np.shape(oa)[0]
    mask = np.tril(np.ones((n, n), bool)) if _val(b.get("lower", 0)) else np.triu(
        np.ones((n, n), bool))  # fmt: skip
    if t is None:
        return ("c" if c is not None else None), None
    rest = _tan(c) if c is not None else None
    return ("c" if c is not None else None), np.where(mask, t, 0 if rest is None else rest)


def _tr(b: dict[str, Any], name: str, y: Any) -> tuple[str | None, Any]:
    al, A, B = _val(b["alpha"]), _val(b["a"]), _val(b["b"])
    side, lower = int(_val(b.get("side", 0))), int(_val(b.get("lower", 0)))
    trans, unit = b.get("trans_a", 0), bool(_val(b.get("diag", 0)))
    T = op(_tri(A, lower, unit), trans)
    dA, dB, dal = _tan(b["a"]), _tan(b["b"]), _tan(b["alpha"])
    dT = None if dA is None else op(_dtri(dA, lower, unit), trans)
    if name.endswith("trmm"):
        return "b", _sum(
            None if dal is None else dal * (B @ T if side else T @ B),
            None if dT is None else al * (B @ dT if side else dT @ B),
            None if dB is None else al * (dB @ T if side else T @ dB),
        )
    r = _sum(
        None if dal is None else dal * B,
        None if dB is None else al * dB,
        None if dT is None else -(y @ dT if side else dT @ y),
    )
    if r is None:
        return "b", None
    solve = getattr(_routines, name)
    return "b", solve(1.0, A, r, side, lower, _val(b.get("trans_a", 0)), int(unit))


_FAMILY = {"gemm": _gemm, "gemv": _gemv, "ger": _ger, "geru": _ger, "gerc": _ger,
           "axpy": _axpy, "scal": _scal, "dot": _dot, "dotu": _dot, "dotc": _dot,
           "syrk": _syrk}  # fmt: skip
_OVERWRITE = {"c": "overwrite_c", "y": "overwrite_y", "a": "overwrite_a", "b": "overwrite_b"}


def _writes(b: dict[str, Any], io: str, family: str, dtype: Any) -> bool:
    """Whether scipy writes the result into argument `io` (instead of a copy)."""
    nd = 1 if io in ("x", "y") else 2
    if family not in ("axpy", "scal") and not _val(b.get(_OVERWRITE[io], 0)):
        return False
    return f2py_inplace(_val(b[io]), np.dtype(dtype), nd)


def blas_frule(f: Dual, *args: Dual, **kwargs: Any) -> Dual:
    """The tangent of the BLAS call (see the module docstring), written into the
    overwritten argument's dx when scipy overwrites it."""
    wrapper = f.x
    name = wrapper.fn.__name__.split()[-1]
    family = "nrm2" if name.endswith("nrm2") else name[1:]
    dtype = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}[name[0]]
    b = bind(wrapper, args, kwargs)
    io: str | None
    if family in ("trmm", "trsm"):  # the solve needs X: the primal first (B read before)
        io = "b"
        writes = _writes(b, io, family, dtype)
        gets = _tan(b["alpha"]) is not None or _tan(b["a"]) is not None
        if writes and _constant(b[io]) and gets and np.size(_val(b[io])) > 0:
            raise _refusal(name, io, dtype)  # (before the call, which overwrites b)
        old_b = _val(b["b"])
        if writes:
            old_b = old_b.copy()
            b["b"] = Dual(old_b, _tan(b["b"]))
        y = wrapper(*[a.x for a in args], **{k: _val(v) for k, v in kwargs.items()})
        _, t = _tr(b, name, y)
        return _finish(b, name, io, writes, y, t)
    if family == "nrm2":
        y = wrapper(*[a.x for a in args], **{k: _val(v) for k, v in kwargs.items()})
        t = _nrm2(b, name, y)
        return Dual(y, None if t is None else shaped_like(t, y))
    io, t = _FAMILY[family](b, name)  # (tangents before the call: it may overwrite)
    writes = io is not None and _writes(b, io, family, dtype)
    if writes and io is not None and _constant(b[io]) and _writes_tangent(t):
        raise _refusal(name, io, dtype)  # (before the call, which overwrites b[io])
    y = wrapper(*[a.x for a in args], **{k: _val(v) for k, v in kwargs.items()})
    return _finish(b, name, io, writes, y, t)


# (it binds its arguments by name, `bind`: keyword tangents too; see rulekit.frule's doc)
blas_frule.keyword_tangents = True  # type: ignore[attr-defined]


def _writes_tangent(t: Any) -> bool:
    """Whether a family's tangent `t` (an array, None, or a ("put", off, inc, n, new) of
    selected vector elements) puts a tangent into at least one element of the output."""
    if isinstance(t, tuple) and t and t[0] == "put":
        return t[4] is not None and int(t[3]) > 0
    return t is not None and 0 not in np.shape(t)


def _constant(d: Any) -> bool:
    """Whether a bound argument has no tangent (a constant)."""
    return not isinstance(d, Dual) or d.dx is None


def _refusal(name: str, io: str, dtype: Any) -> TracingError:
    """The error for a call that would overwrite the constant argument `io` in place with a
    value that has a tangent. `blas_frule` raises it before the primal runs and before any
    tangent is written, so a refused call leaves every argument (values and tangents) as
    it was."""
    dt = np.dtype(dtype).name
    if name[1:] in ("axpy", "scal"):
        where = f"a contiguous {dt} array: scipy writes into it"
        how = f"compute {'a * x + y' if name.endswith('axpy') else 'a * x'} with NumPy instead"
    else:
        where = f"overwrite_{io}=1 on an F-contiguous {dt} array: scipy writes into it"
        how = f"pass overwrite_{io}=0 (scipy then returns a new array)"
    return TracingError(
        f"{name}: the call overwrites its argument {io!r} in place ({where}) with a value that "
        f"has a tangent, but {io!r} is a constant (no tangent), so the derivative of its new "
        f"value would be lost. Fix: differentiate with respect to {io!r} too (give it a "
        f"tangent; zeros keep the result exact), or {how}. Refused before the call: every "
        "argument is unchanged."
    )


def _finish(b: dict[str, Any], name: str, io: str | None, writes: bool, y: Any, t: Any) -> Dual:
    written = _writes_tangent(t)
    if isinstance(t, tuple) and t and t[0] == "put":  # selected vector elements
        _, off, inc, n, new = t
        base = _tan(b[io]) if io is not None else None
        if new is None and base is None:
            t = None
        else:
            if new is None:
                new = take(base, off, inc, n)
            if base is None:
                base = np.zeros(np.shape(y), np.result_type(y))
            t = put(base, off, inc, n, new)
    if t is not None:
        t = shaped_like(t, y)
    if not writes:
        return Dual(y, t)
    assert io is not None
    d = b[io]
    if t is None:
        return Dual(y, d.dx if isinstance(d, Dual) else None)
    if not isinstance(d, Dual) or d.dx is None:
        if not written:  # (no element written with a tangent, e.g. n=0: it stays constant)
            return Dual(y, None)
        raise _refusal(name, io, np.result_type(y))  # (not reached: refused before the call)
    d.dx[...] = t
    return Dual(y, d.dx)


for _name in _routines.__all__:
    register_like(getattr(_routines, _name), frule=blas_frule)
register_vjps()
