"""The stateful gemm rule: forward + pullback time and allocations, against the primal gemm and a
hand-written NumPy forward + pullback that allocates.

    python benchmarks/bench_gemm.py                 # single-threaded BLAS (the default)
    python benchmarks/bench_gemm.py --threads 2     # let OpenBLAS use two threads

For C ← αAB + βC with A m×k, B k×n, all F-ordered (as BLAS wants them):

* primal: ``scipy.linalg.blas.dgemm(α, A, B, beta=β, c=C, overwrite_c=1)``;
* rule: forward + pullback of the `StatefulRRule` that `rules.blas` registers, called
  directly (no tracing), with every argument active (A, B, C, α, β) and with α, β
  constant; 3 GEMMs is the arithmetic limit (one forward, one each for Ā and B̄);
* numpy: the same forward + pullback written by hand the usual way, saving a copy
  of C and forming its products as temporaries;
* 3 gemms alone: the forward gemm and the pullback's two (beta=1) gemms, without
  saving, restoring or scaling C — the floor any rule for this call has to stand on.

Every time is the best of several batches of consecutive calls (interleaved across the
variants, so that they see the same machine load); ratios are to the primal gemm. β
alternates between 2 and ½ from call to call: each pullback scales C̄ by β, and a
constant β < 1 would drive C̄ into subnormal numbers, which make BLAS many times
slower. Allocations are numpy data buffers per forward + pullback after warm-up,
counted by `testutils.count_allocations`.
"""

from __future__ import annotations

import argparse
import os
import sys

_parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
_parser.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
_parser.add_argument("--repeat", type=int, default=10, help="batches per variant")
ARGS = _parser.parse_args()
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)

import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import scipy.linalg.blas as sb  # noqa: E402

import rulekit  # noqa: E402
import rules.blas.routines  # noqa: E402
from rulekit import CoDual, NoFData, NoRData, zero_codual  # noqa: E402
from testutils import count_allocations  # noqa: E402

SIZES = [(16, 32, 8), (64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512)]
ALPHA, BETAS = 0.7, (2.0, 0.5)


class Alternate:
    """β for the next call: 2, ½, 2, ½, ... (powers of two: C̄ stays exactly bounded)."""

    def __init__(self) -> None:
        self.i = 0

    def __call__(self) -> int:
        self.i ^= 1
        return self.i


def numpy_forward_pullback(
    beta: float,
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray,
    dA: np.ndarray,
    dB: np.ndarray,
    dC: np.ndarray,
) -> tuple[float, float]:
    """C ← αAB + βC and its pullback, written by hand: copies and temporaries on every call."""
    C_old = C.copy()  # saved for β̄ and for restoring C
    AB = A @ B  # kept for ᾱ
    C *= beta
    C += ALPHA * AB
    G = dC  # C̄, the cotangent of C after the call
    dalpha = float(np.vdot(G, AB))
    dbeta = float(np.vdot(G, C_old))
    dA += ALPHA * (G @ B.T)
    dB += ALPHA * (A.T @ G)
    G *= beta
    C[...] = C_old
    return dalpha, dbeta


def variants(m: int, k: int, n: int) -> dict[str, Callable[[], Any]]:
    rng = np.random.default_rng(0)
    A, B, C = (np.asfortranarray(rng.standard_normal(s)) for s in ((m, k), (k, n), (m, n)))
    dA, dB, dC = np.zeros_like(A), np.zeros_like(B), np.asfortranarray(rng.standard_normal((m, n)))
    sig = rulekit.signature_of(rules.blas.dgemm, ALPHA, A, B, 1.0, C, 0, 0, 1)
    rule = rulekit.build_primitive_rrule(sig)
    f = CoDual(rules.blas.dgemm, NoFData())
    cA, cB, cC = zero_codual(A), zero_codual(B), zero_codual(C)

    def call(active_scalars: bool) -> Callable[[], Any]:
        d = NoFData() if active_scalars else None
        args = [(f, CoDual(ALPHA, d), cA, cB, CoDual(b, d), cC, 0, 0, 1) for b in BETAS]
        nxt = Alternate()

        def forward_pullback() -> Any:
            _, pullback = rule(*args[nxt()])
            return pullback(NoRData())

        return forward_pullback

    np_next, primal_next, three_next = Alternate(), Alternate(), Alternate()

    def three_gemms() -> None:
        """The arithmetic floor: the forward gemm and the two pullback gemms, nothing else."""
        sb.dgemm(ALPHA, A, B, BETAS[three_next()], C, overwrite_c=1)
        sb.dgemm(ALPHA, dC, B, 1.0, dA, 0, 1, 1)  # Ā += α C̄ Bᵀ
        sb.dgemm(ALPHA, A, dC, 1.0, dB, 1, 0, 1)  # B̄ += α Aᵀ C̄

    return {
        "primal": lambda: sb.dgemm(ALPHA, A, B, BETAS[primal_next()], C, overwrite_c=1),
        "3 gemms": three_gemms,
        "rule": call(True),
        "rule, α β const": call(False),
        "numpy": lambda: numpy_forward_pullback(BETAS[np_next()], A, B, C, dA, dB, dC),
    }


def measure(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Seconds per call: the best of `repeat` batches of ≥ 0.1 s each, the variants' batches
    interleaved (a batch repeats one variant, so its caches are warm as in a loop)."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    t0 = time.perf_counter()
    fns["numpy"]()
    number = max(3, int(0.1 / max(time.perf_counter() - t0, 1e-7)))
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / number)
    return best


def main() -> None:
    print(f"numpy {np.__version__}, BLAS threads {ARGS.threads}, python {sys.version.split()[0]}")
    print()
    print("| m×k×n | primal gemm | 3 gemms alone | rule (all active) | rule (α, β const) "
          "| hand-written numpy | allocations: rule / numpy |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for m, k, n in SIZES:
        fns = variants(m, k, n)
        t = measure(fns, ARGS.repeat)
        allocs = {name: count_allocations(fn).count for name, fn in fns.items()}
        assert allocs["rule"] == allocs["rule, α β const"] == 0, allocs

        def cell(name: str, t: dict[str, float] = t) -> str:
            return f"{t[name] * 1e6:.1f} µs ({t[name] / t['primal']:.2f}×)"

        print(
            f"| {m}×{k}×{n} | {t['primal'] * 1e6:.1f} µs | {cell('3 gemms')} | {cell('rule')} | "
            f"{cell('rule, α β const')} | {cell('numpy')} | "
            f"{allocs['rule']} / {allocs['numpy']} |"
        )


if __name__ == "__main__":
    main()
