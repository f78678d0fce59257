"""`Traced`: numpy functions without a rule are traced through their Python implementation."""

from __future__ import annotations

import numpy as np
import pytest

import rulekit
from rulekit import MissingRuleError


def test_fallback_that_reenters_itself_reports_the_missing_rule() -> None:
    # Without a rule for np.max, its Python implementation runs on the traced value and calls
    # x.max(), which is np.max again: that must end in MissingRuleError, not RecursionError.
    saved = [r for r in rulekit.registry.entries() if r.f in (np.max, np.amax)]
    for r in saved:
        rulekit.registry.remove(r)
    try:
        with pytest.raises(MissingRuleError, match=r"np\.max"):
            rulekit.grad(lambda x: np.max(x))(np.ones(3))
    finally:
        for r in saved:
            rulekit.registry.add(r.kind, r.f, r.patterns, r.impl, out=r.out,
                                 examples=r.examples, module=r.module)  # fmt: skip
