"""The transformations built on the engines: `jvp`, `vjp`, `jacfwd`, `jacrev`, `hessian`,
`hvp`, `elementwise_grad`, `stop_gradient` (JAX's conventions, autograd's names).

Forward mode runs a `ForwardLevel` (`rulekit._forward`). Reverse mode is the
reverse engine when nothing else runs, and a nested `ReverseLevel`
(`rulekit._reverse_level`) inside another transformation, which is how derivatives
of derivatives compose: `jacfwd(grad(f))` (forward over reverse: `hessian`'s and
`hvp`'s default), `jacrev(jacrev(f))`, `grad(grad(f))`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit._api import _argnums, grad
from rulekit._engine._levels import LevelValue, inexact, nesting, plain
from rulekit._engine._traced import Traced, _primal_call
from rulekit._errors import TracingError
from rulekit._jacobians import (
    check_float_leaves,
    jacobian_tree,
    tree_basis,
    tree_leaves,
    tree_rebuild,
    unit_basis,
)
from rulekit._layout import zeros_like_exact
from rulekit._nested import jvp_values, map_leaves, nested_vjp, zeros_like_value
from rulekit._pullback import Pullback
from rulekit._tangent_types import NoTangent

__all__ = ["elementwise_grad", "hessian", "hvp", "jacfwd", "jacrev", "jvp", "stop_gradient",
           "vjp"]  # fmt: skip

_MODES = ("forward-over-reverse", "reverse-over-reverse", "reverse-over-forward")


def _name(f: Any) -> str:
    return str(getattr(f, "__name__", repr(f)))


def jvp(
    f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False
) -> tuple[Any, ...]:
    """`(f(*primals), J·tangents)`: forward mode, one pass (JAX's `jax.jvp`; with
    `has_aux=True`, `f` returns `(out, aux)` and jvp `(out, tangent, aux)`).

    `primals` and `tangents` are tuples (or lists) of the same structure; a tangent
    None marks a constant argument (no work is spent on its derivative). Tangents
    have their primal's shape; the output tangent has the output's structure (zeros
    for an output that does not depend on the tangents).
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(
            "rulekit.jvp(f, primals, tangents): primals and tangents must be tuples, e.g. "
            "jvp(f, (x,), (v,))"
        )
    if len(primals) != len(tangents):
        raise ValueError(
            f"rulekit.jvp: {len(primals)} primals but {len(tangents)} tangents; give one "
            "tangent per primal (None for a constant)"
        )
    out, tangent, aux = jvp_values(f, primals, tangents, has_aux)
    return (out, tangent, aux) if has_aux else (out, tangent)


class _EngineVJP:
    """The reusable pullback at the outermost level: the reverse engine, rules kept."""

    def __init__(self, f: Callable[..., Any], args: tuple[Any, ...], out: Any) -> None:
        """`args`: copies of the primals taken before `f` ran (it may write into them)."""
        self.pullback = Pullback(f)
        self.args = args
        self.out = out
        self.fname = _name(f)

    def __call__(self, ct: Any) -> tuple[Any, ...]:
        value, grads = self.pullback(ct, *self.args)
        if not _same_values(value, self.out):
            raise TracingError(
                f"vjp_fn: {self.fname} returned a different value when it ran again on the "
                "same arguments (random numbers, or state changed between calls), so its "
                "pullback would not belong to the value vjp returned. Fix: make the function "
                "deterministic (pass random draws in as arguments)."
            )
        return tuple(
            zeros_like_value(a) if isinstance(g, NoTangent) else g
            for a, g in zip(self.args, grads, strict=True)
        )


def _copy_array(x: Any) -> Any:
    return x.copy() if isinstance(x, np.ndarray) else x


def _exact_copy(x: Any) -> Any:
    """A copy of an array in its own memory layout (strides, negative ones too)."""
    if not isinstance(x, np.ndarray):
        return x
    y = zeros_like_exact(x)
    y[...] = x
    return y


#: How far a rerun's output may be from the first, relative to the output's largest
#: magnitude: 1e-9, or 1,000 units in the last place of a lower precision (float32:
#: 1.2e-4). The traced rerun reads copies of the arguments, in another memory layout than
#: the caller's, and NumPy's SIMD and strided loops round differently in the last bit
#: (seen: 5.6e-17 in float64 exp, one float32 ulp in cumprod); a nested rule and the
#: reverse engine's may round differently too. Random draws or changed state differ by
#: far more.
_RERUN_RTOL = 1e-9
_RERUN_ULPS = 1000


