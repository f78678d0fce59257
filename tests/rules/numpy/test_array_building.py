"""Building arrays from traced values (issue 14): `np.array([...])`, `np.r_[...]`, `np.c_[...]`
convert their items with `__array__` (NumPy's protocols cannot intercept them), so they
raise a TracingError naming np.stack; np.stack / np.concatenate / np.column_stack, the
fix, differentiate. (The message text comes from the engine's `__array__` refusal;
`rules.numpy.traced_through.NOT_DISPATCHED` is what docs/coverage.md lists.)"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads

import rulekit
import rules  # noqa: F401  (registers every bundled rule)
from rules.numpy.traced_through import NOT_DISPATCHED

#: Each refused construction, and the idiom to write instead (the same values).
CASES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "np.array of scalars": (
        lambda x: np.array([x[0] * x[1], x[2]]),
        lambda x: np.stack([x[0] * x[1], x[2]]),
    ),
    "np.array of arrays": (
        lambda x: np.array([x, 2.0 * x]),
        lambda x: np.stack([x, 2.0 * x]),
    ),
    "np.r_ of arrays": (
        lambda x: np.r_[x, np.sin(x)],
        lambda x: np.concatenate([x, np.sin(x)]),
    ),
    "np.r_ of scalars": (
        lambda x: np.r_[x[0], x[2]],
        lambda x: np.stack([x[0], x[2]]),
    ),
    "np.c_ of vectors": (
        lambda x: np.c_[x, x**2],
        lambda x: np.column_stack([x, x**2]),
    ),
}


def _weighted(build: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def loss(x: Any) -> Any:
        y = build(x)
        return np.sum(np.sin(y) * np.arange(1.0, 1.0 + np.size(y)).reshape(np.shape(y)))

    return loss


@pytest.mark.parametrize("case", list(CASES))
def test_building_with_numpy_constructors_raises_naming_np_stack(case: str) -> None:
    refused, _ = CASES[case]
    with pytest.raises(rulekit.TracingError, match=re.escape("np.stack([a, b])")) as info:
        rulekit.grad(_weighted(refused))(np.array([0.5, -1.0, 2.0]))
    msg = str(info.value)  # the fix first (np.stack, np.concatenate), then why
    fix = msg.index("Fix:")
    assert msg.index("np.stack(", fix) < msg.index("Why:", fix) < msg.index("gradient", fix)
    assert "np.concatenate(" in msg


@pytest.mark.parametrize("case", list(CASES))
def test_the_idiom_differentiates_and_builds_the_same_array(case: str) -> None:
    refused, idiom = CASES[case]
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_array_equal(idiom(x), refused(x))  # (on plain arrays both work)
    check_grads(_weighted(idiom), x)


def test_the_listed_alternative_for_np_array_names_stack_and_concatenate_first() -> None:
    text = NOT_DISPATCHED[np.array]
    assert text.startswith("np.stack(") and text.index("np.concatenate(") < text.index("(np.")
