"""Never a silent wrong gradient: the engine's refusals and the holes outside testing found.

Each test is a way users broke the promise (issue #11): ndarray subclasses,
constants overwritten mid-trace through views, copies and pickles of traced
values, nested differentiation, values kept past their trace, NumPy functions
that swallow errors, tuples of scalars, rules registered where traced calls
cannot reach. Gradients are checked on the first *and later* calls of one
`value_and_grad` object, against central differences.
"""

from __future__ import annotations

import collections
import copy
import pickle
import warnings
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules  # noqa: F401  (the bundled rules)
from rulekit import Array, CoDual, NoRData
from testutils._fdmath import eps_of


def _assert_warm_calls_right(f: Any, x: np.ndarray) -> None:
    """Three calls of one value_and_grad object, with and without `copy`, match central
    differences (fdcheck's default tolerances)."""
    for copy_ in (True, False):
        check_grads(f, x, calls=3, copy=copy_)


# -- ndarray subclasses: refused, active or constant, whatever the operation --------------------


class _Tagged(np.ndarray):
    """A user subclass that changes nothing."""


def _matrix(x: np.ndarray) -> Any:
    with warnings.catch_warnings():  # (np.matrix warns PendingDeprecationWarning on creation)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix(x)


#: The subclasses tried (`_subclass_instance`); recarray is not an operand of arithmetic.
SUBCLASSES = ("matrix", "MaskedArray", "_Tagged", "recarray")


def _subclass_instance(kind: str, rng: np.random.Generator) -> Any:
    """A (2, 3) float64 instance of the ndarray subclass `kind` (a recarray: two fields of 3)."""
    x = rng.normal(size=(2, 3))
    make = {
        "matrix": lambda: _matrix(x),
        "MaskedArray": lambda: np.ma.masked_array(x, mask=[[0, 1, 0], [0, 0, 0]]),
        "_Tagged": lambda: x.view(_Tagged),
        "recarray": lambda: np.rec.fromarrays([x[0], x[1]], names="a,b"),
    }
    sub = make[kind]()
    assert type(sub).__name__ == kind
    return sub


@pytest.mark.parametrize("kind", SUBCLASSES)
def test_subclass_as_differentiated_input_is_refused(kind: str, rng: np.random.Generator) -> None:
    sub = _subclass_instance(kind, rng)
    before = np.array(sub, copy=True)
    with pytest.raises(rulekit.SubclassError, match="subclass") as err:
        rulekit.value_and_grad(lambda x: np.sum(x * x))(sub)
    assert "np.asarray" in str(err.value) or "filled" in str(err.value)
    assert isinstance(err.value, TypeError) and isinstance(err.value, rulekit.TracingError)
    np.testing.assert_array_equal(np.asarray(sub), before)  # unchanged


@pytest.mark.parametrize("kind", SUBCLASSES[:3])
@pytest.mark.parametrize(
    "op",
    [
        lambda x, c: x * c,
        lambda x, c: c * x,
        lambda x, c: np.add(x, c),
        lambda x, c: np.where(c > 0, x, 0.0 * x),
        lambda x, c: np.stack([x, c]),
        lambda x, c: np.sum(x, where=np.asarray(c) > 0) + 0 * np.sum(x * c),
    ],
)
def test_subclass_as_constant_operand_is_refused(
    kind: str, op: Any, rng: np.random.Generator
) -> None:
    sub = _subclass_instance(kind, rng)
    x = rng.normal(size=(2, 3))
    with pytest.raises(rulekit.SubclassError, match=type(sub).__name__):
        rulekit.value_and_grad(lambda x: np.sum(op(x, sub)))(x)


def test_subclass_in_value_and_pullback_is_refused() -> None:
    with pytest.raises(rulekit.SubclassError):
        rulekit.value_and_pullback(lambda x: x * 2, np.ones((2, 2)), _matrix(np.ones((2, 2))))


# -- constants overwritten while traced: the gradient uses the value each rule saw ---------------


