"""Every `__array_function__`-dispatched NumPy function has a decision, and PRIMAL_ONLY holds.

The audit enumerates NumPy's dispatched surface (`numpy`, `numpy.linalg`,
`numpy.fft`, `numpy.emath`, `numpy.lib.stride_tricks`; functions with an
`_implementation`, and those dispatched through `like=` only) and puts each
function in exactly one class:

(a) a rule is registered for it (for some signature) in `rulekit.registry`;
(b) it is in `rulekit.PRIMAL_ONLY`: it runs on the primal values;
(c) it is traced through its Python implementation: `rules.numpy.traced_through`
    or `TRACED_GENERIC` below (checked against finite differences);
(d) it is refused: `REFUSED` below or `rules.numpy.traced_through.NOT_DISPATCHED`
    (checked to raise on traced input).

A NumPy upgrade that adds a function fails `test_every_dispatched_function_is_classified`
until someone decides. `np.char`, `np.strings`, `np.rec`, `np.ma` and
`np.polynomial` are out of scope (not the numeric array API).
"""

from __future__ import annotations

import ast
import builtins
import inspect
import io
import os
import textwrap
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fdcheck import check_grads

import rulekit
from rulekit import PRIMAL_ONLY, AmbiguousRuleError, MissingRuleError, TracingError
from rules.numpy.traced_through import NOT_DISPATCHED, TRACED_THROUGH

Example = tuple[np.ndarray, Callable[[Any], Any]]  # (input x, call on x)

_NAMESPACES = (
    ("np", np),
    ("np.linalg", np.linalg),
    ("np.fft", np.fft),
    ("np.emath", np.emath),
    ("np.lib.stride_tricks", np.lib.stride_tricks),
)


def _takes_like(f: Any) -> bool:
    """Whether `f` is dispatched through its `like=` argument (np.ones, np.array, ...)."""
    try:
        return "like" in inspect.signature(f).parameters
    except (TypeError, ValueError):  # a C function without a signature (np.fromstring)
        return "like : array_like" in (f.__doc__ or "")


def _dispatched() -> dict[Any, str]:
    """Every public dispatched function → its name (`np.linalg.norm`)."""
    found: dict[Any, str] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for prefix, module in _NAMESPACES:
            for name in sorted(dir(module)):
                f = getattr(module, name, None)
                if name.startswith("_") or not callable(f) or isinstance(f, (type, np.ufunc)):
                    continue
                if f not in found and (hasattr(f, "_implementation") or _takes_like(f)):
                    found[f] = f"{prefix}.{name}"
    return found


DISPATCHED = _dispatched()
RULED = {r.f for r in rulekit.registry.entries()}


def _resolve(name: str) -> Any:
    """`"linalg.cond"` → np.linalg.cond, or None where this NumPy has no such function."""
    obj: Any = np
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return obj


def _by_function(examples: dict[str, Example]) -> dict[Any, Example]:
    resolved = {_resolve(n): e for n, e in examples.items()}
    resolved.pop(None, None)
    return resolved


def _name(f: Any) -> str:
    return DISPATCHED.get(f) or str(getattr(f, "__name__", repr(f)))


# -- inputs (fixed seed) ----------------------------------------------------------------------

_rng = np.random.default_rng(11)
_V = _rng.normal(size=5)
_POS = np.abs(_V) + 0.5
_M = _rng.normal(size=(3, 4))
_SQ = _rng.normal(size=(3, 3)) + 3 * np.eye(3)
_T4 = np.eye(4).reshape(2, 2, 2, 2) + 0.1 * _rng.normal(size=(2, 2, 2, 2))
_T3 = np.eye(4).reshape(2, 2, 4) + 0.1 * _rng.normal(size=(2, 2, 4))
_MASK = np.array([True, False, True, True, False])


# -- (b) PRIMAL_ONLY: one example each (the test below requires it) -------------------------------

