"""What a correct rule must produce for one call: the primal's behaviour and finite differences.

The call is seen as a map from the state before it (every argument) to the
state after it plus the new outputs (docs/concepts.md, "Mutation"). For each differentiable
argument j, with a random direction ẋⱼ, random output cotangent ȳ and random
pre-seeded fdata rᵢ (the cotangent of argument i's state *after* the call),
a correct pullback leaves argument j with a cotangent x̄ⱼ such that

    ⟨x̄ⱼ, ẋⱼ⟩ = ⟨ȳ, ∂y/∂xⱼ·ẋⱼ⟩ + Σ_{i mutated, active} ⟨rᵢ, ∂xᵢ'/∂xⱼ·ẋⱼ⟩ + [j not mutated]·⟨rⱼ, ẋⱼ⟩

(a constant mutated argument has no fdata: its post-call cotangent is zero). The
right-hand side is computed here by central differences of the primal function,
over a sweep of relative step sizes, once per argument, with the rounding error
of each difference (`fd_noise`); every activity combination of the rule is then
compared against it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from rulekit import NoTangent, inner, randn_tangent
from testutils._call import Call, fdata_like
from testutils._fdmath import (
    EPS,
    LARGE,
    PRECISION,
    SMALL_STEPS,
    STEPS,
    FDStep,
    FDTerm,
    elements,
    fd_noise,
    norm,
    precision_of,
    relative_direction,
)
from testutils._trees import (
    clone,
    fd_tangent,
    finite,
    has_narrow,
    leaves,
    max_abs,
    perturb,
    same_value,
    shares,
    tree_map,
    widen,
)

__all__ = [
    "EPS",
    "PRECISION",
    "FDStep",
    "FDTerm",
    "Reference",
    "fd_noise",
    "output_aliases",
    "precision_of",
]


@dataclass
class Reference:
    """The primal's behaviour on a call, and the finite-difference side of the dot test."""

    call: Call
    rng: np.random.Generator
    y: Any = None  # primal output (on clones)
    post: list[Any] = field(default_factory=list)  # argument values after the primal ran
    mutated: frozenset[int] = frozenset()
    aliases: dict[tuple[Any, ...], frozenset[int]] = field(default_factory=dict)
    precision: str = "double"
    directions: list[Any] = field(default_factory=list)
    seeds: list[Any] = field(default_factory=list)  # fdata before the pullback (post-state ct)
    #: the output cotangent (zero on outputs that alias an argument)
    ybar: Any = field(default_factory=NoTangent)
    fd: dict[int, FDTerm] = field(default_factory=dict)
    wide: bool = False
    casts_complex: bool = False  # the primal itself drops imaginary parts (a complex → real cast)
    #: outputs that alias an argument but carry their own fdata: read-only views whose
    #: elements share memory (np.broadcast_to), where a shared fdata could not accumulate
    own_fdata: frozenset[tuple[Any, ...]] = frozenset()
    rounding: float = 0.0  # rounding level of the inputs: 1e3·ε·max|x|
    #: per argument, a step at which a dot-product test passed (a later check of the same
    #: rule on nearby values tries that step alone first: `build(..., steps=...)`)
    passed_at: dict[int, float] = field(default_factory=dict)

    #: 1e3·ε per precision: outputs may differ from numpy's by this much times the inputs'
    #: scale (another algorithm's rounding; an exact 0 computed as 1e-17).
    ROUNDING: ClassVar[dict[str, float]] = {"double": 2.2e-13, "single": 1.2e-4, "half": 1e-1}

    @classmethod
    def build(
        cls,
        call: Call,
        seed: int,
        fd: bool | None = True,
        steps: dict[int, list[float]] | None = None,
        like: Reference | None = None,
    ) -> Reference:
        """The primal's behaviour on `call`, random draws (`seed`) and, if `fd`, finite
        differences (at `steps[j]` for argument j, else the whole sweep). `fd=None`: no
        draws either (for `adopt`). `like`: a reference of the same call on other values
        in the same layout, whose probe for mutated arguments holds here too."""
        ref = cls(call, np.random.default_rng(seed))
        values = call.fresh()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", np.exceptions.ComplexWarning)
            ref.y = call.primal(values)
        ref.casts_complex = any(issubclass(w.category, np.exceptions.ComplexWarning)
                                for w in caught)  # fmt: skip
        ref.post = values
        ref.mutated = frozenset(
            i for i, v in enumerate(values) if not same_value(v, call.values[i])
        ) | (_probe_mutated(call) if like is None else like.mutated)
        ref.aliases = output_aliases(ref.y, values)
        ref.own_fdata = frozenset(p for p in ref.aliases if _overlapping_view(ref.y, p))
        ref.precision = precision_of([call.values, ref.y])
        ref.rounding = cls.ROUNDING[ref.precision] * max_abs(call.values)
        if fd is None:  # (the caller adopts another reference's draws: `adopt`)
            return ref
        ref._draw()
        if fd:
            ref._finite_differences(steps or {})
        return ref

    def behaves_like(self, other: Reference, rtol: float) -> bool:
        """Whether the primal did the same here as in `other` (other layouts of the inputs):
        same mutated arguments, same aliasing, the same output values."""
        from testutils._trees import tree_close

        return (
            self.mutated == other.mutated
            and self.aliases == other.aliases
            and self.own_fdata == other.own_fdata
            and tree_close(self.y, other.y, rtol, floor=other.rounding) is None
        )

    def adopt(self, other: Reference) -> None:
        """Use `other`'s directions, cotangents, seeds and finite differences (same call in
        another layout, where the primal `behaves_like` it: its differences are the same)."""
        self.directions, self.seeds, self.ybar = other.directions, other.seeds, other.ybar
        self.fd, self.wide = other.fd, other.wide

    # -- random directions, seeds, output cotangent ------------------------------------

    def _draw(self) -> None:
        rng, call = self.rng, self.call
        self.directions = [
            relative_direction(v, randn_tangent(v, rng)) if d else NoTangent()
            for v, d in zip(call.values, call.differentiable, strict=True)
        ]
        self.seeds = []
        for v, d in zip(call.values, call.differentiable, strict=True):
            if not d:
                self.seeds.append(None)
                continue
            fd = fdata_like(v)
            for _, a in leaves(fd):
                if isinstance(a, np.ndarray):
                    a.flags.writeable = True
                    np.copyto(a, randn_tangent(a, rng))
            self.seeds.append(fd)
        ybar = randn_tangent(self.y, rng) if not isinstance(self.y, type(None)) else NoTangent()
        self.ybar = _zero_aliased(ybar, set(self.aliases) - self.own_fdata)

    def seed_tangent(self, i: int) -> Any:
        """Argument i's pre-seeded fdata as a full tangent (scalars: zero)."""
        from rulekit import NoRData, join_tangent

        return join_tangent(self.call.values[i], self.seeds[i], NoRData())

    # -- finite differences ------------------------------------------------------------

    def _primal_on(self, values: list[Any]) -> tuple[Any, list[Any]]:
        y = self.call.primal(values)
        return y, values

    def _choose_precision(self) -> bool:
        """FD in double precision when the primal behaves the same on widened inputs."""
        if not has_narrow(self.call.values):
            return False
        try:
            wide = [widen(v) for v in self.call.values]
            y = self.call.primal(wide)
        except Exception:
            return False
        mutated = frozenset(
            i for i, v in enumerate(wide) if not same_value(v, widen(self.call.values[i]))
        )
        same_shape = [np.shape(v) for _, v in leaves(y)] == [np.shape(v) for _, v in leaves(self.y)]
        return mutated <= self.mutated and output_aliases(y, wide) == self.aliases and same_shape

    def _finite_differences(self, only: dict[int, list[float]]) -> None:
        """Central differences along every argument's direction, at every step of the sweep
        (or at `only[j]`'s steps for argument j)."""
        call = self.call
        self.wide = self._choose_precision()
        base = [widen(v) for v in call.values] if self.wide else call.values
        precision = "double" if self.wide else self.precision
        for j, d in enumerate(call.differentiable):
            if not d:
                continue
            steps = STEPS[precision]
            if max_abs(base[j]) > LARGE:  # (relative steps of 1e-6 are 1e-3 at x = 1e3)
                steps = steps + SMALL_STEPS[precision]
            term = FDTerm([])
            for h in only.get(j, steps):
                try:
                    with warnings.catch_warnings():
                        # A step may leave the primal's domain into complex values that
                        # numpy casts back to real: that step is skipped, as one that raises
                        # (unless the primal casts complex to real at the point itself).
                        if self.casts_complex:
                            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
                        else:
                            warnings.simplefilter("error", np.exceptions.ComplexWarning)
                        step = self._rhs(base, j, h)
                except (ArithmeticError, ValueError, np.exceptions.ComplexWarning,
                        np.linalg.LinAlgError):  # fmt: skip
                    continue
                if step is not None and math.isfinite(step.own):
                    term.steps.append(step)
            self.fd[j] = term

    def _rhs(self, base: list[Any], j: int, h: float) -> FDStep | None:
        vp = [clone(v) for v in base]
        vm = [clone(v) for v in base]
        vp[j] = perturb(base[j], self.directions[j], h)
        vm[j] = perturb(base[j], self.directions[j], -h)
        with np.errstate(all="ignore"):
            yp, postp = self._primal_on(vp)
            ym, postm = self._primal_on(vm)
        ydot = fd_tangent(yp, ym, h)
        if not finite(ydot):
            return None
        own = inner(self.ybar, ydot)
        bound = norm(self.ybar) * norm(ydot)
        noise = fd_noise(self.ybar, yp, ym, h)
        size = elements(ydot)
        states = {}
        for i in self.mutated:
            xdot = fd_tangent(postp[i], postm[i], h)
            if not finite(xdot):
                return None
            r = self.seed_tangent(i)
            states[i] = (inner(r, xdot), norm(r) * norm(xdot), fd_noise(r, postp[i], postm[i], h))
            size = max(size, elements(xdot))
        if j not in self.mutated:
            r = self.seed_tangent(j)
            own += inner(r, self.directions[j])
            bound += norm(r) * norm(self.directions[j])
        return FDStep(h, own, bound, noise, states, max(size, elements(self.directions[j])))


