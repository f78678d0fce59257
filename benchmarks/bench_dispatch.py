"""The cost of a cached dispatch, for a 2-argument array call (`np.add(a, b)`).

Run:

    python benchmarks/bench_dispatch.py [--number N] [--repeat R]

The rule registered here is trivial (it returns a constant), so the figures are
the overhead of the registry itself, side by side with a bare Python call of
the same rule. Every figure is the best of R repeats of N calls (timeit, with
statements compiled from strings so no lambda is timed), in ns per call.
Target: a cached dispatch well under 1 µs. The last rows measure what a
`rulekit.primitive` wrapper (`rules.blas.dgemm`) adds to a plain, untraced call.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from typing import Any

import numpy as np
import scipy.linalg.blas

import rulekit
import rules.blas.routines
from rulekit import Array, CoDual, NoFData, NoRData
from rulekit._signature import fast_key  # (the hot-path dispatch key: an internal)

_OUT = CoDual(None, NoFData())


def _pullback(dy: Any) -> tuple[Any, Any, Any]:
    return NoRData(), NoRData(), NoRData()


def trivial_rule(f: CoDual, a: CoDual, b: CoDual) -> tuple[CoDual, Any]:
    """A rule whose body costs (almost) nothing: what remains is dispatch."""
    return _OUT, _pullback


def reference_dispatch(table: dict[Any, Any], f: CoDual, a: CoDual, b: CoDual) -> Any:
    """Not rulekit: the floor of a cached 2-argument dispatch in Python, for comparison.

    One flat key (dtype objects and ndims), one dict lookup, one call.
    """
    x, y = a.x, b.x
    return table[(f.x, x.dtype, x.ndim, y.dtype, y.ndim)](f, a, b)


def measure(stmt: str, namespace: dict[str, Any], number: int, repeat: int) -> float:
    """Best-of-`repeat` time of `stmt`, in ns per call."""
    timer = timeit.Timer(stmt, globals=namespace)
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200_000, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=7, help="repeats (the best is kept)")
    args = parser.parse_args(argv)

    sig = (Array[np.float64, 2], Array[np.float64, 2])
    reg = rulekit.registry.add("rrule", np.add, sig, trivial_rule, module=__name__)
    try:
        a, b = np.ones((4, 4)), np.ones((4, 4))
        fc, ac, bc = CoDual(np.add), CoDual(a), CoDual(b)
        ns: dict[str, Any] = {
            "np": np,
            "rulekit": rulekit,
            "registry": rulekit.registry,
            "rrule": rulekit.rrule,
            "CoDual": CoDual,
            "fast_key": fast_key,
            "rule": trivial_rule,
            "reference_dispatch": reference_dispatch,
            "table": {(np.add, a.dtype, a.ndim, b.dtype, b.ndim): trivial_rule},
            "a": a,
            "b": b,
            "ab": (a, b),
            "fc": fc,
            "ac": ac,
            "bc": bc,
            "dgemm": scipy.linalg.blas.dgemm,
            "rk_dgemm": rules.blas.dgemm,
        }
        # Warm the caches (and check that the trivial rule is what runs).
        assert rulekit.rrule(fc, ac, bc)[0] is _OUT
        assert rulekit.registry.lookup_call(np.add, (a, b))[1] is reg

        rows = [
            ("bare call of the rule: rule(fc, ac, bc)", "rule(fc, ac, bc)"),
            ("fast_key(np.add, (a, b))", "fast_key(np.add, ab)"),
            ("registry.lookup_call(np.add, (a, b))", "registry.lookup_call(np.add, ab)"),
            ("rrule(fc, ac, bc)  [CoDuals made beforehand]", "rrule(fc, ac, bc)"),
            (
                "rrule(CoDual(np.add), CoDual(a), CoDual(b))",
                "rrule(CoDual(np.add), CoDual(a), CoDual(b))",
            ),
            ("3 × CoDual(...) alone", "CoDual(np.add), CoDual(a), CoDual(b)"),
            (
                "reference: flat-key dict dispatch + call (not rulekit)",
                "reference_dispatch(table, fc, ac, bc)",
            ),
            ("np.add(a, b) itself, 4×4 float64, for scale", "np.add(a, b)"),
            ("scipy.linalg.blas.dgemm(1.0, a, b), 4×4", "dgemm(1.0, a, b)"),
            ("rules.blas.dgemm(1.0, a, b) on plain arrays", "rk_dgemm(1.0, a, b)"),
        ]
        times = {label: measure(stmt, ns, args.number, args.repeat) for label, stmt in rows}
    finally:
        rulekit.registry.remove(reg)

    width = max(len(label) for label in times)
    print(f"cached dispatch of a 2-argument array call (best of {args.repeat} × {args.number})")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}\n")
    for label, t in times.items():
        print(f"  {label:<{width}}  {t:8.1f} ns")
    bare = times[rows[0][0]]
    print("\n  overhead over a bare call of the rule:")
    print(f"    rulekit.rrule (CoDuals made beforehand)  {times[rows[3][0]] - bare:8.1f} ns")
    print(f"    reference flat-key dispatch              {times[rows[6][0]] - bare:8.1f} ns")
    print("\n  rulekit.primitive wrapper of a scipy BLAS call, on plain arrays (not traced):")
    wrapper = times[rows[9][0]] - times[rows[8][0]]
    print(f"    rules.blas.dgemm over scipy's dgemm       {wrapper:8.1f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
