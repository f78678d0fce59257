"""Rules for numpy.linalg."""

# ruff: noqa: I001  (the imports below are in registration order)
from rules.numpy.linalg import basic as basic  # inv, solve, det, slogdet, cholesky, pinv, lstsq
from rules.numpy.linalg import decomp as decomp  # qr, eigh, eigvalsh, svd, svdvals
from rules.numpy.linalg import eig as eig  # eig, eigvals (general matrices)
from rules.numpy.linalg import norm as norm  # norm: every ord, axis and keepdims
from rules.numpy.linalg import products as products  # multi_dot, matrix_power
from rules.numpy.linalg import cond as cond  # cond
from rules.numpy.linalg import forward as forward  # frules and differentiable pullbacks
