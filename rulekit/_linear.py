"""`linear`: declare a function linear in its array argument(s), once; both rules follow.

A linear map `y = L x` (reshape, transpose, a sum, a concatenation, an FFT) needs
no hand-written rule: its tangent rule is `ẏ = L ẋ` (the function itself applied
to the tangent) and its pullback `x̄ += Lᴴ ȳ`, given by the declared adjoint.
`linear(fn, adjoint, patterns=...)` registers the reverse rule and returns a
`LinearFunction` holding both (`.rrule`, `.forward_rule()`, `.jvp`).

Views (`view=True`): when `fn` returns a view of its input, writes through the
view change the input, so the view's cotangent must be x̄ itself, seen through
the same view (`alias_view`): later pullbacks, and an in-place write's pullback,
reach x̄ directly. An fdata whose same view would pair other elements than the
primal's is refused (`ViewMismatchError`): a silent copy would lose the writes.
See docs/declaring-linear-rules.md.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._cotangents import accumulate, accumulate_sequence, is_active, no_pullback, no_rdata
from rulekit._declared_rules import linear_frule, linear_vjp, register_both
from rulekit._errors import RuleRegistrationError
from rulekit._register import rrule
from rulekit._registry import registry
from rulekit._tangents import NoFData, zero_fdata

__all__ = [
    "LinearFunction",
    "ViewMismatchError",
    "alias_view",
    "declarations",
    "linear",
    "same_strides",
    "shares",
]

_NO_F = NoFData()
_SCALARS = (float, complex, np.floating, np.complexfloating)

# -- views: the same view of the fdata ----------------------------------------------------

#: `alias(x, y, fn, *rest, **kwargs) -> (output CoDual, is_view)`: see `alias_view`
Alias = Callable[..., tuple[CoDual, bool]]


class ViewMismatchError(RuntimeError):
    """A function returned a view of its input but not the matching view of its fdata."""


def new_fdata(y: Any) -> Any:
    """Fresh zero fdata for a new output: laid out like an array `y`, NoFData for a scalar."""
    return zero_fdata(y) if type(y) is np.ndarray else _NO_F


def shares(y: Any, x: np.ndarray) -> bool:
    """Whether array `y` is (possibly) a view into `x`'s memory."""
    return type(y) is np.ndarray and y.size > 0 and np.may_share_memory(y, x)


def same_strides(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one shape have the same strides on their axes longer than one."""
    return a.strides == b.strides or all(
        s == t for s, t, n in zip(a.strides, b.strides, a.shape, strict=True) if n > 1
    )


def alias_view(
    x: CoDual, y: Any, fn: Callable[..., Any], *rest: Any, **kwargs: Any
) -> tuple[CoDual, bool]:
    """`(output, is_view)` of `y = fn(x, *rest, **kwargs)`, a function that may return a view.

    A view of `x` (an array, or a list of arrays as `np.split` returns) gets the same
    view of x̄, `fn(x̄, *rest, **kwargs)`; a copy gets fresh zero fdata. A view of x̄
    that is no view, or is laid out unlike the primal's (fdata laid out unlike its
    primal, for an `fn` that reads memory order), raises `ViewMismatchError`.
    """
    dx, many = x.dx, isinstance(y, (list, tuple))
    ys = list(y) if many else [y]
    if not any(shares(e, x.x) for e in ys):
        return CoDual(y, zero_fdata(y) if many else new_fdata(y)), False
    dy = fn(dx, *rest, **kwargs)
    for e, d in zip(ys, list(dy) if many else [dy], strict=True):
        if e.size and not (shares(d, dx) and same_strides(e, d)):
            raise ViewMismatchError(
                f"rulekit: {getattr(fn, '__name__', fn)} returned a view of the primal but no "
                f"matching view of its fdata (primal strides {x.x.strides}, fdata strides "
                f"{dx.strides}). fdata must have its primal's strides for views to alias it: "
                "create it with rulekit.zero_fdata(primal)."
            )
    return CoDual(y, type(y)(dy) if many else dy), True


# -- handing cotangents to the linear arguments ---------------------------------------------


def _give(arg: CoDual, g: Any) -> Any:
    """Hand cotangent `g` = Lᴴȳ to linear argument `arg` (`accumulate`; a list/tuple gets one
    cotangent per element, `accumulate_sequence`); returns `arg`'s rdata."""
    return accumulate_sequence(arg, g) if isinstance(arg.x, (list, tuple)) else accumulate(arg, g)


def _carries_cotangent(y: Any) -> bool:
    """Whether output `y` has a derivative: float/complex (an array, scalar or sequence)."""
    if type(y) is np.ndarray:
        return y.dtype.kind in "fc"
    if isinstance(y, (list, tuple)):
        return any(_carries_cotangent(e) for e in y)
    return isinstance(y, _SCALARS)


