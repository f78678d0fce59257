"""Stateful, allocation-free rules for scipy.linalg.blas routines, and the
`rulekit.primitive` wrappers with BLAS names (`rules.blas.dgemm`, ...).
"""

# ruff: noqa: I001  (the imports below are in registration order)
from rules.blas import level1 as level1  # axpy, scal, dot/dotu/dotc, nrm2
from rules.blas import level2 as level2  # gemv, ger/geru/gerc
from rules.blas import level3 as level3  # gemm, syrk, trmm, trsm
from rules.blas import routines as routines  # the wrappers and their registrations
from rules.blas.routines import (
    caxpy as caxpy,
    cdotc as cdotc,
    cdotu as cdotu,
    cgemm as cgemm,
    cgemv as cgemv,
    cgerc as cgerc,
    cgeru as cgeru,
    cscal as cscal,
    csyrk as csyrk,
    ctrmm as ctrmm,
    ctrsm as ctrsm,
    daxpy as daxpy,
    ddot as ddot,
    dgemm as dgemm,
    dgemv as dgemv,
    dger as dger,
    dnrm2 as dnrm2,
    dscal as dscal,
    dsyrk as dsyrk,
    dtrmm as dtrmm,
    dtrsm as dtrsm,
    dznrm2 as dznrm2,
    saxpy as saxpy,
    scnrm2 as scnrm2,
    sdot as sdot,
    sgemm as sgemm,
    sgemv as sgemv,
    sger as sger,
    snrm2 as snrm2,
    sscal as sscal,
    ssyrk as ssyrk,
    strmm as strmm,
    strsm as strsm,
    zaxpy as zaxpy,
    zdotc as zdotc,
    zdotu as zdotu,
    zgemm as zgemm,
    zgemv as zgemv,
    zgerc as zgerc,
    zgeru as zgeru,
    zscal as zscal,
    zsyrk as zsyrk,
    ztrmm as ztrmm,
    ztrsm as ztrsm,
)

# Plain calls (`scipy.xxx.name(traced)`) reach the rules: see rules/scipy/_routing.py.
import scipy.linalg.blas as _scipy_blas

from rules.scipy._routing import route_module

route_module(_scipy_blas, [(n, globals()[n]) for n in routines.__all__])
from rules.blas import forward as forward  # noqa: E402  (frules + vjp rules; after routing)
