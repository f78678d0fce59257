"""Issue #11, defect 1: memory layout and pooled buffers (`rules._support.layout`).

A reduction or cumulative op on an F-ordered array made C-ordered fdata for its
F-ordered output; a fused elementwise rule then took its fallback path, whose
kernel wrote the clearing of its pooled fdata into a copy made by `reshape`, so
the buffer went back to the pool dirty: right on the first call, wrong (growing)
from the second. These tests run one `value_and_grad` object three times on each
layout, or on a layout that changes between calls, and compare every call with central
differences (`fdcheck.check_grads`); two planted slips (a pool never cleared, flat memory
read in the wrong order) show that the checker catches a wrong later call and a wrong layout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads

import rulekit
import rules  # noqa: F401  (registers the rules of the chains below)
from rulekit import Array, CoDual, NoRData, zero_codual
from rules._support.layout import flat_view, like_scratch, new_fdata, zeros_like_exact
from rules._support.shape import ViewMismatchError
from testutils._layouts import relayout

Fn = Callable[[Any], Any]


def _outer(Y: Any) -> Any:
    """Z[i, j, k] = Y[i, j]·Y[i, k]: C-ordered, so Z.T is an F-ordered 3-D array."""
    return Y[:, :, None] * Y[:, None, :]


#: the chains of issue #11: an op whose output can be F-ordered, then a fused elementwise op
CHAINS: dict[str, Fn] = {
    "exp(cumsum(Y.T, 1))": lambda Y: np.sum(np.exp(np.cumsum(Y.T, axis=1))),
    "tanh(cumprod(Y.T, 0))": lambda Y: np.sum(np.tanh(np.cumprod(Y.T, axis=0))),
    "sum(Z.T, 1)**2": lambda Y: np.sum(np.sum(_outer(Y).T, axis=1) ** 2),
    "sqrt(mean(Z.T, 2))": lambda Y: np.sum(np.sqrt(np.mean(_outer(Y).T, axis=2) + 1.0)),
    "1/(2+cumsum(Y.T))": lambda Y: np.sum(1.0 / (2.0 + np.cumsum(Y.T, axis=1) ** 2)),
    "log1p(cumsum(Y)**2)": lambda Y: np.sum(np.log1p(np.cumsum(Y, axis=0) ** 2)),
}


@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("layout", ["C", "F", "negative", "strided"])
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chain_three_calls_one_layout(name: str, layout: str, copy: bool) -> None:
    Y = relayout(np.random.default_rng(0).uniform(0.2, 0.8, size=(3, 4)), layout)
    check_grads(CHAINS[name], Y, calls=3, copy=copy)


@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chain_layout_changes_between_calls(name: str, copy: bool) -> None:
    Y = np.asfortranarray(np.random.default_rng(1).uniform(0.2, 0.8, size=(3, 4)))
    layouts = ["C", "negative", "F", "strided", "F"]  # (after Y itself, F-ordered)
    check_grads(CHAINS[name], Y, layouts=layouts, copy=copy)


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chain_float32(name: str) -> None:
    Y = np.random.default_rng(2).uniform(0.2, 0.8, size=(3, 4)).astype(np.float32)
    # float32 gradients against float64 differences: float32 rounding, ~160 ulps (ε = 1.2e-7)
    # for a chain of a few ops over ≤ 12 terms; the value: ≤ 2 ulps (summation orders).
    check_grads(CHAINS[name], np.asfortranarray(Y), calls=3, rtol=2e-5, value_rtol=2.4e-7)


@pytest.mark.parametrize("copy", [True, False])
def test_empty_and_0d(copy: bool) -> None:
    f = CHAINS["exp(cumsum(Y.T, 1))"]
    check_grads(f, np.zeros((0, 4), order="F"), calls=3, copy=copy)
    check_grads(f, np.zeros((3, 0), order="F"), calls=3, copy=copy)
    g = lambda y: np.sum(np.exp(np.cumsum(y)) ** 2)  # noqa: E731  (0-d y: cumsum is 1-D)
    check_grads(g, np.array(0.3), calls=3, copy=copy)


@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("fn", ["reshape", "ravel", "flatten", "concatenate"])
def test_copy_false_input_layout_changes(fn: str, copy: bool) -> None:
    """A reshape that copies the primal never needs a view of the fdata (it used to raise
    ViewMismatchError when the reused fdata buffer kept the previous call's layout)."""
    fs: dict[str, Fn] = {
        "reshape": lambda X: np.sum(np.reshape(X, -1) ** 2),
        "ravel": lambda X: np.sum(np.ravel(X) ** 2),
        "flatten": lambda X: np.sum(X.flatten() ** 2),
        "concatenate": lambda X: np.sum(np.concatenate([np.reshape(X, -1), X[0]]) ** 2),
    }
    Y = np.random.default_rng(3).normal(size=(3, 4))
    check_grads(fs[fn], Y, layouts=["F", "negative", "C"], copy=copy)


# -- the checker catches what these tests are for --------------------------------------------


@rulekit.primitive
def _cube(x: Any) -> Any:
    return x**3


_W = np.arange(1.0, 7.0).reshape(2, 3)  # (a cotangent that differs from element to element)
_POOL: dict[tuple[int, ...], np.ndarray] = {}


def _weighted_cubes(x: Any) -> Any:
    return np.sum(_W * _cube(x))


def _dirty_pool_rule(f: Any, x: CoDual) -> Any:
    """y = x³ ⇒ x̄ += 3x²·ȳ through a pooled buffer that is never cleared (issue #11's slip)."""
    value = _cube(x.x)
    y = CoDual(value, np.zeros_like(value))

    def pullback(dy: Any) -> Any:
        buf = _POOL.setdefault(x.x.shape, np.zeros(x.x.shape))
        buf += 3 * x.x**2 * y.dx  # (right: buf[...] = ...)
        x.dx += buf
        return NoRData(), NoRData()

    return y, pullback


def _memory_order_rule(f: Any, x: CoDual) -> Any:
    """y = x³ ⇒ x̄ += 3x²·ȳ on flat memory: x in memory order, ȳ and x̄ in C order (right
    only when x is C-ordered)."""
    value = _cube(x.x)
    y = CoDual(value, np.zeros_like(value))

    def pullback(dy: Any) -> Any:
        flat = np.ravel(3 * x.x**2, order="K") * np.ravel(y.dx, order="C")
        x.dx += flat.reshape(x.x.shape)
        return NoRData(), NoRData()

    return y, pullback


def test_the_checker_catches_a_rule_wrong_from_its_second_call(registrations: None) -> None:
    rulekit.rrule.register(_cube, Array[np.float64])(_dirty_pool_rule)
    x = np.random.default_rng(6).uniform(0.5, 1.5, size=(2, 3))
    _POOL.clear()
    check_grads(_weighted_cubes, x)  # the first call is right
    _POOL.clear()
    with pytest.raises(AssertionError, match="call 2 of 2"):
        check_grads(_weighted_cubes, x, calls=2)


def test_the_checker_catches_a_rule_wrong_in_another_layout(registrations: None) -> None:
    rulekit.rrule.register(_cube, Array[np.float64])(_memory_order_rule)
    x = np.random.default_rng(7).uniform(0.5, 1.5, size=(2, 3))
    check_grads(_weighted_cubes, x, calls=2)  # C-ordered: right on every call
    with pytest.raises(AssertionError, match="layout 1: F"):
        check_grads(_weighted_cubes, x, layouts=["F"])


# -- the rule-level mechanism ------------------------------------------------------------------


def _fused(uf: np.ufunc, X: np.ndarray, dX: np.ndarray) -> np.ndarray:
    """One forward + pullback of uf's registered rule with ȳ = 1; returns a copy of dX."""
    rule = rulekit.build_primitive_rrule(rulekit.signature_of(uf, X))
    for _ in range(3):
        dX.fill(0)
        y, pb = rule(zero_codual(uf), CoDual(X, dX))
        y.dx += 1.0
        pb(rulekit.NoRData())
    return dX.copy()


@pytest.mark.parametrize("uf", [np.exp, np.tanh, np.square, np.sin])
def test_fused_rule_with_fdata_laid_out_unlike_its_primal(uf: np.ufunc) -> None:
    """F-ordered x with C-ordered x̄ (what the reductions used to make): the fallback path
    must clear its pooled ȳ, so the second and third calls agree with the first."""
    X = np.asfortranarray(np.random.default_rng(4).uniform(0.1, 0.9, size=(3, 4)))
    want = _fused(uf, X, np.zeros((3, 4), order="F"))  # x̄ laid out like x (kernel path)
    for dX in (np.zeros((3, 4)), np.zeros((3, 8))[:, ::2]):  # C-ordered, strided
        np.testing.assert_allclose(_fused(uf, X, dX), want, rtol=1e-12)


def test_reduction_outputs_have_their_primals_layout() -> None:
    Y = np.asfortranarray(np.random.default_rng(5).normal(size=(2, 3, 4)))
    for fn, kw in ((np.cumsum, {"axis": 1}), (np.cumprod, {"axis": 2}), (np.sum, {"axis": 1}),
                   (np.mean, {"axis": 0}), (np.max, {"axis": 2})):  # fmt: skip
        y, _ = rulekit.rrule(zero_codual(fn), zero_codual(Y), **kw)
        assert y.dx.strides == y.x.strides, fn.__name__


def test_ravel_in_memory_order_refuses_fdata_it_cannot_follow() -> None:
    """ravel(order='K') of an F-ordered x is a view in F order; a C-ordered x̄ ravelled the
    same way is a view in C order, pairing other elements: refused, not silently wrong."""
    X = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    with pytest.raises(ViewMismatchError, match="strides"):
        rulekit.rrule(zero_codual(np.ravel), CoDual(X, np.zeros((2, 3))), CoDual("K"))


def test_reshape_copy_of_the_primal_with_other_fdata_layout() -> None:
    """A primal copy gets fresh fdata and a pullback, whatever the fdata's layout."""
    X = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    dX = np.zeros((2, 3))  # C-ordered: reshape(-1) of it is a view, of X a copy
    y, pb = rulekit.rrule(zero_codual(np.reshape), CoDual(X, dX), CoDual(-1))
    assert not np.shares_memory(y.dx, dX)
    y.dx[...] = np.arange(6.0)
    pb(rulekit.NoRData())
    np.testing.assert_array_equal(dX, np.arange(6.0).reshape(2, 3))


# -- rules._support.layout ------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.ones((3, 4)),
        lambda: np.ones((3, 4), order="F"),
        lambda: np.ones((3, 4))[:, ::-1],
        lambda: np.ones((4, 6))[::2, 1::3],
        lambda: (np.ones((3, 3)) + 0j).real,  # np.linalg.eig's real eigenvalues
        lambda: np.ones((2, 3, 4)).transpose(1, 0, 2),
        lambda: np.ones((0, 3))[:, ::-1],
        lambda: np.array(1.0),
    ],
)
def test_zeros_like_exact(make: Callable[[], np.ndarray]) -> None:
    y = make()
    z = zeros_like_exact(y)
    assert z.shape == y.shape and z.dtype == y.dtype and z.flags.writeable
    assert z.strides == y.strides or y.size == 0
    assert not np.any(z)
    z[...] = 1.0  # the elements are distinct memory
    assert z.sum() == y.size


