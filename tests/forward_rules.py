"""Calling forward rules and differentiable pullbacks directly in tests, and checking them:
against finite differences (`check_forward`), against the reverse rule and each other
(`check_pullback`), and differentiated again (`check_twice`). Shared by the rule families'
forward tests (tests/rules/**/test_forward*.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import rulekit
from rulekit import Dual, forward_registry, vjp_registry

#: The three ways of taking second derivatives (`rulekit.hessian(..., mode=)`).
MODES = ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward")
#: The second-order tests' (dtype, layout, mode): every mode in float64 C order, each other
#: layout and float32 once, rotating through the modes: 8 of the 24 combinations. (A
#: mode's handling of a layout is that of the first-order rules it runs, which the jvp and
#: pullback tests check in every layout; the full product made these files minutes long.)
HESSIAN_GRID: list[tuple[Any, str, str]] = [
    *[(np.float64, "C", m) for m in MODES],
    *[(np.float64, lay, m) for lay, m in zip(("F", "negative", "strided"), MODES, strict=True)],
    (np.float32, "C", MODES[0]),
    (np.float32, "negative", MODES[2]),
]
HESSIAN_IDS = [f"{np.dtype(d).name}-{lay}-{m}" for d, lay, m in HESSIAN_GRID]


def frule_of(f: Any, *args: Any) -> Any:
    """The forward rule registered for `f(*args)` (looked up on the primal values)."""
    return forward_registry.lookup_call(f, list(args))[1].impl


def vjp_of(f: Any, *args: Any) -> Any:
    """The differentiable pullback registered for `f(*args)`."""
    return vjp_registry.lookup_call(f, list(args))[1].impl


def jvp(f: Any, args: Sequence[Any], dots: Sequence[Any], kw: dict[str, Any] | None = None) -> Any:
    """(y, ẏ) from the forward rule; `dots[i]` None: a constant."""
    out = frule_of(f, *args)(Dual(f, None), *map(Dual, args, dots), **(kw or {}))
    return out.x, out.dx


def inner(a: Any, b: Any) -> float:
    """Real inner product of two trees (None: zero)."""
    if a is None or b is None:
        return 0.0
    if isinstance(a, (tuple, list)):
        return sum(inner(u, v) for u, v in zip(a, b, strict=True))
    return float(np.vdot(np.asarray(a), np.asarray(b)).real)


def tree_close(a: Any, b: Any, rtol: float, atol: float) -> None:
    if a is None:  # (no tangent: a constant output)
        assert not np.any(np.asarray(b)), b
        return
    if isinstance(a, (tuple, list)):
        for u, v in zip(a, b, strict=True):
            tree_close(u, v, rtol, atol)
        return
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def _wide(a: Any) -> Any:
    if isinstance(a, (np.ndarray, np.generic)) and a.dtype in (np.float32, np.float16):
        return a.astype(np.float64)
    if isinstance(a, (np.ndarray, np.generic)) and a.dtype == np.complex64:
        return a.astype(np.complex128)
    return a


def fd_jvp(f: Any, args: Sequence[Any], dots: Sequence[Any], kw: dict[str, Any], h: float) -> Any:
    """Central difference of f along the tangents (computed in double precision)."""
    wa = [_wide(a) for a in args]

    def at(s: float) -> Any:
        return f(*[a if d is None else a + s * _wide(d) for a, d in zip(wa, dots, strict=True)],
                 **kw)  # fmt: skip

    p, m = at(h), at(-h)
    if isinstance(p, tuple):
        return tuple((np.asarray(u) - np.asarray(v)) / (2 * h) for u, v in zip(p, m, strict=True))
    return (np.asarray(p) - np.asarray(m)) / (2 * h)


def like(t: Any, y: Any) -> None:
    """Tangent t has y's shape and dtype."""
    if t is None:
        return
    if isinstance(y, tuple):
        for u, v in zip(t, y, strict=True):
            like(u, v)
        return
    assert np.shape(t) == np.shape(y), (np.shape(t), np.shape(y))
    if isinstance(y, (np.ndarray, np.generic)):
        assert np.asarray(t).dtype == y.dtype, (np.asarray(t).dtype, y.dtype)


def check_forward(
    f: Any, args: Sequence[Any], dots: Sequence[Any], kw: dict[str, Any] | None = None,
    rtol: float = 1e-6, atol: float = 1e-8, h: float = 1e-6,
) -> Any:  # fmt: skip
    """The forward rule's value is f's, its tangent has y's shape/dtype and matches central
    differences. Returns ẏ."""
    kw = kw or {}
    y, t = jvp(f, args, dots, kw)
    tree_close(y, f(*args, **kw), 1e-6, 0)
    like(t, y)
    tree_close(t, fd_jvp(f, args, dots, kw, h), rtol, atol)
    return t


