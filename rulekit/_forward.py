"""Forward mode: the `ForwardLevel` that `jvp` runs, and its values (`ForwardValue`).

Each value carries its primal and its tangent ẋ. Every NumPy call on them goes
to the function's forward rule (`rulekit.frule`), which gets Duals and returns
the output's Dual; a constant (an array the level does not trace) is a Dual with
tangent None, and no rule spends work on it. A result whose tangent is None
is returned as the plain value: it stays a constant.

Writes (`x[i] = v`, `out=`, `x += y`) update the primal and the tangent in place,
as NumPy does to the array. A view shares the memory of its base; its tangent
must share the base's tangent the same way, or a write through one would change
the primal but not the tangent. A rule whose output is a view of an input's
primal but not of its tangent (layouts differ) marks both memories: a later
write into either raises TracingError (`_check_views`); a tangent that aliases
an input's tangent when the primal does not is copied, and a new array's tangent is
laid out like the array (a rule may return ẋ, in x's layout, as ẏ for y = x + c), so
that a later reshape or transpose is a view of both or a copy of both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit._dual import Dual
from rulekit._engine._levels import Level, LevelValue, base_array, plain
from rulekit._errors import TracingError
from rulekit._functions import function_name
from rulekit._layout import zeros_like_exact
from rulekit._registry import forward_registry

__all__ = ["ForwardLevel", "ForwardValue", "tangent_input"]


class ForwardValue(LevelValue):
    """A value traced by a `ForwardLevel`: its primal and its tangent (never None)."""

    __slots__ = ("tangent",)

    def __init__(self, primal: Any, tangent: Any, level: Level) -> None:
        super().__init__(primal, level)
        self.tangent = tangent


def _shares(a: Any, b: Any) -> bool:
    a, b = plain(a), plain(b)
    return (
        isinstance(a, np.ndarray)
        and isinstance(b, np.ndarray)
        and a.size > 0
        and np.may_share_memory(a, b)
    )


class ForwardLevel(Level):
    """A running `jvp`: calls forward rules, writes tangents in place with their primals."""

    kind = "jvp"
    table = forward_registry
    rule_kind = "forward rule (rulekit.frule.register)"

    def __init__(self) -> None:
        super().__init__()
        self.frozen: dict[int, Any] = {}  # base arrays a write must not change (by id)

    def dual(self, x: Any) -> Dual:
        """The Dual of an argument: its tangent if it is (or holds) this level's value."""
        if isinstance(x, ForwardValue) and x.level is self:
            return Dual(x.primal, x.tangent)
        t = type(x)
        if (t is list or t is tuple) and self.owns(x):
            return Dual(t(self.primal_of(x)), t(self._tangent(e) for e in x))
        return Dual(x, None)

    def _tangent(self, x: Any) -> Any:
        if isinstance(x, ForwardValue) and x.level is self:
            return x.tangent
        if isinstance(x, (list, tuple)) and self.owns(x):
            return type(x)(self._tangent(e) for e in x)
        return None

    def apply(self, impl: Any, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        duals = [self.dual(a) for a in args]
        if kwargs and getattr(impl, "keyword_tangents", False):  # (see rulekit.frule)
            kwargs = {k: self.dual(v) if self.owns(v) else v for k, v in kwargs.items()}
        out = impl(Dual(f, None), *duals, **kwargs)
        if not isinstance(out, Dual):
            raise TracingError(
                f"the forward rule {getattr(impl, '__qualname__', impl)} of {function_name(f)} "
                f"returned {type(out).__name__}, not a rulekit.Dual(y, ẏ)."
            )
        y, dy = out.x, out.dx
        if isinstance(y, (tuple, list)):  # (a namedtuple: slogdet, eigh, ...; a list: split)
            dys = (None,) * len(y) if dy is None else dy
            outs = [self._wrap(e, d, duals) for e, d in zip(y, dys, strict=True)]
            return type(y)(*outs) if hasattr(y, "_fields") else type(y)(outs)
        return self._wrap(y, dy, duals)

    def _wrap(self, y: Any, dy: Any, duals: list[Dual]) -> Any:
        if dy is None:
            return y
        if isinstance(plain(y), np.ndarray):
            if isinstance(dy, np.generic):  # (0-d arithmetic gives NumPy scalars)
                dy = np.asarray(dy)
            dy = self._check_views(y, dy, duals)
        elif isinstance(dy, np.ndarray):  # a scalar's tangent is a value of its own: a rule
            # may return an input's tangent itself (ẏ = ẋ for y = x·1 on a 0-d x), which a
            # later write into x would change
            dy = dy[()] if dy.ndim == 0 else np.copy(dy)
        return ForwardValue(y, dy, self)

    def _check_views(self, y: Any, dy: Any, duals: list[Dual]) -> Any:
        """Keep a view's tangent a view of its base's tangent, and a new array's tangent a
        new array in the array's own layout (see the module doc): then a later reshape or
        transpose is a view of both, or a copy of both."""
        fresh = True
        for d in duals:
            if d.dx is None or isinstance(d.dx, (list, tuple)):
                continue
            view, tview = _shares(y, d.x), _shares(dy, d.dx)
            fresh = fresh and not view
            if tview and not view:
                dy = _laid_out_like(y, dy)
            elif view and not (tview and _same_layout(y, dy)):
                for v in (y, d.x, dy, d.dx):
                    b = base_array(v)
                    if b is not None:
                        self.frozen[id(b)] = b
        if fresh and not _same_layout(y, dy):
            dy = _laid_out_like(y, dy)
        return dy

    def setitem(self, target: Any, idx: Any, value: Any) -> None:
        """`target[idx] = value`: the primal and the tangent, in place."""
        for v in (target.primal, target.tangent):
            b = base_array(v)
            if b is not None and id(b) in self.frozen:
                raise TracingError(
                    "an in-place write into an array whose view and tangent are laid out "
                    "differently (a reshape or transpose of a non-contiguous array made a "
                    "view of the value but a copy of its tangent, or the reverse): the write "
                    "would change the value and its tangent differently. Fix: copy the array "
                    "before writing into it (x = x.copy())."
                )
        if self.owns(idx):
            raise TracingError("an index computed with a derivative: use integer indices")
        target.primal[idx] = self.primal_of(value)
        if isinstance(target.tangent, np.generic):  # (a 0-d array's tangent, kept writable)
            target.tangent = np.asarray(target.tangent)
        t = self._tangent(value)
        target.tangent[idx] = 0 if t is None else t


def _same_layout(y: Any, dy: Any) -> bool:
    """Whether two arrays of one shape step through memory alike (the stride of an axis
    of length 0 or 1 never matters)."""
    a, b = plain(y), plain(dy)
    sa, sb = getattr(a, "strides", None), getattr(b, "strides", None)
    if sa is None or sb is None or np.shape(a) != np.shape(b):
        return sa == sb
    return all(n <= 1 or p == q for n, p, q in zip(np.shape(a), sa, sb, strict=True))


def _laid_out_like(y: Any, dy: Any) -> Any:
    """A copy of tangent `dy` in `y`'s exact memory layout (a plain copy for a tangent
    another level traces, or of another dtype)."""
    py = plain(y)
    if plain(dy) is not dy or getattr(dy, "dtype", None) != py.dtype:
        return np.copy(dy)
    t = zeros_like_exact(py)
    t[...] = dy
    return t


def tangent_input(x: Any, t: Any) -> Any:
    """The tangent given for input `x`, copied into `x`'s layout (a view of `x` then pairs
    with the same view of it), with x's dtype and shape; None stays None."""
    if t is None:
        return None
    px, pt = plain(x), plain(t)
    if np.shape(pt) != np.shape(px):
        raise ValueError(
            f"a tangent of shape {np.shape(pt)} was given for a primal of shape "
            f"{np.shape(px)}: give each tangent its primal's shape (None for a constant)"
        )
    if np.iscomplexobj(pt) and not np.iscomplexobj(px):
        raise TypeError(
            f"a complex tangent was given for a real primal ({np.result_type(px)}): its "
            "imaginary part would be dropped. Give a real tangent, or make the primal complex."
        )
    if isinstance(px, np.ndarray) and isinstance(pt, np.ndarray) and pt is t:
        buf = zeros_like_exact(px) if px.dtype.kind in "fc" else np.zeros(px.shape)
        buf[...] = t
        return buf
    return t
