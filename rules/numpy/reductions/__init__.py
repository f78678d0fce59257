"""Rules for NumPy's reductions."""

# ruff: noqa: I001  (the imports below are in registration order)
from rules.numpy.reductions import sums as sums  # sum, nansum, mean, nanmean, prod, cumsum, cumprod
from rules.numpy.reductions import extrema as extrema  # max, min, amax, amin, nanmax, nanmin
from rules.numpy.reductions import statistics as statistics  # var, std, average
from rules.numpy.reductions import scalar as scalar  # reductions of a real scalar: the identity
