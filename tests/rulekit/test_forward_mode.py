"""Forward mode: `rulekit.jvp`, `rulekit.jacfwd` and `rulekit.jacrev` against finite differences.

Every check compares with an independent reference computed in double precision
by plain NumPy: the central difference

    J·v ≈ (f(x + h·v) − f(x − h·v)) / 2h        (h = 1e-6, all arguments at once)

for `jvp`, and the same along each unit vector for a Jacobian
(shape `output.shape + input.shape`). Inputs come in every memory layout
(C, F, negative strides, strided views), 0-d and empty shapes, float32,
float64 and complex128 (a jvp is defined for any real-differentiable function,
complex or not: the difference is taken along the complex direction v itself).

Tolerances: float64 |got − fd| ≤ 1e-6·(1 + |fd|); float32 (the function runs
in single precision, the reference in double) ≤ 2e-3·(1 + |fd|).
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
from testutils._layouts import relayout

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True, database=None)

SHAPES: tuple[tuple[int, ...], ...] = ((), (0,), (4,), (2, 3), (3, 1, 2))
LAYOUTS = ("C", "F", "negative", "strided")
H = 1e-6
RTOL = {np.dtype(np.float64): 1e-6, np.dtype(np.complex128): 1e-6, np.dtype(np.float32): 2e-3}


# -- inputs -----------------------------------------------------------------------------------


def _values(seed: int, shape: tuple[int, ...], dtype: Any, low: float, high: float) -> Any:
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, high, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(low, high, shape)
    return np.asarray(x, dtype)


@st.composite
def arrays(
    draw: Any,
    dtypes: tuple[Any, ...] = (np.float64,),
    shapes: tuple[tuple[int, ...], ...] = SHAPES,
    low: float = -1.5,
    high: float = 1.5,
    n: int = 1,
) -> Any:
    """`n` arrays of one shape and dtype, each in its own memory layout."""
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(st.sampled_from(shapes))
    out = []
    for _ in range(n):
        seed = draw(st.integers(0, 2**16))
        layout = draw(st.sampled_from(LAYOUTS))
        out.append(relayout(_values(seed, shape, dtype, low, high), layout))
    return out[0] if n == 1 else tuple(out)


def _like(x: Any, seed: int) -> Any:
    """A random direction of x's shape and dtype (C-ordered)."""
    return _values(seed, np.shape(x), np.result_type(x), -1.0, 1.0)


# -- the reference ----------------------------------------------------------------------------


def _wide(x: Any) -> Any:
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x, np.complex128 if np.iscomplexobj(x) else np.float64)
    return x


def tree_map(fn: Callable[..., Any], x: Any, *rest: Any) -> Any:
    if isinstance(x, (tuple, list)):
        return type(x)(tree_map(fn, e, *(r[i] for r in rest)) for i, e in enumerate(x))
    if isinstance(x, dict):
        return {k: tree_map(fn, v, *(r[k] for r in rest)) for k, v in x.items()}
    return fn(x, *rest)


def fd_jvp(f: Callable[..., Any], primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> Any:
    """(f(x + h·v) − f(x − h·v)) / 2h in double precision; None tangents stay fixed."""

    def at(sign: float) -> Any:
        args = []
        for p, t in zip(primals, tangents, strict=True):
            p = _wide(p)
            args.append(p if t is None else p + sign * H * _wide(t))
        return f(*args)

    return tree_map(lambda a, b: (np.asarray(a) - np.asarray(b)) / (2 * H), at(1.0), at(-1.0))


def fd_jacobian(f: Callable[..., Any], args: tuple[Any, ...], argnum: int) -> Any:
    """The Jacobian of f w.r.t. args[argnum], shape out.shape + in.shape, by differences."""
    x = _wide(args[argnum])
    out = np.asarray(f(*[_wide(a) for a in args]))
    jac = np.zeros(out.shape + np.shape(x), np.result_type(out, x))
    for k in np.ndindex(np.shape(x)):
        e = np.zeros(np.shape(x))
        e[k] = 1.0
        tans = tuple(e if i == argnum else None for i in range(len(args)))
        jac[(..., *k)] = fd_jvp(f, args, tans)
    return jac


def assert_close(got: Any, want: Any, rtol: float, what: str = "") -> None:
    """|got − want| ≤ rtol·(1 + |want|) elementwise, same shapes, in trees."""
    if isinstance(want, (tuple, list, dict)):
        assert type(got) is type(want), f"{what}: {type(got)} vs {type(want)}"
        keys = want.keys() if isinstance(want, dict) else range(len(want))
        assert len(got) == len(want)
        for k in keys:
            assert_close(got[k], want[k], rtol, f"{what}[{k}]")
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape}, reference {w.shape}"
    np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * (1 + np.max(np.abs(w), initial=0)),
                               err_msg=what)  # fmt: skip


