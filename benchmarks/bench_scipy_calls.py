"""What routing SciPy's public names through the bundled rules costs plain (untraced) calls.

Run:

    python benchmarks/bench_scipy_calls.py [--number N] [--repeat R]

Loading the SciPy rules replaces e.g. `scipy.linalg.cholesky` by a routed function that calls
SciPy's own on plain values (rules/scipy/_routing.py). Each row times the routed name
and SciPy's original function on the same small input, interleaved in one run (best of
R repeats of N calls, µs per call), and reports the difference and the ratio: the
overhead is a constant per call (two Python calls and one check), so small inputs show
it largest.
"""

from __future__ import annotations

import argparse
import timeit
from typing import Any

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.special
import scipy.stats

import rulekit
from rules.scipy._routing import original

rulekit.registry.load_all()  # (the SciPy parts load, and route SciPy's names, now)

_K = np.eye(4) * 4.0 + 0.1
_V = np.linspace(-1.0, 1.0, 10)
_A = np.ones((4, 4))

CASES: dict[str, tuple[Any, tuple[Any, ...]]] = {
    "scipy.linalg.cholesky (4×4)": (scipy.linalg.cholesky, (_K,)),
    "scipy.special.logsumexp (10)": (scipy.special.logsumexp, (_V,)),
    "scipy.stats.norm.logpdf (10)": (scipy.stats.norm.logpdf, (_V,)),
    "scipy.linalg.blas.dgemm (4×4)": (scipy.linalg.blas.dgemm, (1.0, _A, _A)),
}


def _best(fn: Any, args: tuple[Any, ...], number: int, repeat: int) -> float:
    return min(timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    a = parser.parse_args()
    print(f"{'call':<32} {'scipy µs':>9} {'routed µs':>10} {'+µs':>6} {'ratio':>6}")
    for name, (routed, args) in CASES.items():
        plain = original(routed)
        assert plain is not routed, f"{name} is not routed"
        t_plain = t_routed = float("inf")
        for _ in range(3):  # interleaved rounds: noise hits both alike
            t_plain = min(t_plain, _best(plain, args, a.number, a.repeat))
            t_routed = min(t_routed, _best(routed, args, a.number, a.repeat))
        print(
            f"{name:<32} {t_plain:>9.2f} {t_routed:>10.2f} {t_routed - t_plain:>6.2f} "
            f"{t_routed / t_plain:>6.2f}"
        )


if __name__ == "__main__":
    main()