def test_scratch_view_refilled_in_a_loop(rng: np.random.Generator) -> None:
    work = np.zeros((2, 3))

    def f(x: Any) -> Any:
        c = work[0]
        total = 0.0
        for t in range(3):
            c[:] = t + 1.0
            total = total + np.sum(x * c * x)
        return total

    _assert_warm_calls_right(f, rng.normal(size=3))


def test_write_through_a_view_made_before_the_trace(rng: np.random.Generator) -> None:
    base = np.ones(4)
    alias = base[:]  # a writeable view that exists before any rule sees `base`

    def f(x: Any) -> Any:
        alias[:] = 1.0
        y = np.sum(np.sin(x) * base)
        alias[:] = 7.0  # overwrites what the pullback of sin(x)*base reads
        return y + np.sum(x * base)

    _assert_warm_calls_right(f, rng.normal(size=4))


def test_index_array_overwritten_after_use(rng: np.random.Generator) -> None:
    idx = np.array([0, 2])

    def f(x: Any) -> Any:
        idx[:] = [0, 2]
        y = np.sum(x[idx] ** 2)
        idx[:] = [1, 1]
        return y

    _assert_warm_calls_right(f, rng.normal(size=4))


def test_constant_keyword_array_overwritten_after_use(rng: np.random.Generator) -> None:
    w = np.ones(3)

    def f(x: Any) -> Any:
        w[:] = [1.0, 2.0, 3.0]
        y = np.average(x**2, weights=w)
        w[:] = 0.5
        return y

    _assert_warm_calls_right(f, rng.normal(size=3))


def test_read_only_constants_reach_rules_uncopied(registrations: None) -> None:
    seen: list[Any] = []
    probe = rulekit.primitive(lambda x, c: x * c)

    @rulekit.rrule.register(probe, Array[np.float64], Array[np.float64])
    def probe_rrule(f: Any, x: CoDual, c: CoDual) -> Any:
        seen.append(c.x)
        y = CoDual(x.x * c.x, np.zeros_like(x.x))

        def pb(dy: Any) -> Any:
            x.dx += y.dx * c.x
            return NoRData(), NoRData(), NoRData()

        return y, pb

    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    writeable = np.arange(3.0)
    for c in (frozen, writeable):
        g = rulekit.grad(lambda x, c=c: np.sum(probe(x, c)))(np.ones(3))
        np.testing.assert_array_equal(g, np.arange(3.0))
    assert seen[0] is frozen  # immutable memory: passed as it is
    assert seen[1] is not writeable and not np.shares_memory(seen[1], writeable)


def test_constant_snapshots_allocate_nothing_once_warm(rng: np.random.Generator) -> None:
    from testutils import count_allocations

    c = rng.normal(size=(4, 3))

    def f(x: Any) -> Any:
        return np.sum(x * c[1:])  # a writeable view: snapshotted into a pooled buffer

    vg = rulekit.value_and_grad(f, copy=False)
    x = rng.normal(size=(3, 3))
    for _ in range(3):
        vg(x)
    n = count_allocations(vg, x)
    # what remains is the sum rule's own scalar buffers, not the constant (72 bytes)
    assert n.bytes < c[1:].nbytes, n


# -- copies and pickles of traced values -----------------------------------------------------