def _same_values(a: Any, b: Any) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_values(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_values(a[k], b[k]) for k in a)
    try:
        pa, pb = np.asarray(a), np.asarray(b)
        if pa.shape != pb.shape:
            return False
        if pa.dtype.kind not in "fc" or pa.size == 0:
            return bool(np.array_equal(pa, pb, equal_nan=True))
        with np.errstate(invalid="ignore", over="ignore"):
            off = np.where(pa == pb, 0.0, np.abs(pa - pb))  # (equal infinities: 0)
            scale = np.max(np.abs(pb), initial=0.0, where=np.isfinite(pb))
            same_nan = np.array_equal(np.isnan(pa), np.isnan(pb))
            off = np.where(np.isnan(pa) & np.isnan(pb), 0.0, off)
            rtol = max(_RERUN_RTOL, _RERUN_ULPS * float(np.finfo(pa.dtype).eps))
            return bool(same_nan and np.max(off) <= rtol * scale)
    except TypeError:
        return a is b or bool(a == b)


def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """`(f(*primals), vjp_fn)` (JAX's `jax.vjp`; with `has_aux`, `(out, vjp_fn, aux)`).

    `vjp_fn(ct)` returns one cotangent per primal, `(x̄₀, x̄₁, ...)`; it can be called any
    number of times. At the outermost level each call runs the reverse engine again (its
    rules kept between calls, checked to reproduce the same output); inside another
    transformation the recorded pullbacks run again.
    """
    fn: Any
    if nesting():
        value, fn, aux = nested_vjp(f, primals, has_aux)
    else:
        # (the primals as f got them, in their layouts: f may write into its arguments,
        # and a reshape copies or not by layout)
        kept = tuple(map_leaves(_exact_copy, a) for a in primals)
        if has_aux:
            value, aux = f(*primals)

            def main(*a: Any) -> Any:
                return f(*a)[0]

            fn = _EngineVJP(main, kept, value)
        else:
            value, aux = f(*primals), None
            fn = _EngineVJP(f, kept, value)
        value = map_leaves(_copy_array, value)
    return (value, fn, aux) if has_aux else (value, fn)


