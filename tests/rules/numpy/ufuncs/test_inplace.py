"""rules.numpy.ufuncs.inplace: the out= forms of + − · / (fused `z ∘= w`, else ufunc + copyto)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads, check_warm_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import rulekit
import rules  # noqa: F401  (registers the rules)
from rules.numpy.ufuncs._common import DECLARATIONS
from rules.numpy.ufuncs._kernels import kernels_of
from testutils import check_rule

OPS = (np.add, np.subtract, np.multiply, np.divide)


@pytest.fixture
def fused_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the fused kernels called (spied on in the kernel modules generated from the
    declarations of + − · /, where the rules look them up)."""
    calls: list[str] = []
    for uf in OPS:
        module = kernels_of(DECLARATIONS[uf])
        for name in ("inplace_array", "inplace_scalar"):
            kernel = getattr(module, name)

            def spy(*args: Any, _k: Any = kernel, _n: str = name + "_pullback") -> Any:
                calls.append(_n)
                return _k(*args)

            monkeypatch.setattr(module, name, spy)
    return calls


def _pos(rng: np.random.Generator, shape: Any, dt: Any = np.float64, order: str = "C") -> Any:
    return np.array(rng.uniform(0.5, 2.0, size=shape), dtype=dt, order=order)  # type: ignore[call-overload]


@pytest.mark.parametrize("op", OPS, ids=lambda u: u.__name__)
@pytest.mark.parametrize("dt", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("scalar", [False, True])
def test_in_place_form_passes_the_kit(
    op: Any, dt: Any, order: str, scalar: bool, fused_calls: list[str]
) -> None:
    rng = np.random.default_rng(3)
    z = np.array(rng.normal(size=(3, 4)), dtype=dt, order=order)  # type: ignore[call-overload]
    w: Any = 1.7 if scalar else _pos(rng, (3, 4), dt, order)
    check_rule(op, z, w, kwargs={"out": z})
    assert fused_calls  # the kit's calls went through the one-pass kernel


@pytest.mark.parametrize("op", OPS, ids=lambda u: u.__name__)
def test_other_out_forms_pass_the_kit(op: Any, fused_calls: list[str]) -> None:
    rng = np.random.default_rng(4)
    z, w = rng.normal(size=(3, 4)), _pos(rng, (3, 4))
    check_rule(op, z, w, kwargs={"out": rng.normal(size=(3, 4))})  # out is a third array
    check_rule(op, z, _pos(rng, (4,)), kwargs={"out": z})  # broadcast w
    wz = _pos(rng, (3, 4))
    check_rule(op, z, wz, kwargs={"out": wz})  # out is the second operand
    assert not fused_calls  # none of these is `z ∘= w` on one layout
    zs = z[:, ::2]
    check_rule(op, zs, w[:, ::2], kwargs={"out": zs})  # strided
    # (the kit also tries C/F-ordered copies of these two, which are `z ∘= w` on one layout)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    shape=st.sampled_from([(5,), (2, 3), (3, 1, 2)]),
    op=st.sampled_from(OPS),
    scalar=st.booleans(),
    w_active=st.booleans(),
)
def test_engine_in_place_arithmetic(shape: Any, op: Any, scalar: bool, w_active: bool) -> None:
    rng = np.random.default_rng(len(shape))
    x, w = rng.normal(size=shape), _pos(rng, shape)

    def f(x: Any, w: Any) -> Any:
        z = x * 1.0  # a traced array to write into
        c = 0.8 if scalar else w
        if op is np.add:
            z += c
        elif op is np.subtract:
            z -= c
        elif op is np.multiply:
            z *= c
        else:
            np.divide(z, c, out=z)
        return np.sum(z * x)

    check_grads(f, x, w, argnums=(0, 1) if w_active else 0)


def test_engine_in_place_on_views_and_chains() -> None:
    rng = np.random.default_rng(5)

    def f(x: Any, w: Any) -> Any:
        z = np.zeros_like(x)
        z += x * w
        z[1:] *= 2.0  # a contiguous view, in place
        np.multiply(z, x, out=z)
        z /= w
        z -= 0.5
        return np.sum(z * z)

    check_grads(f, rng.normal(size=6), _pos(rng, 6))


def test_warm_in_place_code_allocates_nothing() -> None:
    rng = np.random.default_rng(6)

    def f(x: Any, w: Any) -> Any:
        z = x * 2.0
        z += w
        z *= w
        z /= 3.0
        return np.vdot(z, z)  # (np.sum's 0-d result would be an 8-byte allocation)

    check_warm_grads(f, rng.normal(size=(4, 3)), _pos(rng, (4, 3)))


def test_untraced_destination_is_refused() -> None:
    def f(x: Any) -> Any:
        buf = np.zeros(3)
        np.add(x, 1.0, out=buf)
        return np.sum(buf)

    with pytest.raises(rulekit.TracingError, match="untraced"):
        rulekit.value_and_grad(f)(np.ones(3))


@pytest.mark.parametrize("op", OPS, ids=lambda u: u.__name__)
def test_zero_dimensional_operands(op: Any) -> None:
    """0-d operands: in place (fused), and into another 0-d array (a scalar result copied)."""
    z, w = np.array(0.7), np.array(1.3)
    check_rule(op, z, w, kwargs={"out": z})
    check_rule(op, np.array(-0.4), w, kwargs={"out": np.array(2.0)})
    check_rule(op, np.array(-0.4), 1.5, kwargs={"out": np.array(2.0)})
