"""`value_and_grad(f, compile=True)`: replay is never stale.

Every test calls one compiled object several times on changing inputs and checks
each call against the eager `value_and_grad` (which the rest of the suite checks
against finite differences) and, where it matters, finite differences directly.
The calls are built so that the guards must fire: branches that flip, loop counts
that depend on the data, shapes, dtypes and layouts that change, scalar arguments
that change, captured arrays mutated or rebound, data-dependent indices.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from fdcheck import fd_grad

import rulekit

LAYOUTS = ("C", "F", "strided", "negative")


def in_layout(a: np.ndarray, layout: str) -> np.ndarray:
    """`a`'s values in memory laid out as `layout` (one of LAYOUTS)."""
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "strided":
        big = np.zeros(tuple(2 * n for n in a.shape), a.dtype)
        view = big[tuple(slice(None, None, 2) for _ in a.shape)]
        view[...] = a
        return view
    if layout == "negative":
        return np.ascontiguousarray(a[::-1])[::-1]
    return np.ascontiguousarray(a)


def _equal(a: Any, b: Any, what: str) -> None:
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), what
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            _equal(x, y, f"{what}[{k}]")
        return
    np.testing.assert_allclose(a, b, rtol=1e-13, atol=0, err_msg=what)
    assert np.shape(a) == np.shape(b), what
    assert np.asarray(a).dtype == np.asarray(b).dtype, what


def agree(
    f: Callable[..., Any],
    calls: Sequence[tuple[Any, ...]],
    replays: int | None = None,
    **options: Any,
) -> Any:
    """Call a compiled and an eager object on each argument tuple; they must agree on every
    call. Returns the compiled object (its tracer counts traces and replays)."""
    compiled = rulekit.value_and_grad(f, compile=True, **options)
    eager = rulekit.value_and_grad(f, **options)
    for n, args in enumerate(calls, 1):
        want = eager(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])
        got = compiled(*args)
        _equal(got, want, f"call {n}")
    if replays is not None:
        assert compiled.tracer.replays == replays, (compiled.tracer.traces, replays)
    return compiled


