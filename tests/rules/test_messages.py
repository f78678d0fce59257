"""Error messages name the right thing, and put the fix first (issue #11).

* SciPy's public names with a bundled wrapper are routed to it (rules/scipy/_routing.py):
  a traced call through the public name gives the wrapper's value and gradient (or the
  rule's own TracingError), and SciPy's own function behind it (a name bound before the
  routing was installed) called on a traced array names *its* bundled wrapper and the
  routed public name (scipy shares one code object between cholesky, cho_factor, qr, eigh,
  ... and between the methods of all scipy.stats distributions): one case per bundled
  wrapper, generated from the registry. The named wrapper is a public dotted name that
  imports to the wrapper.
* scipy.special.zeta / lambertw run through their private ufuncs: they work, or refuse
  naming the public function.
* np.put / np.place / np.putmask / np.fill_diagonal writing a traced value into a plain
  array raise the TracingError about the untraced destination.
* A traced value passed to a numba-jitted function raises TracingError (not numba's
  TypingError), whose fix is rulekit.primitive plus a rule; and that fix works.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pytest
import scipy.linalg
import scipy.special

import rulekit
import rules  # (importing the package registers every bundled rule)
from rulekit import Array, CoDual, NoFData, NoRData, Primitive, registry
from rulekit._engine._wrappers import exported_name, public_name
from rules.scipy._routing import original


def _fix_first(msg: str) -> None:
    """The fix comes right after one short clause saying what happened."""
    head, sep, _ = msg.partition("Fix:")
    assert sep, msg
    assert len(head) < 200 and ". " not in head.rstrip(". "), msg


def _resolve(dotted: str) -> Any:
    """Import a dotted name: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(dotted)


def _is_private(dotted: str) -> bool:
    return any(p.startswith("_") for p in dotted.split("."))


# -- every bundled scipy wrapper ----------------------------------------------------------------
#
# f2py's argument conversion (scipy.linalg.blas, ...) has an upstream refcount bug: when
# `__array__` raises, it releases the dtype it handed to PyArray_FromAny a second time
# (numpy then prints "Reference count error detected" at exit). Those cases run in a
# subprocess, so that the test process keeps its dtypes intact.


def _is_f2py(fn: Any) -> bool:
    return type(fn).__name__ == "fortran"


def _scipy_wrappers() -> list[Any]:
    """(wrapper, its module, one example call) for each bundled `rulekit.primitive` of scipy."""
    seen: dict[int, Any] = {}
    registry.load_all("rules")  # every deferred scipy part, whatever this process imported
    for reg in registry.entries(module="rules"):
        f = reg.f
        if not isinstance(f, Primitive) or not public_name(f.fn).startswith("scipy."):
            continue
        examples = reg.examples() if callable(reg.examples) else (reg.examples or [])
        for ex in examples:
            arrays = [
                i
                for i, a in enumerate(ex.args)
                if isinstance(a, np.ndarray) and a.dtype.kind in "fc"
            ]
            if arrays and id(f) not in seen:
                seen[id(f)] = pytest.param(f, reg.module, ex, arrays[0], id=public_name(f.fn))
    return list(seen.values())


WRAPPERS = _scipy_wrappers()
PYTHON_WRAPPERS = [p for p in WRAPPERS if not _is_f2py(p.values[0].fn)]
F2PY_WRAPPERS = [p for p in WRAPPERS if _is_f2py(p.values[0].fn)]


#: the one bundled scipy wrapper whose public name is not routed (docs/scipy-calls.md: its
#: wrapper also corrects a scipy result, and plain calls must stay scipy's own)
NOT_ROUTED = {"scipy.linalg.solve_sylvester"}


