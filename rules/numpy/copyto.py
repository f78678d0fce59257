"""`np.copyto(dst, src, casting, where)`: the rule behind every generic `out=`.

The engine gives any rule an `out=` form: it computes `y = f(...)` with the rule
for the call without `out=`, then records `np.copyto(out, y)`, dispatched to the
rule registered here. The copy is a mutation: for `dst ← src` (where `mask`, if
given, is true),

    src̄ += unbroadcast(mask·dst̄),   dst̄ ← (1 − mask)·dst̄,   dst ← dst_old

The old value of `dst` is saved into the rule's pooled buffer and the
broadcast reduction goes into a scratch buffer, so once warm the copy
allocates nothing. `CopyToRule` is also the copy step other `out=` rules keep
(`rules.numpy.ufuncs.inplace`).
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np

from rulekit import (
    Array,
    CoDual,
    NoFData,
    NoRData,
    StatefulRRule,
    TracingError,
    build_primitive_rrule,
    example,
    untraced_write_error,
)

__all__ = ["CopyToRule"]

_NO_F = NoFData()
_NO_R = NoRData()
_SCALARS = (float, complex, np.floating, np.complexfloating)


def _broadcast_axes(shape: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...]:
    """Axes of `target` along which an operand of `shape` was broadcast."""
    lead = len(target) - len(shape)
    return tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and target[lead + i] != 1
    )


def _fits(x: Any, dst: np.ndarray, casting: Any) -> bool:
    """Whether copyto would accept scalar `x` into `dst` (without np.result_type's 0-d array)."""
    if isinstance(x, (np.floating, np.complexfloating)):
        return bool(np.can_cast(x.dtype, dst.dtype, casting=casting))
    return dst.dtype.kind == "c" or not isinstance(x, complex)  # Python scalars are "weak"


class CopyToRule(StatefulRRule):
    """`np.copyto(dst, src, casting, where)`; the adjoint is in the module docstring."""

    def __call__(
        self, f: CoDual, dst: CoDual, src: CoDual, casting: Any = "same_kind", where: Any = True
    ) -> tuple[CoDual, Any]:
        if isinstance(casting, CoDual) or isinstance(where, CoDual):
            raise TracingError("np.copyto: casting= and where= must be constants")
        if dst.dx is None and src.dx is not None:
            raise untraced_write_error("np.copyto (or out=)")
        mask = None if where is True else np.asarray(where)
        tok = self.save(dst.x)
        if mask is None and isinstance(src.x, _SCALARS) and _fits(src.x, dst.x, casting):
            dst.x.fill(src.x)  # (copyto would first make a 0-d array of the scalar)
        elif mask is None:  # (where=True would allocate a 0-d bool array)
            np.copyto(dst.x, src.x, casting=casting)
        else:
            np.copyto(dst.x, src.x, casting=casting, where=mask)

        def copyto_pullback(dy: Any) -> tuple[Any, ...]:
            g = dst.dx
            rsrc: Any = _NO_R
            if src.dx is not None:
                rsrc = self._to_src(g, mask, src)
            if g is not None:
                if mask is None:
                    g.fill(0)
                else:
                    np.copyto(g, self._zero(g.dtype), where=mask)
            self.restore(tok, into=dst.x)
            return (_NO_R, _NO_R, rsrc)

        return CoDual(None, _NO_F), copyto_pullback

    def _zero(self, dtype: np.dtype) -> np.ndarray:
        z = self.scratch(f"zero{dtype.str}", (), dtype)
        z.fill(0)
        return z

    def _to_src(self, g: np.ndarray, mask: np.ndarray | None, src: CoDual) -> Any:
        """Add unbroadcast(mask·g) into src's fdata, or return it as src's rdata."""
        if mask is not None:
            masked = self.scratch("masked", g.shape, g.dtype)
            masked.fill(0)
            np.copyto(masked, g, where=mask)  # (g·mask would cast the mask: an allocation)
            g = masked
        sdx = src.dx
        if isinstance(sdx, np.ndarray):
            gg = g.real if (g.dtype.kind == "c" and sdx.dtype.kind != "c") else g
            if sdx.shape == gg.shape:
                np.add(sdx, gg, out=sdx, casting="unsafe")
                return _NO_R
            axes = _broadcast_axes(sdx.shape, gg.shape)
            kept = tuple(1 if i in axes else n for i, n in enumerate(gg.shape))
            red = self.scratch("reduced", kept, gg.dtype)
            np.sum(gg, axis=axes, keepdims=True, out=red)
            np.add(sdx, red.reshape(sdx.shape), out=sdx, casting="unsafe")
            return _NO_R
        if isinstance(src.x, _SCALARS):
            total = self.scratch("total", (), g.dtype)
            np.sum(g, out=total)
            t = total[()]
            return type(src.x)(t if isinstance(src.x, (complex, np.complexfloating)) else t.real)
        return _NO_R


def _copyto_examples() -> list[Any]:
    rng = np.random.default_rng(0)
    return [
        example(rng.normal(size=(3, 4)), rng.normal(size=(3, 4))),
        example(rng.normal(size=(3, 4)), rng.normal(size=(4,))),
        example(rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(2, 3))),
        example(rng.normal(size=(2, 3)), rng.normal(size=(1, 3)), where=rng.normal(size=3) > 0),
    ]


def _copyto_scalar_examples() -> list[Any]:
    rng = np.random.default_rng(1)
    return [
        example(rng.normal(size=(2, 3)), 2.5),
        example(rng.normal(size=3), np.float64(-1.0)),
        example(rng.normal(size=3) + 1j, 0.5 - 2j),
    ]


def _build_copyto(sig: Any) -> CopyToRule:
    return CopyToRule()


build_primitive_rrule.register(
    np.copyto, Array[np.inexact], Array[np.number], examples=_copyto_examples
)(_build_copyto)
build_primitive_rrule.register(
    np.copyto,
    Array[np.inexact],
    Union[float, complex, np.floating, np.complexfloating],
    examples=_copyto_scalar_examples,
)(_build_copyto)
