"""Rules for the `scipy` namespace, one subpackage per SciPy module:

- `rules.scipy.special`: the special functions (ufuncs, and `logsumexp`, `softmax`, ...);
- `rules.scipy.linalg`: `cholesky`, `cho_factor`/`cho_solve`, `lu_factor`/`lu_solve`,
  `solve`, `solve_triangular`, `inv`, `det`, `expm`, `logm`, `sqrtm`, ...;
- `rules.scipy.stats`: the distributions' `pdf`/`logpdf`/`cdf`/... methods;
- `rules.scipy.signal`: `convolve`;
- `rules.scipy.integrate`: `odeint` (adjoint method).

Each is imported on its own (`rules` defers it until the program imports that SciPy
module), so this package imports none of them: `rules.scipy.linalg` etc. load on
first attribute access.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import rulekit

_PARTS = ("special", "linalg", "stats", "signal", "integrate")

# solve_banded's forward rule and differentiable pullback (they import rules.scipy.linalg,
# whose reverse rule they share): loaded, as that package, once scipy.linalg is imported
rulekit.registry.defer("scipy.linalg", "rules.scipy.banded_forward")


def __getattr__(name: str) -> ModuleType:
    if name in _PARTS:
        return importlib.import_module(f"rules.scipy.{name}")
    raise AttributeError(f"module 'rules.scipy' has no attribute {name!r}")
