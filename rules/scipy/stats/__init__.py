"""Rules for scipy.stats distributions, exported as namespaces with scipy's names
(`rules.scipy.stats.norm.logpdf(x, loc, scale)`).
"""

# ruff: noqa: I001  (the imports below are in registration order)
from rules.scipy.stats import distributions as distributions  # norm, t, beta, gamma, chi2, poisson
from rules.scipy.stats import multivariate as multivariate  # multivariate_normal, dirichlet
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
