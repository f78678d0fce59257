"""`vjp`, `stop_gradient`, `elementwise_grad`, `grad(has_aux=True)`, and the errors of the
transformations (a TracingError or ValueError, never a wrong value).

References: closed forms, and central differences (double precision) of
⟨ct, f(x)⟩ for a vector-Jacobian product.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules  # noqa: F401  (registers the bundled rules)
from rulekit import Array, TracingError
from testutils._layouts import relayout

SETTINGS = settings(max_examples=10, deadline=None, derandomize=True, database=None)
LAYOUTS = ("C", "F", "negative", "strided")
SHAPES: tuple[tuple[int, ...], ...] = ((), (0,), (4,), (2, 3))
H = 1e-6


def _values(seed: int, shape: tuple[int, ...], dtype: Any = np.float64) -> Any:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.2, 1.2, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1.2, 1.2, shape)
    return np.asarray(x, dtype)


@st.composite
def arrays(draw: Any, dtypes: tuple[Any, ...] = (np.float64,), n: int = 1) -> Any:
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(st.sampled_from(SHAPES))
    out = [
        relayout(_values(draw(st.integers(0, 2**16)), shape, dtype), draw(st.sampled_from(LAYOUTS)))
        for _ in range(n)
    ]
    return out[0] if n == 1 else tuple(out)


def fd_vjp(f: Callable[..., Any], args: tuple[Any, ...], argnum: int, ct: Any) -> Any:
    """∂/∂args[argnum] of Re⟨ct, f(args)⟩ by central differences (a complex argument:
    ∂/∂Re + i·∂/∂Im, the engine's convention)."""
    x = np.asarray(args[argnum])
    g = np.zeros(x.shape, np.complex128 if np.iscomplexobj(x) else np.float64)
    units = (1.0, 1j) if np.iscomplexobj(x) else (1.0,)
    for k in np.ndindex(x.shape):
        for u in units:
            vals = []
            for s in (H, -H):
                a = list(args)
                xp = x.astype(g.dtype)
                xp[k] += s * u
                a[argnum] = xp
                vals.append(np.sum(np.real(np.conj(ct) * f(*a))))
            g[k] += u * (vals[0] - vals[1]) / (2 * H)
    return g


def close(got: Any, want: Any, rtol: float = 1e-6) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"shape {g.shape}, reference {w.shape}"
    np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * (1 + np.max(np.abs(w), initial=0)))


def f2(x: Any, y: Any) -> Any:
    return np.sin(x) * y + np.exp(0.5 * x * y)


# -- vjp ------------------------------------------------------------------------------------


@SETTINGS
@given(arrays(dtypes=(np.float64, np.complex128), n=2), st.integers(0, 99))
def test_vjp_vs_differences_and_reuse(xy: Any, seed: int) -> None:
    x, y = xy
    out, vjp_fn = rulekit.vjp(f2, x, y)
    np.testing.assert_allclose(out, f2(x, y), rtol=1e-14)
    c1, c2 = _values(seed, np.shape(out), out.dtype), _values(seed + 1, np.shape(out), out.dtype)
    r1, r2 = vjp_fn(c1), vjp_fn(c2)
    assert len(r1) == 2
    for i in (0, 1):
        close(r1[i], fd_vjp(f2, (x, y), i, c1))
        close(r2[i], fd_vjp(f2, (x, y), i, c2))
    # linear in the cotangent, and the same answer on a repeated call
    r12 = vjp_fn(2.0 * c1 - 3.0 * c2)
    for i in (0, 1):
        close(r12[i], 2.0 * r1[i] - 3.0 * r2[i], 1e-12)
        np.testing.assert_array_equal(vjp_fn(c1)[i], r1[i])


