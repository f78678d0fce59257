"""Forward rules and differentiable pullbacks derived from the one declaration of a function.

An elementwise declaration (`rulekit.elementwise`) gives its partials ∂ᵢf; a
linear one (`rulekit.linear`) gives the map and its adjoint. From them:

* elementwise, forward: ẏ = Σᵢ ∂ᵢf · ẋᵢ over the operands with a tangent;
* elementwise, pullback: x̄ᵢ = unbroadcast(conj(∂ᵢf) · ȳ) (Re for a real xᵢ);
* linear, forward: ẏ = L ẋ (the declared tangent map applied to the tangents,
  zeros for constant linear arguments);
* linear, pullback: x̄ᵢ = Lᵢᴴ ȳ, the declared adjoint.

All four are plain NumPy on their arguments and return new arrays, so they run
on values traced by an enclosing transformation too: that is what makes the
declared functions differentiable to any order. The registrations use the
declaration's own patterns (`register_both`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit._cotangents import unbroadcast
from rulekit._dual import Dual
from rulekit._functions import call
from rulekit._registry import forward_registry, vjp_registry

__all__ = ["elementwise_frule", "elementwise_vjp", "linear_frule", "linear_vjp", "register_both",
           "shaped_like"]  # fmt: skip

_INEXACT = (float, complex, np.inexact)


def _inexact(x: Any) -> bool:
    """Whether value `x` (possibly traced) is float/complex: has a derivative."""
    dt = getattr(x, "dtype", None)
    if dt is not None:
        return bool(dt.kind in "fc")
    return isinstance(x, _INEXACT)


def shaped_like(t: Any, y: Any) -> Any:
    """Tangent or cotangent `t` as a value of `y`'s shape and dtype (broadcast up; a
    complex `t` of a real `y` keeps its real part)."""
    shape = np.shape(y)
    dt = getattr(y, "dtype", None)
    if dt is None:
        dt = np.result_type(y)
    if np.iscomplexobj(t) and dt.kind != "c":
        t = np.real(t)
    if np.shape(t) != shape:
        t = np.zeros(shape, dt) + t
    tdt = getattr(t, "dtype", None)
    if tdt is not None and tdt != dt and dt.kind in "fc":
        t = t.astype(dt)
    return t


def _reduce_to(g: Any, x: Any) -> Any:
    """Cotangent `g` (of the broadcast shape) reduced to operand `x`'s shape and kind."""
    g = unbroadcast(g, np.shape(x)) if np.shape(g) != np.shape(x) else g
    if np.iscomplexobj(g) and not np.iscomplexobj(x):
        g = np.real(g)
    if np.ndim(x) == 0 and np.ndim(g) != 0:
        g = np.reshape(g, ())
    return g


def elementwise_frule(decl: Any) -> Callable[..., Dual]:
    """The forward rule of elementwise declaration `decl`: ẏ = Σᵢ ∂ᵢf · ẋᵢ."""
    fn = decl.fn

    def rule(f: Dual, *args: Dual, **kw: Any) -> Dual:
        xs = [a.x for a in args]
        if kw:
            kw, xs = decl._keywords(kw, xs)
        y = call(fn, xs, kw)
        need = [a.dx is not None and _inexact(a.x) for a in args]
        if not any(need) or not _inexact(y):
            return Dual(y, None)
        t = None
        for d, a, k in zip(decl.partials(xs, y, need), args, need, strict=True):
            if not k:
                continue
            term = a.dx if type(d) in (int, float) and d == 1 else d * a.dx
            t = term if t is None else t + term
        return Dual(y, shaped_like(t, y))

    rule.__name__ = rule.__qualname__ = f"{decl.name}_frule"
    rule.__doc__ = f"ẏ = Σᵢ ∂ᵢ{decl.name} · ẋᵢ (derived from its elementwise declaration)."
    return rule


def elementwise_vjp(decl: Any) -> Callable[..., tuple[Any, Any]]:
    """The differentiable pullback of `decl`: x̄ᵢ = unbroadcast(conj(∂ᵢf) · ȳ)."""
    fn = decl.fn

    def rule(active: Sequence[bool], *xs: Any, **kw: Any) -> tuple[Any, Any]:
        xs_ = list(xs)
        if kw:
            kw, xs_ = decl._keywords(kw, xs_)
        y = call(fn, xs_, kw)
        need = [bool(k) and _inexact(x) for k, x in zip(active, xs_, strict=True)]

        def pullback(g: Any) -> tuple[Any, ...]:
            out: list[Any] = []
            for d, x, k in zip(decl.partials(xs_, y, need), xs_, need, strict=True):
                if not k:
                    out.append(None)
                    continue
                if type(d) in (int, float) and d == 1:
                    c = g
                else:
                    c = (np.conjugate(d) if np.iscomplexobj(d) else d) * g
                out.append(_reduce_to(c, x))
            return tuple(out)

        return y, pullback

    rule.__name__ = rule.__qualname__ = f"{decl.name}_vjp"
    rule.__doc__ = f"x̄ᵢ = unbroadcast(conj(∂ᵢ{decl.name})·ȳ) (from its elementwise declaration)."
    return rule


