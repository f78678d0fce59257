"""Hypothesis strategies from the registry's type patterns, and a one-line rule fuzzer.

    from testutils import strategies
    from rulekit import Array

    strategies.arrays(np.float64, ndim=2)                  # bounded, finite float arrays
    strategies.args_for(np.add, Array[np.floating], float) # argument tuples for a signature
    test_softplus = strategies.fuzz_rule(softplus)         # a pytest test: check_rule on
                                                           # inputs from every registration

Arrays in one generated call share their side length (all axes are `n`, some
broadcast to 1), so elementwise, matrix-product and solve-like signatures get
consistent shapes most of the time; calls the primal rejects (it raises, or
returns non-finite values) are discarded with `hypothesis.reject()`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import given, reject, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rulekit import registry
from rulekit._patterns import (
    AnyPattern,
    ArrayPattern,
    ClassPattern,
    Pattern,
    UnionPattern,
    VarargPattern,
    as_pattern,
)
from rulekit._registry import Registration

__all__ = ["Unsupported", "args_for", "arrays", "fuzz_rule", "scalars"]

#: Concrete dtypes generated for an abstract pattern dtype, most useful first.
CONCRETE: dict[type, list[Any]] = {
    np.float64: [np.float64],
    np.float32: [np.float32],
    np.float16: [np.float16],
    np.complex128: [np.complex128],
    np.complex64: [np.complex64],
    np.floating: [np.float64, np.float32],
    np.complexfloating: [np.complex128],
    np.inexact: [np.float64, np.float32, np.complex128],
    np.number: [np.float64],
    np.generic: [np.float64],
    np.integer: [np.int64],
    np.signedinteger: [np.int64],
    np.bool_: [np.bool_],
}


class Unsupported(TypeError):
    """No strategy can be built for a pattern (e.g. `Any`): attach examples to the rule."""


def _elements(dtype: Any, lo: float, hi: float) -> st.SearchStrategy[Any]:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return st.floats(lo, hi, width=8 * dt.itemsize, allow_subnormal=False)
    if dt.kind == "c":
        part = st.floats(lo, hi, width=4 * dt.itemsize, allow_subnormal=False)
        return st.builds(complex, part, part)
    if dt.kind == "b":
        return st.booleans()
    return st.integers(0, 3)


def arrays(
    dtype: Any = np.float64,
    ndim: int | None = None,
    side: int | None = None,
    elements: tuple[float, float] = (-2.0, 2.0),
    max_side: int = 4,
) -> st.SearchStrategy[np.ndarray]:
    """Arrays of `dtype` with `ndim` axes (0–3 if None), each of length `side` or 1.

    Values are finite, drawn from `elements` (bounded: well-conditioned inputs for
    finite differences). Memory order is C or F.
    """

    @st.composite
    def build(draw: Any) -> np.ndarray:
        nd = draw(st.integers(0, 3)) if ndim is None else ndim
        n = draw(st.integers(1, max_side)) if side is None else side
        ones = draw(st.lists(st.booleans(), min_size=nd, max_size=nd))
        shape = tuple(1 if (one and draw(st.integers(0, 3)) == 0) else n for one in ones)
        a = draw(hnp.arrays(dtype, shape, elements=_elements(dtype, *elements)))
        return np.asfortranarray(a) if nd > 1 and draw(st.booleans()) else a

    return build()


def scalars(cls: type, elements: tuple[float, float] = (-2.0, 2.0)) -> st.SearchStrategy[Any]:
    """Values of a scalar class: float, complex, int, bool, numpy scalar types."""
    abstract = {
        np.floating: np.float64,
        np.complexfloating: np.complex128,
        np.inexact: np.float64,
        np.number: np.float64,
        np.integer: np.int64,
        np.signedinteger: np.int64,
        np.unsignedinteger: np.uint64,
        np.generic: np.float64,
    }
    cls = abstract.get(cls, cls)  # fmt: skip
    if issubclass(cls, (bool, np.bool_)):
        return st.booleans().map(cls)
    if issubclass(cls, (np.floating, np.complexfloating)):
        return _elements(cls, *elements).map(cls)
    if issubclass(cls, complex):
        return _elements(np.complex128, *elements).map(complex)
    if issubclass(cls, float):
        return st.floats(*elements, allow_subnormal=False)
    if issubclass(cls, (int, np.integer)):
        return st.integers(0, 3).map(cls)
    raise Unsupported(f"no strategy for values of class {cls.__qualname__}")


def for_pattern(
    p: Pattern, side: int, elements: tuple[float, float] = (-2.0, 2.0)
) -> st.SearchStrategy[Any]:
    """A strategy for one argument matching pattern `p` (arrays with axes of length `side`)."""
    if isinstance(p, ArrayPattern):
        dtypes: list[Any] | None = CONCRETE.get(p.dtype)
        if dtypes is None:
            raise Unsupported(f"no concrete dtype known for {p!r}")
        return st.sampled_from(dtypes).flatmap(lambda dt: arrays(dt, p.ndim, side, elements))
    if isinstance(p, ClassPattern):
        if issubclass(p.cls, np.ndarray):
            return for_pattern(ArrayPattern(), side, elements)
        return scalars(p.cls, elements)
    if isinstance(p, UnionPattern):
        options = []
        for m in sorted(p.members, key=repr):
            try:
                options.append(for_pattern(m, side, elements))
            except Unsupported:
                continue
        if not options:
            raise Unsupported(f"no member of {p!r} can be generated")
        return st.one_of(options)
    if isinstance(p, AnyPattern):
        raise Unsupported("arguments matching Any cannot be generated: attach examples")
    raise Unsupported(f"no strategy for pattern {p!r}")


def args_for(
    f_or_reg: Any, *patterns: Any, elements: tuple[float, float] = (-2.0, 2.0), max_side: int = 4
) -> st.SearchStrategy[tuple[Any, ...]]:
    """Argument tuples for a signature: a `Registration`, or a function and its patterns.

    Raises `Unsupported` when some pattern cannot be generated.
    """
    if isinstance(f_or_reg, Registration):
        ps: Sequence[Pattern] = f_or_reg.patterns
    else:
        ps = [as_pattern(p) for p in patterns]
    fixed = [p for p in ps if not isinstance(p, VarargPattern)]
    vararg = ps[-1] if ps and isinstance(ps[-1], VarargPattern) else None
    for p in (*fixed, *([vararg.element] if vararg else [])):
        for_pattern(p, 1)  # raise Unsupported now, not inside hypothesis

    @st.composite
    def build(draw: Any) -> tuple[Any, ...]:
        side = draw(st.integers(1, max_side))
        out = [draw(for_pattern(p, side, elements)) for p in fixed]
        if vararg is not None:
            extra = draw(st.integers(0, 2))
            out += [draw(for_pattern(vararg.element, side, elements)) for _ in range(extra)]
        return tuple(out)

    return build()


def accepted(f: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> bool:
    """Whether the primal accepts `args` and returns finite values."""
    from testutils._trees import clone, leaves

    try:
        with np.errstate(all="ignore"):
            y = f(*clone(list(args)), **(kwargs or {}))
    except Exception:
        return False
    floats = [v for _, v in leaves(y) if isinstance(v, (np.ndarray, np.inexact, float, complex))]
    return all(np.all(np.isfinite(v)) for v in floats if np.asarray(v).dtype.kind in "fc")


def fuzz_rule(
    f: Any,
    *patterns: Any,
    max_examples: int = 20,
    elements: tuple[float, float] = (-2.0, 2.0),
    **check_options: Any,
) -> Callable[[], None]:
    """A pytest test running `check_rule(f, *args)` on generated arguments, in one line::

        test_my_rule = strategies.fuzz_rule(my_function)

    Arguments come from `patterns` if given, else from every registration for `f`.
    Calls the primal rejects are discarded. `check_options` go to `check_rule`.
    """
    from testutils._check import check_rule

    if patterns:
        strategy = args_for(f, *patterns, elements=elements)
    else:
        regs = [r for r in registry.entries() if r.f is f or r.f == f]
        if not regs:
            raise Unsupported(f"no rule is registered for {f!r}")
        strategy = st.one_of([args_for(r, elements=elements) for r in regs])

    @settings(max_examples=max_examples, deadline=None, derandomize=True, database=None)
    @given(strategy)
    def test(args: tuple[Any, ...]) -> None:
        if not accepted(f, args):
            reject()
        check_rule(f, *args, **check_options)

    test.__name__ = f"fuzz_{getattr(f, '__name__', 'rule')}"
    return test
