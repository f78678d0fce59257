"""The conformance kit: prove a rule right, restoring, alias-correct, reentrant, allocation-free.

    from testutils import check_rule, check_frule, check_vjp_rule, count_allocations
    check_rule(np.matmul, A, B)              # the registered rule for this call
    check_rule(f, *args, rule=my_rule)       # a given rule object
    check_frule(np.sin, x)                   # the forward rule (rulekit.frule) of this call
    check_vjp_rule(np.sin, x)                # its differentiable pullback (rulekit.vjp_rule)
    count_allocations(fn) -> AllocationCount # numpy data buffers allocated by fn()

`testutils.strategies` builds hypothesis strategies from the registry's type
patterns (values of practical magnitude; edge cases on request); `rulekit check
MODULE` and the pytest plugin run the kit over every rule a package registers.
"""

# -- checking a rule --------------------------------------------------------------
# -- counting allocations (NEP 49) -----------------------------------------------------
from testutils._alloc import AllocationCount as AllocationCount
from testutils._alloc import count_allocations as count_allocations
from testutils._alloc import counting as counting
from testutils._check import CHECKS as CHECKS
from testutils._check import RTOL as RTOL
from testutils._check import RuleCheckError as RuleCheckError
from testutils._check import RuleReport as RuleReport
from testutils._check import UncheckableInput as UncheckableInput
from testutils._check import check_example as check_example
from testutils._check import check_rule as check_rule
from testutils._forward import check_frule as check_frule
from testutils._forward import check_frule_example as check_frule_example
from testutils._verdict import FORWARD_CHECKS as FORWARD_CHECKS
from testutils._verdict import VJP_CHECKS as VJP_CHECKS
from testutils._vjpcheck import check_vjp_example as check_vjp_example
from testutils._vjpcheck import check_vjp_rule as check_vjp_rule
