"""Rules for the `numpy` namespace: one module or subpackage per part of the API."""

# ruff: noqa: I001  (the imports below are in registration order)
from rules.numpy import copyto as copyto  # np.copyto (the generic out= form)
from rules.numpy import ufuncs as ufuncs  # every ufunc
from rules.numpy import reductions as reductions  # sum, mean, prod, cum*, max/min, var/std/average
from rules.numpy import matmul as matmul  # matmul/@, dot, vdot, inner, outer (stateful 2-D, out=)
from rules.numpy import contractions as contractions  # einsum, tensordot, kron
from rules.numpy import linalg as linalg  # numpy.linalg (+ multi_dot, matrix_power)
from rules.numpy import shape as shape  # reshape, transposes, flips, atleast_*d, ...

# concatenate, stack, h/vstack, split, tile, repeat, roll, pad
from rules.numpy import joining as joining

# take(_along_axis), sort, select, diag, trace, triu/tril
from rules.numpy import selecting as selecting

# x[idx], x[idx] = v, add.at, fill_diagonal, put, place, putmask
from rules.numpy import indexing as indexing
from rules.numpy import creation as creation  # zeros_like, ones_like, empty_like, full_like
from rules.numpy import linspace as linspace  # linspace with traced start/stop
from rules.numpy import numeric as numeric  # diff, gradient, cross, nan_to_num
from rules.numpy import fft as fft  # numpy.fft

from rules.numpy import quantiles as quantiles  # median, percentile, quantile (+ nan forms)
from rules.numpy import interpolation as interpolation  # interp
from rules.numpy import convolution as convolution  # convolve, correlate
from rules.numpy import polynomial as polynomial  # polyval, polyfit, vander
from rules.numpy import covariance as covariance  # cov, corrcoef
from rules.numpy import assembly as assembly  # block, insert, delete, meshgrid, ...

# functions differentiated without a rule of their own
from rules.numpy import traced_through as traced_through
from rules.numpy import forward_products as forward_products  # frules + vjp rules of the products
from rules.numpy import forward_misc as forward_misc  # frules + vjps: sort, select, pad, ...
