"""Forward mode and Hessian-vector products, side by side (issue 16), single-threaded.

    python benchmarks/bench_forward.py                       # rulekit only: jax "not installed"
    python benchmarks/bench_forward.py --rounds 20 --only rosen
    PEERS/bin/python benchmarks/bench_forward.py             # with jax (see bench_workloads.py)

(a) `rulekit.jvp(f, args, tangents)` (a tangent for every differentiated argument of the
    workload, None for the others) against one `rulekit.value_and_grad` call, on the
    workloads of bench_workloads.py (imported, not copied). Before timing, the JVP is
    checked against ⟨∇f, v⟩ from value_and_grad and against central differences of f.
(b) Hessian-vector products H·v on Rosenbrock (n = 1,000 and 100,000), logistic regression
    10⁴×50 and the MLP (all six parameters): `rulekit.hvp` in its three modes, a central
    difference of two gradients (g(x + εv) − g(x − εv))/2ε with `rulekit.value_and_grad`
    (eager and `compile=True`) and with bench_workloads' hand-written NumPy gradient (the
    baseline of the ratios), `jax.jvp(jax.grad(f), (x,), (v,))` jitted and not, and one
    `rulekit.value_and_grad` call for scale. Every system's H·v is checked against the
    hand-written difference (ε = 1e-5 on unit-norm v, relative error in the 2-norm ≤ 1e-5)
    before timing.

Timing as bench_workloads.py: each round times every system once (a batch of about
--batch-ms of consecutive calls, the order rotated between rounds); a cell is the median
over rounds of the ratio to the row's baseline in the same round (quartiles in the last
table), and the median time per call.
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
from bench_workloads import HANDS, _inputs, logreg_x, mlp_x, rosen_x  # noqa: E402

import rulekit  # noqa: E402

Run = Callable[[], Any]
EPS = 1e-5
MODES = {"hvp": "forward-over-reverse", "hvp rev-rev": "reverse-over-reverse",
         "hvp rev-fwd": "reverse-over-forward"}  # fmt: skip


def measure(runs: dict[str, Run], base: str, rounds: int, batch: float) -> dict[str, Any]:
    """Median seconds per call and the quartiles of the per-round ratios to `base`."""
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
    ratios = {k: statistics.quantiles([t / b for t, b in zip(ts, times[base], strict=True)], n=4)
              for k, ts in times.items()}  # fmt: skip
    return {"med": {k: statistics.median(ts) for k, ts in times.items()}, "ratio": ratios}


def try_runs(candidates: dict[str, Callable[[], Run]], check: Callable[[str, Any], None],
             cell: dict[str, str]) -> dict[str, Run]:  # fmt: skip
    """Build and check each system; a failure is reported in `cell`, not timed."""
    runs = {}
    for name, make in candidates.items():
        try:
            run = make()
            check(name, run())
            check(name, run())  # (a second call: a cached or replayed result is right too)
        except AssertionError as e:
            cell[name] = "WRONG"
            print(f"    {name}: {e}", file=sys.stderr)
        except Exception as e:
            cell[name] = f"error ({type(e).__name__})"
            print(f"    {name}: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
        else:
            runs[name] = run
    return runs


# -- (a) jvp against value_and_grad ----------------------------------------------------------


def jvp_row(name: str, spec: Any, opts: argparse.Namespace) -> dict[str, Any]:
    defn, args, argnums, rk_f = spec
    f = rk_f or defn(np)
    rng = np.random.default_rng(3)
    tans = tuple(rng.standard_normal(np.shape(a)) if i in argnums else None
                 for i, a in enumerate(args))  # fmt: skip
    vg = rulekit.value_and_grad(f, argnums=argnums)
    value, grads = vg(*args)
    dot = sum(float(np.vdot(g, tans[i])) for g, i in zip(grads, argnums, strict=True))

    def shifted(h: float) -> Any:
        return f(*(a + h * t if t is not None else a for a, t in zip(args, tans, strict=True)))

    fd = (shifted(1e-6) - shifted(-1e-6)) / 2e-6

    def check(label: str, out: Any) -> None:
        if label == "jvp":
            y, t = out
            assert np.isclose(y, value, rtol=1e-12), ("value", y, value)
            assert np.isclose(t, dot, rtol=1e-8, atol=1e-12), ("jvp vs <grad, v>", t, dot)
            assert np.isclose(t, fd, rtol=1e-5, atol=1e-8), ("jvp vs FD", t, fd)

    cell: dict[str, str] = {}
    runs = try_runs({"value_and_grad": lambda: lambda: vg(*args),
                     "jvp": lambda: lambda: rulekit.jvp(f, args, tans)}, check, cell)  # fmt: skip
    if "value_and_grad" not in runs or "jvp" not in runs:
        return {"cell": cell}
    return {"cell": cell, **measure(runs, "value_and_grad", opts.rounds, opts.batch_ms / 1e3)}


# -- (b) Hessian-vector products ---------------------------------------------------------------


def hvp_run(g: Callable[..., Any], params: Any, vs: Any, mode: str) -> Run:
    return lambda: rulekit.hvp(g, params, vs, mode=mode)[1]


def hvp_row(name: str, defn: Any, args: tuple[Any, ...], nparams: int,
            opts: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    """H·v of f w.r.t. its first `nparams` arguments (the others fixed)."""
    params, rest = args[:nparams], args[nparams:]
    rng = np.random.default_rng(4)
    raw = [rng.standard_normal(np.shape(p)) for p in params]
    norm = np.sqrt(sum(float(np.vdot(v, v)) for v in raw))
    vs = tuple(v / norm for v in raw)
    f = defn(np)

    def g(*ps: Any) -> Any:
        return f(*ps, *rest)

    hand = HANDS[name.split()[0]](*args)

    def hand_fd() -> tuple[Any, ...]:
        gp = [x.copy() for x in hand(*(p + EPS * v for p, v in zip(params, vs, strict=True)),
                                     *rest)[1]]  # fmt: skip
        gm = hand(*(p - EPS * v for p, v in zip(params, vs, strict=True)), *rest)[1]
        return tuple((a - b) / (2 * EPS) for a, b in zip(gp, gm, strict=True))

    ref = [np.array(r) for r in hand_fd()]
    nums = tuple(range(nparams))
    vg = rulekit.value_and_grad(g, argnums=nums)

    vgc = rulekit.value_and_grad(g, argnums=nums, compile=True)

    def rk_fd(vg: Any = vg) -> tuple[Any, ...]:
        gp = vg(*(p + EPS * v for p, v in zip(params, vs, strict=True)))[1]
        gm = vg(*(p - EPS * v for p, v in zip(params, vs, strict=True)))[1]
        return tuple((a - b) / (2 * EPS) for a, b in zip(gp, gm, strict=True))

    cands: dict[str, Callable[[], Run]] = {
        "hand-written FD": lambda: hand_fd,
        "rulekit FD": lambda: rk_fd,
        "rulekit FD compile=True": lambda: partial(rk_fd, vgc),
        **{k: partial(hvp_run, g, params, vs, m) for k, m in MODES.items()},
        "rulekit value_and_grad": lambda: lambda: vg(*params),
    }  # fmt: skip
    cell: dict[str, str] = {}
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        cell["jax jit"] = cell["jax eager"] = "not installed"
    else:
        jax.config.update("jax_enable_x64", True)
        jf = defn(jnp)
        jrest = tuple(jnp.asarray(a) for a in rest)
        jps, jvs = tuple(jnp.asarray(p) for p in params), tuple(jnp.asarray(v) for v in vs)

        def jhvp(*ps_vs: Any) -> Any:
            ps, ts = ps_vs[:nparams], ps_vs[nparams:]
            grad = jax.grad(lambda *q: jf(*q, *jrest), argnums=nums)
            return jax.jvp(grad, ps, ts)[1]

        jitted = jax.jit(jhvp)
        cands["jax jit"] = lambda: lambda: jax.block_until_ready(jitted(*jps, *jvs))
        cands["jax eager"] = lambda: lambda: jax.block_until_ready(jhvp(*jps, *jvs))

    def check(label: str, out: Any) -> None:
        if label == "rulekit value_and_grad":
            return
        got = (out,) if nparams == 1 and not isinstance(out, tuple) else tuple(out)
        err = np.sqrt(sum(np.sum((np.asarray(a) - r) ** 2) for a, r in zip(got, ref, strict=True)))
        scale = np.sqrt(sum(np.sum(r**2) for r in ref))
        assert err <= 1e-5 * scale, f"relative error {err / scale:.2e} against the hand FD"

    runs = try_runs(cands, check, cell)
    res = measure(runs, "hand-written FD", opts.rounds, opts.batch_ms / 1e3)
    return {"cell": cell, **res}


def hvp_inputs(rng: np.random.Generator) -> dict[str, tuple[Any, tuple[Any, ...], int]]:
    """name -> (definition, arguments, number of differentiated leading arguments)."""
    spec = _inputs(rng)
    out = {}
    for name, nparams in (("Rosenbrock n=1,000", 1), ("Rosenbrock n=100,000", 1),
                          ("logistic regression 10⁴×50", 1), ("MLP 64×256-256-10", 6)):  # fmt: skip
        defn, args, _, _ = spec[name]
        assert defn in (rosen_x, logreg_x, mlp_x)
        out[name] = (defn, args, nparams)
    return out


def table(rows: dict[str, Any], cols: list[str], base: str) -> None:
    print(f"| workload | {base} (µs) | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 2) + "|")
    for name, r in rows.items():
        if "med" not in r:
            cells = [r["cell"].get(c, "n/a") for c in [base, *cols]]
            print(f"| {name} | " + " | ".join(cells) + " |")
            continue
        cells = [r["cell"].get(c) or f"{r['ratio'][c][1]:.2f}×" for c in cols]
        print(f"| {name} | {r['med'][base] * 1e6:.1f} | " + " | ".join(cells) + " |")
    print("\nMedian µs per call (first–third quartile of the ratios):\n")
    print("| workload | " + " | ".join([base, *cols]) + " |\n" + "|---" * (len(cols) + 2) + "|")
    for name, r in rows.items():
        if "med" not in r:
            continue
        q = {c: (r["med"][c] * 1e6, r["ratio"][c][0], r["ratio"][c][2]) for c in r["med"]}
        cells = [r["cell"].get(c) or "{:.1f} ({:.2f}–{:.2f})".format(*q[c]) for c in [base, *cols]]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=50, help="interleaved rounds (default 50)")
    p.add_argument("--batch-ms", type=float, default=10.0, help="ms per batch (default 10)")
    p.add_argument("--only", default="", help="run the workloads whose name contains this")
    p.add_argument("--part", choices=("a", "b", "ab"), default="ab")
    opts = p.parse_args()
    versions = [f"python {sys.version.split()[0]}", f"numpy {np.__version__}"]
    for mod in ("jax",):
        try:
            versions.append(f"{mod} {importlib.metadata.version(mod)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{mod} not installed")
    print(", ".join(versions) + f"; BLAS threads {os.environ['OMP_NUM_THREADS']}")
    print(f"{opts.rounds} rounds, batches of ~{opts.batch_ms} ms; load at start {os.getloadavg()}")
    wrong = False
    if "a" in opts.part:
        rows = {}
        for name, spec in _inputs(np.random.default_rng(0)).items():
            if opts.only.lower() in name.lower():
                print(f"  (a) {name} ...", file=sys.stderr, flush=True)
                rows[name] = jvp_row(name, spec, opts)
        print("\n(a) `rulekit.jvp` against one `rulekit.value_and_grad` call (ratio):\n")
        table(rows, ["jvp"], "value_and_grad")
        wrong |= any("WRONG" in r["cell"].values() for r in rows.values())
    if "b" in opts.part:
        rows = {}
        for name, (defn, args, k) in hvp_inputs(np.random.default_rng(0)).items():
            if opts.only.lower() in name.lower():
                print(f"  (b) {name} ...", file=sys.stderr, flush=True)
                rows[name] = hvp_row(name, defn, args, k, opts)
        cols = ["rulekit FD", "rulekit FD compile=True", *MODES, "jax jit", "jax eager",
                "rulekit value_and_grad"]  # fmt: skip
        print("\n(b) H·v: ratios to the hand-written gradient's central difference:\n")
        table(rows, cols, "hand-written FD")
        wrong |= any("WRONG" in r["cell"].values() for r in rows.values())
    print(f"\nload at end {os.getloadavg()}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