def rtol_of(*xs: Any) -> float:
    return max(RTOL[np.result_type(x)] for x in xs)


# -- functions --------------------------------------------------------------------------------


def smooth(x: Any) -> Any:
    """Elementwise and smooth (float and complex)."""
    return np.sin(x) * x**2 + np.exp(-0.5 * x) / (2.0 + np.cos(x))


def nonholomorphic(z: Any) -> Any:
    """Real-differentiable but not complex-differentiable."""
    return np.abs(z) ** 2 * np.conj(z) + np.real(z) * z


def two_args(x: Any, y: Any) -> Any:
    return np.tanh(x * y) + x / (1.5 + y**2)


def tree_out(x: Any, y: Any) -> Any:
    return (np.sin(x) * y, {"a": x * y, "b": np.cos(y), "c": (np.exp(x),)})


def inplace_shift(x: Any) -> Any:
    y = x.copy()
    y[1:] += x[:-1]
    y *= 2
    return y


def inplace_out(a: Any, b: Any) -> Any:
    c = a * b  # (traced when either argument is)
    np.add(a, b, out=c)
    np.multiply(c, a, out=c)
    d = a * b
    np.sin(d, out=d)
    np.add(c, d, out=c)
    return c


def inplace_setitem(x: Any, y: Any) -> Any:
    z = x * y
    z[::2] = y[::2] ** 2
    z[z.shape[0] // 2] = np.sin(y[0])
    mask = np.arange(z.shape[0]) % 3 == 1
    z[mask] = x[mask] * y[mask]
    z[-1:] *= y[-1:]
    z[1] = 0.5  # a constant written in
    return z


def reductions(x: Any) -> Any:
    return np.sum(np.sin(x) ** 2) * np.mean(x) + np.sum(x * x, axis=0)


# -- jvp ------------------------------------------------------------------------------------


@SETTINGS
@given(arrays(dtypes=(np.float64, np.float32, np.complex128)), st.integers(0, 99))
def test_jvp_elementwise_every_layout_and_dtype(x: Any, seed: int) -> None:
    v = _like(x, seed)
    out, tan = rulekit.jvp(smooth, (x,), (v,))
    assert_close(out, smooth(x), 1e-6 if x.dtype != np.float32 else 1e-5, "primal")
    assert np.shape(tan) == np.shape(out) and np.result_type(tan) == np.result_type(out)
    assert_close(tan, fd_jvp(smooth, (x,), (v,)), rtol_of(x), "tangent")


@SETTINGS
@given(arrays(dtypes=(np.complex128,)), st.integers(0, 99))
def test_jvp_non_holomorphic_complex(z: Any, seed: int) -> None:
    v = _like(z, seed)
    _, tan = rulekit.jvp(nonholomorphic, (z,), (v,))
    assert_close(tan, fd_jvp(nonholomorphic, (z,), (v,)), 1e-6, "tangent")


@SETTINGS
@given(arrays(dtypes=(np.float64, np.float32), n=2), st.integers(0, 99), st.sampled_from("xyb"))
def test_jvp_two_arguments_and_none_tangents(xy: Any, seed: int, which: str) -> None:
    x, y = xy
    vx = _like(x, seed) if which in "xb" else None
    vy = _like(y, seed + 1) if which in "yb" else None
    out, tan = rulekit.jvp(two_args, (x, y), (vx, vy))
    assert_close(out, two_args(x, y), 1e-5, "primal")
    assert_close(tan, fd_jvp(two_args, (x, y), (vx, vy)), rtol_of(x), "tangent")


@SETTINGS
@given(arrays(dtypes=(np.float64, np.complex128), n=2), st.integers(0, 99))
def test_jvp_tuple_and_dict_outputs(xy: Any, seed: int) -> None:
    x, y = xy
    v = _like(x, seed)
    out, tan = rulekit.jvp(tree_out, (x, y), (v, None))
    assert_close(out, tree_out(x, y), 1e-12, "primal")
    assert_close(tan, fd_jvp(tree_out, (x, y), (v, None)), 1e-6, "tangent")
    assert not np.any(tan[1]["b"]), "an output not depending on the tangents has tangent 0"


def test_jvp_all_tangents_none_gives_zero() -> None:
    x = np.linspace(-1, 1, 5)
    out, tan = rulekit.jvp(smooth, (x,), (None,))
    np.testing.assert_array_equal(out, smooth(x))
    np.testing.assert_array_equal(tan, np.zeros_like(x))


def test_jvp_python_scalars_and_containers() -> None:
    out, tan = rulekit.jvp(lambda t: t**3 + np.sin(t), (0.7,), (2.0,))
    assert np.isclose(out, 0.7**3 + np.sin(0.7))
    assert np.isclose(tan, 2.0 * (3 * 0.7**2 + np.cos(0.7)))

    def f(d: dict[str, Any], pair: tuple[Any, Any]) -> Any:
        return d["a"] * pair[0] + np.exp(d["b"]) * pair[1]

    a, b, p0, p1 = (np.array([0.3, -0.4]), np.array([1.1, 0.2]), np.array([2.0, 3.0]),
                    np.array([-1.0, 0.5]))  # fmt: skip
    ta, tb, t0 = np.array([1.0, -2.0]), np.array([0.5, 0.25]), np.array([0.1, 0.3])
    _, tan = rulekit.jvp(f, ({"a": a, "b": b}, (p0, p1)), ({"a": ta, "b": tb}, (t0, None)))
    want = ta * p0 + a * t0 + np.exp(b) * tb * p1
    np.testing.assert_allclose(tan, want, rtol=1e-13)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_jvp_matmul(layout: str, dtype: Any) -> None:
    A = relayout(_values(1, (3, 4), dtype, -1, 1), layout)
    B = relayout(_values(2, (4, 2), dtype, -1, 1), layout)
    vA, vB = _like(A, 3), _like(B, 4)

    def f(A: Any, B: Any) -> Any:
        return np.tanh(A @ B) @ B.T

    _, tan = rulekit.jvp(f, (A, B), (vA, vB))
    assert_close(tan, fd_jvp(f, (A, B), (vA, vB)), rtol_of(A), "tangent")
    _, tan = rulekit.jvp(f, (A, B), (None, vB))
    assert_close(tan, fd_jvp(f, (A, B), (None, vB)), rtol_of(A), "tangent (A constant)")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_jvp_reductions(layout: str, dtype: Any) -> None:
    x = relayout(_values(5, (3, 4), dtype, -1, 1), layout)
    v = _like(x, 6)
    _, tan = rulekit.jvp(reductions, (x,), (v,))
    assert_close(tan, fd_jvp(reductions, (x,), (v,)), rtol_of(x), "tangent")


# -- in-place code inside f -----------------------------------------------------------------


@SETTINGS
@given(arrays(dtypes=(np.float64, np.float32, np.complex128), shapes=((5,), (4, 3))),
       st.integers(0, 99))  # fmt: skip
def test_jvp_inplace_shift(x: Any, seed: int) -> None:
    v = _like(x, seed)
    x0, v0 = x.copy(), v.copy()
    out, tan = rulekit.jvp(inplace_shift, (x,), (v,))
    assert_close(out, inplace_shift(x0), 1e-6, "primal")
    assert_close(tan, fd_jvp(inplace_shift, (x0,), (v0,)), rtol_of(x), "tangent")
    np.testing.assert_array_equal(x, x0, "jvp changed its primal")
    np.testing.assert_array_equal(v, v0, "jvp changed its tangent")


@SETTINGS
@given(arrays(dtypes=(np.float64, np.complex128), shapes=((4,), (2, 3)), n=2),
       st.integers(0, 99))  # fmt: skip
def test_jvp_out_argument(ab: Any, seed: int) -> None:
    a, b = ab
    va, vb = _like(a, seed), _like(b, seed + 7)
    _, tan = rulekit.jvp(inplace_out, (a, b), (va, vb))
    assert_close(tan, fd_jvp(inplace_out, (a, b), (va, vb)), 1e-6, "tangent")
    _, tan = rulekit.jvp(inplace_out, (a, b), (None, vb))
    assert_close(tan, fd_jvp(inplace_out, (a, b), (None, vb)), 1e-6, "tangent (a constant)")


@SETTINGS
@given(arrays(dtypes=(np.float64, np.float32), shapes=((7,), (6, 2)), n=2), st.integers(0, 99),
       st.sampled_from("xyb"))  # fmt: skip
def test_jvp_setitem_slices_and_masks(xy: Any, seed: int, which: str) -> None:
    x, y = xy
    vx = _like(x, seed) if which in "xb" else None
    vy = _like(y, seed + 1) if which in "yb" else None
    out, tan = rulekit.jvp(inplace_setitem, (x, y), (vx, vy))
    assert_close(out, inplace_setitem(x, y), 1e-6, "primal")
    assert_close(tan, fd_jvp(inplace_setitem, (x, y), (vx, vy)), rtol_of(x), "tangent")


def test_jvp_writes_into_a_view_of_a_local_array() -> None:
    def f(x: Any) -> Any:
        y = np.concatenate([x, x], axis=1)
        v = y[:, 1:3]  # a view: the write must reach y's tangent too
        v[...] = x * x
        w = y.T
        w[0] += x[:, 0]
        return y

    x = _values(3, (3, 2), np.float64, -1, 1)
    v = _like(x, 4)
    _, tan = rulekit.jvp(f, (x,), (v,))
    assert_close(tan, fd_jvp(f, (x,), (v,)), 1e-6, "tangent")


def test_jvp_is_repeatable_and_leaves_inputs_alone() -> None:
    x = relayout(_values(8, (3, 3), np.float64, -1, 1), "negative")
    v = relayout(_like(x, 9), "F")
    x0, v0 = x.copy(), v.copy()

    def f(x: Any) -> Any:
        y = x.copy()
        y[1:] += x[:-1]
        y *= 2
        return np.sin(y) @ x

    first = rulekit.jvp(f, (x,), (v,))
    second = rulekit.jvp(f, (x,), (v,))
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(v, v0)
    assert v.strides == v0.strides or not v.flags.c_contiguous
    assert_close(first[1], fd_jvp(f, (x0,), (v0,)), 1e-6, "tangent")


def test_jvp_tangent_is_not_aliased_with_the_input_tangent() -> None:
    x, v = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0])
    _, tan = rulekit.jvp(lambda x: x, (x,), (v,))
    np.testing.assert_array_equal(tan, v)
    tan[...] = 5.0
    np.testing.assert_array_equal(v, 1.0)


