"""Tangents (rulekit/_tangent_types.py, _tangents.py): the fdata/rdata table, zeros, algebra.

The property tests draw primals from the whole table of `_tangent_types.py` (arrays of
every float/complex dtype incl. 0-d, Python and numpy scalars, non-differentiable
values, functions, tuples, NamedTuples, lists, dicts, a registered dataclass),
recursively nested, and check the laws every rule and the conformance kit rely on.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import pickle
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
from rulekit import (
    NoFData,
    NoRData,
    NoTangent,
    StructTangent,
    TangentError,
    increment,
    inner,
    join_tangent,
    randn_tangent,
    register_tangent,
    split_tangent,
    zero_fdata,
    zero_rdata,
    zero_tangent,
)

SETTINGS = settings(derandomize=True, max_examples=150, deadline=None, database=None)

FLOAT_DTYPES = [np.float16, np.float32, np.float64, np.complex64, np.complex128]
SCALAR_TYPES = [np.float16, np.float32, np.float64, np.complex64, np.complex128]
EMPTIES = (NoTangent, NoFData, NoRData)


# -- the registered dataclass: the documented example of `register_tangent` --------------


@register_tangent
@dataclasses.dataclass
class Affine:
    weight: np.ndarray
    bias: float


class Pair(NamedTuple):
    first: Any
    second: Any


def _plain_function(x: Any) -> Any:
    return x


# -- helpers -----------------------------------------------------------------------------


def structure(t: Any) -> Any:
    """A comparable description of a tangent's type tree: types, shapes, dtypes, keys."""
    if isinstance(t, np.ndarray):
        return (np.ndarray, t.shape, t.dtype)
    if isinstance(t, tuple):
        return (tuple, tuple(structure(e) for e in t))
    if isinstance(t, list):
        return (list, [structure(e) for e in t])
    if isinstance(t, dict):
        return (dict, {k: structure(v) for k, v in t.items()})
    if isinstance(t, StructTangent):
        return (StructTangent, t.cls, {k: structure(v) for k, v in t.fields.items()})
    return type(t)


def assert_tangent_equal(a: Any, b: Any, path: str = "t") -> None:
    """Exact equality of two tangents: same types, shapes, dtypes and values."""
    assert structure(a) == structure(b), f"{path}: {structure(a)} != {structure(b)}"
    if isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, (tuple, list)):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_tangent_equal(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        for k in a:
            assert_tangent_equal(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, StructTangent):
        for k in a.fields:
            assert_tangent_equal(a.fields[k], b.fields[k], f"{path}.{k}")
    elif isinstance(a, EMPTIES):
        assert a is b, path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def tangent_map(fn: Callable[[Any], Any], t: Any) -> Any:
    """Apply `fn` to every array/scalar leaf of a tangent (structure preserved)."""
    if isinstance(t, EMPTIES):
        return t
    if isinstance(t, tuple):
        return tuple(tangent_map(fn, e) for e in t)
    if isinstance(t, list):
        return [tangent_map(fn, e) for e in t]
    if isinstance(t, dict):
        return {k: tangent_map(fn, v) for k, v in t.items()}
    if isinstance(t, StructTangent):
        return StructTangent(t.cls, {k: tangent_map(fn, v) for k, v in t.fields.items()})
    return fn(t)


def copy_tangent(t: Any) -> Any:
    return tangent_map(lambda v: v.copy() if isinstance(v, np.ndarray) else v, t)


def scale(alpha: Any, t: Any) -> Any:
    """alpha · t, keeping every leaf's type and dtype."""

    def leaf(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return (v * alpha).astype(v.dtype)
        return type(v)(v * alpha)

    return tangent_map(leaf, t)


def leaves(t: Any) -> list[Any]:
    out: list[Any] = []
    tangent_map(lambda v: out.append(v), t)
    return out


def eps_of(t: Any) -> float:
    """The coarsest machine epsilon among a tangent's leaves (float64 if it has none)."""
    eps = [float(np.finfo(np.asarray(v).dtype).eps) for v in leaves(t)]
    return max(eps, default=float(np.finfo(np.float64).eps))


def norm(t: Any) -> float:
    return float(np.sqrt(sum(np.sum(np.abs(np.asarray(v, np.complex128)) ** 2) for v in leaves(t))))


def reference_inner(a: Any, b: Any) -> float:
    """Σ Re(conj(a)·b) over paired leaves, in double precision."""
    la, lb = leaves(a), leaves(b)
    if not la or not lb:
        return 0.0
    return sum(
        float(np.real(np.vdot(np.asarray(x, np.complex128), np.asarray(y, np.complex128))))
        for x, y in zip(la, lb, strict=True)
    )


def is_complex(t: Any) -> bool:
    return all(np.iscomplexobj(v) for v in leaves(t))


# -- strategies: primals from the whole table ------------------------------------------

SHAPES = [(), (0,), (1,), (3,), (2, 3), (2, 1, 2)]


def _array(dtype: Any, shape: tuple[int, ...], seed: int, layout: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if layout == "strided" and shape:
        base = rng.standard_normal((*shape[:-1], 2 * shape[-1]))
        a = np.asarray(base, dtype)[..., ::2]
    elif layout == "transposed":
        a = np.asarray(rng.standard_normal(shape[::-1]), dtype).T
    else:
        a = np.asarray(rng.standard_normal(shape), dtype)
    if np.dtype(dtype).kind == "c":
        a = a + np.asarray(1j, dtype) * a[::-1] if a.ndim else a * np.asarray(1 + 1j, dtype)
    return a


seeds = st.integers(0, 2**32 - 1)

float_arrays = st.builds(
    _array,
    st.sampled_from(FLOAT_DTYPES),
    st.sampled_from(SHAPES),
    seeds,
    st.sampled_from(["C", "strided", "transposed"]),
)
complex_arrays = st.builds(
    _array,
    st.sampled_from([np.complex64, np.complex128]),
    st.sampled_from(SHAPES),
    seeds,
    st.just("C"),
)
finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False)
py_scalars = st.one_of(finite, st.builds(complex, finite, finite))
np_scalars = st.builds(lambda t, v: t(v), st.sampled_from(SCALAR_TYPES), finite)
nondiff = st.one_of(
    st.integers(-5, 5),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
    st.builds(lambda n: np.arange(n), st.integers(0, 4)),
    st.builds(lambda n: np.arange(n) % 2 == 0, st.integers(0, 4)),
    st.sampled_from([np.sin, len, _plain_function, lambda x: x, functools.partial(np.add, 1)]),
)
affines = st.builds(
    lambda w, b: Affine(w, b), float_arrays.filter(lambda a: a.dtype == np.float64), finite
)
leaf_primals = st.one_of(float_arrays, py_scalars, np_scalars, nondiff, affines)


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.builds(Pair, children, children),
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3),
    )


