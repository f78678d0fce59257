"""Hypothesis strategies from the registry's type patterns, and a one-line rule fuzzer.

    from testutils import strategies
    from rulekit import Array

    strategies.arrays(np.float64, ndim=2)                  # 0 or |x| in [1e-3, 1e3]
    strategies.args_for(np.add, Array[np.floating], float) # argument tuples for a signature
    test_softplus = strategies.fuzz_rule(softplus)         # a pytest test: check_rule on
                                                           # inputs from every registration
    strategies.arrays(np.float64, edge_cases=True)         # opt in: subnormals, inf, nan, ...

Generated values are those a rule meets in practice: exactly 0, or of a
magnitude in `MAGNITUDE` (1e-3 … 1e3, log-uniform), either sign — never
subnormal, tiny (-3.6e-280) or huge. Edge values are an explicit opt-in
(`edge_cases=True`, `edge_values`). Arrays in one generated call share their
side length (all axes are `n`, some broadcast to 1), so elementwise,
matrix-product and solve-like signatures get consistent shapes most of the
time; calls the primal rejects (it raises, or returns non-finite values) are
discarded with `hypothesis.reject()`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rulekit import Registration, registry
from rulekit.patterns import (
    AnyPattern,
    ArrayPattern,
    ClassPattern,
    Pattern,
    UnionPattern,
    VarargPattern,
    as_pattern,
)

__all__ = [
    "ELEMENTS",
    "MAGNITUDE",
    "Unsupported",
    "args_for",
    "arrays",
    "distinct_failures",
    "edge_values",
    "fuzz_rule",
    "practical_floats",
    "scalars",
]

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


#: Magnitudes of generated values (besides exact zeros): values a rule meets in practice,
#: far from underflow and overflow. Edge cases are an explicit opt-in (`edge_cases=True`,
#: `edge_values`).
MAGNITUDE = (1e-3, 1e3)

#: One generated value in ZERO_ODDS is an exact zero.
ZERO_ODDS = 12

#: Default bounds of generated values: |x| in MAGNITUDE or exactly 0, either sign.
ELEMENTS = (-MAGNITUDE[1], MAGNITUDE[1])


def _fit(v: float, dtype: Any, lo: float, hi: float) -> float:
    """`v` rounded to `dtype` (hypothesis wants exactly representable elements), in [lo, hi]."""
    t = np.dtype(dtype).type
    r = float(t(v))
    if r > hi:
        r = float(np.nextafter(t(hi), t(-np.inf)))
    if r < lo:
        r = float(np.nextafter(t(lo), t(np.inf)))
    return r


class _Power:
    """e ↦ sign·10^e, fitted to the dtype and the bounds."""

    def __init__(self, sign: float, dtype: Any, lo: float, hi: float) -> None:
        self.sign, self.dtype, self.lo, self.hi = sign, dtype, lo, hi

    def __call__(self, e: float) -> float:
        return _fit(self.sign * 10.0**e, self.dtype, self.lo, self.hi)


def practical_floats(
    lo: float = ELEMENTS[0], hi: float = ELEMENTS[1], dtype: Any = np.float64
) -> st.SearchStrategy[float]:
    """Floats in [lo, hi] that are 0 or have |x| in `MAGNITUDE`, log-uniform in magnitude
    (every decade as likely; shrinking goes towards 1 and 0), either sign."""
    small, large = MAGNITUDE
    options: list[st.SearchStrategy[float]] = []
    sides = ((1.0, max(lo, small), min(hi, large)), (-1.0, max(-hi, small), min(-lo, large)))
    for sign, a, b in sides:
        if a <= b:
            exponents = st.floats(math.log10(a), math.log10(b))
            options.append(exponents.map(_Power(sign, dtype, lo, hi)))
    zero = lo <= 0.0 <= hi
    if not options:
        if zero:
            return st.just(0.0)
        raise ValueError(f"no value in [{lo}, {hi}] is 0 or has a magnitude in {MAGNITUDE}")
    nonzero = st.one_of(options)
    if not zero:
        return nonzero
    # An exact 0 one time in ZERO_ODDS (zeros matter, but a matrix of many is singular)
    return st.integers(0, ZERO_ODDS - 1).flatmap(lambda k: nonzero if k else st.just(0.0))


def edge_values(dtype: Any = np.float64) -> st.SearchStrategy[float]:
    """The values rules rarely meet and often get wrong: ±0, subnormals, the smallest and
    largest normal numbers, ±inf and nan (of `dtype`'s float type). Opt-in only."""
    dt = np.dtype(dtype)
    fi = np.finfo(dt.type(0).real.dtype)
    tiny, sub, big = float(fi.tiny), float(fi.smallest_subnormal), float(fi.max)
    values = [0.0, -0.0, sub, -sub, 4 * sub, tiny, -tiny, big, -big, big / 4, math.inf, -math.inf]
    return st.sampled_from([*values, math.nan])


def _elements(dtype: Any, lo: float, hi: float, edge_cases: bool = False) -> st.SearchStrategy[Any]:
    dt = np.dtype(dtype)
    if dt.kind in "fc":
        part_dtype = dt.type(0).real.dtype
        part = practical_floats(lo, hi, part_dtype)
        if edge_cases:
            part = st.one_of(part, edge_values(part_dtype))
        return part if dt.kind == "f" else st.builds(complex, part, part)
    if dt.kind == "b":
        return st.booleans()
    return st.integers(0, 3)


def arrays(
    dtype: Any = np.float64,
    ndim: int | None = None,
    side: int | None = None,
    elements: tuple[float, float] = ELEMENTS,
    max_side: int = 4,
    edge_cases: bool = False,
) -> st.SearchStrategy[np.ndarray]:
    """Arrays of `dtype` with `ndim` axes (0–3 if None), each of length `side` or 1.

    Values lie in `elements` = (lo, hi) and are exactly 0 or have a magnitude in
    `MAGNITUDE` (1e-3 … 1e3): never subnormal, tiny or huge. `edge_cases=True` mixes
    in `edge_values` (±0, subnormals, the extreme normals, ±inf, nan). Memory order is
    C or F (`check_rule` itself tries other layouts).
    """

    @st.composite
    def build(draw: Any) -> np.ndarray:
        nd = draw(st.integers(0, 3)) if ndim is None else ndim
        n = draw(st.integers(1, max_side)) if side is None else side
        ones = draw(st.lists(st.booleans(), min_size=nd, max_size=nd))
        shape = tuple(1 if (one and draw(st.integers(0, 3)) == 0) else n for one in ones)
        a = draw(hnp.arrays(dtype, shape, elements=_elements(dtype, *elements, edge_cases)))
        return np.asfortranarray(a) if nd > 1 and draw(st.booleans()) else a

    return build()


def scalars(
    cls: type, elements: tuple[float, float] = ELEMENTS, edge_cases: bool = False
) -> st.SearchStrategy[Any]:
    """Values of a scalar class: float, complex, int, bool, numpy scalar types (floats as
    in `arrays`)."""
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
        return _elements(cls, *elements, edge_cases).map(cls)
    if issubclass(cls, complex):
        return _elements(np.complex128, *elements, edge_cases).map(complex)
    if issubclass(cls, float):
        return _elements(np.float64, *elements, edge_cases).map(cls)
    if issubclass(cls, (int, np.integer)):
        return st.integers(0, 3).map(cls)
    raise Unsupported(f"no strategy for values of class {cls.__qualname__}")


def for_pattern(
    p: Pattern, side: int, elements: tuple[float, float] = ELEMENTS, edge_cases: bool = False
) -> st.SearchStrategy[Any]:
    """A strategy for one argument matching pattern `p` (arrays with axes of length `side`)."""
    if isinstance(p, ArrayPattern):
        dtypes: list[Any] | None = CONCRETE.get(p.dtype)
        if dtypes is None:
            raise Unsupported(f"no concrete dtype known for {p!r}")
        return st.sampled_from(dtypes).flatmap(
            lambda dt: arrays(dt, p.ndim, side, elements, edge_cases=edge_cases)
        )
    if isinstance(p, ClassPattern):
        if issubclass(p.cls, np.ndarray):
            return for_pattern(ArrayPattern(), side, elements, edge_cases)
        return scalars(p.cls, elements, edge_cases)
    if isinstance(p, UnionPattern):
        options = []
        for m in sorted(p.members, key=repr):
            try:
                options.append(for_pattern(m, side, elements, edge_cases))
            except Unsupported:
                continue
        if not options:
            raise Unsupported(f"no member of {p!r} can be generated")
        return st.one_of(options)
    if isinstance(p, AnyPattern):
        raise Unsupported("arguments matching Any cannot be generated: attach examples")
    raise Unsupported(f"no strategy for pattern {p!r}")


def args_for(
    f_or_reg: Any,
    *patterns: Any,
    elements: tuple[float, float] = ELEMENTS,
    max_side: int = 4,
    edge_cases: bool = False,
) -> st.SearchStrategy[tuple[Any, ...]]:
    """Argument tuples for a signature: a `Registration`, or a function and its patterns.

    Values as in `arrays` (`edge_cases=True` opts in to the edge values). Raises
    `Unsupported` when some pattern cannot be generated.
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
        out = [draw(for_pattern(p, side, elements, edge_cases)) for p in fixed]
        if vararg is not None:
            extra = draw(st.integers(0, 2))
            element = for_pattern(vararg.element, side, elements, edge_cases)
            out += [draw(element) for _ in range(extra)]
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
    elements: tuple[float, float] = ELEMENTS,
    edge_cases: bool = False,
    **check_options: Any,
) -> Callable[[], None]:
    """A pytest test running `check_rule(f, *args)` on generated arguments, in one line::

        test_my_rule = strategies.fuzz_rule(my_function)

    Arguments come from `patterns` if given, else from every registration for `f`.
    Calls the primal rejects (it raises, or returns non-finite values) are discarded, and
    so are inputs finite differences cannot handle (`UncheckableInput`: with
    `edge_cases=True`). `check_options` go to `check_rule`. When hypothesis finds several
    distinct failures (of different checks), the test raises one `RuleCheckError` that
    shows each: its check, argument, input and message.
    """
    from testutils._check import UncheckableInput, check_rule

    if patterns:
        strategy = args_for(f, *patterns, elements=elements, edge_cases=edge_cases)
    else:
        regs = [r for r in registry.entries() if r.f is f or r.f == f]
        if not regs:
            raise Unsupported(f"no rule is registered for {f!r}")
        strategy = st.one_of([args_for(r, elements=elements, edge_cases=edge_cases) for r in regs])

    @settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
    )
    @given(strategy)
    def fuzz(args: tuple[Any, ...]) -> None:
        if not accepted(f, args):
            reject()
        try:
            check_rule(f, *args, **check_options)
        except UncheckableInput:
            reject()

    def test() -> None:
        try:
            fuzz()
        except Exception as e:
            if not isinstance(getattr(e, "exceptions", None), tuple):
                raise
            raise distinct_failures(e) from None  # (an ExceptionGroup)

    test.__name__ = f"fuzz_{getattr(f, '__name__', 'rule')}"
    return test


def distinct_failures(group: BaseException) -> AssertionError:
    """One error showing every failure of an exception group (hypothesis's distinct
    failures): each one's check, argument, input, message and falsifying example."""
    from testutils._check import RuleCheckError

    flat: list[BaseException] = []

    def walk(e: BaseException) -> None:
        inner = getattr(e, "exceptions", None)  # (an ExceptionGroup: Python >= 3.11)
        if isinstance(inner, tuple):
            for sub in inner:
                walk(sub)
        else:
            flat.append(e)

    walk(group)
    parts = []
    for k, e in enumerate(flat, 1):
        text = str(e) if isinstance(e, RuleCheckError) else f"{type(e).__name__}: {e}"
        notes = "\n".join(n for n in getattr(e, "__notes__", ()) if n.startswith("Falsifying"))
        parts.append(f"[{k} of {len(flat)}] {text}" + (f"\n{notes}" if notes else ""))
    message = f"hypothesis found {len(flat)} distinct failures:\n" + "\n\n".join(parts)
    first = next((e for e in flat if isinstance(e, RuleCheckError)), None)
    if first is None:
        return AssertionError(message)
    return RuleCheckError(first.check, message, first.argument, first.signature)
