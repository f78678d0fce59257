"""Handing a cotangent back to an argument: the one accumulate/unbroadcast family.

The family itself is the engine's, `rulekit._cotangents` (its docstring states the
adjoint math): `accumulate`, `accumulate_sequence`, `add_to_fdata`, `scalar_rdata`,
`unbroadcast`, `broadcast_axes`, `no_rdata`, `no_pullback` are re-exported here under
the names the bundled rules use. Built on them here: `add_to_fdata_pooled` (the same
increment through a pooled buffer), `broadcast_shape`, `zero_rdata_of`, and the
cotangent of an output (`output_cotangent`, `element_cotangent`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import CoDual, NoFData, NoRData, zero_rdata
from rulekit._cotangents import accumulate as accumulate
from rulekit._cotangents import accumulate_sequence as accumulate_sequence
from rulekit._cotangents import add_to_fdata as add_to_fdata
from rulekit._cotangents import broadcast_axes as broadcast_axes
from rulekit._cotangents import no_pullback as no_pullback
from rulekit._cotangents import no_rdata as no_rdata
from rulekit._cotangents import scalar_rdata as scalar_rdata
from rulekit._cotangents import unbroadcast as unbroadcast

__all__ = [
    "ADD_REDUCE",
    "NO_F",
    "NO_R",
    "accumulate",
    "accumulate_sequence",
    "add_to_fdata",
    "add_to_fdata_pooled",
    "broadcast_axes",
    "broadcast_shape",
    "element_cotangent",
    "no_pullback",
    "no_rdata",
    "output_cotangent",
    "scalar_rdata",
    "unbroadcast",
    "zero_rdata_of",
]

NO_F = NoFData()
NO_R = NoRData()
#: `np.add.reduce(x, axis, dtype, out, keepdims)`: what np.sum computes, without its Python
#: layers (a microsecond or two a call on the hot paths)
ADD_REDUCE: Any = np.add.reduce

# -- broadcasting ---------------------------------------------------------------------------


def broadcast_shape(s: tuple[int, ...], t: tuple[int, ...]) -> tuple[int, ...]:
    """np.broadcast_shapes for two shapes, without its temporary 0-d arrays (an allocation
    the stateful rules must not make); ValueError if they do not broadcast."""
    n = max(len(s), len(t))
    s, t = (1,) * (n - len(s)) + s, (1,) * (n - len(t)) + t
    out = []
    for i, j in zip(s, t, strict=True):
        if i != j and i != 1 and j != 1:
            raise ValueError(f"shapes {s} and {t} do not broadcast")
        out.append(j if i == 1 else i)
    return tuple(out)


# -- arrays: into fdata ------------------------------------------------------------------------


def add_to_fdata_pooled(rule: Any, name: str, dx: np.ndarray, contrib: np.ndarray) -> None:
    """`add_to_fdata(dx, contrib)` for a real `contrib` of the full broadcast shape, reduced
    through a scratch buffer of StatefulRRule `rule` (`name`): no allocation once warm."""
    if contrib.shape == dx.shape:
        np.add(dx, contrib, out=dx)
        return
    axes, kept = broadcast_axes(dx.shape, contrib.shape)
    red = rule.scratch(f"{name}{kept}", kept, contrib.dtype)  # one buffer per reduced shape
    ADD_REDUCE(contrib, axes, None, red, True)  # np.sum(contrib, axes, keepdims=True, out=red)
    np.add(dx, red.reshape(dx.shape), out=dx)


# -- any argument ----------------------------------------------------------------------------


def zero_rdata_of(v: Any) -> Any:
    """The zero rdata of argument `v` (`rulekit.zero_rdata` of its primal: a zero of a float
    scalar's type, NoRData for arrays, whose adjoint goes into fdata); NoRData for a plain
    keyword value."""
    return zero_rdata(v.x) if isinstance(v, CoDual) else NO_R


# -- the cotangent of an output ----------------------------------------------------------------


def output_cotangent(out: CoDual, dy: Any) -> Any:
    """ȳ: an array output's fdata, or the pullback's argument `dy` for a scalar output
    (0.0 when the engine passes none)."""
    if isinstance(out.x, np.ndarray):
        return out.dx
    return 0.0 if dy is None or isinstance(dy, NoRData) else dy


def element_cotangent(out: CoDual, dy: Any, i: int) -> Any:
    """The cotangent of element `i` of a tuple output: its fdata array, or its rdata scalar
    from `dy`; None when it has none."""
    dx = out.dx
    if isinstance(dx, tuple) and isinstance(dx[i], np.ndarray):
        return dx[i]
    if isinstance(dy, tuple):
        r = dy[i]
        if isinstance(r, (float, complex, np.number)):
            return r
    return None