def check_pullback(
    f: Any, args: Sequence[Any], dots: Sequence[Any], ybar: Any, kw: dict[str, Any] | None = None,
    rtol: float = 1e-6, reverse: bool = True,
) -> Any:  # fmt: skip
    """⟨ȳ, J ẋ⟩ (forward rule) == Σ⟨x̄ᵢ, ẋᵢ⟩ (pullback); x̄ᵢ has xᵢ's shape; and (`reverse`)
    x̄ᵢ equals the reverse rule's cotangent."""
    kw = kw or {}
    active = tuple(d is not None for d in dots)
    y, pb = vjp_of(f, *args)(active, *args, **kw)
    tree_close(y, f(*args, **kw), 1e-6, 0)
    cts = pb(ybar)
    assert len(cts) == len(args)
    for c, a, d in zip(cts, args, dots, strict=True):
        if d is not None and c is not None:
            assert np.shape(c) == np.shape(a), (np.shape(c), np.shape(a))
    _, t = jvp(f, args, dots, kw)
    lhs, rhs = inner(ybar, t), inner(cts, dots)
    assert abs(lhs - rhs) <= rtol * (1 + abs(lhs)), (lhs, rhs)
    if reverse:
        _, ref = rulekit.value_and_pullback(lambda *a: f(*a, **kw), ybar, *args)
        for c, r, d in zip(cts, ref, dots, strict=True):
            if d is not None:
                want = 0 if isinstance(r, rulekit.NoTangent) else r
                np.testing.assert_allclose(np.asarray(c), want, rtol=rtol * 10, atol=1e-10)
    return cts


def _fd_grad(s: Any, x: np.ndarray, h: float = 1e-5) -> np.ndarray:
    g = np.zeros(x.shape)
    for k in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[k] = h
        g[k] = (s(x + e) - s(x - e)) / (2 * h)
    return g


def is_floating(a: Any) -> bool:
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype.kind in "fc"
    return isinstance(a, (float, complex))


def check_twice(
    f: Any, args: Sequence[Any], i: int, ybar: Any, kw: dict[str, Any] | None = None,
    rtol: float = 1e-5, atol: float = 1e-7, diff: Sequence[int] | None = None,
) -> None:  # fmt: skip
    """The pullback and the forward rule of f run on values traced by rulekit's reverse
    engine (argument i traced; the arguments `diff`, default every float one, active) and
    the gradient in argument i of a weighted sum of their results matches finite
    differences: the rules are differentiable again (mixed second derivatives included)."""
    kw = kw or {}
    rng = np.random.default_rng(7)
    x = np.asarray(args[i], dtype=np.float64)
    if diff is None:
        diff = [k for k, a in enumerate(args) if is_floating(a)]
    dots = [rng.normal(size=np.shape(a)) if k in diff else None for k, a in enumerate(args)]
    wts = [rng.normal(size=np.shape(a)) if is_floating(a) else None for a in args]
    active = tuple(k in diff for k in range(len(args)))
    vjp = vjp_of(f, *args)
    fwd = frule_of(f, *args)

    def put(v: Any) -> list[Any]:
        a = list(args)
        a[i] = v
        return a

    def s_vjp(v: Any) -> Any:
        cts = vjp(active, *put(v), **kw)[1](ybar)
        return sum(np.sum(np.real(c) * w) for c, w in zip(cts, wts, strict=True) if c is not None)

    def s_jvp(v: Any) -> Any:
        t = fwd(Dual(f, None), *map(Dual, put(v), dots), **kw).dx
        t = t[0] if isinstance(t, tuple) else t
        yb = ybar[0] if isinstance(ybar, tuple) else ybar
        return np.sum(np.real(t * np.conjugate(yb)))

    for s in (s_vjp, s_jvp):
        g = rulekit.grad(s)(x)
        np.testing.assert_allclose(g, _fd_grad(s, x), rtol=rtol, atol=atol)


def fd_hessian(f: Callable[[Any], Any], x: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Central differences of the reverse engine's gradient (x widened to float64)."""
    grad = rulekit.grad(f)
    xw = np.asarray(x, np.float64)
    H = np.zeros(x.shape + x.shape)
    for k in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[k] = h
        H[(..., *k)] = (np.asarray(grad(xw + e)) - np.asarray(grad(xw - e))) / (2 * h)
    return H
