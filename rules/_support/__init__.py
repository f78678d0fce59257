"""Helpers shared by the bundled rules (not rules themselves), one module a concept:

- `arguments`: reading a rule's arguments: `is_active` (differentiated: a CoDual whose
  `dx` is not None and whose value is inexact), `is_active_array`/`is_active_scalar`,
  `array_fdata`, `primal`, `primals`, `sequence_fdata`;
- `binding`: `binder(fn)`, the one way to bind a call's CoDuals to `fn`'s parameter names;
- `cotangents`: handing a cotangent back to an argument: `accumulate` (any argument; returns
  its rdata), `add_to_fdata` (x̄ += unbroadcast(g)), `add_to_fdata_pooled`, `scalar_rdata`,
  `unbroadcast`, `output_cotangent`, `element_cotangent`, `no_rdata`, `no_pullback`,
  `zero_rdata_of`;
- `outputs`: `new_output`, `inactive_output`;
- `patterns`: the type patterns rules register with (`Numeric`, `Inexact`, `Real`, ...);
- `layout`: fdata laid out like its primal, flat views, pooled buffers;
- `examples`: seeded example data;
- `shape`: views and index expressions (shape and indexing rules); `linalg`: matrix
  identities and LU factors (linear-algebra rules); `blas_kernels`: allocation-free BLAS
  kernels (BLAS and matmul rules); `numba_guard`;
- `util`: old names only, until the last rules importing them switch.
"""
