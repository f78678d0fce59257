"""Random NumPy programs as data: inputs, a list of steps over registers, a scalar loss.

A `Program` is plain data. Each `Step` is one operation of the fuzzer's vocabulary: its family
(`kind`, used for statistics), the register it writes (a new one, or an existing one that it
mutates), the registers it reads, and its Python source (one or two lines). Rendering joins the
lines into a function `f(x0, x1, ...)`; the engine and the numpy reference both run that very
source, so a failing example prints as the code that failed.

A step also carries `guards`: conditions on the values it reads that keep the program smooth near
the inputs (no ties for max/min, no std of a constant lane, no division by near-zero, a
well-conditioned matrix for inv/solve/det). `run_reference` executes the program step by step on
plain numpy arrays, checks every guard and that every register stays finite and moderate, and
raises `IllPosed` otherwise: the checker then draws other input values instead of comparing a
gradient where finite differences are meaningless.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special as sp

# Every register stays below this magnitude in the reference run. With ≤ 8 steps on ≤ 64
# elements it keeps float32 rounding (≈ 6e-8 · 1e4) far below the float32 gradient tolerance.
MAGNITUDE_LIMIT = 1e4

# Minimal distance between the two largest (smallest) elements of a max (min) lane, between the
# operands of np.maximum/np.minimum, and of |a| from 0 for abs: a kink closer than this to the
# inputs would sit inside the finite-difference stencil (h ≈ 1e-6) or make it ill-conditioned.
KINK_GAP = 1e-3

# Minimal variance of a std lane (std = sqrt(var) has a kink at var = 0) and minimal value of a
# positive operand of log, sqrt, power, gammaln and of a divisor's modulus.
MIN_VARIANCE = 1e-4
MIN_POSITIVE = 1e-3

# Largest condition number of a matrix given to inv/solve/det. Built as 3·I + 0.3·tanh(s·A)
# (n ≤ 4), it is below 10; the guard only catches a register that an in-place step changed.
MAX_CONDITION = 1e3

NAMESPACE: dict[str, Any] = {"np": np, "sp": sp}


class IllPosed(Exception):
    """The reference run left the region where the program is smooth and moderate."""


@dataclasses.dataclass(frozen=True)
class Guard:
    """A condition checked on plain numpy values just before its step runs.

    kind: "gap" (max/min lanes, `axis`), "gap2" (np.maximum/np.minimum of regs[0], regs[1]),
    "away0" (|regs[0]| ≥ threshold: also a branch `if r > 0` or a mask `r > 0`), "positive",
    "spread" (std lanes, `axis`, `ddof`), "distinct" (argsort lanes along `axis`: no two
    elements close), "halving" (`while Σ r² > 1: r = r / 2` run on regs[0] does not stop near
    a switch of its count), "cond" (regs[0] is a (batch of) well-conditioned square matrices).
    """

    kind: str
    regs: tuple[str, ...]
    axis: Any = None
    ddof: int = 0


@dataclasses.dataclass(frozen=True)
class Step:
    kind: str  # the vocabulary family, e.g. "unary", "reduce", "setitem", "out", "linalg"
    out: str  # the register it writes (new, or mutated in place)
    reads: tuple[str, ...]
    lines: tuple[str, ...]
    guards: tuple[Guard, ...] = ()


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """An argument of the program. dtype "int" is a non-differentiated Python int (shape (),
    never active) drawn anew for each call from 1, 2, 3: code that depends on it (a loop count,
    a branch, a power, an axis) differs from call to call, which `compile=True` must guard."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # "float32", "float64", "complex128" or "int"
    active: bool
    scalar: bool = False  # shape () only: passed as a numpy scalar, not a 0-d array
    # a constant array that f is not passed but reads as a global of its module (a captured
    # array, as `W` in `def f(x): return np.tanh(W @ x)`): each call rebinds the global to the
    # call's array, or writes the values into the array it holds when the layout allows
    captured: bool = False