primals = st.recursive(leaf_primals, containers, max_leaves=8)
complex_primals = st.recursive(
    st.one_of(complex_arrays, st.builds(complex, finite, finite)), containers, max_leaves=6
).filter(lambda x: bool(leaves(zero_tangent(x))))


# -- the table, entry by entry ----------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_float_array_row(dtype: Any, shape: tuple[int, ...]) -> None:
    x = np.ones(shape, dtype)
    f = zero_fdata(x)
    assert isinstance(f, np.ndarray) and f.shape == shape and f.dtype == dtype
    assert not np.shares_memory(f, x) and not f.any()
    assert zero_rdata(x) is NoRData()
    assert structure(zero_tangent(x)) == (np.ndarray, shape, np.dtype(dtype))


@pytest.mark.parametrize(
    "x", [1.5, 1 + 2j, *(t(1.5) for t in SCALAR_TYPES)], ids=lambda x: type(x).__name__
)
def test_scalar_row(x: Any) -> None:
    assert zero_fdata(x) is NoFData()
    r = zero_rdata(x)
    assert type(r) is type(x) and r == 0
    assert type(zero_tangent(x)) is type(x)


@pytest.mark.parametrize(
    "x",
    [
        3,
        True,
        np.bool_(True),
        np.int64(2),
        "s",
        None,
        np.arange(3),
        np.ones(2, bool),
        np.sin,
        _plain_function,
        len,
        functools.partial(np.add, 1),
    ],
    ids=repr,
)
def test_nondifferentiable_row(x: Any) -> None:
    assert zero_tangent(x) is NoTangent()
    assert zero_fdata(x) is NoFData()
    assert zero_rdata(x) is NoRData()


def test_tuple_row() -> None:
    a = np.ones(2)
    f = zero_fdata((1.0, a))
    assert f[0] is NoFData() and structure(f[1]) == structure(a)
    assert zero_rdata((1.0, a)) == (0.0, NoRData())
    assert zero_fdata((1.0, 2.0)) is NoFData()  # no element has fdata
    assert zero_rdata((1.0, 2.0)) == (0.0, 0.0)
    assert zero_rdata((a, a)) is NoRData()  # no element has rdata
    assert zero_tangent((1, "s")) is NoTangent()
    assert zero_fdata(Pair(1.0, a))[1].shape == (2,)  # a NamedTuple is a tuple
    assert zero_rdata(Pair(1.0, 2)) == (0.0, NoRData())


