"""Generated steps whose recorded trace depends on the data: what `compile=True` must guard.

`value_and_grad(f, compile=True)` replays a recorded trace without running f while its guards
hold (DESIGN.md §6, issue #15). These steps make the trace depend on something other than array
contents flowing through rules, so that fresh inputs on a later call may need another trace:

- branch: `r = A if s > 0 else B` on `s = np.sum(a)` (two different continuations);
- loop: `while np.sum(r * r) > 1.0: r = 0.5 * r` (a data-dependent number of steps);
- argmax / argsort: an index computed from the data, used to index a traced array
  (`b.ravel()[np.argmax(a)]`, `np.take_along_axis(b, np.argsort(a, axis=-1), axis=-1)`, ...);
- masks: `np.where(a > 0, a, 0.1 * a)`, `np.sign(a) * b`, `np.sum(b[a > 0])` (a data-dependent
  shape, reduced afterwards), `np.sum(b[np.nonzero(a > 0)])`, `r = b.copy(); r[a < 0] = 0.0`,
  `r[np.unravel_index(np.argmax(a), a.shape)] = 0.0`;
- a Python int argument (`InputSpec` dtype "int", drawn anew for each call) used as a
  multiplier, a power, a loop count, a branch, a shift or an axis.

Each step is smooth near its inputs, so finite differences stay meaningful: a branch or mask
operand stays away from 0, argmax lanes have no near-tie, argsort lanes no two close elements, a
halving loop does not stop near a switch of its count (the guards of `fuzz.program`). Data only
decides *which* smooth function runs. The mixin is part of the generator's `_Builder`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fuzz.program import Guard, Step
from hypothesis import strategies as st


class DataDependentSteps:
    """The families `datadep` and `scalararg` of the generator (a mixin of `_Builder`)."""

    # (provided by _Builder)
    draw: Any
    regs: dict[str, Any]
    ints: list[str]
    pick: Any
    new: Any
    val: Any
    is_complex: Any
    add: Any
    flags: Any
    traced: Any

    def _real(self, n: str) -> bool:
        return not self.is_complex(n) and self.val(n).size > 0

    def _like(self, a: str, pred: Any = lambda n: True) -> str:
        """A register of a's shape (a traced one if there is), else a itself."""
        shape = self.val(a).shape
        same = [n for n in self.regs if self.val(n).shape == shape and pred(n)]
        traced = [n for n in same if self.regs[n].traced]
        cands = traced or same or [a]
        return str(self.draw(st.sampled_from(cands)))

    def datadep(self) -> bool:
        kind = self.draw(
            st.sampled_from(["branch", "loop", "argmax", "argsort", "where", "mask", "setmask"])
        )
        return bool(getattr(self, f"_dd_{kind}")())

    def _dd_branch(self) -> bool:
        a = self.pick(self._real)
        b = self.pick()
        if a is None or b is None:
            return False
        s, r = self.new(), self.new()
        total = self.draw(st.sampled_from([f"np.sum({a})", f"{a}.mean()", f"np.max({a}) - 0.5"]))
        forms = [f"np.tanh({b})", f"2.0 * {b} - 1.0", f"np.sin({b})", f"{b} ** 2", f"{b} * {s}"]
        if self.val(b).ndim:
            forms += [f"{b}[::-1]", f"np.cumsum({b}, axis=-1)"]
        first, second = self.draw(st.permutations(forms))[:2]
        gap = (Guard("gap", (a,)),) if "max" in total else ()
        steps = [
            Step("datadep", s, (a,), (f"{s} = {total}",), gap),
            Step("datadep", r, (s, b), (f"{r} = {first} if {s} > 0 else {second}",),
                 (Guard("away0", (s,)),)),
        ]  # fmt: skip
        return bool(self.add(steps, [self.flags(self.traced(a)), self.flags(self.traced(a, b))]))

    def _dd_loop(self) -> bool:
        a = self.pick(self._real)
        if a is None:
            return False
        r = self.new()
        lines = (f"{r} = {a} * 1.0", f"while np.sum({r} * {r}) > 1.0: {r} = 0.5 * {r}")
        step = Step("datadep", r, (a,), lines, (Guard("halving", (a,)),))
        return bool(self.add([step], [self.flags(self.traced(a))]))

    def _dd_argmax(self) -> bool:
        a = self.pick(lambda n: self._real(n) and self.val(n).size >= 2)
        if a is None:
            return False
        fn = self.draw(st.sampled_from(["argmax", "argmin"]))
        v = self.val(a)
        if v.ndim and self.draw(st.booleans()):  # along an axis, of an array of a's shape
            k = self.draw(st.sampled_from([*range(v.ndim), -1]))
            b = self._like(a)
            idx = f"np.{fn}({a}, axis={k}, keepdims=True)"
            expr, guard = f"np.take_along_axis({b}, {idx}, axis={k})", Guard("gap", (a,), axis=k)
        else:  # a flat index into an array of a's size
            size = v.size
            b = self._like(a) if self.draw(st.booleans()) else self.pick(
                lambda n: self.val(n).size == size
            )  # fmt: skip
            expr, guard = f"{b}.ravel()[np.{fn}({a})]", Guard("gap", (a,))
        r = self.new()
        step = Step("datadep", r, (a, b), (f"{r} = {expr}",), (guard,))
        return bool(self.add([step], [self.flags(self.traced(b))]))

    def _dd_argsort(self) -> bool:
        a = self.pick(lambda n: self._real(n) and self.val(n).ndim >= 1)
        if a is None:
            return False
        v = self.val(a)
        if v.ndim == 1 and self.draw(st.booleans()):  # rows of b in the order of a
            n = v.shape[0]
            b = self.pick(lambda m: self.val(m).ndim >= 1 and self.val(m).shape[0] == n)
            expr = f"{b}[np.argsort({a})]"
        else:
            b = self._like(a)
            expr = f"np.take_along_axis({b}, np.argsort({a}, axis=-1), axis=-1)"
        r = self.new()
        step = Step("datadep", r, (a, b), (f"{r} = {expr}",), (Guard("distinct", (a,), axis=-1),))
        return bool(self.add([step], [self.flags(self.traced(b))]))

    def _dd_where(self) -> bool:
        return self._dd_pair(
            lambda a, b: [
                f"np.where({a} > 0, {a}, 0.1 * {a})",
                f"np.where({a} > 0, np.tanh({b}), 0.5 * {b})",
                f"np.where({a} < 0, 2.0, {b})",
                f"np.sign({a}) * {b}",
            ],
            both=True,
        )

    def _dd_mask(self) -> bool:  # a data-dependent shape, reduced at once
        return self._dd_pair(
            lambda a, b: [
                f"np.sum({b}[{a} > 0])",
                f"({b}[{a} > 0] ** 2).sum()",
                f"np.sum({b}[np.nonzero({a} > 0)])",
                f"np.sum({b}[{a} < 0], axis=0)",
            ],
            both=False,
        )

    def _dd_pair(self, exprs: Callable[[str, str], list[str]], both: bool) -> bool:
        """A step `r = expr(a, b)` where the sign of a decides (kept away from 0); its
        result is traced through b, and through a too if `both`."""
        a = self.pick(self._real)
        if a is None:
            return False
        b = self._like(a)
        expr = self.draw(st.sampled_from(exprs(a, b)))
        r = self.new()
        step = Step("datadep", r, (a, b), (f"{r} = {expr}",), (Guard("away0", (a,)),))
        traced = self.traced(a, b) if both else self.traced(b)
        return bool(self.add([step], [self.flags(traced)]))

    def _dd_setmask(self) -> bool:
        a = self.pick(lambda n: self._real(n) and self.val(n).ndim >= 1)
        if a is None:
            return False
        b = self._like(a, lambda n: self.regs[n].traced)
        if not self.regs[b].traced:
            return False
        r = self.new()
        if self.val(a).size >= 2 and self.draw(st.integers(0, 3)) == 0:  # at the argmax of a
            at = f"np.unravel_index(np.argmax({a}), {a}.shape)"
            lines = (f"{r} = {b}.copy()", f"{r}[{at}] = 0.0")
            step = Step("datadep", r, (a, b), lines, (Guard("gap", (a,)),))
            return bool(self.add([step], [self.flags(True)]))
        write = self.draw(st.sampled_from(["= 0.0", "*= 0.5", "= 2.0 * " + b + f"[{a} < 0]"]))
        lines = (f"{r} = {b}.copy()", f"{r}[{a} < 0] {write}")
        step = Step("datadep", r, (a, b), lines, (Guard("away0", (a,)),))
        return bool(self.add([step], [self.flags(True)]))

    def scalararg(self) -> bool:
        """A step that uses a Python int argument (1, 2 or 3, drawn anew for each call)."""
        if not self.ints:
            return False
        k = self.draw(st.sampled_from(self.ints))
        a = self.pick()
        if a is None:
            return False
        nd = self.val(a).ndim
        forms = [
            f"{a} * {k}",
            f"{a} ** {k}",
            f"{a} / {k}",
            f"sum(np.sin(j * {a}) for j in range(1, {k} + 1))",
            f"np.tanh({a}) if {k} > 1 else 0.5 * {a}",
        ]
        if nd >= 1:
            forms.append(f"np.roll({a}, {k}, axis=-1)")
        if nd >= 2:
            forms.append(f"np.cumsum({a}, axis={k} % {a}.ndim)")
        r = self.new()
        step = Step("scalararg", r, (a,), (f"{r} = {self.draw(st.sampled_from(forms))}",))
        return bool(self.add([step], [self.flags(self.traced(a))]))
