"""scipy.linalg.blas routines with zero-allocation stateful rules.

Importing this module defines `rulekit.primitive` wrappers with scipy's own names and
signatures (`rules.blas.dgemm(alpha, a, b, beta=0.0, c=None, trans_a=0, trans_b=0,
overwrite_c=0)`, ...). A call on plain arrays goes straight to scipy (the wrapper
adds one check and a Python call, ~0.3 µs); a traced call dispatches to the
`StatefulRRule` registered for the wrapper, which

* honours every flag (transposes, side/lower/diag, offsets and increments) and
  overwrites exactly what scipy overwrites: in place when scipy works in place
  (overwrite flag set, F-contiguous array of the routine's dtype), into a new
  F-ordered array when scipy must copy;
* passes C-ordered operands to BLAS as their F-ordered transposes, so no hidden
  copy is made;
* returns the cotangents of `alpha`/`beta`/`a` when they are passed positionally
  (keyword scalars are constants) and accumulates array cotangents with BLAS
  calls (beta=1) straight into the fdata;
* allocates nothing after its first call (outputs, saved values and work
  buffers come from the rule's pool).

Covered: gemm, gemv, ger (geru, gerc), axpy, dot (dotu, dotc), nrm2 (scnrm2,
dznrm2), scal, syrk, trmm, trsm in their s/d/c/z variants (those scipy has).
The adjoints are in the rule classes' docstrings (`rules._blas_level1/2/3`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import numpy as np
import scipy.linalg.blas as _b

from rulekit import Array, Example, Vararg, build_primitive_rrule, example, primitive, registry
from rules.blas.level1 import AxpyRule, DotRule, Nrm2Rule, ScalRule
from rules.blas.level2 import GemvRule, GerRule
from rules.blas.level3 import GemmRule, SyrkRule, TriRule

__all__ = [
    "caxpy", "cdotc", "cdotu", "cgemm", "cgemv", "cgerc", "cgeru", "cscal", "csyrk",
    "ctrmm", "ctrsm", "daxpy", "ddot", "dgemm", "dgemv", "dger", "dnrm2", "dscal", "dsyrk",
    "dtrmm", "dtrsm", "dznrm2", "saxpy", "scnrm2", "sdot", "sgemm", "sgemv", "sger",
    "snrm2", "sscal", "ssyrk", "strmm", "strsm", "zaxpy", "zdotc", "zdotu", "zgemm",
    "zgemv", "zgerc", "zgeru", "zscal", "zsyrk", "ztrmm", "ztrsm",
]  # fmt: skip

# -- the wrappers ---------------------------------------------------------------------------

sgemm, dgemm = primitive(_b.sgemm), primitive(_b.dgemm)
cgemm, zgemm = primitive(_b.cgemm), primitive(_b.zgemm)
sgemv, dgemv = primitive(_b.sgemv), primitive(_b.dgemv)
cgemv, zgemv = primitive(_b.cgemv), primitive(_b.zgemv)
sger, dger = primitive(_b.sger), primitive(_b.dger)
cgeru, zgeru = primitive(_b.cgeru), primitive(_b.zgeru)
cgerc, zgerc = primitive(_b.cgerc), primitive(_b.zgerc)
saxpy, daxpy = primitive(_b.saxpy), primitive(_b.daxpy)
caxpy, zaxpy = primitive(_b.caxpy), primitive(_b.zaxpy)
sdot, ddot = primitive(_b.sdot), primitive(_b.ddot)
cdotu, zdotu = primitive(_b.cdotu), primitive(_b.zdotu)
cdotc, zdotc = primitive(_b.cdotc), primitive(_b.zdotc)
snrm2, dnrm2 = primitive(_b.snrm2), primitive(_b.dnrm2)
scnrm2, dznrm2 = primitive(_b.scnrm2), primitive(_b.dznrm2)
sscal, dscal = primitive(_b.sscal), primitive(_b.dscal)
cscal, zscal = primitive(_b.cscal), primitive(_b.zscal)
ssyrk, dsyrk = primitive(_b.ssyrk), primitive(_b.dsyrk)
csyrk, zsyrk = primitive(_b.csyrk), primitive(_b.zsyrk)
strmm, dtrmm = primitive(_b.strmm), primitive(_b.dtrmm)
ctrmm, ztrmm = primitive(_b.ctrmm), primitive(_b.ztrmm)
strsm, dtrsm = primitive(_b.strsm), primitive(_b.dtrsm)
ctrsm, ztrsm = primitive(_b.ctrsm), primitive(_b.ztrsm)
# (an f2py routine's own name is "function dgemm": say how users reach it)
registry.set_names(_b, "scipy.linalg.blas", __all__)

# -- call examples (small; the conformance kit runs every one) --------------------------------

RealScalar = Union[float, int, np.floating, np.integer]
AnyScalar = Union[complex, float, int, np.number]


def _arr(rng: np.random.Generator, shape: Any, dt: Any, order: str = "F") -> np.ndarray:
    x = rng.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.array(x, dtype=dt, order=order)  # type: ignore[call-overload]


def _s(dt: Any, v: float) -> Any:
    """A scalar argument: float for real routines, complex (v, −v/3) for complex ones."""
    return complex(v, -v / 3) if np.dtype(dt).kind == "c" else v


def _tri(rng: np.random.Generator, n: int, dt: Any, order: str = "F") -> np.ndarray:
    """A well-conditioned matrix (both triangles): strong diagonal."""
    return np.array(_arr(rng, (n, n), dt) + 3 * np.eye(n), dtype=dt, order=order)  # type: ignore[call-overload]


def _gemm_examples(dt: Any, full: bool) -> list[Example]:
    rng = np.random.default_rng(1)
    r = [
        example(_s(dt, 1.5), _arr(rng, (3, 4), dt), _arr(rng, (4, 2), dt)),
        # C-ordered operands, transposed; C overwritten in place (F-contiguous)
        example(
            _s(dt, 0.7), _arr(rng, (4, 3), dt, "C"), _arr(rng, (2, 4), dt, "C"),
            _s(dt, 0.5), _arr(rng, (3, 2), dt), 1, 1, 1,
        ),
    ]  # fmt: skip
    if np.dtype(dt).kind == "c":
        r.append(example(
            _s(dt, 0.5), _arr(rng, (4, 3), dt), _arr(rng, (4, 2), dt, "C"),
            _s(dt, -1.0), _arr(rng, (3, 2), dt), 2, 0, 1,
        ))  # fmt: skip
    if full:  # C-ordered c: scipy copies it even with overwrite_c=1, and so does the rule
        r.append(example(
            1.2, _arr(rng, (3, 4), dt, "C"), _arr(rng, (4, 2), dt), -0.5,
            _arr(rng, (3, 2), dt, "C"), 0, 0, 1,
        ))  # fmt: skip
        r.append(example(1.0, _arr(rng, (2, 3), dt), _arr(rng, (3, 2), dt), beta=0.5,
                         c=_arr(rng, (2, 2), dt), trans_b=0))  # fmt: skip
        r.append(example(2.0, _arr(rng, (1, 1), dt), _arr(rng, (1, 1), dt)))
    return r


def _gemv_examples(dt: Any, full: bool) -> list[Example]:
    rng = np.random.default_rng(2)
    r = [
        example(_s(dt, 1.5), _arr(rng, (3, 4), dt), _arr(rng, 4, dt)),
        # trans=1 on a C-ordered a, y overwritten in place
        example(_s(dt, 0.8), _arr(rng, (4, 3), dt, "C"), _arr(rng, 4, dt), _s(dt, 0.5),
                _arr(rng, 3, dt), 0, 1, 0, 1, 1 if np.dtype(dt).kind == "f" else 2, 1),
    ]  # fmt: skip
    if full:  # strided x (elements 1, 3) and y (elements 1, 4, 7)
        r.append(example(1.1, _arr(rng, (3, 2), dt), _arr(rng, 5, dt), 0.3,
                         _arr(rng, 8, dt), 1, 2, 1, 3, 0, 1))  # fmt: skip
    return r


def _ger_examples(dt: Any, full: bool) -> list[Example]:
    rng = np.random.default_rng(3)
    r = [
        example(_s(dt, 1.5), _arr(rng, 3, dt), _arr(rng, 4, dt)),
        example(_s(dt, -0.5), _arr(rng, 3, dt), _arr(rng, 2, dt), 1, 1, _arr(rng, (3, 2), dt),
                1, 1, 1),
    ]  # fmt: skip
    if full:  # C-ordered a: copied
        r.append(example(0.7, _arr(rng, 2, dt), _arr(rng, 3, dt), 1, 1,
                         _arr(rng, (2, 3), dt, "C"), 1, 1, 1))  # fmt: skip
    return r


def _axpy_examples(dt: Any, full: bool) -> list[Example]:
    rng = np.random.default_rng(4)
    r = [example(_arr(rng, 5, dt), _arr(rng, 5, dt), 5, _s(dt, 0.7))]
    if full:
        r.append(example(_arr(rng, 4, dt), _arr(rng, 4, dt)))
        # x elements 0, 2, 4 into y elements 1, 3, 5
        r.append(example(_arr(rng, 6, dt), _arr(rng, 7, dt), 3, -0.4, 0, 2, 1, 2))
    return r


def _dot_examples(dt: Any, full: bool) -> list[Example]:
    rng = np.random.default_rng(5)
    r = [example(_arr(rng, 5, dt), _arr(rng, 5, dt))]
    if full:
        r.append(example(_arr(rng, 6, dt), _arr(rng, 6, dt), 2, 1, 2, 0, 3))
        r.append(example(_arr(rng, 1, dt), _arr(rng, 1, dt)))
    return r


def _nrm2_examples(dt: Any, full: bool) -> list[Example]:
    rng = np.random.default_rng(6)
    r = [example(_arr(rng, 5, dt))]
    if full:
        r.append(example(_arr(rng, 7, dt), 3, 1, 2))
    return r


def _scal_examples(dt: Any, full: bool) -> list[Example]:
    rng = np.random.default_rng(7)
    r = [example(_s(dt, 0.7), _arr(rng, 5, dt))]
    if full:
        r.append(example(-1.3, _arr(rng, 7, dt), 3, 1, 2))
    return r


def _syrk_examples(dt: Any, full: bool) -> list[Example]:
    rng = np.random.default_rng(8)
    r = [
        example(_s(dt, 0.8), _arr(rng, (3, 4), dt)),
        # trans=1 on a C-ordered a, lower triangle of c overwritten in place
        example(_s(dt, 0.6), _arr(rng, (4, 3), dt, "C"), _s(dt, 0.5), _arr(rng, (3, 3), dt),
                1, 1, 1),
    ]  # fmt: skip
    if full:
        r.append(example(1.1, _arr(rng, (2, 3), dt), -0.5, _arr(rng, (2, 2), dt, "C"), 0, 0, 1))
    return r


def _trmm_examples(dt: Any, full: bool, solve: bool = False) -> list[Example]:
    rng = np.random.default_rng(9 + solve)
    r = [
        example(_s(dt, 1.2), _tri(rng, 3, dt), _arr(rng, (3, 2), dt)),
        # side=1 lower=1 trans_a=1 on a C-ordered a, b overwritten in place
        example(_s(dt, 0.9), _tri(rng, 2, dt, "C"), _arr(rng, (3, 2), dt), 1, 1, 1, 0, 1),
    ]
    if np.dtype(dt).kind == "c":
        r.append(example(_s(dt, 0.9), _tri(rng, 3, dt, "C"), _arr(rng, (3, 2), dt), 0, 0, 2))
    if full:  # unit diagonal; C-ordered b (copied)
        r.append(example(-0.7, _tri(rng, 3, dt), _arr(rng, (2, 3), dt, "C"), 1, 0, 0, 1, 1))
    return r


def _trsm_examples(dt: Any, full: bool) -> list[Example]:
    return _trmm_examples(dt, full, solve=True)


# -- registrations ----------------------------------------------------------------------------

_Factory = Callable[[Any, Any], Any]
_FAMILIES: dict[str, tuple[_Factory, Callable[..., list[Example]], str]] = {
    # name → (rule factory (fn, dtype), examples (dtype, full), argument kinds)
    "gemm": (GemmRule, _gemm_examples, "SMM"),
    "gemv": (GemvRule, _gemv_examples, "SMV"),
    "ger": (GerRule, _ger_examples, "SVV"),
    "geru": (GerRule, _ger_examples, "SVV"),
    "gerc": (GerRule, _ger_examples, "SVV"),
    "axpy": (AxpyRule, _axpy_examples, "VV"),
    "dot": (DotRule, _dot_examples, "VV"),
    "dotu": (DotRule, _dot_examples, "VV"),
    "dotc": (DotRule, _dot_examples, "VV"),
    "nrm2": (Nrm2Rule, _nrm2_examples, "V"),
    "scal": (ScalRule, _scal_examples, "SV"),
    "syrk": (SyrkRule, _syrk_examples, "SM"),
    "trmm": (lambda fn, dt: TriRule(fn, dt, solve=False), _trmm_examples, "SMM"),
    "trsm": (lambda fn, dt: TriRule(fn, dt, solve=True), _trsm_examples, "SMM"),
}
_DTYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _register(wrapper: Any, family: str, dt: Any) -> None:
    factory, examples, kinds = _FAMILIES[family]
    scalar = AnyScalar if np.dtype(dt).kind == "c" else RealScalar
    pats = [{"S": scalar, "M": Array[dt, 2], "V": Array[dt, 1]}[k] for k in kinds]
    fn = wrapper.fn
    full = dt is np.float64  # every variant for d; the s/c/z variants get the main cases

    def build(sig: Any) -> Any:
        return factory(fn, dt)

    build.__qualname__ = f"build_{fn.__name__.split()[-1]}_rule"
    build_primitive_rrule.register(
        wrapper, *pats, Vararg[Any], examples=lambda: examples(dt, full)
    )(build)


for _w in (
    sgemm, dgemm, cgemm, zgemm, sgemv, dgemv, cgemv, zgemv, sger, dger, cgeru, zgeru, cgerc,
    zgerc, saxpy, daxpy, caxpy, zaxpy, sdot, ddot, cdotu, zdotu, cdotc, zdotc, snrm2, dnrm2,
    sscal, dscal, cscal, zscal, ssyrk, dsyrk, csyrk, zsyrk, strmm, dtrmm, ctrmm, ztrmm,
    strsm, dtrsm, ctrsm, ztrsm,
):  # fmt: skip
    _name = _w.fn.__name__.split()[-1]
    _register(_w, _name[1:], _DTYPES[_name[0]])
_register(scnrm2, "nrm2", np.complex64)
_register(dznrm2, "nrm2", np.complex128)
