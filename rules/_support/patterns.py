"""Type patterns the bundled rules register with: one name for each set of operands.

Every pattern is a `typing.Union` of `rulekit.Array[...]` patterns and Python/numpy
scalar types (docs/concepts.md). Python `bool` is a subclass of `int`, so `int`
matches `True` too.
"""

from __future__ import annotations

from typing import Union

import numpy as np

from rulekit import Array

__all__ = [
    "Complex",
    "Inexact",
    "InexactArray",
    "IntLike",
    "Numeric",
    "Real",
    "RealNumeric",
    "Seq",
]

#: Values that may carry a derivative: float/complex arrays and scalars.
Inexact = Union[Array[np.inexact], float, complex, np.inexact]
#: Real floating arrays and scalars.
Real = Union[Array[np.floating], float, np.floating]
#: Complex arrays and scalars.
Complex = Union[Array[np.complexfloating], complex, np.complexfloating]
#: Integer and bool arrays and scalars: constants of a float computation.
IntLike = Union[Array[np.integer], Array[np.bool_], int, np.integer, np.bool_]
#: Every numeric operand (arrays of any numeric or bool dtype, Python and numpy scalars):
#: `Inexact` or `IntLike`.
Numeric = Union[Inexact, IntLike]
#: Every real numeric operand (no complex).
RealNumeric = Union[Real, IntLike]
#: Float and complex arrays of any ndim (no scalars): what the shape and indexing rules
#: differentiate.
InexactArray = Array[np.inexact]
#: A list or tuple argument (`np.asarray` stacks its elements).
Seq = Union[list, tuple]
