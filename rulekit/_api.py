"""The AD entry points: `value_and_grad`, `grad`, `value_and_pullback`, `build_rrule`."""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rulekit._codual import CoDual
from rulekit._engine._levels import nesting
from rulekit._engine._tape import Tape
from rulekit._engine._trace import Tracer, describe, is_active_leaf, output_codual, untrace
from rulekit._engine._traced import Traced
from rulekit._errors import TracingError, subclass_error
from rulekit._layout import exact_layout_possible, zeros_like_exact
from rulekit._tangents import NoFData, NoRData, zero_fdata, zero_rdata, zero_tangent

__all__ = [
    "DerivedRule",
    "ValueAndGrad",
    "build_rrule",
    "grad",
    "value_and_grad",
]

_NO_R = NoRData()
_NO_F = NoFData()


def _argnums(argnums: Any, nargs: int, fname: str) -> tuple[int, ...]:
    nums = (argnums,) if _is_int(argnums) else argnums
    if not isinstance(nums, (tuple, list)) or not nums or not all(_is_int(i) for i in nums):
        raise TypeError(f"argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    out = []
    for i in map(operator.index, nums):
        j = i + nargs if i < 0 else i
        if not 0 <= j < nargs:
            raise ValueError(
                f"argnums={argnums!r} refers to argument {i}, but {fname} was called with "
                f"{nargs} positional argument(s)."
            )
        out.append(j)
    if len(set(out)) != len(out):
        raise ValueError(f"argnums={argnums!r} names an argument twice")
    return tuple(out)


def _is_int(i: Any) -> bool:
    """An int argnum: Python or NumPy integers (JAX accepts both), not bools."""
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _check_differentiable(x: Any, where: str) -> None:
    if isinstance(x, Traced):
        raise TracingError(
            f"{where} is a value traced by an enclosing rulekit.value_and_grad, given to a "
            "rule-level trace (build_rrule, DerivedRule) that cannot differentiate it again. "
            "Fix: call rulekit.grad / rulekit.vjp inside the differentiated function instead: "
            "they nest (grad of grad, jacfwd of grad)."
        )
    if isinstance(x, np.ndarray) and type(x) is not np.ndarray:
        raise subclass_error(x, where)
    if is_active_leaf(x):
        return
    if isinstance(x, (tuple, list)):
        if not x:
            raise TypeError(f"{where} is an empty container: nothing to differentiate")
        for k, e in enumerate(x):
            _check_differentiable(e, f"{where}[{k}]")
        return
    if isinstance(x, dict):
        for k, e in x.items():
            _check_differentiable(e, f"{where}[{k!r}]")
        return
    what = f"an array of dtype {x.dtype}" if isinstance(x, np.ndarray) else type(x).__name__
    raise TypeError(
        f"{where} is {what}, which is not differentiable. Differentiate with respect to float "
        "or complex arrays and scalars (or tuples/lists/dicts of them); pass other values "
        "as constants (leave them out of argnums)."
    )


def _compiled_tracer(f: Callable[..., Any]) -> Any:
    """A `CompiledTracer` for `f`: compiled replay is imported on first use, so that
    `import rulekit` stays light."""
    from rulekit._engine._compiled import CompiledTracer

    return CompiledTracer(f)


class _GradBuffers:
    """Zeroed fdata for the active inputs: fresh per call, or reused (copy=False)."""

    def __init__(self, reuse: bool) -> None:
        self.reuse = reuse
        self.cache: dict[Any, np.ndarray] = {}

    def fdata(self, x: Any, key: Any) -> Any:
        if isinstance(x, np.ndarray):  # (fdata with x's strides: views of both pair up)
            if not self.reuse:
                return zeros_like_exact(x)
            buf = self.cache.get(key)
            if (
                buf is None
                or buf.strides != x.strides
                or buf.shape != x.shape
                or (buf.dtype != x.dtype)
            ):
                buf = self.cache[key] = zeros_like_exact(x)
            else:
                buf.fill(0)
            return buf
        if isinstance(x, tuple):
            fs = tuple(self.fdata(e, (key, i)) for i, e in enumerate(x))
            return _NO_F if all(isinstance(f, NoFData) for f in fs) else fs
        if isinstance(x, list):
            return [self.fdata(e, (key, i)) for i, e in enumerate(x)]
        if isinstance(x, dict):
            return {k: self.fdata(e, (key, k)) for k, e in x.items()}
        return _NO_F


def _gradient(x: Any, traced: Any, dx: Any, tape: Tape) -> Any:
    """The full cotangent of input `x` after the reverse pass."""
    if type(x) is np.ndarray:
        return dx
    if isinstance(traced, Traced):
        return tape.rdata[traced.slot] if traced.scalar else dx
    if isinstance(x, tuple):
        dxs = (None,) * len(x) if isinstance(dx, NoFData) else dx
        vals = [_gradient(e, t, d, tape) for e, t, d in zip(x, traced, dxs, strict=True)]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if isinstance(x, list):
        return [_gradient(e, t, d, tape) for e, t, d in zip(x, traced, dx, strict=True)]
    if isinstance(x, dict):
        return {k: _gradient(e, traced[k], dx[k], tape) for k, e in x.items()}
    return zero_tangent(x)


def _own_layout(x: Any) -> Any:
    """A differentiated array as f sees it: in the caller's layout, so that a reshape of it
    is a view or a copy exactly as in NumPy (which decides what a later in-place write
    changes). Only an array whose elements overlap (`np.broadcast_to`), whose strides no
    fdata can have, is copied."""
    if isinstance(x, np.ndarray) and not exact_layout_possible(x):
        return np.ascontiguousarray(x)
    return x


class ValueAndGrad:
    """`value_and_grad(f)`: a callable returning `(value, grads)`; keeps its rules per site.

    The rules built at each call position are reused on the next call when the
    signature there matches (rebuilt where it does not), so stateful rules warm
    up once. `copy=False` returns internal buffers (gradients, and an array
    value) that stay valid until the next call: with stateful rules, the
    steady state then allocates no numpy memory at all.
    """

    def __init__(
        self,
        f: Callable[..., Any],
        argnums: int | Sequence[int] = 0,
        has_aux: bool = False,
        copy: bool = True,
        compile: bool = False,
    ) -> None:
        if not callable(f):
            raise TypeError(f"value_and_grad expects a callable, got {f!r}")
        self.f = f
        self.argnums = argnums
        self.has_aux = has_aux
        self.copy = copy
        self.compile = compile
        self.tracer: Any = Tracer(f)
        if compile:
            compiled = _compiled_tracer(f)
            compiled.no_user_code_before_pullbacks()
            self.tracer = compiled
        self.buffers = _GradBuffers(reuse=not copy)
        self._value_buf: np.ndarray | None = None
        self._nums: dict[int, tuple[int, ...]] = {}  # argnums, normalised per number of args
        self.__wrapped__ = f
        self._fname = getattr(f, "__name__", repr(f))
        self._lock = threading.RLock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # One object, one set of rules and buffers: calls from several threads take turns.
        with self._lock:
            return self._call(args, kwargs)

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        fname = self._fname
        nums = self._nums.get(len(args))
        if nums is None:
            nums = self._nums[len(args)] = _argnums(self.argnums, len(args), fname)
        if nesting():  # inside another transformation: the differentiable (nested) mode
            from rulekit._nested import nested_value_and_grad  # (on first use: light import)

            value, aux, grads = nested_value_and_grad(
                self.f, args, kwargs, nums, self.has_aux, fname
            )
            res = grads[0] if _is_int(self.argnums) else grads
            return ((value, aux), res) if self.has_aux else (value, res)
        for i in nums:
            x = args[i]
            if not (type(x) is np.ndarray and x.dtype.kind in "fc"):  # (the common case)
                _check_differentiable(x, f"argument {i} of {fname}")

        def prepare(tape: Tape) -> tuple[list[Any], dict[str, Any], dict[int, Any]]:
            targs = list(args)
            dxs: dict[int, Any] = {}
            for i in nums:
                x = _own_layout(args[i])
                dxs[i] = self.buffers.fdata(x, i)
                targs[i] = self.tracer.wrap(x, dxs[i], tape)
            if not tape.tracking:
                return targs, kwargs, dxs
            track = self.tracer.track
            targs = [a if i in dxs else track(a, tape) for i, a in enumerate(targs)]
            return targs, {k: track(v, tape) for k, v in kwargs.items()}, dxs

        tracer = self.tracer
        if self.compile:
            keep: list[Any] = []
            key, arrays = tracer.key(args, kwargs, nums, keep)
            out, tape, (targs, _, dxs) = tracer.run(key, arrays, keep, prepare)
        else:
            tape = tracer.new_tape()
            targs, _, dxs = prepare(tape)
            out = tracer.forward(targs, kwargs, tape)
        aux = None
        if self.has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                tape.unwind()
                raise TypeError(
                    f"has_aux=True: {fname} must return a pair (value, aux), got "
                    f"{describe(out)}. Return `value, aux`, or drop has_aux=True."
                )
            out, aux = out
            aux = untrace(aux)
        value = self._value(out, tape, fname)
        self.tracer.seed(out, self._one(out), tape)
        self.tracer.backward(tape)
        grads = tuple(_gradient(args[i], targs[i], dxs[i], tape) for i in nums)
        result = grads[0] if _is_int(self.argnums) else grads
        return ((value, aux), result) if self.has_aux else (value, result)

    def __deepcopy__(self, memo: dict[int, Any]) -> ValueAndGrad:
        """A new object with the same function and options, and its own (fresh) rules,
        buffers and traces: they hold pooled state a copy must not share or duplicate."""
        return ValueAndGrad(
            self.f, self.argnums, has_aux=self.has_aux, copy=self.copy, compile=self.compile
        )

    def __copy__(self) -> ValueAndGrad:
        """As `__deepcopy__`."""
        return self.__deepcopy__({})

    def _value(self, out: Any, tape: Tape, fname: str) -> Any:
        x = out.cd.x if isinstance(out, Traced) else out
        if not (
            isinstance(x, (float, int, np.floating, np.integer))
            or (isinstance(x, np.ndarray) and x.shape == () and x.dtype.kind in "fiu")
        ):
            tape.unwind()
            raise TypeError(
                f"{fname} must return a real scalar to take its gradient, got {describe(out)}. "
                "For non-scalar outputs use rulekit.value_and_pullback(f, dy, *args); for a "
                "complex value, differentiate a real function of it (np.abs(v)**2, v.real)."
            )
        if isinstance(x, np.ndarray):
            if self.copy:
                return x.copy()
            if self._value_buf is None or self._value_buf.dtype != x.dtype:
                self._value_buf = np.empty((), x.dtype)
            np.copyto(self._value_buf, x)
            return self._value_buf
        return x

    @staticmethod
    def _one(out: Any) -> Any:
        if not isinstance(out, Traced):
            return _NO_R
        return type(out.cd.x)(1) if out.scalar else 1.0


def value_and_grad(
    f: Callable[..., Any],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    copy: bool = True,
    compile: bool = False,
) -> ValueAndGrad:
    """Return a callable computing `(f(*args), ∇f)` w.r.t. the arguments in `argnums`.

    JAX conventions: an int `argnums` gives one gradient, a tuple gives a tuple;
    `has_aux=True` expects `f` to return `(value, aux)` and returns
    `((value, aux), grads)`. Gradients have the structure of their argument.
    `compile=True` records the trace on the first call and replays it on later calls
    while its guards hold (docs/compiled-replay.md).
    """
    return ValueAndGrad(f, argnums=argnums, has_aux=has_aux, copy=copy, compile=compile)


def grad(
    f: Callable[..., Any],
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    compile: bool = False,
) -> Callable[..., Any]:
    """Return a callable computing only the gradient of scalar-valued `f`
    (`has_aux=True`: `f` returns `(value, aux)` and the callable `(grads, aux)`, as JAX's)."""
    vg = ValueAndGrad(f, argnums=argnums, has_aux=has_aux, compile=compile)

    def gradient(*args: Any, **kwargs: Any) -> Any:
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    gradient.__wrapped__ = f  # type: ignore[attr-defined]
    return gradient


def _differentiable(x: Any) -> bool:
    """Whether `x` is differentiable; subclasses and traced values still raise (refused)."""
    try:
        _check_differentiable(x, "")
    except TracingError:
        raise
    except TypeError:
        return False
    return True


class DerivedRule:
    """A rule derived by tracing a function (`build_rrule`): callable like any rule.

    Calling it with CoDuals runs the function on traced values whose fdata is
    the caller's; the pullback runs the recorded tape backwards. Rules at each
    call position are kept and reused, as in `value_and_grad`.
    """

    def __init__(self, f: Callable[..., Any], compile: bool = False) -> None:
        self.f = f
        self.compile = compile
        self.tracer: Any = _compiled_tracer(f) if compile else Tracer(f)

    def __call__(self, fc: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        tracer = self.tracer

        def prepare(tape: Tape) -> tuple[list[Any], dict[str, Any]]:
            if not tape.tracking:
                return [tracer.wrap(a.x, a.dx, tape) for a in args], kwargs
            track = tracer.track
            targs = [
                track(a.x, tape) if a.dx is None else tracer.wrap(a.x, a.dx, tape) for a in args
            ]
            return targs, {k: track(v, tape) for k, v in kwargs.items()}

        if self.compile:
            keep: list[Any] = []
            nums = tuple(i for i, a in enumerate(args) if a.dx is not None)
            key, arrays = tracer.key(tuple(a.x for a in args), kwargs, nums, keep)
            out, tape, (targs, _) = tracer.run(key, arrays, keep, prepare)
        else:
            tape = tracer.new_tape()
            targs, _ = prepare(tape)
            out = tracer.forward(targs, kwargs, tape)
        y = output_codual(out)

        def derived_pullback(dy: Any) -> tuple[Any, ...]:
            tracer.seed(out, dy, tape)
            tracer.backward(tape)
            return (
                _NO_R,
                *(tracer.input_rdata(t, tape, a.dx) for t, a in zip(targs, args, strict=True)),
            )

        return y, derived_pullback

    def __deepcopy__(self, memo: dict[int, Any]) -> DerivedRule:
        """An independent derived rule of the same function, with its own (fresh) rules.

        The cached rules of this one hold buffers and a tracer, which are not copied: a
        copy that shared or duplicated them mid-use could restore stale state."""
        return DerivedRule(self.f, compile=self.compile)

    def __copy__(self) -> DerivedRule:
        """As `__deepcopy__`: a derived rule has no state a copy could share safely."""
        return DerivedRule(self.f, compile=self.compile)

    def __repr__(self) -> str:
        return f"DerivedRule({getattr(self.f, '__qualname__', self.f)})"


def build_rrule(f: Callable[..., Any], *example_args: Any) -> DerivedRule:
    """Derive a rule for `f` by tracing it; usable as the registered rule of another function.

    `example_args` are checked for being traceable (and the trace warmed up once
    on them, so the first real call reuses its rules).
    """
    rule = DerivedRule(f)
    if example_args:
        cds = [CoDual(a, zero_fdata(a) if _differentiable(a) else None) for a in example_args]
        y, pb = rule(CoDual(f, _NO_F), *cds)
        pb(_NO_R if isinstance(y.dx, np.ndarray) else zero_rdata(y.x))
    return rule
