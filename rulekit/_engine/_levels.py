"""Nested transformations: the levels running in this thread, and the values they trace.

Each forward (`jvp`) or nested reverse (`grad` inside another transformation)
transformation that starts pushes a `Level`; its values (`LevelValue`) know their
level. A NumPy call on values of several levels is handled by the innermost
one (the deepest level present), which treats the others as constants: their
primal computations reach the outer levels through the same protocols. That is
how `d/dx [x · d/dy (x + y)]` gets 1, not 2: each level tags its own values, so
perturbations never mix (JAX's and Siskind & Pearlmutter's level tagging).

The reverse engine (`Traced`) is always the outermost level: a transformation
started while anything is being traced runs as a `Level`; so `Traced` defers to
level values (`defers`) and never sees one as an argument of a rule.
"""

from __future__ import annotations

import operator
import sys
import threading
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from rulekit._engine._array_methods import ArrayMethods
from rulekit._engine._primal_only import PRIMAL_ONLY
from rulekit._engine._refusals import (
    finished_level,
    index_refusal,
    inner_into_outer,
    keyword_tangent,
    leak,
)  # fmt: skip
from rulekit._engine._scalar_calls import scalars_as_arrays
from rulekit._engine._state import trace_state
from rulekit._errors import MissingRuleError, TracingError
from rulekit._functions import function_name
from rulekit._registry import registry
from rulekit._signature import signature_of

__all__ = ["Level", "LevelValue", "active_levels", "base_array", "defers", "dispatch", "inexact",
           "inner_into_outer", "innermost", "nesting", "plain"]  # fmt: skip


class _Fallbacks(threading.local):
    """Per thread: numpy functions whose Python implementation a level is running."""

    def __init__(self) -> None:
        self.running: set[Any] = set()


_falling_back = _Fallbacks()


def inexact(x: Any) -> bool:
    """Whether value `x` (under any levels) is float or complex: can have a derivative."""
    p = plain(x)
    dt = getattr(p, "dtype", None)
    if dt is not None:
        return bool(dt.kind in "fc")
    return isinstance(p, (float, complex))


def _carries_derivative(y: Any) -> bool:
    """Whether a result has a derivative: float/complex, or a container holding one."""
    if isinstance(y, (tuple, list)):
        return any(_carries_derivative(e) for e in y)
    return isinstance(y, LevelValue) or inexact(y)


class _Levels(threading.local):
    def __init__(self) -> None:
        self.stack: list[Level] = []


_levels = _Levels()


def active_levels() -> list[Level]:
    """The levels running in this thread, outermost first."""
    return _levels.stack


def nesting() -> bool:
    """Whether a transformation started now is nested: some level, or a reverse trace, runs."""
    return bool(_levels.stack) or bool(trace_state.tapes)


