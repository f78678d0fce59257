"""Elementwise functions declared once, by their partial derivatives.

    rulekit.elementwise(np.tanh, lambda x, y: 1 - y * y)
    rulekit.elementwise(np.arctan2, lambda a, b, y: b / (a * a + b * b),
                                    lambda a, b, y: -a / (a * a + b * b))

Each partial `∂ᵢf(x₁, …, xₙ, y)` is written from the operands and the output
`y = f(x₁, …, xₙ)` with numpy functions (`np.cos(x)`, not `math.cos(x)`), so the
same function evaluates on arrays, on numpy and Python scalars, and inside a
numba kernel. The declaration registers the plain reverse rule

    x̄ᵢ += unbroadcast(conj(∂ᵢf)·ȳ)      (the real part for a real xᵢ)

for every operand that is active (its `dx` is not None) and differentiable
(float/complex; integer and bool operands are constants), and keeps the partials
so that fast paths derive from them instead of repeating the math:
`Elementwise.scalar_partials()` (Python-float variants for real-scalar rules) and the
numba loop kernels that bundled rules generate from `derivs` (rules.numpy.ufuncs._kernels;
generated modules find their declaration by `Elementwise.key` through `declaration`).
rulekit never imports numba itself.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any, Union

import numpy as np

from rulekit._codual import CoDual
from rulekit._cotangents import accumulate, differentiable, unbroadcast
from rulekit._declared_rules import elementwise_frule, elementwise_vjp, register_both
from rulekit._example import example
from rulekit._patterns import Array
from rulekit._registry import registry
from rulekit._tangent_types import NoFData, NoRData
from rulekit._tangents import zero_fdata

__all__ = [
    "Elementwise",
    "accumulate",
    "declaration",
    "declaring_module",
    "differentiable",
    "elementwise",
    "operand_pattern",
    "unbroadcast",
]

_nd = np.ndarray
_NO_F, _NO_R = NoFData(), NoRData()
Partial = Callable[..., Any]

#: every declaration, by `Elementwise.key` (generated kernel modules find theirs here)
_DECLARED: dict[str, Elementwise] = {}

#: ufunc keywords that do not change which elements are computed (dtype= casts first)
_PASSED_KWARGS = frozenset({"dtype", "casting", "order", "subok"})

_REAL_LOOPS = {"e": (np.float16,), "f": (np.float32,), "d": (np.float64,), "g": (np.longdouble,)}
_COMPLEX_LOOPS = {"F": (np.complex64,), "D": (np.complex128,)}
#: integer and bool operands: constants of a float computation
_CONSTANTS = [int, bool, np.integer, np.bool_, Array[np.integer], Array[np.bool_]]


def declaration(key: str) -> Elementwise:
    """The declaration registered under `key` (`module:name`), importing its module if needed."""
    d = _DECLARED.get(key)
    if d is None:
        __import__(key.split(":")[0])
        d = _DECLARED[key]
    return d


def _caller_module(depth: int) -> str:
    return str(sys._getframe(depth + 1).f_globals.get("__name__", "?"))


def declaring_module() -> str:
    """`__name__` of the module whose top-level code is running: the module a helper that
    declares rules for it (`module=`) should name, wherever the helper itself lives."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if frame.f_code.co_name == "<module>" and isinstance(name, str):
            return name
        frame = frame.f_back
    return "?"


def operand_pattern(fn: Any, holomorphic: bool = False, const: bool = False) -> Any:
    """The pattern of a differentiable operand of ufunc `fn`: arrays and numpy scalars of
    its own floating loop types (and complex ones if `holomorphic`), Python float (and
    complex); with `const`, integer and bool constants too."""
    chars = {t.split("->")[0][0] for t in fn.types}
    table = {**_REAL_LOOPS, **(_COMPLEX_LOOPS if holomorphic else {})}
    if "e" in table and "e" not in chars and "f" in chars:
        chars.add("e")  # float16 runs (exactly) in the float32 loop
    ts = [t for c, tt in table.items() if c in chars for t in tt]
    parts: list[Any] = [*(Array[t] for t in ts), *ts, float]
    if holomorphic:
        parts.append(complex)
    if const:
        parts += _CONSTANTS
    return Union[tuple(parts)]


