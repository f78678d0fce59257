"""Elementwise rules: the first gradient in a new process, and warm gradients.

    python benchmarks/bench_elementwise.py                 # print the table
    python benchmarks/bench_elementwise.py --json a.json   # ... and save it
    python benchmarks/bench_elementwise.py --compare a.json b.json   # side by side, b/a

Measures, for the rules importable from the current directory:

* `first gradient`: a new process runs `import rulekit, rules` and then times the first
  `value_and_grad` of a NumPy program that uses the fused (numba) ufunc rules: unary
  ufuncs, `x ** 2`, array ∘ scalar, array ∘ array, a broadcast bias row and column,
  `z += w`. The kernels are compiled or loaded from numba's on-disk cache then. One
  process is run first to fill the cache, so this is the warm-cache time every later
  process pays (the median of `--runs` processes); `import` is timed separately.
* `warm …`: one `value_and_grad(f, copy=False)` object called repeatedly on float64
  arrays of 1,000 and 100,000 elements (the fused kernels' steady state), and a chain of
  real-scalar ufuncs (the scalar fast path); the median of `--repeat` timings.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import timeit
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

_PROGRAM = """
import numpy as np

def f(x, w, row, col):
    t = np.tanh(x) * 2.0 + np.sin(x) ** 2 - np.exp(-x) / 3.0
    t = np.log1p(t * t) + np.sqrt(np.abs(x) + 1.0) * w
    t = t + row - col
    t += w
    return np.vdot(t, t)

def scalar_chain(s):
    t = np.tanh(s) * np.exp(-s) + np.log1p(s * s) / np.sqrt(s + 1.0)
    return -np.log(np.cos(t) + 2.0) + np.sin(s) * np.arctan(s) - 2.5 * t

def inputs(n, m):
    r = np.random.default_rng(0)
    return r.normal(size=(n, m)), r.uniform(0.5, 2, (n, m)), r.normal(size=m), r.normal(size=(n, 1))
"""

_FIRST = (
    "import time; t0 = time.perf_counter()\n"
    "import rulekit, rules\n"
    "t1 = time.perf_counter()\n" + _PROGRAM + "\n"
    "args = inputs(20, 50)\n"
    "t2 = time.perf_counter()\n"
    "rulekit.value_and_grad(f, argnums=(0, 1, 2, 3))(*args)\n"
    "rulekit.value_and_grad(scalar_chain)(0.7)\n"
    "t3 = time.perf_counter()\n"
    "print(t1 - t0, t3 - t2)\n"
)


def first_gradient(runs: int) -> dict[str, float]:
    """Median import and first-gradient times of `runs` new processes (after one warm-up)."""
    subprocess.run([sys.executable, "-c", _FIRST], check=True, capture_output=True)
    imports, firsts = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _FIRST], check=True, capture_output=True)
        a, b = map(float, out.stdout.split())
        imports.append(a)
        firsts.append(b)
    return {"import rulekit, rules (s)": statistics.median(imports),
            "first gradient (s)": statistics.median(firsts)}  # fmt: skip


def warm(repeat: int) -> dict[str, float]:
    import rulekit
    import rules  # noqa: F401  (registers the bundled rules)

    ns: dict[str, Any] = {}
    exec(_PROGRAM, ns)
    out = {}
    for n, m in ((20, 50), (200, 500)):
        args = ns["inputs"](n, m)
        vg = rulekit.value_and_grad(ns["f"], argnums=(0, 1, 2, 3), copy=False)
        for _ in range(5):
            vg(*args)
        k = max(1, 2000 // m)
        t = min(timeit.repeat(lambda: vg(*args), number=k, repeat=repeat)) / k  # noqa: B023
        out[f"warm gradient, {n * m:,} elements (µs)"] = t * 1e6
    vs = rulekit.value_and_grad(ns["scalar_chain"])
    for _ in range(5):
        vs(0.7)
    t = min(timeit.repeat(lambda: vs(0.7), number=200, repeat=repeat)) / 200
    out["warm gradient, real-scalar chain (µs)"] = t * 1e6
    return out


def _table(rows: dict[str, float]) -> None:
    for k, v in rows.items():
        print(f"{k:<42} {v:>12.4g}")


def compare(a: str, b: str) -> None:
    ra, rb = (json.load(open(p)) for p in (a, b))  # noqa: SIM115
    print(f"{'':<42} {os.path.basename(a):>12} {os.path.basename(b):>12} {'b/a':>7}")
    for k in ra:
        if k in rb:
            print(f"{k:<42} {ra[k]:>12.4g} {rb[k]:>12.4g} {rb[k] / ra[k]:>7.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    p.add_argument("--compare", nargs=2)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--repeat", type=int, default=7)
    o = p.parse_args()
    if o.compare:
        compare(*o.compare)
        return
    rows = {**first_gradient(o.runs), **warm(o.repeat)}
    _table(rows)
    if o.json:
        with open(o.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
