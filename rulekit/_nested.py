"""Running a function under a level: nested `value_and_grad` and `jvp`'s core.

`nested_value_and_grad` is what `value_and_grad` does when it starts inside
another transformation (`rulekit._engine._levels.nesting`): a `ReverseLevel`
traces the function, its backward pass runs the differentiable pullbacks, and
the gradient (a value the enclosing levels trace) is returned. `jvp_values`
runs a function under a `ForwardLevel` and returns its primal and tangent
outputs. Arguments may be arrays, scalars, and tuples/lists/dicts of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit._engine._levels import LevelValue, inexact, plain
from rulekit._errors import TracingError
from rulekit._forward import ForwardLevel, ForwardValue, tangent_input
from rulekit._reverse_level import ReverseLevel, ReverseValue

__all__ = ["jvp_values", "map_leaves", "nested_value_and_grad", "nested_vjp", "zeros_like_value"]


def map_leaves(fn: Callable[..., Any], x: Any, *rest: Any) -> Any:
    """`fn` applied to each leaf of `x` (tuples, lists, dicts are containers), with the
    matching leaves of `rest`."""
    if isinstance(x, (tuple, list)):
        vals = [map_leaves(fn, e, *(r[i] for r in rest)) for i, e in enumerate(x)]
        return type(x)(*vals) if hasattr(x, "_fields") else type(x)(vals)
    if isinstance(x, dict):
        return {k: map_leaves(fn, e, *(r[k] for r in rest)) for k, e in x.items()}
    return fn(x, *rest)


def zeros_like_value(x: Any) -> Any:
    """A plain zero of `x`'s shape and dtype (a Python float for a Python float); None for
    what is not a number (a function, a string, None: no cotangent)."""
    p = plain(x)
    if isinstance(p, np.ndarray):
        return np.zeros(p.shape, p.dtype)
    if isinstance(p, np.generic):
        return p.dtype.type(0)
    if isinstance(p, (bool, int, float, complex)):
        return type(p)(0)
    return None


def _cast(g: Any, x: Any) -> Any:
    """Gradient `g` of input `x` in x's shape and dtype (as the outermost engine gives it:
    a float32 x's gradient is float32 however f computed); real for a real x."""
    px = plain(x)
    if np.iscomplexobj(plain(g)) and not np.iscomplexobj(px):
        g = np.real(g)
    dt = np.result_type(px)
    if dt.kind in "fc" and np.result_type(plain(g)) != dt:
        g = np.astype(g, dt)
    shape = np.shape(px)
    if np.shape(g) != shape:
        g = np.reshape(g, shape) if np.size(plain(g)) == int(np.prod(shape)) else g
    if not isinstance(px, np.ndarray) and isinstance(plain(g), np.ndarray) and g is plain(g):
        g = g[()]
    return g


def nested_value_and_grad(
    f: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    nums: Sequence[int],
    has_aux: bool,
    fname: str,
) -> tuple[Any, Any, tuple[Any, ...]]:
    """`(value, aux, grads)` of `f(*args, **kwargs)` under a nested `ReverseLevel`."""
    level = ReverseLevel()
    with level:
        targs = list(args)
        for i in nums:
            targs[i] = map_leaves(lambda x: level.input(x) if inexact(x) else x, args[i])
        out = f(*targs, **kwargs)
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(
                f"has_aux=True: {fname} must return a pair (value, aux), got "
                f"{type(out).__name__}. Return `value, aux`, or drop has_aux=True."
            )
        out, aux = out
        aux = level.primal_of(aux)
    value = level.primal_of(out)
    pv = plain(value)
    if not (
        isinstance(pv, (float, int, np.floating, np.integer))
        or (isinstance(pv, np.ndarray) and pv.shape == () and pv.dtype.kind in "fiu")
    ):
        raise TypeError(
            f"{fname} must return a real scalar to take its gradient, got "
            f"{type(pv).__name__}{getattr(pv, 'shape', '')}. For non-scalar outputs use "
            "rulekit.vjp or rulekit.jacrev."
        )
    leaves: dict[int, Any] = {}
    if isinstance(out, ReverseValue) and out.level is level:
        dt = getattr(pv, "dtype", np.dtype(float))
        leaves = level.backward([(out, np.ones((), dt))])

    def grad_of(x: Any, t: Any) -> Any:
        if isinstance(t, ReverseValue) and t.level is level:
            g = leaves.get(id(t.node))
            return zeros_like_value(x) if g is None else _cast(g, x)
        return zeros_like_value(x)

    grads = tuple(map_leaves(grad_of, args[i], targs[i]) for i in nums)
    return value, aux, grads


