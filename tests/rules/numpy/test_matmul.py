"""rules.numpy.matmul: np.matmul / @, np.dot, np.inner, np.outer, np.vdot through the
conformance kit (zero allocation included) for 1-D, 2-D and batched operands, with and
without out=, and through the engine against finite differences."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, check_warm_grads

# `_arr`, the name the tests had: hypothesis seeds derandomized tests from their source text
from fdcheck import layout_array as _arr
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules
import rules.numpy.matmul
from rulekit import TracingError
from testutils import check_rule

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True)

# The engine tests also use other bundled rules (indexing, ufuncs, shape): import them all,
# as `import rules` does once every module is listed in rules/__init__.py.
for _m in pkgutil.iter_modules(rules.__path__):
    importlib.import_module(f"rules.{_m.name}")


# -- 2-D: 1×1 up to 256×256, C and F, float32 and float64 -----------------------------------


@pytest.mark.parametrize("n", [1, 3, 32, 256])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_matmul_2d_sizes(n: int, dt: Any, order: str) -> None:
    rng = np.random.default_rng(n)
    A, B = _arr(rng, (n, n), dt, order), _arr(rng, (n, n), dt, order)
    report = check_rule(np.matmul, A, B)
    assert report.stateful and report.allocations == 0


@SETTINGS
@given(
    m=st.integers(1, 8),
    k=st.integers(1, 8),
    n=st.integers(1, 8),
    layouts=st.tuples(st.sampled_from("CFS"), st.sampled_from("CFS")),
    dt=st.sampled_from([np.float32, np.float64, np.complex64, np.complex128]),
    out=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_matmul_2d_random(m: int, k: int, n: int, layouts: Any, dt: Any, out: bool, seed: int):
    rng = np.random.default_rng(seed)
    A, B = _arr(rng, (m, k), dt, layouts[0]), _arr(rng, (k, n), dt, layouts[1])
    kw = {"out": _arr(rng, (m, n), dt, "C")} if out else {}
    report = check_rule(np.matmul, A, B, kwargs=kw)
    assert report.allocations == 0


# -- 1-D and batched (≥ 3-D, broadcasting) --------------------------------------------------


def _batch_shapes(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    nb = draw(st.integers(0, 2))
    batch = tuple(draw(st.integers(1, 3)) for _ in range(nb))
    ba = tuple(b if draw(st.booleans()) else 1 for b in batch)[draw(st.integers(0, nb)) :]
    bb = tuple(b if draw(st.booleans()) else 1 for b in batch)[draw(st.integers(0, nb)) :]
    sa = (k,) if draw(st.integers(0, 4)) == 0 else (*ba, m, k)
    sb = (k,) if draw(st.integers(0, 4)) == 0 else (*bb, k, n)
    return sa, sb


@SETTINGS
@given(
    shapes=st.composite(lambda draw: _batch_shapes(draw))(),
    dt=st.sampled_from([np.float32, np.float64, np.complex128]),
    layouts=st.tuples(st.sampled_from("CFS"), st.sampled_from("CFS")),
    out=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_matmul_batched_and_1d_random(
    shapes: Any, dt: Any, layouts: Any, out: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    A, B = _arr(rng, shapes[0], dt, layouts[0]), _arr(rng, shapes[1], dt, layouts[1])
    y = np.matmul(A, B)
    kw = {"out": _arr(rng, np.shape(y), dt, "C")} if out and np.ndim(y) else {}
    report = check_rule(np.matmul, A, B, kwargs=kw)
    assert report.stateful and report.allocations == 0


@SETTINGS
@given(
    nd=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    fn=st.sampled_from(["dot", "inner", "outer", "vdot"]),
    dt=st.sampled_from([np.float32, np.float64, np.complex128]),
    layouts=st.tuples(st.sampled_from("CFS"), st.sampled_from("CFS")),
    sizes=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5)),
    seed=st.integers(0, 2**16),
)
def test_dot_inner_outer_vdot_random(
    nd: Any, fn: str, dt: Any, layouts: Any, sizes: Any, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    m, k, n = sizes
    sa: tuple[int, ...]
    sb: tuple[int, ...]
    if fn == "outer":
        sa, sb = (m,), (n,)
    elif fn == "vdot":
        sa, sb = ((m, k), (m, k)) if nd[0] == 2 else ((k,), (k,))
    else:
        sa = (k,) if nd[0] == 1 else (m, k)
        sb = (k,) if nd[1] == 1 else ((n, k) if fn == "inner" else (k, n))
    A, B = _arr(rng, sa, dt, layouts[0]), _arr(rng, sb, dt, layouts[1])
    report = check_rule(getattr(np, fn), A, B)
    assert report.stateful and report.allocations == 0


def test_out_forms_of_dot_and_outer() -> None:
    rng = np.random.default_rng(5)
    A, B = _arr(rng, (3, 4), np.float64, "C"), _arr(rng, (4, 2), np.float64, "C")
    assert check_rule(np.dot, A, B, kwargs={"out": np.ones((3, 2))}).allocations == 0
    x, y = _arr(rng, (3,), np.float32, "S"), _arr(rng, (4,), np.float32, "C")
    assert check_rule(np.outer, x, y, kwargs={"out": np.ones((3, 4), np.float32)}).stateful


def test_mixed_dtypes_and_nd_dot_use_the_generic_rules() -> None:
    rng = np.random.default_rng(6)
    A32, B64 = _arr(rng, (2, 3), np.float32, "C"), _arr(rng, (3, 2), np.float64, "F")
    assert not check_rule(np.matmul, A32, B64).stateful
    A3, B3 = _arr(rng, (2, 2, 3), np.float64, "C"), _arr(rng, (4, 3, 2), np.float64, "C")
    assert not check_rule(np.dot, A3, B3).stateful
    assert not check_rule(np.inner, A3, _arr(rng, (2, 3), np.float64, "C")).stateful


def test_out_overlapping_an_operand_raises() -> None:
    def f(A: Any) -> Any:
        B = np.zeros_like(A) + A
        np.matmul(B, A, out=B)
        return np.sum(B)

    with pytest.raises(NotImplementedError, match="overlapping"):
        rulekit.grad(f)(np.eye(2))


def test_out_into_a_constant_raises() -> None:
    plain = np.zeros((2, 2))
    with pytest.raises(TracingError):
        rulekit.grad(lambda A: np.sum(np.matmul(A, A, out=plain)))(np.eye(2))


# -- through the engine -------------------------------------------------------------------------


def test_engine_operator_and_family(rng: np.random.Generator) -> None:
    def f(A: Any, B: Any, v: Any) -> Any:
        C = A @ B  # 2-D
        w = v @ C  # 1-D @ 2-D
        u = np.dot(C, w[:2])  # 2-D · 1-D
        s = np.inner(u, u) + np.vdot(v, v)  # scalars
        P = np.outer(u, w)
        return s + np.sum(np.sin(P)) + np.sum(np.inner(C, C))

    A, B, v = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=3)
    check_grads(f, A, B, v)


def test_engine_batched_broadcast_and_out(rng: np.random.Generator) -> None:
    def f(X: Any, W: Any, b: Any) -> Any:
        H = np.tanh(X @ W)  # (2, 3, 4) @ (4, 2): W broadcast over the batch
        out = np.zeros_like(H[:, :, :1] @ b[None, :])  # a traced destination
        np.matmul(H[:, :, :1], b[None, :], out=out)
        Y = np.matmul(X[:, None, :, :2], H[None, :, :2, :])  # (2, 1, 3, 2) @ (1, 2, 2, 2)
        return np.sum(out**2) + np.sum(Y)

    X, W, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 2)), rng.normal(size=3)
    check_grads(f, X, W, b)


def test_engine_steady_state_allocates_nothing(rng: np.random.Generator) -> None:
    def f(A: Any, B: Any, x: Any) -> Any:
        C = A @ B
        D = np.matmul(C, C.T)
        y = np.inner(D, C) @ x
        z = np.dot(x, D)
        return np.vdot(y, z)

    A, B, x = rng.normal(size=(5, 4)), rng.normal(size=(4, 5)), rng.normal(size=5)
    check_warm_grads(f, A, B, x)


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_dot_of_a_strided_matrix_allocates_nothing(dt: Any) -> None:
    # np.dot copies a strided operand internally (16 bytes for these shapes); the rule must
    # not inherit that: up to 2-D it computes with np.matmul, which reads the strides.
    rng = np.random.default_rng(0)
    a = _arr(rng, (3, 2), dt, "S")
    for b in (_arr(rng, (2,), dt, "C"), _arr(rng, (2, 4), dt, "S")):
        assert check_rule(np.dot, a, b).allocations == 0


def test_into_writes_back_a_copied_result() -> None:
    """Should f2py ever return a copy instead of working in place, the result is written
    into the target (two unrelated owning arrays, and two views of one buffer)."""
    from rules.numpy._matmul_stateful import _into

    target, result = np.zeros(3), np.ones(3)
    _into(target, result)
    np.testing.assert_array_equal(target, 1.0)
    base = np.zeros((2, 3))
    _into(base[0], base[1] + 2.0)
    np.testing.assert_array_equal(base[0], 2.0)
    same = np.zeros((3, 2))
    _into(same.T, same.T)  # in place: nothing to do
    np.testing.assert_array_equal(same, 0.0)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize(
    ("sa", "sb"), [((4, 3), (4, 5)), ((4, 3), (4,)), ((4,), (4, 5)), ((3, 4), (5, 4))]
)
def test_transposed_and_vector_operands_by_one_gemm(dt: Any, sa: Any, sb: Any) -> None:
    """`A.T @ B`, `A.T @ b`, `a @ B`, `A @ B.T` (F-ordered or 1-D operands: the general path,
    one scipy gemm forward and back) pass the kit in every dtype."""
    rng = np.random.default_rng(12)

    def arr(shape: Any) -> np.ndarray:
        x = rng.normal(size=shape) + (
            1j * rng.normal(size=shape) if np.dtype(dt).kind == "c" else 0
        )
        return np.asarray(x, dtype=dt)

    A, B = arr(sa), arr(sb)
    A = A.T if len(sa) == 2 and sa[0] == 4 else A  # (4, 3) → its transpose, F-ordered
    B = B.T if len(sb) == 2 and sb[1] == 4 else B  # (5, 4) → its transpose, F-ordered
    check_rule(np.matmul, A, B)


# -- zero-size dimensions (issue #11): zero gradients, on every call ----------------------------

_EMPTY: dict[str, Any] = {
    "X @ X.T": lambda X: np.sum(X @ X.T),
    "np.dot(X, X.T)": lambda X: np.sum(np.dot(X, X.T)),
    "np.inner(X, X)": lambda X: np.sum(np.inner(X, X)),
    "X @ v": lambda X: np.sum(X @ np.ones(X.shape[1], X.dtype)),
    "v @ X": lambda X: np.sum(np.ones(X.shape[0], X.dtype) @ X),
    "X.T @ X (F-ordered X.T)": lambda X: np.sum(X.T @ X),
    "X @ X.T, out=": lambda X: np.sum(np.matmul(X, X.T, out=np.zeros_like(X @ X.T))),
    "batched": lambda X: np.sum(X[None] @ np.swapaxes(X[None], -1, -2)),
    "mixed dtypes": lambda X: np.sum(X @ np.ones((X.shape[1], 2), np.float16)),
}


@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)])
@pytest.mark.parametrize("name", sorted(_EMPTY))
def test_zero_size_dimensions(name: str, shape: Any, dt: Any, copy: bool) -> None:
    """Y = A·B with m, k or n = 0: Ā, B̄ are empty or sums over an empty axis, i.e. zero.
    (The BLAS adjoints used to pass the empty arrays to f2py, which rejects them.)"""
    f = _EMPTY[name]
    vg = rulekit.value_and_grad(lambda X: np.real(f(X)), copy=copy)
    for X in (np.zeros(shape, dt), np.zeros(shape, dt, order="F"), np.zeros(shape, dt)):
        value, g = vg(X)
        assert value == 0 and g.shape == X.shape and g.dtype == X.dtype and not np.any(g)


@pytest.mark.parametrize("fn", [np.dot, np.matmul, np.inner, np.vdot, np.outer])
def test_zero_size_vectors(fn: Any) -> None:
    vg = rulekit.value_and_grad(lambda x, y: np.sum(fn(x, y)), argnums=(0, 1))
    for _ in range(3):
        value, (gx, gy) = vg(np.zeros(0), np.zeros(0))
        assert value == 0 and gx.shape == gy.shape == (0,)


def test_zero_size_kit() -> None:
    for A, B in (((0, 3), (3, 2)), ((2, 0), (0, 3)), ((2, 3), (3, 0))):
        check_rule(np.matmul, np.zeros(A), np.zeros(B))
        check_rule(np.dot, np.zeros(A), np.zeros(B))


def test_dot_out_must_be_c_contiguous_as_in_numpy() -> None:
    """np.dot(out=) wants a C-contiguous out of the result's dtype (np.matmul does not)."""
    A = np.ones((2, 3))

    def f(A: Any) -> Any:
        out = np.zeros_like(A @ A.T, order="F")  # a traced, F-ordered destination
        return np.sum(np.dot(A, A.T, out=out))

    with pytest.raises(ValueError, match="C-Array"):
        np.dot(A, A.T, out=np.zeros((2, 2), order="F"))
    with pytest.raises(ValueError, match="C-Array"):
        rulekit.grad(f)(A)
