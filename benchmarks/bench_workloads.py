"""The eight workloads of issue 15, side by side: ratios to a hand-written, preallocated NumPy
value + gradient (lower is better), single-threaded, in interleaved rounds.

    python benchmarks/bench_workloads.py                    # rulekit only: peers "not installed"
    python benchmarks/bench_workloads.py --rounds 20 --only rosen    # quicker, a subset
    PEERS/bin/python benchmarks/bench_workloads.py          # with autograd, torch and jax

where PEERS is a virtual environment of its own: `python -m venv PEERS`, then
`PEERS/bin/pip install torch==2.13.0` alone first (a CPU wheel; other versions may pull
CUDA builds of several GB), then `PEERS/bin/pip install "jax[cpu]" autograd` and
`PEERS/bin/pip install -e ".[test]"` from the checkout.

Systems: the hand-written baseline (buffers allocated once, `out=` everywhere; it is checked
against finite differences of the workload's definition here), rulekit `value_and_grad`
eager and with `compile=True` (each also with `copy=False`), and the peers HIPS autograd,
PyTorch eager (CPU) and `jax.jit(jax.value_and_grad(f))`, which live in a separate
environment and are never rulekit dependencies. Before timing, every system's value and
gradient are checked against the baseline on two input sets (the first again after the
second), so a replay that returns stale or wrong results is reported as WRONG, not timed.

Timing: each round times every system once (a batch of consecutive calls of about
--batch-ms, the order rotated from round to round); a row reports the median over rounds of
the system's time divided by the baseline's time in the same round (and, in the last table,
the quartiles of those ratios), and the median time per call. First (second) call: of a
fresh object, before the checks (trace + compile for compile=True and jax; numba's disk
cache as found; rulekit's objects are made and called in the order of the columns, so
compile=True's first call finds the rules eager use loaded).
Allocations: numpy data buffers per warm call (`testutils.count_allocations`, NEP 49).
Garbage collection stays on, as in use.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import argparse  # noqa: E402
import importlib.metadata  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from functools import partial  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

try:
    import rulekit
except ImportError:  # run from a checkout whose editable install points elsewhere
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import rulekit
from bench_engine import gemm, seed  # noqa: E402  (the definitions measured before)

from testutils import count_allocations  # noqa: E402

Args = tuple[Any, ...]
Result = tuple[Any, tuple[Any, ...]]

# -- the workloads, written once for any NumPy-like namespace `xp` ---------------------------


def gemm_x(xp: Any) -> Callable[..., Any]:
    if hasattr(xp, "addmm"):  # torch: its fused C ← αAB + βC, as in bench_engine
        return lambda A, B, C: xp.sum(xp.sin(xp.addmm(C, A, B, beta=0.5, alpha=1.5)))
    return lambda A, B, C: xp.sum(xp.sin(1.5 * (A @ B) + 0.5 * C))


def seed_x(xp: Any) -> Callable[..., Any]:
    return lambda A, B: -2.5 * xp.sum(xp.log1p(0.25 * (A @ B - 18) ** 2))


def rosen_x(xp: Any) -> Callable[..., Any]:
    return lambda x: xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def mlp_x(xp: Any) -> Callable[..., Any]:
    def mlp(W1: Any, b1: Any, W2: Any, b2: Any, W3: Any, b3: Any, X: Any, Y: Any) -> Any:
        h1 = xp.tanh(X @ W1 + b1)
        h2 = xp.tanh(h1 @ W2 + b2)
        z = h2 @ W3 + b3
        z = z - xp.max(z, axis=1, keepdims=True)
        logp = z - xp.log(xp.sum(xp.exp(z), axis=1, keepdims=True))
        return -xp.sum(Y * logp) / X.shape[0]

    return mlp


def rnn_x(xp: Any) -> Callable[..., Any]:
    def rnn(W: Any, U: Any, b: Any, xs: Any) -> Any:
        h = xp.zeros(W.shape[0])
        for t in range(xs.shape[0]):
            h = xp.tanh(W @ h + U @ xs[t] + b)
        return xp.sum(h**2)

    return rnn


def logreg_x(xp: Any) -> Callable[..., Any]:
    def logreg(w: Any, X: Any, y: Any) -> Any:
        z = X @ w
        return xp.mean(xp.logaddexp(0.0, z) - y * z)

    return logreg


def small_x(xp: Any) -> Callable[..., Any]:
    def small(x: Any) -> Any:  # 20 elementwise operations, then a sum
        y = xp.sin(x) * x
        y = xp.log(xp.exp(y) + 1.0) * 0.5
        y = xp.tanh(xp.cos(y) - x)
        y = xp.sin(y * y + x) * 2.0
        y = xp.tanh(xp.exp(y) - 1.0) * x
        y = xp.cos(y) + 0.1
        return xp.sum(y * y)

    return small


def _inputs(rng: np.random.Generator) -> dict[str, tuple[Any, Args, tuple[int, ...], Any]]:
    """name -> (definition for `xp`, arguments, argnums, rulekit function or None)."""

    def mlp_args() -> Args:
        X = rng.standard_normal((64, 256))
        Y = np.eye(10)[rng.integers(0, 10, 64)]
        ws = []
        for m, n in ((256, 256), (256, 256), (256, 10)):
            ws += [rng.standard_normal((m, n)) / np.sqrt(m), 0.1 * rng.standard_normal(n)]
        return (*ws, X, Y)

    def logreg_args() -> Args:
        X = rng.standard_normal((10_000, 50))
        p = 1.0 / (1.0 + np.exp(-X @ (0.3 * rng.standard_normal(50))))
        return 0.1 * rng.standard_normal(50), X, (rng.random(10_000) < p).astype(float)

    def rnn_args() -> Args:
        return (
            0.2 * rng.standard_normal((32, 32)),
            0.2 * rng.standard_normal((32, 16)),
            0.1 * rng.standard_normal(32),
            rng.standard_normal((50, 16)),
        )

    n = rng.standard_normal
    return {
        "gemm rule 16×32×8": (gemm_x, (n((16, 32)), n((32, 8)), n((16, 8))), (0, 1, 2), gemm),
        "seed loop 72×72": (seed_x, (n((72, 72)), n((72, 72))), (0, 1), seed),
        "Rosenbrock n=1,000": (rosen_x, (rng.uniform(-1.5, 1.5, 1000),), (0,), None),
        "Rosenbrock n=100,000": (rosen_x, (rng.uniform(-1.5, 1.5, 100_000),), (0,), None),
        "MLP 64×256-256-10": (mlp_x, mlp_args(), (0, 1, 2, 3, 4, 5), None),
        "RNN, 50 steps, H=32": (rnn_x, rnn_args(), (0, 1, 2), None),
        "logistic regression 10⁴×50": (logreg_x, logreg_args(), (0,), None),
        "20 elementwise ops on 10 values": (small_x, (rng.uniform(-1, 1, 10),), (0,), None),
    }


# -- the baseline: hand-written value + gradient, buffers allocated once, `out=` everywhere ----


class GemmHand:
    """D = 1.5·AB + 0.5·C, L = Σ sin D; Ḡ = cos D: Ā = 1.5·ḠBᵀ, B̄ = 1.5·AᵀḠ, C̄ = 0.5·Ḡ."""

    def __init__(self, A: Any, B: Any, C: Any) -> None:
        self.D, self.T = np.empty_like(C), np.empty_like(C)
        self.gA, self.gB, self.gC = np.empty_like(A), np.empty_like(B), np.empty_like(C)

    def __call__(self, A: Any, B: Any, C: Any) -> Result:
        D, T = self.D, self.T
        np.matmul(A, B, out=D)
        D *= 1.5
        np.multiply(C, 0.5, out=T)
        D += T
        value = np.sin(D, out=T).sum()
        G = np.cos(D, out=D)
        np.multiply(np.matmul(G, B.T, out=self.gA), 1.5, out=self.gA)
        np.multiply(np.matmul(A.T, G, out=self.gB), 1.5, out=self.gB)
        np.multiply(G, 0.5, out=self.gC)
        return value, (self.gA, self.gB, self.gC)


class SeedHand:
    """D = AB − 18, u = D²/4, L = −2.5·Σ log1p u; Ḡ = −1.25·D/(1 + u): Ā = ḠBᵀ, B̄ = AᵀḠ."""

    def __init__(self, A: Any, B: Any) -> None:
        self.D, self.U, self.T = (np.empty((A.shape[0], B.shape[1])) for _ in range(3))
        self.gA, self.gB = np.empty_like(A), np.empty_like(B)

    def __call__(self, A: Any, B: Any) -> Result:
        D, U = self.D, self.U
        np.matmul(A, B, out=D)
        D -= 18.0
        np.multiply(D, D, out=U)
        U *= 0.25
        value = -2.5 * np.log1p(U, out=self.T).sum()
        U += 1.0
        np.divide(D, U, out=D)
        D *= -1.25
        np.matmul(D, B.T, out=self.gA)
        np.matmul(A.T, D, out=self.gB)
        return value, (self.gA, self.gB)


class RosenHand:
    """r = x₁: − x:₋₁², s = 1 − x:₋₁, L = 100·r·r + s·s; ḡ:₋₁ = −400·r·x:₋₁ − 2s, ḡ₁: += 200r."""

    def __init__(self, x: Any) -> None:
        self.r, self.s, self.g = np.empty(x.size - 1), np.empty(x.size - 1), np.empty_like(x)

    def __call__(self, x: Any) -> Result:
        r, s, g = self.r, self.s, self.g
        a = x[:-1]
        np.multiply(a, a, out=r)
        np.subtract(x[1:], r, out=r)
        np.subtract(1.0, a, out=s)
        value = 100.0 * np.dot(r, r) + np.dot(s, s)
        head = g[:-1]
        np.multiply(r, a, out=head)
        head *= -400.0
        s *= 2.0
        head -= s
        g[-1] = 0.0
        r *= 200.0
        np.add(g[1:], r, out=g[1:])
        return value, (g,)


class MLPHand:
    """Softmax cross-entropy of a tanh MLP: Z̄ = (softmax(Z)·ΣY − Y)/n, then for each layer
    W̄ = HᵀĀ, b̄ = Σ Ā, H̄ = ĀWᵀ, Ā(below) = H̄·(1 − H²)."""

    def __init__(self, *args: Any) -> None:
        W1, b1, W2, b2, W3, b3, X, _ = args
        n = X.shape[0]
        self.H1, self.A1, self.T1 = (np.empty((n, W1.shape[1])) for _ in range(3))
        self.H2, self.A2, self.T2 = (np.empty((n, W2.shape[1])) for _ in range(3))
        self.Z, self.E = np.empty((n, W3.shape[1])), np.empty((n, W3.shape[1]))
        self.m, self.s, self.ys = (np.empty((n, 1)) for _ in range(3))
        self.g = tuple(np.empty_like(a) for a in (W1, b1, W2, b2, W3, b3))

    def __call__(self, *args: Any) -> Result:
        W1, b1, W2, b2, W3, b3, X, Y = args
        H1, H2, Z, E, m, s, ys = self.H1, self.H2, self.Z, self.E, self.m, self.s, self.ys
        gW1, gb1, gW2, gb2, gW3, gb3 = self.g
        n = X.shape[0]
        for inp, W, b, H in ((X, W1, b1, H1), (H1, W2, b2, H2)):
            np.matmul(inp, W, out=H)
            H += b
            np.tanh(H, out=H)
        np.matmul(H2, W3, out=Z)
        Z += b3
        np.max(Z, axis=1, keepdims=True, out=m)
        Z -= m
        np.exp(Z, out=E)
        np.sum(E, axis=1, keepdims=True, out=s)
        np.sum(Y, axis=1, keepdims=True, out=ys)
        np.log(s, out=m)
        value = -(np.vdot(Y, Z) - np.vdot(m, ys)) / n
        E /= s
        E *= ys
        E -= Y
        E *= 1.0 / n  # Z̄
        np.matmul(H2.T, E, out=gW3)
        np.sum(E, axis=0, out=gb3)
        for Abar, Abelow, H, T, W, inp, gW, gb in (
            (E, self.A2, H2, self.T2, W3, H1, gW2, gb2),
            (self.A2, self.A1, H1, self.T1, W2, X, gW1, gb1),
        ):
            np.matmul(Abar, W.T, out=Abelow)
            np.multiply(H, H, out=T)
            np.subtract(1.0, T, out=T)
            Abelow *= T
            np.matmul(inp.T, Abelow, out=gW)
            np.sum(Abelow, axis=0, out=gb)
        return value, self.g


class RNNHand:
    """h₀ = 0, hₜ₊₁ = tanh(W hₜ + U xₜ + b), L = Σ h_T²; h̄_T = 2h_T, āₜ = h̄ₜ₊₁·(1 − hₜ₊₁²),
    h̄ₜ = Wᵀāₜ; W̄ = Σ āₜhₜᵀ, Ū = Σ āₜxₜᵀ, b̄ = Σ āₜ (one GEMM each over the stacked steps)."""

    def __init__(self, W: Any, U: Any, b: Any, xs: Any) -> None:
        T, H = xs.shape[0], W.shape[0]
        self.HS, self.UX, self.S, self.DA = (
            np.empty((T + 1, H)),
            np.empty((T, H)),
            np.empty((T, H)),
            np.empty((T, H)),
        )
        self.dh, self.gb = np.empty(H), np.empty_like(b)
        self.gW, self.gU = np.empty_like(W), np.empty_like(U)

    def __call__(self, W: Any, U: Any, b: Any, xs: Any) -> Result:
        HS, UX, S, DA, dh = self.HS, self.UX, self.S, self.DA, self.dh
        T = xs.shape[0]
        np.matmul(xs, U.T, out=UX)
        UX += b
        HS[0] = 0.0
        for t in range(T):
            a = np.matmul(W, HS[t], out=HS[t + 1])
            a += UX[t]
            np.tanh(a, out=a)
        hT = HS[T]
        value = np.dot(hT, hT)
        np.multiply(HS[1:], HS[1:], out=S)
        np.subtract(1.0, S, out=S)
        np.multiply(hT, 2.0, out=dh)
        for t in range(T - 1, -1, -1):
            np.multiply(dh, S[t], out=DA[t])
            np.matmul(DA[t], W, out=dh)  # Wᵀ āₜ
        np.matmul(DA.T, HS[:-1], out=self.gW)
        np.matmul(DA.T, xs, out=self.gU)
        np.sum(DA, axis=0, out=self.gb)
        return value, (self.gW, self.gU, self.gb)


class LogRegHand:
    """z = Xw, L = mean(logaddexp(0, z) − y·z); w̄ = Xᵀ(σ(z) − y)/n,
    σ(z) = exp(z − logaddexp(0, z))."""

    def __init__(self, w: Any, X: Any, y: Any) -> None:
        self.z, self.t, self.g = np.empty(X.shape[0]), np.empty(X.shape[0]), np.empty_like(w)

    def __call__(self, w: Any, X: Any, y: Any) -> Result:
        z, t, n = self.z, self.t, X.shape[0]
        np.matmul(X, w, out=z)
        np.logaddexp(0.0, z, out=t)
        value = (t.sum() - np.dot(y, z)) / n
        np.subtract(z, t, out=t)
        np.exp(t, out=t)
        t -= y
        np.matmul(t, X, out=self.g)
        self.g *= 1.0 / n
        return value, (self.g,)


class SmallHand:
    """The 20 operations of `small_x` forward, each result kept (yₖ = row k−1 of Y), and their
    adjoints backward: ȳ₁₉ = 2y₁₉, then each operation's local derivative in turn."""

    def __init__(self, x: Any) -> None:
        self.Y = np.empty((20, x.size))
        self.g, self.gx, self.t = (np.empty_like(x) for _ in range(3))

    def __call__(self, x: Any) -> Result:
        Y, g, gx, t = self.Y, self.g, self.gx, self.t
        y = [None, *Y]  # y[k] is the result of operation k
        np.sin(x, out=y[1]), np.multiply(y[1], x, out=y[2]), np.exp(y[2], out=y[3])
        np.add(y[3], 1.0, out=y[4]), np.log(y[4], out=y[5]), np.multiply(y[5], 0.5, out=y[6])
        np.cos(y[6], out=y[7]), np.subtract(y[7], x, out=y[8]), np.tanh(y[8], out=y[9])
        np.multiply(y[9], y[9], out=y[10]), np.add(y[10], x, out=y[11]), np.sin(y[11], out=y[12])
        np.multiply(y[12], 2.0, out=y[13]), np.exp(y[13], out=y[14])
        np.subtract(y[14], 1.0, out=y[15]), np.tanh(y[15], out=y[16])
        np.multiply(y[16], x, out=y[17]), np.cos(y[17], out=y[18]), np.add(y[18], 0.1, out=y[19])
        value = np.dot(y[19], y[19])  # op 20 and the sum
        np.multiply(y[19], 2.0, out=g)  # ȳ₁₉ (op 19 passes it to ȳ₁₈)
        g *= np.sin(y[17], out=t)
        np.negative(g, out=g)  # ȳ₁₇
        np.multiply(g, y[16], out=gx)
        g *= x  # ȳ₁₆
        for k in (16, 9):  # tanh: ȳ₁₅ = ȳ₁₆(1 − y₁₆²), later ȳ₈ = ȳ₉(1 − y₉²)
            np.multiply(y[k], y[k], out=t)
            np.subtract(1.0, t, out=t)
            g *= t
            if k == 16:
                g *= y[14]  # ȳ₁₃
                g *= 2.0  # ȳ₁₂
                g *= np.cos(y[11], out=t)  # ȳ₁₁
                gx += g  # ȳ₁₀ = ȳ₁₁
                g *= y[9]
                g *= 2.0  # ȳ₉
        gx -= g  # ȳ₇ = ȳ₈
        g *= np.sin(y[6], out=t)
        np.negative(g, out=g)  # ȳ₆
        g *= 0.5
        g /= y[4]  # ȳ₃ = ȳ₄
        g *= y[3]  # ȳ₂
        gx += np.multiply(g, y[1], out=t)
        g *= x  # ȳ₁
        gx += np.multiply(g, np.cos(x, out=t), out=t)
        return value, (gx,)