PRIMAL_EXAMPLES: dict[str, Example] = {
    "array_equal": (_V, lambda x: np.array_equal(x, _V)),
    "array_equiv": (_V, lambda x: np.array_equiv(x, _V[None, :])),
    "allclose": (_V, lambda x: np.allclose(x, _V + 1e-12)),
    "isclose": (_V, lambda x: np.isclose(x, x[0])),  # (a traced scalar too)
    "isreal": (_V, lambda x: np.isreal(x)),
    "iscomplex": (_V, lambda x: np.iscomplex(x)),
    "isrealobj": (_V, lambda x: np.isrealobj(x)),
    "iscomplexobj": (_V, lambda x: np.iscomplexobj(x)),
    "isneginf": (_V, lambda x: np.isneginf(x)),
    "isposinf": (_V, lambda x: np.isposinf(x)),
    "isin": (_V, lambda x: np.isin(x, _V[:2])),
    "in1d": (_V, lambda x: _resolve("in1d")(x, _V[:2])),  # (removed names: not np.in1d)
    "all": (_M, lambda x: np.all(x, axis=0)),
    "any": (_M, lambda x: np.any(x)),
    "alltrue": (_V, lambda x: _resolve("alltrue")(x)),
    "sometrue": (_V, lambda x: _resolve("sometrue")(x)),
    "shares_memory": (_V, lambda x: np.shares_memory(x, x)),
    "may_share_memory": (_V, lambda x: np.may_share_memory(x, _V)),
    "shape": (_M, lambda x: np.shape(x)),
    "ndim": (_M, lambda x: np.ndim(x)),
    "size": (_M, lambda x: np.size(x, 1)),
    "diag_indices_from": (_SQ, lambda x: np.diag_indices_from(x)),
    "tril_indices_from": (_M, lambda x: np.tril_indices_from(x, -1)),
    "triu_indices_from": (_M, lambda x: np.triu_indices_from(x)),
    "einsum_path": (_M, lambda x: np.einsum_path("ij,kj->ik", x, _M, optimize="greedy")),
    "result_type": (_V, lambda x: np.result_type(x, np.float32)),
    "can_cast": (_V, lambda x: np.can_cast(x, np.float32)),
    "min_scalar_type": (_V, lambda x: np.min_scalar_type(x)),
    "common_type": (_V, lambda x: np.common_type(x, _V)),
    "argmax": (_M, lambda x: np.argmax(x, axis=1)),
    "argmin": (_M, lambda x: np.argmin(x)),
    "nanargmax": (_V, lambda x: np.nanargmax(x)),
    "nanargmin": (_V, lambda x: np.nanargmin(x)),
    "argsort": (_M, lambda x: np.argsort(x, axis=0)),
    "argpartition": (_V, lambda x: np.argpartition(x, 2)),
    "lexsort": (_V, lambda x: np.lexsort((x, _V))),  # (a traced value inside a tuple)
    "argwhere": (_M, lambda x: np.argwhere(x > 0)),
    "nonzero": (_M, lambda x: np.nonzero(x)),
    "flatnonzero": (_M, lambda x: np.flatnonzero(x)),
    "count_nonzero": (_M, lambda x: np.count_nonzero(x, axis=0)),
    "searchsorted": (_V, lambda x: np.searchsorted(np.sort(_V), x)),
    "digitize": (_V, lambda x: np.digitize(x, [-1.0, 0.0, 1.0])),
    "linalg.matrix_rank": (_SQ, lambda x: np.linalg.matrix_rank(x)),
    # integer, boolean or datetime input only: on a float array NumPy raises, and so must we
    "unravel_index": (_V, lambda x: np.unravel_index(x, (2, 3))),
    "ravel_multi_index": (_V, lambda x: np.ravel_multi_index((x, x), (4, 4))),
    "packbits": (_V, lambda x: np.packbits(x)),
    "unpackbits": (_V, lambda x: np.unpackbits(x)),
    "busday_count": (_V, lambda x: np.busday_count(x, x)),
    "busday_offset": (_V, lambda x: np.busday_offset(x, 1)),
    "is_busday": (_V, lambda x: np.is_busday(x)),
    "datetime_as_string": (_V, lambda x: np.datetime_as_string(x)),
    "array2string": (_M, lambda x: np.array2string(x, precision=3)),
    "array_repr": (_M, lambda x: np.array_repr(x)),
    "array_str": (_V, lambda x: np.array_str(x)),
}