class Elementwise:
    """The declaration of an elementwise `fn` by its partials (see the module docstring).

    `rule` is the plain reverse rule (registered by `elementwise`, or by `register`);
    `derivs` the declared partials; `holomorphic`: complex operands are differentiated
    (x̄ = conj(∂f)·ȳ); `quiet`: the partials are evaluated with numpy's divide, invalid
    and overflow warnings off (a derivative infinite where f is finite: √x at 0).
    """

    def __init__(
        self,
        fn: Any,
        derivs: Sequence[Partial],
        *,
        holomorphic: bool,
        quiet: bool,
        module: str,
        name: str | None = None,
        doc: str | None = None,
        fast_constants: Sequence[float] = (),
    ) -> None:
        self.fn, self.derivs, self.nargs = fn, tuple(derivs), len(derivs)
        self.holomorphic, self.quiet, self.module = holomorphic, quiet, module
        self.name = name or fn.__name__
        self.key = key = f"{module}:{self.name}"
        n = 1
        while key in _DECLARED and _DECLARED[key].fn is not fn:  # (two `<lambda>`s, say)
            n += 1
            key = self.key = f"{module}:{self.name}#{n}"
        self.fast_constants = tuple(fast_constants)
        self.doc = doc or f"y = {self.name}(...) ⇒ x̄ᵢ += conj(∂ᵢ{self.name})·ȳ"
        self.rule = self._make_rule()
        #: the forward rule and differentiable pullback derived from `derivs` (at `register`)
        self.forward: Any = None
        self.vjp: Any = None
        self.kernels: Any = None  # (set by the rules that generate kernels from `derivs`)
        self._scalar: Any = None
        _DECLARED[self.key] = self

    def __repr__(self) -> str:
        return f"rulekit.elementwise({self.name}, {self.nargs} partial(s))"

    # -- registration ----------------------------------------------------------------------

    def register(self, *patterns: Any, examples: Any = None, module: str | None = None) -> Any:
        """Register the plain rule for calls of `fn` matching `patterns`; returns the rule."""
        if len(patterns) != self.nargs:
            raise TypeError(
                f"{self.name} takes {self.nargs} operand(s), got {len(patterns)} patterns"
            )
        mod = module if module is not None else _caller_module(1)
        registry.add("rrule", self.fn, patterns, self.rule, examples=examples, module=mod)
        self.register_forward(*patterns, examples=examples, module=mod)
        return self.rule

    def register_forward(self, *patterns: Any, examples: Any = None, module: str = "?") -> None:
        """Register the forward rule and the differentiable pullback derived from the
        partials (`rulekit._declared_rules`) for `patterns` (`register` does, with the
        reverse rule; call it when the reverse rule is registered by other means)."""
        if self.forward is None:
            self.forward, self.vjp = elementwise_frule(self), elementwise_vjp(self)
        register_both(self.fn, patterns, self.forward, self.vjp, examples, module)

    # -- evaluating the partials -------------------------------------------------------------

    def partials(self, xs: Sequence[Any], y: Any, need: Sequence[bool]) -> list[Any]:
        """[∂ᵢf(*xs, y) if need[i] else None]: elementwise, broadcastable to y."""
        if self.quiet:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return [d(*xs, y) if k else None for d, k in zip(self.derivs, need, strict=True)]
        return [d(*xs, y) if k else None for d, k in zip(self.derivs, need, strict=True)]

    def cotangents(self, xs: Sequence[Any], y: Any, g: Any, need: Sequence[bool]) -> list[Any]:
        """[conj(∂ᵢf)·ȳ if need[i] else None], in y's shape (before unbroadcasting)."""
        out: list[Any] = []
        for d in self.partials(xs, y, need):
            if d is None:
                out.append(None)
            elif type(d) is not _nd and type(d) in (int, float) and d == 1:
                out.append(g)
            else:
                if np.iscomplexobj(d):
                    d = np.conjugate(d)
                out.append(np.multiply(d, g))
        return out

    # -- the plain rule ----------------------------------------------------------------------

    def _make_rule(self) -> Callable[..., Any]:
        fn, n = self.fn, self.nargs
        nothing = (_NO_R,) * (n + 1)
        none_pullback = lambda dy: nothing  # noqa: E731

        def rule(f: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
            xs = [a.x for a in args]
            if kw:
                kw, xs = self._keywords(kw, xs)
            y = fn(*xs, **kw)
            need = [differentiable(a) for a in args]
            if type(y) is _nd:
                if y.dtype.kind not in "fc":
                    return CoDual(y, _NO_F), none_pullback
                g = zero_fdata(y)
                if not any(need):
                    return CoDual(y, g), none_pullback
                xe = [_numpy_scalar(v, y.dtype) for v in xs]

                def elementwise_pullback(dy: Any) -> tuple[Any, ...]:
                    cts = self.cotangents(xe, y, g, need)
                    return (_NO_R, *map(accumulate, args, cts))

                return CoDual(y, g), elementwise_pullback
            if not any(need) or not isinstance(y, (np.inexact, float, complex)):
                return CoDual(y, _NO_F), none_pullback

            def elementwise_scalar_pullback(dy: Any) -> tuple[Any, ...]:
                return self.scalar_pullback(args, xs, y, dy, need)

            return CoDual(y, _NO_F), elementwise_scalar_pullback

        rule.__name__ = rule.__qualname__ = f"{self.name}_rrule"
        rule.__doc__ = self.doc
        return rule

    def scalar_pullback(
        self, args: Sequence[Any], xs: Sequence[Any], y: Any, dy: Any, need: Sequence[bool]
    ) -> tuple[Any, ...]:
        """The plain rule's pullback for a scalar output `y` of operands `xs` (the primals
        of CoDuals `args`, after any dtype= cast), given its cotangent `dy` (rdata)."""
        if isinstance(dy, NoRData):
            return (_NO_R, *(accumulate(a, None) for a in args))
        one = (1,)  # (1-element arrays: numpy's array arithmetic and warnings)
        x1 = [np.reshape(v, one) for v in xs]
        cts = self.cotangents(x1, np.reshape(y, one), np.reshape(dy, one), need)
        return (_NO_R, *map(accumulate, args, cts))

    def _keywords(self, kw: dict[str, Any], xs: list[Any]) -> tuple[dict[str, Any], list[Any]]:
        """Refuse keywords that change which elements are computed; apply dtype= by casting
        the operands first (what numpy's loop does), so the partials see the cast values."""
        bad = sorted(set(kw) - _PASSED_KWARGS)
        if bad:
            hint = (
                f"Use np.where(mask, {self.name}(...), other) instead of where=."
                if "where" in bad
                else "Cast the inputs with .astype(...) before the call instead."
                if "signature" in bad
                else "Compute without them."
            )
            raise NotImplementedError(
                f"rulekit: {self.name}(..., {', '.join(k + '=...' for k in bad)}) on traced "
                f"values has no rule. {hint}"
            )
        if kw.get("dtype") is None:
            return kw, xs
        # numpy's own casting and loop errors (dtype=int on floats, np.sin(..., dtype=int)),
        # from a call on 0-d stand-ins of the operands' dtypes (Python numbers as they are)
        self.fn(*[v if isinstance(v, (int, float, complex)) else np.zeros((), v.dtype)
                  for v in xs], **kw)  # fmt: skip
        kw = dict(kw)
        d = np.dtype(kw.pop("dtype"))
        # (np.astype dispatches: an operand traced by an enclosing transformation stays so)
        return kw, [d.type(v) if isinstance(v, (int, float, complex)) else np.astype(v, d)
                    for v in xs]  # fmt: skip

    # -- fast paths ---------------------------------------------------------------------------

    def scalar_partials(self) -> tuple[Partial, ...]:
        """The partials with `np` bound to `math` where math has the same function (sin,
        cos, ...): for Python floats, without numpy's per-call overhead. They may raise
        (ZeroDivisionError, ValueError, OverflowError) where numpy would warn: a fast path
        then hands the call to `rule`."""
        if self._scalar is None:
            self._scalar = tuple(_with_math(d) for d in self.derivs)
        return self._scalar


def elementwise(
    fn: Any,
    *derivs: Partial,
    holomorphic: bool = False,
    patterns: Sequence[Sequence[Any]] | None = None,
    examples: Any = None,
    domain: tuple[float, float] = (-2.0, 2.0),
    quiet: bool = False,
    name: str | None = None,
    doc: str | None = None,
    fast_constants: Sequence[float] = (),
    module: str | None = None,
) -> Elementwise:
    """Declare elementwise `fn` by one partial derivative per operand; register its rule.

    `derivs[i](x₁, …, xₙ, y)` is ∂f/∂xᵢ, written with numpy functions (see the module
    docstring). Options:

    * `holomorphic`: also differentiate complex operands (x̄ = conj(∂f)·ȳ); else real only.
    * `patterns`: the registrations, a sequence of per-operand pattern tuples; default for
      a ufunc: its own floating loop types (and, for n ≥ 2, integer/bool constants) for
      every operand; `()` registers nothing (call `Elementwise.register` yourself).
    * `examples`: the conformance kit's call examples (as `rulekit.rrule.register`'s);
      default: float64, float32, scalar (and complex) operands drawn from `domain`.
    * `quiet`: no numpy warnings while evaluating the partials (a derivative that is
      infinite where `fn` is finite, √x at 0, arcsin at ±1).
    * `fast_constants`: scalar operand values the numba kernels specialise (`x ** 2`).
    * `module`: the declaring module the registry records (default: the caller's).
    """
    if not derivs:
        raise TypeError("rulekit.elementwise needs one partial derivative per operand")
    module = module or _caller_module(1)
    decl = Elementwise(
        fn, derivs, holomorphic=holomorphic, quiet=quiet, module=module, name=name, doc=doc,
        fast_constants=fast_constants,
    )  # fmt: skip
    if patterns is None:
        if not isinstance(fn, np.ufunc):
            raise TypeError(f"{decl.name} is not a ufunc: pass patterns=[(pattern, ...)]")
        p = operand_pattern(fn, holomorphic, const=decl.nargs > 1)
        patterns = [(p,) * decl.nargs]
    if examples is None:
        examples = default_examples(decl.nargs, domain, holomorphic)
    for ps in patterns:
        decl.register(*ps, examples=examples, module=module)
    return decl


def default_examples(n: int, domain: tuple[float, float], cplx: bool) -> Callable[[], list[Any]]:
    """Examples of n operands drawn from `domain`: float64 (3, 4) arrays, float32 (4,)
    arrays, a (3, 4) array with a broadcast (4,) row, Python floats, and complex (3,) arrays."""
    lo, hi = domain

    def make() -> list[Any]:
        r = np.random.default_rng(n)

        def u(*s: int) -> Any:
            return r.uniform(lo, hi, size=s)

        ex = [
            example(*(u(3, 4) for _ in range(n))),
            example(*(u(4).astype(np.float32) for _ in range(n))),
            example(*(float(u()) for _ in range(n))),
        ]
        if n > 1:
            ex.append(example(u(3, 4), *(u(4) for _ in range(n - 1))))
        if cplx:
            ex.append(example(*(u(3) + 0.1j * (hi - lo) * r.uniform(-1, 1, 3) for _ in range(n))))
        return ex

    return make


def _numpy_scalar(v: Any, dtype: np.dtype) -> Any:
    """A Python float/complex operand as a numpy scalar of the output's precision (numpy's
    weak-scalar rule), so that its partials divide by 0 as numpy does, with a warning."""
    t = type(v)
    if t is float:
        return np.dtype(dtype.char.lower()).type(v) if dtype.kind == "c" else dtype.type(v)
    if t is complex:
        return dtype.type(v) if dtype.kind == "c" else np.complex128(v)
    return v


# -- Python-float variants of the partials -------------------------------------------------------

#: numpy functions whose float64 results are math's, to the bit (checked on 2·10⁵ inputs;
#: not exp, log, tanh, ...: numpy's own SIMD versions differ from libm's in the last bit)
_MATH_NAMES = ("sin", "cos", "sqrt")


class _MathNumpy(types.ModuleType):
    """`np` for a partial evaluated on Python floats: math's sin, cos and sqrt, else numpy's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


_MATH_NP = _MathNumpy("numpy_on_floats")
for _name in _MATH_NAMES:
    setattr(_MATH_NP, _name, getattr(math, _name))


def _with_math(d: Partial) -> Partial:
    """`d` with its global `np` bound to `_MATH_NP` (a copy of its globals, taken now)."""
    if not isinstance(d, types.FunctionType) or d.__globals__.get("np") is not np:
        return d
    g = dict(d.__globals__)
    g["np"] = _MATH_NP
    f = types.FunctionType(d.__code__, g, d.__name__, d.__defaults__, d.__closure__)
    f.__kwdefaults__ = d.__kwdefaults__
    return f