@pytest.mark.parametrize("container", [list, dict])
def test_mutable_container_row(container: Callable[..., Any]) -> None:
    a = np.ones(2)
    x = [1.0, a, 3] if container is list else {"s": 1.0, "a": a, "n": 3}
    f = zero_fdata(x)
    assert type(f) is container  # the container of full element tangents
    assert_tangent_equal(f, zero_tangent(x))
    assert zero_rdata(x) is NoRData()


def test_registered_dataclass_row() -> None:
    x = Affine(np.ones((2, 3)), 0.5)
    t = zero_tangent(x)
    assert isinstance(t, StructTangent) and t.cls is Affine
    assert structure(t.weight) == (np.ndarray, (2, 3), np.dtype(np.float64))
    assert t.bias == 0.0 and type(t.bias) is float
    assert_tangent_equal(zero_fdata(x), t)
    assert zero_rdata(x) is NoRData()


def test_register_tangent_with_fields_and_subclasses() -> None:
    class Plain:
        def __init__(self) -> None:
            self.w = np.ones(2)
            self.n = 3
            self.name = "p"

    register_tangent(Plain, fields=["w", "n"])
    t = zero_tangent(Plain())
    assert set(t.fields) == {"w", "n"} and t.n is NoTangent()

    @dataclasses.dataclass
    class Child(Affine):
        extra: str = "x"

    child = zero_tangent(Child(np.ones(1), 1.0))
    assert child.cls is Child and set(child.fields) == {"weight", "bias"}  # Affine's fields


def test_register_tangent_rejects_bad_input() -> None:
    class NotADataclass:
        pass

    with pytest.raises(TangentError, match="fields="):
        register_tangent(NotADataclass)
    with pytest.raises(TangentError, match="expects a class"):
        register_tangent(3)  # type: ignore[arg-type]
    with pytest.raises(TangentError, match="attribute names"):
        register_tangent(NotADataclass, fields=[1])  # type: ignore[list-item]


def test_empty_singletons() -> None:
    for cls in EMPTIES:
        assert cls() is cls() and not cls() and repr(cls()) == f"{cls.__name__}()"
        assert pickle.loads(pickle.dumps(cls())) is cls()
        assert copy.deepcopy(cls()) is cls()
    assert NoFData() is not NoRData()


def test_struct_tangent_attributes_and_copy() -> None:
    t = zero_tangent(Affine(np.ones(2), 1.0))
    with pytest.raises(AttributeError):
        _ = t.nonexistent
    assert "Affine" in repr(t) and "bias" in repr(t)
    # Tangents are ordinary values: they can be copied and pickled (the kit snapshots them).
    assert_tangent_equal(copy.deepcopy(t), t)
    assert_tangent_equal(pickle.loads(pickle.dumps(t)), t)


def test_struct_tangent_fields_can_be_incremented_as_attributes() -> None:
    # A pullback writes `d.weight += g` and `d.bias += gb` on the StructTangent it is handed.
    t = zero_tangent(Affine(np.zeros(2), 1.0))
    weight = t.weight
    t.weight += np.ones(2)
    t.bias += 1.5
    assert t.weight is weight and np.all(weight == 1.0)
    assert t.bias == 1.5 and t.fields["bias"] == 1.5


# -- structure: zeros, random tangents, fdata/rdata -----------------------------------------


@SETTINGS
@given(x=primals, seed=seeds)
def test_randn_has_the_structure_of_zero(x: Any, seed: int) -> None:
    t = randn_tangent(x, np.random.default_rng(seed))
    assert structure(t) == structure(zero_tangent(x))
    assert_tangent_equal(t, randn_tangent(x, np.random.default_rng(seed)))  # deterministic


def test_randn_draws_nonzero_values_of_the_right_kind() -> None:
    rng = np.random.default_rng(0)
    for dtype in FLOAT_DTYPES:
        t = randn_tangent(np.zeros((4, 5), dtype), rng)
        assert t.dtype == dtype and np.all(t.real != 0)
        if t.dtype.kind == "c":
            assert np.all(t.imag != 0)
    z = randn_tangent(np.zeros((), np.complex64), rng)
    assert isinstance(z, np.ndarray) and z.shape == () and z.dtype == np.complex64
    c = randn_tangent(1j, rng)
    assert type(c) is complex and c.imag != 0
    assert type(randn_tangent(np.float16(1), rng)) is np.float16