HANDS = {"gemm": GemmHand, "seed": SeedHand, "Rosenbrock": RosenHand, "MLP": MLPHand,
         "RNN": RNNHand, "logistic": LogRegHand, "20": SmallHand}  # fmt: skip


# -- systems: prepare(args) once, then call(prepared) -> (value, gradients) ------------------


class System:
    """prepare(args) turns NumPy arguments into the system's own, once; call(prepared) runs."""

    def __init__(self, prepare: Callable[[Args], Any], call: Callable[[Any], Any]) -> None:
        self.prepare, self.call = prepare, call


def rulekit_system(f: Callable[..., Any], argnums: tuple[int, ...], **kw: Any) -> System:
    """Raises TypeError where this rulekit has no such option (compile=True before it lands)."""
    vg = rulekit.value_and_grad(f, argnums=argnums, **kw)
    return System(lambda a: a, lambda a: vg(*a))


class TorchNumpy:
    """The few NumPy spellings the workloads use, in torch."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.torch, name)

    def sum(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        t = self.torch
        return t.sum(x) if axis is None else t.sum(x, dim=axis, keepdim=keepdims)

    def max(self, x: Any, axis: int, keepdims: bool = False) -> Any:
        return self.torch.amax(x, dim=axis, keepdim=keepdims)

    def zeros(self, n: int) -> Any:
        return self.torch.zeros(n, dtype=self.torch.float64)

    def logaddexp(self, a: float, z: Any) -> Any:
        return self.torch.logaddexp(self.torch.full((), a, dtype=z.dtype), z)


def peers(defn: Any, argnums: tuple[int, ...]) -> dict[str, System | str]:
    """The peers that are installed; a string says why one is missing."""
    out: dict[str, System | str] = {}
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        out["autograd"] = "not installed"
    else:
        f = defn(anp)

        def packed(params: Any, *rest: Any) -> Any:  # autograd differentiates one argument
            full = list(rest)
            for i, p in zip(argnums, params, strict=True):
                full.insert(i, p)
            return f(*full)

        avg = autograd.value_and_grad(packed)

        def aprep(a: Args) -> Any:
            return tuple(a[i] for i in argnums), [a[i] for i in range(len(a)) if i not in argnums]

        out["autograd"] = System(aprep, lambda p: avg(p[0], *p[1]))
    try:
        import torch
    except ImportError:
        out["torch eager"] = "not installed"
    else:
        torch.set_num_threads(1)
        tf = defn(TorchNumpy(torch))

        def tprep(a: Args) -> Any:
            ins = [torch.from_numpy(x).requires_grad_(i in argnums) for i, x in enumerate(a)]
            return ins, [ins[i] for i in argnums]

        def tcall(p: Any) -> Any:
            loss = tf(*p[0])
            gs = torch.autograd.grad(loss, p[1])
            return loss.item(), tuple(g.numpy() for g in gs)

        out["torch eager"] = System(tprep, tcall)
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        out["jax jit"] = "not installed"
    else:
        jax.config.update("jax_enable_x64", True)
        jvg = jax.jit(jax.value_and_grad(defn(jnp), argnums=argnums))
        out["jax jit"] = System(
            lambda a: [jnp.asarray(x) for x in a],
            lambda p: jax.block_until_ready(jvg(*p)),
        )
    return out


# -- checking ---------------------------------------------------------------------------------


def fd_check(f: Callable[..., Any], args: Args, argnums: tuple[int, ...], res: Result) -> None:
    """The baseline against 5-point central differences of the definition `f`: two random unit
    directions and ten coordinates (first, last, 8 random) per differentiated argument. The
    tolerance is 1e-8·‖g‖ plus the rounding error of the differences (a sum of N terms
    evaluated to ~4ε|f|√N, over the step); the errors measured are below 1/200 of it."""
    rng = np.random.default_rng(1)
    value, grads = res
    assert np.isclose(f(*args), value, rtol=1e-12, atol=0), ("value", f(*args), value)
    for k, i in enumerate(argnums):
        x, g = args[i], grads[k]
        dirs = [rng.standard_normal(x.shape) for _ in range(2)]
        for j in {0, x.size - 1, *rng.integers(x.size, size=8).tolist()}:
            dirs.append(np.zeros(x.shape))
            dirs[-1].flat[j] = 1.0
        tol = 1e-8 * np.linalg.norm(g) + 4e-16 * abs(value) * np.sqrt(x.size) / 1e-3
        for v in dirs:
            v /= np.linalg.norm(v)
            h = 1e-3

            def at(s: float, v: np.ndarray = v, i: int = i, x: Any = x) -> float:
                return float(f(*args[:i], x + s * v, *args[i + 1 :]))

            fd = (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)
            assert abs(fd - np.vdot(g, v)) <= tol, (i, fd, np.vdot(g, v), tol)


def snapshot(res: Any) -> Result:
    value, grads = res
    return float(value), tuple(np.array(g, dtype=float) for g in grads)


def agree(res: Any, ref: Result) -> None:
    value, grads = snapshot(res)
    np.testing.assert_allclose(value, ref[0], rtol=1e-9, err_msg="value")
    assert len(grads) == len(ref[1]), (len(grads), len(ref[1]))
    for k, (g, r) in enumerate(zip(grads, ref[1], strict=True)):
        atol = 1e-9 * float(np.abs(r).max(initial=1e-300))
        np.testing.assert_allclose(g, r, rtol=1e-7, atol=atol, err_msg=f"gradient {k}")


# -- timing -----------------------------------------------------------------------------------


def measure(
    runs: dict[str, Callable[[], Any]], rounds: int, batch: float
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Median seconds per call, and the quartiles of the per-round ratios to "hand"."""
    number = {}
    for name, run in runs.items():
        run()
        t0 = time.perf_counter()
        run()
        number[name] = max(1, round(batch / max(time.perf_counter() - t0, 1e-7)))
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            run, n = runs[name], number[name]
            t0 = time.perf_counter()
            for _ in range(n):
                run()
            times[name].append((time.perf_counter() - t0) / n)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    ratio = {
        name: statistics.quantiles([t / h for t, h in zip(ts, times["hand"], strict=True)], n=4)
        for name, ts in times.items()
    }
    return med, ratio