def _partial(f: Callable[..., Any], args: tuple[Any, ...], nums: tuple[int, ...]) -> Any:
    """`f` as a function of the arguments in `nums` only (the others fixed)."""

    def g(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(nums, xs, strict=True):
            full[i] = x
        return f(*full)

    return g


def jacfwd(f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Any:
    """The Jacobian of `f` by forward mode, one `jvp` per input element (JAX's `jacfwd`):
    shape `output.shape + input.shape`; a tuple `argnums` gives a tuple of Jacobians, and
    an output pytree (tuple, list, dict) a pytree of them."""

    def jacobian(*args: Any) -> Any:
        nums = _argnums(argnums, len(args), _name(f))
        check_float_leaves(args, nums, _name(f))
        g = _partial(f, args, nums)
        xs = tuple(args[j] for j in nums)
        passes = [
            [jvp_values(g, xs, tuple(e if j == k else None for j in range(len(nums))), has_aux)
             for e in tree_basis(args[i])]
            for k, i in enumerate(nums)
        ]  # fmt: skip
        first = next((p[0] for p in passes if p), None)  # (out, tangent, aux) of one pass
        out, _, aux = first or jvp_values(g, xs, (None,) * len(nums), has_aux)
        tangents = [[tree_leaves(p[1]) for p in ps] for ps in passes]

        def columns(m: int, k: int) -> list[Any]:
            return [t[m] for t in tangents[k]]

        res = jacobian_tree(out, args, nums, argnums, columns, rows=False)
        return (res, aux) if has_aux else res

    return jacobian


def jacrev(f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Any:
    """The Jacobian of `f` by reverse mode, one pullback per output element (JAX's
    `jacrev`): shape `output.shape + input.shape`; a tuple `argnums` gives a tuple, and an
    output pytree (tuple, list, dict) a pytree of them."""

    def jacobian(*args: Any) -> Any:
        nums = _argnums(argnums, len(args), _name(f))
        check_float_leaves(args, nums, _name(f))
        g = _partial(f, args, nums)
        res = vjp(g, *(args[i] for i in nums), has_aux=has_aux)
        out, fn = res[0], res[1]
        leaves = tree_leaves(out)
        zeros = [zeros_like_value(o) if inexact(o) else None for o in leaves]

        pulled: dict[int, list[Any]] = {}  # per output leaf: a pullback per element

        def rows(m: int, k: int) -> list[Any]:
            if m not in pulled:
                cts = [
                    tree_rebuild(out, [*zeros[:m], e, *zeros[m + 1 :]])
                    for e in unit_basis(leaves[m])
                ]
                pulled[m] = [fn(ct) for ct in cts]
            return [r[k] for r in pulled[m]]

        j = jacobian_tree(out, args, nums, argnums, rows, rows=True)
        return (j, res[2]) if has_aux else j

    return jacobian


def hessian(f: Callable[..., Any], argnums: int | Sequence[int] = 0,
            mode: str = "forward-over-reverse") -> Any:  # fmt: skip
    """The Hessian of scalar `f`: shape `input.shape + input.shape` (JAX's `hessian`).

    `mode`: "forward-over-reverse" (default: `jacfwd(jacrev(f))`), "reverse-over-reverse"
    (`jacrev(jacrev(f))`) or "reverse-over-forward" (`jacrev(jacfwd(f))`).
    """
    _check_mode(mode)
    if mode == "forward-over-reverse":
        return jacfwd(jacrev(f, argnums), argnums)
    if mode == "reverse-over-reverse":
        return jacrev(jacrev(f, argnums), argnums)
    return jacrev(jacfwd(f, argnums), argnums)


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")


def hvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        mode: str = "forward-over-reverse") -> tuple[Any, Any]:  # fmt: skip
    """`(∇f, ∇²f·v)` at `primals` along `tangents` (tuples, one per argument of `f`).

    Forward over reverse by default (`jvp(grad(f), primals, tangents)`: one pass, the
    cost of a few gradients); `mode="reverse-over-reverse"` differentiates ⟨∇f, v⟩ by
    reverse mode. With one primal, `∇f` and `∇²f·v` are arrays; with several, tuples.
    """
    _check_mode(mode)
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("rulekit.hvp(f, primals, tangents): primals and tangents are tuples")
    nums = tuple(range(len(primals)))
    single = len(primals) == 1
    g = grad(f, argnums=0 if single else nums)
    if mode == "forward-over-reverse":
        return jvp(g, primals, tangents)
    if mode == "reverse-over-reverse":

        def inner(*xs: Any) -> Any:
            gs = g(*xs)
            gs = (gs,) if single else gs
            return sum(np.sum(np.real(np.conj(v) * d)) for d, v in zip(gs, tangents, strict=True))

        vg = grad(inner, argnums=0 if single else nums)
        return g(*primals), vg(*primals)

    def directional(*xs: Any) -> Any:
        return jvp(f, xs, tangents)[1]

    vg2 = grad(directional, argnums=0 if single else nums)
    return g(*primals), vg2(*primals)


def elementwise_grad(f: Callable[..., Any], argnum: int = 0) -> Callable[..., Any]:
    """autograd's `elementwise_grad`: the gradient of `sum(f(x))`, i.e. the vector-Jacobian
    product with ones (the derivative of each output element, for elementwise `f`)."""

    def egrad(*args: Any) -> Any:
        g = _partial(f, args, (argnum,))
        out, fn = vjp(g, args[argnum])
        return fn(map_leaves(lambda o: np.ones(np.shape(plain(o)), np.result_type(plain(o))),
                             out))[0]  # fmt: skip

    return egrad


def _fresh_scalar(v: Any) -> Any:
    """A new scalar object of `v`'s value and type (x·1.0: −0.0, NaN and a NumPy scalar's
    dtype kept; `+x` of a Python float is the very object, which reads as a write into it)."""
    return v * 1.0


def stop_gradient(x: Any) -> Any:
    """The value of `x` with no derivative, at every level (JAX's `lax.stop_gradient`,
    torch's `detach`): a new array, so later writes into `x` do not change it."""

    def stop(v: Any) -> Any:
        if isinstance(v, LevelValue):
            return stop(v.primal)
        if isinstance(v, Traced):  # (recorded: a compiled replay recomputes it)
            return _primal_call(v, _fresh_scalar if v.scalar else np.copy, (v,), {})
        return np.copy(v) if isinstance(v, np.ndarray) else v

    return map_leaves(stop, x)
