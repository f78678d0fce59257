"""A tanh RNN of 50 steps, H=32: `rulekit.scan` against the same unrolled Python loop.

Run:

    python benchmarks/bench_scan.py [--steps 50] [--hidden 32] [--rounds 30]

Each variant is one `value_and_grad` object, warmed up, then timed in interleaved
rounds (every variant once per round, in turn), so that drifts of a shared machine hit
all of them alike; the figure is the median time of one gradient over the rounds, and
the ratio to the hand-written NumPy gradient (lower is better). Single-threaded BLAS.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from bench_engine import rnn as rnn_loop  # noqa: E402  (the definitions measured before)
from bench_engine import rnn_hand  # noqa: E402

import rulekit  # noqa: E402
from rulekit import scan  # noqa: E402


def rnn_scan(Wh: Any, Wx: Any, xs: Any, checkpoint: bool = False) -> Any:
    h0 = np.zeros(Wh.shape[0])
    h, _ = scan(lambda h, x: (np.tanh(Wh @ h + Wx @ x), None), h0, xs, checkpoint=checkpoint)
    return np.sum(h**2)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--inputs", type=int, default=16)
    p.add_argument("--rounds", type=int, default=30)
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    H, D, T = a.hidden, a.inputs, a.steps
    args = (rng.normal(size=(H, H)) * 0.2, rng.normal(size=(H, D)) * 0.2, rng.normal(size=(T, D)))
    nums = (0, 1, 2)
    variants: dict[str, Callable[[], Any]] = {
        "hand-written numpy": lambda: rnn_hand(*args),
        "unrolled loop": rulekit.value_and_grad(rnn_loop, argnums=nums).__call__,
        "unrolled loop, compile=True": rulekit.value_and_grad(
            rnn_loop, argnums=nums, compile=True
        ).__call__,
        "scan": rulekit.value_and_grad(rnn_scan, argnums=nums).__call__,
        "scan, compile=True": rulekit.value_and_grad(rnn_scan, argnums=nums, compile=True).__call__,
        "scan(checkpoint=True)": rulekit.value_and_grad(
            lambda *x: rnn_scan(*x, checkpoint=True), argnums=nums
        ).__call__,
    }
    calls = {
        k: (v if k.startswith("hand") else (lambda v=v: v(*args))) for k, v in variants.items()
    }
    want = rnn_hand(*args)
    for name, call in calls.items():  # warm up, and check every gradient
        for _ in range(3):
            value, grads = call()
        assert np.isclose(value, want[0]), name
        assert all(
            np.allclose(g, w, rtol=1e-10, atol=1e-12) for g, w in zip(grads, want[1], strict=True)
        ), name
    times: dict[str, list[float]] = {k: [] for k in calls}
    inner = 5
    for _ in range(a.rounds):
        for name, call in calls.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                call()
            times[name].append((time.perf_counter() - t0) / inner)
    base = statistics.median(times["hand-written numpy"])
    print(f"RNN, {T} steps, H={H}, D={D}: median of {a.rounds} interleaved rounds")
    print(f"{'variant':32s} {'µs/gradient':>12s} {'× numpy':>8s}")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:32s} {m * 1e6:12.0f} {m / base:8.2f}")


if __name__ == "__main__":
    main()