@dataclasses.dataclass(frozen=True)
class Program:
    inputs: tuple[InputSpec, ...]
    steps: tuple[Step, ...]
    loss: tuple[str, ...]  # lines that compute `loss` from the registers

    @property
    def params(self) -> tuple[InputSpec, ...]:
        """The inputs passed as arguments (all but the captured ones)."""
        return tuple(s for s in self.inputs if not s.captured)

    @property
    def argnums(self) -> int | tuple[int, ...]:
        nums = tuple(i for i, s in enumerate(self.params) if s.active)
        return nums[0] if len(nums) == 1 and self.int_argnum else nums

    @property
    def int_argnum(self) -> bool:
        # one active input is passed as an int argnum (one gradient, not a tuple), so both
        # spellings are exercised; `len(steps)` is a deterministic coin
        return len(self.steps) % 2 == 0

    def source(self) -> str:
        args = ", ".join(s.name for s in self.params)
        body = [line for step in self.steps for line in step.lines] + list(self.loss)
        return "\n".join([f"def f({args}):", *(f"    {b}" for b in body), "    return loss"])

    def __repr__(self) -> str:  # hypothesis prints a falsifying example with repr()
        return f"\n# inputs: {self.describe_inputs()}; argnums={self.argnums!r}\n{self.source()}\n"

    def describe_inputs(self) -> str:
        return ", ".join(_describe(s) for s in self.inputs)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis's pretty printer
        printer.text(repr(self))

    def compile(self) -> Callable[..., Any]:
        namespace = dict(NAMESPACE)
        exec(compile(self.source(), "<fuzz program>", "exec"), namespace)
        return namespace["f"]


def _describe(s: InputSpec) -> str:
    if s.dtype == "int":
        return f"{s.name}: Python int (1, 2 or 3, drawn per call)"
    kind = f"np.{s.dtype} scalar" if s.scalar else f"{s.dtype}{list(s.shape)}"
    if s.captured:
        return f"{s.name}: {kind} (constant, captured: a global that f reads)"
    return f"{s.name}: {kind}{'' if s.active else ' (constant)'}"


# -- the reference run -----------------------------------------------------------------------------


def _lanes_gap(a: np.ndarray, axis: Any) -> float:
    """Smallest distance between the two largest and the two smallest elements of a lane."""
    a = np.asarray(a)
    if axis is None:
        a, axis = a.reshape(-1), 0
    if not isinstance(axis, tuple):
        axis = (axis,)
    axis = tuple(ax % a.ndim for ax in axis)
    rest = [ax for ax in range(a.ndim) if ax not in axis]
    lanes = np.transpose(a, rest + list(axis)).reshape(
        [a.shape[ax] for ax in rest] + [int(np.prod([a.shape[ax] for ax in axis]))]
    )
    if lanes.shape[-1] < 2:
        return np.inf
    s = np.sort(lanes.real, axis=-1)
    return float(min(np.min(s[..., -1] - s[..., -2]), np.min(s[..., 1] - s[..., 0])))


def _check_guard(g: Guard, env: dict[str, Any]) -> str | None:
    a = np.asarray(env[g.regs[0]])
    if g.kind == "gap":
        gap = _lanes_gap(a, g.axis)
        return None if gap >= KINK_GAP else f"max/min tie: gap {gap:.2e}"
    if g.kind == "gap2":
        b = np.asarray(env[g.regs[1]])
        gap = float(np.min(np.abs(a - b))) if np.broadcast(a, b).size else np.inf
        return None if gap >= KINK_GAP else f"maximum/minimum tie: gap {gap:.2e}"
    if g.kind == "away0":
        m = float(np.min(np.abs(a))) if a.size else np.inf
        return None if m >= KINK_GAP else f"|x| near 0: {m:.2e}"
    if g.kind == "positive":
        if np.iscomplexobj(a):
            return "complex operand where a positive one is needed"
        m = float(np.min(a)) if a.size else np.inf
        return None if m >= MIN_POSITIVE else f"not positive: min {m:.2e}"
    if g.kind == "spread":
        if a.size == 0:
            return None
        v = float(np.min(np.var(a, axis=g.axis, ddof=g.ddof)))
        return None if v >= MIN_VARIANCE else f"std of a near-constant lane: var {v:.2e}"
    if g.kind == "distinct":  # argsort: every pair of a lane apart
        if a.size == 0 or a.ndim == 0:
            return None
        s = np.sort(np.moveaxis(a.real, -1 if g.axis is None else g.axis, -1), axis=-1)
        gap = float(np.min(np.diff(s, axis=-1))) if s.shape[-1] > 1 else np.inf
        return None if gap >= KINK_GAP else f"argsort tie: gap {gap:.2e}"
    if g.kind == "halving":  # `while Σ r² > 1: r = r / 2` stops at the first Σ a² / 4ᵏ ≤ 1
        q = float(np.sum(np.abs(a) ** 2))
        m = min(abs(q / 4.0**k - 1.0) for k in range(64))
        return None if m >= KINK_GAP else f"loop count at a switch: Σ a² = {q:.6g}"
    if g.kind == "cond":
        c = float(np.max(np.linalg.cond(a))) if a.size else 1.0
        return None if c <= MAX_CONDITION else f"ill-conditioned matrix: cond {c:.2e}"
    raise AssertionError(f"unknown guard {g.kind}")