def test_every_kind_of_bundled_wrapper_is_covered() -> None:
    names = {p.id for p in WRAPPERS}
    expected = ["scipy.linalg.cholesky", "scipy.linalg.cho_factor", "scipy.linalg.lu_factor",
                "scipy.linalg.blas.dgemm", "scipy.stats.t.cdf", "scipy.stats.norm.cdf",
                "scipy.special.logsumexp", "scipy.linalg.solve_sylvester"]  # fmt: skip
    assert set(expected) <= names, sorted(names)
    assert len(PYTHON_WRAPPERS) > 30 and len(F2PY_WRAPPERS) > 30
    # every public name is routed to its very wrapper, except the one that must not be
    unrouted = set()
    for p in WRAPPERS:
        wrapper = p.values[0]
        public = _resolve(p.id)
        if getattr(public, "__rulekit_primitive__", None) is wrapper:
            assert original(public) == wrapper.fn, p.id  # (`==`: bound methods are made anew)
            assert public != wrapper.fn, p.id
        else:
            assert original(public) is public and not isinstance(public, Primitive), p.id
            unrouted.add(p.id)
    assert unrouted == NOT_ROUTED


def check_wrapper_hint(
    wrapper: Primitive, module: str, ex: rulekit.Example, argnum: int
) -> str | None:
    """Call scipy on the example, argument `argnum` traced, two ways:

    * through its public name (`scipy.linalg.cholesky`, routed to `wrapper`): the same value
      and gradient as calling the wrapper, bit for bit, or the same TracingError the rule
      raises (returned: `daxpy` overwriting an untraced `y`);
    * through scipy's own function behind it (a name bound before the routing): the
      TracingError names the wrapper by a public name that imports to it, and the routed
      public name (or the call traces through, to the wrapper's result).
    """
    called = public_name(wrapper.fn)
    public = _resolve(called)  # the function users call: routed to the wrapper
    own = original(public)  # scipy's own function behind it
    assert not isinstance(public, Primitive)
    routed = called not in NOT_ROUTED
    assert (getattr(public, "__rulekit_primitive__", None) is wrapper) == routed
    assert own == wrapper.fn if routed else own is public  # (`==`: bound methods are made anew)
    where = exported_name(wrapper, module)
    assert where is not None and not _is_private(where)
    assert _resolve(where) is wrapper  # a public, importable name of the registered wrapper

    def loss(fn: Any) -> Any:
        def f(*args: Any) -> Any:
            out = fn(*args, **ex.kwargs)
            leaves = out if isinstance(out, tuple) else (out,)
            skip = (bool, int, str, type(None))
            return sum(np.sum(np.real(v)) for v in leaves if not isinstance(v, skip))

        return f

    def run(fn: Any) -> Any:
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in ex.args]
        return rulekit.value_and_grad(loss(fn), argnums=argnum)(*args)

    refused = None
    try:
        expected = run(wrapper)
    except rulekit.TracingError as e:  # the rule's own refusal: the routed call gives it too
        refused = str(e)
        expected = None
    if routed:
        if refused is None:
            value = run(public)
            np.testing.assert_array_equal(value[0], expected[0], strict=True)
            np.testing.assert_array_equal(value[1], expected[1], strict=True)
        else:
            with pytest.raises(rulekit.TracingError) as info:
                run(public)
            assert str(info.value) == refused

    try:
        value = run(own)
    except rulekit.TracingError as e:
        msg = str(e)
        if routed:
            fix = f"Fix: call {called}(...) through its module, or {where}(...), instead of"
        else:
            fix = f"Fix: call {where}(...) instead of {called}(...)"
        assert fix in msg, msg
        hint = msg[msg.index(fix) :]
        assert not any(_is_private(n) for n in re.findall(r"[\w.]+\.[\w.]+", hint)), hint
    else:  # traced through: the same as through the wrapper
        assert expected is not None
        np.testing.assert_allclose(value[0], expected[0], rtol=1e-12)
        np.testing.assert_allclose(value[1], expected[1], rtol=1e-10)
    return refused


@pytest.mark.parametrize(("wrapper", "module", "ex", "argnum"), PYTHON_WRAPPERS)
def test_plain_scipy_call_names_its_wrapper(
    wrapper: Primitive, module: str, ex: rulekit.Example, argnum: int
) -> None:
    assert check_wrapper_hint(wrapper, module, ex, argnum) is None


_F2PY_SCRIPT = """
import sys
sys.path[:0] = [{tests!r}, {here!r}]
import test_messages as m
failed = []
for p in m.F2PY_WRAPPERS:
    try:
        refused = m.check_wrapper_hint(*p.values)
    except Exception as e:
        failed.append(f"{{p.id}}: {{type(e).__name__}}: {{e}}")
    else:
        if refused is not None:
            print("refused", p.id, "|", refused)
print(len(m.F2PY_WRAPPERS), "checked")
assert not failed, "\\n".join(failed)
"""


