"""Type patterns (rulekit/_patterns.py): the subtype order, matching, malformed patterns."""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
from rulekit import Array, RuleRegistrationError, Vararg, registry
from rulekit._patterns import (
    AnyPattern,
    ArrayPattern,
    ClassPattern,
    UnionPattern,
    VarargPattern,
    as_pattern,
    is_subpattern,
    matches,
    type_key,
)

SETTINGS = settings(derandomize=True, max_examples=150, deadline=None, database=None)

HIERARCHY = [np.float64, np.floating, np.inexact, np.number, np.generic]


@rulekit.primitive
def _f(*args: Any) -> None:
    """A private function to register rules for (wrapped: traced calls reach its rules)."""


# -- the subtype order ------------------------------------------------------------------


def test_dtype_order_follows_numpys_scalar_hierarchy() -> None:
    for i, lo in enumerate(HIERARCHY):
        for hi in HIERARCHY[i:]:
            assert is_subpattern(Array[lo], Array[hi]), (lo, hi)
        for hi in HIERARCHY[:i]:
            assert not is_subpattern(Array[lo], Array[hi]), (lo, hi)
    assert not is_subpattern(Array[np.float64], Array[np.complexfloating])
    assert not is_subpattern(Array[np.float32], Array[np.float64])
    assert is_subpattern(Array[np.complex64], Array[np.inexact])
    assert is_subpattern(Array[np.int8], Array[np.integer])
    assert not is_subpattern(Array[np.bool_], Array[np.number])  # bool is not a number


def test_plain_array_is_the_top_of_arrays() -> None:
    assert Array == Array[np.generic] == as_pattern(np.ndarray)
    assert repr(Array) == "Array"
    assert repr(Array[np.float64, 2]) == "Array[np.float64, 2]"
    assert repr(Array[np.floating]) == "Array[np.floating]"
    assert Array[np.dtype("float32")] == Array[np.float32]  # a dtype object means its type


def test_ndim_order() -> None:
    assert is_subpattern(Array[np.float64, 2], Array[np.float64])
    assert is_subpattern(Array[np.float64, 2], Array[np.floating, 2])
    assert not is_subpattern(Array[np.float64], Array[np.float64, 2])
    assert not is_subpattern(Array[np.float64, 2], Array[np.float64, 1])
    assert matches(Array[np.float64, 0], (np.float64, 0))
    assert not matches(Array[np.float64, 1], (np.float64, 2))


def test_classes() -> None:
    assert is_subpattern(as_pattern(bool), as_pattern(int))
    assert not is_subpattern(as_pattern(int), as_pattern(bool))
    assert matches(as_pattern(float), float)
    assert matches(as_pattern(float), np.float64)  # np.float64 subclasses float
    assert not matches(as_pattern(float), np.float32)
    assert not matches(as_pattern(float), (np.float64, 0))  # a 0-d array is not a float
    assert is_subpattern(Array[np.float64], as_pattern(np.ndarray))
    assert not is_subpattern(as_pattern(float), Array)
    assert repr(as_pattern(float)) == "float"


def test_union() -> None:
    u = as_pattern(Union[Array[np.float64], float])
    assert isinstance(u, UnionPattern)
    assert matches(u, (np.float64, 3)) and matches(u, float) and not matches(u, int)
    assert is_subpattern(Array[np.float64, 1], u) and is_subpattern(as_pattern(float), u)
    assert not is_subpattern(u, Array[np.float64])
    both = as_pattern(Union[Array[np.float64], Array[np.float32]])
    assert is_subpattern(both, Array[np.floating]) and not is_subpattern(Array[np.floating], both)
    assert as_pattern(int | float) == as_pattern(Union[float, int])  # PEP 604 unions too
    assert as_pattern(Union[Array[np.float64]]) == Array[np.float64]  # one member: itself


def test_any() -> None:
    assert as_pattern(Any) == as_pattern(object) == AnyPattern()
    for p in [Array, Array[np.float64, 2], as_pattern(str), as_pattern(Union[int, float])]:
        assert is_subpattern(p, AnyPattern()) and not is_subpattern(AnyPattern(), p)
    assert matches(AnyPattern(), (np.int8, 1)) and matches(AnyPattern(), type(None))


def test_a_union_with_any_is_any() -> None:
    # Union[Any, X] is every value: it must be equivalent to Any, and (like every
    # pattern) a subpattern of itself.
    u = as_pattern(Union[Any, Array[np.float64]])
    assert is_subpattern(u, u)
    assert is_subpattern(AnyPattern(), u) and is_subpattern(u, AnyPattern())


def test_vararg() -> None:
    v = Vararg[Array[np.float64]]
    assert isinstance(v, VarargPattern) and v.element == Array[np.float64]
    assert repr(v) == "Vararg[Array[np.float64]]"
    assert is_subpattern(Vararg[Array[np.float64]], Vararg[Array])
    assert not is_subpattern(Vararg[Array], Vararg[Array[np.float64]])


def test_type_key() -> None:
    assert type_key(np.ones((2, 3), np.float32)) == (np.float32, 2)
    assert type_key(np.float32(1)) is np.float32
    assert type_key(1.0) is float and type_key(None) is type(None)


# -- the order is sound: p ⊆ q ⇒ every value matching p matches q -------------------------

DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
    np.int8,
    np.int64,
    np.uint8,
    np.bool_,
    np.str_,
]
KEYS: list[Any] = [(d, n) for d in DTYPES for n in range(3)]
KEYS += [float, int, bool, complex, str, type(None), np.float64, np.float32, tuple, list]