@SETTINGS
@given(x=primals, seed=seeds)
def test_split_join_roundtrip(x: Any, seed: int) -> None:
    t = randn_tangent(x, np.random.default_rng(seed))
    f, r = split_tangent(x, t)
    assert structure(f) == structure(zero_fdata(x))
    assert structure(r) == structure(zero_rdata(x))
    assert_tangent_equal(join_tangent(x, f, r), t)


@SETTINGS
@given(x=primals)
def test_split_of_zero_is_zero_fdata_and_rdata(x: Any) -> None:
    f, r = split_tangent(x, zero_tangent(x))
    assert_tangent_equal(f, zero_fdata(x))
    assert_tangent_equal(r, zero_rdata(x))
    assert_tangent_equal(join_tangent(x, zero_fdata(x), zero_rdata(x)), zero_tangent(x))


# -- algebra: zero identities, bilinearity, symmetry ----------------------------------------


@SETTINGS
@given(x=primals, seed=seeds)
def test_zero_identities(x: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    t = randn_tangent(x, rng)
    assert_tangent_equal(increment(zero_tangent(x), t), t)
    assert_tangent_equal(increment(copy_tangent(t), zero_tangent(x)), t)
    assert inner(zero_tangent(x), t) == 0.0
    assert inner(t, zero_tangent(x)) == 0.0


@SETTINGS
@given(x=primals, seed=seeds, alpha=st.floats(-3, 3, allow_nan=False))
def test_inner_is_bilinear_and_symmetric(x: Any, seed: int, alpha: float) -> None:
    rng = np.random.default_rng(seed)
    a, b, c = (randn_tangent(x, rng) for _ in range(3))
    na, nb, nc = norm(a), norm(b), norm(c)
    tol = 32 * eps_of(a) * (na * (nb + nc) * (1 + abs(alpha))) + 1e-300

    b_plus_c = increment(copy_tangent(b), c)
    assert inner(a, b_plus_c) == pytest.approx(inner(a, b) + inner(a, c), abs=tol)
    assert inner(scale(alpha, a), b) == pytest.approx(alpha * inner(a, b), abs=tol)
    assert inner(a, scale(alpha, b)) == pytest.approx(alpha * inner(a, b), abs=tol)
    assert inner(a, b) == pytest.approx(inner(b, a), abs=tol)
    assert inner(a, b) == pytest.approx(reference_inner(a, b), abs=tol)
    assert inner(a, a) >= 0
    assert isinstance(inner(a, b), float)


@SETTINGS
@given(x=complex_primals, seed=seeds)
def test_inner_is_the_real_part_of_the_complex_inner_product(x: Any, seed: int) -> None:
    """⟨a, b⟩ = Re Σ conj(a)·b: symmetric, invariant under multiplying both by i."""
    rng = np.random.default_rng(seed)
    a, b = randn_tangent(x, rng), randn_tangent(x, rng)
    assert is_complex(a)
    tol = 32 * eps_of(a) * norm(a) * norm(b) + 1e-300
    ia, ib = scale(1j, a), scale(1j, b)
    assert inner(a, b) == pytest.approx(inner(b, a), abs=tol)
    assert inner(ia, ib) == pytest.approx(inner(a, b), abs=tol)
    assert inner(ia, b) == pytest.approx(-inner(a, ib), abs=tol)
    assert inner(a, ia) == pytest.approx(0.0, abs=tol)
    assert inner(a, a) == pytest.approx(norm(a) ** 2, abs=tol)  # ⟨a, a⟩ = ‖a‖²


def test_inner_of_scalars_is_real() -> None:
    assert inner(1 + 2j, 3 - 1j) == pytest.approx(1.0)  # Re((1-2j)(3-1j)) = 3 - 2 = 1
    assert inner(np.complex64(1j), np.complex64(1j)) == 1.0
    assert inner(np.float16(2), np.float16(3)) == 6.0
    assert inner(2.0, NoRData()) == 0.0 and inner(NoTangent(), np.ones(2)) == 0.0


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.complex64])
def test_inner_accumulates_low_precision_in_double(dtype: Any) -> None:
    # 1e8 + 1 - 1e8 is 0 in single precision (spacing 8 at 1e8) and 1 in double.
    a = np.ones(3, dtype)
    b = np.array([2048, 1, -2048] if dtype == np.float16 else [1e8, 1, -1e8], dtype)
    assert inner(a, b) == 1.0


# -- increment: in place, aliasing ----------------------------------------------------------