def jvp_values(
    f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False
) -> tuple[Any, Any, Any]:
    """`(f(*primals), ∂f·tangents, aux)` under a `ForwardLevel` (a None tangent: a
    constant). With `has_aux`, `f` returns `(out, aux)`; aux loses this level's tangents
    only (values of enclosing levels stay theirs), else aux is None."""
    level = ForwardLevel()

    def enter(x: Any, t: Any) -> Any:
        if t is None:
            return x
        if not inexact(x):
            if np.any(plain(t) != 0):
                raise TypeError(
                    f"rulekit.jvp: a nonzero tangent was given for a primal of type "
                    f"{np.result_type(plain(x))}, which has no derivative. Give None (or "
                    "zeros) as its tangent, or a float primal."
                )
            return x
        t = tangent_input(x, t)
        if plain(x) is not x and plain(t) is t and np.ndim(plain(x)) > 0:
            # x is a value of enclosing transformations: so is its tangent (with zero
            # derivative there), so that writes of their values into it are traced too
            # (not for a scalar, never written into, nor a 0-d array: the reverse engine
            # makes a traced 0-d result a scalar)
            t = np.zeros_like(x) + t
        return ForwardValue(x, t, level)

    with level:
        args = [
            map_leaves(enter, p, t) if t is not None else p
            for p, t in zip(primals, tangents, strict=True)
        ]
        out = f(*args)
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            name = getattr(f, "__name__", repr(f))
            raise TypeError(f"has_aux=True: {name} must return a pair (out, aux)")
        out, aux = out

    def primal(v: Any) -> Any:
        return v.primal if isinstance(v, ForwardValue) and v.level is level else v

    def tangent(v: Any) -> Any:
        if isinstance(v, ForwardValue) and v.level is level:
            return v.tangent
        if isinstance(v, LevelValue) and v.level.depth > level.depth:
            raise TracingError("a value of a finished inner transformation was returned")
        return zeros_like_value(v) if inexact(v) else None

    return map_leaves(primal, out), map_leaves(tangent, out), map_leaves(primal, aux)


class _NestedVJP:
    """The reusable pullback of a call traced by a nested `ReverseLevel`."""

    def __init__(self, level: ReverseLevel, args: tuple[Any, ...], targs: list[Any], out: Any):
        self.level, self.args, self.targs, self.out = level, args, targs, out

    def __call__(self, ct: Any) -> tuple[Any, ...]:
        level, seeds = self.level, []

        def seed(o: Any, c: Any) -> None:
            if isinstance(o, ReverseValue) and o.level is level and c is not None:
                if np.shape(plain(c)) != np.shape(plain(o.primal)):
                    raise ValueError(
                        f"vjp_fn: a cotangent of shape {np.shape(plain(c))} for an output of "
                        f"shape {np.shape(plain(o.primal))}"
                    )
                seeds.append((o, c))

        map_leaves(seed, self.out, ct)
        leaves = level.backward(seeds)

        def grad_of(x: Any, t: Any) -> Any:
            if isinstance(t, ReverseValue) and t.level is level:
                g = leaves.get(id(t.node))
                return zeros_like_value(x) if g is None else _cast(g, x)
            return zeros_like_value(x)

        return tuple(map_leaves(grad_of, a, t) for a, t in zip(self.args, self.targs, strict=True))


def nested_vjp(
    f: Callable[..., Any], primals: Sequence[Any], has_aux: bool
) -> tuple[Any, _NestedVJP, Any]:
    """`(f(*primals), vjp_fn, aux)` under a nested `ReverseLevel`; `vjp_fn` reruns the
    recorded pullbacks (they write nothing) for each cotangent."""
    level = ReverseLevel()
    with level:
        targs = [map_leaves(lambda x: level.input(x) if inexact(x) else x, a) for a in primals]
        out = f(*targs)
    aux = None
    if has_aux:
        out, aux = out
        aux = level.primal_of(aux)
    return map_leaves(level.primal_of, out), _NestedVJP(level, tuple(primals), targs, out), aux