def _laid_out_like(x: Any, t: Any) -> Any:
    """Tangent `t` of array `x` with x's strides (as fdata has): a function that reads memory
    order (`ravel(order='K')`) must pair the same elements of both."""
    if type(x) is np.ndarray and type(t) is np.ndarray and t.strides != x.strides:
        like = zero_fdata(x) if x.dtype == t.dtype else np.zeros(x.shape, t.dtype)
        like[...] = t
        return like
    if isinstance(x, (list, tuple)) and isinstance(t, (list, tuple)):
        return type(t)(_laid_out_like(a, b) for a, b in zip(x, t, strict=True))
    return t


def _zero_tangent(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return np.zeros_like(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_zero_tangent(e) for e in x)
    return type(x)(0)


# -- the declaration ------------------------------------------------------------------------


class LinearFunction:
    """A function declared linear in some of its positional arguments (see `linear`).

    `fn`, `adjoints` (one per linear argument), `argnums` and `view` are the
    declaration; `rrule` is the reverse rule derived from it (registered by
    `linear` when it was given patterns) and `forward_rule()` the forward rule.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        adjoints: tuple[Callable[..., Any], ...],
        argnums: tuple[int, ...],
        view: bool | Alias,
        tangent: Callable[..., Any] | None,
        name: str,
        in_place: bool = False,
    ) -> None:
        self.fn = fn
        self.adjoints = adjoints
        self.in_place = in_place
        self.argnums = argnums
        self.view = view
        self.tangent = fn if tangent is None else tangent
        self.name = name
        self.module = "?"  # (the declaring module, set by `linear`)
        self.rrule = self._make_rrule()
        #: the forward rule and differentiable pullback derived from the declaration
        self.frule = linear_frule(self)
        self.vjp = linear_vjp(self)

    def __repr__(self) -> str:
        return f"rulekit.linear({self.name}, argnums={self.argnums}, view={bool(self.view)})"

    # -- forward mode ---------------------------------------------------------------------

    def forward_rule(self) -> Callable[..., Any]:
        """The tangent map `(*args, **kwargs) -> ẏ`: the call's arguments with each linear
        argument replaced by its tangent (zeros for a constant; laid out like its primal,
        as fdata is, since a function may read memory order: see `jvp`)."""
        return self.tangent

    def jvp(self, args: Sequence[Any], tangents: Sequence[Any], **kwargs: Any) -> tuple[Any, Any]:
        """`(y, ẏ)` of the call `fn(*args, **kwargs)` given the tangents of the linear
        arguments present in `args` (in `argnums` order; None for a constant: zeros)."""
        y = self.fn(*args, **kwargs)
        targs = list(args)
        present = [i for i in self.argnums if i < len(args)]
        for i, t in zip(present, tangents, strict=True):
            targs[i] = _zero_tangent(args[i]) if t is None else _laid_out_like(args[i], t)
        return y, self.tangent(*targs, **kwargs)

    # -- reverse mode ---------------------------------------------------------------------

    def _make_rrule(self) -> Callable[..., tuple[CoDual, Any]]:
        fn, adjoints, argnums, view = self.fn, self.adjoints, self.argnums, self.view
        in_place = self.in_place
        alias: Alias | None = None
        if view is True:
            alias = alias_view
        elif callable(view):
            alias = view
        name = self.name
        pairs = list(zip(argnums, adjoints, strict=True))
        single = argnums == (0,)

        def rule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
            xs = [a.x for a in args]
            kw = kwargs
            if kwargs and any(isinstance(v, CoDual) for v in kwargs.values()):
                kw = _keyword_constants(name, kwargs)
            y = fn(*xs, **kw)
            n = 1 + len(args)
            if single:  # (the common case, without the general bookkeeping)
                active = pairs if args and is_active(args[0]) else ()
            else:
                active = [(i, adj) for i, adj in pairs if i < len(args) and is_active(args[i])]
            if not active or not _carries_cotangent(y):
                return CoDual(y, None), no_pullback(n)
            if argnums[0] == 0 and y is xs[0] and type(y) is np.ndarray:
                # the input array itself (astype(copy=False), ...): its own fdata
                return CoDual(y, args[0].dx), no_pullback(n)
            if alias is not None and type(args[0].dx) is np.ndarray:
                out, is_view = alias(args[0], y, fn, *xs[1:], **kw)
                if is_view:
                    return out, no_pullback(n)
            elif isinstance(y, (list, tuple)):
                raise NotImplementedError(
                    f"rulekit.linear: {name} returned a {type(y).__name__}; only view=True "
                    "declarations may return several arrays"
                )
            else:
                out = CoDual(y, new_fdata(y))
            in_fdata = isinstance(y, (np.ndarray, list, tuple))  # ȳ in fdata, else dy

            def linear_pullback(dy: Any) -> tuple[Any, ...]:
                g = out.dx if in_fdata else dy
                result = list(no_rdata(n))
                for i, adjoint in active:
                    if in_place:
                        _add_in_place(adjoint, args[i], g, xs, kw)
                    else:
                        result[1 + i] = _give(args[i], adjoint(g, *xs, **kw))
                return tuple(result)

            return out, linear_pullback

        rule.__name__ = rule.__qualname__ = f"{name}_rrule"
        rule.__doc__ = f"The reverse rule of {name}, derived from its `rulekit.linear` declaration."
        return rule


def _add_in_place(
    adjoint: Callable[..., Any], arg: CoDual, g: Any, xs: list[Any], kw: dict[str, Any]
) -> None:
    """Run an `in_place` adjoint: it adds ȳ's contribution into x̄ itself (a real x̄ gets Re ȳ)."""
    dx = arg.dx
    if type(dx) is not np.ndarray:
        raise NotImplementedError(
            f"rulekit.linear(in_place=True): the linear argument {arg.x!r} is not an array"
        )
    if dx.dtype.kind != "c" and np.iscomplexobj(g):
        g = np.real(g)
    adjoint(dx, g, *xs, **kw)


def _keyword_constants(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keyword values as primals; a differentiated one would silently get no cotangent."""
    out = {}
    for k, v in kwargs.items():
        if isinstance(v, CoDual):
            if is_active(v):
                raise NotImplementedError(
                    f"rulekit: {name} was called with a traced (differentiated) value as its "
                    f"keyword argument {k}=; keyword arguments get no cotangent. Pass it "
                    "positionally, or as a constant."
                )
            v = v.x
        out[k] = v
    return out


def linear(
    fn: Callable[..., Any],
    adjoint: Callable[..., Any] | Sequence[Callable[..., Any]],
    *,
    patterns: Sequence[Sequence[Any]] = (),
    argnums: int | Sequence[int] = 0,
    view: bool | Alias = False,
    tangent: Callable[..., Any] | None = None,
    in_place: bool = False,
    examples: Any = None,
    name: str | None = None,
    module: str | None = None,
) -> LinearFunction:
    """Declare `fn` linear in its positional argument(s) `argnums`; register its rule.

    * `adjoint(ȳ, *args, **kwargs)`: the cotangent `Lᴴ ȳ` of the linear argument, given
      the call's arguments as `fn` received them (an array that broadcasts to its shape,
      a number for a scalar, one per element for a list); for several `argnums`, one
      adjoint each, called only when that argument is differentiated.
    * `patterns`: per-argument pattern tuples to register the reverse rule for (with
      `examples`); none registers nothing (register `.rrule`, or a fast path in front
      of it, yourself). `module`: the declaring module recorded (default: the caller).
    * `view=True`: `fn` may return a view of its first argument (`alias_view`); or the
      aliasing function to use, with `alias_view`'s signature.
    * `tangent`: the map applied to tangents when it is not `fn` (an affine `fn`:
      `np.pad` with `constant_values` is padded with zeros).
    * `in_place=True`: each adjoint adds into x̄ itself, `adjoint(x̄, ȳ, *args, **kwargs)`
      (array arguments; `np.take`, `np.trace`: no x-sized temporary).

    Every layout, 0-d and empty arrays, float32/64 and complex work; a call with no
    differentiated linear argument, or a non-float output, has no pullback.
    """
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    adjoints = (adjoint,) if callable(adjoint) else tuple(adjoint)
    fname = str(name or getattr(fn, "__name__", "linear_function"))
    if len(adjoints) != len(nums) or not all(callable(a) for a in adjoints):
        raise RuleRegistrationError(
            f"rulekit.linear({fname}): give one adjoint per linear argument "
            f"(argnums={nums}, got {len(adjoints)} adjoint(s))"
        )
    if view and nums != (0,):
        raise RuleRegistrationError(
            f"rulekit.linear({fname}, view=True): a view aliases one argument, the first; "
            f"got argnums={nums}"
        )
    decl = LinearFunction(fn, adjoints, nums, view, tangent, fname, in_place)
    decl.module = module or str(sys._getframe(1).f_globals.get("__name__", "?"))
    _DECLARED[id(fn)] = decl
    for p in patterns:
        _register(fn, tuple(p), decl.rrule, examples, decl.module)
        register_both(fn, tuple(p), decl.frule, decl.vjp, examples, decl.module)
    return decl


#: every declaration, by function (the latest one of a function wins)
_DECLARED: dict[int, LinearFunction] = {}


def declarations() -> list[LinearFunction]:
    """Every declaration made so far (what forward mode derives its rules from)."""
    return list(_DECLARED.values())


def _register(fn: Any, patterns: tuple[Any, ...], rule: Any, examples: Any, module: str) -> None:
    """`rulekit.rrule.register(fn, *patterns)(rule)`, recorded as registered by the module
    that declared the function (not by this one)."""
    rrule.register(fn, *patterns, examples=examples)(rule)
    for reg in registry.entries(__name__):
        if reg.impl is rule:
            reg.module = module