@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy, lambda v: copy.deepcopy([v])[0]])
def test_copies_of_traced_values_are_traced(copier: Any, rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        y = x * 2.0
        z = copier(y)
        s = copier(np.sum(x))  # a traced scalar
        return np.sum(z * x) + s * s

    _assert_warm_calls_right(f, rng.normal(size=3))


def test_pickling_a_traced_value_is_refused() -> None:
    def f(x: Any) -> Any:
        return np.sum(pickle.loads(pickle.dumps(x * 2.0)))

    with pytest.raises(rulekit.TracingError, match="cannot be pickled"):
        rulekit.grad(f)(np.ones(3))


# -- nested differentiation and values kept past their trace ----------------------------------


def test_inner_gradient_closing_over_an_outer_traced_value_is_differentiated() -> None:
    # (refused before nested differentiation existed; now each level tags its values)
    def f(x: Any) -> Any:
        inner = rulekit.value_and_grad(lambda y: np.sum(np.sin(x) * y))
        _, g = inner(np.ones(3))  # g = sin(x), a function of the outer x
        return np.sum(g * x)

    x = np.arange(3.0) + 0.3
    np.testing.assert_allclose(rulekit.grad(f)(x), np.cos(x) * x + np.sin(x), rtol=1e-12)


def test_inner_function_computing_only_on_the_outer_value_is_differentiated() -> None:
    def f(x: Any) -> Any:
        def inner(y: Any) -> Any:
            s = np.sum(x**2)  # an outer-only operation while the inner trace runs
            return np.sum(y * 2.0), s

        (_, s), _ = rulekit.value_and_grad(inner, has_aux=True)(np.ones(2))
        return s

    x = np.arange(3.0)
    np.testing.assert_allclose(rulekit.grad(f)(x), 2 * x, rtol=1e-12)


def test_grad_of_a_vector_gradient_asks_for_a_scalar() -> None:
    gg = rulekit.grad(rulekit.grad(lambda x: np.sum(x**3)))
    with pytest.raises(TypeError, match="real scalar"):
        gg(np.ones(3))
    g2 = rulekit.grad(lambda x: np.sum(rulekit.grad(lambda z: np.sum(z**3))(x)))
    np.testing.assert_allclose(g2(np.arange(3.0)), 6 * np.arange(3.0), rtol=1e-12)


def test_an_independent_inner_gradient_on_constants_is_fine(rng: np.random.Generator) -> None:
    data = rng.normal(size=3)

    def f(x: Any) -> Any:
        _, g = rulekit.value_and_grad(lambda w: np.sum((w - data) ** 2))(np.zeros(3))
        return np.sum(x * g)  # g is a constant here

    _assert_warm_calls_right(f, rng.normal(size=3))


def test_a_traced_value_kept_past_its_call_is_refused() -> None:
    kept: list[Any] = []

    def f(x: Any) -> Any:
        y = np.sin(x)
        if kept:
            y = y + kept[0]  # a value from the previous call's trace
        kept.append(y)
        return np.sum(y)

    vg = rulekit.value_and_grad(f)
    vg(np.ones(2))
    with pytest.raises(rulekit.TracingError, match="outside the trace that made it"):
        vg(np.ones(2))


# -- NumPy functions with no derivative run on the primal values ------------------------------


def test_array_equal_and_isscalar_branch_as_numpy_does(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        same = np.array_equal(x, x) and np.array_equiv(x, x[None]) and np.isscalar(x[0])
        return np.sum(x * x) if same else np.sum(x)

    x = rng.normal(size=3)
    assert f(x) == np.sum(x * x)
    _assert_warm_calls_right(f, x)


def test_isscalar_matches_numpy_on_traced_values() -> None:
    got: list[bool] = []

    def f(x: Any) -> Any:
        got.extend([np.isscalar(x[0]), np.isscalar(x), np.isscalar(np.sum(x, keepdims=True))])
        return np.sum(x)

    x = np.ones(3)
    rulekit.grad(f)(x)
    assert got == [np.isscalar(x[0]), np.isscalar(x), np.isscalar(np.sum(x, keepdims=True))]


# -- tuples of scalars as the differentiated argument --------------------------------------------

_Pair = collections.namedtuple("_Pair", "a b")


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    a=st.floats(-3, 3),
    b=st.floats(-3, 3),
    kinds=st.tuples(st.sampled_from([float, np.float64, np.float32])),
    named=st.booleans(),
)
def test_tuple_of_float_scalars(a: float, b: float, kinds: Any, named: bool) -> None:
    t = (kinds[0](a), np.float64(b))
    if named:
        t = _Pair(*t)
    vg = rulekit.value_and_grad(lambda t: t[0] * t[1] + np.sin(t[0]))
    # ∂/∂t0 = t1 + cos t0 is rounded once in t0's precision (float32: single), so within
    # 2 ulps of |t1| + 1 (measured: 0.59 for float32, exact for float64); ∂/∂t1 = t0·1, exact.
    tol = 2 * eps_of(t[0]) * (abs(b) + 1)
    for _ in range(2):
        _, g = vg(t)
        assert type(g) is type(t)
        assert abs(float(g[0]) - (b + np.cos(np.float64(t[0])))) <= tol, (g, t)
        assert float(g[1]) == float(t[0]), (g, t)


def test_tuple_mixing_arrays_and_scalars(rng: np.random.Generator) -> None:
    x = rng.normal(size=3)
    g = rulekit.grad(lambda t: np.sum(t[0] * t[1]) + t[1] ** 2)((x, 2.0))
    np.testing.assert_allclose(g[0], np.full(3, 2.0))
    np.testing.assert_allclose(g[1], np.sum(x) + 4.0)


# -- rules registered where traced calls cannot reach -----------------------------------------


def test_a_rule_for_a_plain_function_warns_and_primitive_uses_it(registrations: None) -> None:
    def double(x: Any) -> Any:
        return 2.0 * x

    def double_rrule(f: Any, x: CoDual) -> Any:
        y = CoDual(2.0 * x.x, np.zeros_like(x.x))

        def pb(dy: Any) -> Any:
            x.dx += 3.0 * y.dx  # deliberately not 2: shows that this rule ran
            return NoRData(), NoRData()

        return y, pb

    with pytest.warns(rulekit.RuleRegistrationWarning, match="rulekit.primitive"):
        rulekit.rrule.register(double, Array[np.float64])(double_rrule)
    wrapped = rulekit.primitive(double)
    g = rulekit.grad(lambda x: np.sum(wrapped(x)))(np.ones(2))
    np.testing.assert_array_equal(g, [3.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # registering for the wrapper does not warn
        rulekit.rrule.register(wrapped, Array[np.float32])(double_rrule)


def test_numpy_functions_do_not_warn(registrations: None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (any warning fails the test)
        reg = rulekit.rrule.register(np.sinc, Array[np.float16])(lambda f, x: None)
    assert any(r.impl is reg for r in rulekit.registry.entries())


# -- unused intermediates cost nothing and cannot make a gradient NaN ----------------------------


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (x / 0 and log of negatives, on purpose)
def test_unused_intermediates_do_not_turn_the_gradient_nan() -> None:
    def f(x: Any) -> Any:
        _ = x / 0.0  # inf: a pullback run with a zero cotangent would give 0·inf = NaN
        _ = np.log(x - 1.0)  # NaN for x < 1
        y = np.sqrt(x - 1.0)
        del y
        return np.sum(x * x)

    x = np.array([0.5, 2.0, -3.0])
    for copy_ in (True, False):
        vg = rulekit.value_and_grad(f, copy=copy_)
        for _ in range(3):
            np.testing.assert_array_equal(vg(x)[1], 2 * x)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_aux_values_are_not_differentiated() -> None:
    def f(x: Any) -> Any:
        return np.sum(x * x), {"log": np.log(x), "inv": 1.0 / x}

    x = np.array([0.0, 2.0, -1.0])
    (_, aux), g = rulekit.value_and_grad(f, has_aux=True)(x)
    np.testing.assert_array_equal(g, 2 * x)
    assert np.isinf(aux["log"][0]) and np.isnan(aux["log"][2])


def test_unused_writes_through_views_and_out_still_count(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        buf = np.zeros_like(x)
        v = buf[::2]  # an alias: its value is never used directly...
        v[...] = x[::2] ** 2  # ...but the write through it reaches buf
        np.multiply(x, 3.0, out=np.zeros_like(x))  # an unused out= result
        t = buf.T
        np.sin(t, out=t)  # in place through a view, result unused
        return np.sum(buf * x)

    _assert_warm_calls_right(f, rng.normal(size=5))