dtype_patterns = st.sampled_from(
    [*HIERARCHY, np.complexfloating, np.integer, np.signedinteger, np.bool_, *DTYPES]
)
array_patterns = st.builds(
    lambda d, n: Array[d] if n is None else Array[d, n],
    dtype_patterns,
    st.one_of(st.none(), st.integers(0, 2)),
)
class_patterns = st.sampled_from([float, int, bool, complex, str, np.floating]).map(as_pattern)
simple_patterns = st.one_of(array_patterns, class_patterns)
patterns = st.one_of(
    simple_patterns,
    st.just(AnyPattern()),
    st.lists(simple_patterns, min_size=2, max_size=3).map(
        lambda ms: as_pattern(Union[tuple(ms)])  # type: ignore[arg-type]
    ),
)


@SETTINGS
@given(p=patterns, q=patterns, r=patterns)
def test_subpattern_order_is_sound_reflexive_and_transitive(p: Any, q: Any, r: Any) -> None:
    assert is_subpattern(p, p)
    if is_subpattern(p, q):
        for k in KEYS:
            assert not matches(p, k) or matches(q, k), (p, q, k)
        if is_subpattern(q, r):
            assert is_subpattern(p, r)


@SETTINGS
@given(p=array_patterns, q=array_patterns)
def test_array_order_is_complete(p: ArrayPattern, q: ArrayPattern) -> None:
    """For arrays, p ⊆ q exactly when every concrete array in p is in q."""
    concrete = [(d, n) for d in [*DTYPES, np.int16, np.uint64, np.longdouble] for n in range(3)]
    subset = all(matches(q, k) for k in concrete if matches(p, k))
    if any(matches(p, k) for k in concrete):
        assert is_subpattern(p, q) == subset, (p, q)


# -- most specific wins, along each axis of the order -----------------------------------------


def test_dispatch_follows_the_dtype_hierarchy(registrations: None) -> None:
    regs = {}
    for level in HIERARCHY:
        regs[level] = registry.add("rrule", _f, [Array[level]], lambda *a: None, module=__name__)
    expect = {
        np.float64: np.float64,
        np.float32: np.floating,
        np.complex128: np.inexact,
        np.int64: np.number,
        np.bool_: np.generic,
    }
    for dtype, level in expect.items():
        assert registry.which(_f, np.ones(2, dtype)) is regs[level], dtype
    # Removing a level falls back to the next one up (the cache is invalidated).
    registry.remove(regs[np.float64])
    assert registry.which(_f, np.ones(2)) is regs[np.floating]


def test_dispatch_prefers_fixed_ndim_and_classes(registrations: None) -> None:
    def rule(*a: Any) -> None:
        pass

    any_nd = registry.add("rrule", _f, [Array[np.float64]], rule, module=__name__)
    two = registry.add("rrule", _f, [Array[np.float64, 2]], rule, module=__name__)
    top = registry.add("rrule", _f, [Any], rule, module=__name__)
    num = registry.add("rrule", _f, [float], rule, module=__name__)
    u = registry.add("rrule", _f, [Union[float, int]], rule, module=__name__)
    assert registry.which(_f, np.ones((2, 2))) is two
    assert registry.which(_f, np.ones(2)) is any_nd
    assert registry.which(_f, 1.0) is num
    assert registry.which(_f, 1) is u
    assert registry.which(_f, "s") is top


# -- malformed patterns fail at registration, not at call time -------------------------------


@pytest.mark.parametrize("bad", [3, "x", [np.float64], np.float64(1.0)], ids=repr)
def test_non_patterns_are_rejected_at_registration(bad: Any) -> None:
    with pytest.raises(RuleRegistrationError, match="not a type pattern"):
        rulekit.rrule.register(_f, bad)
    with pytest.raises(RuleRegistrationError, match="not a type pattern"):
        rulekit.build_primitive_rrule.register(_f, Array, bad)


def test_non_callable_rule_is_rejected(registrations: None) -> None:
    with pytest.raises(RuleRegistrationError, match="must be callable"):
        rulekit.rrule.register(_f, Array)(3)  # type: ignore[arg-type]
    with pytest.raises(RuleRegistrationError, match="registered for callables"):
        rulekit.rrule.register(3, Array)(lambda f, x: None)
    assert not [r for r in registry.entries() if r.f is _f]


def test_vararg_must_be_last(registrations: None) -> None:
    with pytest.raises(RuleRegistrationError, match="Vararg must be the last"):
        rulekit.rrule.register(_f, Vararg[Array], Array)(lambda f, *a: None)
    with pytest.raises(RuleRegistrationError):
        Vararg[Vararg[Array]]
    with pytest.raises(RuleRegistrationError, match="inside a Union"):
        as_pattern(Union[Vararg[Array], float])
    with pytest.raises(RuleRegistrationError, match="out="):
        rulekit.rrule.register(_f, Array, out=Vararg[Array])(lambda f, *a, **k: None)


@pytest.mark.parametrize(
    "item",
    [
        "float",
        float,
        int,
        np.ndarray,
        (np.float64, -1),
        (np.float64, 1.5),
        (np.float64, True),
        (np.float64, 1, 2),
        (np.float64, "2"),
    ],
    ids=repr,
)
def test_malformed_array_patterns(item: Any) -> None:
    with pytest.raises(RuleRegistrationError, match=r"Array\[dtype, ndim\]|Array\[\.\.\.\]"):
        Array[item]


def test_classpattern_of_a_class() -> None:
    assert as_pattern(str) == ClassPattern(str)