# -- jvp errors ----------------------------------------------------------------------------


def test_jvp_mismatched_tangent_shape_raises_value_error() -> None:
    with pytest.raises(ValueError, match="shape"):
        rulekit.jvp(np.sin, (np.ones(3),), (np.ones(2),))
    with pytest.raises(ValueError, match="shape"):
        rulekit.jvp(np.sin, (np.ones((2, 3)),), (np.ones((3, 2)),))
    with pytest.raises(ValueError):
        rulekit.jvp(lambda x, y: x * y, (np.ones(3), np.ones(3)), (np.ones(3),))
    with pytest.raises(TypeError):
        rulekit.jvp(np.sin, np.ones(3), np.ones(3))


# -- Jacobians --------------------------------------------------------------------------------


JAC_SHAPES: tuple[tuple[int, ...], ...] = ((), (0,), (3,), (2, 2))


def vector_fn(x: Any, y: Any) -> Any:
    return np.sin(x) * y**2 + np.exp(0.3 * x * y)


@SETTINGS
@given(arrays(dtypes=(np.float64,), shapes=JAC_SHAPES, n=2),
       st.sampled_from(["jacfwd", "jacrev"]))  # fmt: skip
def test_jacobian_elementwise(xy: Any, how: str) -> None:
    x, y = xy
    jac = getattr(rulekit, how)
    J = jac(vector_fn)(x, y)
    assert J.shape == x.shape + x.shape
    assert_close(J, fd_jacobian(vector_fn, (x, y), 0), 1e-6, how)
    Jy = jac(vector_fn, argnums=1)(x, y)
    assert_close(Jy, fd_jacobian(vector_fn, (x, y), 1), 1e-6, how)
    both = jac(vector_fn, argnums=(0, 1))(x, y)
    assert isinstance(both, tuple) and len(both) == 2
    assert_close(both[0], J, 1e-12, how)
    assert_close(both[1], Jy, 1e-12, how)


