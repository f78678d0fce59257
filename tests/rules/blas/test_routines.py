"""rules.blas: every routine through the conformance kit (zero allocation included), random
shapes, layouts and flags via hypothesis, scipy's copy-or-overwrite behaviour, the wrappers,
and gradients of small programs through the engine against finite differences."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import numpy as np
import pytest
import scipy.linalg.blas as sb
from fdcheck import check_grads, check_warm_grads

# `_arr`, the name the tests had: hypothesis seeds derandomized tests from their source text
from fdcheck import layout_array as _arr
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules
import rules.blas.routines
from rulekit import CoDual, NoFData, NoRData, TracingError, registry, zero_codual
from rules.blas._routine import f2py_inplace
from rules.scipy._routing import original
from testutils import check_rule, count_allocations

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)

# The engine tests also use other bundled rules (indexing, ufuncs, shape): import them all,
# as `import rules` does once every module is listed in rules/__init__.py.
for _m in pkgutil.iter_modules(rules.__path__):
    importlib.import_module(f"rules.{_m.name}")


# -- registration (the examples run in test_rule_examples.py, which also checks they are stateful)


def test_every_routine_is_wrapped_and_registered() -> None:
    names = rules.blas.routines.__all__
    assert len(names) == 44, names  # every wrapper listed (the module's export list)
    for name in names:
        wrapper, routed = getattr(rules.blas, name), getattr(sb, name)
        assert wrapper.fn is original(routed) and wrapper.fn is not routed  # scipy's own f2py
        assert type(wrapper.fn).__name__ == "fortran", name
        assert routed.__rulekit_primitive__ is wrapper, name  # scipy's name routes to it
        assert any(r.f is wrapper for r in registry.entries("rules.blas.routines")), name
    # plain calls through the routed name are scipy's own, bit for bit (and still overwrite)
    rng = np.random.default_rng(3)
    a, b, c = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    np.testing.assert_array_equal(
        sb.dgemm(0.5, a, b, -1.0, c), original(sb.dgemm)(0.5, a, b, -1.0, c), strict=True
    )
    x, y = rng.normal(size=5), rng.normal(size=5)
    y1, y2 = y.copy(), y.copy()
    out = sb.daxpy(x, y1, a=2.0)
    np.testing.assert_array_equal(out, original(sb.daxpy)(x, y2, a=2.0), strict=True)
    assert out is y1 and np.array_equal(y1, y2)  # (daxpy writes into y: scipy's behaviour)


# -- gemm: random shapes, layouts, flags; 1×1 up to 256×256 ----------------------------------


@SETTINGS
@given(
    m=st.integers(1, 9),
    k=st.integers(1, 9),
    n=st.integers(1, 9),
    layouts=st.tuples(*[st.sampled_from("CFS")] * 3),
    trans=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    dt=st.sampled_from([np.float32, np.float64]),
    overwrite=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_gemm_random(
    m: int, k: int, n: int, layouts: Any, trans: Any, dt: Any, overwrite: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    sa = (k, m) if trans[0] else (m, k)
    sb_ = (n, k) if trans[1] else (k, n)
    A, B = _arr(rng, sa, dt, layouts[0]), _arr(rng, sb_, dt, layouts[1])
    C = _arr(rng, (m, n), dt, layouts[2])
    wrapper = rules.blas.sgemm if dt is np.float32 else rules.blas.dgemm
    report = check_rule(wrapper, 0.7, A, B, -0.4, C, trans[0], trans[1], int(overwrite))
    assert report.allocations == 0


@pytest.mark.parametrize("n", [1, 2, 17, 64, 256])  # 256: the large case of the issue
@pytest.mark.parametrize("order", ["C", "F"])
def test_gemm_sizes(n: int, order: str) -> None:
    rng = np.random.default_rng(n)
    dt = np.float64 if order == "F" else np.float32
    A, B = _arr(rng, (n, n), dt, order), _arr(rng, (n, n), dt, order)
    C = _arr(rng, (n, n), dt, order)
    wrapper = rules.blas.dgemm if dt is np.float64 else rules.blas.sgemm
    if n == 256 and order == "C":  # large: c= a constant keyword, transposed views
        kw = {"beta": 0.5, "c": C.T, "trans_a": 1}
        report = check_rule(wrapper, 1.0, A, B.T, kwargs=kw)
    else:
        report = check_rule(wrapper, 0.5, A, B, 1.5, C, 0, 1, 1)
    assert report.allocations == 0


@SETTINGS
@given(
    m=st.integers(1, 6),
    k=st.integers(1, 6),
    n=st.integers(1, 6),
    trans=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    layouts=st.tuples(*[st.sampled_from("CF")] * 3),
    seed=st.integers(0, 2**16),
)
def test_zgemm_random(m: int, k: int, n: int, trans: Any, layouts: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    dt = np.complex128
    A = _arr(rng, (k, m) if trans[0] else (m, k), dt, layouts[0])
    B = _arr(rng, (n, k) if trans[1] else (k, n), dt, layouts[1])
    C = _arr(rng, (m, n), dt, layouts[2])
    report = check_rule(rules.blas.zgemm, 0.3 - 0.8j, A, B, 1.1 + 0.2j, C, *trans, 1)
    assert report.allocations == 0


# -- the other routines: random flags and layouts ----------------------------------------------


@SETTINGS
@given(
    side=st.integers(0, 1),
    lower=st.integers(0, 1),
    trans=st.integers(0, 2),
    diag=st.integers(0, 1),
    solve=st.booleans(),
    layouts=st.tuples(st.sampled_from("CFS"), st.sampled_from("CFS")),
    dt=st.sampled_from([np.float64, np.complex128]),
    seed=st.integers(0, 2**16),
)
def test_trmm_trsm_random(
    side: int, lower: int, trans: int, diag: int, solve: bool, layouts: Any, dt: Any, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    B = _arr(rng, (3, 4), dt, layouts[1])
    nt = B.shape[side]
    A = _arr(rng, (nt, nt), dt, layouts[0])
    A += 4 * np.eye(nt, dtype=dt)  # well conditioned for trsm
    name = ("z" if dt is np.complex128 else "d") + ("trsm" if solve else "trmm")
    report = check_rule(getattr(rules.blas, name), 0.9, A, B, side, lower, trans, diag, 1)
    assert report.allocations == 0


@SETTINGS
@given(
    n=st.integers(1, 6),
    k=st.integers(1, 6),
    trans=st.integers(0, 1),
    lower=st.integers(0, 1),
    layouts=st.tuples(st.sampled_from("CFS"), st.sampled_from("CFS")),
    dt=st.sampled_from([np.float32, np.float64, np.complex128]),
    seed=st.integers(0, 2**16),
)
def test_syrk_random(n: int, k: int, trans: int, lower: int, layouts: Any, dt: Any, seed: int):
    rng = np.random.default_rng(seed)
    A = _arr(rng, (k, n) if trans else (n, k), dt, layouts[0])
    C = _arr(rng, (n, n), dt, layouts[1])
    fn = getattr(rules.blas, {np.float32: "s", np.float64: "d", np.complex128: "z"}[dt] + "syrk")
    report = check_rule(fn, 0.8, A, 0.6, C, trans, lower, 1)
    assert report.allocations == 0


@SETTINGS
@given(
    m=st.integers(1, 7),
    n=st.integers(1, 7),
    trans=st.integers(0, 2),
    incs=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    offs=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    layout=st.sampled_from("CFS"),
    dt=st.sampled_from([np.float64, np.complex64]),
    seed=st.integers(0, 2**16),
)
def test_gemv_random(
    m: int, n: int, trans: int, incs: Any, offs: Any, layout: str, dt: Any, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    A = _arr(rng, (m, n), dt, layout)
    lx, ly = (m, n) if trans else (n, m)
    x = _arr(rng, (offs[0] + (lx - 1) * incs[0] + 1,), dt, "C")
    y = _arr(rng, (offs[1] + (ly - 1) * incs[1] + 2,), dt, "C")
    fn = rules.blas.dgemv if dt is np.float64 else rules.blas.cgemv
    report = check_rule(fn, 1.3, A, x, -0.7, y, offs[0], incs[0], offs[1], incs[1], trans, 1)
    assert report.allocations == 0


@SETTINGS
@given(
    n=st.integers(1, 8),
    inc=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    off=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    dt=st.sampled_from([np.float32, np.float64, np.complex128]),
    seed=st.integers(0, 2**16),
)
def test_level1_random(n: int, inc: Any, off: Any, dt: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = _arr(rng, (off[0] + (n - 1) * inc[0] + 1,), dt, "C")
    y = _arr(rng, (off[1] + (n - 1) * inc[1] + 1,), dt, "C")
    p = {np.float32: "s", np.float64: "d", np.complex128: "z"}[dt]
    dot = getattr(rules.blas, p + ("dotc" if p == "z" else "dot"))
    nrm2 = getattr(rules.blas, "dznrm2" if p == "z" else p + "nrm2")
    a = complex(0.6, 0.2) if p == "z" else 0.6
    reports = [
        check_rule(dot, x, y, n, off[0], inc[0], off[1], inc[1]),
        check_rule(nrm2, x, n, off[0], inc[0]),
        check_rule(getattr(rules.blas, p + "scal"), a, x, n, off[0], inc[0]),
        check_rule(getattr(rules.blas, p + "axpy"), x, y, n, a, off[0], inc[0], off[1], inc[1]),
    ]
    assert all(r.allocations == 0 for r in reports)


@pytest.mark.parametrize("name", ["dger", "zgeru", "zgerc"])
@pytest.mark.parametrize("layout", ["C", "F", "S"])
def test_ger_layouts(name: str, layout: str) -> None:
    rng = np.random.default_rng(3)
    dt = np.float64 if name[0] == "d" else np.complex128
    x, y, A = _arr(rng, (4,), dt, "S"), _arr(rng, (3,), dt, "C"), _arr(rng, (4, 3), dt, layout)
    alpha = 0.7 if dt is np.float64 else 0.7 + 0.1j
    assert check_rule(getattr(rules.blas, name), alpha, x, y, 1, 1, A, 1, 1, 1).allocations == 0


# -- scipy's behaviour, reproduced ----------------------------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    shape=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    layout=st.sampled_from("CFS"),
    dt=st.sampled_from([np.float32, np.float64]),
)
def test_inplace_rule_matches_scipy(shape: Any, layout: str, dt: Any) -> None:
    """The rule's "does scipy overwrite c or copy it" agrees with scipy, for every layout."""
    rng = np.random.default_rng(0)
    c = _arr(rng, shape, dt, layout)
    A, B = np.ones((shape[0], 2)), np.ones((2, shape[1]))
    before = c.copy()
    out = sb.dgemm(1.0, A, B, beta=1.0, c=c, overwrite_c=1)
    assert (out is c) == f2py_inplace(c, np.dtype(np.float64), 2)
    assert (not np.array_equal(c, before)) == f2py_inplace(c, np.dtype(np.float64), 2)


