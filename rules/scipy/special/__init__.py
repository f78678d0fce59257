"""Rules for scipy.special. Most of its functions are ufuncs, reached from unchanged user
code; its Python functions (`logsumexp`, `softmax`, `polygamma`, ...) have
`rulekit.primitive` wrappers, exported here under scipy's names.
"""

# ruff: noqa: I001  (the imports below are in registration order)
# erf, erfcx, gammaln, digamma, expit, logit, ndtr, i0/i1, ...
from rules.scipy.special import unary as unary

# xlogy, xlog1py, rel_entr, beta, betaln, owens_t, polygamma
from rules.scipy.special import binary as binary
from rules.scipy.special import reductions as reductions  # logsumexp, softmax, log_softmax

# zeta, lambertw: Python functions over private ufuncs
from rules.scipy.special import wrapped as wrapped

# gammainc(c), betainc, rgamma, jv, yn, iv, ive, kv, kve, multigammaln
from rules.scipy.special import gamma_bessel as gamma_bessel
from rules.scipy.special.unary import (
    digamma as digamma,
    entr as entr,
    erf as erf,
    erfc as erfc,
    erfcinv as erfcinv,
    erfcx as erfcx,
    erfinv as erfinv,
    expit as expit,
    gamma as gamma,
    gammaln as gammaln,
    i0 as i0,
    i0e as i0e,
    i1 as i1,
    i1e as i1e,
    log_expit as log_expit,
    log_ndtr as log_ndtr,
    logit as logit,
    ndtr as ndtr,
    ndtri as ndtri,
    psi as psi,
)
from rules.scipy.special.binary import (
    beta as beta,
    betaln as betaln,
    owens_t as owens_t,
    polygamma as polygamma,
    rel_entr as rel_entr,
    xlog1py as xlog1py,
    xlogy as xlogy,
)
from rules.scipy.special.reductions import (
    log_softmax as log_softmax,
    logsumexp as logsumexp,
    softmax as softmax,
)
from rules.scipy.special.wrapped import (
    lambertw as lambertw,
    zeta as zeta,
)
from rules.scipy.special.gamma_bessel import (
    betainc as betainc,
    gammainc as gammainc,
    gammaincc as gammaincc,
    gammasgn as gammasgn,
    iv as iv,
    ive as ive,
    j0 as j0,
    j1 as j1,
    jn as jn,
    jv as jv,
    kv as kv,
    kve as kve,
    multigammaln as multigammaln,
    rgamma as rgamma,
    y0 as y0,
    y1 as y1,
    yn as yn,
)

# Plain calls (`scipy.xxx.name(traced)`) reach the rules: see rules/scipy/_routing.py.
import scipy.special as _scipy_special

from rules.scipy._routing import route_module

route_module(
    _scipy_special,
    [
        (n, globals()[n])
        for m in (unary, binary, reductions, wrapped, gamma_bessel)
        for n in m.__all__
    ],
)
from rules.scipy.special import forward as forward  # noqa: E402  (frules and vjps)
