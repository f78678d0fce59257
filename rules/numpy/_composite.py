"""Rules derived from a traceable re-implementation: for numpy functions written in Python
whose own code cannot be traced through (it converts its arguments with `np.asarray`).

`composite(impl, adjoint)` is a rule factory to register for `fn`
(`rulekit.build_primitive_rrule.register(fn, *patterns, examples=...)(composite(...))`,
in the module that holds `impl`, which then owns the registration): it builds the
rule `rulekit.build_rrule(impl)`. `impl` computes what `fn`
computes (numpy's own sequence of operations, without the conversions) from functions
that have rules, so its derivative is exact and follows their conventions. The rule
is a factory registration (`build_primitive_rrule`): each call site gets its own derived
rule, so two calls of `fn` never share the rules (and buffers) recorded inside `impl`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

import rulekit
from rulekit import CoDual, NoFData, NoRData
from rules._support.cotangents import NO_F, accumulate_sequence
from rules._support.forward import name_rules, no_tangent, register_like, traced_rules

__all__ = ["composite", "register_traced_keywords"]


def composite(impl: Callable[..., Any], adjoint: str) -> Callable[[Any], Any]:
    """A rule factory building `rulekit.build_rrule(impl)`; `adjoint` (the one-line adjoint)
    becomes its docstring.

    A traced keyword array (`aweights=w`) is passed to `impl` positionally, so that the
    derived rule differentiates it too (a derived rule differentiates positional inputs).
    A list holding traced numbers is handed to the derived rule as a tuple (whose
    elements' cotangents it returns; it drops a list's) and to `impl` as a list again;
    the numbers' cotangents then go back by the list's convention (`accumulate_sequence`).
    """
    params = [p for p in inspect.signature(impl).parameters.values()
              if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]  # fmt: skip

    def build(sig: Any) -> Any:
        as_lists: set[int] = set()  # positions of the call being traced that were lists

        def listed(*args: Any, **kwargs: Any) -> Any:
            return impl(*[list(a) if k in as_lists else a for k, a in enumerate(args)], **kwargs)

        derived = rulekit.build_rrule(listed)

        def rule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
            numbers = [k for k, a in enumerate(args) if _has_numbers(a)]
            if not numbers and not any(isinstance(v, CoDual) for v in kwargs.values()):
                return derived(f, *args, **kwargs)
            pos, rest = list(args), dict(kwargs)
            for k in range(len(args), len(params)):
                if not any(isinstance(rest.get(p.name), CoDual) for p in params[k:]):
                    break
                v = rest.pop(params[k].name, params[k].default)
                pos.append(v if isinstance(v, CoDual) else CoDual(v, None))
            for k in numbers:
                pos[k] = CoDual(tuple(args[k].x), tuple(_element_fdata(args[k])))
            as_lists.clear()
            as_lists.update(numbers)
            try:
                y, pullback = derived(f, *pos, **rest)
            finally:
                as_lists.clear()
            n = len(args) + 1

            def keyword_pullback(dy: Any) -> tuple[Any, ...]:
                rd = list(pullback(dy))[:n]
                for k in numbers:
                    r = rd[k + 1]
                    grads = [None if isinstance(e, NoRData) else e for e in r] if isinstance(
                        r, tuple) else [None] * len(args[k].x)  # fmt: skip
                    rd[k + 1] = accumulate_sequence(args[k], grads)
                return tuple(rd)

            return y, keyword_pullback

        rule.__doc__ = adjoint
        return rule

    build.__doc__ = adjoint
    build.__name__ = build.__qualname__ = f"build_{impl.__name__.lstrip('_')}_rule"
    build.__module__ = impl.__module__
    return build


def _has_numbers(a: CoDual) -> bool:
    """Whether `a` is a list with differentiated numbers among its elements."""
    return (
        isinstance(a.x, list)
        and a.dx is not None
        and any(not isinstance(e, np.ndarray) and isinstance(e, (float, complex, np.inexact))
                for e in a.x)
    )  # fmt: skip


def _element_fdata(a: CoDual) -> list[Any]:
    """The fdata of each element of list `a` as the tracer wraps it (numbers: NoFData)."""
    d = a.dx
    out = []
    for k, e in enumerate(a.x):
        dk = NO_F if isinstance(d, NoFData) else d[k]
        if dk is not None and not isinstance(e, np.ndarray):
            dk = NO_F  # (a list's fdata may hold a number's full tangent: the tracer wants NoFData)
        out.append(dk)
    return out


def register_traced_keywords(f: Any, impl: Callable[..., Any]) -> None:
    """`rules._support.forward.register_traced(f, impl)`, with a forward rule that also
    differentiates keyword arguments given with a tangent (`aweights=Dual(w, ẇ)`), as the
    derived reverse rule (`composite`) differentiates a traced keyword array."""
    _, vjp = traced_rules(impl)
    register_like(f, frule=_keyword_frule(impl), vjp=vjp)


def _keyword_frule(impl: Callable[..., Any]) -> Callable[..., Any]:
    def frule(f: Any, *args: Any, **kwargs: Any) -> Any:
        names = [k for k, v in kwargs.items() if isinstance(v, rulekit.Dual)]
        rest = {k: v for k, v in kwargs.items() if k not in names}
        n = len(args)
        primals = tuple(a.x for a in args) + tuple(kwargs[k].x for k in names)
        tangents = tuple(a.dx for a in args) + tuple(kwargs[k].dx for k in names)

        def call(*xs: Any) -> Any:
            return impl(*xs[:n], **rest, **dict(zip(names, xs[n:], strict=True)))

        if all(no_tangent(t) for t in tangents):
            return rulekit.Dual(call(*primals), None)
        y, dy = rulekit.jvp(call, primals, tangents)
        return rulekit.Dual(y, dy)

    name = getattr(impl, "__name__", "impl")
    name_rules(frule, None, name, f"{name} (its NumPy re-implementation, traced; keywords too)")
    # (it takes keyword tangents: see rulekit.frule's doc)
    frule.keyword_tangents = True  # type: ignore[attr-defined]
    return frule