def test_replays_after_the_first_call(rng: np.random.Generator) -> None:
    def f(x: Any, y: Any) -> Any:
        return np.sum(np.tanh(x @ y) ** 2) - 0.5 * np.mean(np.log1p(x * x))

    calls = [(rng.standard_normal((3, 4)), rng.standard_normal((4, 2))) for _ in range(5)]
    vg = agree(f, calls, replays=4, argnums=(0, 1))
    assert vg.tracer.traces == 1
    x, y = calls[0]
    _, (gx, gy) = vg(x, y)
    np.testing.assert_allclose(gx, fd_grad(f, (x, y), 0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gy, fd_grad(f, (x, y), 1), rtol=1e-6, atol=1e-9)


def test_a_branch_that_flips_between_calls(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        if np.sum(x) > 0:
            return np.sum(np.sin(x) ** 2)
        return np.sum(np.exp(x))

    xs = [rng.standard_normal(4) + s for s in (3, -3, 3, -3, 3, 3, -3)]
    vg = agree(f, [(x,) for x in xs])
    assert vg.tracer.traces == 2  # (one program per branch, each replayed afterwards)


def test_a_data_dependent_loop_count(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        y = x
        while np.max(np.abs(y)) > 1.0:
            y = y * 0.5
        return np.sum(y**3)

    xs = [rng.standard_normal(3) * s for s in (1, 4, 30, 4, 1, 30, 100)]
    agree(f, [(x,) for x in xs])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_and_dtypes_that_change_between_calls(
    layout: str, rng: np.random.Generator
) -> None:
    def f(x: Any) -> Any:
        y = x * x + 1.0
        y[0] = y[-1] * 2.0
        return np.sum(np.abs(y) ** 2) + np.sum(x[::2].real)

    calls = []
    for dtype in (np.float64, np.float32, np.complex128, np.float64):
        for lay in ("C", layout, "C"):
            base = rng.standard_normal((4, 3)).astype(dtype)
            if np.iscomplexobj(base):
                base = base + 1j * rng.standard_normal((4, 3))
            calls.append((in_layout(base, lay),))
    agree(f, calls)


def test_zero_dimensional_and_empty_inputs(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        return np.sum(np.sin(x) * x) + 1.0

    calls = [
        (np.array(0.5),),
        (np.array(-1.5),),
        (np.zeros((0, 3)),),
        (np.zeros((0, 3)),),
        (rng.standard_normal(3),),
        (np.array(2.0),),
    ]
    agree(f, calls)


def test_changing_scalar_arguments(rng: np.random.Generator) -> None:
    def f(x: Any, alpha: float, n: int) -> Any:
        y = x
        for _ in range(n):
            y = np.sin(y) * alpha
        return np.sum(y)

    x = rng.standard_normal(3)
    calls = [(x, 0.5, 2), (x, 0.5, 2), (x, 1.5, 2), (x, 1.5, 3), (x, 0.5, 2), (x, -0.0, 1)]
    agree(f, calls)


def test_non_differentiated_arrays_are_recomputed_not_frozen(rng: np.random.Generator) -> None:
    def loss(w: Any, X: Any, y: Any) -> Any:
        Xs = (X - X.mean(axis=0)) / X.std(axis=0)  # (computed from a constant argument)
        p = 1 / (1 + np.exp(-(Xs @ w)))
        return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))

    calls = []
    for _ in range(4):
        X = rng.standard_normal((20, 3))
        calls.append((rng.standard_normal(3), X, (rng.random(20) > 0.5).astype(float)))
    vg = agree(loss, calls, replays=3)
    assert vg.tracer.traces == 1


def test_captured_arrays_mutated_or_rebound(rng: np.random.Generator) -> None:
    state = {"W": rng.standard_normal((3, 3))}
    W = rng.standard_normal((3, 3))

    def f(x: Any) -> Any:
        W2 = W.T * 2.0  # (plain numpy on a captured array: not traced)
        return np.sum(np.tanh(W2 @ x)) + np.sum(state["W"] @ x)

    x = rng.standard_normal(3)
    compiled = rulekit.value_and_grad(f, compile=True)
    for n in range(6):
        want = rulekit.value_and_grad(f)(x)
        _equal(compiled(x), want, f"call {n}")
        if n == 1:
            W[0, 0] += 1.0  # mutated in place
        if n == 2:
            state["W"] = rng.standard_normal((3, 3))  # rebound inside a captured dict
        if n == 3:
            W[...] = rng.standard_normal((3, 3))


GLOBAL_SCALE = 1.0
GLOBAL_W = np.eye(3)


def _uses_globals(x: Any) -> Any:
    return GLOBAL_SCALE * np.sum(np.sin(GLOBAL_W @ x))


def test_rebound_globals(rng: np.random.Generator) -> None:
    global GLOBAL_SCALE, GLOBAL_W
    x = rng.standard_normal(3)
    compiled = rulekit.value_and_grad(_uses_globals, compile=True)
    try:
        for n in range(5):
            _equal(compiled(x), rulekit.value_and_grad(_uses_globals)(x), f"call {n}")
            if n == 1:
                GLOBAL_SCALE = 3.0
            if n == 2:
                GLOBAL_W = rng.standard_normal((3, 3))
    finally:
        GLOBAL_SCALE, GLOBAL_W = 1.0, np.eye(3)


def test_closure_cell_rebound(rng: np.random.Generator) -> None:
    scale = 1.0

    def f(x: Any) -> Any:
        return np.sum(np.sin(x) * scale)

    x = rng.standard_normal(3)
    compiled = rulekit.value_and_grad(f, compile=True)
    for n in range(4):
        _equal(compiled(x), rulekit.value_and_grad(f)(x), f"call {n}")
        scale += 1.0


def test_data_dependent_indices_are_recomputed(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        i = np.argmax(x)
        order = np.argsort(x)
        j = x.argmin()
        return x[i] * 3.0 + np.sum(x[order] * np.arange(x.size)) - x[j] ** 2

    vg = agree(f, [(rng.standard_normal(6),) for _ in range(6)])
    assert vg.tracer.traces == 1  # (indices recomputed by the replay, not guarded)


def test_masks_and_data_dependent_shapes(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        relu = np.where(x > 0, x, 0.1 * x)
        pos = x[x > 0]  # (its length depends on the data: a changed length retraces)
        nz = np.nonzero(x < -0.5)[0]
        return np.sum(relu**2) + np.sum(pos) + np.sum(x[nz] ** 3)

    agree(f, [(rng.standard_normal(8),) for _ in range(8)])


def test_tracked_values_read_by_plain_code(rng: np.random.Generator) -> None:
    table = rng.standard_normal(10)

    def f(x: Any) -> Any:
        k = np.argmax(x)
        n = int(np.sum(x > 0))  # (a count read by Python: a guard)
        c = table[k]  # (plain indexing with a tracked index: a guard on its value)
        mask = np.asarray(x > 0)  # (read as a plain array: a guard on its contents)
        return c * np.sum(x**2) + n * np.sum(x[mask]) + float(np.max(x > 1.0)) * x[0]

    agree(f, [(rng.standard_normal(5),) for _ in range(8)])


def test_in_place_code_out_and_setitem(rng: np.random.Generator) -> None:
    def f(x: Any, y: Any) -> Any:
        z = np.zeros_like(x)
        z[1:] = x[:-1] * y[1:]
        z += np.sin(x)
        np.multiply(z, y, out=z)
        z[0] *= 3.0
        return np.sum(z**2)

    calls = [(rng.standard_normal(5), rng.standard_normal(5)) for _ in range(5)]
    agree(f, calls, argnums=(0, 1))


def test_has_aux_kwargs_and_copy_false(rng: np.random.Generator) -> None:
    def f(x: Any, scale: float = 1.0) -> Any:
        y = np.tanh(x) * scale
        return np.sum(y**2), {"max": np.max(y), "arg": np.argmax(y)}

    compiled = rulekit.value_and_grad(f, has_aux=True, copy=False, compile=True)
    eager = rulekit.value_and_grad(f, has_aux=True)
    for n in range(5):
        x = rng.standard_normal(4)
        scale = 1.0 if n < 3 else 2.0
        (v, aux), g = compiled(x, scale=scale)
        (v2, aux2), g2 = eager(x, scale=scale)
        _equal((v, g, aux["max"], aux["arg"]), (v2, g2, aux2["max"], aux2["arg"]), f"call {n}")


def test_writing_into_a_non_differentiated_argument_is_refused(rng: np.random.Generator) -> None:
    def f(x: Any, buf: Any) -> Any:
        buf[0] = 1.0
        return np.sum(x * buf)

    buf = rng.standard_normal(3)
    before = buf.copy()
    vg = rulekit.value_and_grad(f, compile=True)
    with pytest.raises(rulekit.TracingError, match="non-differentiated argument"):
        vg(rng.standard_normal(3), buf)
    np.testing.assert_array_equal(buf, before)


def test_retrace_on_every_call_warns(rng: np.random.Generator) -> None:
    def f(x: Any, t: float) -> Any:
        return np.sum(np.sin(x * t))

    vg = rulekit.value_and_grad(f, compile=True)
    x = rng.standard_normal(3)
    with pytest.warns(rulekit.RetraceWarning, match="pass a value that changes"):
        for t in np.linspace(0.1, 1.0, 12):
            _equal(vg(x, float(t)), rulekit.value_and_grad(f)(x, float(t)), f"t={t}")


def test_a_steady_replay_does_not_warn(rng: np.random.Generator) -> None:
    vg = rulekit.value_and_grad(lambda x: np.sum(x**2), compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(20):
            vg(rng.standard_normal(3))


def test_side_effects_run_only_while_tracing(rng: np.random.Generator) -> None:
    seen = []

    def f(x: Any) -> Any:
        seen.append(1)
        return np.sum(x**2)

    vg = rulekit.value_and_grad(f, compile=True)
    for _ in range(4):
        vg(rng.standard_normal(3))
    assert len(seen) == 1


def test_an_error_in_a_replay_restores_and_recovers(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        y = x.copy()
        y += 1.0
        return np.sum(np.linalg.cholesky(y @ y.T + np.diag(x[:, 0])))

    vg = rulekit.value_and_grad(f, compile=True)
    good = rng.standard_normal((3, 3)) + 3.0 * np.eye(3)
    vg(good)
    bad = -10.0 * np.ones((3, 3))
    kept = bad.copy()
    with pytest.raises(np.linalg.LinAlgError):
        vg(bad)
    np.testing.assert_array_equal(bad, kept)
    _equal(vg(good), rulekit.value_and_grad(f)(good), "after the error")


def test_compiled_derived_rule_interleaved(rng: np.random.Generator) -> None:
    def g(x: Any) -> Any:
        y = np.sin(x)
        if np.sum(y) > 0:
            return y * 2.0
        return y**2

    rule = rulekit.DerivedRule(g, compile=True)
    fc = rulekit.CoDual(g, rulekit.NoFData())
    xs = [rng.standard_normal(3) + s for s in (2.0, -2.0, 2.0)]
    dxs = [np.zeros(3) for _ in xs]
    outs = [rule(fc, rulekit.CoDual(x, d)) for x, d in zip(xs, dxs, strict=True)]
    for (y, pb), x in zip(reversed(outs), reversed(xs), strict=True):
        np.testing.assert_allclose(y.x, g(x))
        pb(np.ones(3))
    for x, d in zip(xs, dxs, strict=True):
        want = 2.0 * np.cos(x) if np.sum(np.sin(x)) > 0 else 2.0 * np.sin(x) * np.cos(x)
        np.testing.assert_allclose(d, want, rtol=1e-12)


def test_a_plain_temporary_overwritten_between_two_reads(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        buf = np.ones(3)
        y = x * buf
        buf[:] = 2.0 + float(np.sum(np.zeros(1)))  # (plain code writes into it again)
        return np.sum(y * buf)

    agree(f, [(rng.standard_normal(3),) for _ in range(4)])


def test_a_plain_array_filled_from_traced_data(rng: np.random.Generator) -> None:
    def f(x: Any) -> Any:
        buf = np.empty(3)
        np.copyto(buf, x > 0)  # (a tracked mask written into a plain array)
        return np.sum(x * buf)

    agree(f, [(rng.standard_normal(3),) for _ in range(6)])


def test_inputs_that_alias_differently_in_a_writing_trace(rng: np.random.Generator) -> None:
    def f(x: Any, y: Any) -> Any:
        x *= 2.0  # (writes into x: whether y is a view of x changes what follows)
        x += y
        return np.sum(x**2 * y)

    compiled = rulekit.value_and_grad(f, argnums=(0, 1), compile=True)
    eager = rulekit.value_and_grad(f, argnums=(0, 1))
    for n in range(5):
        values = rng.standard_normal(6), rng.standard_normal(6)
        results = []
        for vg in (compiled, eager):  # (the same inputs, built afresh, aliasing included)
            x, other = values[0].copy(), values[1].copy()
            results.append(vg(x, x[::-1] if n % 2 else other))
        _equal(results[0], results[1], f"call {n}")
    assert compiled.tracer.traces == 2  # (one trace per aliasing pattern)


def test_steady_replay_with_constants_allocates_nothing(rng: np.random.Generator) -> None:
    from testutils import count_allocations

    W = rng.standard_normal((4, 4))  # (captured: compared on every call)

    def f(x: Any) -> Any:
        ramp = np.linspace(0.0, 1.0, 4)  # (made inside f: its contents are checked)
        return np.sum(np.tanh(W @ x) * ramp)

    vg = rulekit.value_and_grad(f, compile=True, copy=False)
    x = rng.standard_normal(4)
    for _ in range(3):
        vg(x)
    assert count_allocations(lambda: vg(x)).count == 0
    assert vg.tracer.traces == 1


def test_tracked_numpy_scalars_are_subscriptable(rng: np.random.Generator) -> None:
    def f(x: Any, c: Any) -> Any:
        s = np.std(c)  # (a NumPy scalar computed from a non-differentiated argument)
        buf = np.zeros(2)
        buf[0] = s  # (plain code reads it: a guard)
        return np.sum(np.tanh(x)) * np.sum(s[s > 0]) + s[()] * np.sum(x) + buf[0] * x[0]

    agree(f, [(rng.standard_normal(3), rng.standard_normal(4)) for _ in range(4)])


SCALE = 1.0


class _Model:
    def __init__(self, W: np.ndarray) -> None:
        self.W = W

    def loss(self, x: Any) -> Any:
        return np.sum(np.tanh(self.W @ x))

    def __call__(self, x: Any) -> Any:
        return SCALE * np.sum(np.sin(self.W @ x))


def test_methods_and_callable_objects_replay_and_see_their_attributes(
    rng: np.random.Generator,
) -> None:
    global SCALE
    model = _Model(rng.standard_normal((3, 3)))
    x = rng.standard_normal(3)
    try:
        for fn in (model.loss, model):
            SCALE = 1.0
            compiled = rulekit.value_and_grad(fn, compile=True)
            for n in range(6):
                _equal(compiled(x), rulekit.value_and_grad(fn)(x), f"{fn}, call {n}")
                if n == 2:
                    model.W = rng.standard_normal((3, 3))  # (an attribute rebound)
                if n == 3:
                    SCALE = 2.0  # (a global its __call__ reads)
            assert compiled.tracer.replays >= 3
    finally:
        SCALE = 1.0


@pytest.mark.parametrize("compile", [False, True])
def test_copies_of_a_used_object_start_afresh(compile: bool, rng: np.random.Generator) -> None:
    import copy

    def f(x: Any) -> Any:
        return np.sum(np.sin(x) * 2.0) + np.sum(x[::2] ** 2)

    vg = rulekit.value_and_grad(f, compile=compile, copy=False)
    x = rng.standard_normal(5)
    vg(x)
    vg(x)
    for c in (copy.copy(vg), copy.deepcopy(vg), copy.deepcopy([vg])[0]):
        for n in range(3):
            y = rng.standard_normal(5)
            _equal(c(y), rulekit.value_and_grad(f)(y), f"copy, call {n}")
            _equal(vg(y), rulekit.value_and_grad(f)(y), f"original, call {n}")
