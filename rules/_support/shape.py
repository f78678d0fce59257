"""Helpers shared by the shape, joining, selecting and indexing rules: views and index kinds.

* **Views.** When numpy returns a view, the output's fdata is the *same view of
  the input's fdata* (`same_view`, `always_a_view`, `view_or_new`; `rulekit.linear`'s
  `view=True` is `rulekit._linear.alias_view`): no new memory, and the
  pullback has nothing to do, since later pullbacks incremented the shared
  memory. The engine keeps fdata with the primal's strides, so the same view
  operation gives the matching view; should a primal view have no matching view
  of its fdata, `ViewMismatchError` is raised instead of silently copying.
* **Index expressions** are classified once (`index_kind`): basic (ints,
  slices, Ellipsis, None: a view), boolean (no target is written twice) or
  integer-array advanced (targets may repeat).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulekit import CoDual
from rulekit._linear import ViewMismatchError as ViewMismatchError
from rulekit._linear import same_strides as same_strides
from rulekit._linear import shares as shares
from rules._support.layout import zeros_like_exact

__all__ = [
    "BASIC",
    "BOOL",
    "INT",
    "ViewMismatchError",
    "always_a_view",
    "index_kind",
    "same_strides",
    "same_view",
    "shares",
    "view_index",
    "view_or_new",
    "writable",
]


def _mismatch(what: str, x: np.ndarray, dx: np.ndarray) -> ViewMismatchError:
    return ViewMismatchError(
        f"rulekit internal error: {what} returned a view of the primal but no matching view "
        f"of its fdata: primal strides {x.strides}, fdata strides {dx.strides}. fdata must "
        "have the same strides as its primal for views to alias it correctly; create fdata "
        "with rules._support.layout.zeros_like_exact(primal) (or pass contiguous arrays)."
    )


def same_view(x: CoDual, y: Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> CoDual:
    """Output of an operation that always returns a view: the same view of the fdata."""
    dx = x.dx
    return CoDual(y, None if dx is None else fn(dx, *args, **kwargs))


def always_a_view(x: CoDual, y: Any, fn: Any, *rest: Any, **kwargs: Any) -> tuple[CoDual, bool]:
    """The `view=` of a `rulekit.linear` declaration of a function numpy always implements
    as a view picked by index (transposes, flips, axis insertion/removal, rot90, split):
    its fdata is the same view of x̄ (`same_view`), which pairs the same elements whatever
    x̄'s layout, so no check is needed (`view=True` would refuse an fdata laid out unlike
    its primal, `ViewMismatchError`)."""
    return same_view(x, y, fn, *rest, **kwargs), True


def view_or_new(
    x: CoDual, y: np.ndarray, fn: Callable[..., Any], *args: Any, memory_order: bool = False,
    **kwargs: Any,
) -> tuple[CoDual, bool]:  # fmt: skip
    """Output of an operation that returns a view or a copy (reshape, ravel).

    Returns `(output, is_view)`: a view of `x` gets the same view of `x.dx`; a
    copy gets fresh zero fdata laid out like it (its pullback then adds ȳ back,
    which is right whatever the fdata's layout); an inactive `x` gives an
    inactive output. `memory_order`: the operation reads elements in memory
    order (`order='K'` or `'A'`), so that on fdata laid out unlike `x` even a
    view picks other elements.

    The engine keeps fdata with the primal's strides, and then numpy takes the
    same decision on both. Otherwise (fdata from elsewhere, issue #11) a view of
    the primal without the matching view of the fdata raises `ViewMismatchError`:
    later writes through the view must reach x̄, and a copy would lose them.
    """
    dx = x.dx
    if dx is None:
        return CoDual(y, None), True
    if not shares(y, x.x):
        return CoDual(y, zeros_like_exact(y)), False
    dy = fn(dx, *args, **kwargs)
    if not shares(dy, dx) or (memory_order and not same_strides(x.x, dx)):
        raise _mismatch(getattr(fn, "__name__", "an operation"), x.x, dx)
    return CoDual(y, dy), True


def writable(v: np.ndarray) -> np.ndarray:
    """A read-only view numpy returns (`np.diagonal`) made writable for accumulation."""
    if not v.flags.writeable:
        v.flags.writeable = True
    return v


# -- index expressions ------------------------------------------------------------------

BASIC, BOOL, INT = 0, 1, 2
_Ellipsis = type(Ellipsis)


def _element_kind(e: Any) -> int:
    t = type(e)
    if t is slice or t is int or e is None or t is _Ellipsis:
        return BASIC
    if t is bool or t is np.bool_:
        return BOOL  # x[True] adds an axis (advanced indexing without repeats)
    if t is np.ndarray:
        return BOOL if e.dtype == np.bool_ else INT
    if isinstance(e, np.integer):
        return BASIC
    if isinstance(e, (list, tuple)):
        return BOOL if np.asarray(e).dtype == np.bool_ else INT
    if hasattr(e, "__index__"):
        return BASIC
    return INT  # numpy decides (and raises for what is not an index)


def index_kind(i: Any) -> int:
    """BASIC (a view), BOOL (advanced, each target written once) or INT (targets may repeat).

    Only boolean arrays (next to basic entries) guarantee distinct targets: their
    `nonzero()` coordinates are distinct, also when several are broadcast together.
    """
    t = type(i)
    if t is slice or t is int or i is None or t is _Ellipsis:
        return BASIC
    if t is tuple:
        kind = BASIC
        for e in i:
            k = _element_kind(e)
            if k > kind:
                kind = k
        return kind
    return _element_kind(i)


def view_index(i: Any) -> Any:
    """A basic index that selects the same elements as `i` but always as an array view.

    (`x[0, 1]` is a scalar copy; `x[0, 1, ...]` is a 0-d view.)
    """
    if type(i) is tuple:
        return i if any(e is Ellipsis for e in i) else (*i, Ellipsis)
    return i if i is Ellipsis else (i, Ellipsis)
