"""Higher order: `hessian` (all modes), `hvp` (all modes), `grad(grad(f))`, `jacrev(grad(f))`,
`jacfwd(grad(f))`, third derivatives, and perturbation confusion.

References are independent of the nested machinery: closed forms, or central
differences (double precision, h = 1e-5) of the *outermost* gradient
`rulekit.grad(f)` — the reverse engine, checked against finite differences of
`f` itself by the rest of the suite:

    H[..., k] ≈ (∇f(x + h·e_k) − ∇f(x − h·e_k)) / 2h,    Hv ≈ (∇f(x + h·v) − ∇f(x − h·v)) / 2h.

Tolerance: |got − fd| ≤ 1e-6·(1 + max|fd|) (float64 only: second derivatives by
differences of float32 gradients carry no useful digits).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules  # noqa: F401  (registers the bundled rules)
from testutils._layouts import relayout

SETTINGS = settings(max_examples=8, deadline=None, derandomize=True, database=None)
MODES = ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward")
LAYOUTS = ("C", "F", "negative", "strided")
SHAPES: tuple[tuple[int, ...], ...] = ((), (0,), (3,), (2, 2))
H = 1e-5
RTOL = 1e-6


def _values(seed: int, shape: tuple[int, ...], low: float = -1.2, high: float = 1.2) -> Any:
    return np.random.default_rng(seed).uniform(low, high, shape)


@st.composite
def arrays(draw: Any, shapes: tuple[tuple[int, ...], ...] = SHAPES, n: int = 1) -> Any:
    """`n` float64 arrays of one shape, each in its own memory layout."""
    shape = draw(st.sampled_from(shapes))
    out = [
        relayout(_values(draw(st.integers(0, 2**16)), shape), draw(st.sampled_from(LAYOUTS)))
        for _ in range(n)
    ]
    return out[0] if n == 1 else tuple(out)


def assert_close(got: Any, want: Any, what: str = "", rtol: float = RTOL) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), what
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"{what}[{i}]", rtol)
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape}, reference {w.shape}"
    np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * (1 + np.max(np.abs(w), initial=0)),
                               err_msg=what)  # fmt: skip


def fd_derivative(g: Callable[..., Any], args: tuple[Any, ...], argnum: int,
                  direction: Any = None) -> Any:  # fmt: skip
    """Central differences of `g` (any array output) w.r.t. args[argnum]: along `direction`,
    or the full Jacobian (shape out.shape + in.shape) when direction is None."""

    def along(t: Any) -> Any:
        a = list(args)
        a[argnum] = args[argnum] + H * t
        yp = np.asarray(g(*a))
        a[argnum] = args[argnum] - H * t
        return (yp - np.asarray(g(*a))) / (2 * H)

    if direction is not None:
        return along(direction)
    x = np.asarray(args[argnum], np.float64)
    out = np.asarray(g(*args))
    jac = np.zeros(out.shape + x.shape)
    for k in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[k] = 1.0
        jac[(..., *k)] = along(e)
    return jac


def fd_hessian(f: Callable[..., Any], x: Any) -> Any:
    """Differences of the outermost (reverse-engine) gradient."""
    return fd_derivative(rulekit.grad(f), (x,), 0)


# -- scalar test functions ------------------------------------------------------------------


def scalar_fn(x: Any) -> Any:
    """Elementwise, coupled through a sum, and (for vectors) through products of neighbours."""
    s = np.sum(np.sin(x) * x**2) + 0.25 * np.sum(x * x) ** 2
    if np.ndim(x) >= 1 and np.shape(x)[0] > 1:
        s = s + np.sum(np.exp(0.3 * x[:-1] * x[1:]))
    return s


def quad_tanh(A: Any, x: Any) -> Any:
    return np.sum(np.tanh(A @ x)) + x @ (A.T @ A) @ x / 4


A0 = np.array([[0.8, -0.3, 0.5], [0.1, 0.9, -0.4], [0.2, 0.4, 0.6]])


# -- hessian --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@SETTINGS
@given(data=st.data())
def test_hessian_vs_differences_of_the_gradient(mode: str, data: Any) -> None:
    x = data.draw(arrays(SHAPES))
    Hm = rulekit.hessian(scalar_fn, mode=mode)(x)
    assert Hm.shape == x.shape + x.shape
    assert_close(Hm, fd_hessian(scalar_fn, x), mode)


@pytest.mark.parametrize("mode", MODES)
def test_hessian_closed_form_and_symmetry(mode: str) -> None:
    x = relayout(_values(3, (3,)), "negative")
    Hm = rulekit.hessian(quad_tanh, argnums=1, mode=mode)(A0, x)
    t = np.tanh(A0 @ x)
    want = A0.T @ np.diag(-2 * t * (1 - t**2)) @ A0 + (A0.T @ A0) / 2
    assert_close(Hm, want, mode, rtol=1e-12)
    np.testing.assert_allclose(Hm, Hm.T, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", MODES)
def test_hessian_of_a_matrix_argument(mode: str) -> None:
    x = np.array([0.3, -0.7, 1.1])

    def f(A: Any) -> Any:
        return np.sum(np.sin(A @ x) ** 2)

    Hm = rulekit.hessian(f, mode=mode)(relayout(A0, "F"))
    assert Hm.shape == (3, 3, 3, 3)
    assert_close(Hm, fd_hessian(f, A0), mode)


def _flat_fd_hessian(f: Any, leaves: list[Any], rebuild: Any) -> Any:
    """Differences of the reverse engine's gradient of f(rebuild(leaves)) in the leaves laid
    end to end: (n, n)."""
    sizes = [np.size(a) for a in leaves]
    flat = np.concatenate([np.ravel(a) for a in leaves])

    def unflat(v: Any) -> Any:
        parts = np.split(v, np.cumsum(sizes)[:-1])
        return rebuild([np.reshape(q, np.shape(a)) for q, a in zip(parts, leaves, strict=True)])

    return fd_hessian(lambda v: f(unflat(v)), flat)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("how", ["jacfwd", "jacrev", *MODES])
def test_pytree_arguments(how: str, layout: str) -> None:
    """A dict (or tuple) argument, as JAX takes parameters: the Jacobian is the argument's
    structure holding out.shape + leaf.shape; the Hessian a nested structure H[a][b];
    every block against differences of the gradient, on three calls of one object."""
    w, b = relayout(_values(20, (2, 3)), layout), np.array(0.3)
    params = {"w": w, "b": b}
    x = np.array([0.5, -1.0, 2.0])

    def f(p: Any) -> Any:
        return np.sum(np.tanh(p["w"] @ x + p["b"]) ** 2) + p["b"] ** 3 * 4

    def rebuild(leaves: list[Any]) -> Any:
        return {"w": leaves[0], "b": leaves[1]}

    with pytest.raises(TypeError, match=r"argument 0 of .* holds a int of dtype int64"):
        (rulekit.hessian(f, mode=how) if how in MODES else getattr(rulekit, how)(f))(
            {**params, "n": 4}  # (an int leaf: as grad and JAX, refused; pass it outside)
        )
    ref = _flat_fd_hessian(f, [w, b], rebuild)
    if how in ("jacfwd", "jacrev"):
        jac = getattr(rulekit, how)(lambda p: np.tanh(p["w"] @ x * p["b"]))
        for _ in range(3):
            J = jac(params)
            assert set(J) == {"w", "b"} and J["w"].shape == (2, 2, 3) and J["b"].shape == (2,)
            t = np.tanh(w @ x * b)
            np.testing.assert_allclose(J["b"], (1 - t**2) * (w @ x), rtol=1e-12)
        return
    hess = rulekit.hessian(f, mode=how)
    for _ in range(3):
        Hm = hess(params)
        full = np.block([[np.reshape(Hm[r][c], (np.size(params[r]), np.size(params[c])))
                          for c in ("w", "b")] for r in ("w", "b")])  # fmt: skip
        assert Hm["w"]["w"].shape == (2, 3, 2, 3) and Hm["w"]["b"].shape == (2, 3)
        assert_close(full, ref, how)


def test_tuple_argument_hessian_is_a_tuple_of_tuples() -> None:
    t = (np.array([1.0, 2.0]), np.array([0.5, -1.5]))
    Hm = rulekit.hessian(lambda t: np.sum(t[0] * t[1] ** 2))(t)
    np.testing.assert_array_equal(Hm[0][0], np.zeros((2, 2)))
    np.testing.assert_array_equal(Hm[0][1], np.diag(2 * t[1]))
    np.testing.assert_array_equal(Hm[1][0], np.diag(2 * t[1]))
    np.testing.assert_array_equal(Hm[1][1], np.diag(2 * t[0]))


# -- hvp ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@SETTINGS
@given(data=st.data())
def test_hvp_vs_hessian_times_v(mode: str, data: Any) -> None:
    x, v = data.draw(arrays(SHAPES, n=2))
    g, hv = rulekit.hvp(scalar_fn, (x,), (v,), mode=mode)
    assert_close(g, rulekit.grad(scalar_fn)(x), "gradient", rtol=1e-12)
    Hfd = fd_hessian(scalar_fn, x)
    want = np.tensordot(Hfd, v, axes=v.ndim) if v.ndim else Hfd * v
    assert_close(hv, want, mode)


@pytest.mark.parametrize("mode", MODES)
def test_hvp_several_primals(mode: str) -> None:
    x, vx, vA = _values(5, (3,)), _values(6, (3,)), _values(7, (3, 3))
    g, hv = rulekit.hvp(quad_tanh, (A0, x), (vA, vx), mode=mode)
    gA, gx = rulekit.grad(quad_tanh, argnums=(0, 1))(A0, x)
    assert_close(g, (gA, gx), "gradient", rtol=1e-12)

    def grads_along(t: float) -> Any:
        return rulekit.grad(quad_tanh, argnums=(0, 1))(A0 + t * vA, x + t * vx)

    plus, minus = grads_along(H), grads_along(-H)
    want = tuple((p - m) / (2 * H) for p, m in zip(plus, minus, strict=True))
    assert_close(hv, want, mode)


def test_hvp_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        rulekit.hvp(scalar_fn, (np.ones(2),), (np.ones(2),), mode="sideways")
    with pytest.raises(ValueError, match="mode"):
        rulekit.hessian(scalar_fn, mode="sideways")


# -- nested grad / jacobians of gradients ------------------------------------------------


def test_grad_of_grad_scalar_closed_form() -> None:
    def f(t: Any) -> Any:
        return t**3 * np.sin(t)

    def d2(t: float) -> float:
        return 6 * t * np.sin(t) + 6 * t**2 * np.cos(t) - t**3 * np.sin(t)

    def d3(t: float) -> float:
        return 6 * np.sin(t) + 18 * t * np.cos(t) - 9 * t**2 * np.sin(t) - t**3 * np.cos(t)

    for t in (1.3, -0.4, np.float64(2.2), np.array(0.7)):
        assert np.isclose(rulekit.grad(rulekit.grad(f))(t), d2(float(t)), rtol=1e-12)
        assert np.isclose(rulekit.grad(rulekit.grad(rulekit.grad(f)))(t), d3(float(t)),
                          rtol=1e-12)  # fmt: skip


def test_third_order_of_a_vector_function() -> None:
    x = np.array([0.4, -0.9, 1.3])

    def f(t: Any) -> Any:
        return np.sum(np.exp(x * t) * np.sin(t))

    def d(g: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return rulekit.grad(lambda u: np.sum(g(u)))

    t = 0.6
    # f(t) = Σ e^{x t} sin t:  f''' = Σ e^{xt} [(x³ − 3x) sin t + (3x² − 1) cos t]
    want = np.sum(np.exp(x * t) * ((x**3 - 3 * x) * np.sin(t) + (3 * x**2 - 1) * np.cos(t)))
    got = d(d(d(f)))(np.array([t]))
    assert got.shape == (1,)
    assert np.isclose(got[0], want, rtol=1e-11)
    g3 = rulekit.grad(rulekit.grad(rulekit.grad(lambda t: np.sum(np.sin(x * t)))))
    assert np.isclose(g3(t), np.sum(-(x**3) * np.cos(x * t)), rtol=1e-12)


@pytest.mark.parametrize("how", ["jacrev", "jacfwd"])
@SETTINGS
@given(x=arrays())
def test_jacobian_of_grad(how: str, x: Any) -> None:
    Hm = getattr(rulekit, how)(rulekit.grad(scalar_fn))(x)
    assert_close(Hm, fd_hessian(scalar_fn, x), how)


@pytest.mark.parametrize("how", ["jacrev", "jacfwd"])
def test_jacobian_of_grad_of_two_arguments(how: str) -> None:
    x = _values(9, (3,))
    grad_x = rulekit.grad(quad_tanh, argnums=1)
    J = getattr(rulekit, how)(grad_x, argnums=0)(A0, x)  # ∂(∇ₓf)/∂A, shape (3, 3, 3)
    assert J.shape == (3, 3, 3)
    assert_close(J, fd_derivative(grad_x, (A0, x), 0), how)


def test_grad_of_grad_with_argnums_and_multiple_arrays() -> None:
    x, y = _values(10, (3,)), _values(11, (3,))

    def f(x: Any, y: Any) -> Any:
        return np.sum(np.sin(x * y) + x**2 * y)

    def mixed(x: Any, y: Any) -> Any:  # Σ_i ∂f/∂x_i, differentiated w.r.t. y
        return np.sum(rulekit.grad(f, argnums=0)(x, y))

    got = rulekit.grad(mixed, argnums=1)(x, y)
    # ∂f/∂x = y cos(xy) + 2xy ; ∂/∂y of that = cos(xy) − xy sin(xy) + 2x
    want = np.cos(x * y) - x * y * np.sin(x * y) + 2 * x
    assert_close(got, want, "mixed", rtol=1e-12)


# -- perturbation confusion ----------------------------------------------------------------


def test_perturbation_confusion_grad_of_grad() -> None:
    """d/dx [x · d/dy (x + y)]_{y=x} = 1 (a confused implementation says 2)."""
    for x in (2.0, np.array(3.5)):
        got = rulekit.grad(lambda x: x * rulekit.grad(lambda y: x + y)(x))(x)
        assert np.isclose(got, 1.0, rtol=1e-14)


def _d(f: Callable[[Any], Any], how: str) -> Callable[[Any], Any]:
    """The derivative of scalar f by grad or by jvp."""
    if how == "grad":
        return rulekit.grad(f)
    return lambda x: rulekit.jvp(f, (x,), (np.ones(np.shape(x)),))[1]


@pytest.mark.parametrize("outer", ["grad", "jvp"])
@pytest.mark.parametrize("inner", ["grad", "jvp"])
def test_perturbation_confusion_every_pairing(outer: str, inner: str) -> None:
    x = np.array(1.7)
    got = _d(lambda x: x * _d(lambda y: x + y, inner)(x), outer)(x)
    assert np.isclose(got, 1.0, rtol=1e-14)
    # a nonlinear closure: d/dx [d/dy (x · y²)]_{y=x} = d/dx (2x²) = 4x
    got = _d(lambda x: _d(lambda y: x * y**2, inner)(x), outer)(x)
    assert np.isclose(got, 4 * 1.7, rtol=1e-13)
    # the outer variable only through the closure: d/dx [x · d/dy (x·y)] = d/dx x² = 2x
    got = _d(lambda x: x * _d(lambda y: x * y, inner)(np.array(5.0)), outer)(x)
    assert np.isclose(got, 2 * 1.7, rtol=1e-13)


def test_value_and_grad_inside_a_differentiated_function() -> None:
    """f(x) = v + g with (v, g) = value_and_grad(y ↦ sin(x·y))(x) = (sin x², x cos x²)."""

    def f(x: Any) -> Any:
        v, g = rulekit.value_and_grad(lambda y: np.sin(x * y))(x)
        return v + g

    for x in (0.9, -1.4):
        want = 2 * x * np.cos(x**2) + np.cos(x**2) - 2 * x**2 * np.sin(x**2)
        assert np.isclose(rulekit.grad(f)(x), want, rtol=1e-12)
        assert np.isclose(rulekit.jvp(f, (x,), (1.0,))[1], want, rtol=1e-12)


def test_perturbation_confusion_arrays_and_closures() -> None:
    x = np.array([0.5, -1.0, 2.0])

    def f(x: Any) -> Any:  # Σ x · ∇_y Σ(x·y) at y = x: Σ x², gradient 2x
        return np.sum(x * rulekit.grad(lambda y: np.sum(x * y))(x))

    assert_close(rulekit.grad(f)(x), 2 * x, "grad", rtol=1e-14)
    assert_close(rulekit.jvp(f, (x,), (np.ones(3),))[1], np.sum(2 * x), "jvp", rtol=1e-14)
    assert_close(rulekit.jacfwd(rulekit.grad(f))(x), 2 * np.eye(3), "hessian", rtol=1e-14)


def test_jvp_inside_grad_and_grad_inside_jvp() -> None:
    x = np.array([0.3, 1.1])
    v = np.array([1.0, -2.0])

    def directional(x: Any) -> Any:  # ⟨∇Σsin(x²), v⟩ = Σ 2x cos(x²) v
        return rulekit.jvp(lambda u: np.sum(np.sin(u**2)), (x,), (v,))[1]

    want = 2 * v * (np.cos(x**2) - 2 * x**2 * np.sin(x**2))
    assert_close(rulekit.grad(directional)(x), want, "grad of jvp", rtol=1e-12)
    g_of = rulekit.grad(lambda u: np.sum(np.sin(u**2)))
    assert_close(rulekit.jvp(g_of, (x,), (v,))[1], want, "jvp of grad", rtol=1e-12)


# -- in-place code under second-order transformations -------------------------------------


def inplace_scalar(x: Any) -> Any:
    """Writes into local arrays (not views, not arguments): allowed at every level."""
    y = x * 1.0
    y[0] = x[1] ** 2
    y[2] *= x[0]
    np.multiply(y, x, out=y)
    return np.sum(y**3)


def _hessian_in(mode: str, f: Callable[..., Any]) -> Callable[..., Any]:
    return rulekit.hessian(f, mode=mode)


SECOND_ORDER: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    **{m: partial(_hessian_in, m) for m in MODES},
    "jacfwd(jacfwd)": lambda f: rulekit.jacfwd(rulekit.jacfwd(f)),
    "jacrev(jacrev)": lambda f: rulekit.jacrev(rulekit.jacrev(f)),
    "jacfwd(grad)": lambda f: rulekit.jacfwd(rulekit.grad(f)),
    "grad of jvp rows": lambda f: (
        lambda x: np.stack(
            [rulekit.grad(lambda u, e=e: rulekit.jvp(f, (u,), (e,))[1])(x) for e in np.eye(x.size)]
        )
    ),
}


@pytest.mark.parametrize("how", SECOND_ORDER)
def test_second_order_of_inplace_code(how: str) -> None:
    x = np.array([0.5, -0.7, 1.2])
    assert_close(SECOND_ORDER[how](inplace_scalar)(x), fd_hessian(inplace_scalar, x), how)


def test_jvp_of_a_function_writing_into_its_argument() -> None:
    """NumPy semantics: the caller's primal is written; the caller's tangent never is."""
    x, v = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0])

    def f(x: Any) -> Any:
        x[0] = 5.0
        x *= x
        return x * 2

    out, tan = rulekit.jvp(f, (x,), (v,))
    np.testing.assert_array_equal(out, [50.0, 8.0, 18.0])
    np.testing.assert_array_equal(tan, [0.0, 8.0, 12.0])
    np.testing.assert_array_equal(v, [1.0, 1.0, 1.0])


# -- functions returning named tuples ---------------------------------------------------------

_S = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 5.0]])
NAMED: dict[str, Callable[[Any], Any]] = {
    "slogdet": lambda x: np.linalg.slogdet(_S + np.outer(x, x))[1],
    "slogdet.logabsdet": lambda x: np.linalg.slogdet(_S + np.diag(x**2)).logabsdet,
    "eigh": lambda x: np.sum(np.linalg.eigh(_S + np.diag(x))[0] ** 3),
    "eigh.eigenvalues": lambda x: np.sum(np.linalg.eigh(_S + np.outer(x, x)).eigenvalues ** 2),
    "svd": lambda x: np.sum(np.linalg.svd(_S + np.diag(x), compute_uv=False) ** 3),
    "qr": lambda x: np.sum(np.linalg.qr(_S + np.diag(x))[1] ** 2 * _S),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMED)
@pytest.mark.parametrize("layout", ["C", "negative"])
def test_second_order_through_named_tuple_outputs(name: str, mode: str, layout: str) -> None:
    """slogdet/eigh/svd/qr return named tuples: each field keeps its derivative at every
    level (the nested reverse level once took the whole tuple for a constant, giving a
    silently wrong Hessian), on a first and a second call."""
    f, x = NAMED[name], relayout(_values(31, (3,), 0.2, 0.9), layout)
    want = fd_hessian(f, x.copy())
    hess = rulekit.hessian(f, mode=mode)
    for call in range(2):
        assert_close(hess(x), want, f"{name} {mode} call {call + 1}", 1e-5)
    v = _values(32, (3,))
    assert_close(rulekit.hvp(f, (x,), (v,), mode=mode)[1], want @ v, f"{name} hvp", 1e-5)


# -- scan and checkpoint inside forward mode and nested reverse mode --------------------------

_W = np.array([[0.5, -0.3, 0.2], [0.1, 0.4, -0.6], [-0.2, 0.3, 0.7]])


def _rnn(x: Any, checkpoint: bool = False) -> Any:
    def body(c: Any, xi: Any) -> Any:
        h = np.tanh(_W @ c["h"] + xi * c["s"])
        return {"h": h, "s": c["s"] * 0.9 + np.sum(h)}, (h, np.sum(h * h))

    init = {"h": x * 0.5, "s": np.sum(x)}
    c, (hs, ss) = rulekit.scan(body, init, np.stack([x, x**2, np.sin(x)]), checkpoint=checkpoint)
    return np.sum(hs**2) + np.sum(ss) + c["s"] + np.sum(c["h"])


SCANNED: dict[str, Callable[[Any], Any]] = {
    "scan": _rnn,
    "scan checkpoint=True": partial(_rnn, checkpoint=True),
    "scan of length 0": lambda x: rulekit.scan(lambda c, xi: (c * xi, c), x, x[None][:0])[0] @ x,
    "checkpoint": lambda x: np.sum(rulekit.checkpoint(lambda z: np.tanh(_W @ z) ** 2)(x) * x),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", SCANNED)
def test_scan_and_checkpoint_twice_differentiated(name: str, mode: str) -> None:
    """Under jvp and a nested grad, scan runs as the loop it is (traced by the levels) and
    checkpoint as its function; the reference differentiates the reverse engine's scan
    and checkpoint rules (a different code path), on a first and a second call."""
    f, x = SCANNED[name], _values(41, (3,))
    want = fd_hessian(f, x)
    hess = rulekit.hessian(f, mode=mode)
    for call in range(2):
        assert_close(hess(x), want, f"{name} {mode} call {call + 1}", 1e-5)
    v = _values(42, (3,))
    _, ydot = rulekit.jvp(f, (x,), (v,))
    assert_close(ydot, fd_derivative(f, (x,), 0, v), f"{name} jvp", 1e-6)
