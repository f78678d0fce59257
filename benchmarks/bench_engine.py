"""value_and_grad on five workloads, side by side with a hand-written NumPy gradient and peers.

Run (peers are optional; each one missing is reported as such):

    python benchmarks/bench_engine.py            # rulekit and hand-written numpy only
    /path/to/venv-with-peers/bin/python benchmarks/bench_engine.py
    OMP_NUM_THREADS=2 python benchmarks/bench_engine.py   # BLAS with two threads

Peers: HIPS autograd, PyTorch (CPU, eager), JAX (jit and eager). They are
benchmark-only and never dependencies of rulekit. Every figure is the best of
several repeats, reported as a ratio to the hand-written NumPy gradient
(lower is better); single thread for every system unless OMP_NUM_THREADS says otherwise.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import sys  # noqa: E402
import timeit  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import rulekit  # noqa: E402
import rules  # noqa: E402
import rules.blas.routines  # noqa: E402

RNG = np.random.default_rng(0)

# -- workloads: (numpy code for rulekit, hand-written value+gradient, inputs) --------------


def seed(A: Any, B: Any) -> Any:
    return -2.5 * np.sum(np.log1p(0.25 * (A @ B - 18) ** 2))


def seed_hand(A: np.ndarray, B: np.ndarray) -> Any:
    D = A @ B - 18
    u = 0.25 * D**2
    G = -1.25 * D / (1 + u)
    return -2.5 * np.sum(np.log1p(u)), (G @ B.T, A.T @ G)


def mlp(W1: Any, b1: Any, W2: Any, X: Any, Y: Any) -> Any:
    h = np.tanh(X @ W1 + b1)
    z = h @ W2
    z = z - np.max(z, axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.sum(Y * logp) / X.shape[0]


def mlp_hand(W1: Any, b1: Any, W2: Any, X: Any, Y: Any) -> Any:
    h = np.tanh(X @ W1 + b1)
    z = h @ W2
    z = z - np.max(z, axis=1, keepdims=True)
    e = np.exp(z)
    s = np.sum(e, axis=1, keepdims=True)
    logp = z - np.log(s)
    n = X.shape[0]
    dz = (e / s * np.sum(Y, axis=1, keepdims=True) - Y) / n
    dW2 = h.T @ dz
    dpre = (dz @ W2.T) * (1 - h**2)
    return -np.sum(Y * logp) / n, (X.T @ dpre, dpre.sum(axis=0), dW2)


def rnn(Wh: Any, Wx: Any, xs: Any) -> Any:
    h = np.zeros(Wh.shape[0])
    for t in range(xs.shape[0]):
        h = np.tanh(Wh @ h + Wx @ xs[t])
    return np.sum(h**2)


def rnn_hand(Wh: Any, Wx: Any, xs: Any) -> Any:
    hs = [np.zeros(Wh.shape[0])]
    for t in range(xs.shape[0]):
        hs.append(np.tanh(Wh @ hs[-1] + Wx @ xs[t]))
    dh = 2 * hs[-1]
    dWh, dWx, dxs = np.zeros_like(Wh), np.zeros_like(Wx), np.zeros_like(xs)
    for t in range(xs.shape[0] - 1, -1, -1):
        da = dh * (1 - hs[t + 1] ** 2)
        dWh += np.outer(da, hs[t])
        dWx += np.outer(da, xs[t])
        dxs[t] = Wx.T @ da
        dh = Wh.T @ da
    return np.sum(hs[-1] ** 2), (dWh, dWx, dxs)


def inplace(x: Any, y: Any) -> Any:
    z = np.zeros_like(x)
    z += x * y
    z[1:] = z[1:] * 2.0
    np.multiply(z, x, out=z)
    z[0] = y[0] ** 2
    z *= 3.0
    return np.sum(z)


def inplace_hand(x: Any, y: Any) -> Any:
    c = np.full_like(x, 6.0)
    c[0] = 3.0
    z = c * x * x * y
    z[0] = 3 * y[0] ** 2
    gx = 2 * c * x * y
    gy = c * x * x
    gx[0] = 0.0
    gy[0] = 6 * y[0]
    return np.sum(z), (gx, gy)


def gemm(A: Any, B: Any, C: Any) -> Any:
    C = C.copy()
    rules.blas.dgemm(1.5, B.T, A.T, beta=0.5, c=C.T, overwrite_c=1)
    return np.sum(np.sin(C))


def gemm_hand(A: Any, B: Any, C: Any) -> Any:
    D = 1.5 * (A @ B) + 0.5 * C
    G = np.cos(D)
    return np.sum(np.sin(D)), (1.5 * G @ B.T, 1.5 * A.T @ G, 0.5 * G)


def _inputs() -> dict[
    str, tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...], tuple[int, ...]]
]:
    X = RNG.normal(size=(64, 100))
    Y = np.eye(10)[RNG.integers(0, 10, size=64)]
    mlp_args = (
        RNG.normal(size=(100, 128)) * 0.1,
        np.zeros(128),
        RNG.normal(size=(128, 10)) * 0.1,
        X,
        Y,
    )
    rnn_args = (
        RNG.normal(size=(32, 32)) * 0.2,
        RNG.normal(size=(32, 16)) * 0.2,
        RNG.normal(size=(20, 16)),
    )
    return {
        "seed 72x72": (
            seed,
            seed_hand,
            (RNG.normal(size=(72, 72)), RNG.normal(size=(72, 72))),
            (0, 1),
        ),
        "seed 512x512": (
            seed,
            seed_hand,
            (RNG.normal(size=(512, 512)), RNG.normal(size=(512, 512))),
            (0, 1),
        ),
        "mlp 64x100x128x10": (mlp, mlp_hand, mlp_args, (0, 1, 2)),
        "rnn 20 steps h=32": (rnn, rnn_hand, rnn_args, (0, 1, 2)),
        "in-place n=10000": (
            inplace,
            inplace_hand,
            (RNG.normal(size=10000), RNG.normal(size=10000)),
            (0, 1),
        ),
        "dgemm overwrite_c 128": (
            gemm,
            gemm_hand,
            tuple(RNG.normal(size=(128, 128)) for _ in range(3)),
            (0, 1, 2),
        ),
    }


def best(fn: Callable[[], Any], budget: float = 0.4) -> float:
    """Best time per call in seconds (auto-ranged number, best of 7 repeats)."""
    fn()
    t = timeit.Timer(fn)
    n, _ = t.autorange()
    n = max(1, int(n * budget / 0.2))
    return min(t.repeat(repeat=7, number=n)) / n


# -- peers -----------------------------------------------------------------------------


def peer_autograd(
    name: str, args: tuple[Any, ...], argnums: tuple[int, ...]
) -> Callable[[], Any] | None:
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError:
        return None

    def seed_ag(A: Any, B: Any) -> Any:
        return -2.5 * anp.sum(anp.log1p(0.25 * (anp.dot(A, B) - 18) ** 2))

    def mlp_ag(W1: Any, b1: Any, W2: Any, X: Any, Y: Any) -> Any:
        h = anp.tanh(anp.dot(X, W1) + b1)
        z = anp.dot(h, W2)
        z = z - anp.max(z, axis=1, keepdims=True)
        logp = z - anp.log(anp.sum(anp.exp(z), axis=1, keepdims=True))
        return -anp.sum(Y * logp) / X.shape[0]

    def rnn_ag(Wh: Any, Wx: Any, xs: Any) -> Any:
        h = anp.zeros(Wh.shape[0])
        for t in range(xs.shape[0]):
            h = anp.tanh(anp.dot(Wh, h) + anp.dot(Wx, xs[t]))
        return anp.sum(h**2)

    def inplace_ag(x: Any, y: Any) -> Any:  # autograd has no in-place ops: the functional form
        z = x * y
        z = anp.concatenate([z[:1], z[1:] * 2.0]) * x
        z = anp.concatenate([anp.reshape(y[0] ** 2, (1,)), z[1:]]) * 3.0
        return anp.sum(z)

    def gemm_ag(A: Any, B: Any, C: Any) -> Any:
        return anp.sum(anp.sin(1.5 * anp.dot(A, B) + 0.5 * C))

    f = {"seed": seed_ag, "mlp": mlp_ag, "rnn": rnn_ag, "in-place": inplace_ag, "dgemm": gemm_ag}[
        name.split()[0]
    ]

    # autograd's value_and_grad takes one argnum: differentiate w.r.t. a tuple instead.
    def packed(params: Any, *rest: Any) -> Any:
        full = list(rest)
        for i, p in zip(argnums, params, strict=True):
            full.insert(i, p)
        return f(*full)

    rest = [a for i, a in enumerate(args) if i not in argnums]
    vg = autograd.value_and_grad(packed)
    params = tuple(args[i] for i in argnums)
    return lambda: vg(params, *rest)


def peer_torch(
    name: str, args: tuple[Any, ...], argnums: tuple[int, ...]
) -> Callable[[], Any] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)

    def seed_t(A: Any, B: Any) -> Any:
        return -2.5 * torch.sum(torch.log1p(0.25 * (A @ B - 18) ** 2))

    def mlp_t(W1: Any, b1: Any, W2: Any, X: Any, Y: Any) -> Any:
        h = torch.tanh(X @ W1 + b1)
        z = h @ W2
        z = z - torch.amax(z, dim=1, keepdim=True)
        logp = z - torch.log(torch.sum(torch.exp(z), dim=1, keepdim=True))
        return -torch.sum(Y * logp) / X.shape[0]

    def rnn_t(Wh: Any, Wx: Any, xs: Any) -> Any:
        h = torch.zeros(Wh.shape[0], dtype=Wh.dtype)
        for t in range(xs.shape[0]):
            h = torch.tanh(Wh @ h + Wx @ xs[t])
        return torch.sum(h**2)

    def inplace_t(x: Any, y: Any) -> Any:
        z = torch.zeros_like(x)
        z += x * y
        z[1:] = z[1:] * 2.0
        z = z * x
        z[0] = y[0] ** 2
        z *= 3.0
        return torch.sum(z)

    def gemm_t(A: Any, B: Any, C: Any) -> Any:
        return torch.sum(torch.sin(torch.addmm(C, A, B, beta=0.5, alpha=1.5)))

    f = {"seed": seed_t, "mlp": mlp_t, "rnn": rnn_t, "in-place": inplace_t, "dgemm": gemm_t}[
        name.split()[0]
    ]
    targs = [torch.from_numpy(a) for a in args]

    def run() -> Any:
        ins = [t.detach().requires_grad_(i in argnums) for i, t in enumerate(targs)]
        out = f(*ins)
        gs = torch.autograd.grad(out, [ins[i] for i in argnums])
        return out.item(), [g.numpy() for g in gs]

    return run


def peer_jax(
    name: str, args: tuple[Any, ...], argnums: tuple[int, ...], jit: bool
) -> Callable[[], Any] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def seed_j(A: Any, B: Any) -> Any:
        return -2.5 * jnp.sum(jnp.log1p(0.25 * (A @ B - 18) ** 2))

    def mlp_j(W1: Any, b1: Any, W2: Any, X: Any, Y: Any) -> Any:
        h = jnp.tanh(X @ W1 + b1)
        z = h @ W2
        z = z - jnp.max(z, axis=1, keepdims=True)
        logp = z - jnp.log(jnp.sum(jnp.exp(z), axis=1, keepdims=True))
        return -jnp.sum(Y * logp) / X.shape[0]

    def rnn_j(Wh: Any, Wx: Any, xs: Any) -> Any:
        h = jnp.zeros(Wh.shape[0])
        for t in range(xs.shape[0]):
            h = jnp.tanh(Wh @ h + Wx @ xs[t])
        return jnp.sum(h**2)

    def inplace_j(x: Any, y: Any) -> Any:
        z = x * y
        z = z.at[1:].set(z[1:] * 2.0) * x
        z = z.at[0].set(y[0] ** 2) * 3.0
        return jnp.sum(z)

    def gemm_j(A: Any, B: Any, C: Any) -> Any:
        return jnp.sum(jnp.sin(1.5 * (A @ B) + 0.5 * C))

    f = {"seed": seed_j, "mlp": mlp_j, "rnn": rnn_j, "in-place": inplace_j, "dgemm": gemm_j}[
        name.split()[0]
    ]
    vg = jax.value_and_grad(f, argnums=argnums)
    if jit:
        vg = jax.jit(vg)
    jargs = [jnp.asarray(a) for a in args]

    def run() -> Any:
        v, g = vg(*jargs)
        return jax.block_until_ready((v, g))

    return run


def row(
    name: str,
    f: Callable[..., Any],
    hand: Callable[..., Any],
    args: tuple[Any, ...],
    argnums: tuple[int, ...],
    cols: list[str],
) -> str:
    """One table row: times as ratios to the hand-written gradient."""
    vg = rulekit.value_and_grad(f, argnums=argnums)
    vg_nc = rulekit.value_and_grad(f, argnums=argnums, copy=False)
    # Correctness first: rulekit must agree with the hand-written gradient.
    v, g = vg(*args)
    hv, hg = hand(*args)
    assert np.allclose(v, hv), (name, v, hv)
    for a, b in zip(g, hg, strict=True):
        assert np.allclose(a, b, rtol=1e-6, atol=1e-8), name
    t_hand = best(lambda: hand(*args))
    times: dict[str, float | None] = {
        "rulekit": best(lambda: vg(*args)),
        "rulekit copy=False": best(lambda: vg_nc(*args)),
    }
    peers = {
        "autograd": peer_autograd(name, args, argnums),
        "torch eager": peer_torch(name, args, argnums),
        "jax eager": peer_jax(name, args, argnums, jit=False),
        "jax jit": peer_jax(name, args, argnums, jit=True),
    }
    for label, run in peers.items():
        times[label] = None if run is None else best(run)
    cells = [f"{t_hand * 1e6:.0f}"]
    for c in cols[1:]:
        t = times[c]
        cells.append("n/a" if t is None else f"{t / t_hand:.2f}x")
    return f"| {name} | " + " | ".join(cells) + " |"


def main() -> int:
    threads = os.environ["OMP_NUM_THREADS"]
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, BLAS threads {threads}\n")
    cols = [
        "hand numpy",
        "rulekit",
        "rulekit copy=False",
        "autograd",
        "torch eager",
        "jax eager",
        "jax jit",
    ]
    print("| workload | hand (µs) | " + " | ".join(cols[1:]) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name, (f, hand, args, argnums) in _inputs().items():
        print(row(name, f, hand, args, argnums, cols), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