def _check_registers(env: dict[str, Any]) -> str | None:
    for name, v in env.items():
        if isinstance(v, np.ndarray | np.generic | float | complex) and not isinstance(v, bool):
            a = np.asarray(v)
            if a.dtype.kind in "fc" and a.size:
                if not np.all(np.isfinite(a)):
                    return f"{name} is not finite"
                m = float(np.max(np.abs(a)))
                if m > MAGNITUDE_LIMIT:
                    return f"{name} too large: {m:.2e}"
    return None


@functools.lru_cache(maxsize=4096)
def _compiled(line: str) -> Any:
    return compile(line, "<fuzz step>", "exec")


class Reference:
    """A program's registers on plain values, run step by step (the generator extends it)."""

    def __init__(self, inputs: tuple[InputSpec, ...], args: list[Any]):
        self.env: dict[str, Any] = dict(NAMESPACE)
        self.env.update({s.name: a for s, a in zip(inputs, args, strict=True)})
        self.values = {s.name: a for s, a in zip(inputs, args, strict=True)}

    def run(self, steps: tuple[Step, ...], loss: tuple[str, ...] = (), check: bool = True) -> None:
        """Run `steps`, then the `loss` lines. With `check`, raise IllPosed when a guard fails, a
        register leaves the moderate range, or numpy warns (overflow, invalid value, ...)."""
        env = self.env
        with warnings.catch_warnings(), np.errstate(all="raise"):
            warnings.simplefilter("error")
            try:
                for step in steps:
                    if check:
                        for g in step.guards:
                            why = _check_guard(g, env)
                            if why is not None:
                                raise IllPosed(f"{step.lines[-1]}: {why}")
                    for line in step.lines:
                        exec(_compiled(line), env)
                    self.values[step.out] = env[step.out]
                    if check:
                        why = _check_registers({k: env[k] for k in self.values})
                        if why is not None:
                            raise IllPosed(f"after {step.lines[-1]}: {why}")
                for line in loss:
                    exec(_compiled(line), env)
            except (FloatingPointError, RuntimeWarning) as e:
                raise IllPosed(f"numpy: {e}") from e
        if loss:
            self.values["loss"] = env["loss"]
            if check and not np.isfinite(env["loss"]):
                raise IllPosed("loss is not finite")


def run_reference(
    program: Program, args: list[Any], *, check: bool = True
) -> tuple[Any, dict[str, Any]]:
    """Run `program` step by step on plain values; return (loss, registers).

    With `check`, raise IllPosed when a guard fails, a register leaves the moderate range, or
    numpy warns (overflow, invalid value, ...).
    """
    ref = Reference(program.inputs, args)
    ref.run(program.steps, program.loss, check)
    return ref.values["loss"], ref.values


def weighted_loss(regs: list[str], complex_regs: tuple[str, ...] = ()) -> tuple[str, ...]:
    """loss = Σ_r Σ w·r with w = cos(1, 2, ..., r.size): a cotangent with no symmetry, so a
    transposed or permuted gradient does not pass (np.sum alone would send all ones back).
    A complex register contributes its real and imaginary parts with different weights."""
    lines = []
    for i, r in enumerate(regs):
        w = f"w{i}"
        lines.append(f"{w} = np.cos(np.arange(1.0, 1.0 + {r}.size)).reshape(np.shape({r}))")
        term = f"np.sum({w} * {r})"
        if r in complex_regs:
            term = f"np.sum({w} * {r}.real) + np.sum(np.sin({w}) * {r}.imag)"
        lines.append(f"loss = {term}" if i == 0 else f"loss = loss + {term}")
    return tuple(lines)


def program_from_lines(
    inputs: tuple[InputSpec, ...],
    lines: list[str],
    loss: list[str],
    complex_regs: tuple[str, ...] = (),
) -> Program:
    """A hand-written program (regression corpus, self-tests): one step per line, no guards."""
    steps = []
    for line in lines:
        target = re.search(r"\bout=(\w+)", line) or re.match(r"\s*(\w+)", line)
        assert target is not None, line
        out = target.group(1)
        steps.append(Step("manual", out, (), (line,)))
    return Program(inputs, tuple(steps), weighted_loss(loss, complex_regs))