# -- (c) traced through numpy's Python implementation by the generic fallback --------------------
# (rules.numpy.traced_through lists the ones documented in docs/coverage.md.)

TRACED_GENERIC: dict[str, Example] = {
    "dstack": (_M, lambda x: np.dstack([x, 2 * x])),
    "extract": (_V, lambda x: np.extract(_MASK, x)),
    "logspace": (_V, lambda x: np.logspace(x[:2], x[2:4], 3)),
    "polyadd": (_V, lambda x: np.polyadd(np.ones(8), x)),
    "polysub": (_V, lambda x: np.polysub([1.0], x)),
    "put_along_axis": (_M, lambda x: _put_along_axis(x)),
    "resize": (_M, lambda x: np.resize(x, (5, 5))),
    "unstack": (_M, lambda x: np.unstack(x, axis=1)),
    # the bin edges follow the data range; the counts are plain (piecewise constant).
    # (density=True fails: it calls Traced.reshape with an ndarray shape; weights=: bincount)
    "histogramdd": (_M, lambda x: np.histogramdd(x.T, bins=2)[1]),
    "linalg.diagonal": (_M, lambda x: np.linalg.diagonal(x, offset=1)),
    "linalg.matmul": (_M, lambda x: np.linalg.matmul(x, _M.T)),
    "linalg.trace": (_SQ, lambda x: np.linalg.trace(x, offset=1)),
}


def _put_along_axis(x: Any) -> Any:
    x = x * 1.0
    np.put_along_axis(x, np.array([[0], [1], [2]]), x[:, 1:2] ** 2, axis=1)
    return x


# -- (d) refused: tracing raises (MissingRuleError, or TracingError naming the alternative) ----

