"""Old names of helpers that now live in modules named for what they do.

Kept only until the rules that still import them from here switch (the ufunc,
scipy.special, shape, sums, joining, selecting and fft rules); new code imports
from the modules below. Old name → new home:

* `accumulate`, `scalar_rdata`, `unbroadcast`, `broadcast_shape`, `broadcast_axes`,
  `NO_F`, `NO_R`, `ADD_REDUCE` → `rules._support.cotangents` (same names);
  `add_unbroadcast` → `cotangents.add_to_fdata_pooled`;
* `primal`, `fdata` → `rules._support.arguments`;
* `new_output`, `is_inexact_array` → `rules._support.outputs`;
* `filled_0d` → `rules._support.layout`; `randn` → `rules._support.examples`.
"""

from __future__ import annotations

from rules._support.arguments import fdata as fdata
from rules._support.arguments import primal as primal
from rules._support.cotangents import ADD_REDUCE as ADD_REDUCE
from rules._support.cotangents import NO_F as NO_F
from rules._support.cotangents import NO_R as NO_R
from rules._support.cotangents import accumulate as accumulate
from rules._support.cotangents import add_to_fdata_pooled as add_unbroadcast
from rules._support.cotangents import broadcast_axes as broadcast_axes
from rules._support.cotangents import broadcast_shape as broadcast_shape
from rules._support.cotangents import scalar_rdata as scalar_rdata
from rules._support.cotangents import unbroadcast as unbroadcast
from rules._support.examples import randn as randn
from rules._support.layout import filled_0d as filled_0d
from rules._support.outputs import is_inexact_array as is_inexact_array
from rules._support.outputs import new_output as new_output

__all__ = ["add_unbroadcast"]
