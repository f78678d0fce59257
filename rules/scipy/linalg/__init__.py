"""Rules for scipy.linalg, and `rulekit.primitive` wrappers with scipy's names and
signatures (`rules.scipy.linalg.cholesky(a)`, ...).
"""

# ruff: noqa: I001  (the imports below are in registration order)
# solve_triangular, cholesky, cho_factor/cho_solve, and the wrappers
from rules.scipy.linalg import basic as basic
from rules.scipy.linalg import lu as lu  # lu_factor/lu_solve, inv, solve, det, expm, logm
from rules.scipy.linalg import equations as equations  # solve_banded, solve_sylvester, sqrtm
from rules.scipy.linalg.basic import (
    cho_factor as cho_factor,
    cho_solve as cho_solve,
    cholesky as cholesky,
    det as det,
    expm as expm,
    inv as inv,
    logm as logm,
    lu_factor as lu_factor,
    lu_solve as lu_solve,
    solve as solve,
    solve_triangular as solve_triangular,
)
from rules.scipy.linalg.equations import (
    solve_banded as solve_banded,
    solve_sylvester as solve_sylvester,
    sqrtm as sqrtm,
)

# Plain calls (`scipy.xxx.name(traced)`) reach the rules: see rules/scipy/_routing.py.
import scipy.linalg as _scipy_linalg

from rules.scipy._routing import route_module

route_module(_scipy_linalg, [(n, globals()[n]) for n in basic.__all__ + equations.__all__])
from rules.scipy.linalg import forward as forward  # noqa: E402  (frules, differentiable pullbacks)
