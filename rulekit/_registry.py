"""The dispatch registry: call signatures → rules and stateful-rule factories.

A registration says "for calls of `f` whose arguments match these patterns,
use this rule" (`rrule.register`) or "... build a rule object with this
factory" (`build_primitive_rrule.register`). Dispatch picks the most specific
matching registration; lookups are cached per concrete signature.
"""

from __future__ import annotations

import functools
import sys
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import numpy as np

from rulekit._codual import CoDual
from rulekit._errors import (
    AmbiguousRuleError,
    MissingRuleError,
    RuleRegistrationError,
    RuleRegistrationWarning,
)
from rulekit._patterns import (
    Pattern,
    VarargPattern,
    as_pattern,
    is_subpattern,
    matches,
    type_key,
)
from rulekit._primitive import Primitive

__all__ = [
    "Registration",
    "Registry",
    "Signature",
    "build_primitive_rrule",
    "is_primitive",
    "registry",
    "rrule",
    "signature_of",
]

Kind = Literal["rrule", "factory"]


def _ufunc_name(u: np.ufunc) -> str:
    if getattr(np, u.__name__, None) is u:
        return f"np.{u.__name__}"
    special = sys.modules.get("scipy.special")
    if special is not None and getattr(special, u.__name__, None) is u:
        return f"scipy.special.{u.__name__}"
    return u.__name__


def function_name(f: Any) -> str:
    """A readable name for a function: `np.sin`, `np.add.reduce`, `scipy.special.erf`, `mod.f`."""
    if isinstance(f, np.ufunc):
        return _ufunc_name(f)
    owner = getattr(f, "__self__", None)
    if isinstance(owner, np.ufunc):
        return f"{_ufunc_name(owner)}.{f.__name__}"
    if type(owner).__module__.startswith("scipy.stats"):  # scipy.stats.norm.pdf, ...
        dist = getattr(owner, "name", None) or type(owner).__name__.removesuffix("_gen")
        return f"scipy.stats.{dist}.{f.__name__}"
    wrapped = getattr(f, "fn", None)
    if wrapped is not None and type(f).__name__ == "Primitive":
        return function_name(wrapped)  # a rulekit.primitive wrapper: named as what it wraps
    if type(f).__name__ == "fortran":  # an f2py wrapper: scipy.linalg.blas / lapack
        return f"scipy.linalg.{f.__name__.split()[-1]}"
    name = getattr(f, "__qualname__", None) or getattr(f, "__name__", None)
    if name is None:
        return repr(f)
    module = getattr(f, "__module__", None) or ""
    if module == "numpy" or module.startswith("numpy."):
        module = "np" + module[len("numpy") :]
        if module.startswith(("np._core", "np.core", "np.lib._")):
            module = "np"
        elif module.startswith("np.linalg"):
            module = "np.linalg"
    elif module.startswith("scipy."):
        module = ".".join(p for p in module.split(".") if not p.startswith("_"))
    elif module == "_operator":
        module = "operator"
    return f"{module}.{name}" if module else name


def _key_repr(k: Any) -> str:
    if isinstance(k, tuple):
        return f"Array[np.{k[0].__name__}, {k[1]}]"
    return k.__qualname__ if isinstance(k, type) else repr(k)


class Signature(NamedTuple):
    """The concrete signature of a call: the function and each argument's type key.

    `args[i]` is `(dtype.type, ndim)` for an ndarray and `type(x)` otherwise;
    `out` is the type key of an `out=` array, or None.
    """

    f: Any
    args: tuple[Any, ...]
    out: Any = None

    def __repr__(self) -> str:
        parts = [_key_repr(k) for k in self.args]
        if self.out is not None:
            parts.append(f"out={_key_repr(self.out)}")
        return f"{function_name(self.f)}({', '.join(parts)})"


def _unwrap(x: Any) -> Any:
    return x.x if isinstance(x, CoDual) else x


def _out_value(kwargs: dict[str, Any]) -> Any:
    out = kwargs.get("out")
    if isinstance(out, tuple):
        if len(out) != 1:
            return None if all(o is None for o in out) else out
        out = out[0]
    return _unwrap(out)


def signature_of(f: Any, *args: Any, **kwargs: Any) -> Signature:
    """The concrete `Signature` of the call `f(*args, **kwargs)` (CoDuals are unwrapped)."""
    out = _out_value(kwargs)
    return Signature(
        _unwrap(f),
        tuple(type_key(_unwrap(a)) for a in args),
        None if out is None else type_key(out),
    )


