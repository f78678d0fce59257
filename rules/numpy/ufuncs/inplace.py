"""`out=` forms of + − · / on real float arrays: in-place arithmetic in one rule and one pass.

The engine gives every rule an `out=` form (compute into a new array, then a
recorded `np.copyto`); for `z += w`, `z *= 2.0` and `np.multiply(z, w, out=z)`
that is two rules, a temporary and three extra passes. These stateful rules
handle the in-place case directly: the forward pushes z's old value into a
pooled buffer and computes in place; the pullback is one fused pass
generated from the declarations of + − · / (`rules.numpy.ufuncs._kernels`) that pulls z̄
back, adds w's share and restores z. Every other `out=` call — an `out` that is
not the first operand, broadcasting, other layouts, keywords — is computed
exactly as the generic mechanism would: the rule without `out=`, then a
`np.copyto` rule, both kept by this rule.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

import rulekit
from rulekit import Array, CoDual, StatefulRRule, TracingError, registry
from rules._support.cotangents import NO_F, NO_R
from rules._support.layout import filled_0d, flat_view
from rules.numpy.copyto import CopyToRule
from rules.numpy.ufuncs._common import DECLARATIONS
from rules.numpy.ufuncs._kernels import kernels_of

__all__ = ["InplaceArithmetic"]

_OPS = ("add", "subtract", "multiply", "divide")
_REAL = (np.dtype(np.float64), np.dtype(np.float32))
RealArray = Union[Array[np.float64], Array[np.float32]]
_COPYTO = CoDual(np.copyto, NO_F)


def _contiguous(a: Any) -> bool:
    f = a.flags
    return bool(f.c_contiguous or f.f_contiguous)


def _one_d(cd: CoDual) -> CoDual:
    """A 0-d array argument as a 1-element 1-D view (its fdata too); anything else as is.

    (A reshape of a 0-d array is always a view: writes through it reach the original.)"""
    x = cd.x
    if type(x) is not np.ndarray or x.ndim:
        return cd
    dx = cd.dx
    return CoDual(x.reshape(1), dx.reshape(1) if type(dx) is np.ndarray else dx)


class InplaceArithmetic(StatefulRRule):
    """`uf(a, b, out=o)` for uf in add, subtract, multiply, divide (see the module docstring)."""

    def __init__(self, uf: np.ufunc) -> None:
        super().__init__()
        self.uf = uf
        self.kernels = kernels_of(DECLARATIONS[uf])
        self._inner: dict[Any, Any] = {}
        self._zerod: dict[str, np.ndarray] = {}  # (`filled_0d`: scalar operands)
        self._copy = CopyToRule()

    def __call__(self, f: CoDual, a: CoDual, b: CoDual, **kw: Any) -> tuple[CoDual, Any]:
        o = kw.pop("out")
        if type(o) is tuple:
            o = o[0]
        if not kw and o is a and self._direct(a, b):
            return self._inplace(a, b)
        return self._composite(f, a, b, o, kw)

    def _direct(self, a: CoDual, b: CoDual) -> bool:
        """z ∘= w with z a traced contiguous float array and w a like-laid-out array or scalar."""
        Z, W, dz = a.x, b.x, a.dx
        if type(Z) is not np.ndarray or Z.dtype not in _REAL or not Z.size or not _contiguous(Z):
            return False
        if type(dz) is not np.ndarray or dz.strides != Z.strides or dz.dtype != Z.dtype:
            return False
        if type(W) is np.ndarray:
            dw = b.dx
            return (
                W.dtype == Z.dtype
                and W.strides == Z.strides
                and W.shape == Z.shape
                and (dw is None or (type(dw) is np.ndarray and dw.strides == Z.strides))
                and not np.may_share_memory(W, Z)
            )
        t = type(W)
        return t is float or t is int or (isinstance(W, np.floating) and W.dtype == Z.dtype)

    def _inplace(self, a: CoDual, b: CoDual) -> tuple[CoDual, Any]:
        Z, W = a.x, b.x
        c_order = Z.flags.c_contiguous  # (an F-ordered Z is saved as its C-ordered Zᵀ,
        tok = self.save(Z if c_order else Z.T)  # so that flat z0 lines up with flat Z)
        z0 = tok.buffer if c_order else tok.buffer.T
        if type(W) is np.ndarray:
            self.uf(Z, W, out=Z)
        else:
            self.uf(Z, filled_0d(self._zerod, W, Z.dtype), out=Z)
        k = self.kernels

        def inplace_pullback(dy: Any) -> tuple[Any, ...]:
            self.pop(tok)  # (first: a second call raises here; z0 is read before any push)
            z, g = flat_view(Z), flat_view(a.dx)
            zf0 = flat_view(z0)
            rb: Any = NO_R
            if type(W) is np.ndarray:
                dw = b.dx
                k.inplace_array(
                    z, zf0, flat_view(W), g, g if dw is None else flat_view(dw), dw is not None
                )
            else:
                dc = k.inplace_scalar(z, zf0, float(W), g, b.dx is not None)
                if b.dx is not None and isinstance(W, (float, np.floating)):
                    rb = type(W)(dc)
            return NO_R, NO_R, rb

        return a, inplace_pullback

    def _composite(self, f: CoDual, a: CoDual, b: CoDual, o: Any, kw: dict) -> tuple[CoDual, Any]:
        """What the generic `out=` mechanism does: y = uf(a, b) by its rule, then copyto(o, y)."""
        if not isinstance(o, CoDual):
            o = CoDual(o, None)
        if o.dx is None and (a.dx is not None or b.dx is not None):
            raise TracingError(
                f"np.{self.uf.__name__}(..., out=...) writes traced values into an untraced "
                "array; make the destination traced (e.g. np.zeros_like of a traced array)."
            )
        if o.dx is None:  # nothing traced: compute in place, restore in the pullback
            tok = self.save(o.x)
            self.uf(a.x, b.x, out=o.x, **kw)

            def constant_pullback(dy: Any) -> tuple[Any, ...]:
                self.restore(tok, into=o.x)
                return NO_R, NO_R, NO_R

            return o, constant_pullback
        # 0-d arrays as 1-element views: the allocation-free rules take those
        a1, b1, o1 = _one_d(a), _one_d(b), _one_d(o)
        rule = self._inner_rule(a1.x, b1.x)
        y, pb_inner = rule(f, a1, b1, **kw)
        _, pb_copy = self._copy(_COPYTO, o1, y)

        def composite_pullback(dy: Any) -> tuple[Any, ...]:
            r = pb_copy(NO_R)  # ȳ: in y's fdata, or (a scalar y, from 0-d operands) r[2]
            return pb_inner(r[2])

        return o, composite_pullback

    def _inner_rule(self, A: Any, B: Any) -> Any:
        """The rule this call gets without `out=` (built once per dispatch key)."""
        key = (type(A), getattr(A, "dtype", None), getattr(A, "ndim", None),
               type(B), getattr(B, "dtype", None), getattr(B, "ndim", None))  # fmt: skip
        # (not np.ndim: on a Python number it makes a 0-d array, an allocation)
        rule = self._inner.get(key)
        if rule is None:
            sig, reg = registry.lookup_call(self.uf, (A, B), None)
            rule = self._inner[key] = reg.impl(sig) if reg.kind == "factory" else reg.impl
        return rule


def _examples(name: str, dt: Any) -> Any:
    def examples() -> list[rulekit.Example]:
        r = np.random.default_rng(len(name))
        pos = lambda *s: np.asarray(r.uniform(0.5, 2.0, size=s), dt)  # noqa: E731  (divisors)
        normal = lambda *s: np.asarray(r.normal(size=s), dt)  # noqa: E731
        z, zf, z2 = normal(3, 4), np.asfortranarray(normal(4, 3)), normal(3, 4)
        return [
            rulekit.example(z, pos(3, 4), out=z),  # z ∘= w: the fused path
            rulekit.example(zf, np.asfortranarray(pos(4, 3)), out=zf),
            rulekit.example(z2, pos(4), out=z2),  # a broadcast w: through copyto
            rulekit.example(normal(3, 4), pos(3, 4), out=normal(3, 4)),  # out is another array
        ]

    return examples


def _scalar_examples(name: str) -> Any:
    def examples() -> list[rulekit.Example]:
        r = np.random.default_rng(len(name) + 1)
        z = r.normal(size=(2, 5))
        zf = np.asfortranarray(r.normal(size=(3, 2)).astype(np.float32))
        return [
            rulekit.example(z, 1.7, out=z),
            rulekit.example(zf, 3, out=zf),
            rulekit.example(r.normal(size=4), 0.5, out=r.normal(size=4)),
        ]

    return examples


def _register() -> None:
    reg = rulekit.build_primitive_rrule.register
    for name in _OPS:
        uf = getattr(np, name)

        def build(sig: Any, uf: np.ufunc = uf) -> InplaceArithmetic:
            return InplaceArithmetic(uf)

        for dt in (np.float64, np.float32):
            reg(uf, Array[dt], Array[dt], out=Array[dt], examples=_examples(name, dt))(build)
        reg(uf, RealArray, Union[float, int], out=RealArray, examples=_scalar_examples(name))(build)


_register()
