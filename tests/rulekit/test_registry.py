"""The dispatch registry (rulekit/_registry.py): most-specific dispatch, errors, cache, kinds.

Every test registers rules for private dummy functions and the `registrations`
fixture removes them afterwards, so nothing collides with the bundled rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import numpy as np
import pytest

import rulekit
from rulekit import (
    AmbiguousRuleError,
    Array,
    CoDual,
    MissingRuleError,
    NoFData,
    NoRData,
    Signature,
    StatefulRRule,
    Vararg,
    build_primitive_rrule,
    is_primitive,
    registry,
    rrule,
    signature_of,
    zero_codual,
)

F64 = Array[np.float64]


pytestmark = pytest.mark.usefixtures("registrations")  # (tests/conftest.py)


@rulekit.primitive
def _f(*args: Any, **kwargs: Any) -> Any:
    """A private function to register rules for (wrapped: traced calls reach its rules)."""
    return args[0]


@rulekit.primitive
def _g(*args: Any, **kwargs: Any) -> Any:
    return args[0]


def make_rule(tag: str) -> Callable[..., Any]:
    """A trivial rule that reports which registration ran."""

    def rule(f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        def pullback(dy: Any) -> tuple[Any, ...]:
            return (NoRData(),) * (1 + len(args))

        return CoDual(tag, NoFData()), pullback

    rule.__qualname__ = f"rule_{tag}"
    return rule


def call(f: Any, *args: Any, **kwargs: Any) -> str:
    """Which rule `rulekit.rrule` dispatches the call to (by its tag)."""
    y, _ = rrule(zero_codual(f), *(zero_codual(a) for a in args), **kwargs)
    return y.x


def register(f: Any, *patterns: Any, tag: str, **kw: Any) -> Callable[..., Any]:
    return rrule.register(f, *patterns, **kw)(make_rule(tag))


a1, a2 = np.ones(3), np.ones((2, 2))
f32 = np.ones(3, np.float32)


# -- most-specific dispatch ------------------------------------------------------------


def test_most_specific_registration_wins_whatever_the_order() -> None:
    register(_f, Array, Array, tag="generic")
    register(_f, F64, Array[np.float64, 1], tag="specific")
    register(_f, Array[np.floating], Array, tag="floating")
    assert call(_f, a1, a1) == "specific"
    assert call(_f, a1, a2) == "floating"
    assert call(_f, f32, a2) == "floating"
    assert call(_f, np.arange(3), a1) == "generic"


def test_vararg_dispatch() -> None:
    register(_f, Vararg[Array], tag="any arrays")
    register(_f, F64, Vararg[F64], tag="f64 then f64s")
    register(_f, F64, F64, tag="two f64")
    assert call(_f) == "any arrays"  # zero trailing arguments match
    assert call(_f, a1) == "f64 then f64s"
    assert call(_f, a1, a1) == "two f64"  # fixed beats an equivalent vararg expansion
    assert call(_f, a1, a1, a1) == "f64 then f64s"
    assert call(_f, a1, f32, a1) == "any arrays"
    with pytest.raises(MissingRuleError):
        call(_f, a1, 1.0)


def test_vararg_that_is_more_specific_beats_fixed() -> None:
    register(_f, Array, Array, tag="fixed generic")
    register(_f, Vararg[F64], tag="vararg f64")
    assert call(_f, a1, a1) == "vararg f64"
    assert call(_f, a1, f32) == "fixed generic"


def test_union_dispatch() -> None:
    register(_f, Union[F64, float], tag="f64 or float")
    register(_f, F64, tag="f64")
    register(_f, Any, tag="anything")
    assert call(_f, a1) == "f64"
    assert call(_f, 2.0) == "f64 or float"
    assert call(_f, f32) == "anything"


def test_ambiguity_names_both_candidates() -> None:
    register(_f, F64, Array, tag="left")
    register(_f, Array, F64, tag="right")
    with pytest.raises(AmbiguousRuleError) as info:
        call(_f, a1, a1)
    msg = str(info.value)
    assert "rule_left" in msg and "rule_right" in msg
    assert "Array[np.float64, 1], Array[np.float64, 1]" in msg  # the concrete signature
    assert "more specific" in msg
    # A registration for the intersection resolves it.
    register(_f, F64, F64, tag="both")
    assert call(_f, a1, a1) == "both"


def test_missing_rule_names_the_signature_and_how_to_register() -> None:
    with pytest.raises(MissingRuleError) as info:
        call(_f, a2, 1.5)
    msg = str(info.value)
    assert "_f(Array[np.float64, 2], float)" in msg
    assert "No rule is registered" in msg
    assert "@rulekit.rrule.register(" in msg and "Array[np.float64, 2], float)" in msg
    register(_f, Array[np.float32], tag="f32")
    with pytest.raises(MissingRuleError) as info:
        call(_f, a2, 1.5)
    assert "rule_f32" in str(info.value)  # lists what is registered for the function


def test_missing_rule_is_a_lookup_error() -> None:
    with pytest.raises(LookupError):
        registry.lookup(signature_of(_f, a1))
    assert registry.find(signature_of(_f, a1)) is None


# -- the cache -------------------------------------------------------------------------------


def test_cache_is_invalidated_by_a_new_registration() -> None:
    register(_f, Array, tag="generic")
    sig = signature_of(_f, a1)
    assert registry.lookup(sig).impl.__qualname__ == "rule_generic"
    assert registry.lookup_call(_f, (a1,))[1].impl.__qualname__ == "rule_generic"
    assert call(_f, a1) == "generic"
    register(_f, F64, tag="f64")
    assert registry.lookup(sig).impl.__qualname__ == "rule_f64"
    assert registry.lookup_call(_f, (a1,))[1].impl.__qualname__ == "rule_f64"
    assert call(_f, a1) == "f64"


def test_cache_is_invalidated_by_removal() -> None:
    register(_f, Array, tag="generic")
    register(_f, F64, tag="f64")
    assert call(_f, a1) == "f64"
    registry.remove(registry.which(_f, a1))
    assert call(_f, a1) == "generic"
    registry.remove(registry.which(_f, a1))
    with pytest.raises(MissingRuleError):
        call(_f, a1)


def test_lookup_call_keeps_dtype_and_ndim_apart() -> None:
    register(_f, F64, tag="f64")
    register(_f, Array[np.float64, 2], tag="f64 2d")
    register(_f, Array[np.float32], tag="f32")
    for x, tag in [(a1, "f64"), (a2, "f64 2d"), (f32, "f32"), (a1, "f64"), (a2, "f64 2d")]:
        sig, reg = registry.lookup_call(_f, (x,))
        assert sig == signature_of(_f, x) and reg.impl.__qualname__ == f"rule_{tag}"


class _Sub(np.ndarray):
    """An ndarray subclass (like np.memmap or a user's array type)."""


def test_lookup_call_keeps_dtype_and_ndim_apart_for_ndarray_subclasses() -> None:
    register(_f, F64, tag="f64")
    x64 = np.ones(3).view(_Sub)
    x32 = np.ones((2, 2), np.float32).view(_Sub)
    assert registry.lookup_call(_f, (x64,))[0] == signature_of(_f, x64)
    # A second subclass instance of another dtype and ndim must not hit the first one's entry.
    with pytest.raises(MissingRuleError):
        registry.lookup_call(_f, (x32,))


def test_unhashable_callables_can_have_rules() -> None:
    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, x: Any) -> Any:
            return x

    u = Unhashable()
    reg = registry.add("rrule", u, [F64], make_rule("unhashable"), module=__name__)
    assert call(u, a1) == "unhashable"
    assert registry.which(u, a1) is reg
    registry.remove(reg)
    with pytest.raises(MissingRuleError):
        call(u, a1)