@dataclass(eq=False)
class Registration:
    """One registered rule: what it matches, what it is, and who registered it."""

    f: Any
    patterns: tuple[Pattern, ...]
    out: Pattern | None
    impl: Callable[..., Any]
    kind: Kind
    module: str
    examples: Any = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def vararg(self) -> bool:
        return bool(self.patterns) and isinstance(self.patterns[-1], VarargPattern)

    def expand(self, n: int) -> tuple[Pattern, ...] | None:
        """The patterns for a call with `n` positional arguments, or None if arity differs."""
        ps = self.patterns
        if self.vararg:
            fixed = ps[:-1]
            if n < len(fixed):
                return None
            element = ps[-1].element  # type: ignore[union-attr]
            return fixed + (element,) * (n - len(fixed))
        return ps if len(ps) == n else None

    def matches(self, sig: Signature) -> bool:
        ps = self.expand(len(sig.args))
        if ps is None:
            return False
        if (self.out is None) != (sig.out is None):
            return False
        if self.out is not None and not matches(self.out, sig.out):
            return False
        return all(matches(p, k) for p, k in zip(ps, sig.args, strict=True))

    def covers(self, other: Registration, n: int) -> bool:
        """Whether `other` is at least as specific as `self` for calls of arity `n`."""
        mine, theirs = self.expand(n), other.expand(n)
        assert mine is not None and theirs is not None
        if (
            self.out is not None
            and other.out is not None
            and not is_subpattern(other.out, self.out)
        ):
            return False
        return all(is_subpattern(q, p) for p, q in zip(mine, theirs, strict=True))

    def describe(self) -> str:
        parts = [repr(p) for p in self.patterns]
        if self.out is not None:
            parts.append(f"out={self.out!r}")
        what = "build_primitive_rrule" if self.kind == "factory" else "rrule"
        impl = getattr(self.impl, "__qualname__", repr(self.impl))
        return (
            f"{function_name(self.f)}({', '.join(parts)}) -> {what} {impl} "
            f"[registered by {self.module}]"
        )

    __repr__ = describe


def _beats(a: Registration, b: Registration, n: int) -> bool:
    """Whether `a` is preferred over `b` for a call of arity `n` that both match."""
    a_in_b, b_in_a = b.covers(a, n), a.covers(b, n)
    if a_in_b and not b_in_a:
        return True
    if a_in_b and b_in_a:  # equivalent patterns: factory beats rrule, fixed beats vararg
        if a.kind != b.kind:
            return a.kind == "factory"
        if a.vararg != b.vararg:
            return not a.vararg
    return False


def _importing_module() -> str | None:
    """`__name__` of the innermost module whose top-level code is running (being imported).

    A rule registered through a helper of another module belongs to the package
    whose import called the helper: `rulekit check PKG` finds it by this.
    """
    frame: Any = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            name = frame.f_globals.get("__name__")
            return name if isinstance(name, str) else None
        frame = frame.f_back
    return None


def _unreachable(f: Any) -> bool:
    """Whether traced calls of `f` can never reach a rule registered for it.

    The engine sees ufuncs (and their methods), numpy functions dispatched through
    `__array_function__`, `rulekit.primitive` wrappers, and the builtins it calls
    itself (operator.getitem, ...). A plain Python function is none of those.
    """
    if isinstance(f, (Primitive, np.ufunc)) or hasattr(f, "_implementation"):
        return False
    return isinstance(f, (types.FunctionType, types.MethodType, functools.partial))


def _caller_module(depth: int) -> str:
    try:
        return str(sys._getframe(depth + 1).f_globals.get("__name__", "?"))
    except ValueError:
        return "?"


def _fkey(f: Any) -> Any:
    try:
        hash(f)
    except TypeError:
        return ("id", id(f))
    return f


_ndarray = np.ndarray


def _flat(key: list[Any], x: Any) -> None:
    t = type(x)
    if t is not _ndarray:
        key.append(t)  # a subclass of ndarray is then followed by its dtype and ndim
        if not issubclass(t, _ndarray):
            return
    key.append(x.dtype)
    key.append(x.ndim)


def fast_key(f: Any, args: Sequence[Any], out: Any = None) -> tuple[Any, ...]:
    """A cheap hashable key for a call on primal values (the hot path of dispatch).

    It identifies the concrete signature as one flat tuple: an array contributes
    its dtype and ndim, any other value its type (a dtype is never a type, so the
    tuple reads back unambiguously). `out` is the `out=` array or None.
    """
    n = len(args)
    if n == 1 and out is None:
        a = args[0]
        if type(a) is _ndarray:
            return (f, a.dtype, a.ndim)
    elif n == 2 and out is None:  # the common cases, without building a list
        a, b = args
        ta, tb = type(a), type(b)
        if ta is _ndarray:
            if tb is _ndarray:
                return (f, a.dtype, a.ndim, b.dtype, b.ndim)
            if not issubclass(tb, _ndarray):
                return (f, a.dtype, a.ndim, tb)
        elif tb is _ndarray and not issubclass(ta, _ndarray):
            return (f, ta, b.dtype, b.ndim)
    key: list[Any] = [f]
    for x in args:
        _flat(key, x)
    if out is not None:
        key.append("out")
        _flat(key, out)
    return tuple(key)