REFUSED: dict[str, Example] = {
    # differentiable, but no rule yet and numpy's implementation converts with np.asarray
    # or calls a function without a rule: MissingRuleError names the missing rule
    "apply_over_axes": (_M, lambda x: np.apply_over_axes(np.sum, x, [0])),
    "broadcast_arrays": (_V, lambda x: np.broadcast_arrays(x, np.ones((2, 5)))),
    "choose": (_V, lambda x: np.choose(np.array([0, 1, 0, 1, 0]), [x, 2 * x])),
    "compress": (_V, lambda x: np.compress(_MASK, x)),
    "diagflat": (_V, lambda x: np.diagflat(x)),
    "ediff1d": (_V, lambda x: np.ediff1d(x)),
    "geomspace": (_POS, lambda x: np.geomspace(x[0], x[1], 4)),
    "i0": (_V, lambda x: np.i0(x)),
    "matrix_transpose": (_M, lambda x: np.matrix_transpose(x)),
    "nancumprod": (_V, lambda x: np.nancumprod(x)),
    "nancumsum": (_V, lambda x: np.nancumsum(x)),
    "nanprod": (_V, lambda x: np.nanprod(x)),
    "nanstd": (_V, lambda x: np.nanstd(x)),
    "nanvar": (_V, lambda x: np.nanvar(x)),
    "piecewise": (_V, lambda x: np.piecewise(x, [x < 0, x >= 0], [lambda t: -t, lambda t: t])),
    "poly": (_V, lambda x: np.poly(x)),
    "polyder": (_V, lambda x: np.polyder(x)),
    "polydiv": (_V, lambda x: np.polydiv(x, np.array([1.0, 2.0]))),
    "polyint": (_V, lambda x: np.polyint(x)),
    "polymul": (_V, lambda x: np.polymul(x, [1.0, 2.0])),
    "roots": (_V, lambda x: np.roots(x)),
    "sort_complex": (_V, lambda x: np.sort_complex(x)),
    "trim_zeros": (_V, lambda x: np.trim_zeros(x)),
    "unwrap": (_V, lambda x: np.unwrap(x)),
    "linalg.cross": (_V, lambda x: np.linalg.cross(x[:3], _V[2:])),
    "linalg.matrix_norm": (_M, lambda x: np.linalg.matrix_norm(x)),
    "linalg.matrix_transpose": (_M, lambda x: np.linalg.matrix_transpose(x)),
    "linalg.outer": (_V, lambda x: np.linalg.outer(x, _V)),
    "linalg.tensorinv": (_T4, lambda x: np.linalg.tensorinv(x, ind=2)),
    "linalg.tensorsolve": (_T3, lambda x: np.linalg.tensorsolve(x, np.ones((2, 2)))),
    "linalg.vecdot": (_M, lambda x: np.linalg.vecdot(x, _M)),
    "linalg.vector_norm": (_V, lambda x: np.linalg.vector_norm(x)),
    "fft.hfft": (_V, lambda x: np.fft.hfft(x)),
    "fft.ihfft": (_V, lambda x: np.fft.ihfft(x)),
    "emath.arccos": (_V, lambda x: np.emath.arccos(x)),
    "emath.arcsin": (_V, lambda x: np.emath.arcsin(x)),
    "emath.arctanh": (_V, lambda x: np.emath.arctanh(x)),
    "emath.log": (_POS, lambda x: np.emath.log(x)),
    "emath.log10": (_POS, lambda x: np.emath.log10(x)),
    "emath.log2": (_POS, lambda x: np.emath.log2(x)),
    "emath.logn": (_POS, lambda x: np.emath.logn(3.0, x)),
    "emath.power": (_POS, lambda x: np.emath.power(x, 2.5)),
    "emath.sqrt": (_POS, lambda x: np.emath.sqrt(x)),
    "lib.stride_tricks.sliding_window_view": (
        _V,
        lambda x: np.lib.stride_tricks.sliding_window_view(x, 3),
    ),
    # sorted unique *values* (floats from the input): not PRIMAL_ONLY
    "unique": (_V, lambda x: np.unique(x)),
    "unique_all": (_V, lambda x: np.unique_all(x)),
    "unique_counts": (_V, lambda x: np.unique_counts(x)),
    "unique_inverse": (_V, lambda x: np.unique_inverse(x)),
    "unique_values": (_V, lambda x: np.unique_values(x)),
    "intersect1d": (_V, lambda x: np.intersect1d(x, x[:3])),
    "setdiff1d": (_V, lambda x: np.setdiff1d(x, x[:2])),
    "setxor1d": (_V, lambda x: np.setxor1d(x, x[:2])),
    "union1d": (_V, lambda x: np.union1d(x, x[:2])),
    "ix_": (_V, lambda x: np.ix_(x, x)),  # returns its (float) inputs reshaped
    # counts are piecewise constant, but bin edges follow the data range and weights= sums
    # weights: not PRIMAL_ONLY (histogramdd is traced through; these fail inside)
    "histogram": (_V, lambda x: np.histogram(x, bins=3)),
    "histogram2d": (_V, lambda x: np.histogram2d(x, x, bins=3)),
    "histogram_bin_edges": (_V, lambda x: np.histogram_bin_edges(x, bins=3)),
    "bincount": (_V, lambda x: np.bincount(np.array([0, 1, 1, 2, 0]), weights=x)),
    # the values would leave the trace through a file
    "save": (_V, lambda x: np.save(io.BytesIO(), x)),
    "savetxt": (_V, lambda x: np.savetxt(io.BytesIO(), x)),
    "savez": (_V, lambda x: np.savez(io.BytesIO(), x)),
    "savez_compressed": (_V, lambda x: np.savez_compressed(io.BytesIO(), x)),
    # dispatched through like= only: a traced prototype makes no traced array
    # (np.array and np.full: rules.numpy.traced_through.NOT_DISPATCHED)
    "arange": (_V, lambda x: np.arange(3.0, like=x)),
    "asanyarray": (_V, lambda x: np.asanyarray([1.0], like=x)),
    "asarray": (_V, lambda x: np.asarray([1.0], like=x)),
    "ascontiguousarray": (_V, lambda x: np.ascontiguousarray([1.0], like=x)),
    "asfortranarray": (_V, lambda x: np.asfortranarray([1.0], like=x)),
    "empty": (_V, lambda x: np.empty(3, like=x)),
    "eye": (_V, lambda x: np.eye(2, like=x)),
    "frombuffer": (_V, lambda x: np.frombuffer(b"\0" * 8, like=x)),
    "fromfile": (_V, lambda x: np.fromfile(os.devnull, like=x)),
    "fromfunction": (_V, lambda x: np.fromfunction(lambda i: i, (2,), like=x)),
    "fromiter": (_V, lambda x: np.fromiter(iter([1.0]), float, like=x)),
    "fromstring": (_V, lambda x: np.fromstring("1 2", sep=" ", like=x)),
    "genfromtxt": (_V, lambda x: np.genfromtxt(io.StringIO("1 2"), like=x)),
    "identity": (_V, lambda x: np.identity(2, like=x)),
    "loadtxt": (_V, lambda x: np.loadtxt(io.StringIO("1 2"), like=x)),
    "ones": (_V, lambda x: np.ones(3, like=x)),
    "require": (_V, lambda x: np.require([1.0], like=x)),
    "tri": (_V, lambda x: np.tri(2, like=x)),
    "zeros": (_V, lambda x: np.zeros(3, like=x)),
}