def test_vjp_of_a_tuple_output_and_has_aux() -> None:
    x = _values(1, (3,))

    def f(x: Any) -> Any:
        return (np.sin(x), np.sum(x**2)), {"n": 7, "y": np.cos(x)}

    (a, b), vjp_fn, aux = rulekit.vjp(f, x, has_aux=True)
    close(a, np.sin(x), 1e-15)
    close(b, np.sum(x**2), 1e-15)
    assert aux["n"] == 7 and type(aux["y"]) is np.ndarray
    np.testing.assert_allclose(aux["y"], np.cos(x))
    (gx,) = vjp_fn((np.ones(3), 2.0))
    close(gx, np.cos(x) + 4 * x, 1e-12)
    (gx,) = vjp_fn((np.zeros(3), 1.0))
    close(gx, 2 * x, 1e-12)


def test_vjp_fn_inside_grad_and_jvp_reused() -> None:
    """A vjp started inside another transformation (nested), its vjp_fn called twice:
    v(x) = ⟨u, J(x)ᵀ w₁⟩ + ⟨u, J(x)ᵀ w₂⟩ with f = sin(x)·x, Jᵀw = w·(x cos x + sin x)."""
    x, u, w1, w2 = _values(2, (4,)), _values(3, (4,)), _values(4, (4,)), _values(5, (4,))

    def v(x: Any) -> Any:
        _, fn = rulekit.vjp(lambda t: np.sin(t) * t, x)
        return np.sum(u * fn(w1)[0]) + np.sum(u * fn(w2)[0])

    d = -x * np.sin(x) + 2 * np.cos(x)  # d/dx (x cos x + sin x)
    want = u * (w1 + w2) * d
    close(rulekit.grad(v)(x), want, 1e-12)
    t = _values(6, (4,))
    close(rulekit.jvp(v, (x,), (t,))[1], np.sum(want * t), 1e-12)

    # linearity of a nested vjp_fn in its cotangent
    def lin(x: Any) -> Any:
        _, fn = rulekit.vjp(lambda t: np.sin(t) * t, x)
        return np.sum(u * (fn(w1 + w2)[0] - fn(w1)[0] - fn(w2)[0]))

    close(rulekit.grad(lin)(x), np.zeros(4), 1e-12)


def test_vjp_of_a_random_function_refuses_its_pullback() -> None:
    rng = np.random.default_rng(0)

    def noisy(x: Any) -> Any:
        return x * rng.uniform(size=np.shape(x))

    _, vjp_fn = rulekit.vjp(noisy, np.ones(3))
    with pytest.raises(TracingError, match="different value"):
        vjp_fn(np.ones(3))

    def legacy_noisy(x: Any) -> Any:
        return np.sin(x) + np.random.rand(*np.shape(x))

    _, vjp_fn = rulekit.vjp(legacy_noisy, np.ones(2))
    with pytest.raises(TracingError):
        vjp_fn(np.ones(2))


def test_vjp_fn_rejects_a_cotangent_of_the_wrong_shape_when_nested() -> None:
    def g(x: Any) -> Any:
        _, fn = rulekit.vjp(np.sin, x)
        return np.sum(fn(np.ones(2))[0])

    with pytest.raises(ValueError, match="shape"):
        rulekit.grad(g)(np.ones(3))


# -- stop_gradient ----------------------------------------------------------------------------


def test_stop_gradient_value_is_a_copy() -> None:
    x = np.array([1.0, 2.0])
    y = rulekit.stop_gradient(x)
    assert y is not x and not np.shares_memory(x, y)
    x[0] = 5.0
    np.testing.assert_array_equal(y, [1.0, 2.0])
    assert rulekit.stop_gradient(3.0) == 3.0
    d = rulekit.stop_gradient({"a": x, "b": (x, 1)})
    np.testing.assert_array_equal(d["a"], x)
    assert d["b"][1] == 1


