"""`reduce` and `accumulate` of every other declared binary ufunc, from its declaration.

`f.accumulate(x)` along an axis is the left fold  y₀ = x₀,  yₖ = f(yₖ₋₁, xₖ);  `f.reduce(x)`
is its last value. The reverse pass walks the fold backwards with the partials ∂₁f, ∂₂f
that the ufunc's `rulekit.elementwise` declaration already holds (no second copy of the
math):

    tₖ = ȳₖ + cₖ            (cₙ₋₁ = 0; for reduce, ȳₖ = 0 except ȳₙ₋₁ = ȳ)
    x̄ₖ += conj(∂₂f(yₖ₋₁, xₖ, yₖ))·tₖ,   cₖ₋₁ = conj(∂₁f(yₖ₋₁, xₖ, yₖ))·tₖ     (k = n−1 … 1)
    x̄₀ += ȳ₀ + c₀

Each step is one vectorised numpy operation over the other axes. Ufuncs whose methods
have rules of their own (`rules.numpy.ufuncs.methods`: add, multiply, maximum, minimum,
logaddexp, logaddexp2) keep them; registered here are the others (`np.hypot.reduce`,
`np.power.accumulate`, `np.arctan2.reduce`, ...). Options other than `axis` (an int) and
`keepdims` raise NotImplementedError naming what is supported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import rulekit
from rulekit import Array, CoDual, Elementwise, Example, Vararg, example
from rules._support.cotangents import NO_R, accumulate, no_pullback, output_cotangent
from rules._support.outputs import new_output
from rules.numpy.ufuncs import methods as _methods  # noqa: F401  (its rules are kept: first)
from rules.numpy.ufuncs._common import DECLARATIONS

__all__ = ["FOLDS", "fold_rule"]


def _options(name: str, args: tuple[CoDual, ...], kwargs: dict[str, Any], reduce: bool) -> Any:
    """(axis, keepdims) of `f.reduce(x, axis, keepdims=)` / `f.accumulate(x, axis)`."""
    values = [a.x if isinstance(a, CoDual) else a for a in args]
    kw = {k: (v.x if isinstance(v, CoDual) else v) for k, v in kwargs.items()}
    allowed = ("axis", "keepdims") if reduce else ("axis",)
    extra = sorted(set(kw) - set(allowed)) or (["dtype/out/..."] if len(values) > 1 else [])
    axis = values[0] if values else kw.get("axis", 0)
    if extra or not isinstance(axis, (int, np.integer)):
        raise NotImplementedError(
            f"{name}: only an int `axis`{' and `keepdims`' if reduce else ''} are supported "
            f"when differentiating (got {extra or f'axis={axis!r}'}). Fix: move the axis first "
            "(np.moveaxis) or cast beforehand, and call it with an int axis."
        )
    return int(axis), bool(kw.get("keepdims", False))


def fold_rule(uf: np.ufunc, decl: Elementwise, reduce: bool) -> Any:
    """The rule of `uf.reduce` (`reduce=True`) or `uf.accumulate` from `uf`'s declaration."""
    d1, d2 = decl.derivs
    method = "reduce" if reduce else "accumulate"
    name = f"np.{uf.__name__}.{method}"

    def rule(f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        axis, keepdims = _options(name, args, kwargs, reduce)
        X = x.x
        y = (
            getattr(uf, method)(X, axis=axis, keepdims=keepdims)
            if reduce
            else uf.accumulate(X, axis)
        )
        out = new_output(y)
        if x.dx is None:
            return out, no_pullback(2 + len(args))

        rest = (NO_R,) * len(args)  # (axis: not differentiable)

        def fold_pullback(dy: Any) -> tuple[Any, ...]:
            g = np.asarray(output_cotangent(out, dy))
            if X.ndim == 0:  # (numpy reduces a 0-d x to itself)
                return (NO_R, accumulate(x, g), *rest)
            ax = axis % X.ndim
            Xm = np.moveaxis(X, ax, 0)
            n = Xm.shape[0]
            if n == 0:
                return (NO_R, accumulate(x, None), *rest)
            R = uf.accumulate(Xm, axis=0)  # the running values yₖ
            if reduce:
                last = np.squeeze(g, axis=ax) if keepdims else g
                G = None
            else:
                G = np.moveaxis(g, ax, 0)
            dX = np.zeros(Xm.shape, np.result_type(R, g))
            conj = np.conj if dX.dtype.kind == "c" else (lambda v: v)
            carry: Any = last if reduce else 0.0
            with np.errstate(divide="ignore", invalid="ignore"):
                for k in range(n - 1, 0, -1):
                    t = carry if G is None else carry + G[k]
                    a, b, yk = R[k - 1], Xm[k], R[k]
                    dX[k] = conj(d2(a, b, yk)) * t
                    carry = conj(d1(a, b, yk)) * t
            dX[0] = carry if G is None else carry + G[0]
            return (NO_R, accumulate(x, np.moveaxis(dX, 0, ax)), *rest)

        return out, fold_pullback

    rule.__name__ = rule.__qualname__ = f"{uf.__name__}_{method}_rrule"
    rule.__doc__ = f"y = {name}(x, axis): the left fold's adjoint with {uf.__name__}'s partials."
    return rule


def _examples(uf: np.ufunc) -> Any:
    def make() -> list[Example]:
        r = np.random.default_rng(sum(map(ord, uf.__name__)))
        x = r.uniform(0.5, 1.5, (4, 3))
        return [example(x), example(x, 1), example(x.astype(np.float32), 0)]

    return make


def _has_rule(fn: Any) -> bool:
    return any(e.f == fn for e in rulekit.registry.entries())


def _numpy_folds(uf: np.ufunc, reduce: bool) -> bool:
    """Whether numpy runs this method on float arrays as the left fold, in every layout.

    `np.ldexp.reduce` does not run on floats at all, and numpy reduces `np.power` and
    `np.arctan2` of an F-ordered array in another order (a value that differs from the C
    one); such methods get no rule here (a MissingRuleError, never a gradient of another
    function than the one numpy computed).
    """
    x = np.random.default_rng(0).uniform(0.5, 1.5, (4, 3, 2))
    try:
        with np.errstate(all="ignore"):
            for ax in range(3):
                fold = uf.accumulate(x, ax)
                want = np.take(fold, [-1], axis=ax).squeeze(ax) if reduce else fold
                if want.dtype.kind != "f":
                    return False
                for v in (x, np.asfortranarray(x), x.transpose(2, 0, 1).copy().transpose(1, 2, 0)):
                    got = uf.reduce(v, ax) if reduce else uf.accumulate(v, ax)
                    if not np.allclose(got, want, rtol=1e-12, equal_nan=True):
                        return False
    except (TypeError, ValueError):
        return False
    return True


#: the methods registered here: (ufunc, its declaration, reduce (True) or accumulate (False))
FOLDS: list[tuple[np.ufunc, Elementwise, bool]] = []

for _uf, _decl in list(DECLARATIONS.items()):
    if not isinstance(_uf, np.ufunc) or _uf.nin != 2 or _uf.nout != 1 or _decl.nargs != 2:
        continue
    for _reduce in (True, False):
        _fn = _uf.reduce if _reduce else _uf.accumulate
        if _has_rule(_fn) or not _numpy_folds(_uf, _reduce):
            continue
        rulekit.rrule.register(_fn, Array[np.floating], Vararg[Any], examples=_examples(_uf))(
            fold_rule(_uf, _decl, _reduce)
        )
        FOLDS.append((_uf, _decl, _reduce))