def _zeros_for(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return type(x)(_zeros_for(e) for e in x)
    if hasattr(x, "shape"):
        return np.zeros(np.shape(x), x.dtype)
    return type(x)(0)


def _fill(x: Any, t: Any) -> Any:
    """Tangent `t` of argument `x` with zeros for constants (None, or None elements)."""
    if t is None:
        return _zeros_for(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_fill(e, s) for e, s in zip(x, t, strict=True))
    return t


def linear_frule(decl: Any) -> Callable[..., Dual]:
    """The forward rule of linear declaration `decl`: ẏ = L ẋ."""
    fn, tangent, argnums = decl.fn, decl.tangent, decl.argnums

    def rule(f: Dual, *args: Dual, **kw: Any) -> Dual:
        xs = [a.x for a in args]
        y = call(fn, xs, kw)
        present = [i for i in argnums if i < len(args)]
        if not _has_tangent(args, present) or not _carries(y):
            return Dual(y, None)
        targs = list(xs)
        for i in present:
            targs[i] = _fill(xs[i], args[i].dx)
        return Dual(y, call(tangent, targs, kw))

    rule.__name__ = rule.__qualname__ = f"{decl.name}_frule"
    rule.__doc__ = f"ẏ = {decl.name}(ẋ) (from its linear declaration)."
    return rule


def _has_tangent(args: Sequence[Dual], present: Sequence[int]) -> bool:
    for i in present:
        dx = args[i].dx
        if dx is None:
            continue
        if isinstance(dx, (list, tuple)) and all(e is None for e in dx):
            continue
        return True
    return False


def _carries(y: Any) -> bool:
    if isinstance(y, (list, tuple)):
        return any(_carries(e) for e in y)
    return _inexact(y)


def linear_vjp(decl: Any) -> Callable[..., tuple[Any, Any]] | None:
    """The differentiable pullback of `decl`: x̄ᵢ = Lᵢᴴ ȳ (None for an `in_place` adjoint,
    which writes into x̄: no functional form)."""
    if decl.in_place:
        return None
    fn, pairs = decl.fn, list(zip(decl.argnums, decl.adjoints, strict=True))

    def rule(active: Sequence[bool], *xs: Any, **kw: Any) -> tuple[Any, Any]:
        y = call(fn, xs, kw)

        def pullback(g: Any) -> tuple[Any, ...]:
            if isinstance(y, (tuple, list)) and isinstance(g, (tuple, list)):  # (np.split's
                # pieces: those without a cotangent get zeros, as the reverse engine gives)
                g = type(y)(np.zeros(np.shape(e), e.dtype) if c is None else c
                            for e, c in zip(y, g, strict=True))  # fmt: skip
            out: list[Any] = [None] * len(xs)
            for i, adjoint in pairs:
                if i < len(xs) and active[i]:
                    out[i] = _cast_like(xs[i], adjoint(g, *xs, **kw))
            return tuple(out)

        return y, pullback

    rule.__name__ = rule.__qualname__ = f"{decl.name}_vjp"
    rule.__doc__ = f"x̄ = {decl.name}ᴴ(ȳ) (from its linear declaration)."
    return rule


def _cast_like(x: Any, g: Any) -> Any:
    """Adjoint `g` for argument `x`: x's shape (broadcast adjoints reduced), Re for real x."""
    if isinstance(x, (list, tuple)):
        return type(x)(_cast_like(e, c) for e, c in zip(x, g, strict=True))
    if g is None or not _inexact(x):
        return None
    return _reduce_to(g, x)


def register_both(
    fn: Any,
    patterns: Sequence[Any],
    forward: Callable[..., Any] | None,
    vjp: Callable[..., Any] | None,
    examples: Any,
    module: str,
) -> None:
    """Register a declaration's forward rule and differentiable pullback for `patterns`."""
    if forward is not None:
        forward_registry.add("frule", fn, patterns, forward, examples=examples, module=module)
    if vjp is not None:
        vjp_registry.add("vjp", fn, patterns, vjp, examples=examples, module=module)