class Level:
    """One running transformation (subclasses: the forward and the nested reverse level).

    `call(f, args, kwargs)` handles a NumPy call whose innermost values are this level's;
    `setitem(target, idx, value)` a write into one of its values.
    """

    kind = "transformation"

    def __init__(self) -> None:
        self.depth = -1

    def __enter__(self) -> Level:
        registry.load_pending()  # (rule packages due now, before f calls anything: scipy's)
        stack = _levels.stack
        self.depth = len(stack)
        stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = _levels.stack
        if stack and stack[-1] is self:
            stack.pop()
        self.depth = -1

    @property
    def running(self) -> bool:
        stack = _levels.stack
        return 0 <= self.depth < len(stack) and stack[self.depth] is self

    # -- what a subclass provides ------------------------------------------------

    #: the rules this level calls (`forward_registry`, `vjp_registry`) and their name
    table: Any = None
    rule_kind = "rule"

    def apply(self, impl: Any, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call rule `impl` for `f(*args, **kwargs)` and wrap its output."""
        raise NotImplementedError

    def setitem(self, target: Any, idx: Any, value: Any) -> None:
        """`target[idx] = value`, `target` a value of this level."""
        raise NotImplementedError

    def primal_of(self, x: Any) -> Any:
        """`x` with this level's values replaced by their primals (in containers too)."""
        if isinstance(x, LevelValue):
            return x.primal if x.level is self else x
        t = type(x)
        if t is tuple or t is list:
            return t([self._primal_of_element(e) for e in x])
        if t is dict:
            return {k: self._primal_of_element(v) for k, v in x.items()}
        return x

    def _primal_of_element(self, e: Any) -> Any:
        if isinstance(e, LevelValue):
            return e.primal if e.level is self else e
        if type(e) in (tuple, list, dict):
            return self.primal_of(e)
        return e

    def owns(self, x: Any) -> bool:
        """Whether `x` is, or contains, a value of this level."""
        if isinstance(x, LevelValue):
            return x.level is self
        if isinstance(x, (tuple, list)):
            return any(self.owns(e) for e in x)
        if isinstance(x, dict):
            return any(self.owns(e) for e in x.values())
        return False

    # -- a call --------------------------------------------------------------------

    def call(self, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Handle `f(*args, **kwargs)`, whose innermost values are this level's."""
        if f in PRIMAL_ONLY:
            return f(*self.primal_of(args), **self.primal_of(kwargs))
        if f is operator.setitem:
            return self.setitem(*args)
        if kwargs.get("out") is not None:
            return self._into_out(f, args, kwargs)
        owned = [k for k, v in kwargs.items() if self.owns(v)]
        plain_args = [plain(a) for a in self.primal_of(args)]
        try:
            _, reg = self.table.lookup_call(f, plain_args)
        except MissingRuleError as e:
            if owned:
                raise keyword_tangent(function_name(f), owned, self.rule_kind) from None
            return self._without_rule(f, args, kwargs, e)
        except TypeError:  # (unhashable arguments: a slow lookup)
            reg = self.table.lookup(signature_of(f, *plain_args))
        if owned and not getattr(reg.impl, "keyword_tangents", False):
            raise keyword_tangent(function_name(f), owned, self.rule_kind)
        return self.apply(reg.impl, f, args, kwargs)

    def _into_out(self, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """`f(..., out=o)`: computed, then written into `o` (a scalar is rebound)."""
        kw = dict(kwargs)
        out = kw.pop("out")
        target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
        y = self.call(f, args, kw)
        if isinstance(target, LevelValue) and target.level is self:
            if not isinstance(plain(target), np.ndarray):
                return y  # (an immutable scalar: rebound, as numpy scalars are)
            self.setitem(target, Ellipsis, y)
            return target
        if self.owns(y):
            raise TracingError(
                f"{function_name(f)}(..., out=...) wrote a differentiated value into an array "
                "the transformation does not trace. Fix: drop out= and use the result."
            )
        target[...] = y
        return target

    def _without_rule(
        self, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any], err: Exception
    ) -> Any:
        """No rule: trace through a Python implementation; answer a call whose result has no
        derivative on the primals; refuse anything else (naming the missing rule)."""
        retry = scalars_as_arrays(f, args, kwargs, lambda v: getattr(v, "level", 0) is self, plain)
        if retry is not None:  # (most rules take arrays: a NumPy scalar as a 0-d array)
            return retry()
        impl = getattr(f, "_implementation", None)
        running = _falling_back.running
        if impl is not None and hasattr(impl, "__code__") and f not in running:
            running.add(f)
            try:
                return impl(*args, **kwargs)
            except TracingError as e:  # (numpy's code converted a value: name the rule)
                why = str(e).split(". ")[0]
                raise TracingError(
                    f"{function_name(f)} has no {self.rule_kind}, and numpy's Python "
                    f"implementation of it could not be traced ({why}). Fix: register one. "
                    f"{err}"
                ) from None
            finally:
                running.discard(f)
        y = f(*self.primal_of(args), **self.primal_of(kwargs))
        if not _carries_derivative(y):
            return y
        raise TracingError(
            f"{function_name(f)} has no {self.rule_kind}, so a {self.kind} cannot "
            f"differentiate it. {err}"
        ) from None


def _deepest(items: Any, best: Level | None) -> Level | None:
    """The deeper of `best` and the deepest level among the level values in the elements
    of container `items` (a tuple, list or dict's values; nested containers searched)."""
    for e in items.values() if isinstance(items, dict) else items:
        if isinstance(e, LevelValue):
            lv = e.level
            if not lv.running:
                raise finished_level(lv.kind)
            if best is None or lv.depth > best.depth:
                best = lv
        elif isinstance(e, (tuple, list, dict)):
            best = _deepest(e, best)
    return best


def innermost(*xs: Any) -> Level | None:
    """The deepest level among the level values in `xs` (containers searched too)."""
    return _deepest(xs, None)


def _call_level(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Level | None:
    """`innermost(args, kwargs)` for a call's arguments (the common case: no keywords)."""
    best = _deepest(args, None)
    return _deepest(kwargs, best) if kwargs else best


def defers(args: Any, kwargs: Any) -> bool:
    """Whether a reverse-engine call must leave these arguments to a level (the `Traced`
    protocols return NotImplemented then). Cheap when no level runs."""
    if not _levels.stack:
        return False
    if not isinstance(args, (tuple, list)):  # (one value: `traced[i] = value`)
        args = (args,)
    return _call_level(args, kwargs) is not None


def dispatch(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Hand the call to the innermost level among its arguments."""
    level = _call_level(args, kwargs)
    assert level is not None
    return level.call(f, args, kwargs)


def plain(x: Any) -> Any:
    """The plain value under every level (and the reverse engine's `Traced`): what a rule's
    signature is computed from."""
    while True:
        if isinstance(x, LevelValue):
            x = x.primal
        elif hasattr(x, "cd") and hasattr(x, "tape"):
            x = x.cd.x
        else:
            return x


def base_array(x: Any) -> Any:
    """The array owning the memory of plain value `x` (None for a non-array)."""
    x = plain(x)
    if not isinstance(x, np.ndarray):
        return None
    while isinstance(x.base, np.ndarray):
        x = x.base
    return x


class LevelValue(ArrayMethods, NDArrayOperatorsMixin):
    """A value traced by a `Level`: holds its `primal` (a plain value or a value of an
    outer level) and its `level`. Speaks NumPy's protocols like `Traced` does."""

    __slots__ = ("level", "primal")
    __array_priority__ = 2000

    def __init__(self, primal: Any, level: Level) -> None:
        self.primal = primal
        self.level = level

    # -- NumPy protocols --------------------------------------------------------

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        f = ufunc if method == "__call__" else getattr(ufunc, method)
        return dispatch(f, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return dispatch(func, args, kwargs)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise leak("NumPy was asked to convert (__array__)", sys._getframe(1))

    def __float__(self) -> float:
        raise leak("float() was applied to", sys._getframe(1))

    def __int__(self) -> int:
        raise leak("int() was applied to", sys._getframe(1))

    def __complex__(self) -> complex:
        raise leak("complex() was applied to", sys._getframe(1))

    def __index__(self) -> int:
        raise index_refusal(sys._getframe(1))

    def item(self, *args: Any) -> Any:
        raise leak(".item() was applied to")

    def tolist(self) -> Any:
        raise leak(".tolist() was applied to")

    def __bool__(self) -> bool:  # control flow on a value: the branch carries no derivative
        return bool(self.primal)

    def __hash__(self) -> int:
        return id(self)

    # -- attributes ---------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self.primal)

    @property
    def dtype(self) -> np.dtype:
        d = getattr(self.primal, "dtype", None)
        return np.result_type(self.primal) if d is None else d

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, idx: Any) -> Any:
        return dispatch(operator.getitem, (self, idx), {})

    def __setitem__(self, idx: Any, value: Any) -> None:
        level = innermost(self, value)
        assert level is not None
        if level is not self.level:
            raise inner_into_outer()
        level.setitem(self, idx, value)

    def fill(self, value: Any) -> None:
        self[...] = value

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        return dispatch(np.ndarray.astype, (self, dtype, *args), kwargs)

    def __copy__(self) -> Any:
        return np.copy(self)

    def __deepcopy__(self, memo: Any) -> Any:
        return self.__copy__()

    # Integer-valued queries carry no derivative: answered on the primal.
    def argmax(self, *args: Any, **kwargs: Any) -> Any:
        return np.argmax(self.primal, *args, **kwargs)

    def argmin(self, *args: Any, **kwargs: Any) -> Any:
        return np.argmin(self.primal, *args, **kwargs)

    def argsort(self, *args: Any, **kwargs: Any) -> Any:
        return np.argsort(self.primal, *args, **kwargs)

    def nonzero(self) -> Any:
        return np.nonzero(self.primal)

    def all(self, *args: Any, **kwargs: Any) -> Any:
        return np.all(self.primal, *args, **kwargs)

    def any(self, *args: Any, **kwargs: Any) -> Any:
        return np.any(self.primal, *args, **kwargs)

    def __repr__(self) -> str:
        name, depth = type(self).__name__, self.level.depth
        return f"{name}(shape={self.shape}, dtype={self.dtype}, depth={depth})"
