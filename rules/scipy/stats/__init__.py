"""Rules for scipy.stats distributions, exported as namespaces with scipy's names
(`rules.scipy.stats.norm.logpdf(x, loc, scale)`).
"""

# ruff: noqa: I001  (the imports below are in registration order)
from rules.scipy.stats import distributions as distributions  # norm, t, beta, gamma, chi2, poisson
from rules.scipy.stats import multivariate as multivariate  # multivariate_normal, dirichlet

# forward rules and differentiable pullbacks (after the reverse rules: same patterns, examples)
from rules.scipy.stats import forward as forward
from rules.scipy.stats.distributions import (
    beta as beta,
    chi2 as chi2,
    gamma as gamma,
    norm as norm,
    poisson as poisson,
    t as t,
)
from rules.scipy.stats.multivariate import (
    SingularCovarianceError as SingularCovarianceError,
    dirichlet as dirichlet,
    multivariate_normal as multivariate_normal,
)

# Plain calls (`scipy.stats.norm.logpdf(traced)`) reach the rules: see rules/scipy/_routing.py.
from rules.scipy._routing import route_methods

for _ns in (norm, t, beta, gamma, chi2, poisson, multivariate_normal, dirichlet):
    route_methods(_ns.dist, [(m, getattr(_ns, m)) for m in _ns.methods])
