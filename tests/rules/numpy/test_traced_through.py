"""Functions listed in rules.numpy.traced_through differentiate correctly without a rule of
their own."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads

import rulekit
import rules  # noqa: F401  (registers the rules these implementations are built on)
from rules.numpy.traced_through import NOT_DISPATCHED, TRACED_THROUGH


def _loss(fn: Any, rest: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    def loss(x: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # (np.row_stack)
            out = fn(x, *rest, **kwargs) if not isinstance(x, list) else fn(x, **kwargs)
        parts = out if isinstance(out, list) else [out]
        return sum(np.sum(np.sin(p + k)) for k, p in enumerate(parts))

    return loss


@pytest.mark.parametrize("fn", list(TRACED_THROUGH), ids=lambda f: f.__name__)
def test_traced_through_matches_finite_differences(fn: Any) -> None:
    args, kwargs = TRACED_THROUGH[fn]()
    first = args[0]
    if isinstance(first, list):  # a list of arrays: differentiate w.r.t. its first array
        others = first[1:]

        def loss(x: Any) -> Any:
            return _loss(fn, (), kwargs)([x, *others])

        x0 = first[0]
    else:
        loss, x0 = _loss(fn, args[1:], kwargs), first
    assert not rulekit.registry.find(rulekit.signature_of(fn, *args, **kwargs))  # no rule
    assert np.asarray(x0).dtype == np.float64  # (the default tolerances: double precision)
    check_grads(loss, x0)


@pytest.mark.parametrize("fn", list(NOT_DISPATCHED), ids=lambda f: f.__name__)
def test_functions_numpy_does_not_dispatch_raise_naming_the_alternative(fn: Any) -> None:
    call = {np.array: lambda x: np.array([x[0], x[1]]), np.full: lambda x: np.full(2, x[0])}[fn]
    alternative = "np.stack" if fn is np.array else "np.full_like"
    with pytest.raises(rulekit.TracingError, match=alternative):
        rulekit.grad(lambda x: np.sum(call(x)))(np.ones(3))