PRIMAL_FNS = _by_function(PRIMAL_EXAMPLES)
GENERIC_FNS = _by_function(TRACED_GENERIC)
REFUSED_FNS = _by_function(REFUSED)


# -- the audit ----------------------------------------------------------------------------------


def _classes(f: Any) -> list[str]:
    found = []
    if f in RULED:
        found.append("(a) has a rule")
    if f in PRIMAL_ONLY:
        found.append("(b) PRIMAL_ONLY")
    if f in TRACED_THROUGH or f in GENERIC_FNS:
        found.append("(c) traced through")
    if f in REFUSED_FNS or f in NOT_DISPATCHED:
        found.append("(d) refused")
    return found


def test_every_dispatched_function_is_classified() -> None:
    assert len(DISPATCHED) > 250  # the enumeration found numpy's surface
    unclassified = sorted(n for f, n in DISPATCHED.items() if not _classes(f))
    assert not unclassified, (
        f"NumPy functions dispatched to traced values with no decision: {unclassified}. "
        "Register a rule, add them to rulekit/_primal_only.py (only if no output can carry a "
        "derivative), or list them in TRACED_GENERIC or REFUSED in this file."
    )


def test_each_dispatched_function_is_in_exactly_one_class() -> None:
    # (a rule for a PRIMAL_ONLY function would never run: the engine answers it on primals)
    several = {n: _classes(f) for f, n in DISPATCHED.items() if len(_classes(f)) > 1}
    assert not several, f"functions in more than one class (remove the stale entry): {several}"


def test_listed_functions_are_dispatched() -> None:
    # an entry numpy does not dispatch is dead: the engine never sees the call
    for listed in (PRIMAL_ONLY, set(PRIMAL_FNS), set(GENERIC_FNS), set(REFUSED_FNS)):
        stale = [getattr(f, "__name__", f) for f in listed if f not in DISPATCHED]
        assert not stale, f"not dispatched by numpy: {stale}"


def test_traced_through_functions_have_a_python_implementation() -> None:
    # the generic fallback (rulekit._engine._traced) only runs implementations written in Python
    for f in GENERIC_FNS:
        assert hasattr(f._implementation, "__code__"), _name(f)


# -- numpy implementations that catch a TracingError ---------------------------------------------