@pytest.mark.parametrize("s", [0.3, -0.0, np.float32(0.3), np.float64(-2.5), 0.5 - 1.5j])
def test_stop_gradient_of_a_traced_scalar(s: Any) -> None:
    """A traced Python or NumPy scalar: its value (sign of −0.0 and dtype kept), no
    derivative, in the reverse engine (where `+s` of a Python float is s itself) and
    nested. d/ds [s·stop(s)] = s (conj for the complex gradient convention)."""
    stopped: list[Any] = []

    def f(s: Any) -> Any:
        t = rulekit.stop_gradient(s)
        stopped.append(t)
        return np.real(s * t)

    grad = rulekit.grad(f)
    for _ in range(2):  # (and on a second call of one object)
        assert grad(s) == pytest.approx(np.conj(s) if isinstance(s, complex) else s)
        t = stopped.pop()
        assert type(t) is type(s) and np.signbit(np.real(t)) == np.signbit(np.real(s))
    if not isinstance(s, complex):
        assert rulekit.hessian(lambda s: s**2 * rulekit.stop_gradient(s))(s) == pytest.approx(2 * s)


def test_stop_gradient_blocks_every_level() -> None:
    x = np.array([0.5, -1.5, 2.0])

    def f(x: Any) -> Any:  # x²·s(x): with s constant, ∇ = 2x·x, ∇² = diag(2x)
        return np.sum(x**2 * rulekit.stop_gradient(x))

    close(rulekit.grad(f)(x), 2 * x * x, 1e-14)
    v = _values(7, (3,))
    close(rulekit.jvp(f, (x,), (v,))[1], np.sum(2 * x * x * v), 1e-14)
    close(rulekit.jvp(lambda x: x * rulekit.stop_gradient(x), (x,), (v,))[1], v * x, 1e-14)
    for mode in ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward"):
        close(rulekit.hessian(f, mode=mode)(x), np.diag(2 * x), 1e-14)
    close(rulekit.grad(lambda x: np.sum(rulekit.stop_gradient(np.sin(x))))(x), np.zeros(3), 0)

    def outer(x: Any) -> Any:  # the stopped value also has no derivative for the outer level
        inner = rulekit.grad(lambda y: np.sum(rulekit.stop_gradient(x * y) * y))(x)
        return np.sum(inner)  # = Σ x·x, but stopped: derivative 0

    close(rulekit.grad(outer)(x), np.zeros(3), 0)
    close(rulekit.jvp(outer, (x,), (v,))[1], 0.0, 0)


# -- elementwise_grad, grad(has_aux) ---------------------------------------------------------


@SETTINGS
@given(arrays())
def test_elementwise_grad(x: Any) -> None:
    close(rulekit.elementwise_grad(np.tanh)(x), 1 - np.tanh(x) ** 2, 1e-13)
    close(rulekit.elementwise_grad(lambda t: np.sin(t) * t**2)(x),
          np.cos(x) * x**2 + 2 * x * np.sin(x), 1e-13)  # fmt: skip
    close(rulekit.elementwise_grad(lambda a, b: a * np.exp(b), argnum=1)(x, x),
          x * np.exp(x), 1e-13)  # fmt: skip


def test_elementwise_grad_of_elementwise_grad() -> None:
    x = _values(8, (5,))
    close(rulekit.elementwise_grad(rulekit.elementwise_grad(np.sin))(x), -np.sin(x), 1e-13)


def test_grad_has_aux() -> None:
    x = _values(9, (3,))

    def f(x: Any) -> Any:
        loss = np.sum(x**3)
        return loss, {"loss": loss, "k": 2}

    g, aux = rulekit.grad(f, has_aux=True)(x)
    close(g, 3 * x**2, 1e-14)
    assert aux["k"] == 2 and np.isclose(aux["loss"], np.sum(x**3))

    def outer(x: Any) -> Any:  # has_aux inside another transformation
        g, aux = rulekit.grad(f, has_aux=True)(x)
        assert aux["k"] == 2
        return np.sum(g)

    close(rulekit.grad(outer)(x), 6 * x, 1e-14)
    (g1, g2), aux = rulekit.grad(lambda a, b: (np.sum(a * b), b), argnums=(0, 1),
                                 has_aux=True)(x, 2 * x)  # fmt: skip
    close(g1, 2 * x, 0)
    close(g2, x, 0)
    np.testing.assert_array_equal(aux, 2 * x)


