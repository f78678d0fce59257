"""The tangents a forward rule returns: do they fit the output (structure, shape, dtype)?

A float output leaf gets a tangent of its shape and dtype (a 0-d array or a numpy scalar
for a scalar); a non-float leaf gets None; a tuple (list) output a tuple (list) of them.
None for a float leaf stands for a zero: allowed when some arguments are constant, or
when the leaf does not depend on the arguments (`constant_leaves`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from testutils._reference import Reference
from testutils._trees import clone, leaves, perturb, same_value

if TYPE_CHECKING:
    from testutils._forward_vjp_shared import FwdChecker

__all__ = ["constant_leaves", "tangent_problem"]


def constant_leaves(ck: FwdChecker, ref: Reference, active: frozenset[int]) -> set[Any]:
    """The paths of the output leaves that stay bitwise the same when the active arguments
    move (None may stand for their zero tangent)."""
    values = [
        perturb(v, ref.directions[i], 1e-3) if i in active else clone(v)
        for i, v in enumerate(ck.call.values)
    ]
    try:
        y = ck.call.primal(values)
    except Exception:
        return set()
    moved = dict(leaves(y))
    return {p for p, v in leaves(ref.y) if p in moved and same_value(moved[p], v)}


_FLOATS = (float, complex, np.floating, np.complexfloating)


def _is_float(y: Any) -> bool:
    if isinstance(y, np.ndarray):
        return y.dtype.kind in "fc"
    return isinstance(y, _FLOATS) and not isinstance(y, bool)


def tangent_problem(
    y: Any, t: Any, where: str, varies: Any, path: tuple[Any, ...] = ()
) -> str | None:
    """Why tangent `t` does not fit output `y` (None if it does). `varies(path)`, if given:
    whether the float output leaf at `path` depends on the arguments (then a None tangent
    is wrong: every argument has a tangent)."""
    if isinstance(y, (tuple, list)):
        if t is None:
            lost = [p for p, v in leaves(y, path) if _is_float(v) and varies and varies(p)]
            return (
                (
                    f"{where} has float parts but its tangent is None (None is only for "
                    "non-float outputs)"
                )
                if lost
                else None
            )
        if not isinstance(t, (tuple, list)) or len(t) != len(y):
            return (
                f"the tangent of {where} must be a {type(y).__name__} of {len(y)} tangents "
                f"(None for non-float parts), got {_kind(t)}"
            )
        for i, (a, b) in enumerate(zip(y, t, strict=True)):
            why = tangent_problem(a, b, f"{where}[{i}]", varies, (*path, i))
            if why:
                return why
        return None
    if not _is_float(y):
        if t is None:
            return None
        return (
            f"{where} is not a float value ({_kind(y)}): its tangent must be None, got {_kind(t)}"
        )
    if t is None:
        return (
            (
                f"{where} is {_kind(y)} but its tangent is None (None is only for non-float "
                "outputs, or outputs that do not depend on the arguments)"
            )
            if varies and varies(path)
            else None
        )
    want = y.dtype if isinstance(y, (np.ndarray, np.generic)) else np.asarray(y).dtype
    shape = np.shape(y)
    ok = isinstance(t, (np.ndarray, np.generic, *_FLOATS)) and not isinstance(t, bool)
    if ok:
        ok = np.shape(t) == shape and np.asarray(t).dtype == want
    if ok and isinstance(y, np.ndarray) and y.ndim and not isinstance(t, np.ndarray):
        ok = False
    if not ok:
        return (
            f"the tangent of {where} must have its shape {shape} and dtype {want}, got {_kind(t)}"
        )
    return None


def _kind(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return f"a {x.dtype} array of shape {x.shape}"
    if x is None:
        return "None"
    return f"{type(x).__name__} {x!r:.40}"