# The errors that mean "this value cannot be traced": a leak (TracingError, a RuntimeError)
# and a call with no rule (MissingRuleError / AmbiguousRuleError, LookupErrors). A numpy
# `except` clause that catches one turns the refusal into some other answer, as np.array_equal
# did (`except Exception: return False`). `except TypeError:` clauses do not count, though they
# catch TangentError and a TracingError subclass that is also a TypeError: numpy's retry with
# np.asarray, which raises again (`_wrapfunc`), or concern other arguments (axis, bins, reps).
_TRACE_ERRORS = (TracingError, MissingRuleError, AmbiguousRuleError)


def _exception_type(node: ast.expr, scope: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return scope.get(node.id, getattr(builtins, node.id, None))
    if isinstance(node, ast.Attribute):
        base = _exception_type(node.value, scope)
        return None if base is None else getattr(base, node.attr, None)
    return None


def _catches_trace_error(handler: ast.ExceptHandler, scope: dict[str, Any]) -> bool:
    if handler.type is None:  # bare except
        return True
    nodes = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for node in nodes:
        t = _exception_type(node, scope)
        if not isinstance(t, type):  # not resolvable: assume the worst
            return True
        if any(issubclass(e, t) for e in _TRACE_ERRORS):
            return True
    return False


def _catching_clauses(impl: Any) -> list[str]:
    """`except` clauses catching a trace error in `impl` or the numpy helpers it calls."""
    found: list[str] = []
    todo, seen = [impl], set()
    while todo:
        fn = todo.pop()
        if fn in seen:
            continue
        seen.add(fn)
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError, SyntaxError):
            continue
        scope = fn.__globals__
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and _catches_trace_error(node, scope):
                what = ast.unparse(node.type) if node.type is not None else "(bare)"
                found.append(f"{fn.__name__}: except {what}")
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                helper = scope.get(node.id)  # private numpy helpers; dispatched ones dispatch
                if (
                    isinstance(helper, types.FunctionType)
                    and (helper.__module__ or "").startswith("numpy")
                    and not hasattr(helper, "_implementation")
                ):
                    todo.append(helper)
    return found


def _catching_functions() -> dict[Any, list[str]]:
    out = {}
    for f in DISPATCHED:
        impl = getattr(f, "_implementation", None)
        if impl is not None and hasattr(impl, "__code__"):
            clauses = _catching_clauses(impl)
            if clauses:
                out[f] = clauses
    return out


def test_functions_that_catch_a_tracing_error_have_a_rule_or_run_on_primals() -> None:
    catching = _catching_functions()
    assert np.array_equal in catching  # the scan sees the bug class it guards against
    silent = {_name(f): c for f, c in catching.items() if f not in RULED and f not in PRIMAL_ONLY}
    assert not silent, (
        f"numpy functions whose implementation catches a TracingError or MissingRuleError, so "
        f"that traced through they may answer silently wrong: {silent}. Give them a rule or "
        "add them to PRIMAL_ONLY."
    )


# -- behaviour ------------------------------------------------------------------------------------


