"""NumPy functions whose result carries no derivative: they run on the primal values.

`PRIMAL_ONLY` is the set of `__array_function__`-dispatched NumPy functions
(`numpy`, `numpy.linalg`) whose result has a zero derivative everywhere with
respect to float inputs and is never a float array computed from float inputs:
predicates and comparisons, shape and type queries, index-valued functions.
Called on traced values, the engine (`Traced.__array_function__`) runs them on
the primal values and returns their plain result, so NumPy code that branches
on them behaves as without rulekit (docs/guarantees.md).

Why a list and not a fallback: several of these catch exceptions internally
(`np.array_equal` and `np.array_equiv` wrap `np.asarray` in `except Exception`),
so without this list a traced argument raised TracingError inside their `try`
and they silently returned False. Traced through or refused, the others would
either fail or record a useless call.

What is deliberately *not* here, because some output depends differentiably on
a float input:

- value-returning functions with zero derivative (`np.round`, `np.fix`,
  `np.sort`): they return floats and have rules;
- `np.where`: its 3-argument form is differentiable, and one function cannot be
  listed by form; the 1-argument form (`np.nonzero`) has a non-differentiable
  rule (`rules.numpy.ufuncs.misc`);
- `np.histogram`, `np.histogram_bin_edges`, `np.histogram2d`, `np.histogramdd`:
  the counts are piecewise constant, but with an integer `bins` the bin edges
  are computed from the data range, and with `weights` the counts are sums of
  the weights;
- `np.bincount`: differentiable in `weights`;
- `np.unique` and `np.unique_*`: return the unique (float) values;
- `np.ix_`: returns its (possibly float) inputs reshaped;
- `np.save`, `np.savetxt`, `np.savez*`: the values leave the trace through a file;
- in-place writers (`np.put`, `np.place`, `np.putmask`, `np.fill_diagonal`, ...).

A missing entry gives a clear MissingRuleError; a wrong entry gives a silently
zero gradient. When unsure, leave a function out.
`tests/rulekit/test_primal_only.py` audits every dispatched NumPy function
against this set, the registry and the traced-through and refused lists.

Ufuncs (`np.isfinite`, `np.greater`, `np.sign`, ...) are not here: they go
through `__array_ufunc__` and have rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["PRIMAL_ONLY"]


def _maybe(module: Any, *names: str) -> list[Any]:
    """The functions `module.<name>` that this NumPy has (deprecated or newer names)."""
    return [f for f in (getattr(module, n, None) for n in names) if f is not None]


PRIMAL_ONLY: frozenset[Any] = frozenset(
    [
        # -- predicates and comparisons: booleans ------------------------------------
        np.array_equal,  # (catches Exception around np.asarray: returned False on traced)
        np.array_equiv,  # (the same)
        np.allclose,
        np.isclose,
        np.isreal,
        np.iscomplex,
        np.isrealobj,
        np.iscomplexobj,
        np.isneginf,
        np.isposinf,
        np.isin,
        np.all,
        np.any,
        *_maybe(np, "in1d", "alltrue", "sometrue"),  # (removed in NumPy 2.0 / 2.4)
        np.shares_memory,
        np.may_share_memory,
        # -- shape queries, and index arrays that depend on the shape only ------------
        np.shape,
        np.ndim,
        np.size,
        np.diag_indices_from,
        np.tril_indices_from,
        np.triu_indices_from,
        np.einsum_path,  # a contraction order: depends on the operands' shapes only
        # -- dtype queries -------------------------------------------------------------
        np.result_type,
        np.can_cast,
        np.min_scalar_type,
        np.common_type,
        # -- integer-valued: indices, counts, positions (piecewise constant) -----------
        np.argmax,
        np.argmin,
        np.nanargmax,
        np.nanargmin,
        np.argsort,
        np.argpartition,
        np.lexsort,
        np.argwhere,
        np.nonzero,
        np.flatnonzero,
        np.count_nonzero,
        np.searchsorted,
        np.digitize,
        np.linalg.matrix_rank,
        # -- integer, boolean and datetime inputs only (float input is an error in NumPy)
        np.unravel_index,
        np.ravel_multi_index,
        np.packbits,
        np.unpackbits,
        np.busday_count,
        np.busday_offset,
        np.is_busday,
        np.datetime_as_string,
        # -- text: printing a traced array shows its primal values ---------------------
        np.array2string,
        np.array_repr,
        np.array_str,
    ]
)
