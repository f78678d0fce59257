"""Rules for the `scipy` namespace: special, linalg, stats, signal, integrate."""

# ruff: noqa: I001  (the imports below are in registration order)
from rules.scipy import special as special  # the special functions
from rules.scipy import linalg as linalg  # solve_triangular, cho_*, lu_*, expm, ...
from rules.scipy import stats as stats  # distributions
from rules.scipy import signal as signal  # convolve
from rules.scipy import integrate as integrate  # odeint (adjoint method)