def test_increment_in_place_returns_the_same_object() -> None:
    rng = np.random.default_rng(0)
    a = np.ones(3)
    assert increment(a, np.ones(3)) is a and np.all(a == 2)
    lst = [np.ones(2), 1.0]
    assert increment(lst, [np.ones(2), 2.0]) is lst and lst[1] == 3.0 and np.all(lst[0] == 2)
    d = {"w": np.ones(2), "s": 1.0}
    assert increment(d, {"w": np.ones(2), "s": 1.0}) is d and d["s"] == 2.0
    x = Affine(np.ones(2), 1.0)
    t = zero_tangent(x)
    w = t.weight
    s = randn_tangent(x, rng)
    assert increment(t, s) is t and t.weight is w  # the field array is updated in place
    np.testing.assert_array_equal(w, s.weight)
    assert t.bias == s.bias
    # Immutable tangents come back anew; arrays inside them are still updated in place.
    inner_arr = np.zeros(2)
    tup = (inner_arr, 1.0)
    new = increment(tup, (np.ones(2), 2.0))
    assert new[0] is inner_arr and np.all(inner_arr == 1) and new[1] == 3.0
    assert increment(1.5, 2.0) == 3.5


@SETTINGS
@given(x=primals, seed=seeds)
def test_increment_keeps_mutable_leaves_in_place(x: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    t, s = randn_tangent(x, rng), randn_tangent(x, rng)
    before = copy_tangent(t)
    arrays = [id(v) for v in leaves(t) if isinstance(v, np.ndarray)]
    total = increment(t, s)
    assert [id(v) for v in leaves(total) if isinstance(v, np.ndarray)] == arrays
    if isinstance(t, (np.ndarray, list, dict, StructTangent)):
        assert total is t
    for got, b, d in zip(leaves(total), leaves(before), leaves(s), strict=True):
        np.testing.assert_array_equal(got, np.asarray(b + d, np.asarray(got).dtype))


@pytest.mark.parametrize("container", [list, tuple])
def test_increment_counts_an_aliased_array_once(container: Callable[..., Any]) -> None:
    a = np.zeros(3)
    s = np.arange(3.0)
    increment(container([a, a]), container([s, s]))
    np.testing.assert_array_equal(a, s)
    b = np.zeros(2)
    increment({"x": b, "y": b}, {"x": np.ones(2), "y": np.ones(2)})
    np.testing.assert_array_equal(b, np.ones(2))


def test_increment_counts_two_views_of_the_same_memory_once() -> None:
    a = np.zeros(6)
    s = np.arange(6.0)
    increment([a, a[:]], [s, s[:]])
    np.testing.assert_array_equal(a, s)


def test_increment_counts_a_reshaped_view_of_the_same_memory_once() -> None:
    # `a.reshape(2, 3)` is another view of exactly a's memory: the docstring of
    # `increment` promises it is incremented once, like `a[:]`.
    a = np.zeros(6)
    s = np.arange(6.0)
    increment([a, a.reshape(2, 3)], [s, s.reshape(2, 3)])
    np.testing.assert_array_equal(a, s)


def test_increment_distinct_arrays_are_all_incremented() -> None:
    a, b = np.zeros(3), np.zeros(3)
    increment([a, b], [np.ones(3), np.ones(3)])
    assert np.all(a == 1) and np.all(b == 1)
    # Disjoint halves of one buffer are different memory: both are incremented.
    base = np.zeros(4)
    increment([base[:2], base[2:]], [np.ones(2), np.ones(2)])
    assert np.all(base == 1)


# -- errors -----------------------------------------------------------------------------------


class Unknown:
    pass


@pytest.mark.parametrize(
    "fn", [zero_tangent, zero_fdata, lambda x: randn_tangent(x, np.random.default_rng(0))]
)
def test_object_arrays_raise(fn: Callable[[Any], Any]) -> None:
    with pytest.raises(TangentError, match=r"object arrays.*float array.*\(2,\)"):
        fn(np.array([1.0, "a"], dtype=object))


@pytest.mark.parametrize("wrap", [lambda u: u, lambda u: [1.0, u], lambda u: {"k": (u,)}])
def test_unknown_classes_raise_with_a_helpful_message(wrap: Callable[[Any], Any]) -> None:
    with pytest.raises(TangentError) as info:
        zero_tangent(wrap(Unknown()))
    msg = str(info.value)
    assert "Unknown" in msg and "register_tangent" in msg and "constant" in msg


def test_callable_objects_are_not_differentiable() -> None:
    class Callable_:
        def __call__(self) -> None:
            pass

    assert zero_tangent(Callable_()) is NoTangent()
    assert rulekit.zero_codual(np.sin).dx is NoFData()


def test_mismatched_tangents_raise() -> None:
    with pytest.raises(TangentError, match="increment"):
        increment("a", "b")
    with pytest.raises(TangentError, match="inner product"):
        inner("a", "b")
