"""An example third-party rule package: importing it registers three rules with rulekit.

* `softplus(x)` — a user function made a rulekit primitive, with a plain rule
  (checked on 0-d, float32 and float64 inputs);
* `scale_add_(a, x, y)` — an in-place `y ← y + a·x`, with a stateful rule that
  keeps the overwritten `y` in a pooled buffer (no allocation once warm) and
  follows Mooncake's convention for mutation (the pullback restores `y`);
* `add_bias(x, b)` — `x + b` with NumPy broadcasting, with a plain rule that
  sums the cotangent over the broadcast axes.

`rulekit check example` (the entry-point name in pyproject.toml) or
`pytest --rulekit-check=rulekit_example_rules` runs the conformance kit on all three.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

import rulekit
from rulekit import Array, CoDual, NoFData, NoRData, StatefulRRule, example, zero_fdata

__all__ = ["ScaleAddRule", "add_bias", "add_bias_rrule", "scale_add_", "softplus", "softplus_rrule"]


def _softplus(x: Any) -> Any:
    return np.logaddexp(0.0, x)


def _scale_add_(a: float, x: np.ndarray, y: np.ndarray) -> None:
    y += a * x


softplus = rulekit.primitive(_softplus)
scale_add_ = rulekit.primitive(_scale_add_)


def _softplus_examples() -> list[Any]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4))
    return [example(x), example(x.astype(np.float32)), example(np.array(0.3))]


@rulekit.rrule.register(softplus, Array[np.floating], examples=_softplus_examples)
def softplus_rrule(f: CoDual, x: CoDual) -> tuple[CoDual, Any]:
    """y = log(1 + eˣ)  ⇒  x̄ += ȳ · σ(x)   (σ the logistic sigmoid)."""
    value = _softplus(x.x)
    y = CoDual(value, zero_fdata(value))  # a 0-d x gives a numpy scalar: NoFData, cotangent dy

    def softplus_pullback(dy: Any) -> tuple[Any, Any]:
        if x.dx is not None:
            ybar = y.dx if isinstance(y.dx, np.ndarray) else dy
            x.dx += ybar / (1 + np.exp(-x.x))
        return NoRData(), NoRData()

    return y, softplus_pullback


class ScaleAddRule(StatefulRRule):
    """y ← y + a·x (y overwritten)  ⇒  x̄ += a·ȳ,  ā = ⟨ȳ, x⟩,  ȳ unchanged,  y ← y_old.

    The old y is pushed on the rule's stack (`save`) and popped back by the
    pullback (`restore`); a·ȳ and ⟨ȳ, x⟩ go through scratch buffers, and the
    scalar a through a 0-d buffer (a Python float operand makes numpy allocate).
    """

    def __call__(self, f: CoDual, a: CoDual, x: CoDual, y: CoDual) -> tuple[CoDual, Any]:
        token = self.save(y.x)
        alpha = self.scalar(a.x)
        work = self.scratch("a*x", y.x.shape, y.x.dtype)
        np.multiply(x.x, alpha, out=work)
        np.add(y.x, work, out=y.x)

        def scale_add_pullback(dy: Any) -> tuple[Any, ...]:
            ra: Any = NoRData()
            if y.dx is not None:
                t = self.scratch("t", y.x.shape, y.x.dtype)
                if a.dx is not None:
                    total = self.scratch("total", (), y.x.dtype)
                    np.multiply(y.dx, x.x, out=t)
                    np.sum(t, out=total)
                    ra = type(a.x)(total[()])
                if x.dx is not None:
                    np.multiply(y.dx, self.scalar(a.x), out=t)
                    np.add(x.dx, t, out=x.dx)
            self.restore_y(token, y)
            return NoRData(), ra, NoRData(), NoRData()

        return CoDual(None, NoFData()), scale_add_pullback

    def restore_y(self, token: Any, y: CoDual) -> None:
        self.restore(token, into=y.x)

    def scalar(self, a: float) -> np.ndarray:
        s = self.scratch("alpha", (), np.float64)
        s.fill(a)
        return s


def _scale_add_examples() -> list[Any]:
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    return [example(0.7, x, y), example(np.float64(-1.5), x[0], y[0])]


@rulekit.build_primitive_rrule.register(
    scale_add_,
    Union[float, np.floating],
    Array[np.float64],
    Array[np.float64],
    examples=_scale_add_examples,
)
def build_scale_add(sig: Any) -> ScaleAddRule:
    return ScaleAddRule()


def _add_bias(x: np.ndarray, b: np.ndarray) -> Any:
    return x + b


add_bias = rulekit.primitive(_add_bias)


def _unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`g` summed over the axes that broadcasting to `g.shape` added or stretched from `shape`."""
    lead = g.ndim - len(shape)
    stretched = [lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1]
    axes = (*range(lead), *stretched)
    return np.sum(g, axis=axes).reshape(shape) if axes else g


def _add_bias_examples() -> list[Any]:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 4))
    return [
        example(x, rng.normal(size=4)),  # a row broadcast against a matrix
        example(rng.normal(size=(3, 1)), rng.normal(size=(1, 4))),  # both operands stretched
        example(np.array(0.5), rng.normal(size=3)),  # a 0-d operand
        example(np.array(0.5), np.array(-1.25)),  # 0-d + 0-d: the result is a numpy scalar
        example(x.astype(np.float32), np.float32(2) * rng.normal(size=4).astype(np.float32)),
    ]


@rulekit.rrule.register(
    add_bias, Array[np.floating], Array[np.floating], examples=_add_bias_examples
)
def add_bias_rrule(f: CoDual, x: CoDual, b: CoDual) -> tuple[CoDual, Any]:
    """y = x + b (broadcast)  ⇒  x̄ += Σ ȳ over x's broadcast axes,  b̄ likewise."""
    value = _add_bias(x.x, b.x)
    y = CoDual(value, zero_fdata(value))  # two 0-d operands give a numpy scalar: NoFData

    def add_bias_pullback(dy: Any) -> tuple[Any, Any, Any]:
        ybar = y.dx if isinstance(y.dx, np.ndarray) else np.asarray(dy)
        for arg in (x, b):
            if arg.dx is not None:
                arg.dx += _unbroadcast(ybar, arg.x.shape)
        return NoRData(), NoRData(), NoRData()

    return y, add_bias_pullback
