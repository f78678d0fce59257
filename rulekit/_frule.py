"""`frule` and `vjp_rule`: register forward rules and differentiable pullbacks.

    @rulekit.frule.register(np.sin, Array[np.floating])
    def sin_frule(f, x):                       # Duals in, Dual out
        return rulekit.Dual(np.sin(x.x), None if x.dx is None else np.cos(x.x) * x.dx)

    @rulekit.vjp_rule.register(np.sin, Array[np.floating])
    def sin_vjp(active, x):                    # primal values in
        return np.sin(x), lambda g: (np.cos(x) * g,)

A forward rule maps the call's Duals to the output's Dual (forward mode, `jvp`).
A vjp rule is what nested reverse mode (grad of grad, jacrev of anything inside
another transformation) runs: it returns the output and a pullback *written as
plain NumPy on its arguments*, `ȳ ↦ (x̄₀, x̄₁, …)` (None: no cotangent), which
returns new arrays and writes nothing. Its arguments may be values traced by an
enclosing transformation, so everything it computes is itself differentiated:
that is what makes a function twice differentiable. `active[i]` tells whether
argument i's cotangent is wanted (the pullback may return None for the others,
and should spend no work on them).

Keyword arguments reach a forward rule as plain values. A forward rule that sets
the attribute `keyword_tangents = True` gets a keyword value that carries a tangent
as a Dual, like a positional one (`jvp` of `dgemm(..., c=C)` with a traced C);
without it such a call raises TracingError ("pass it positionally").

Both registries dispatch on the same patterns as `rrule` and share its rule
packages. Elementwise and linear declarations (`rulekit.elementwise`,
`rulekit.linear`) register both rules for their functions from the one
declaration.
"""

from __future__ import annotations

from typing import Any

from rulekit._dual import Dual
from rulekit._register import _RegisterMixin
from rulekit._registry import Kind, Registry, forward_registry, vjp_registry
from rulekit._signature import out_value

__all__ = ["frule", "vjp_rule"]


class _FRule(_RegisterMixin):
    """`rulekit.frule(f, *args, **kwargs)`: call the registered forward rule on these Duals.

    `rulekit.frule.register(f, *patterns)` registers one: `rule(f, *args, **kwargs)`
    with `f` and each positional argument a `Dual`, returning the output's `Dual`.
    """

    _kind: Kind = "frule"
    _table: Registry = forward_registry

    def __call__(self, f: Dual, *args: Dual, **kwargs: Any) -> Dual:
        out = out_value(kwargs) if kwargs and "out" in kwargs else None
        _, reg = forward_registry.lookup_call(f.x, [a.x for a in args], out)
        return reg.impl(f, *args, **kwargs)

    def __repr__(self) -> str:
        return "rulekit.frule"


class _VJPRule(_RegisterMixin):
    """`rulekit.vjp_rule(f, *args, **kwargs) -> (y, pullback)`: the registered differentiable
    pullback of the call, every argument active.

    `rulekit.vjp_rule.register(f, *patterns)` registers one: `rule(active, *args, **kwargs)`
    returning `(y, pullback)`, `pullback(ȳ) -> (x̄₀, x̄₁, ...)` in plain NumPy.
    """

    _kind: Kind = "vjp"
    _table: Registry = vjp_registry

    def __call__(self, f: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        _, reg = vjp_registry.lookup_call(f, list(args))
        return reg.impl((True,) * len(args), *args, **kwargs)

    def __repr__(self) -> str:
        return "rulekit.vjp_rule"


frule = _FRule()
vjp_rule = _VJPRule()