def test_plain_f2py_call_names_its_wrapper() -> None:
    """Every f2py wrapper (scipy.linalg.blas.dgemm, ...), in a subprocess (see above)."""
    here = str(Path(__file__).parent)
    script = _F2PY_SCRIPT.format(tests=str(Path(here).parent), here=here)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{len(F2PY_WRAPPERS)} checked" in run.stdout
    # The axpy examples overwrite `y` (not the traced argument): the rule refuses, clearly
    refused = dict(
        line.removeprefix("refused ").split(" | ", 1)
        for line in run.stdout.splitlines()
        if line.startswith("refused ")
    )
    assert sorted(refused) == [f"scipy.linalg.blas.{t}axpy" for t in "cdsz"], run.stdout
    for name, msg in refused.items():
        assert msg.startswith(f"{name} overwrites its argument y= "), msg
        assert "but y is not traced: the gradient would be lost. Pass a traced array" in msg


@pytest.mark.parametrize("fn", [scipy.linalg.qr, scipy.linalg.eigh])
def test_shared_code_without_a_wrapper_gets_no_wrong_hint(fn: Any) -> None:
    # qr and eigh share scipy's batching `wrapper` code with cholesky & co but have no wrapper
    with pytest.raises(rulekit.TracingError) as info:
        rulekit.grad(lambda a: np.sum(fn(a)[0]))(np.eye(3) + 1.0)
    assert "rules.scipy.linalg" not in str(info.value)


def test_stats_hint_names_the_distribution_called() -> None:
    import scipy.stats

    # scipy's own method (norm.cdf and t.cdf are one function), bound before the routing
    own = original(scipy.stats.t.cdf)
    assert own.__func__ is original(scipy.stats.norm.cdf).__func__
    with pytest.raises(rulekit.TracingError) as info:
        rulekit.grad(lambda x: np.sum(own(x, 3.0)))(np.linspace(-1, 1, 3))
    msg = str(info.value)
    assert (
        "Fix: call scipy.stats.t.cdf(...) through its module, or rules.scipy.stats.t.cdf(...)"
        in msg
    )
    assert "norm" not in msg and "registered by" not in msg
    # the routed method differentiates: t's density, not norm's
    x = np.linspace(-1, 1, 3)
    g = rulekit.grad(lambda x: np.sum(scipy.stats.t.cdf(x, 3.0)))(x)
    np.testing.assert_allclose(g, original(scipy.stats.t.pdf)(x, 3.0), rtol=1e-12)


# -- scipy.special.zeta, lambertw (private ufuncs underneath) -----------------------------------


def test_hurwitz_zeta_in_q() -> None:
    q = np.array([0.7, 1.5, 3.0])
    g = rulekit.grad(lambda q: np.sum(scipy.special.zeta(3.0, q)))(q)
    np.testing.assert_allclose(g, -3.0 * scipy.special.zeta(4.0, q), rtol=1e-12)


@pytest.mark.parametrize(
    ("f", "call"),
    [
        (lambda x: scipy.special.zeta(x), "scipy.special.zeta(x)"),
        (lambda x: scipy.special.zeta(x, 2.0), "scipy.special.zeta(x, q)"),
    ],
)
def test_zeta_in_x_is_refused_by_its_public_name(f: Any, call: str) -> None:
    with pytest.raises(NotImplementedError) as info:
        rulekit.grad(lambda x: np.sum(f(x)))(np.array([2.5, 3.0]))
    msg = str(info.value)
    assert msg.startswith(f"{call}: the derivative with respect to x")
    _fix_first(msg)
    assert "_zeta" not in msg and "_riemann" not in msg


def test_lambertw() -> None:
    z = np.array([-0.2, 0.0, 0.5, 3.0])
    w = scipy.special.lambertw(z).real
    g = rulekit.grad(lambda z: np.sum(np.real(scipy.special.lambertw(z))))(z)
    np.testing.assert_allclose(g, np.exp(-w) / (1 + w), rtol=1e-12)  # W′ = e^{−W}/(1 + W)
    g = rulekit.grad(lambda z: np.sum(np.real(scipy.special.lambertw(z, k=-1))))(-z[:1])
    assert np.isfinite(g).all()
    # (scipy's own functions, re-exported: their rules are registered for them, no wrapper)
    assert rules.scipy.special.zeta is scipy.special.zeta
    assert rules.scipy.special.lambertw is scipy.special.lambertw


