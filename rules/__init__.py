"""rulekit's bundled rules, one subpackage per API namespace.

- `rules.numpy`: NumPy's ufuncs, reductions, linalg, shape, indexing, fft, ...
- `rules.scipy`: `scipy.special`, `scipy.linalg`, `scipy.stats`, `scipy.signal`,
  `scipy.integrate`;
- `rules.blas`: the `scipy.linalg.blas` routines (stateful, allocation-free).

rulekit imports this package by itself (its `rulekit.rules` entry point) before the first
rule lookup; `import rules` is still fine. It registers the NumPy rules at once and
*defers* each SciPy part until the program has imported that SciPy module
(`rulekit.registry.defer`): a NumPy program never pays for importing SciPy. When a SciPy
part loads, SciPy's public names that have a bundled rule are routed to it, so plain
calls such as `scipy.linalg.cholesky(K)` differentiate (docs/scipy-calls.md).
`rulekit.registry.load_all()` imports every part now.

`rulekit rules` lists what each module registered; docs/coverage.md is generated from
the registry.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import rulekit
from rules import numpy as numpy
from rules._support import numba_guard as _numba_guard

# A traced value passed to a numba-jitted function raises TracingError, not numba's TypingError.
_numba_guard.install()

#: SciPy module → the rules that cover it, imported once the program has imported it
DEFERRED = {
    "scipy.special": "rules.scipy.special",
    "scipy.linalg": "rules.scipy.linalg",
    "scipy.linalg.blas": "rules.blas",
    "scipy.stats": "rules.scipy.stats",
    "scipy.signal": "rules.scipy.signal",
    "scipy.integrate": "rules.scipy.integrate",
}
for _trigger, _module in DEFERRED.items():
    rulekit.registry.defer(_trigger, _module)

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
    """`rules.blas`, `rules.scipy` (imported on first use), and the old names
    `rules.lapack`, `rules.special`, ... of the `rules.scipy` subpackages."""
    if name in ("blas", "scipy"):
        return importlib.import_module(f"rules.{name}")
    if name in _RENAMED:
        return importlib.import_module(_RENAMED[name])
    raise AttributeError(f"module 'rules' has no attribute {name!r}")