# -- errors -----------------------------------------------------------------------------------


def _reverse_only(x: Any) -> Any:
    return np.sum(np.sin(x) ** 2)


reverse_only = rulekit.primitive(_reverse_only)


def test_a_function_without_a_forward_rule_is_named(registrations: None) -> None:
    x = _values(10, (3,))
    rulekit.registry.add("rrule", reverse_only, (Array[np.float64, 1],),
                         rulekit.build_rrule(_reverse_only, x))  # fmt: skip
    close(rulekit.grad(reverse_only)(x), np.sin(2 * x), 1e-12)  # reverse mode works
    with pytest.raises(TracingError, match=r"_reverse_only.*no forward rule"):
        rulekit.jvp(reverse_only, (x,), (np.ones(3),))
    with pytest.raises(TracingError, match=r"_reverse_only.*no forward rule"):
        rulekit.jacfwd(reverse_only)(x)
    with pytest.raises(TracingError, match=r"_reverse_only.*no differentiable pullback"):
        rulekit.grad(lambda x: np.sum(rulekit.grad(reverse_only)(x) ** 2))(x)
    with pytest.raises(TracingError, match="_reverse_only"):
        rulekit.hessian(reverse_only)(x)


def _plain_buffer(x: Any) -> Any:
    return np.sin(x)


plain_buffer = rulekit.primitive(_plain_buffer)


def _plain_buffer_vjp(active: Any, x: Any) -> Any:
    def pullback(g: Any) -> Any:
        z = np.zeros(np.shape(x))  # (a plain array: a traced ȳ cannot be written into it)
        z[...] = g * np.cos(x)
        return (z,)

    return np.sin(x), pullback


def test_a_pullback_that_cannot_be_differentiated_again_is_named(registrations: None) -> None:
    """A differentiable pullback that works on plain values but not on traced ones (it writes
    into a plain buffer): the error names the function and its pullback."""
    x = _values(12, (3,))
    rulekit.registry.add("rrule", plain_buffer, (Array[np.float64, 1],),
                         rulekit.build_rrule(_plain_buffer, x))  # fmt: skip
    rulekit.vjp_registry.add("vjp", plain_buffer, (Array[np.float64, 1],), _plain_buffer_vjp)
    close(rulekit.vjp(plain_buffer, x)[1](np.ones(3))[0], np.cos(x), 1e-12)  # (plain: works)
    for mode in ("forward-over-reverse", "reverse-over-reverse"):
        with pytest.raises(
            TracingError, match=r"pullback of .*_plain_buffer.*differentiated again"
        ):
            rulekit.hessian(lambda x: np.sum(plain_buffer(x) ** 2), mode=mode)(x)


def test_a_value_of_a_finished_transformation_is_refused() -> None:
    x, v = _values(11, (3,)), np.ones(3)
    kept: list[Any] = []

    def leaky(x: Any) -> Any:
        y = np.sin(x)
        kept.append(y)
        return y

    rulekit.jvp(leaky, (x,), (v,))
    with pytest.raises(TracingError, match="returned"):
        np.cos(kept[-1])
    with pytest.raises(TracingError):
        kept[-1] + 1.0

    def outer(x: Any) -> Any:
        rulekit.grad(lambda y: np.sum(leaky(y * x)))(x)  # the inner (nested) grad finishes
        return np.sum(kept[-1] * x)

    with pytest.raises(TracingError, match="returned"):
        rulekit.grad(outer)(x)
    with pytest.raises(TracingError, match="returned"):
        rulekit.jvp(outer, (x,), (v,))


