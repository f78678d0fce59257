"""Rules for NumPy's ufuncs (and `np.sinc`, `np.clip`, `np.where`, `np.real`/`imag`/`angle`).

Registration order: the plain unary and binary rules, the rest of the ufunc family, then
the fast paths registered over them for more specific signatures (real scalars, float
arrays, in-place `out=`), which fall back to the plain rules.
"""

# ruff: noqa: I001  (the imports below are in registration order)
# y = f(x): exp, log, sin, tanh, sqrt, ... and np.sinc
from rules.numpy.ufuncs import unary as unary

# a ∘ b: add, multiply, power, arctan2, hypot, maximum, ..., divmod, ldexp
from rules.numpy.ufuncs import binary as binary

# real/imag/angle, modf, frexp, piecewise-constant ufuncs, clip, where
from rules.numpy.ufuncs import misc as misc

# real-scalar arithmetic in plain Python (`-2.5 * loss`, `np.log(s)`)
from rules.numpy.ufuncs import scalar as scalar

# allocation-free stateful rules for the hot ufuncs on float arrays
from rules.numpy.ufuncs import fused as fused
from rules.numpy.ufuncs import inplace as inplace  # `out=` forms of + − · / (`z += w`) in one pass
from rules.numpy.ufuncs import methods as methods  # reduce, accumulate, outer, reduceat
from rules.numpy.ufuncs import folds as folds  # reduce/accumulate of the other binary ufuncs

# compiled programs (compile=True): chains of elementwise calls fused into one kernel each way
from rules.numpy.ufuncs import fusion as fusion
from rules.numpy.ufuncs import forward as forward  # frules and differentiable pullbacks
from rules.numpy.ufuncs import forward_methods as forward_methods  # ... of outer/reduce/accumulate
