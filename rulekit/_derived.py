"""Rules that differentiate a Python function they are given: `DerivedRules`.

A higher-order function (`scan`, `checkpoint`, an ODE solver, a fixed-point
iteration) written as a rule receives a function `fn` and must run `fn`'s
reverse pass inside its own pullback. `DerivedRules` is the cache such a rule
keeps (one per call site: build it in a `build_primitive_rrule` factory): it
holds a derived rule (`rulekit.DerivedRule`, `compile=True`) per function and
signature, so `fn` is traced once per signature and its rule reused on every
call, the way `value_and_grad` reuses its rules.

The function comes as a `Lifted` (`lift_closure`): its captured traced values
and arrays are arguments of the rule (the engine hands them over as CoDuals,
fdata included), and the derived rule is a rule of

    g(*arg_leaves, *lifted_values) = flatten(lifted.rebuild(lifted_values)(*args)),

so its pullback increments the fdata of arrays `fn` captured and returns the
cotangents of captured scalars, exactly like those of its arguments.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit._api import DerivedRule
from rulekit._codual import CoDual
from rulekit._lifting import LEAF, Lifted, TreeDef, flatten, unflatten
from rulekit._tangents import NoFData, NoRData

__all__ = ["DerivedRules", "FlatFunction"]

_NO_F = NoFData()
_NO_R = NoRData()
_FCD = CoDual(None, _NO_F)  # (a derived rule ignores its function argument's CoDual)


class FlatFunction:
    """`fn(*args)` as a function of flat leaves: `(*arg_leaves, *lifted_values) -> out_leaves`.

    The function and argument structure are set before each call (`lifted`, `args_def`):
    calls sharing one derived rule have equal `Lifted.key`s, hence the same code. The
    output's structure is kept in `out_def` (set while tracing).
    """

    __slots__ = ("__wrapped__", "args_def", "lifted", "n_args", "out_def")

    def __init__(self, first: Lifted) -> None:
        self.lifted: Lifted | None = None
        self.args_def: TreeDef = None
        self.n_args = 0
        self.out_def: TreeDef = None
        # What a compiled replay watches for changes (its globals, the attributes of the
        # objects it captures): the function with its lifted values blanked out, made once.
        # Later calls with the same key capture the same objects, so it stands for them.
        self.__wrapped__ = first.rebuild([None] * first.n)

    def __call__(self, *leaves: Any) -> tuple[Any, ...]:
        assert self.lifted is not None
        n = self.n_args
        args = unflatten(self.args_def, leaves[:n])
        out = self.lifted.rebuild(leaves[n:])(*args)
        outs, self.out_def = flatten(out)
        return tuple(outs)

    @property
    def __name__(self) -> str:  # (error messages name the function that was traced)
        return getattr(self.lifted and self.lifted.fn, "__name__", "fn")


def _normalise(cd: CoDual) -> CoDual:
    """A leaf that cannot carry a derivative (an int, an integer array) is inactive."""
    dx = cd.dx
    if dx is None:
        return cd
    x = cd.x
    if isinstance(x, np.ndarray):
        ok = x.dtype.kind in "fc" and isinstance(dx, np.ndarray)
    else:
        ok = isinstance(x, (float, complex, np.inexact))
    return cd if ok else CoDual(x, None)


def _leaf_key(cd: CoDual) -> Any:
    x = cd.x
    if isinstance(x, np.ndarray):
        return (x.dtype, x.ndim, cd.dx is None)
    return (type(x), cd.dx is None)


def split_output(y: CoDual) -> list[CoDual]:
    """The output CoDual of a flat function (a tuple of leaves) as one CoDual per leaf."""
    dxs = (_NO_F,) * len(y.x) if isinstance(y.dx, NoFData) else y.dx
    return [CoDual(x, d) for x, d in zip(y.x, dxs, strict=True)]


class DerivedRules:
    """Derived rules of the functions a rule is given, cached per function and signature.

    One object per call site (a rule factory's rule holds one), at most `maxsize`
    rules (least recently used dropped). `rules(lifted, *args, consts=...)` runs the
    function's derived rule on CoDuals; `flat(...)` is the same on pytree arguments
    given as leaves (what `scan` uses).
    """

    def __init__(self, maxsize: int = 8) -> None:
        self.maxsize = maxsize
        self._cache: OrderedDict[Any, tuple[DerivedRule, FlatFunction]] = OrderedDict()

    def flat(
        self, lifted: Lifted, args_def: TreeDef, n_args: int, leaves: Sequence[CoDual]
    ) -> tuple[list[CoDual], TreeDef, Callable[[tuple[Any, ...]], tuple[Any, ...]]]:
        """Run `fn(*unflatten(args_def, arg leaves))` by its derived rule.

        `leaves` are the CoDuals of the `n_args` argument leaves, then of the lifted
        values. Returns the output's leaves (CoDuals), its treedef, and the pullback:
        `pullback(dy)` takes one rdata per output leaf (NoRData, or an array added to an
        array leaf's fdata) and returns one rdata per input leaf, after incrementing the
        inputs' fdata.
        """
        leaves = [_normalise(c) for c in leaves]
        key = (lifted.key, args_def, tuple(_leaf_key(c) for c in leaves))
        entry = self._cache.get(key)
        if entry is None:
            flat = FlatFunction(lifted)
            # Compiled (replayed while its guards hold) unless an argument is an inactive
            # scalar: guarded by value, an int carry would retrace on every step.
            compile = all(isinstance(c.x, np.ndarray) or c.dx is not None for c in leaves[:n_args])
            entry = self._cache[key] = (DerivedRule(flat, compile=compile), flat)
            if len(self._cache) > self.maxsize:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        rule, flat = entry
        flat.lifted, flat.args_def, flat.n_args = lifted, args_def, n_args
        y, pb = rule(_FCD, *leaves)
        out_def = flat.out_def

        def pullback(dy: tuple[Any, ...]) -> tuple[Any, ...]:
            return pb(dy)[1:]

        return split_output(y), out_def, pullback

    def __call__(
        self, lifted: Lifted, *args: CoDual, consts: Sequence[CoDual] = ()
    ) -> tuple[Any, Callable[[Any], tuple[Any, ...]]]:
        """`lifted.rebuild(consts)(*args)` by its cached derived rule: `(y, pullback)`.

        `args` and `consts` are CoDuals (`dx is None`: inactive); `consts` are the lifted
        values' CoDuals, in order. `y` is the output as a CoDual (for an output that is a
        tuple/list/dict: that structure with a CoDual per leaf). `pullback(dy)` takes
        the output's rdata (NoRData for arrays, whose cotangent goes in `y.dx`; a
        structure like `y` for a tree) and returns the rdata of each arg, then of each
        const; it increments their fdata, like any rule's pullback.
        """
        n = len(args)
        args_def = ("tuple", None, *(LEAF,) * n)
        outs, out_def, pb = self.flat(lifted, args_def, n, [*args, *consts])
        y = outs[0] if out_def == LEAF else unflatten(out_def, outs)

        def pullback(dy: Any) -> tuple[Any, ...]:
            if out_def == LEAF:
                dys: Any = (dy,)
            elif isinstance(dy, NoRData):
                dys = (_NO_R,) * len(outs)
            else:
                dys = flatten(dy)[0]
            return pb(tuple(dys))

        return y, pullback

    def reset(self) -> None:
        """Drop the saved state of every cached rule (after an abandoned forward pass)."""
        for rule, _ in self._cache.values():
            rule.tracer.reset_rules()
