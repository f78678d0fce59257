"""The dispatch registry: call signatures → rules and stateful-rule factories.

A registration says "for calls of `f` whose arguments match these patterns,
use this rule" (`rrule.register`) or "... build a rule object with this
factory" (`build_primitive_rrule.register`). Dispatch picks the most specific
matching registration; lookups are cached per concrete signature. Before a
lookup misses the cache, the rule packages still due are imported
(`rulekit._loading`: entry points, deferred modules).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rulekit._errors import AmbiguousRuleError, MissingRuleError, RuleRegistrationError
from rulekit._functions import FunctionWrapper, function_name, set_name, set_names
from rulekit._loading import RuleLoader, caller_module, importing_module
from rulekit._patterns import Pattern, VarargPattern, as_pattern, is_subpattern, matches, type_key
from rulekit._signature import Signature, fast_key, key_repr, signature_of, unwrap

__all__ = ["Kind", "Registration", "Registry", "forward_registry", "registry", "vjp_registry"]

Kind = Literal["rrule", "factory", "frule", "vjp"]


@dataclass(eq=False)
class Registration:
    """One registered rule: what it matches, what it is, and who registered it.

    `f` is the function, `patterns` one per positional argument (a `Vararg` last),
    `out` the pattern of an `out=` array (None: calls without one), `impl` the
    rule (`kind == "rrule"`) or the factory `sig -> rule` (`kind == "factory"`),
    `module` the module that called `register`, `examples` the call examples the
    kit checks it on. `meta["importing"]` is the module being imported when it was
    registered: the rule package it belongs to.
    """

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
        """Whether the last pattern is a `Vararg`."""
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
        """Whether a call of signature `sig` matches this registration."""
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
        """One line: the signature it covers, the rule and who registered it."""
        parts = [repr(p) for p in self.patterns]
        if self.out is not None:
            parts.append(f"out={self.out!r}")
        what = {"factory": "build_primitive_rrule", "vjp": "vjp_rule"}.get(self.kind, self.kind)
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


def _fkey(f: Any) -> Any:
    try:
        hash(f)
    except TypeError:
        return ("id", id(f))
    return f


class Registry:
    """The table of registrations, with a per-signature lookup cache (`rulekit.registry`).

    Forward rules and differentiable pullbacks live in tables of their own
    (`forward_registry`, `vjp_registry`: same patterns, same dispatch), which share
    this one's rule packages: `loader` is the reverse registry's, `how` the line of
    the missing-rule message that shows how to register.
    """

    def __init__(self, loader: RuleLoader | None = None, how: str | None = None) -> None:
        self._by_f: dict[Any, list[Registration]] = {}
        self._cache: dict[Any, Registration] = {}
        self._fast: dict[Any, tuple[Signature, Registration]] = {}
        self._loader = RuleLoader() if loader is None else loader
        self._how = how or (
            "  @rulekit.rrule.register({name}, {patterns})\n"
            "  def my_rule(f, *args): ...  # returns (CoDual output, pullback)\n"
        )

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
        """Register `impl` for calls of `f` matching `patterns` (what the decorators call).

        The rule packages due are imported first, so that a registration made now
        replaces a bundled one of the same patterns, not the other way round.
        """
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
        if not (module == "rulekit" or module.startswith("rulekit.")):  # (rulekit's own
            # rules, scan's and checkpoint's, register while `import rulekit` runs: too early
            # for rule packages, which import rulekit)
            self._loader.load_pending()
        reg = Registration(unwrap(f), ps, out_p, impl, kind, module, examples)
        reg.meta["importing"] = importing_module()  # (the kit finds a package's rules by it)
        entries = self._by_f.setdefault(_fkey(reg.f), [])
        # Re-registering the same patterns and kind replaces the earlier rule.
        entries[:] = [
            e for e in entries if not (e.kind == kind and e.patterns == ps and e.out == out_p)
        ]
        entries.append(reg)
        self._invalidate()
        return reg

    def remove(self, reg: Registration) -> None:
        """Remove one registration (used by tests and by rule authors experimenting)."""
        entries = self._by_f.get(_fkey(reg.f), [])
        if reg in entries:
            entries.remove(reg)
            self._invalidate()

    def _invalidate(self) -> None:
        self._cache.clear()
        self._fast.clear()

    # -- rule packages loaded by rulekit -----------------------------------

    def defer(self, trigger: str, module: str) -> None:
        """Import `module` before the first lookup that finds module `trigger` imported.

        For rule packages covering a library that is slow to import:
        `registry.defer("scipy.special", "rules.scipy.special")` registers the
        scipy.special rules when the program has imported scipy.special, and
        `import rules` stays fast. The check runs on every lookup that misses the
        dispatch cache (and before a registration or a listing); a module that
        fails to import raises `RulePackageError` there.
        """
        owner = importing_module() or caller_module(1)
        self._loader.defer(trigger, module, owner)

    def load_all(self, package: str | None = None) -> None:
        """Import every rule package rulekit knows of now: the `rulekit.rules` entry points
        and every deferred module, whatever its trigger (with `package`: only the modules
        that `package` or its submodules deferred). Listings, coverage and `rulekit check`
        call it; a module that fails to import raises `RulePackageError`."""
        self._loader.load_all(package)

    def load_pending(self) -> None:
        """Import the entry points (the first time) and every deferred module whose trigger
        is imported by now. Lookups call it on a cache miss; the engine calls it before it
        runs a traced function, so that a rule package that patches a library (the bundled
        SciPy rules route `scipy.linalg.cholesky`, ...) has done so before the function
        looks the name up. Cheap when nothing is due."""
        self._loader.load_pending()

    def deferred(self) -> list[tuple[str, str]]:
        """The deferred modules not imported yet, as `(trigger, module)` pairs."""
        return self._loader.deferred()

    # -- names -------------------------------------------------------------

    def set_name(self, f: Any, name: str) -> None:
        """Name the function `f` `name` in signatures, messages and reports (see
        `rulekit.function_name`): `registry.set_name(blas.dgemm, "scipy.linalg.blas.dgemm")`."""
        set_name(f, name)

    def set_names(self, namespace: Any, prefix: str, attrs: Iterable[str] | None = None) -> None:
        """Name each callable attribute `a` of `namespace` `prefix.a` (all public ones, or
        `attrs`): `registry.set_names(scipy.special, "scipy.special")`."""
        set_names(namespace, prefix, attrs)

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

    def which(self, f: Any, *args: Any, **kwargs: Any) -> Registration:
        """The registration that the call `f(*args, **kwargs)` dispatches to."""
        return self.lookup(signature_of(f, *args, **kwargs))

    def _resolve(self, sig: Signature) -> Registration:
        self._loader.load_pending()
        entries = self._by_f.get(_fkey(sig.f), [])
        cands = [r for r in entries if r.matches(sig)]
        if not cands and isinstance(sig.f, FunctionWrapper):
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

    def _missing_message(self, sig: Signature, entries: list[Registration]) -> str:
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
        patterns = ", ".join(key_repr(k) for k in sig.args)
        msg += (
            "\nTo differentiate this call, register a rule:\n"
            + self._how.format(name=name, patterns=patterns)
            + "or import the rule package that registers it (installed rule packages load "
            "by themselves; see `rulekit rules` for what is registered)."
        )
        return msg

    # -- introspection -----------------------------------------------------

    def entries(self, module: str | None = None) -> list[Registration]:
        """All registrations, or those made by `module` (and its submodules).

        The rule packages due are imported first (as for a lookup); call
        `load_all()` first to list every rule installed packages can register.
        """
        self._loader.load_pending()
        out = [r for regs in self._by_f.values() for r in regs]
        if module is not None:
            out = [r for r in out if r.module == module or r.module.startswith(module + ".")]
        return out


#: The one process-wide registry of reverse rules (`rulekit.registry`).
registry = Registry()
#: Forward rules (`rulekit.frule.register`), dispatched as reverse rules are.
forward_registry = Registry(
    registry._loader,
    "  @rulekit.frule.register({name}, {patterns})\n"
    "  def my_frule(f, *args): ...  # Duals in, Dual(y, ẏ) out\n",
)
#: Differentiable pullbacks (`rulekit.vjp_rule.register`): what nested (higher-order)
#: reverse mode differentiates with.
vjp_registry = Registry(
    registry._loader,
    "  @rulekit.vjp_rule.register({name}, {patterns})\n"
    "  def my_vjp(active, *args): ...  # returns (y, lambda ȳ: (x̄₀, x̄₁, ...))\n",
)
