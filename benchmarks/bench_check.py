"""How long `check_rule` takes on the 64×64 stateful GEMM rule (all seven checks).

Run:

    python benchmarks/bench_check.py [--n 64] [--repeat 5]

Target (issue 3): all checks in under 2 s on a 2-core machine. The first call
in a process also pays for compiling the NEP 49 allocation counter (numba,
cached on disk after the first run), reported separately.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import rules.blas.routines
from testutils import check_rule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    rng = np.random.default_rng(0)
    n = opts.n
    A, B, C = (rng.normal(size=(n, n)) for _ in range(3))
    # C ← 1.5·A·B + 0.5·C on C-contiguous arrays, through the transpose identity (C overwritten).
    call = (rules.blas.dgemm, 1.5, B.T, A.T)
    kwargs = {"beta": 0.5, "c": C.T, "overwrite_c": 1}
    start = time.perf_counter()
    report = check_rule(*call, kwargs=kwargs)
    first = time.perf_counter() - start
    times = []
    for _ in range(opts.repeat):
        start = time.perf_counter()
        report = check_rule(*call, kwargs=kwargs)
        times.append(time.perf_counter() - start)
    print(report)
    print(f"check_rule, stateful dgemm {n}×{n}: first call {first:.3f} s (incl. counter setup), "
          f"then best {min(times):.3f} s / median {sorted(times)[len(times) // 2]:.3f} s "
          f"of {opts.repeat} (target < 2 s)")  # fmt: skip


if __name__ == "__main__":
    main()