class Registry:
    """The table of registrations, with a per-signature lookup cache."""

    def __init__(self) -> None:
        self._by_f: dict[Any, list[Registration]] = {}
        self._cache: dict[Any, Registration] = {}
        self._fast: dict[Any, tuple[Signature, Registration]] = {}

    # -- registration ------------------------------------------------------

    def add(
        self,
        kind: Kind,
        f: Any,
        patterns: Sequence[Any],
        impl: Callable[..., Any],
        *,
        out: Any = None,
        examples: Any = None,
        module: str = "?",
    ) -> Registration:
        if not callable(impl):
            raise RuleRegistrationError(
                f"the rule registered for {function_name(f)} must be callable, got {impl!r}"
            )
        if not callable(f):
            raise RuleRegistrationError(f"rules are registered for callables, got {f!r}")
        ps = tuple(as_pattern(p) for p in patterns)
        for i, p in enumerate(ps[:-1]):
            if isinstance(p, VarargPattern):
                raise RuleRegistrationError(
                    f"Vararg must be the last pattern (found at position {i} of "
                    f"{function_name(f)}{ps!r})"
                )
        out_p = None if out is None else as_pattern(out)
        if isinstance(out_p, VarargPattern):
            raise RuleRegistrationError("out= cannot be a Vararg pattern")
        reg = Registration(_unwrap(f), ps, out_p, impl, kind, module, examples)
        reg.meta["importing"] = _importing_module()  # (the kit finds a package's rules by it)
        entries = self._by_f.setdefault(_fkey(reg.f), [])
        # Re-registering the same patterns and kind replaces the earlier rule.
        entries[:] = [
            e for e in entries if not (e.kind == kind and e.patterns == ps and e.out == out_p)
        ]
        entries.append(reg)
        self._invalidate()
        return reg

    def _invalidate(self) -> None:
        self._cache.clear()
        self._fast.clear()

    # -- lookup ------------------------------------------------------------

    def lookup(self, sig: Signature) -> Registration:
        """The registration a call of signature `sig` dispatches to (or raise)."""
        try:
            return self._cache[sig]
        except KeyError:
            pass
        except TypeError:  # an unhashable function object
            return self._resolve(sig)
        reg = self._cache[sig] = self._resolve(sig)
        return reg

    def lookup_call(
        self, f: Any, args: Sequence[Any], out: Any = None
    ) -> tuple[Signature, Registration]:
        """`(signature, registration)` for a call on primal values: the cached hot path."""
        try:
            return self._fast[fast_key(f, args, out)]
        except KeyError:
            pass
        except TypeError:  # unhashable function object
            sig = Signature(f, tuple(map(type_key, args)), None if out is None else type_key(out))
            return sig, self._resolve(sig)
        sig = Signature(f, tuple(map(type_key, args)), None if out is None else type_key(out))
        hit = self._fast[fast_key(f, args, out)] = (sig, self.lookup(sig))
        return hit

    def find(self, sig: Signature) -> Registration | None:
        """Like `lookup`, but None when no rule matches (ambiguity still raises)."""
        try:
            return self.lookup(sig)
        except MissingRuleError:
            return None

    def _resolve(self, sig: Signature) -> Registration:
        entries = self._by_f.get(_fkey(sig.f), [])
        cands = [r for r in entries if r.matches(sig)]
        if not cands and isinstance(sig.f, Primitive):
            # `rulekit.primitive(fn)` also uses rules registered for `fn` itself.
            entries = entries + self._by_f.get(_fkey(sig.f.fn), [])
            cands = [r for r in entries if r.matches(sig)]
        if not cands:
            raise MissingRuleError(self._missing_message(sig, entries))
        n = len(sig.args)
        best = [r for r in cands if all(r is o or _beats(r, o, n) for o in cands)]
        if len(best) == 1:
            return best[0]
        undominated = [r for r in cands if not any(_beats(o, r, n) for o in cands)]
        a, b = undominated[:2]
        raise AmbiguousRuleError(
            f"{sig!r} matches two rules and neither is more specific:\n  {a.describe()}\n  "
            f"{b.describe()}\nRegister a rule for the more specific signature to resolve it."
        )

    @staticmethod
    def _missing_message(sig: Signature, entries: list[Registration]) -> str:
        name = function_name(sig.f)
        msg = f"no rule for {sig!r}."
        if entries:
            msg += (
                " Rules registered for "
                + name
                + ":\n"
                + "\n".join("  " + e.describe() for e in entries)
            )
        else:
            msg += f" No rule is registered for {name} at all."
        patterns = ", ".join(_key_repr(k) for k in sig.args)
        msg += (
            f"\nTo differentiate this call, register a rule:\n"
            f"  @rulekit.rrule.register({name}, {patterns})\n"
            f"  def my_rule(f, *args): ...  # returns (CoDual output, pullback)\n"
            "or import the module that registers it (e.g. `import rules`)."
        )
        return msg

    # -- introspection -----------------------------------------------------

    def entries(self, module: str | None = None) -> list[Registration]:
        """All registrations, or those made by `module` (and its submodules)."""
        out = [r for regs in self._by_f.values() for r in regs]
        if module is not None:
            out = [r for r in out if r.module == module or r.module.startswith(module + ".")]
        return out

    def which(self, f: Any, *args: Any, **kwargs: Any) -> Registration:
        """The registration that the call `f(*args, **kwargs)` dispatches to."""
        return self.lookup(signature_of(f, *args, **kwargs))

    def remove(self, reg: Registration) -> None:
        """Remove one registration (used by tests and by rule authors experimenting)."""
        entries = self._by_f.get(_fkey(reg.f), [])
        if reg in entries:
            entries.remove(reg)
            self._invalidate()


