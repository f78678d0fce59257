"""Helpers shared by the bundled rules (not rules themselves), one module a concept:

- `arguments`: reading a rule's arguments: `is_active` (differentiated: a CoDual whose
  `dx` is not None and whose value is inexact; `rulekit.is_active`),
  `is_active_array`/`is_active_scalar`, `array_fdata`, `primal`, `primals`, `sequence_fdata`;
- `binding`: `binder(fn)`, the one way to bind a call's CoDuals to `fn`'s parameter names;
- `cotangents`: handing a cotangent back to an argument: `accumulate` (any argument; returns
  its rdata), `add_to_fdata` (x̄ += unbroadcast(g)), `scalar_rdata`, `unbroadcast`,
  `no_rdata`, `no_pullback` (the engine's own, `rulekit._cotangents`, re-exported), and
  `add_to_fdata_pooled`, `output_cotangent`, `element_cotangent`, `zero_rdata_of`;
- `outputs`: `new_output`, `inactive_output`;
- `patterns`: the type patterns rules register with (`Numeric`, `Inexact`, `Real`, ...);
- `layout`: fdata laid out like its primal, flat views, pooled buffers;
- `examples`: seeded example data;
- `shape`: views (`always_a_view`, `view_or_new`; `ViewMismatchError` is
  `rulekit.ViewMismatchError`) and index expressions (shape and indexing rules);
- `linalg`: matrix identities and LU factors (linear-algebra rules); `blas_kernels`:
  allocation-free BLAS kernels (BLAS and matmul rules); `numba_guard`;
- `util`: four old names only, until the last modules importing them switch.
"""