# -- factories vs plain rules ------------------------------------------------------------------


class CountingRule(StatefulRRule):
    built = 0

    def __init__(self, sig: Signature) -> None:
        super().__init__()
        self.sig = sig
        CountingRule.built += 1

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        return CoDual("factory", NoFData()), lambda dy: (NoRData(),) * (1 + len(args))


def test_build_primitive_rrule_returns_the_plain_rule_by_default() -> None:
    rule = register(_f, F64, tag="plain")
    sig = signature_of(_f, a1)
    assert build_primitive_rrule(sig) is rule
    assert build_primitive_rrule(sig) is rule


def test_factory_wins_over_a_plain_rule_of_the_same_signature() -> None:
    register(_f, F64, tag="plain")
    build_primitive_rrule.register(_f, F64)(CountingRule)
    register(_f, F64, tag="plain")  # registered again after the factory: still loses
    sig = signature_of(_f, a1)
    r1, r2 = build_primitive_rrule(sig), build_primitive_rrule(sig)
    assert isinstance(r1, CountingRule) and isinstance(r2, CountingRule)
    assert r1 is not r2 and r1.sig == sig  # a fresh rule object per call, built for sig
    assert call(_f, a1) == "factory"
    assert registry.which(_f, a1).kind == "factory"


def test_a_more_specific_plain_rule_beats_a_factory() -> None:
    build_primitive_rrule.register(_f, Array)(CountingRule)
    register(_f, F64, tag="plain")
    assert call(_f, a1) == "plain"
    assert call(_f, f32) == "factory"