def test_an_inner_value_written_into_an_outer_array_is_refused() -> None:
    x, v = _values(12, (3,)), np.ones(3)

    def outer(x: Any) -> Any:
        buf = x * 1.0  # traced by the outer transformation

        def inner(y: Any) -> Any:
            buf[0] = y[0] * 2.0  # an inner-level value into an outer-level array
            return np.sum(y * y)

        rulekit.grad(inner)(x)
        return np.sum(buf)

    with pytest.raises(TracingError, match="inner transformation"):
        rulekit.jvp(outer, (x,), (v,))
    with pytest.raises(TracingError):
        rulekit.grad(outer)(x)
    with pytest.raises(TracingError):
        rulekit.hessian(outer)(x)


def test_nested_reverse_refuses_writes_into_arguments_and_views() -> None:
    x = _values(13, (4,))

    def into_argument(x: Any) -> Any:
        x[0] = 2.0
        return np.sum(x**3)

    def into_a_view(x: Any) -> Any:
        y = x * 1.0
        v = y[1:]
        v[0] = 3.0  # numpy would change y too; the nested reverse mode refuses
        return np.sum(y**3)

    def into_an_array_with_views(x: Any) -> Any:
        y = x * 1.0
        v = y[1:]
        y[1] = 3.0
        return np.sum(v**3)

    for f in (into_argument, into_a_view, into_an_array_with_views):
        for transform in (
            lambda f: rulekit.hessian(f, mode="reverse-over-reverse"),
            lambda f: rulekit.jacrev(rulekit.grad(f)),
            lambda f: rulekit.grad(lambda x: np.sum(rulekit.grad(f)(x))),
        ):
            with pytest.raises(TracingError, match="in-place write"):
                transform(f)(x.copy())


def test_forward_mode_writes_into_views_are_right() -> None:
    """The same writes are fine in forward mode: the tangent follows the primal."""
    x, v = _values(14, (4,)), _values(15, (4,))

    def into_a_view(x: Any) -> Any:
        y = x * 1.0
        w = y[1:]
        w[0] = x[0] ** 2
        return y**3

    y = x.copy()
    y[1] = x[0] ** 2
    dy = v.copy()  # d(y³) = 3y²·dy, with dy[1] = 2x₀v₀
    dy[1] = 2 * x[0] * v[0]
    close(rulekit.jvp(into_a_view, (x,), (v,))[1], 3 * y**2 * dy, 1e-12)


def test_jvp_tangent_shape_mismatch_of_a_scalar_primal() -> None:
    with pytest.raises(ValueError, match="shape"):
        rulekit.jvp(np.sin, (1.0,), (np.ones(2),))


def test_jvp_refuses_tangents_it_cannot_honour() -> None:
    """A complex tangent of a real primal (its imaginary part would be lost) and a nonzero
    tangent of an integer primal (no derivative) raise; None or zeros for an int are fine."""
    x = _values(16, (3,))
    with pytest.raises(TypeError, match="complex tangent"):
        rulekit.jvp(np.sin, (x,), (np.ones(3) + 1j,))
    with pytest.raises(TypeError, match="nonzero tangent"):
        rulekit.jvp(lambda x, n: x * n, (x, 3), (np.ones(3), 1.0))
    for t in (None, 0, np.zeros(())):
        _, ydot = rulekit.jvp(lambda x, n: x * n, (x, 3), (np.ones(3), t))
        close(ydot, 3 * np.ones(3), 0)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("n", [1, 3])
def test_jvp_writes_through_a_reversed_view_of_an_argument(layout: str, n: int) -> None:
    """`r = x[::-1]; r += x` on every layout (a length-1 axis's stride does not matter:
    the fuzzer found the write refused for a 1-element negative-stride argument)."""
    x = relayout(_values(17, (n,), np.complex128), layout)
    v = _values(18, (n,), np.complex128)

    def f(x: Any) -> Any:
        r = x[::-1]
        r += x
        return np.sum(np.real(r) * np.arange(1.0, n + 1))

    _, ydot = rulekit.jvp(f, (x.copy(),), (v,))
    close(ydot, np.sum(np.real(v[::-1] + v) * np.arange(1.0, n + 1)), 1e-12)


