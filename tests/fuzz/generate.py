"""A hypothesis strategy for random NumPy programs over the bundled rules' vocabulary.

`programs()` builds a `Program` one step at a time. Every candidate step is run at once on sample
inputs (a `Reference` run, after the steps so far): numpy itself decides whether it is valid
(shapes, axes, casting), the sample values decide whether it is smooth (the step's guards) and
give the shapes, dtypes and magnitudes the next choices depend on. A candidate that fails is
dropped and another one drawn, so every generated program runs in plain numpy and is smooth at
its sample inputs; the checker re-checks the guards on each call's fresh inputs.

Vocabulary (the families, with the conditions that keep a program well-defined and smooth):

- unary: exp (argument ≤ 3), tanh, sin, cos, square, ** 2, ** 3, negation, expit, erf, softplus;
  on structurally positive registers (made by exp, softplus, expit, x² + c, ...) also log, sqrt,
  ** 1.5, ** -0.5, gammaln, log1p, 1 / x; abs away from 0; complex: exp, sin, cos, tanh near
  0, square, conj, .real, .imag, |z|² written as (z * conj(z)).real;
- scalar: a * c, c * a, a + c, c - a, a / c, c / a (a away from 0), complex constants for
  complex programs;
- binary: + - * / and np.add/... between registers that broadcast (row, column, scalar, outer),
  np.maximum/np.minimum with no near-ties;
- reduce: sum, mean, max, min, prod, var, std (ddof 0/1) over None, an axis, a negative axis or
  two axes, keepdims or not, function or method spelling; max/min only without near-ties, std
  only over lanes that are not near-constant, mean/var/std/max/min never over an empty lane;
- cumulative: cumsum, cumprod over None or an axis;
- shape: .T, transpose, swapaxes, moveaxis, reshape, ravel, flatten, expand_dims, [None],
  squeeze; basic slicing with steps (negative too) and integers; integer-array indexing (with
  repeats); a constant boolean mask; concatenate, stack;
- setitem: `buf = np.zeros_like(t)` / `np.empty_like(t)` (then written whole) / `t.copy()`, then
  `buf[idx] = expr`; also into an existing register, and the overlapping `r[1:] = r[:-1]`;
- inplace: `r += v`, `-=`, `*=`, `/=` (divisor away from 0) with a scalar or a broadcasting
  register, also on views of the inputs;
- out: `np.multiply(a, b, out=c)`, add/subtract/divide, unary exp/tanh/sin/negative, matmul, with
  c from np.empty_like or an existing register (also one of the operands);
- matmul: @, np.matmul, np.dot on 1-D/2-D/batched shapes;
- linalg: inv, solve, det of `3 I + 0.3 tanh(s A)` (s scales |s A| ≤ 1: condition < 10);
- datadep (`fuzz.datadep`, what `compile=True` must guard): a branch `A if np.sum(a) > 0 else B`,
  a halving loop with a data-dependent count, argmax/argmin/argsort indices into a traced
  array, boolean masks (np.where, `np.sum(b[a > 0])`, `r[a < 0] = 0`), each kept away from its
  switch; scalararg: uses of a Python int argument drawn anew for each call.

Inputs: up to 3 arrays (some constant; a constant may be *captured*, read by f as a global that
changes between calls) and, in a quarter of the programs, a Python int argument.

Registers that depend on an active input (traced) are written into, and constants of the
program's own memory (`Reg.fresh`: a copy, an arithmetic result, a view of one; never an input or
a view of one under any layout) with constant values only: writing a traced value into a constant
would be refused by design (TracingError), and mutating a constant argument would change the
caller's array. (In eager mode such constants are plain NumPy; with compile=True they are
tracked, and their writes are recorded and replayed.)
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
from fuzz.datadep import DataDependentSteps
from fuzz.program import Guard, IllPosed, InputSpec, Program, Reference, Step
from hypothesis import strategies as st

MAX_SIZE = 48  # elements of any register
MAX_NDIM = 4
DTYPES = ("float64", "float64", "float32", "complex128")

Draw = Callable[..., Any]


@dataclasses.dataclass
class Reg:
    traced: bool
    pos: bool = False  # structurally real and ≥ MIN_POSITIVE-ish (exp, softplus, x² + c, ...)
    away0: bool = False  # structurally |x| bounded away from 0 (pos, or complex exp)
    # its memory is the program's own (a new array, or a view of one), never an input's under
    # any layout: a constant register that may be written into (with constant values)
    fresh: bool = False


class _Builder(DataDependentSteps):
    def __init__(self, draw: Draw, inputs: tuple[InputSpec, ...], samples: list[Any]):
        self.draw = draw
        self.inputs = inputs
        self.samples = samples
        self.steps: list[Step] = []
        # array registers; a Python int argument is no register: only `scalararg` reads it
        self.regs: dict[str, Reg] = {s.name: Reg(s.active) for s in inputs if s.dtype != "int"}
        self.ints = [s.name for s in inputs if s.dtype == "int"]
        self.ref = Reference(inputs, [_copy(s) for s in samples])
        self.env: dict[str, Any] = dict(self.ref.values)
        self.counter = 0

    # -- helpers ----------------------------------------------------------------------------------

    def new(self) -> str:
        name = f"r{self.counter}"
        self.counter += 1
        return name

    def val(self, name: str) -> np.ndarray:
        return np.asarray(self.env[name])

    def names(self, pred: Callable[[str], bool] = lambda n: True) -> list[str]:
        return [n for n in self.regs if pred(n)]

    def pick(self, pred: Callable[[str], bool] = lambda n: True) -> str | None:
        cands = self.names(pred)
        if not cands:
            return None
        # most steps read a recent register, so programs chain instead of fanning out
        if len(cands) > 1 and self.draw(st.booleans()):
            return cands[-1]
        return self.draw(st.sampled_from(cands))

    def is_complex(self, name: str) -> bool:
        return self.val(name).dtype.kind == "c"

    def absmax(self, name: str) -> float:
        v = self.val(name)
        return float(np.max(np.abs(v))) if v.size else 0.0

    def try_steps(self, steps: list[Step]) -> bool:
        """Run `steps` on the samples after the steps so far; keep them if valid and smooth."""
        try:
            self.ref.run(tuple(steps))
            for s in steps:
                v = np.asarray(self.ref.values[s.out])
                if v.size > MAX_SIZE or v.ndim > MAX_NDIM:
                    raise IllPosed("too large")
        except Exception:  # numpy refused the candidate (shapes, axes, casting) or IllPosed
            # the candidate may have run partly (and mutated registers): replay the kept steps
            self.ref = Reference(self.inputs, [_copy(s) for s in self.samples])
            self.ref.run(tuple(self.steps))
            self.env = dict(self.ref.values)
            return False
        self.steps.extend(steps)
        self.env = dict(self.ref.values)
        return True

    def add(self, steps: list[Step], flags: list[Reg]) -> bool:
        if not self.try_steps(steps):
            return False
        for step, reg in zip(steps, flags, strict=True):
            if step.out in self.regs:  # a mutation: it and everything sharing memory lose flags
                for n in self.regs:
                    if np.shares_memory(self.val(n), self.val(step.out)):
                        self.regs[n].pos = self.regs[n].away0 = False
                self.regs[step.out].traced |= reg.traced
            else:
                self.regs[step.out] = reg
        return True

    @staticmethod
    def flags(traced: bool) -> Reg:
        return Reg(traced)

    def traced(self, *names: str) -> bool:
        return any(self.regs[n].traced for n in names)

    def reads(self, text: str) -> tuple[str, ...]:
        """The registers that a piece of source mentions, in order of first mention."""
        found = dict.fromkeys(re.findall(r"\b[xr][0-9]+\b", text))
        return tuple(n for n in found if n in self.regs)

    def index(self, shape: tuple[int, ...], allow_int: bool = True) -> str:
        """A basic index for `shape`: per-axis slices with steps (negative too) or integers."""
        parts = []
        for n in shape:
            opts = [":", "::-1", "::2", "::-2", "1:", ":-1", "1::2", "-2::-1"]
            if allow_int and n > 0:
                opts += [str(n - 1), "-1" if n > 1 else "0"]
            if n == 0:
                opts = [":", "::-1"]
            parts.append(self.draw(st.sampled_from(opts)))
        while parts and parts[-1] == ":" and self.draw(st.booleans()):
            parts.pop()
        if not parts:
            return "..."
        if len(parts) == 1:
            return parts[0]
        return ", ".join(parts)

    # -- the vocabulary ---------------------------------------------------------------------------

    def unary(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        r, c, m = self.new(), self.is_complex(a), self.absmax(a)
        reg = self.regs[a]
        tr = reg.traced
        opts: list[tuple[str, Reg, tuple[Guard, ...]]]
        if c:
            v = self.val(a)
            re_max = float(np.max(v.real)) if v.size else 0.0
            im_max = float(np.max(np.abs(v.imag))) if v.size else 0.0
            opts = [
                (f"np.square({a})", Reg(tr), ()),
                (f"{a} ** 2", Reg(tr), ()),
                (f"{a} ** 3", Reg(tr), ()),
                (f"-{a}", Reg(tr), ()),
                (f"np.conj({a})", Reg(tr), ()),
                (f"{a}.real", Reg(tr), ()),
                (f"{a}.imag", Reg(tr), ()),
                (f"np.real({a})", Reg(tr), ()),
                (f"({a} * np.conj({a})).real", Reg(tr), ()),
                (f"np.abs({a})", Reg(tr, pos=True, away0=True), (Guard("away0", (a,)),)),
            ]
            if re_max <= 3:
                opts.append((f"np.exp({a})", Reg(tr, away0=True), ()))
            if im_max <= 3:
                opts += [(f"np.sin({a})", Reg(tr), ()), (f"np.cos({a})", Reg(tr), ())]
            if m <= 1:
                opts.append((f"np.tanh({a})", Reg(tr), ()))
        else:
            opts = [
                (f"np.tanh({a})", Reg(tr), ()),
                (f"np.sin({a})", Reg(tr), ()),
                (f"np.cos({a})", Reg(tr), ()),
                (f"np.square({a})", Reg(tr), ()),
                (f"{a} ** 2", Reg(tr), ()),
                (f"{a} ** 3", Reg(tr), ()),
                (f"-{a}", Reg(tr), ()),
                (f"np.negative({a})", Reg(tr), ()),
                (f"sp.expit({a})", Reg(tr, pos=m <= 5, away0=m <= 5), ()),
                (f"sp.erf({a})", Reg(tr), ()),
                (f"np.square({a}) + 0.5", Reg(tr, pos=True, away0=True), ()),
                (f"np.abs({a})", Reg(tr, pos=True, away0=True), (Guard("away0", (a,)),)),
            ]
            if m <= 3:
                opts.append((f"np.exp({a})", Reg(tr, pos=True, away0=True), ()))
            if m <= 5:
                opts.append((f"np.log1p(np.exp({a}))", Reg(tr, pos=True, away0=True), ()))
            if reg.pos:
                g = (Guard("positive", (a,)),)
                opts += [
                    (f"np.log({a})", Reg(tr), g),
                    (f"np.sqrt({a})", Reg(tr, pos=True, away0=True), g),
                    (f"{a} ** 1.5", Reg(tr, pos=True, away0=True), g),
                    (f"np.power({a}, -0.5)", Reg(tr, pos=True, away0=True), g),
                    (f"sp.gammaln({a})", Reg(tr), g),
                    (f"np.log1p({a})", Reg(tr, pos=True, away0=True), g),
                    (f"1.0 / {a}", Reg(tr, pos=True, away0=True), g),
                ]
        expr, flags, guards = self.draw(st.sampled_from(opts))
        return self.add([Step("unary", r, (a,), (f"{r} = {expr}",), guards)], [flags])

    def scalar(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        r, c = self.new(), self.is_complex(a)
        reg = self.regs[a]
        k = self.draw(st.sampled_from(["2.0", "0.5", "-1.5", "3.0"]))
        if c and self.draw(st.booleans()):
            k = self.draw(st.sampled_from(["(0.5-1.5j)", "1j", "(2+1j)"]))
        kpos = not k.startswith(("-", "(", "1j"))
        opts: list[tuple[str, Reg, tuple[Guard, ...]]] = [
            (f"{a} * {k}", Reg(reg.traced, pos=reg.pos and kpos), ()),
            (f"{k} * {a}", Reg(reg.traced, pos=reg.pos and kpos), ()),
            (f"{a} + {k}", Reg(reg.traced, pos=reg.pos and kpos), ()),
            (f"{k} - {a}", Reg(reg.traced), ()),
            (f"{a} - {k}", Reg(reg.traced), ()),
            (f"{a} / {k}", Reg(reg.traced, pos=reg.pos and kpos), ()),
        ]
        if reg.away0:
            flags = Reg(reg.traced, pos=reg.pos and kpos, away0=True)
            opts.append((f"{k} / {a}", flags, (Guard("away0", (a,)),)))
        expr, flags, guards = self.draw(st.sampled_from(opts))
        flags = dataclasses.replace(flags, fresh=True)
        return self.add([Step("scalar", r, (a,), (f"{r} = {expr}",), guards)], [flags])

    def _broadcast_partner(
        self, a: str, pred: Callable[[str], bool] = lambda n: True
    ) -> str | None:
        sa = self.val(a).shape

        def ok(n: str) -> bool:
            try:
                shape = np.broadcast_shapes(sa, self.val(n).shape)
            except ValueError:
                return False
            return math.prod(shape) <= MAX_SIZE and pred(n)

        cands = self.names(ok)
        # prefer a partner that broadcasts (row, column, scalar) over one of the same shape
        bcast = [n for n in cands if self.val(n).shape != sa]
        if bcast and self.draw(st.booleans()):
            return self.draw(st.sampled_from(bcast))
        return self.draw(st.sampled_from(cands)) if cands else None

    def binary(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        b = self._broadcast_partner(a)
        if b is None:
            return False
        r = self.new()
        ra, rb = self.regs[a], self.regs[b]
        tr = ra.traced or rb.traced
        both_pos = ra.pos and rb.pos
        opts: list[tuple[str, Reg, tuple[Guard, ...]]] = [
            (f"{a} + {b}", Reg(tr, pos=both_pos, away0=both_pos), ()),
            (f"{a} - {b}", Reg(tr), ()),
            (f"{a} * {b}", Reg(tr, pos=both_pos, away0=ra.away0 and rb.away0), ()),
            (f"np.add({a}, {b})", Reg(tr, pos=both_pos, away0=both_pos), ()),
            (f"np.subtract({b}, {a})", Reg(tr), ()),
            (f"np.multiply({a}, {b})", Reg(tr, pos=both_pos), ()),
        ]
        if rb.away0:
            g = (Guard("away0", (b,)),)
            opts += [
                (f"{a} / {b}", Reg(tr, pos=both_pos, away0=ra.away0), g),
                (f"np.divide({a}, {b})", Reg(tr, pos=both_pos), g),
            ]
        if not self.is_complex(a) and not self.is_complex(b):
            g = (Guard("gap2", (a, b)),)
            opts += [
                (f"np.maximum({a}, {b})", Reg(tr, pos=ra.pos or rb.pos), g),
                (f"np.minimum({a}, {b})", Reg(tr, pos=both_pos), g),
            ]
        expr, flags, guards = self.draw(st.sampled_from(opts))
        flags = dataclasses.replace(flags, fresh=True)
        return self.add([Step("binary", r, (a, b), (f"{r} = {expr}",), guards)], [flags])

    def _axis(self, ndim: int, allow_tuple: bool = True) -> Any:
        opts: list[Any] = [None]
        if ndim:
            opts += [*range(ndim), -1]
        if allow_tuple and ndim >= 2:
            opts += [(0, ndim - 1), (-2, -1)] if ndim > 2 else [(0, 1)]
        return self.draw(st.sampled_from(opts))

    def reduce(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        v = self.val(a)
        c = v.dtype.kind == "c"
        fn = self.draw(
            st.sampled_from(["sum", "mean", "prod", "var", "std"] + ([] if c else ["max", "min"]))
        )
        axis = self._axis(v.ndim)
        keepdims = self.draw(st.booleans())
        ddof = self.draw(st.sampled_from([0, 1])) if fn in ("var", "std") else 0
        lane = _lane_size(v.shape, axis)
        if fn in ("mean", "var", "std", "max", "min") and lane < 1 + ddof:
            return False
        if fn == "std" and lane < 2:  # var = 0 exactly: sqrt's kink
            return False
        kw = "" if axis is None else f", axis={axis}"
        kw += f", ddof={ddof}" if ddof else ""
        kw += ", keepdims=True" if keepdims else ""
        r = self.new()
        expr = f"{a}.{fn}({kw[2:]})" if self.draw(st.booleans()) else f"np.{fn}({a}{kw})"
        guards: tuple[Guard, ...] = ()
        if fn in ("max", "min"):
            guards = (Guard("gap", (a,), axis=axis),)
        if fn == "std":
            guards = (Guard("spread", (a,), axis=axis, ddof=ddof),)
        reg = self.regs[a]
        pos = (reg.pos and fn in ("sum", "mean", "prod", "max", "min")) or fn == "std"
        flags = Reg(reg.traced, pos=pos, away0=pos)
        return self.add([Step("reduce", r, (a,), (f"{r} = {expr}",), guards)], [flags])

    def cumulative(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        v = self.val(a)
        fn = self.draw(st.sampled_from(["cumsum", "cumprod"]))
        axis = self._axis(v.ndim, allow_tuple=False)
        r = self.new()
        kw = "" if axis is None else f"axis={axis}"
        if self.draw(st.booleans()):
            expr = f"np.{fn}({a}{', ' + kw if kw else ''})"
        else:
            expr = f"{a}.{fn}({kw})"
        reg = self.regs[a]
        flags = Reg(reg.traced, pos=reg.pos, away0=reg.pos)
        return self.add([Step("cumulative", r, (a,), (f"{r} = {expr}",))], [flags])

    def shape(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        v = self.val(a)
        nd, shp = v.ndim, v.shape
        opts = [f"{a}.ravel()", f"np.ravel({a})", f"{a}.flatten()", f"{a}[None]"]
        opts += [f"np.expand_dims({a}, {k})" for k in range(-1, nd + 1)]
        opts += [f"{a}.reshape({s})" for s in _reshapes(shp)]
        opts += [f"np.reshape({a}, {s})" for s in _reshapes(shp)[:2]]
        if nd >= 2:
            opts += [f"{a}.T", f"np.transpose({a})", f"np.swapaxes({a}, 0, -1)"]
            opts += [f"np.moveaxis({a}, 0, -1)", f"{a}[:, None]", f"np.transpose({a}, (1, 0))"]
            if nd == 3:
                opts += [f"np.transpose({a}, (1, 2, 0))", f"np.swapaxes({a}, 1, 2)"]
        if 1 in shp:
            opts.append(f"np.squeeze({a})")
        expr = self.draw(st.sampled_from(opts))
        r = self.new()
        reg = self.regs[a]
        flags = Reg(reg.traced, pos=reg.pos, away0=reg.away0, fresh=reg.fresh)
        return self.add([Step("shape", r, (a,), (f"{r} = {expr}",))], [flags])

    def slice(self) -> bool:
        a = self.pick(lambda n: self.val(n).ndim > 0)
        if a is None:
            return False
        v = self.val(a)
        kind = self.draw(st.sampled_from(["basic", "basic", "intarray", "mask"]))
        if kind == "basic":
            expr = f"{a}[{self.index(v.shape)}]"
        elif kind == "intarray":
            ax = self.draw(st.sampled_from(range(v.ndim)))
            n = v.shape[ax]
            if n == 0:
                return False
            idx = self.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4))
            lst = "[" + ", ".join(map(str, idx)) + "]"
            if self.draw(st.booleans()):
                lst = f"np.array({lst})"
            expr = f"{a}[{':, ' * ax}{lst}]"
        else:
            n = v.shape[0]
            mask = self.draw(st.lists(st.booleans(), min_size=n, max_size=n))
            expr = f"{a}[np.array({mask})]"
        r = self.new()
        reg = self.regs[a]
        flags = Reg(reg.traced, pos=reg.pos, away0=reg.away0, fresh=reg.fresh)
        return self.add([Step("index", r, (a,), (f"{r} = {expr}",))], [flags])

    def join(self) -> bool:
        a = self.pick(lambda n: self.val(n).ndim > 0)
        if a is None:
            return False
        sa = self.val(a).shape
        if self.draw(st.booleans()):  # concatenate along an axis where the shapes may differ
            ax = self.draw(st.sampled_from(range(len(sa))))

            def fits(n: str) -> bool:
                s = self.val(n).shape
                return len(s) == len(sa) and all(
                    x == y for i, (x, y) in enumerate(zip(s, sa, strict=True)) if i != ax
                )

            b = self.draw(st.sampled_from(self.names(fits)))
            parts = self.draw(st.sampled_from([[a, b], [b, a], [a, b, a]]))
            axs = "" if ax == 0 and self.draw(st.booleans()) else f", axis={ax}"
            expr = f"np.concatenate([{', '.join(parts)}]{axs})"
        else:
            b = self.draw(st.sampled_from(self.names(lambda n: self.val(n).shape == sa)))
            ax = self.draw(st.sampled_from(range(-1, len(sa) + 1)))
            expr = f"np.stack([{a}, {b}], axis={ax})"
        r = self.new()
        ra, rb = self.regs[a], self.regs[b]
        flags = Reg(ra.traced or rb.traced, pos=ra.pos and rb.pos, away0=ra.away0 and rb.away0)
        return self.add([Step("join", r, (a, b), (f"{r} = {expr}",))], [flags])

    def _value_for(self, shape: tuple[int, ...], constant: bool = False) -> str | None:
        """A register (or simple expression of one) whose value broadcasts to `shape` (with
        `constant`, an untraced one)."""

        def ok(n: str) -> bool:
            if constant and self.regs[n].traced:
                return False
            try:
                return np.broadcast_shapes(self.val(n).shape, shape) == shape
            except ValueError:
                return False

        cands = self.names(ok)
        if not cands:
            return None
        b = self.draw(st.sampled_from(cands))
        return self.draw(st.sampled_from([b, f"np.tanh({b})", f"2.0 * {b}"]))

    def writable(self, n: str) -> bool:
        """A register that may be written into: a traced one, or a constant of the program's own
        memory (`Reg.fresh`), into which only constant values go (a traced value written into a
        constant is refused by design, and an input must not change)."""
        return self.regs[n].traced or self.regs[n].fresh

    def setitem(self) -> bool:
        t = self.pick(
            lambda n: self.writable(n) and isinstance(self.env[n], np.ndarray) and self.val(n).ndim
        )
        if t is None:
            return False
        v = self.val(t)
        const = not self.regs[t].traced
        mode = self.draw(st.sampled_from(["zeros_like", "empty_like", "copy", "existing", "shift"]))
        if mode == "shift":  # overlapping source and destination
            if v.shape[0] < 2:
                return False
            src, dst = self.draw(st.sampled_from([("1:", ":-1"), (":-1", "1:"), ("::-1", ":")]))
            line = f"{t}[{dst}] = {t}[{src}]"
            return self.add([Step("setitem", t, (t,), (line,))], [Reg(not const)])
        if mode == "empty_like":
            idx = "..."
            sub = v.shape
        else:
            idx = self.index(v.shape)
            if self.draw(st.integers(0, 3)) == 0 and v.shape[0] > 1:
                n = v.shape[0]
                rows = self.draw(
                    st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)
                )
                idx = f"[{', '.join(map(str, rows))}]"
            sub = np.asarray(v[_parse_index(idx)]).shape
        value = self._value_for(sub, constant=const)
        if value is None:  # a constant: untraced values may be written into traced arrays
            value = self.draw(st.sampled_from(["0.5", "-1.0"]))
        reads = self.reads(value)
        if mode == "existing":
            lines: tuple[str, ...] = (f"{t}[{idx}] = {value}",)
            return self.add([Step("setitem", t, (t, *reads), lines)], [Reg(not const)])
        buf = self.new()
        make = {
            "zeros_like": f"{buf} = np.zeros_like({t})",
            "empty_like": f"{buf} = np.empty_like({t})",
            "copy": f"{buf} = {t}.copy()",
        }[mode]
        lines = (make, f"{buf}[{idx}] = {value}")
        return self.add([Step("setitem", buf, (t, *reads), lines)], [Reg(not const, fresh=True)])

    def inplace(self) -> bool:
        t = self.pick(self.writable)
        if t is None:
            return False
        const = not self.regs[t].traced
        op = self.draw(st.sampled_from(["+=", "-=", "*=", "/="]))
        shape = self.val(t).shape
        if self.draw(st.booleans()):
            value: str | None = self.draw(st.sampled_from(["2.0", "0.5", "-1.5"]))
            guards: tuple[Guard, ...] = ()
            reads: tuple[str, ...] = (t,)
        else:

            def ok(n: str) -> bool:
                if (op == "/=" and not self.regs[n].away0) or (const and self.regs[n].traced):
                    return False
                try:
                    return np.broadcast_shapes(self.val(n).shape, shape) == shape
                except ValueError:
                    return False

            cands = self.names(ok)
            if not cands:
                return False
            value = self.draw(st.sampled_from(cands))
            guards = (Guard("away0", (value,)),) if op == "/=" else ()
            reads = (t, value)
        line = f"{t} {op} {value}"
        return self.add([Step("inplace", t, reads, (line,), guards)], [Reg(not const)])

    def out(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        unary = self.draw(st.booleans())
        if unary:
            fn = self.draw(st.sampled_from(["exp", "tanh", "sin", "negative", "square"]))
            if fn == "exp" and (self.absmax(a) > 3):
                return False
            call = f"np.{fn}({a}, out={{c}})"
            shape = self.val(a).shape
            reads: tuple[str, ...] = (a,)
            guards: tuple[Guard, ...] = ()
        else:
            fn = self.draw(st.sampled_from(["add", "subtract", "multiply", "divide", "matmul"]))
            if fn == "matmul":
                b = self._matmul_partner(a)
                if b is None:
                    return False
                try:
                    shape = np.matmul(self.val(a), self.val(b)).shape
                except ValueError:
                    return False
                if shape == ():
                    return False
            else:
                b = self._broadcast_partner(a, lambda n: fn != "divide" or self.regs[n].away0)
                if b is None:
                    return False
                shape = np.broadcast_shapes(self.val(a).shape, self.val(b).shape)
            guards = (Guard("away0", (b,)),) if fn == "divide" else ()
            call = f"np.{fn}({a}, {b}, out={{c}})"
            reads = (a, b)
        same = self.names(lambda n: self.regs[n].traced and self.val(n).shape == shape)
        if same and self.draw(st.booleans()):
            c = self.draw(st.sampled_from(same))  # an existing register, maybe an operand
            lines: tuple[str, ...] = (call.format(c=c),)
            return self.add([Step("out", c, (*reads, c), lines, guards)], [Reg(True)])
        like = [n for n in reads if self.val(n).shape == shape and self.traced(n)]
        if not like:
            return False
        c = self.new()
        lines = (f"{c} = np.empty_like({like[0]})", call.format(c=c))
        return self.add([Step("out", c, reads, lines, guards)], [Reg(True)])

    def _matmul_partner(self, a: str) -> str | None:
        sa = self.val(a).shape
        if not sa:
            return None

        def ok(n: str) -> bool:
            sb = self.val(n).shape
            if not sb:
                return False
            try:
                out = np.matmul(np.zeros(sa), np.zeros(sb)).shape
            except ValueError:
                return False
            return math.prod(out) <= MAX_SIZE

        cands = self.names(ok)
        return self.draw(st.sampled_from(cands)) if cands else None

    def matmul(self) -> bool:
        a = self.pick(lambda n: self.val(n).ndim >= 1)
        if a is None:
            return False
        nd = self.val(a).ndim
        b = self._matmul_partner(a)
        forms = []
        if b is not None:
            forms += [f"{a} @ {b}", f"np.matmul({a}, {b})"]
            if nd <= 2 and self.val(b).ndim <= 2:
                forms.append(f"np.dot({a}, {b})")
        if nd == 2:
            forms += [f"{a} @ {a}.T", f"{a}.T @ {a}"]
        if nd == 3:
            forms.append(f"{a} @ np.swapaxes({a}, 1, 2)")
        if not forms:
            return False
        expr = self.draw(st.sampled_from(forms))
        r = self.new()
        reads = self.reads(expr)
        flags = Reg(self.traced(*reads))
        return self.add([Step("matmul", r, reads, (f"{r} = {expr}",))], [flags])

    def linalg(self) -> bool:
        a = self.pick(lambda n: self.val(n).ndim in (2, 3) and self.val(n).shape[-1] > 0)
        if a is None:
            return False
        sa = self.val(a).shape
        if sa[-1] != sa[-2]:  # a square matrix first: A Aᵀ
            sq = self.new()
            tr = f"np.swapaxes({a}, -1, -2)" if len(sa) == 3 else f"{a}.T"
            line = f"{sq} = {a} @ {tr}"
            if not self.add([Step("matmul", sq, (a,), (line,))], [Reg(self.traced(a))]):
                return False
            a = sq
        n, m = self.val(a).shape[-1], self.absmax(a)
        # 3 I + 0.3 tanh(s A) with |s A| ≤ 1: off-diagonal norm ≤ 0.3·1.6·n < 3, condition < 10
        s = "1.0" if m <= 1.0 else f"{10.0 ** -math.ceil(math.log10(m)):g}"
        k = self.new()
        scaled = a if s == "1.0" else f"{s} * {a}"
        kline = f"{k} = 3.0 * np.eye({n}, dtype={a}.dtype) + 0.3 * np.tanh({scaled})"
        if not self.add([Step("linalg", k, (a,), (kline,))], [Reg(self.traced(a))]):
            return False
        fn = self.draw(st.sampled_from(["inv", "solve", "solve", "det", "slogdet"]))
        r = self.new()
        if fn == "solve":
            ks = self.val(k).shape

            def ok(name: str) -> bool:
                sb = self.val(name).shape
                if len(ks) == 2:
                    return sb == (n,) or (len(sb) == 2 and sb[0] == n)
                return len(sb) == 3 and sb[:2] == ks[:2]

            cands = self.names(ok)
            rhs = self.draw(st.sampled_from(cands)) if cands else f"{k}[..., ::-1, :]"
            line = f"{r} = np.linalg.solve({k}, {rhs})"
        elif fn == "slogdet":
            line = f"{r} = np.linalg.slogdet({k})[1]"
        else:
            line = f"{r} = np.linalg.{fn}({k})"
        reads = self.reads(line.split("=", 1)[1])
        step = Step("linalg", r, reads, (line,), (Guard("cond", (k,)),))
        return self.add([step], [Reg(self.traced(*reads))])

    def copy(self) -> bool:
        a = self.pick()
        if a is None:
            return False
        r = self.new()
        expr = self.draw(st.sampled_from([f"{a}.copy()", f"np.copy({a})"]))
        reg = self.regs[a]
        flags = Reg(reg.traced, pos=reg.pos, away0=reg.away0, fresh=True)
        return self.add([Step("copy", r, (a,), (f"{r} = {expr}",))], [flags])


# Families and their weights (repeats): elementwise and shape steps are the bulk of real code.
FAMILIES = (
    ["unary"] * 4
    + ["scalar"] * 2
    + ["binary"] * 4
    + ["reduce"] * 3
    + ["cumulative"] * 2
    + ["shape"] * 3
    + ["slice"] * 3
    + ["join"]
    + ["setitem"] * 2
    + ["inplace"] * 2
    + ["out"] * 2
    + ["matmul"] * 2
    + ["linalg"]
    + ["copy"]
    + ["datadep"] * 3
    + ["scalararg"] * 2
)


def _copy(x: Any) -> Any:
    return x.copy() if isinstance(x, np.ndarray) else x


def _lane_size(shape: tuple[int, ...], axis: Any) -> int:
    if axis is None:
        return math.prod(shape)
    axes = axis if isinstance(axis, tuple) else (axis,)
    return math.prod(shape[ax] for ax in axes)


def _reshapes(shape: tuple[int, ...]) -> list[str]:
    n = math.prod(shape)
    out = ["-1", f"({n},)", f"(1, {n})" if n else "(0, 1)"]
    for d in (2, 3, 4):
        if n and n % d == 0 and d < n:
            out += [f"({d}, -1)", f"(-1, {d})", f"({d}, {n // d})"]
    if len(shape) >= 2:
        out.append(f"({shape[0]}, -1)")
    if len(shape) >= 3:
        out.append(f"({shape[0] * shape[1]}, {shape[2]})")
    return out


def _parse_index(idx: str) -> Any:
    return eval(f"np.s_[{idx}]", {"np": np})


def _input_shapes(draw: Draw) -> list[tuple[int, ...]]:
    ndim = draw(st.sampled_from([0, 1, 1, 2, 2, 2, 2, 3, 3]))
    # 10% of programs may have empty dimensions
    dim = st.sampled_from([1, 2, 3, 4, 3, 5]) if draw(st.integers(0, 9)) else st.integers(0, 4)
    shape0 = tuple(draw(dim) for _ in range(ndim))
    shapes = [shape0]
    for _ in range(draw(st.integers(0, 2))):
        rel = draw(st.sampled_from(["same", "T", "row", "col", "scalar", "square", "other"]))
        if rel == "same" or not shape0:
            s = shape0
        elif rel == "T":
            s = shape0[::-1]
        elif rel == "row":
            s = shape0[-1:]
        elif rel == "col":
            s = (*shape0[:-1], 1)
        elif rel == "scalar":
            s = ()
        elif rel == "square":
            s = (shape0[-1], shape0[-1])
        else:
            s = tuple(draw(st.integers(1, 4)) for _ in range(draw(st.integers(1, 3))))
        shapes.append(s)
    return shapes


def sample_values(spec: InputSpec, rng: np.random.Generator, scale: float = 0.7) -> Any:
    """Input values for `spec` (C-contiguous, its dtype): scale · standard normal; for a Python
    int argument 1, 2 or 3."""
    if spec.dtype == "int":
        return int(rng.integers(1, 4))
    x = scale * rng.standard_normal(spec.shape)
    if spec.dtype == "complex128":
        x = x + 1j * scale * rng.standard_normal(spec.shape)
    x = np.asarray(x, dtype=spec.dtype)
    return x[()] if spec.scalar else x


@st.composite
def programs(draw: Draw, max_steps: int = 8) -> Program:
    shapes = _input_shapes(draw)
    dtype = draw(st.sampled_from(DTYPES))
    active = [draw(st.booleans()) or i == 0 for i in range(len(shapes))]
    if len(shapes) > 1 and draw(st.integers(0, 3)) == 0:
        active = [i != 0 for i in range(len(shapes))]  # a constant first argument
    inputs = tuple(
        InputSpec(f"x{i}", s, dtype, a, scalar=s == () and draw(st.integers(0, 2)) == 0)
        for i, (s, a) in enumerate(zip(shapes, active, strict=True))
    )
    # a constant array may be captured: f reads it as a global, changed between calls
    inputs = tuple(
        dataclasses.replace(s, captured=True) if not s.active and draw(st.booleans()) else s
        for s in inputs
    )
    if draw(st.integers(0, 3)) == 0:  # a Python int argument, drawn anew for each call
        inputs += (InputSpec(f"x{len(inputs)}", (), "int", active=False),)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    samples = [sample_values(s, rng) for s in inputs]
    b = _Builder(draw, inputs, samples)
    n_steps = draw(st.integers(1, max_steps))
    attempts = 0
    while len(b.steps) < n_steps and attempts < 4 * max_steps:
        attempts += 1
        family = draw(st.sampled_from(FAMILIES))
        getattr(b, family)()
    return _renumber(Program(inputs, tuple(b.steps), _loss(draw, b)))


def _renumber(p: Program) -> Program:
    """Registers r0, r1, ... in order of definition (dropped candidates leave gaps)."""
    order = dict.fromkeys(s.out for s in p.steps if re.fullmatch(r"r[0-9]+", s.out))
    names = {old: f"r{i}" for i, old in enumerate(order)}

    def sub(text: str) -> str:
        return re.sub(r"\br[0-9]+\b", lambda m: names.get(m.group(0), m.group(0)), text)

    def name(n: str) -> str:
        return names.get(n, n)

    steps = tuple(
        dataclasses.replace(
            s,
            out=name(s.out),
            reads=tuple(map(name, s.reads)),
            lines=tuple(map(sub, s.lines)),
            guards=tuple(dataclasses.replace(g, regs=tuple(map(name, g.regs))) for g in s.guards),
        )
        for s in p.steps
    )
    return Program(p.inputs, steps, tuple(map(sub, p.loss)))


def _loss(draw: Draw, b: _Builder) -> tuple[str, ...]:
    """loss = Σ w·r over the last traced register (and maybe one more), w = cos(1..n)."""
    traced = [n for n in b.regs if b.regs[n].traced]
    regs = [traced[-1]]
    if len(traced) > 1 and draw(st.booleans()):
        other = draw(st.sampled_from(traced[:-1]))
        regs.append(other)
    lines = []
    for i, r in enumerate(regs):
        w = f"w{i}"
        lines.append(f"{w} = np.cos(np.arange(1.0, 1.0 + {r}.size)).reshape(np.shape({r}))")
        if b.is_complex(r):
            term = draw(
                st.sampled_from(
                    [
                        f"np.sum({w} * {r}.real) + np.sum(np.sin({w}) * {r}.imag)",
                        f"np.sum({w} * ({r} * np.conj({r})).real)",
                        f"np.sum({w} * np.real({r})) - np.sum({w} * np.imag({r}))",
                    ]
                )
            )
        else:
            term = draw(st.sampled_from([f"np.sum({w} * {r})", f"({r} * {w}).sum()"]))
        lines.append(f"loss = {term}" if i == 0 else f"loss = loss + {term}")
    return tuple(lines)
