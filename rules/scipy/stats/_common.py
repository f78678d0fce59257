"""Helpers shared by the scipy.stats rules (rules.scipy.stats, rules.scipy.stats): the
namespace objects that hold the `rulekit.primitive` wrappers, the methods' signatures, and
the masks that keep derivatives finite outside a support.

See docs/conventions-stats.md for which arguments are differentiable and the conventions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Union

import numpy as np

import rulekit
from rulekit import Array, Primitive
from rules._support.arguments import is_active
from rules._support.binding import Binder, Bound
from rules._support.cotangents import NO_R, accumulate

__all__ = [
    "PARAM",
    "REAL",
    "Namespace",
    "Signature",
    "accumulate_from_output",
    "masked",
    "ratio",
    "refuse",
]

#: A real operand: float or integer arrays and scalars (integers are constants).
REAL = Union[Array[np.floating], Array[np.integer], float, int, np.floating, np.integer]
#: A parameter of a multivariate distribution: also `None` (scipy's default mean). Lists are
#: not patterns: a list is differentiable in rulekit's tangent model and these rules take
#: arrays, so a positional list while tracing gets MissingRuleError (a plain keyword list
#: is a constant and fine).
PARAM = Union[REAL, None]


class Namespace:
    """One scipy.stats distribution's differentiable methods, as `rulekit.primitive` wrappers.

    `Namespace("norm", scipy.stats.norm, ["pdf", "logpdf"])` has attributes `pdf` and
    `logpdf`, each wrapping scipy's bound method (same name, same signature). Plain calls
    go straight to scipy; traced calls dispatch to the rule registered for the wrapper.
    """

    def __init__(self, name: str, dist: Any, methods: Sequence[str]) -> None:
        self._name = name
        self.dist = dist
        self.methods = tuple(methods)
        for m in methods:
            method = getattr(dist, m)
            # (a bound method's own name is rv_continuous.pdf: say how users reach it)
            rulekit.registry.set_name(method, f"scipy.stats.{name}.{m}")
            setattr(self, m, rulekit.primitive(method))

    def __getattr__(self, name: str) -> Primitive:  # only reached for a missing attribute
        if name.startswith("_") or "methods" not in self.__dict__:  # (copy/pickle probes)
            raise AttributeError(name)
        raise AttributeError(
            f"rules.scipy.stats.{self._name} has no {name!r}. Fix: use one of its differentiable "
            f"methods: {', '.join(self.methods)}; other methods of scipy.stats.{self._name} "
            "have no rule."
        )

    def __repr__(self) -> str:
        return f"rules.scipy.stats.{self._name}({', '.join(self.methods)})"


class Signature:
    """A scipy.stats method's parameters: binds a call's (positional CoDuals, keyword values)
    to them by name (`rules._support.binding`), and runs scipy on the primals.

    Values come back as given: CoDuals (positional arguments, traced keyword arrays) or
    plain values (other keyword arguments, defaults).
    """

    def __init__(self, qualname: str, names: Sequence[str], defaults: dict[str, Any]) -> None:
        self.qualname = qualname
        self.names = tuple(names)
        self.bind = Binder.from_names(names, defaults)

    def call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Bound, dict[str, Any], Any]:
        """Bind a call and run scipy's `fn` on its primals: `(bound, primal values, result)`."""
        b = self.bind(args, kwargs)
        v = b.primal_values()
        return b, v, fn(*(a.x for a in args), **{k: v[k] for k in kwargs})

    def positional(self, args: tuple[Any, ...]) -> tuple[str, ...]:
        """The parameter names of the positional arguments of a call."""
        return self.names[: len(args)]


def refuse(qualname: str, name: str, why: str) -> None:
    """Raise NotImplementedError for an active argument whose derivative has no rule."""
    raise NotImplementedError(
        f"{qualname}: no rule for the derivative with respect to {name!r}, which is active "
        f"here. Fix: pass {name!r} as a constant (an untraced value, a plain keyword value or "
        f"an integer), or differentiate a different quantity. ({why}; see "
        "docs/conventions-stats.md.)"
    )


def accumulate_from_output(cd: Any, g: Any, out_shape: tuple[int, ...]) -> Any:
    """`accumulate(cd, g)` for a cotangent `g` that broadcasts to the output's shape: `g` is
    broadcast to `out_shape` first, so that `accumulate` sums it over the axes along which
    `cd` was broadcast to the output (x̄ = unbroadcast(broadcast_to(g, y.shape)))."""
    if not is_active(cd):
        return NO_R
    g = np.broadcast_to(g, out_shape) if np.shape(g) != out_shape else g
    return accumulate(cd, g)


def ratio(c: Any, z: Any) -> Any:
    """c / z with 0 where c == 0 (the xlogy convention: (c·log z)′ = c/z, zero when c is)."""
    c, z = np.broadcast_arrays(np.asarray(c, dtype=float), np.asarray(z, dtype=float))
    return np.where(c == 0, 0.0, c / np.where(c == 0, 1.0, z))


def masked(d: Any, value: Any, zero: Any) -> Any:
    """Derivative `d`, set to 0 where `zero` (the function is locally constant there, e.g. a
    pdf of 0 or a logpdf of −inf outside the support) and to NaN where `value` is NaN."""
    d = np.where(zero, 0.0, d)
    return np.where(np.isnan(value), np.nan, d)