def _outcome(call: Callable[[Any], Any], x: Any) -> Any:
    """`call(x)`'s result, or the type of the exception it raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (np.in1d, np.alltrue, ...)
        try:
            return call(x)
        except Exception as e:
            return type(e)


def _assert_same(got: Any, want: Any, where: str = "result") -> None:
    assert type(got) is type(want), f"{where}: {type(got)} != {type(want)}"
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape, where
        assert np.array_equal(got, want), where
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_same(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def _floats(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_floats(v) for v in value)
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype.kind in "fc"
    return isinstance(value, (float, complex))


def test_every_primal_only_function_has_an_example() -> None:
    missing = [f.__name__ for f in PRIMAL_ONLY if f not in PRIMAL_FNS]
    assert not missing, f"add an example to PRIMAL_EXAMPLES for {missing}"


@pytest.mark.parametrize("fn", sorted(PRIMAL_FNS, key=_name), ids=_name)
def test_primal_only_function_returns_no_float_values(fn: Any) -> None:
    # a float result computed from float inputs could carry a derivative: not PRIMAL_ONLY
    x0, call = PRIMAL_FNS[fn]
    assert not _floats(_outcome(call, x0.copy()))


@pytest.mark.parametrize("fn", sorted(PRIMAL_FNS, key=_name), ids=_name)
def test_primal_only_function_answers_as_numpy_on_traced_values(fn: Any) -> None:
    x0, call = PRIMAL_FNS[fn]
    want = _outcome(call, x0.copy())
    seen = []

    def loss(x: Any) -> Any:
        seen.append(_outcome(call, x))
        return np.sum(x * x)

    value, g = rulekit.value_and_grad(loss)(x0.copy())
    _assert_same(seen[0], want)
    assert value == pytest.approx(np.sum(x0 * x0))
    np.testing.assert_allclose(g, 2 * x0)


def test_code_branching_on_array_equal_takes_numpy_s_branch() -> None:
    # issue #11 item 6: np.array_equal returned False on traced arrays (its `except Exception`
    # swallowed the TracingError), so this took the other branch: a wrong gradient, silently
    ref = _V.copy()

    def f(x: Any) -> Any:
        if np.array_equal(x, ref) and np.array_equiv(x, ref) and np.allclose(x, ref):
            return np.sum(x * x)
        return np.sum(x)

    value, g = rulekit.value_and_grad(f)(_V.copy())
    assert value == pytest.approx(np.sum(_V * _V))
    np.testing.assert_allclose(g, 2 * _V)


def test_a_traced_out_array_of_a_primal_only_function_is_refused_or_correct() -> None:
    # Running on primals would write into the primal of a traced `out=` behind the tape's back:
    # d/dx sum(buf) is 0 once buf is overwritten, and the tape would still send 1 to x.
    x0 = _M[:2].copy()

    def f(x: Any) -> Any:
        buf = x[0] * 1.0
        np.any(x > 0, axis=0, out=buf)
        return np.sum(buf)

    want = np.sum(np.any(x0 > 0, axis=0))
    try:
        value, g = rulekit.value_and_grad(f)(x0)
    except TracingError:
        return
    assert value == want
    np.testing.assert_array_equal(g, np.zeros_like(x0))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_isscalar_answers_as_numpy_on_traced_values(dtype: Any) -> None:
    # np.isscalar is not dispatched (isinstance checks): a traced element must be a Number
    x0 = np.array([1.5, -2.0], dtype=dtype)
    seen = []

    def f(x: Any) -> Any:
        seen.append((np.isscalar(x[0]), np.isscalar(x[0, ...]), np.isscalar(x)))
        return np.sum(np.abs(x))

    rulekit.value_and_grad(f)(x0)
    assert seen == [(np.isscalar(x0[0]), np.isscalar(x0[0, ...]), np.isscalar(x0))]
    assert seen == [(True, False, False)]


@pytest.mark.parametrize("x0", [np.float64(1.5), np.array(1.5)], ids=["float64", "0-d"])
def test_isscalar_of_a_traced_argument_answers_as_numpy(x0: Any) -> None:
    seen = []

    def f(x: Any) -> Any:
        seen.append(np.isscalar(x))
        return x * x

    rulekit.value_and_grad(f)(x0)
    assert seen == [np.isscalar(x0)]


def _parts_loss(call: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def loss(x: Any) -> Any:
        out = call(x)
        parts = out if isinstance(out, (tuple, list)) else [out]
        return sum(np.sum(np.sin(p + k)) for k, p in enumerate(parts))

    return loss


@pytest.mark.parametrize("fn", sorted(GENERIC_FNS, key=_name), ids=_name)
def test_traced_through_function_matches_finite_differences(fn: Any) -> None:
    x0, call = GENERIC_FNS[fn]
    loss = _parts_loss(call)
    check_grads(loss, x0, calls=2)


@pytest.mark.parametrize("name", sorted(n for n in REFUSED if _resolve(n) is not None))
def test_refused_function_raises_on_traced_input(name: str) -> None:
    x0, call = REFUSED[name]

    def loss(x: Any) -> Any:
        call(x)
        return np.sum(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (numpy on the example values)
        with pytest.raises((MissingRuleError, TracingError)):
            rulekit.value_and_grad(loss)(x0.copy())
