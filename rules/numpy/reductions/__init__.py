"""Rules for NumPy's reductions."""

# ruff: noqa: I001  (the imports below are in registration order)
from rules.numpy.reductions import sums as sums  # sum, mean, cumsum (declared linear)
from rules.numpy.reductions import nan_sums as nan_sums  # nansum, nanmean
from rules.numpy.reductions import products as products  # prod, cumprod
from rules.numpy.reductions import extrema as extrema  # max, min, amax, amin, nanmax, nanmin
from rules.numpy.reductions import statistics as statistics  # var, std, average
from rules.numpy.reductions import scalar as scalar  # reductions of a real scalar: the identity
from rules.numpy.reductions import forward as forward  # frules + vjp rules (forward.py)