def test_rrule_calls_the_rule_with_the_coduals_and_kwargs() -> None:
    seen: dict[str, Any] = {}

    def rule(f: CoDual, x: CoDual, *, axis: int) -> tuple[CoDual, Any]:
        seen.update(f=f, x=x, axis=axis)
        return CoDual(x.x.sum(axis=axis), NoFData()), lambda dy: (NoRData(), NoRData())

    rrule.register(_f, F64)(rule)
    fc, xc = zero_codual(_f), zero_codual(a2[0])
    y, pb = rrule(fc, xc, axis=0)
    assert seen == {"f": fc, "x": xc, "axis": 0} and y.x == 2.0
    assert pb(0.0) == (NoRData(), NoRData())


# -- is_primitive, signature_of ------------------------------------------------------------------


def test_is_primitive() -> None:
    sig = signature_of(_f, a1)
    assert not is_primitive(sig)
    register(_f, F64, tag="f64")
    assert is_primitive(sig)
    assert not is_primitive(signature_of(_f, f32))
    assert not is_primitive(signature_of(_g, a1))


def test_signature_of() -> None:
    c = np.zeros((2, 2))
    sig = signature_of(np.add, a2, 1.5)
    assert sig == Signature(np.add, ((np.float64, 2), float), None)
    assert sig.f is np.add and sig.out is None
    assert repr(sig) == "np.add(Array[np.float64, 2], float)"
    # CoDuals are unwrapped, the function included.
    assert signature_of(CoDual(np.add), CoDual(a2), zero_codual(1.5)) == sig
    # out= (an array, a 1-tuple, a CoDual) is part of the signature.
    with_out = signature_of(np.add, a2, a2, out=c)
    assert with_out.out == (np.float64, 2)
    assert repr(with_out) == (
        "np.add(Array[np.float64, 2], Array[np.float64, 2], out=Array[np.float64, 2])"
    )
    assert signature_of(np.add, a2, a2, out=(c,)) == with_out
    assert signature_of(np.add, a2, a2, out=CoDual(c, np.zeros_like(c))) == with_out
    assert signature_of(np.add, a2, a2, out=(zero_codual(c),)) == with_out
    assert signature_of(np.add, a2, a2, out=None) == signature_of(np.add, a2, a2)
    assert signature_of(np.sum, a2, axis=0) == signature_of(np.sum, a2)  # other kwargs: no
    assert signature_of(np.add, np.float32(1), 2).args == (np.float32, int)


