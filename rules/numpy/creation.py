"""Arrays made from a traced array: `zeros_like`, `ones_like`, `empty_like`, `full_like`.

Their values do not depend on the input's values (`x̄` gets nothing), but the
result is traced, with zero fdata, so that user code can write into it
(`buf = np.zeros_like(x); buf[0] = x[1]`). `full_like(x, v)` with a traced
scalar `v` passes `v̄ = Σ ȳ` back. The rules are stateful: the output and its
fdata come from the rule's pool, so they allocate nothing once warm.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from rulekit import Array, CoDual, StatefulRRule, build_primitive_rrule, example
from rules._support.cotangents import NO_R, scalar_rdata
from rules._support.layout import zeros_like_exact

__all__ = ["LikeRule"]

_FILL = {np.zeros_like: 0, np.ones_like: 1, np.empty_like: 0}


class LikeRule(StatefulRRule):
    """`y = zeros_like(x)` (and friends): `x̄` unchanged; `v̄ = Σȳ` for `full_like(x, v)`."""

    def __call__(self, f: CoDual, x: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        fn = f.x
        extra = [a.x for a in args]
        if fn is np.full_like:
            fill, extra = extra[0], extra[1:]
        else:
            fill = _FILL[fn]
        dtype = kwargs.get("dtype", extra[0] if extra else None)
        dtype = x.x.dtype if dtype is None else np.dtype(dtype)
        nulls = (NO_R,) * (2 + len(args))
        c_order, f_order = x.x.flags.c_contiguous, x.x.flags.f_contiguous
        simple = set(kwargs) <= {"dtype"} and len(extra) <= 1 and (c_order or f_order)
        if dtype.kind not in "fc" or not simple:
            # Not differentiable, or a layout/shape request: let numpy build it.
            y = fn(x.x, *(a.x for a in args), **kwargs)
            if y.dtype.kind not in "fc":
                return CoDual(y, None), lambda _: nulls
            if fn is np.empty_like:
                y.fill(0)  # (zeros, as on the pooled path: values that do not depend on memory)
            ytok = dytok = None
            dy = zeros_like_exact(y)
        else:
            # numpy's layout: C order, or F order (a transposed C buffer) for F-ordered x.
            shape = x.x.shape if c_order else x.x.shape[::-1]
            ytok, dytok = self.push(shape, dtype), self.push(shape, dtype)
            y, dy = (ytok.buffer, dytok.buffer) if c_order else (ytok.buffer.T, dytok.buffer.T)
            y.fill(fill)
            dy.fill(0)
        value = args[0] if fn is np.full_like else None

        def like_pullback(_: Any) -> tuple[Any, ...]:
            rv = NO_R
            if value is not None and value.dx is not None:
                total = self.scratch("sum", (), dy.dtype)  # a 0-d out=: np.sum allocates none
                np.sum(dy, out=total)
                rv = scalar_rdata(value.x, total[()])
            if ytok is not None and dytok is not None:
                self.pop(dytok)
                self.pop(ytok)
            return (NO_R, NO_R, rv, *nulls[3:]) if value is not None else nulls

        return CoDual(y, dy), like_pullback


def _examples() -> list[Any]:
    x = np.random.default_rng(0).normal(size=(3, 4))
    return [example(x), example(x.astype(np.float32)), example(np.asfortranarray(x))]


def _reference(fn: Any, examples: Any) -> Any:
    """np.empty_like's values are unspecified: check it against np.zeros_like (what it gives)."""
    if fn is not np.empty_like:
        return examples
    return lambda: [replace(ex, reference=np.zeros_like) for ex in examples()]


def _dtype_examples() -> list[Any]:
    x = np.random.default_rng(2).normal(size=(2, 2))
    return [example(x, np.float32), example(x, np.float64)]


for _fn in (np.zeros_like, np.ones_like, np.empty_like):
    build_primitive_rrule.register(_fn, Array[np.inexact], examples=_reference(_fn, _examples))(
        lambda sig: LikeRule()
    )
    build_primitive_rrule.register(
        _fn, Array[np.inexact], object, examples=_reference(_fn, _dtype_examples)
    )(lambda sig: LikeRule())


def _full_examples() -> list[Any]:
    x = np.random.default_rng(1).normal(size=(2, 3))
    return [example(x, 2.5), example(x, np.float64(-1.0))]


build_primitive_rrule.register(np.full_like, Array[np.inexact], object, examples=_full_examples)(
    lambda sig: LikeRule()
)