# -- writes into a plain array ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("write", "name"),
    [
        (lambda plain, v: np.put(plain, [0, 2, 4], v), "np.put(a, ind, v)"),
        (lambda plain, v: np.place(plain, np.arange(5) % 2 == 0, v), "np.place(arr, mask, vals)"),
        (lambda plain, v: np.putmask(plain, np.arange(5) < 3, v), "np.putmask(a, mask, values)"),
    ],
)
def test_traced_value_into_plain_destination(write: Any, name: str) -> None:
    plain = np.zeros(5)

    def f(v: Any) -> Any:
        write(plain, v)
        return np.sum(v)

    with pytest.raises(rulekit.TracingError) as info:
        rulekit.grad(f)(np.ones(3))
    msg = str(info.value)
    assert msg.startswith(f"{name} writes a traced value into an untraced array. Fix: make")
    _fix_first(msg)
    assert not plain.any()  # nothing was written

    def into_ints(v: Any) -> Any:
        np.put(np.zeros(4, int), [0], v)  # an integer destination
        return np.sum(v)

    with pytest.raises(rulekit.TracingError, match=r"np\.put\(a, ind, v\) writes"):
        rulekit.grad(into_ints)(np.ones(1))


def test_fill_diagonal_into_plain_destination_names_it() -> None:
    # numpy dispatches np.fill_diagonal on its destination only: the rule is never asked
    def f(v: Any) -> Any:
        np.fill_diagonal(np.zeros((3, 3)), v)
        return np.sum(v)

    with pytest.raises(rulekit.TracingError) as info:
        rulekit.grad(f)(np.ones(3))
    assert "Fix: make the array that np.fill_diagonal writes into traced" in str(info.value)


# -- numba --------------------------------------------------------------------------------------


@numba.njit(cache=False)
def _jitted_sumsq(a: Any) -> Any:
    return np.sum(a * a)


def test_numba_jitted_function_gets_a_tracing_error() -> None:
    with pytest.raises(rulekit.TracingError) as info:
        rulekit.grad(lambda a: _jitted_sumsq(a))(np.arange(3.0))
    msg = str(info.value)
    assert msg.startswith("a traced value was passed to the numba-jitted function")
    assert "_jitted_sumsq" in msg and "Fix: wrap it with rulekit.primitive" in msg
    _fix_first(msg)
    assert "Array[np.float64, 1]" in msg
    assert _jitted_sumsq(np.arange(3.0)) == 5.0  # numba itself is unaffected


def test_the_numba_fix_works() -> None:
    wrapped = rulekit.primitive(_jitted_sumsq)

    @rulekit.rrule.register(wrapped, Array[np.float64, 1])
    def sumsq_rrule(f: CoDual, a: CoDual) -> tuple[CoDual, Any]:
        """y = Σa²  ⇒  ā += 2a·ȳ."""

        def pullback(dy: Any) -> tuple[Any, Any]:
            if a.dx is not None:
                a.dx += (2 * dy) * a.x
            return NoRData(), NoRData()

        return CoDual(float(wrapped(a.x)), NoFData()), pullback

    try:
        value, g = rulekit.value_and_grad(lambda a: wrapped(a))(np.arange(3.0))
    finally:
        for reg in registry.entries(module=__name__):
            registry.remove(reg)
    assert value == 5.0 and np.array_equal(g, [0.0, 2.0, 4.0])


def test_typeof_hook_is_installed_by_rules_not_by_import_rulekit() -> None:
    from numba.extending import typeof_impl

    from rulekit import Traced
    from rules._support import numba_guard as _numba_guard

    assert typeof_impl.dispatch(Traced) is _numba_guard._refuse
    code = "import sys, rulekit; assert 'numba' not in sys.modules, 'import rulekit loads numba'"
    subprocess.run([sys.executable, "-c", code], check=True)
