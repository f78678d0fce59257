"""A rule-registering helper module, as source: the rule packages that the kit's discovery
tests write to a temporary directory register their rules through it (a helper of another
module: the package calling it owns the rules)."""

HELPERS = '''
import numpy as np
import rulekit
from rulekit import Array, CoDual, NoRData, example, zero_fdata


def register_scaling(f, c, slip=1.0):
    """Register the rule of `f(x) = c·x` (a helper: the module calling it owns the rule)."""

    def rule(fc, x):
        value = f(x.x)
        y = CoDual(value, zero_fdata(value))

        def pullback(dy):
            if x.dx is not None:
                x.dx += slip * c * y.dx
            return NoRData(), NoRData()

        return y, pullback

    rulekit.rrule.register(f, Array[np.floating], examples=[example(np.linspace(-1, 1, 4))])(rule)
'''
