"""What a failure message says besides the check: the input, the primal's name, likely causes.

Every failure names the check, the argument, the input (shape, dtype,
layout, values or seed): docs/testing-your-rules.md. `describe_call` gives the input part; the
hints here name a likely cause where the kit can tell (an overwrite instead of
an increment, a conjugated complex cotangent, a rule that breaks only on 0-d
arrays).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rulekit import function_name
from testutils._layouts import describe_layout

__all__ = [
    "CONJUGATED",
    "OVERWROTE",
    "ZERO_D",
    "describe_call",
    "describe_value",
    "primal_label",
]

#: Where the cotangent after the pullback equals the pullback's own contribution alone.
OVERWROTE = (
    "the pullback overwrote this argument's fdata instead of incrementing it (`=` where "
    "`+=` belongs): after the pullback it holds this call's contribution alone, and the "
    "cotangent that later operations had put there (pre-seeded here) is lost"
)

#: Where the complex conjugate of the pullback's contribution passes the dot-product test.
CONJUGATED = (
    "the pullback's contribution is the complex conjugate of the right one: rulekit follows "
    "PyTorch's convention (a holomorphic y = f(x) pulls back as x̄ += conj(f′(x))·ȳ; JAX's "
    "cotangents are the conjugates), see docs/concepts.md"
)

#: Where the same check passes once every 0-d array argument is given shape (1,).
ZERO_D = (
    "fails only for 0-d inputs (the same checks pass when every 0-d array argument has shape "
    "(1,)). Values with np.ndim(x) == 0 are numpy scalars or 0-d arrays: for a 0-d array x, "
    "arithmetic and ufuncs (x * 2, np.sin(x)) return numpy scalars, not arrays, and x[0] "
    "fails. A rule written for arrays must compute into arrays (out=, x[...] = ..., "
    "np.asarray(...)), give a numpy-scalar output NoFData() (zero_fdata does) and read that "
    "output's cotangent from the pullback's argument dy, not from its fdata"
)


def primal_label(f: Any, reference: Any = None) -> str:
    """How messages name what the rule is compared with: `np.cos`, `the primal function g`."""
    if reference is not None:
        return f"the reference {function_name(reference)}"
    name = function_name(f)
    if name.startswith(("np.", "scipy.", "operator.")):
        return name
    return f"the primal function {name}"


def describe_value(x: Any, limit: int = 12) -> str:
    """dtype, shape, layout and values (at most `limit` shown) of one argument value."""
    if isinstance(x, np.ndarray):
        with np.printoptions(threshold=limit, edgeitems=2, precision=6):
            values = " ".join(np.array2string(x, separator=", ").split())
        flags = "" if x.flags.writeable else ", read-only"
        return f"{x.dtype} array of shape {x.shape}, {describe_layout(x)}{flags}: {values}"
    if isinstance(x, tuple | list):
        inner = ", ".join(describe_value(v, limit) for v in x)
        return f"({inner})" if isinstance(x, tuple) else f"[{inner}]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {describe_value(v, limit)}" for k, v in x.items()) + "}"
    text = f"{type(x).__name__} {x!r}"
    return text if len(text) <= 80 else text[:77] + "..."


def describe_call(names: list[str], values: list[Any], fixed: dict[str, Any], seed: int) -> str:
    """The input of a check: every argument (name, dtype, shape, layout, values) and the seed."""
    parts = [f"{n}: {describe_value(v)}" for n, v in zip(names, values, strict=True)]
    parts += [f"{k}={v!r:.60}" for k, v in fixed.items()]
    return (
        "input: " + "; ".join(parts) + f"; seed {seed} (random directions, output cotangent "
        "and pre-seeded fdata: check_rule(..., seed=...))"
    )