def test_wrappers_call_scipy_directly() -> None:
    rng = np.random.default_rng(0)
    A, B = _arr(rng, (3, 4), np.float64, "F"), _arr(rng, (4, 2), np.float64, "F")
    C = _arr(rng, (3, 2), np.float64, "F")
    C2 = C.copy(order="F")
    out = rules.blas.dgemm(1.5, A, B, 0.5, C, overwrite_c=1)
    assert out is C
    np.testing.assert_array_equal(C, sb.dgemm(1.5, A, B, 0.5, C2, overwrite_c=1))
    assert count_allocations(rules.blas.dgemm, 1.0, A, B, c=C, overwrite_c=1).count == 0
    assert rules.blas.ddot(A[:, 0], A[:, 0]) == sb.ddot(A[:, 0], A[:, 0])


# -- state: interleaving, abandoned forward passes, errors --------------------------------------


def _gemm_args(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> tuple[Any, ...]:
    f = CoDual(rules.blas.dgemm, NoFData())
    scalars = (CoDual(0.5, NoFData()), CoDual(2.0, NoFData()))
    return f, scalars[0], zero_codual(A), zero_codual(B), scalars[1], zero_codual(C), 0, 0, 1


def test_abandoned_forward_pass_is_discarded() -> None:
    rng = np.random.default_rng(1)
    A, B = _arr(rng, (3, 3), np.float64, "F"), _arr(rng, (3, 3), np.float64, "F")
    C = _arr(rng, (3, 3), np.float64, "F")
    C0 = C.copy()
    sig = rulekit.signature_of(rules.blas.dgemm, 0.5, A, B, 2.0, C, 0, 0, 1)
    rule = rulekit.build_primitive_rrule(sig)
    assert isinstance(rule, rulekit.StatefulRRule)
    args = _gemm_args(A, B, C)
    y1, pb1 = rule(*args)
    rule(*args)  # abandoned: its pullback never runs
    assert rule.depth == 2
    y1.dx[...] = 1.0
    pb1(NoRData())
    assert rule.depth == 0
    np.testing.assert_array_equal(C, C0)  # the first call's saved value was restored
    np.testing.assert_allclose(y1.dx, 2.0)  # C̄ ← β·C̄

    def call() -> None:
        rule(*args)[1](NoRData())

    call()  # and the rule keeps working, without allocating
    assert count_allocations(call).count == 0
    np.testing.assert_array_equal(C, C0)


def test_writing_traced_values_into_a_constant_raises() -> None:
    rng = np.random.default_rng(2)
    A, B = _arr(rng, (2, 2), np.float64, "F"), _arr(rng, (2, 2), np.float64, "F")
    C = _arr(rng, (2, 2), np.float64, "F")

    def f(A: Any) -> Any:
        rules.blas.dgemm(1.0, A, B, beta=1.0, c=C, overwrite_c=1)  # C is not traced
        return np.sum(A)

    with pytest.raises(TracingError, match="not traced"):
        rulekit.grad(f)(A)


def test_unsupported_arguments_raise_clearly() -> None:
    x = np.ones(4)
    with pytest.raises(NotImplementedError, match="positive increments"):
        rulekit.grad(lambda x: rules.blas.ddot(x, x, incx=-1))(x)
    c32 = np.ones((4, 4), np.float32)
    with pytest.raises(TypeError, match="float64 ndarray"):
        rulekit.grad(lambda x: np.sum(rules.blas.dgemm(1.0, x[:, None], x[None, :], c=c32)))(x)
    with pytest.raises(NotImplementedError, match="incx/incy"):
        rulekit.grad(lambda x: np.sum(rules.blas.dger(1.0, x, x, incx=2)))(x)


# -- through the engine, against finite differences --------------------------------------------


def test_engine_gemm_in_place_on_c_ordered_arrays(rng: np.random.Generator) -> None:
    def f(A: Any, B: Any, C: Any, alpha: Any) -> Any:
        C = np.zeros_like(C) + C
        rules.blas.dgemm(alpha, B.T, A.T, 0.5, C.T, 0, 0, 1)  # C ← α·A·B + ½C, in place
        return np.sum(C * C)

    A, B, C = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    check_grads(f, A, B, C, 1.5)


def test_engine_level2_level3_chain(rng: np.random.Generator) -> None:
    def f(A: Any, T: Any, x: Any) -> Any:
        S = rules.blas.dsyrk(1.0, A, lower=1)  # lower triangle of A·Aᵀ
        X = rules.blas.dtrsm(2.0, T, S, lower=1)  # T⁻¹·S·2
        y = rules.blas.dgemv(1.0, X, x, trans=1)
        z = np.zeros_like(y) + 1.0
        rules.blas.daxpy(y, z, a=0.5)  # z ← ½y + z, in place
        rules.blas.dscal(3.0, z)
        return rules.blas.dnrm2(z) + rules.blas.ddot(z, y)

    A, x = rng.normal(size=(3, 2)), rng.normal(size=3)
    T = np.tril(rng.normal(size=(3, 3))) + 3 * np.eye(3)
    check_grads(f, A, T, x)


def test_engine_through_scipy_names(rng: np.random.Generator) -> None:
    """The same chain through scipy's routed public names (`scipy.linalg.blas.dgemv`, ...)."""

    def f(A: Any, T: Any, x: Any) -> Any:
        S = sb.dsyrk(1.0, A, lower=1)
        X = sb.dtrsm(2.0, T, S, lower=1)
        y = sb.dgemv(1.0, X, x, trans=1)
        z = np.zeros_like(y) + 1.0
        sb.daxpy(y, z, a=0.5)  # z ← ½y + z, in place
        sb.dscal(3.0, z)
        return sb.dnrm2(z) + sb.ddot(z, y)

    A, x = rng.normal(size=(3, 2)), rng.normal(size=3)
    T = np.tril(rng.normal(size=(3, 3))) + 3 * np.eye(3)
    check_grads(f, A, T, x)
    # (scipy's own f2py functions called traced: tests/rules/test_messages.py, in a subprocess)
    # an untraced `y` that the routed daxpy would overwrite: the rule's own error, nothing written
    y = np.zeros(3)
    with pytest.raises(TracingError, match=r"overwrites its argument y=.* but y is not traced"):
        rulekit.grad(lambda x: np.sum(sb.daxpy(x, y)))(x)
    assert not y.any()


def test_engine_steady_state_allocates_nothing(rng: np.random.Generator) -> None:
    def f(A: Any, B: Any, C: Any) -> Any:
        rules.blas.dgemm(1.0, B.T, A.T, beta=1.0, c=C.T, overwrite_c=1)
        D = rules.blas.dgemm(1.0, C, A)  # a new output, from the rule's pool
        rules.blas.dscal(0.5, D[:, 0])
        return rules.blas.ddot(D[:, 1], D[:, 0])

    A, B, C = rng.normal(size=(6, 6)), rng.normal(size=(6, 6)), rng.normal(size=(6, 6))
    check_warm_grads(f, A, B, C)


# -- an overwritten argument that shares memory with an operand (issue #11) --------------------

_F = np.asfortranarray(np.random.default_rng(13).normal(size=(3, 3)))
_OVERLAPPING: dict[str, Any] = {
    # c is a: BLAS reads a while it overwrites it
    "dgemm c=a": lambda A: rules.blas.dgemm(1.0, A, _F, 0.5, A, overwrite_c=1),
    "dgemm c=b": lambda A: rules.blas.dgemm(1.0, _F, A, 0.5, A, overwrite_c=1),
    # c and b: two F-contiguous column blocks of one array that overlap (column 1)
    "dgemm partial": lambda A: rules.blas.dgemm(
        1.0, _F, (W := A * 1.0)[:, :2], 1.0, W[:, 1:], overwrite_c=1
    ),
    "zgemm c=a": lambda A: rules.blas.zgemm(1.0, (Z := A + 0j), Z, 0.5, Z, overwrite_c=1).real,
    "sgemm c=a": lambda A: rules.blas.sgemm(1.0, (S := A.astype(np.float32)), S, 1.0, S, 0, 0, 1),
    "dsyrk c=a": lambda A: rules.blas.dsyrk(1.0, A, 0.5, A, overwrite_c=1),
    "dtrmm b=a": lambda A: rules.blas.dtrmm(1.0, A, A, overwrite_b=1),
    # (an F-ordered eye: numpy lays out F + C as C, which f2py would copy, so no overlap)
    "dtrsm b=a": lambda A: rules.blas.dtrsm(
        1.0, (T := A + 3 * np.eye(3, order="F")), T, overwrite_b=1
    ),
    "dgemv y=x": lambda A: rules.blas.dgemv(1.0, _F, (v := A[:, 0] * 1.0), 0.5, v, overwrite_y=1),
    "dgemv y in a": lambda A: rules.blas.dgemv(1.0, A, _F[0], 0.5, A[:, 0], overwrite_y=1),
    "dger a, x": lambda A: rules.blas.dger(1.0, A[:, 0], _F[0], a=A, overwrite_a=1),
    "daxpy x, y": lambda A: rules.blas.daxpy((v := A[:, 0] * 1.0)[:2], v[1:]),
}


@pytest.mark.parametrize("name", sorted(_OVERLAPPING))
def test_overwriting_an_operand_is_refused(name: str) -> None:
    """scipy overwrites c/b/y/a in place (F-contiguous, overwrite flag set) while BLAS reads
    an operand sharing its memory: no rule can give that gradient, so it is refused."""
    f = _OVERLAPPING[name]
    with pytest.raises(TracingError, match="shares memory with") as e:
        rulekit.grad(lambda A: np.sum(np.real(f(A)) ** 2))(_F.copy(order="F"))
    assert "Pass a separate buffer" in str(e.value)


def test_overlap_is_fine_when_scipy_copies() -> None:
    """No overwrite flag, or a C-ordered c (f2py copies it): a gradient, right on every call."""

    def f(A: Any) -> Any:
        y = rules.blas.dgemm(1.0, A, A, 0.5, A)  # overwrite_c=0: c is read, not written
        W = A.T * 1.0  # C-ordered: copied by f2py even with overwrite_c=1
        z = rules.blas.dgemm(1.0, W, W, 0.5, W, overwrite_c=1)
        return np.sum(y**2) + np.sum(z**2)

    check_grads(f, _F.copy(order="F"), calls=3)
