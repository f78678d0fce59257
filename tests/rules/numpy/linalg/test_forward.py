"""Forward rules and differentiable pullbacks of numpy.linalg (rules.numpy.linalg.forward*).

Per case: (1) the frule's tangent against central finite differences of the primal along a
random direction, in C, F, strided and negative-stride layouts (eigen/singular vectors
gauge-aligned first); (2) the vjp rule against the frule (⟨ȳ, Jẋ⟩ = ⟨x̄, ẋ⟩) and against
the reverse rule's cotangents; (3) traceability: the reverse engine differentiates the
frule's tangent and the pullback's cotangent, compared with finite differences.
The harness (`Case`, `check_*`) is shared with tests/rules/scipy/linalg/test_forward.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import rulekit
import rules.numpy.linalg  # noqa: F401  (registers the rules)
from rulekit import Dual
from rulekit._registry import forward_registry, vjp_registry
from rules.numpy.linalg.basic import spd, wellcond
from rules.numpy.linalg.decomp import _rng_svd, _rng_sym

# -- trees (an argument or output may be a list/tuple of arrays) ----------------------------------


def _is_seq(x: Any) -> bool:
    return isinstance(x, (list, tuple))


def rand_like(rng: np.random.Generator, x: Any) -> Any:
    if _is_seq(x):
        return (list if isinstance(x, list) else tuple)(rand_like(rng, e) for e in x)
    x = np.asarray(x)
    d = rng.normal(size=x.shape)
    if x.dtype.kind == "c":
        d = d + 1j * rng.normal(size=x.shape)
    return d.astype(x.dtype) if x.dtype.kind in "fc" else None


def axpy(x: Any, d: Any, eps: float) -> Any:
    if _is_seq(x):
        return (list if isinstance(x, list) else tuple)(
            axpy(e, t, eps) for e, t in zip(x, d, strict=True)
        )
    return x if d is None else x + eps * d


def inner(a: Any, b: Any) -> float:
    """Σ Re⟨a, b⟩ over a tree, skipping None entries."""
    if a is None or b is None:
        return 0.0
    if _is_seq(a):
        return sum(inner(u, v) for u, v in zip(a, b, strict=True))
    return float(np.vdot(np.asarray(a), np.asarray(b)).real)


def sub(a: Any, b: Any, scale: float) -> Any:
    if _is_seq(a):
        return tuple(sub(u, v, scale) for u, v in zip(a, b, strict=True))
    return (np.asarray(a, dtype=np.result_type(a, np.float64)) - b) * scale


# -- gauge alignment of eigen/singular vectors ----------------------------------------------------


def _phase(p: Any) -> Any:
    return p / np.abs(p) if np.iscomplexobj(p) else np.sign(p)


def align_eigh(y: Any, y0: Any) -> Any:
    """Columns of V multiplied by the phase that makes ⟨V0ᵢ, Vᵢ⟩ real positive."""
    w, V = y
    d = _phase(np.sum(np.conj(y0[1]) * V, axis=-2))
    return (w, V * np.conj(d)[..., None, :])


def align_svd(y: Any, y0: Any) -> Any:
    """U Dᴴ, D Vh with D the phases making ⟨Vh0ᵢ, Vhᵢ⟩ real positive (U S Vh unchanged)."""
    U, s, Vh = y
    d = _phase(np.sum(np.conj(y0[2]) * Vh, axis=-1))
    return (U * d[..., None, :], s, np.conj(d)[..., :, None] * Vh)


# -- cases ----------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    f: Callable[..., Any]
    args: list[Any]
    kw: dict[str, Any] = field(default_factory=dict)
    diff: Sequence[int] = (0,)  # the arguments given a direction / a cotangent
    align: Callable[[Any, Any], Any] | None = None
    rtol: float = 1e-6
    skip_out: Sequence[int] = ()  # outputs without a tangent to compare (e.g. lstsq's rank)
    nested: bool = True  # run the traceability test

    def __repr__(self) -> str:
        return self.name


def call_frule(c: Case, args: Sequence[Any], dirs: Sequence[Any]) -> Dual:
    duals = [Dual(a, dirs[i] if i in c.diff else None) for i, a in enumerate(args)]
    return rulekit.frule(Dual(c.f, None), *duals, **c.kw)


def directions(c: Case, seed: int = 0) -> list[Any]:
    rng = np.random.default_rng(seed)
    return [rand_like(rng, a) if i in c.diff else None for i, a in enumerate(c.args)]


def _outs(y: Any) -> tuple[Any, ...]:
    return tuple(y) if _is_seq(y) else (y,)


def relayout(x: Any, kind: str) -> Any:
    if _is_seq(x):
        return (list if isinstance(x, list) else tuple)(relayout(e, kind) for e in x)
    if not isinstance(x, np.ndarray) or x.ndim == 0:
        return x
    if kind == "F":
        return np.asfortranarray(x)
    if kind == "S":
        big = np.zeros(tuple(2 * n for n in x.shape), x.dtype)
        big[tuple(slice(None, None, 2) for _ in x.shape)] = x
        return big[tuple(slice(None, None, 2) for _ in x.shape)]
    if kind == "N":
        return np.flip(np.flip(x).copy())
    return np.ascontiguousarray(x)


def check_frule_fd(c: Case, layout: str = "C", eps: float = 1e-6) -> None:
    """The frule's primal equals f's; its tangent equals the central difference."""
    args = [relayout(a, layout) for a in c.args]
    dirs = directions(c)
    out = call_frule(c, args, dirs)
    y0 = c.f(*c.args, **c.kw)
    for got, want in zip(_outs(out.x), _outs(y0), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6 if c.rtol < 1e-4 else 1e-4)
    wide = [
        (np.asarray(a, np.result_type(a, np.float64)) if i in c.diff and not _is_seq(a) else a)
        for i, a in enumerate(c.args)
    ]
    wdirs = [
        d if d is None or _is_seq(d) else d.astype(np.result_type(d, np.float64)) for d in dirs
    ]

    def at(s: float) -> Any:
        y = c.f(*[axpy(a, wdirs[i], s) if i in c.diff else a for i, a in enumerate(wide)], **c.kw)
        return c.align(y, y0) if c.align is not None else y

    fd = (
        _outs(sub(at(eps), at(-eps), 0.5 / eps))
        if _is_seq(y0)
        else (sub(at(eps), at(-eps), 0.5 / eps),)
    )
    tan = _outs(out.dx) if _is_seq(y0) else (out.dx,)
    for k, (t, want) in enumerate(zip(tan, fd, strict=True)):
        if k in c.skip_out:
            continue
        y = _outs(y0)[k]
        assert t is not None, f"{c.name}: output {k} has no tangent"
        assert np.shape(t) == np.shape(y), f"{c.name}: tangent {k} shape"
        assert np.asarray(t).dtype == np.asarray(y).dtype, f"{c.name}: tangent {k} dtype"
        scale = max(1.0, float(np.max(np.abs(want), initial=0)))
        np.testing.assert_allclose(t, want, rtol=c.rtol, atol=c.rtol * scale, err_msg=c.name)


def cotangent_seed(c: Case, y: Any) -> Any:
    rng = np.random.default_rng(7)
    if not _is_seq(y):
        return rand_like(rng, y)
    return tuple(None if k in c.skip_out else rand_like(rng, e) for k, e in enumerate(y))


def project_gauge(c: Case, y: Any, yb: Any) -> Any:
    """Cotangents of complex eigen/singular vectors made phase invariant."""
    if c.align is align_eigh and np.iscomplexobj(y[1]):
        G = np.sum(np.conj(y[1]) * yb[1], axis=-2)
        return (yb[0], yb[1] - y[1] * (1j * G.imag)[..., None, :])
    if c.align is align_svd and np.iscomplexobj(y[0]):
        U, _, Vh = y
        Ub, sb, Vhb = yb
        im = np.sum(np.conj(U) * Ub, axis=-2).imag - np.sum(np.conj(Vh) * Vhb, axis=-1).imag
        return (Ub - U * (1j * im)[..., None, :], sb, Vhb)
    return yb


def check_vjp(c: Case) -> None:
    """⟨ȳ, Jẋ⟩ (frule) = ⟨x̄, ẋ⟩ (vjp), x̄ of each argument's shape and dtype, = the rrule's."""
    y, pb = rulekit.vjp_rule(c.f, *c.args, **c.kw)
    yb = project_gauge(c, y, cotangent_seed(c, y))
    cots = pb(yb)
    assert len(cots) == len(c.args)
    dirs = directions(c, 3)
    t = call_frule(c, c.args, dirs).dx
    lhs = inner(yb, t)
    rhs = sum(inner(cots[i], dirs[i]) for i in c.diff)
    assert abs(lhs - rhs) <= 1e-4 * c.rtol / 1e-6 * max(1.0, abs(lhs)), (c.name, lhs, rhs)
    for i in c.diff:
        for g, a in zip(_outs(cots[i]), _outs(c.args[i]), strict=True):
            if g is not None:
                assert np.shape(g) == np.shape(a) and np.asarray(g).dtype == np.asarray(a).dtype
    full = tuple(
        np.zeros_like(e) if b is None else b for e, b in zip(_outs(y), _outs(yb), strict=True)
    )
    dy = full if _is_seq(y) else yb

    def fixed(*xs: Any) -> Any:
        a = list(c.args)
        for i, x in zip(c.diff, xs, strict=True):
            a[i] = x
        return c.f(*a, **c.kw)

    _, want = rulekit.value_and_pullback(fixed, dy, *[c.args[i] for i in c.diff])
    for k, i in enumerate(c.diff):
        if isinstance(want[k], rulekit.NoTangent):  # the engine's: a factor tuple (c, lower)
            continue
        for g, w in zip(_outs(cots[i]), _outs(want[k]), strict=True):
            if g is None or isinstance(w, rulekit.NoTangent):
                continue
            np.testing.assert_allclose(g, w, rtol=c.rtol * 100, atol=c.rtol * 100, err_msg=c.name)


def check_traceable(c: Case, eps: float = 1e-6) -> None:
    """rulekit.grad through the frule's tangent and the pullback's cotangent = FD."""
    dirs = directions(c)
    y = c.f(*c.args, **c.kw)
    rng = np.random.default_rng(11)
    wy = rand_like(rng, y)
    if _is_seq(y):
        wy = tuple(None if k in c.skip_out else w for k, w in enumerate(wy))
    yb = project_gauge(c, y, cotangent_seed(c, y))
    wx = [rand_like(rng, a) if i in c.diff else None for i, a in enumerate(c.args)]
    argnums = tuple(c.diff)

    def full(xs: Sequence[Any]) -> list[Any]:
        a = list(c.args)
        for i, x in zip(argnums, xs, strict=True):
            a[i] = type(a[i])([x, *a[i][1:]]) if _is_seq(a[i]) else x  # factor tuples: (c, …)
        return a

    def first(x: Any) -> Any:
        return x[0] if _is_seq(x) else x

    # the registries dispatch on primal values: resolve the rules there, run them on traced ones
    frule = forward_registry.lookup_call(c.f, c.args)[1].impl
    vjp = vjp_registry.lookup_call(c.f, c.args)[1].impl

    def h_fwd(*xs: Any) -> Any:
        duals = [Dual(a, dirs[i] if i in c.diff else None) for i, a in enumerate(full(xs))]
        return _real_inner(wy, frule(Dual(c.f, None), *duals, **c.kw).dx)

    def h_rev(*xs: Any) -> Any:
        cots = vjp((True,) * len(c.args), *full(xs), **c.kw)[1](yb)
        return sum(_real_inner(wx[i], cots[i]) for i in argnums)

    for h in (h_fwd, h_rev):
        xs = [first(c.args[i]) for i in argnums]
        gs = rulekit.grad(h, argnums=tuple(range(len(xs))))(*xs)
        v = directions(c, 5)
        vs = [first(v[i]) for i in argnums]
        hp = h(*[axpy(x, d, eps) for x, d in zip(xs, vs, strict=True)])
        hm = h(*[axpy(x, d, -eps) for x, d in zip(xs, vs, strict=True)])
        fd = (hp - hm) / (2 * eps)
        got = sum(inner(g, d) for g, d in zip(gs, vs, strict=True))
        assert abs(got - fd) <= 1e-5 * max(1.0, abs(fd)), (c.name, h.__name__, got, fd)


def _real_inner(w: Any, t: Any) -> Any:
    """Re Σ conj(w)·t over a tree (traced t allowed)."""
    if w is None or t is None:
        return 0.0
    if _is_seq(w):
        return sum(_real_inner(u, v) for u, v in zip(w, t, strict=True))
    return np.sum(np.real(np.conj(w) * t))


# -- numpy.linalg cases ---------------------------------------------------------------------------

R = np.random.default_rng(1)
n_ = R.normal
la = np.linalg
tall = n_(size=(5, 3)) + 3 * np.eye(5, 3)
ctall = tall + 1j * n_(size=(5, 3))
sing = n_(size=(3, 2)) @ n_(size=(2, 3))  # rank 2
neg = wellcond(R, (3, 3))
neg[0] *= -1
E: dict[str, Any] = {"diff": (0, 1)}
CASES = [
    Case("solve", la.solve, [wellcond(R, (3, 3)), n_(size=3)], **E),
    Case("solve-mat", la.solve, [wellcond(R, (3, 3)), n_(size=(3, 2))], **E),
    Case("solve-stack", la.solve, [wellcond(R, (2, 3, 3)), n_(size=(2, 3, 2))], **E),
    Case("solve-stack-vec", la.solve, [wellcond(R, (2, 3, 3)), n_(size=3)], **E),
    Case("solve-bcast", la.solve, [wellcond(R, (3, 3)), n_(size=(2, 3, 2))], **E),
    Case("solve-c", la.solve, [wellcond(R, (3, 3), True), n_(size=3) + 1j], **E),
    Case(
        "solve-f32",
        la.solve,
        [wellcond(R, (3, 3)).astype("f4"), n_(size=3).astype("f4")],
        rtol=2e-3,
        nested=False,
        **E,
    ),
    Case("solve-A-only", la.solve, [wellcond(R, (3, 3)), n_(size=3)]),
    Case("inv", la.inv, [wellcond(R, (3, 3))]),
    Case("inv-stack", la.inv, [wellcond(R, (2, 3, 3))]),
    Case("inv-c", la.inv, [wellcond(R, (3, 3), True)]),
    Case("inv-f32", la.inv, [wellcond(R, (3, 3)).astype("f4")], rtol=2e-3, nested=False),
    Case("det", la.det, [wellcond(R, (3, 3))]),
    Case("det-stack", la.det, [wellcond(R, (2, 3, 3))]),
    Case("det-c", la.det, [wellcond(R, (3, 3), True)]),
    Case("det-singular", la.det, [sing], nested=False),  # the cofactors (plain values only)
    Case("det-singular-stack", la.det, [np.stack([sing, wellcond(R, (3, 3))])], nested=False),
    Case("slogdet", la.slogdet, [wellcond(R, (3, 3))]),
    Case("slogdet-neg", la.slogdet, [neg]),
    Case("slogdet-stack", la.slogdet, [wellcond(R, (2, 3, 3))]),
    Case("slogdet-c", la.slogdet, [wellcond(R, (2, 3, 3), True)]),
    Case("cholesky", la.cholesky, [spd(R, (3, 3))]),
    Case("cholesky-upper", la.cholesky, [spd(R, (4, 4))], {"upper": True}),
    Case("cholesky-stack", la.cholesky, [spd(R, (2, 3, 3))]),
    Case("cholesky-c", la.cholesky, [spd(R, (3, 3), True)]),
    Case("cholesky-c-upper", la.cholesky, [spd(R, (3, 3), True)], {"upper": True}),
    Case("eigh", la.eigh, [_rng_sym(1, 3)], align=align_eigh),
    Case("eigh-U", la.eigh, [_rng_sym(2, 4), "U"], align=align_eigh),
    Case("eigh-stack", la.eigh, [_rng_sym(3, 3, batch=(2,))], align=align_eigh),
    Case("eigh-c", la.eigh, [_rng_sym(4, 3, complex_=True)], align=align_eigh, nested=False),
    Case("eigvalsh", la.eigvalsh, [_rng_sym(5, 3)]),
    Case("eigvalsh-c-U", la.eigvalsh, [_rng_sym(6, 3, complex_=True), "U"]),
    Case("svd", la.svd, [_rng_svd(7, (3, 3))], align=align_svd),
    Case("svd-tall", la.svd, [_rng_svd(8, (5, 3))], {"full_matrices": False}, align=align_svd),
    Case("svd-wide", la.svd, [_rng_svd(9, (3, 5))], {"full_matrices": False}, align=align_svd),
    Case("svd-stack", la.svd, [_rng_svd(10, (2, 4, 3))], {"full_matrices": False}, align=align_svd),
    Case(
        "svd-c-tall",
        la.svd,
        [_rng_svd(11, (4, 3), True)],
        {"full_matrices": False},
        align=align_svd,
        nested=False,
    ),
    Case(
        "svd-c-wide",
        la.svd,
        [_rng_svd(12, (3, 4), True)],
        {"full_matrices": False},
        align=align_svd,
        nested=False,
    ),
    Case("svd-values", la.svd, [_rng_svd(13, (4, 3))], {"compute_uv": False}),
    Case("svd-values-c", la.svd, [_rng_svd(14, (3, 4), True)], {"compute_uv": False}),
    Case("svdvals", la.svdvals, [_rng_svd(15, (2, 3, 3))]),
    Case("qr", la.qr, [n_(size=(3, 3)) + 3 * np.eye(3)]),
    Case("qr-tall", la.qr, [n_(size=(5, 3))]),
    Case("qr-wide", la.qr, [n_(size=(3, 5))]),
    Case("qr-stack", la.qr, [n_(size=(2, 4, 3))]),
    Case("qr-c", la.qr, [n_(size=(4, 3)) + 1j * n_(size=(4, 3))]),
    Case("qr-r", la.qr, [n_(size=(4, 3)), "r"]),
    Case("qr-complete-wide", la.qr, [n_(size=(3, 4))], {"mode": "complete"}),
    Case("lstsq-vec", la.lstsq, [tall, n_(size=5)], skip_out=(2,), **E),
    Case("lstsq-mat", la.lstsq, [tall, n_(size=(5, 2))], skip_out=(2,), **E),
    Case("lstsq-square", la.lstsq, [wellcond(R, (3, 3)), n_(size=3)], skip_out=(2,), **E),
    Case("lstsq-wide", la.lstsq, [tall.T.copy(), n_(size=3)], skip_out=(2,), **E),
    Case("lstsq-c", la.lstsq, [ctall, n_(size=5) + 1j * n_(size=5)], skip_out=(2,), **E),
    Case("pinv-tall", la.pinv, [tall]),
    Case("pinv-wide", la.pinv, [tall.T.copy()]),
    Case("pinv-c", la.pinv, [ctall]),
    Case("pinv-herm", la.pinv, [spd(R, (3, 3))], {"hermitian": True}),
    Case("norm", la.norm, [n_(size=(3, 4))]),
    Case("norm-vec-c", la.norm, [n_(size=5) + 1j * n_(size=5)]),
    Case("norm-1", la.norm, [n_(size=5), 1]),
    Case("norm-inf", la.norm, [n_(size=5), np.inf]),
    Case("norm-p3-axis", la.norm, [n_(size=(3, 4)), 3], {"axis": 0, "keepdims": True}),
    Case("norm-fro", la.norm, [n_(size=(3, 4)), "fro"]),
    Case("norm-nuc", la.norm, [n_(size=(3, 4)), "nuc"]),
    Case("norm-2", la.norm, [n_(size=(2, 3, 4)), 2], {"axis": (1, 2)}),
    Case("norm-m2", la.norm, [n_(size=(3, 4)), -2]),
    Case("norm-m1", la.norm, [n_(size=(3, 4)), 1]),
    Case("norm-minf-c", la.norm, [n_(size=(3, 4)) + 1j * n_(size=(3, 4)), np.inf]),
    Case("norm-3d", la.norm, [n_(size=(2, 3, 4))]),
    Case("norm-ord-tangent", la.norm, [n_(size=(3, 4)), 3.0], {"axis": 1}, diff=(0, 1)),
    *[
        Case(f"matrix_power-{p}", la.matrix_power, [n_(size=(3, 3)) / 2 + np.eye(3), p])
        for p in (0, 1, 2, 3, 5, 6, -1, -3)
    ],
    Case("matrix_power-stack", la.matrix_power, [n_(size=(2, 3, 3)) / 2 + np.eye(3), 4]),
    Case("matrix_power-c", la.matrix_power, [wellcond(R, (3, 3), True) / 3, 3]),
    Case("multi_dot", la.multi_dot, [[n_(size=(2, 3)), n_(size=(3, 4)), n_(size=(4, 2))]]),
    Case("multi_dot-vec", la.multi_dot, [[n_(size=3), n_(size=(3, 4)), n_(size=4)]]),
    Case("multi_dot-c", la.multi_dot, [(n_(size=(2, 2)) + 1j, n_(size=(2, 3)), n_(size=(3, 2)))]),
]
LAYOUTS = ("C", "F", "S", "N")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_frule_matches_finite_differences(case: Case, layout: str) -> None:
    check_frule_fd(case, layout)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_vjp_matches_frule_and_rrule(case: Case) -> None:
    check_vjp(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.nested], ids=repr)
def test_rules_are_traceable(case: Case) -> None:
    check_traceable(case)


def test_refusals() -> None:
    a = n_(size=(4, 3))
    with pytest.raises(NotImplementedError, match="full_matrices"):
        rulekit.frule(Dual(la.svd, None), Dual(a, a))
    with pytest.raises(NotImplementedError, match="hermitian"):
        rulekit.vjp_rule(la.svd, spd(R, (3, 3)), hermitian=True)
    with pytest.raises(NotImplementedError, match="complete"):
        rulekit.frule(Dual(la.qr, None), Dual(a, a), Dual("complete", None))


def test_degenerate_spectrum() -> None:
    """Repeated eigenvalues: the values' tangent is finite, the vectors' is NaN where it does
    not exist; the pullback of a vector cotangent raises (as the reverse rule)."""
    from rules._support.linalg import DegenerateSpectrumError

    a, d = np.diag([1.0, 1.0, 2.0]), n_(size=(3, 3))
    t = rulekit.frule(Dual(la.eigh, None), Dual(a, d + d.T)).dx
    assert np.all(np.isfinite(t[0])) and np.isnan(t[1]).any()
    _, pb = rulekit.vjp_rule(la.eigh, a)
    with pytest.raises(DegenerateSpectrumError):
        pb((None, n_(size=(3, 3))))
    assert np.all(np.isfinite(pb((np.ones(3), None))[0]))


@pytest.mark.parametrize(
    "f", [la.inv, la.det, la.slogdet, la.cholesky, la.eigh, la.svd, la.qr], ids=lambda f: f.__name__
)
def test_empty_stacks(f: Any) -> None:
    """A zero-size stack: both rules return empty tangents/cotangents of the right shapes."""
    z = np.zeros((0, 3, 3))
    y = f(z)
    t = rulekit.frule(Dual(f, None), Dual(z, np.ones_like(z))).dx
    for ti, yi in zip(_outs(t), _outs(y), strict=True):
        assert np.shape(ti) == np.shape(yi)
    _, pb = rulekit.vjp_rule(f, z)
    yb = tuple(np.ones_like(e) for e in y) if _is_seq(y) else np.ones_like(y)
    assert pb(yb)[0].shape == z.shape
