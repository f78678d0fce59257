"""Start-up cost: `import rulekit`, and `import rulekit` plus the first gradient.

Run:

    python benchmarks/bench_import.py [--repeat R]

Each figure is measured in a fresh interpreter (`python -c ...`, so nothing is
already imported), R times, and reported as the median and the best, in seconds,
side by side with `import numpy` alone (the floor every NumPy program pays). The
budget (issue #13): `import rulekit` plus the first gradient of a NumPy program
under 1 s on the project's 2-core machine. The bundled rules load lazily, on the
first dispatch (numpy's) and when a scipy submodule is imported (scipy's), so the
third row pays for the NumPy rules only.

`python -X importtime -c "import rulekit"` shows where the time goes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

#: what each row runs in a fresh interpreter; each prints its own elapsed time
PROGRAMS = {
    "import numpy": "import numpy",
    "import rulekit": "import rulekit",
    "import rulekit + first gradient": (
        "import numpy as np\n"
        "import rulekit\n"
        "f = lambda x: np.sum(np.tanh(x @ x.T) ** 2) - 2.5 * np.mean(np.log1p(x * x))\n"
        "rulekit.value_and_grad(f)(np.ones((3, 4)))"
    ),
    "import rules (everything, eagerly)": (
        "import rules; import rulekit; rulekit.registry.load_all()"
    ),
}

_TIMED = "import time; _t = time.perf_counter()\n{body}\nprint(time.perf_counter() - _t)"


def measure(body: str, repeat: int) -> list[float]:
    """Seconds taken by `body` in each of `repeat` fresh interpreters."""
    times = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", _TIMED.format(body=body)],
            capture_output=True,
            text=True,
            check=True,
        )
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rows = {name: [] for name in PROGRAMS}  # type: dict[str, list[float]]
    for _ in range(args.repeat):  # interleaved rounds: machine noise hits every row alike
        for name, body in PROGRAMS.items():
            rows[name] += measure(body, 1)
    print(f"{'program':<38} {'median s':>9} {'best s':>8}")
    for name, ts in rows.items():
        print(f"{name:<38} {statistics.median(ts):>9.3f} {min(ts):>8.3f}")


if __name__ == "__main__":
    main()
