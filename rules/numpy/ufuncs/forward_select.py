"""Forward rules and differentiable pullbacks for `np.clip` and `np.where` (imported by
`rules.numpy.ufuncs.forward`).

    clip:     ẏ = ȧ where lo ≤ a ≤ hi, l̇o where a < lo (≤ hi), ḣi where y = hi otherwise;
              the pullback sends ȳ to the same place
    where:    ż = where(c, ẋ, ẏ);  x̄ = where(c, ȳ, 0), ȳ_y = where(c, 0, ȳ)

Masks come from comparisons (no derivative): the rules trace, differentiable again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rulekit import Dual
from rulekit._declared_rules import shaped_like
from rules._support.forward import register_like
from rules.numpy.ufuncs.forward import _plain, inexact, to_arg

__all__: list[str] = []


# -- clip ---------------------------------------------------------------------------------------


def _bounds(rest: Sequence[Any], kw: dict[str, Any]) -> tuple[Any, Any]:
    """(lo, hi) of a clip call (positional, or a_min=/min=, a_max=/max=); None: no bound."""
    lo = rest[0] if len(rest) > 0 else kw.get("a_min", kw.get("min"))
    hi = rest[1] if len(rest) > 1 else kw.get("a_max", kw.get("max"))
    return lo, hi


def _clip_masks(a: Any, lo: Any, hi: Any, y: Any) -> tuple[Any, Any, Any]:
    """Where y = a (lo ≤ a ≤ hi), y = lo (a < lo ≤ hi), y = hi (the rest, where y == hi)."""
    in_a: Any = True
    below: Any = False
    if lo is not None:
        in_a = np.greater_equal(a, lo)
        below = np.less(a, lo)
        if hi is not None:
            below = np.logical_and(below, np.less_equal(lo, hi))
    if hi is not None:
        in_a = np.logical_and(in_a, np.less_equal(a, hi))
    at_hi = None
    if hi is not None:
        at_hi = np.logical_and(np.equal(y, hi), np.logical_not(np.logical_or(in_a, below)))
    return in_a, below, at_hi


def clip_frule(f: Dual, a: Dual, *rest: Dual, **kw: Any) -> Dual:
    """ẏ = ȧ where lo ≤ a ≤ hi, l̇o where a < lo ≤ hi, ḣi where y = hi otherwise."""
    lo_d, hi_d = _bounds(rest, kw)
    lo_d = lo_d if isinstance(lo_d, Dual) else Dual(lo_d, None)
    hi_d = hi_d if isinstance(hi_d, Dual) else Dual(hi_d, None)
    y = np.clip(a.x, *[r.x for r in rest], **_plain(kw))
    if all(d.dx is None for d in (a, lo_d, hi_d)) or not inexact(y):
        return Dual(y, None)
    in_a, below, at_hi = _clip_masks(a.x, lo_d.x, hi_d.x, y)
    t: Any = 0.0
    if a.dx is not None:
        t = t + np.where(in_a, a.dx, 0.0)
    if lo_d.dx is not None:
        t = t + np.where(below, lo_d.dx, 0.0)
    if hi_d.dx is not None:
        t = t + np.where(at_hi, hi_d.dx, 0.0)
    return Dual(y, shaped_like(t, y))


def clip_vjp(active: Sequence[bool], a: Any, *rest: Any, **kw: Any) -> tuple[Any, Any]:
    """ā = ȳ where lo ≤ a ≤ hi; l̄o = ȳ where a < lo ≤ hi; h̄i = ȳ where y = hi otherwise
    (bounds passed positionally; keyword bounds are constants)."""
    lo, hi = _bounds(rest, kw)
    y = np.clip(a, *rest, **kw)
    masks = _clip_masks(a, lo, hi, y)
    n = 1 + len(rest)

    def pullback(g: Any) -> tuple[Any, ...]:
        out: list[Any] = [None] * n
        if g is None:
            return tuple(out)
        for k, (x, m) in enumerate(zip((a, lo, hi)[:n], masks, strict=False)):
            if active[k] and m is not None:
                out[k] = to_arg(np.where(m, g, 0.0), x)
        return tuple(out)

    return y, pullback


register_like(np.clip, frule=clip_frule, vjp=clip_vjp)


# -- where --------------------------------------------------------------------------------------


def where_frule(f: Dual, *args: Dual) -> Dual:
    """ż = where(c, ẋ, ẏ) (zeros for a constant branch); where(c) alone: no tangent."""
    y = np.where(*[a.x for a in args])
    if len(args) != 3:
        return Dual(y, None)
    c, x, w = args
    if (x.dx is None and w.dx is None) or not inexact(y):
        return Dual(y, None)
    tx = 0.0 if x.dx is None else x.dx
    tw = 0.0 if w.dx is None else w.dx
    return Dual(y, shaped_like(np.where(c.x, tx, tw), y))


def where_vjp(active: Sequence[bool], *args: Any) -> tuple[Any, Any]:
    """x̄ = where(c, ȳ, 0), w̄ = where(c, 0, ȳ); c: none."""
    y = np.where(*args)
    if len(args) != 3:
        return y, lambda g: (None,) * len(args)
    c, x, w = args

    def pullback(g: Any) -> tuple[Any, ...]:
        if g is None:
            return (None, None, None)
        gx = to_arg(np.where(c, g, 0.0), x) if active[1] else None
        gw = to_arg(np.where(c, 0.0, g), w) if active[2] else None
        return (None, gx, gw)

    return y, pullback


register_like(np.where, frule=where_frule, vjp=where_vjp)
