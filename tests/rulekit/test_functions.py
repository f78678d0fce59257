"""Readable function names (rulekit/_functions.py): generic ones, and names rule packages give."""

from __future__ import annotations

import operator
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.linalg

import rulekit
from rulekit import Array, function_name, registry, signature_of
from rulekit._functions import _names


@pytest.fixture(autouse=True)
def names() -> Iterator[None]:
    """Names given by a test are forgotten afterwards (the table is process-global)."""
    saved = dict(_names)
    yield
    _names.clear()
    _names.update(saved)


def _local(x: Any) -> Any:
    return x


def test_generic_names() -> None:
    assert function_name(np.sin) == "np.sin"
    assert function_name(np.add.reduce) == "np.add.reduce"
    assert function_name(np.sum) == "np.sum"
    assert function_name(np.linalg.solve) == "np.linalg.solve"
    assert function_name(np.fft.fft) == "np.fft.fft"
    assert function_name(operator.getitem) == "operator.getitem"  # (defined in _operator)
    assert function_name(scipy.linalg.solve) == "scipy.linalg.solve"  # (scipy.linalg._basic)
    assert function_name(_local) == f"{__name__}._local"
    assert function_name(rulekit.primitive(_local)) == f"{__name__}._local"


def _fortran(name: str) -> Any:
    """scipy's f2py wrapper of the BLAS routine d`name` (an object that names no module)."""
    return scipy.linalg.get_blas_funcs(name, dtype=np.float64)


def test_no_third_party_module_is_recognised_by_name() -> None:
    """Without a name given by a rule package, an f2py wrapper is named by what it says of
    itself: rulekit knows nothing of scipy."""
    dgemm = _fortran("gemm")
    _names.pop(dgemm, None)
    assert not function_name(dgemm).startswith("scipy")


def test_set_name_and_set_names() -> None:
    dgemm, ddot = _fortran("gemm"), _fortran("dot")
    registry.set_name(dgemm, "scipy.linalg.blas.dgemm")
    assert function_name(dgemm) == "scipy.linalg.blas.dgemm"
    assert function_name(rulekit.primitive(dgemm)) == "scipy.linalg.blas.dgemm"
    blas = types.ModuleType("fakeblas")
    blas.ddot, blas.dgemm = ddot, dgemm
    registry.set_names(blas, "blas")
    assert function_name(dgemm) == "blas.dgemm"
    assert repr(signature_of(ddot, np.ones(2), np.ones(2))) == (
        "blas.ddot(Array[np.float64, 1], Array[np.float64, 1])"
    )


def test_set_names_of_a_module_skips_what_other_packages_define() -> None:
    def erf(x: Any) -> Any:
        return x

    erf.__module__ = "fakelib._impl"  # (defined in the package, private module)
    ufunc = np.frompyfunc(lambda x: x, 1, 1)  # (says nothing of where it is defined)
    mod = types.ModuleType("fakelib.special")
    mod.alias = erf  # (an alias first: the attribute of the object's own __name__ wins)
    mod.erf = erf
    mod.sinc = np.sinc  # (numpy's, re-exported: keeps numpy's name)
    mod.ufunc = ufunc
    mod.constant = 3.0
    mod._private = np.frompyfunc(lambda x: x, 1, 1)
    registry.set_names(mod, "fakelib.special")
    assert function_name(erf) == "fakelib.special.erf"
    assert function_name(ufunc) == "fakelib.special.ufunc"
    assert function_name(np.sinc) == "np.sinc"
    assert not function_name(mod._private).startswith("fakelib")


def test_set_names_of_an_object_names_its_bound_methods() -> None:
    class Distribution:
        def pdf(self, x: Any) -> Any:
            return x

        def cdf(self, x: Any) -> Any:
            return x

    dist = Distribution()
    registry.set_names(dist, "lib.stats.dist", ["pdf"])
    assert function_name(dist.pdf) == "lib.stats.dist.pdf"  # (a new bound method each time)
    assert function_name(dist.cdf).endswith("Distribution.cdf")
    wrapped = rulekit.primitive(dist.pdf)
    registry.set_name(wrapped, "lib.pdf")  # (a wrapper's own name wins)
    assert function_name(wrapped) == "lib.pdf"


@pytest.mark.usefixtures("registrations")
def test_names_appear_in_registrations_and_missing_rule_messages() -> None:
    f = rulekit.primitive(_local)
    registry.set_name(f, "mylib.identity")
    rulekit.rrule.register(f, Array[np.float64, 1])(lambda fc, x: None)
    assert (
        registry.which(f, np.ones(2))
        .describe()
        .startswith("mylib.identity(Array[np.float64, 1]) -> rrule")
    )
    with pytest.raises(rulekit.MissingRuleError, match=r"rrule.register\(mylib.identity, "):
        registry.which(f, np.ones((2, 2)))


def test_set_name_takes_a_string() -> None:
    with pytest.raises(TypeError, match="non-empty string"):
        registry.set_name(np.sin, "")


def test_unhashable_callables_are_named_too() -> None:
    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, x: Any) -> Any:
            return x

    u = Unhashable()
    registry.set_name(u, "lib.u")
    assert function_name(u) == "lib.u"
    assert sys.getrefcount(u) > 2  # (kept alive by the table: its id stays valid)
