"""An example third-party rule package: importing it registers two rules with rulekit.

* `softplus(x)` — a user function made a rulekit primitive, with a plain rule;
* `scale_add_(a, x, y)` — an in-place `y ← y + a·x`, with a stateful rule that
  keeps the overwritten `y` in a pooled buffer (no allocation once warm).

`rulekit check example` (the entry-point name in pyproject.toml) or
`pytest --rulekit-check=rulekit_example_rules` runs the conformance kit on both.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

import rulekit
from rulekit import Array, CoDual, NoFData, NoRData, StatefulRRule, example, zero_fdata

__all__ = ["ScaleAddRule", "scale_add_", "softplus", "softplus_rrule"]


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
