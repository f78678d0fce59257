"""rulekit's bundled rules, one subpackage per API namespace.

- `rules.numpy`: NumPy's ufuncs, reductions, linalg, shape, indexing, fft, ...
- `rules.scipy`: `scipy.special`, `scipy.linalg`, `scipy.stats`, `scipy.signal`,
  `scipy.integrate`;
- `rules.blas`: the `scipy.linalg.blas` routines (stateful, allocation-free).

`rulekit rules` lists what each module registered; docs/coverage.md is generated from
the registry.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from rules import blas as blas
from rules import numpy as numpy
from rules import scipy as scipy
from rules._support import numba_guard as _numba_guard

# A traced value passed to a numba-jitted function raises TracingError, not numba's TypingError.
_numba_guard.install()

#: the module names of the first release, kept as aliases of their new homes
_RENAMED = {
    "lapack": "rules.scipy.linalg",
    "lapack_more": "rules.scipy.linalg",
    "special": "rules.scipy.special",
    "special_more": "rules.scipy.special",
    "stats": "rules.scipy.stats",
    "signal": "rules.scipy.signal",
    "integrate": "rules.scipy.integrate",
}


def __getattr__(name: str) -> ModuleType:
    """`rules.lapack`, `rules.special`, ...: the old names of `rules.scipy.*` (aliases)."""
    if name in _RENAMED:
        return importlib.import_module(_RENAMED[name])
    raise AttributeError(f"module 'rules' has no attribute {name!r}")
