"""Type patterns as data: what a registration's patterns are, for tools that read them.

`rulekit.rrule.register(f, Array[np.floating], Union[float, int], Vararg[Any])`
normalises each pattern it is given (`as_pattern`) into one of the classes
below; `Registration.patterns` holds them. A tool that builds inputs for a
registration (the conformance kit's hypothesis strategies) or that explains a
dispatch reads them here:

* `ArrayPattern(dtype, ndim)`: ndarrays whose scalar type is a subclass of
  `dtype` (numpy's scalar hierarchy) and whose ndim is `ndim` (None: any);
  `rulekit.Array` is `ArrayPattern()`, `Array[np.float64, 2]` one of them;
* `ClassPattern(cls)`: instances of a Python class;
* `AnyPattern()`: every value;
* `UnionPattern(members)`: values matched by any member;
* `VarargPattern(element)`: zero or more trailing arguments, each `element`.

`type_key(x)` is what dispatch looks at in a value (`(dtype.type, ndim)` for an
ndarray, `type(x)` otherwise), `matches(p, key)` whether a value of that key is
in pattern `p`, and `is_subpattern(p, q)` the specificity order (p ⊆ q).
"""

from rulekit._patterns import AnyPattern as AnyPattern
from rulekit._patterns import ArrayPattern as ArrayPattern
from rulekit._patterns import ClassPattern as ClassPattern
from rulekit._patterns import Pattern as Pattern
from rulekit._patterns import TypeKey as TypeKey
from rulekit._patterns import UnionPattern as UnionPattern
from rulekit._patterns import VarargPattern as VarargPattern
from rulekit._patterns import as_pattern as as_pattern
from rulekit._patterns import is_subpattern as is_subpattern
from rulekit._patterns import matches as matches
from rulekit._patterns import type_key as type_key

__all__ = [
    "AnyPattern",
    "ArrayPattern",
    "ClassPattern",
    "Pattern",
    "TypeKey",
    "UnionPattern",
    "VarargPattern",
    "as_pattern",
    "is_subpattern",
    "matches",
    "type_key",
]
