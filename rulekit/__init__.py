"""rulekit: a rule system for reverse-mode AD of NumPy, SciPy and BLAS code.

The public surface, grouped: tangents → registry → stateful rules → engine.
"""

# -- tangents and CoDual ------------------------------------------------------
from rulekit._codual import CoDual as CoDual
from rulekit._codual import zero_codual as zero_codual

# -- errors ---------------------------------------------------------------------
from rulekit._errors import AmbiguousRuleError as AmbiguousRuleError
from rulekit._errors import MissingRuleError as MissingRuleError
from rulekit._errors import RulekitError as RulekitError
from rulekit._errors import RuleRegistrationError as RuleRegistrationError
from rulekit._errors import RuleRegistrationWarning as RuleRegistrationWarning
from rulekit._errors import SubclassError as SubclassError
from rulekit._errors import TangentError as TangentError
from rulekit._errors import TracingError as TracingError
from rulekit._example import Example as Example
from rulekit._example import example as example

# -- rules and the dispatch registry -------------------------------------------
from rulekit._patterns import Array as Array
from rulekit._patterns import Vararg as Vararg
from rulekit._registry import Registration as Registration
from rulekit._registry import Signature as Signature
from rulekit._registry import build_primitive_rrule as build_primitive_rrule
from rulekit._registry import is_primitive as is_primitive
from rulekit._registry import registry as registry
from rulekit._registry import rrule as rrule
from rulekit._registry import signature_of as signature_of

# -- stateful rules -------------------------------------------------------------
from rulekit._stateful import SaveToken as SaveToken
from rulekit._stateful import StatefulRRule as StatefulRRule
from rulekit._tangents import NoFData as NoFData
from rulekit._tangents import NoRData as NoRData
from rulekit._tangents import NoTangent as NoTangent
from rulekit._tangents import StructTangent as StructTangent
from rulekit._tangents import increment as increment
from rulekit._tangents import inner as inner
from rulekit._tangents import join_tangent as join_tangent
from rulekit._tangents import randn_tangent as randn_tangent
from rulekit._tangents import register_tangent as register_tangent
from rulekit._tangents import split_tangent as split_tangent
from rulekit._tangents import zero_fdata as zero_fdata
from rulekit._tangents import zero_rdata as zero_rdata
from rulekit._tangents import zero_tangent as zero_tangent

__version__ = "0.1.0"

# -- the AD engine ----------------------------------------------------------------
from rulekit import _outrule  # noqa: F401  (registers np.copyto: the generic out= form)
from rulekit._api import DerivedRule as DerivedRule
from rulekit._api import ValueAndGrad as ValueAndGrad
from rulekit._api import build_rrule as build_rrule
from rulekit._api import grad as grad
from rulekit._api import value_and_grad as value_and_grad
from rulekit._api import value_and_pullback as value_and_pullback
from rulekit._primitive import Primitive as Primitive
from rulekit._primitive import primitive as primitive
from rulekit._tape import Record as Record
from rulekit._traced import Traced as Traced