registry = Registry()


def _instantiate(reg: Registration, sig: Signature) -> Callable[..., Any]:
    return reg.impl(sig) if reg.kind == "factory" else reg.impl


class _RegisterMixin:
    _kind: Kind

    def register(
        self, f: Any, *patterns: Any, out: Any = None, examples: Any = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: register the decorated callable for calls of `f` matching `patterns`.

        `out=` is the pattern of an `out=` keyword array (registrations without it
        match only calls without `out=`). `examples` attaches call examples (a
        list of argument tuples, or a zero-argument callable returning one) that
        the conformance kit checks the rule on.
        """
        module = _caller_module(1)
        # Validate the patterns now, not when the decorator is applied.
        for p in patterns:
            as_pattern(p)
        if _unreachable(f):
            warnings.warn(
                f"a rule registered for the plain Python function {function_name(f)} is never "
                f"used by traced code. Fix: wrap it, `{getattr(f, '__name__', 'f')} = "
                "rulekit.primitive(fn)`, and call the wrapper (it uses rules registered for the "
                "wrapper or for fn). Calls of the plain function are traced through its body, "
                "and this rule is ignored.",
                RuleRegistrationWarning,
                stacklevel=2,
            )

        def decorator(impl: Callable[..., Any]) -> Callable[..., Any]:
            registry.add(self._kind, f, patterns, impl, out=out, examples=examples, module=module)
            return impl

        return decorator


class _RRule(_RegisterMixin):
    """`rulekit.rrule(f, *args, **kwargs)`: call the registered rule for these CoDuals.

    `rulekit.rrule.register(f, *patterns)` registers a plain rule function.
    For a signature with a stateful factory this builds a fresh rule object per
    call (the AD engine instead keeps one per call site).
    """

    _kind: Kind = "rrule"

    def __call__(self, f: CoDual, *args: CoDual, **kwargs: Any) -> tuple[CoDual, Any]:
        out = _out_value(kwargs) if kwargs and "out" in kwargs else None
        sig, reg = registry.lookup_call(f.x, [a.x for a in args], out)
        rule = reg.impl if reg.kind == "rrule" else reg.impl(sig)
        return rule(f, *args, **kwargs)

    def __repr__(self) -> str:
        return "rulekit.rrule"


class _BuildPrimitiveRRule(_RegisterMixin):
    """`rulekit.build_primitive_rrule(sig)`: the rule to use for signature `sig`.

    Returns the registered rule function, or a fresh `StatefulRRule` from a
    registered factory (`build_primitive_rrule.register(f, *patterns)` registers
    a factory `sig -> rule`; it wins over a plain rule of the same patterns).
    """

    _kind: Kind = "factory"

    def __call__(self, sig: Signature) -> Callable[..., Any]:
        return _instantiate(registry.lookup(sig), sig)

    def __repr__(self) -> str:
        return "rulekit.build_primitive_rrule"


rrule = _RRule()
build_primitive_rrule = _BuildPrimitiveRRule()


def is_primitive(sig: Signature) -> bool:
    """Whether a rule is registered for calls of signature `sig`."""
    return registry.find(sig) is not None