def _probe_mutated(call: Call) -> frozenset[int]:
    """Arguments the primal writes into, seen on random inputs of the same shapes.

    A write of the value already there (`x[0] = x[0]`) changes nothing on the caller's
    inputs; on random ones it does. Primals that reject random inputs are not probed.
    """
    rng = np.random.default_rng(12345)

    def randomize(v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.dtype.kind in "fc" and v.flags.writeable:
            out = clone(v)
            np.copyto(out, randn_tangent(v, rng))
            return out
        return clone(v)

    before = [tree_map(v, randomize) for v in call.values]
    after = [clone(v) for v in before]
    try:
        call.primal(after)
    except Exception:
        return frozenset()
    return frozenset(i for i, (a, b) in enumerate(zip(after, before, strict=True))
                     if not same_value(a, b))  # fmt: skip


def _overlapping_view(y: Any, path: tuple[Any, ...]) -> bool:
    """A read-only array whose elements share memory (a zero stride on a longer axis)."""
    leaf = y
    for p in path:
        leaf = leaf[p]
    return (
        isinstance(leaf, np.ndarray)
        and not leaf.flags.writeable
        and any(s == 0 and n > 1 for s, n in zip(leaf.strides, leaf.shape, strict=True))
    )


def output_aliases(y: Any, values: list[Any]) -> dict[tuple[Any, ...], frozenset[int]]:
    """For every array leaf of an output: the arguments it shares memory with."""
    out = {}
    for path, leaf in leaves(y):
        if isinstance(leaf, np.ndarray):
            out[path] = frozenset(i for i, v in enumerate(values) if shares(leaf, v))
    return {p: s for p, s in out.items() if s}


def _zero_aliased(t: Any, paths: set[tuple[Any, ...]], path: tuple[Any, ...] = ()) -> Any:
    """`t` with the leaves at `paths` (outputs that alias an argument) set to zero."""
    if path in paths:
        return np.zeros_like(t) if isinstance(t, np.ndarray) else NoTangent()
    if isinstance(t, tuple):
        return tuple(_zero_aliased(e, paths, (*path, i)) for i, e in enumerate(t))
    if isinstance(t, list):
        return [_zero_aliased(e, paths, (*path, i)) for i, e in enumerate(t)]
    return t
