"""What one traced operation costs `value_and_grad`, forward + pullback, on tiny arrays.

    python benchmarks/bench_overhead.py

For each operation, `f` applies it k times to a 4-element array and ends in
`np.sum`; the per-op cost is the slope of the `value_and_grad(f)` time from k = 0
to k = 8 (the fixed cost of a call, `np.sum` included, is the k = 0 time). On
arrays this small the numpy (and numba) work is well under a microsecond, so
the slope is the Python the engine and the rules spend per operation:

* `identity primitive`: a `rulekit.primitive` whose rule returns its input and a
  pullback that does nothing — the engine alone (dispatch, site lookup,
  recording, the reverse pass);
* the others: the bundled rules on numpy's own operators and ufuncs.

The last column is the same chain run on plain arrays (for the primitive: its
wrapper passing the call straight through).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import timeit  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import rulekit  # noqa: E402
import rules  # noqa: E402, F401  (registers the bundled rules)
from rulekit import Array, CoDual, NoRData  # noqa: E402


def _identity(x: Any) -> Any:
    return x


identity = rulekit.primitive(_identity)
_NOTHING = (NoRData(), NoRData())


@rulekit.rrule.register(identity, Array[np.float64])
def _identity_rule(f: CoDual, x: CoDual) -> tuple[CoDual, Any]:
    return x, lambda dy: _NOTHING


OPS: dict[str, Callable[[Any], Any]] = {
    "identity primitive": identity,
    "y * 2.0": lambda y: y * 2.0,
    "y - 1.0": lambda y: y - 1.0,
    "y * y": lambda y: y * y,
    "np.tanh(y)": np.tanh,
    "np.log1p(y)": np.log1p,
    "y[1:]  (a view)": lambda y: y[1:],
}


def chain(op: Callable[[Any], Any], k: int) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        for _ in range(k):
            x = op(x)
        return np.sum(x)

    return f


def per_call(fn: Callable[[], Any]) -> float:
    """Seconds per call: the best of 7 repeats of 2000 calls."""
    return min(timeit.repeat(fn, number=2000, repeat=7)) / 2000


def main() -> None:
    x = np.full(4 + 8, 0.5)  # (the view op drops one element per step)
    print(f"numpy {np.__version__}; µs per traced operation (forward + pullback)\n")
    print("| operation | value_and_grad per op | plain numpy per op |")
    print("|---|---|---|")
    base = None
    for name, op in OPS.items():
        t = {}
        for k in (0, 8):
            vg = rulekit.value_and_grad(chain(op, k))
            vg(x)
            t[k] = per_call(lambda vg=vg: vg(x))
        if base is None:
            base = t[0]
        f8, f0 = chain(op, 8), chain(op, 0)
        plain = (per_call(lambda f8=f8: f8(x)) - per_call(lambda f0=f0: f0(x))) / 8
        print(f"| {name} | {(t[8] - t[0]) / 8 * 1e6:.2f} | {plain * 1e6:.2f} |")
    print(f"\nfixed cost of a value_and_grad call (np.sum only): {base * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