@pytest.mark.parametrize("how", ["jacfwd", "jvp"])
def test_aux_keeps_the_derivatives_of_enclosing_levels(how: str) -> None:
    """has_aux strips its own level's tangents from aux only: an enclosing grad still
    differentiates through aux (d/dx Σ x² = 2x)."""
    x = _values(19, (3,))

    def f(x: Any) -> Any:
        return np.sin(x), {"y": x**2, "n": 3}

    def outer(x: Any) -> Any:
        if how == "jacfwd":
            _, aux = rulekit.jacfwd(f, has_aux=True)(x)
        else:
            _, _, aux = rulekit.jvp(f, (x,), (np.ones(3),), has_aux=True)
        assert aux["n"] == 3
        return np.sum(aux["y"])

    close(rulekit.grad(outer)(x), 2 * x, 1e-14)
    _, aux = rulekit.jacfwd(f, has_aux=True)(x)
    assert type(aux["y"]) is np.ndarray


@pytest.mark.parametrize("layout", LAYOUTS)
def test_vjp_fn_is_reusable_on_every_layout(layout: str) -> None:
    """vjp_fn reruns the function on kept copies: in another layout than the caller's, its
    last bits may differ (SIMD and strided loops round differently); that is no error."""
    a = relayout(_values(20, (2, 5)), layout)
    b = relayout(_values(21, (2, 5)), layout)
    _, vjp_fn = rulekit.vjp(lambda a, b: a * np.exp(b) + np.tanh(a), a, b)
    for k in range(3):
        ct = _values(22 + k, (2, 5))
        ga, gb = vjp_fn(ct)
        close(ga, ct * (np.exp(b) + 1 - np.tanh(a) ** 2), 1e-12)
        close(gb, ct * a * np.exp(b), 1e-12)


def test_a_keyword_with_a_tangent_reaches_only_rules_that_take_it() -> None:
    """A traced keyword goes to a forward rule that binds keywords (`keyword_tangents`:
    polyfit's w=); any other rule refuses it before running, naming the fix."""
    x, p = _values(30, (5,)), _values(31, (1,))
    with pytest.raises(TracingError, match="positionally"):
        rulekit.jvp(lambda x, p: np.diff(x, prepend=p), (x, p), (np.ones(5), np.ones(1)))
    _, t = rulekit.jvp(lambda x, p: np.diff(x, 1, -1, p), (x, p), (np.ones(5), np.ones(1)))
    close(t, np.zeros(5), 0)
    xs, ys = np.linspace(0.0, 1.0, 6), np.sin(np.linspace(0.0, 1.0, 6))
    w, dw = 1 + 0.1 * xs, _values(32, (6,))

    def fit(w: Any) -> Any:
        return np.polyfit(xs, ys, 2, w=w)

    _, t = rulekit.jvp(fit, (w,), (dw,))
    close(t, (fit(w + H * dw) - fit(w - H * dw)) / (2 * H), 1e-6)