def mixing(A: Any, b: Any) -> Any:
    return np.tanh(A @ b) * b[0] + np.sum(A * A, axis=1)


@pytest.mark.parametrize("how", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_jacobian_shapes_out_plus_in(how: str, layout: str) -> None:
    A = relayout(_values(11, (2, 3), np.float64, -1, 1), layout)
    b = relayout(_values(12, (3,), np.float64, -1, 1), layout)
    jac = getattr(rulekit, how)
    JA, Jb = jac(mixing, argnums=(0, 1))(A, b)
    assert JA.shape == (2, 2, 3) and Jb.shape == (2, 3)
    assert_close(JA, fd_jacobian(mixing, (A, b), 0), 1e-6, f"{how} dA")
    assert_close(Jb, fd_jacobian(mixing, (A, b), 1), 1e-6, f"{how} db")


@pytest.mark.parametrize("how", ["jacfwd", "jacrev"])
def test_jacobian_scalar_output_and_float32(how: str) -> None:
    x = _values(13, (4,), np.float32, -1, 1)

    def f(x: Any) -> Any:
        return np.sum(np.sin(x) * x)

    J = getattr(rulekit, how)(f)(x)
    assert J.shape == (4,)
    assert_close(J, fd_jacobian(f, (x,), 0), 2e-3, how)


@pytest.mark.parametrize("how", ["jacfwd", "jacrev"])
def test_jacobian_has_aux(how: str) -> None:
    x = _values(14, (3,), np.float64, -1, 1)

    def f(x: Any) -> Any:
        y = np.cos(x) * x
        return y, {"y": y, "n": 3}

    J, aux = getattr(rulekit, how)(f, has_aux=True)(x)
    assert_close(J, fd_jacobian(lambda x: f(x)[0], (x,), 0), 1e-6, how)
    assert aux["n"] == 3
    assert type(aux["y"]) is np.ndarray
    np.testing.assert_allclose(aux["y"], np.cos(x) * x)


def test_jacfwd_equals_jacrev_on_a_nonsquare_map() -> None:
    x = _values(15, (3,), np.float64, -1, 1)

    def f(x: Any) -> Any:
        return np.stack([x[0] * x[1], np.sin(x[2]), x[0] ** 3, np.exp(x[1] - x[2])])

    Jf, Jr = rulekit.jacfwd(f)(x), rulekit.jacrev(f)(x)
    want = fd_jacobian(f, (x,), 0)
    assert Jf.shape == (4, 3)
    assert_close(Jf, want, 1e-6, "jacfwd")
    assert_close(Jr, want, 1e-6, "jacrev")


_IDENTITIES = {
    "x * 1.0": lambda x: x * 1.0,
    "1.0 * x": lambda x: 1.0 * x,
    "x + 0.0": lambda x: x + 0.0,
    "x - 0.0": lambda x: x - 0.0,
    "x / 1.0": lambda x: x / 1.0,
    "+x": lambda x: +x,
    "np.real(x)": np.real,
    "x.astype(float)": lambda x: x.astype(np.float64),
    "np.copy(x)": np.copy,
}


@pytest.mark.parametrize("shape", [(), (1,), (3,), (2, 2)])
@pytest.mark.parametrize("op", _IDENTITIES)
def test_a_result_s_tangent_is_not_its_input_s(op: str, shape: tuple[int, ...]) -> None:
    """`r = x·1; x += x` leaves r and its tangent alone, whatever the rule returned as ẏ (the
    fuzzer found ẏ = ẋ itself for a 0-d x: the later write doubled r's tangent)."""
    x0 = np.asarray(np.linspace(0.3, 0.9, int(np.prod(shape)))).reshape(shape)
    v = np.asarray(np.linspace(-1.0, 0.5, int(np.prod(shape)))).reshape(shape)

    def f(x: Any) -> Any:
        r = _IDENTITIES[op](x)
        x += x
        return r * 1.5

    y, t = rulekit.jvp(f, (x0.copy(),), (v,))
    want = f(x0.copy())  # (np.real of a real x is a view: r sees the write, as in numpy)
    np.testing.assert_allclose(y, want, rtol=1e-15)
    np.testing.assert_allclose(t, want / x0 * v, rtol=1e-15)  # (f is linear in x)


@pytest.mark.parametrize("layout", ["F", "negative", "strided"])
@pytest.mark.parametrize("how", ["x + c", "c * x", "np.where(c > 2, x, 1.0)"])
def test_a_new_array_s_tangent_takes_its_layout(layout: str, how: str) -> None:
    """`y = x + c` with x in another layout than a C-ordered constant c: y is C-ordered, and
    a rule may return ẋ (x's layout) as ẏ. Its tangent is laid out like y, so that
    `y.reshape(-1)` is a view of both and a write through it is followed (it was refused)."""
    c = np.arange(6.0).reshape(2, 3)
    ops = {"x + c": lambda x: x + c, "c * x": lambda x: c * x,
           "np.where(c > 2, x, 1.0)": lambda x: np.where(c > 2, x, 1.0)}  # fmt: skip

    def f(x: Any) -> Any:
        y = ops[how](x)
        r = y.reshape(-1)
        r[1] = r[4] ** 2
        return y * 2.0

    x = relayout(np.linspace(0.1, 0.6, 6).reshape(2, 3), layout)
    v = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    _, t = rulekit.jvp(f, (x,), (v,))
    h = 1e-6
    fd = (f(relayout(x + h * v, layout)) - f(relayout(x - h * v, layout))) / (2 * h)
    np.testing.assert_allclose(t, fd, rtol=1e-7, atol=1e-8)