def test_signature_repr_names_numpy_functions_briefly() -> None:
    assert repr(signature_of(np.sum, a1)) == "np.sum(Array[np.float64, 1])"
    assert repr(signature_of(np.linalg.solve, a2, a1)).startswith("np.linalg.solve(")


# -- out= registrations ---------------------------------------------------------------------------


def test_out_registrations_match_only_out_calls() -> None:
    c = np.zeros(3)
    register(_f, F64, F64, out=F64, tag="out")
    assert call(_f, a1, a1, out=zero_codual(c)) == "out"
    with pytest.raises(MissingRuleError):
        call(_f, a1, a1)
    register(_f, F64, F64, tag="no out")
    assert call(_f, a1, a1) == "no out"
    assert call(_f, a1, a1, out=zero_codual(c)) == "out"
    assert call(_f, a1, a1, out=(zero_codual(c),)) == "out"
    assert call(_f, a1, a1, out=None) == "no out"
    with pytest.raises(MissingRuleError, match="out="):
        call(_f, a1, a1, out=zero_codual(np.zeros(3, np.float32)))


def test_out_patterns_take_part_in_specificity() -> None:
    c = np.zeros(3)
    register(_f, F64, F64, out=Array, tag="any out")
    register(_f, F64, F64, out=F64, tag="f64 out")
    assert call(_f, a1, a1, out=zero_codual(c)) == "f64 out"
    assert call(_f, a1, a1, out=zero_codual(c.astype(np.float32))) == "any out"


# -- re-registration, introspection ----------------------------------------------------------


def test_reregistration_replaces() -> None:
    register(_f, F64, tag="first")
    register(_f, F64, tag="second")
    assert call(_f, a1) == "second"
    mine = [r for r in registry.entries() if r.f is _f]
    assert len(mine) == 1 and mine[0].impl.__qualname__ == "rule_second"
    # A different kind, or different patterns, is a separate registration.
    build_primitive_rrule.register(_f, F64)(CountingRule)
    register(_f, Union[F64, float], tag="union")
    assert len([r for r in registry.entries() if r.f is _f]) == 3


def test_entries_show_the_registering_module() -> None:
    register(_f, F64, tag="mine")
    reg = registry.which(_f, a1)
    assert reg.module == __name__
    assert reg in registry.entries(module=__name__)
    assert reg in registry.entries()
    prefix = __name__.rsplit(".", 1)[0]
    if prefix != __name__:  # submodules of a prefix are included
        assert reg in registry.entries(module=prefix)
    assert reg not in registry.entries(module=__name__ + "_other")
    assert f"registered by {__name__}" in reg.describe()
    assert reg.patterns == (F64,) and reg.kind == "rrule" and reg.f is _f


def test_which_shows_the_registration_a_call_dispatches_to() -> None:
    register(_f, Array, tag="generic")
    register(_f, F64, tag="f64")
    assert registry.which(_f, a1).impl.__qualname__ == "rule_f64"
    assert registry.which(_f, f32).impl.__qualname__ == "rule_generic"
    assert registry.which(CoDual(_f), zero_codual(a1)).impl.__qualname__ == "rule_f64"
    text = repr(registry.which(_f, a1))
    assert "_f(Array[np.float64]) -> rrule rule_f64" in text


def test_examples_are_kept_on_the_registration() -> None:
    examples = [rulekit.example(a1)]
    rrule.register(_f, F64, examples=examples)(make_rule("ex"))
    assert registry.which(_f, a1).examples is examples


def test_remove_is_idempotent() -> None:
    register(_f, F64, tag="x")
    reg = registry.which(_f, a1)
    registry.remove(reg)
    registry.remove(reg)
    assert reg not in registry.entries()
