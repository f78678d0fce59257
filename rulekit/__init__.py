"""rulekit: a rule system for reverse-mode AD of NumPy, SciPy and BLAS code.

The public surface, grouped as the layers underneath it: tangents → registry →
stateful rules → declaring rules → engine, then the errors (docs/concepts.md explains
each; docs/architecture.md shows the modules).
The bundled rules (the `rules` package) load by themselves, through the
`rulekit.rules` entry point, before the first rule lookup.
"""

import importlib
import typing

# -- tangents and CoDual: a primal value, its fdata and rdata; cotangent helpers -------
from rulekit._codual import CoDual as CoDual
from rulekit._codual import zero_codual as zero_codual
from rulekit._cotangents import accumulate as accumulate
from rulekit._cotangents import accumulate_sequence as accumulate_sequence
from rulekit._cotangents import add_to_fdata as add_to_fdata
from rulekit._cotangents import differentiable as differentiable
from rulekit._cotangents import is_active as is_active
from rulekit._cotangents import no_pullback as no_pullback
from rulekit._cotangents import no_rdata as no_rdata
from rulekit._cotangents import scalar_rdata as scalar_rdata
from rulekit._cotangents import unbroadcast as unbroadcast
from rulekit._dual import Dual as Dual
from rulekit._layout import zeros_like_exact as zeros_like_exact
from rulekit._tangent_types import NoFData as NoFData
from rulekit._tangent_types import NoRData as NoRData
from rulekit._tangent_types import NoTangent as NoTangent
from rulekit._tangent_types import StructTangent as StructTangent
from rulekit._tangent_types import register_tangent as register_tangent
from rulekit._tangents import increment as increment
from rulekit._tangents import inner as inner
from rulekit._tangents import join_tangent as join_tangent
from rulekit._tangents import randn_tangent as randn_tangent
from rulekit._tangents import split_tangent as split_tangent
from rulekit._tangents import zero_fdata as zero_fdata
from rulekit._tangents import zero_rdata as zero_rdata
from rulekit._tangents import zero_tangent as zero_tangent

# isort: split
# -- rules and the dispatch registry: type patterns, signatures, registrations --------
from rulekit import patterns as patterns
from rulekit._example import Example as Example
from rulekit._example import example as example
from rulekit._frule import frule as frule
from rulekit._frule import vjp_rule as vjp_rule
from rulekit._functions import function_name as function_name
from rulekit._patterns import Array as Array
from rulekit._patterns import Vararg as Vararg
from rulekit._register import build_primitive_rrule as build_primitive_rrule
from rulekit._register import is_primitive as is_primitive
from rulekit._register import rrule as rrule
from rulekit._registry import Registration as Registration
from rulekit._registry import forward_registry as forward_registry
from rulekit._registry import registry as registry
from rulekit._registry import vjp_registry as vjp_registry
from rulekit._signature import Signature as Signature
from rulekit._signature import signature_of as signature_of

# isort: split
# -- stateful rules: rule objects that keep their buffers between calls -------------
from rulekit._stateful import POOL_KEYS as POOL_KEYS
from rulekit._stateful import SaveToken as SaveToken
from rulekit._stateful import StatefulRRule as StatefulRRule
from rulekit._stateful import free_list as free_list

# isort: split
# -- declaring rules: elementwise and linear functions, each declared once --------------
from rulekit._elementwise import Elementwise as Elementwise
from rulekit._elementwise import elementwise as elementwise
from rulekit._linear import LinearFunction as LinearFunction
from rulekit._linear import ViewMismatchError as ViewMismatchError
from rulekit._linear import linear as linear

# isort: split
# -- the AD engine: differentiating user code ------------------------------------------
from rulekit._api import DerivedRule as DerivedRule
from rulekit._api import build_rrule as build_rrule
from rulekit._api import grad as grad
from rulekit._api import value_and_grad as value_and_grad
from rulekit._checkpoint import checkpoint as checkpoint
from rulekit._derived import DerivedRules as DerivedRules
from rulekit._engine._primal_only import PRIMAL_ONLY as PRIMAL_ONLY
from rulekit._engine._primitive import Primitive as Primitive
from rulekit._engine._primitive import primitive as primitive
from rulekit._engine._traced import Traced as Traced
from rulekit._engine._traced import is_traced as is_traced
from rulekit._lifting import Lifted as Lifted
from rulekit._lifting import lift_closure as lift_closure
from rulekit._pullback import Pullback as Pullback
from rulekit._pullback import value_and_pullback as value_and_pullback
from rulekit._scan import scan as scan

# isort: split
# -- errors: what rulekit raises on purpose --------------------------------------------
from rulekit._errors import AmbiguousRuleError as AmbiguousRuleError
from rulekit._errors import MissingRuleError as MissingRuleError
from rulekit._errors import RetraceWarning as RetraceWarning
from rulekit._errors import RulekitError as RulekitError
from rulekit._errors import RulePackageError as RulePackageError
from rulekit._errors import RuleRegistrationError as RuleRegistrationError
from rulekit._errors import RuleRegistrationWarning as RuleRegistrationWarning
from rulekit._errors import SubclassError as SubclassError
from rulekit._errors import TangentError as TangentError
from rulekit._errors import TracingError as TracingError
from rulekit._errors import untraced_write_error as untraced_write_error

__version__ = "0.1.0"

# (the transformations of docs/forward-and-higher-order.md, in the engine's group above, are
# imported on first use, so that `import rulekit` stays light: `_LAZY` names their modules)
_LAZY = {
    "ScipyObjective": "rulekit._optimize",
    "scipy_objective": "rulekit._optimize",
    **dict.fromkeys(
        ("elementwise_grad", "hessian", "hvp", "jacfwd", "jacrev", "jvp", "stop_gradient", "vjp"),
        "rulekit._transforms",
    ),
}
if typing.TYPE_CHECKING:
    from rulekit._optimize import ScipyObjective as ScipyObjective
    from rulekit._optimize import scipy_objective as scipy_objective
    from rulekit._transforms import elementwise_grad as elementwise_grad
    from rulekit._transforms import hessian as hessian
    from rulekit._transforms import hvp as hvp
    from rulekit._transforms import jacfwd as jacfwd
    from rulekit._transforms import jacrev as jacrev
    from rulekit._transforms import jvp as jvp
    from rulekit._transforms import stop_gradient as stop_gradient
    from rulekit._transforms import vjp as vjp


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rulekit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # (later lookups skip this function)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