def test_zeros_like_exact_of_an_overlapping_view_is_compact() -> None:
    y = np.broadcast_to(np.ones(3), (2, 3))
    assert zeros_like_exact(y).strides == (24, 8)


def test_new_fdata_of_tuples() -> None:
    w = (np.ones((3, 3)) + 0j).real
    fd = new_fdata((w, np.arange(3), 1.0))
    assert fd[0].strides == w.strides
    assert isinstance(fd[1], rulekit.NoFData) and isinstance(fd[2], rulekit.NoFData)


def test_flat_view_is_never_a_copy() -> None:
    permuted = np.zeros((2, 3, 4)).transpose(2, 0, 1)  # (contiguous, axes permuted)
    for a in (np.zeros((3, 4)), np.zeros((3, 4), order="F"), np.zeros(5), np.zeros(()), permuted):
        v = flat_view(a)
        v[...] = 1.0
        assert np.all(a == 1.0)
    with pytest.raises(ValueError, match="not contiguous in any axis order"):
        flat_view(np.zeros((3, 4))[:, ::2])


def test_like_scratch_lines_up_with_its_model() -> None:
    kept: dict[str, np.ndarray] = {}

    def scratch(name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return kept.setdefault(name, np.empty(shape, dtype))

    for like in (np.arange(12.0).reshape(3, 4), np.asfortranarray(np.arange(12.0).reshape(3, 4))):
        s = like_scratch(scratch, "s", like)
        np.copyto(s, like)
        np.testing.assert_array_equal(flat_view(s), flat_view(like))


@pytest.mark.parametrize("op", ["scalar", "unary", "binary", "broadcast"])
def test_elementwise_results_have_numpys_layout_for_permuted_operands(op: str) -> None:
    """An elementwise result of a transposed 3-d operand is laid out as numpy lays it out
    (axis-permuted, not C), so a later ravel is a copy exactly when numpy's is and an
    in-place write through it changes what it changes in numpy (found by the fuzzer)."""
    x = np.random.default_rng(3).normal(size=(3, 4, 8)).transpose(2, 0, 1)
    make = {
        "scalar": lambda x: x * 2.0,
        "unary": np.tanh,
        "binary": lambda x: x * x,
        "broadcast": lambda x: x + x[:1],
    }[op]

    def f(x: Any) -> Any:
        y = make(x)
        r = np.ravel(y)  # (a copy in numpy: y is not C-contiguous)
        r += 0.5
        return np.sum(y * y) + 0.1 * np.sum(r)

    assert not make(x).flags.c_contiguous  # (numpy's own layout: what the rules must copy)
    check_grads(f, x, calls=3)
