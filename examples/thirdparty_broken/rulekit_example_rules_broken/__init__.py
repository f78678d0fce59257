"""A deliberately broken copy of `rulekit_example_rules`, for the docs and tests.

Its stateful rule forgets to restore the `y` it overwrote; `rulekit check
example-broken` reports the failing check (mutation) for it and passes softplus.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import rulekit_example_rules as good

import rulekit
from rulekit import Array, CoDual


def broken_softplus(x: Any) -> Any:
    return good._softplus(x)


def broken_scale_add_(a: float, x: np.ndarray, y: np.ndarray) -> None:
    good._scale_add_(a, x, y)


softplus = rulekit.primitive(broken_softplus)
scale_add_ = rulekit.primitive(broken_scale_add_)

rulekit.rrule.register(softplus, Array[np.floating], examples=good._softplus_examples)(
    good.softplus_rrule
)


class ForgetfulScaleAddRule(good.ScaleAddRule):
    """The defect: the pullback pops the saved y but never writes it back."""

    def restore_y(self, token: Any, y: CoDual) -> None:
        self.pop(token)


@rulekit.build_primitive_rrule.register(
    scale_add_,
    Union[float, np.floating],
    Array[np.float64],
    Array[np.float64],
    examples=good._scale_add_examples,
)
def build_scale_add(sig: Any) -> ForgetfulScaleAddRule:
    return ForgetfulScaleAddRule()
