"""rulekit's bundled rules: importing this package registers them all.

One module per domain; `rulekit rules` lists what each registered, and
docs/coverage.md is generated from the registry.
"""

from rules import _numba_guard  # TracingError for a traced value passed to numba (below)
from rules import blas as blas  # scipy.linalg.blas wrappers: gemm, gemv, ger, axpy, ... (stateful)
from rules import contractions as contractions  # einsum, tensordot, kron, multi_dot, ...
from rules import creation as creation  # zeros_like, ones_like, empty_like, full_like
from rules import creation_more as creation_more  # linspace (traced start/stop)
from rules import fft as fft  # numpy.fft: (i)(r)fft, 2-D/n-D forms, fftshift/ifftshift
from rules import indexing as indexing  # x[idx], x[idx] = v, np.add.at / np.subtract.at
from rules import integrate as integrate  # scipy.integrate.odeint (adjoint method)
from rules import joining as joining  # concatenate, stack, h/vstack, split, tile, repeat, roll, pad
from rules import lapack as lapack  # scipy.linalg (also imports rules.lapack_lu)
from rules import lapack_more as lapack_more  # scipy.linalg: solve_banded, solve_sylvester, sqrtm
from rules import linalg as linalg  # numpy.linalg (also imports rules.linalg_decomp)
from rules import linalg_eig as linalg_eig  # np.linalg.eig, eigvals (general matrices)
from rules import matmul as matmul  # matmul/@, dot, vdot, inner, outer (stateful 2-D, out=)
from rules import numeric_more as numeric_more  # diff, gradient, cross, nan_to_num
from rules import reductions as reductions  # sum, mean, prod, cum*, max/min, var/std, norm
from rules import selecting as selecting  # take(_along_axis), sort, select, diag, trace, triu/l
from rules import shape as shape  # reshape, ravel, transposes, squeeze, flips, broadcast_to, ...
from rules import shape_more as shape_more  # append, astype, atleast_*d, rot90, partition, ...
from rules import signal as signal  # scipy.signal.convolve
from rules import special as special  # scipy.special (+ special_binary, special_reduce)
from rules import special_more as special_more  # betainc, gammainc(c), Bessel functions, ...
from rules import stats as stats  # scipy.stats: norm, t, beta, gamma, chi2, poisson, mvn, ...
from rules import ufuncs as ufuncs  # every ufunc, sinc/real/imag/angle/clip/where

# A traced value passed to a numba-jitted function raises TracingError, not numba's TypingError
# (registered here, not by `import rulekit`: numba is imported by the rules' kernels anyway).
_numba_guard.install()
