"""np.dot, np.inner, np.kron, np.tensordot with a scalar operand (a product, issue 14), and the
matmul family on a real and a complex 1-D array, against finite differences.

Rules: `rules.numpy._matmul_generic.scalar_product_rrule` (y = a·b ⇒ ā += Σ ȳ·conj(b),
b̄ += Σ ȳ·conj(a)) and `generic_rrule` (mixed dtypes).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import EVERY_LAYOUT, check_grads

import rulekit
import rules  # noqa: F401  (registers every bundled rule)

_FNS = [np.dot, np.inner, np.kron, np.tensordot]


def _call(fn: Any, a: Any, b: Any) -> Any:
    return fn(a, b, axes=0) if fn is np.tensordot else fn(a, b)


def _loss(y: Any) -> Any:
    return np.sum(np.abs(np.sin(y)) ** 2)  # real, and not quadratic in y


@pytest.mark.parametrize("c", [2.5, np.float64(-1.5), np.float32(0.5), 3, 0.5 - 2.0j])
@pytest.mark.parametrize("fn", _FNS, ids=lambda f: f.__name__)
def test_a_constant_scalar_operand_on_either_side(
    fn: Any, c: Any, rng: np.random.Generator
) -> None:
    x = rng.normal(size=(2, 3))
    check_grads(lambda x: _loss(_call(fn, x, c)), x, layouts=EVERY_LAYOUT)
    check_grads(lambda x: _loss(_call(fn, c, x)), x, layouts=EVERY_LAYOUT)


@pytest.mark.parametrize("fn", _FNS, ids=lambda f: f.__name__)
def test_a_traced_scalar_operand_on_either_side(fn: Any, rng: np.random.Generator) -> None:
    x = rng.normal(size=4)
    z = rng.normal(size=(2, 2)) + 1j * rng.normal(size=(2, 2))
    check_grads(lambda x: _loss(_call(fn, np.sum(x * x), x)), x)
    check_grads(lambda x: _loss(_call(fn, x, np.prod(x))), x)
    check_grads(lambda x, s: _loss(_call(fn, s, x)), z, 1.25)  # a traced Python float
    check_grads(lambda x, s: _loss(_call(fn, x, s)), z, 0.5 + 1.5j)  # a traced complex
    check_grads(lambda x: _loss(_call(fn, np.sum(x), 2.0)), x)  # two scalars


def test_tensordot_keeps_numpys_error_for_contracting_a_scalar() -> None:
    with pytest.raises(IndexError):
        np.tensordot(np.ones(3), 2.0)  # numpy: the default axes=2 needs two axes
    with pytest.raises(IndexError):
        rulekit.grad(lambda x: np.sum(np.tensordot(x, 2.0)))(np.ones(3))


def test_a_zero_d_array_operand_of_dot_is_a_product(rng: np.random.Generator) -> None:
    x = rng.normal(size=(3, 2))
    check_grads(lambda x, s: _loss(np.dot(s, x)), x, np.array(1.5))
    check_grads(lambda x, s: _loss(np.inner(x, s)), x, np.array(-0.5))


@pytest.mark.parametrize("fn", [np.dot, np.matmul, np.inner, np.vdot], ids=lambda f: f.__name__)
def test_a_real_and_a_complex_vector(fn: Any, rng: np.random.Generator) -> None:
    x = rng.normal(size=5)
    z = rng.normal(size=5) + 1j * rng.normal(size=5)
    for u, v in ((x, z), (z, x)):
        check_grads(lambda a, b: np.abs(fn(a, b)) ** 2, u, v, layouts=("C", "strided"))
        check_grads(lambda a, b=v: np.abs(fn(a, b)) ** 2, u, argnums=0)  # b constant
        check_grads(lambda b, a=u: np.abs(fn(a, b)) ** 2, v, argnums=0)  # a constant