def test_vjp_fn_differentiates_at_the_arguments_f_was_given() -> None:
    """f writes into its argument (x ← |x|): vjp_fn reruns f on copies taken before the
    first run, not on the overwritten x (whose rerun gives the same value, so a check of
    the value alone would not notice the gradient of |x| taken at |x|)."""

    def f(x: Any) -> Any:
        x[...] = np.abs(x)
        return np.sum(x**3)

    x = np.array([-1.0, 2.0, -0.5])
    _, vjp_fn = rulekit.vjp(f, x.copy())
    close(vjp_fn(1.0)[0], 3 * x * np.abs(x), 1e-15)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_vjp_fn_reruns_in_the_arguments_layouts(layout: str) -> None:
    """A reshape is a view of a C-ordered array and a copy of another: vjp_fn's rerun sees
    the arguments in their own layouts, so the write below shows through r (or not) as in
    the first run."""

    def f(x: Any) -> Any:
        r = np.reshape(x, (-1,))
        x *= 2.0
        return np.sum(r**2)

    x = relayout(_values(33, (2, 3)), layout)
    want = f(relayout(x.copy(), layout))  # (numpy itself, on the same layout)
    out, vjp_fn = rulekit.vjp(f, relayout(x.copy(), layout))
    close(out, want, 1e-15)
    scale = 4.0 if np.isclose(want, 4 * np.sum(x**2)) else 1.0  # r saw the doubling, or not
    close(vjp_fn(1.0)[0], 2 * scale * x, 1e-14)


def _fd_jacobian(f: Callable[..., Any], args: tuple[Any, ...], k: int) -> Any:
    """∂f/∂args[k] by central differences: shape f.shape + args[k].shape."""
    x = np.asarray(args[k], np.float64)
    cols = []
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = H
        a, b = list(args), list(args)
        a[k], b[k] = x + e, x - e
        cols.append((np.asarray(f(*a)) - np.asarray(f(*b))) / (2 * H))
    out = np.shape(f(*args))
    return np.moveaxis(np.array(cols).reshape(x.shape + out), range(x.ndim), range(-x.ndim, 0))


@pytest.mark.parametrize("how", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1,)])
def test_jacobians_of_pytree_outputs(how: str, argnums: Any) -> None:
    """JAX's structure: the output's pytree, each leaf replaced by its Jacobian (a tuple over
    `argnums` when it is a tuple), of shape leaf.shape + argument.shape; an int leaf gets
    zeros."""
    x, m = _values(40, (3,)), _values(41, (2, 2))

    def f(x: Any, m: Any) -> Any:
        return (np.sin(x), {"a": m @ m, "b": np.sum(x) * m, "n": 3})

    jac = getattr(rulekit, how)(f, argnums=argnums)(x, m)
    nums = (argnums,) if isinstance(argnums, int) else argnums
    leaves = {"s": lambda x, m: f(x, m)[0], "a": lambda x, m: f(x, m)[1]["a"],
              "b": lambda x, m: f(x, m)[1]["b"]}  # fmt: skip
    got = {"s": jac[0], "a": jac[1]["a"], "b": jac[1]["b"]}
    for name, g in leaves.items():
        per_arg = got[name] if isinstance(argnums, tuple) else (got[name],)
        assert isinstance(per_arg, tuple) and len(per_arg) == len(nums)
        for k, j in zip(nums, per_arg, strict=True):
            close(j, _fd_jacobian(g, (x, m), k), 1e-7)
    n = jac[1]["n"]
    for k, z in zip(nums, n if isinstance(argnums, tuple) else (n,), strict=True):
        assert np.shape(z) == np.shape((x, m)[k]) and not np.any(z)


def test_hessian_with_a_tuple_of_argnums_is_a_tuple_of_tuples() -> None:
    """H[i][j] = ∂²f/∂xᵢ∂xⱼ, of shape xᵢ.shape + xⱼ.shape (JAX's `hessian`)."""
    x, m = _values(42, (3,)), _values(43, (2, 2))

    def f(x: Any, m: Any) -> Any:
        return np.sum(np.tanh(m @ np.ones(2))) * np.sum(x**2) + np.sum(m**3) * x[0]

    for mode in ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward"):
        h = rulekit.hessian(f, argnums=(0, 1), mode=mode)(x, m)
        assert isinstance(h, tuple) and all(isinstance(r, tuple) and len(r) == 2 for r in h)
        for i in range(2):
            gi = rulekit.grad(f, argnums=i)
            for j in range(2):
                close(h[i][j], _fd_jacobian(gi, (x, m), j), 1e-6)