RK = ("rulekit", "rulekit copy=False", "compile=True", "compile=True copy=False")
PEERS = ("autograd", "torch eager", "jax jit")


def workload(name: str, spec: Any, opts: argparse.Namespace) -> dict[str, Any]:
    """Check the baseline, then every system against it; time those that agree."""
    defn, args, argnums, rk_f = spec
    f = rk_f or defn(np)
    args2 = tuple(
        a + 0.01 * np.random.default_rng(2).standard_normal(a.shape) if i in argnums else a
        for i, a in enumerate(args)
    )
    hand = HANDS[name.split()[0].rstrip(",")](*args)
    refs = [snapshot(hand(*a)) for a in (args, args2)]
    fd_check(f, args, argnums, refs[0])
    fd_check(f, args2, argnums, refs[1])
    cell: dict[str, Any] = {}  # system -> a string when it is not timed
    first: dict[str, float] = {}
    second: dict[str, float] = {}
    systems: dict[str, System] = {"hand": System(lambda a: a, lambda a: hand(*a))}
    kws: tuple[dict[str, bool], ...] = (
        {},
        {"copy": False},
        {"compile": True},
        {"compile": True, "copy": False},
    )
    for label, kw in zip(RK, kws, strict=True):
        try:
            systems[label] = rulekit_system(f, argnums, **kw)
        except TypeError as e:
            cell[label] = "n/a"
            print(f"  {label}: {e}", file=sys.stderr)
    for label, s in peers(defn, argnums).items():
        if isinstance(s, str):
            cell[label] = s
        else:
            systems[label] = s
    prepared: dict[str, Any] = {}
    for label, s in list(systems.items()):
        try:
            p1, p2 = s.prepare(args), s.prepare(args2)
            t0 = time.perf_counter()
            out = s.call(p1)
            first[label] = time.perf_counter() - t0
            agree(out, refs[0])
            t0 = time.perf_counter()
            out = s.call(p1)
            second[label] = time.perf_counter() - t0
            agree(out, refs[0])
            for p, ref in ((p2, refs[1]), (p1, refs[0]), (p1, refs[0])):
                agree(s.call(p), ref)  # a changed input, and back
        except AssertionError as e:
            cell[label] = "WRONG"
            print(f"  {name}: {label} disagrees with the baseline: {e}", file=sys.stderr)
            del systems[label]
        except Exception as e:  # a system that cannot run this workload is reported, not fatal
            cell[label] = f"error ({type(e).__name__})"
            print(f"  {name}: {label}: {type(e).__name__}: {e}", file=sys.stderr)
            del systems[label]
        else:
            prepared[label] = p1
    runs: dict[str, Callable[[], Any]] = {
        k: partial(s.call, prepared[k]) for k, s in systems.items()
    }
    med, ratio = measure(runs, opts.rounds, opts.batch_ms / 1e3)
    allocs = {k: count_allocations(runs[k]) for k in ("hand", *RK) if k in runs}
    return {"med": med, "ratio": ratio, "cell": cell, "first": first, "second": second,
            "allocs": allocs, "load": os.getloadavg()[0]}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=200, help="interleaved rounds (default 200)")
    p.add_argument("--batch-ms", type=float, default=10.0, help="ms per batch (default 10)")
    p.add_argument("--only", default="", help="run the workloads whose name contains this")
    opts = p.parse_args()
    versions = [f"python {sys.version.split()[0]}", f"numpy {np.__version__}"]
    for mod in ("torch", "jax", "autograd"):
        try:
            versions.append(f"{mod} {importlib.metadata.version(mod)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{mod} not installed")
    print(", ".join(versions) + f"; BLAS threads {os.environ['OMP_NUM_THREADS']}")
    print(f"{opts.rounds} rounds, batches of ~{opts.batch_ms} ms; load at start {os.getloadavg()}")
    results = {}
    for name, spec in _inputs(np.random.default_rng(0)).items():
        if opts.only.lower() in name.lower():
            print(f"  {name} ...", file=sys.stderr, flush=True)
            results[name] = workload(name, spec, opts)
    cols = (*RK, *PEERS)
    print("\n| workload | hand-written (µs) | " + " | ".join(cols) + " | load |")
    print("|---" * (len(cols) + 3) + "|")
    for name, r in results.items():
        cells = [r["cell"].get(c) or f"{r['ratio'][c][1]:.2f}×" for c in cols]
        hand = f"{r['med']['hand'] * 1e6:.1f}"
        print(f"| {name} | {hand} | " + " | ".join(cells) + f" | {r['load']:.2f} |")
    print("\nMedian µs per call; first (second) call in ms; numpy allocations per warm call:\n")
    fcols = ("rulekit", "compile=True", "jax jit")
    print("| workload | hand-written | " + " | ".join(cols) + " | "
          + " | ".join(f"{c} first (second) call" for c in fcols) + " | allocations: "
          + " / ".join(("hand", *RK)) + " |\n" + "|---" * (len(cols) + 6) + "|")  # fmt: skip
    for name, r in results.items():
        us = [r["cell"].get(c) or f"{r['med'][c] * 1e6:.1f}" for c in ("hand", *cols)]
        fc = [f"{r['first'][c] * 1e3:.1f} ({r['second'][c] * 1e3:.2f})" if c in r["first"]
              else r["cell"].get(c, "n/a") for c in fcols]  # fmt: skip
        al = [f"{a.count} ({a.bytes} B)" for a in r["allocs"].values()]
        print(f"| {name} | " + " | ".join(us + fc) + f" | {' / '.join(al)} |")
    print("\nThe spread: first and third quartiles of the per-round ratios:\n")
    print("| workload | " + " | ".join(cols) + " |\n" + "|---" * (len(cols) + 1) + "|")
    for name, r in results.items():
        q = [r["cell"].get(c) or "{0:.2f}–{2:.2f}".format(*r["ratio"][c]) for c in cols]
        print(f"| {name} | " + " | ".join(q) + " |")
    print(f"\nload at end {os.getloadavg()}")
    return 1 if any("WRONG" in str(r["cell"]) for r in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
