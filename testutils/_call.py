"""The call under test: its arguments as *state variables*, and one run of the rule.

A state variable is one distinct argument value: a positional argument, or an
array passed by keyword (`out=`, `c=`). The same array object passed twice is
one variable (as in the engine, where it is one traced value with one CoDual).
Each run works on fresh clones, so the caller's arguments are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rulekit import CoDual, NoFData, NoTangent, zero_tangent
from testutils._trees import clone, clone_array, leaves

__all__ = ["Call", "Run", "fdata_like", "get_leaf"]

_NO_F = NoFData()


@dataclass
class Slot:
    """Where a state variable appears in the call: ("arg", i) or ("kw", name, tupled)."""

    where: tuple[Any, ...]
    var: int


class Call:
    """`f(*args, **kwargs)` with its state variables (see module docstring)."""

    def __init__(
        self, f: Any, args: tuple[Any, ...], kwargs: dict[str, Any], reference: Any = None
    ) -> None:
        self.f = f
        self.reference = f if reference is None else reference  # what `primal` runs
        self.nargs = len(args)
        self.fixed_kwargs: dict[str, Any] = {}
        self.slots: list[Slot] = []
        self.values: list[Any] = []
        self.names: list[str] = []
        ids: dict[int, int] = {}

        def add(value: Any, where: tuple[Any, ...], name: str) -> None:
            key = id(value)
            if isinstance(value, (np.ndarray, list, dict)) and key in ids:
                var = ids[key]
                self.names[var] += f" (also {name})"
            else:
                var = len(self.values)
                self.values.append(value)
                self.names.append(name)
                if isinstance(value, (np.ndarray, list, dict)):
                    ids[key] = var
            self.slots.append(Slot(where, var))

        for i, a in enumerate(args):
            add(a, ("arg", i), f"argument {i}")
        for k, v in kwargs.items():
            if isinstance(v, np.ndarray):
                add(v, ("kw", k, False), f"{k}=")
            elif isinstance(v, tuple) and len(v) == 1 and isinstance(v[0], np.ndarray):
                add(v[0], ("kw", k, True), f"{k}=")
            else:
                self.fixed_kwargs[k] = v
        self.differentiable = [not isinstance(zero_tangent(v), NoTangent) for v in self.values]
        self._check_no_partial_overlap()

    def _check_no_partial_overlap(self) -> None:
        arrays = [
            (i, a)
            for i, v in enumerate(self.values)
            for _, a in leaves(v)
            if isinstance(a, np.ndarray) and a.size
        ]
        for n, (i, a) in enumerate(arrays):
            for j, b in arrays[n + 1 :]:
                if np.shares_memory(a, b):
                    raise ValueError(
                        f"check_rule: {self.names[i]} and {self.names[j]} share memory but are "
                        "not the same array object. Pass distinct arrays, or the same object "
                        "twice (e.g. `out=x` for an in-place call on x)."
                    )

    def fresh(self) -> list[Any]:
        """Clones of every state variable (same layouts), for one run."""
        return [clone(v) for v in self.values]

    def plain(self, values: list[Any]) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments for calling the primal on `values`."""
        args: list[Any] = [None] * self.nargs
        kwargs = dict(self.fixed_kwargs)
        for s in self.slots:
            v = values[s.var]
            if s.where[0] == "arg":
                args[s.where[1]] = v
            else:
                kwargs[s.where[1]] = (v,) if s.where[2] else v
        return args, kwargs

    def primal(self, values: list[Any]) -> Any:
        """Run the primal function on `values` (mutating them as it does); its result.

        Floating-point warnings are silenced: the primal may legitimately return inf or
        NaN (log 0), and finite differences step near domain boundaries.
        """
        args, kwargs = self.plain(values)
        with np.errstate(all="ignore"):
            return self.reference(*args, **kwargs)

    def coduals(
        self, values: list[Any], fdata: list[Any], active: frozenset[int]
    ) -> tuple[list[CoDual], dict[str, Any]]:
        """Arguments for the rule: one CoDual per variable (inactive: `dx is None`).

        Keyword arrays arrive as CoDuals when active and as plain values when not,
        as the engine passes them.
        """
        cds = [CoDual(v, fdata[i] if i in active else None) for i, v in enumerate(values)]
        args: list[Any] = [None] * self.nargs
        kwargs = dict(self.fixed_kwargs)
        for s in self.slots:
            cd = cds[s.var]
            if s.where[0] == "arg":
                args[s.where[1]] = cd
            else:
                v = cd if s.var in active else cd.x
                kwargs[s.where[1]] = (v,) if s.where[2] else v
        return args, kwargs

    def positional_vars(self) -> list[int]:
        """The variable of each positional argument, in order."""
        out = [0] * self.nargs
        for s in self.slots:
            if s.where[0] == "arg":
                out[s.where[1]] = s.var
        return out


def fdata_like(x: Any) -> Any:
    """Zero fdata for `x` whose arrays have exactly `x`'s strides (so views line up)."""
    if isinstance(x, np.ndarray):
        return clone_array(x, fill="zeros") if x.dtype.kind in "fc" else _NO_F
    if isinstance(x, tuple):
        fs = tuple(fdata_like(e) for e in x)
        return _NO_F if all(f is _NO_F for f in fs) else fs
    if isinstance(x, list):
        return [_full_zero(e) for e in x]
    if isinstance(x, dict):
        return {k: _full_zero(e) for k, e in x.items()}
    return _NO_F


def _full_zero(x: Any) -> Any:
    if isinstance(x, np.ndarray) and x.dtype.kind in "fc":
        w = clone_array(x, fill="zeros")
        w.flags.writeable = True
        return w
    return zero_tangent(x)


def writable_fdata(x: Any) -> Any:
    """`fdata_like`, with every array writeable (read-only primals still get writable fdata)."""
    fd = fdata_like(x)
    for _, a in leaves(fd):
        if isinstance(a, np.ndarray):
            a.flags.writeable = True
    return fd


def get_leaf(tree: Any, path: tuple[Any, ...]) -> Any:
    """The element of `tree` at `path`; `NoFData()` inside an empty tangent; None if absent."""
    for p in path:
        if tree is None or isinstance(tree, NoFData):
            return tree
        try:
            tree = tree[p]
        except (TypeError, IndexError, KeyError):
            return None
    return tree


class Run:
    """One forward pass of a rule on fresh clones (and, later, its pullback)."""

    def __init__(
        self,
        call: Call,
        rule: Any,
        active: frozenset[int],
        seeds: list[Any],
        values: list[Any] | None = None,
    ) -> None:
        self.call = call
        self.active = active
        self.values = call.fresh() if values is None else values
        self.fdata: list[Any] = []
        for i, v in enumerate(self.values):
            fd = writable_fdata(v) if call.differentiable[i] else _NO_F
            if i in active and seeds[i] is not None:
                _copy_tree(fd, seeds[i])
            self.fdata.append(fd)
        self.args, self.kwargs = call.coduals(self.values, self.fdata, active)
        self.rule = rule
        self.result: Any = None
        self.y: Any = None  # (set by `execute`: a clone of the output primal, and the rdata)
        self.rdata: Any = None

    def forward(self) -> Any:
        self.result = self.rule(CoDual(self.call.f, _NO_F), *self.args, **self.kwargs)
        return self.result


def _copy_tree(dst: Any, src: Any) -> None:
    for (_, d), (_, s) in zip(leaves(dst), leaves(src), strict=True):
        if isinstance(d, np.ndarray):
            np.copyto(d, s)
