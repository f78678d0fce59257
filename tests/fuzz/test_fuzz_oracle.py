"""The fuzzer's own tests: generated programs are valid numpy, and the oracle catches planted
defects of every class it claims to catch (a wrong gradient on the first call, one that appears
only from the second call on, a wrong value, an internal error, a layout-dependent refusal, an
input left mutated) while accepting a clean refusal. The planted rules are registered for private
`rulekit.primitive` functions, so these tests do not depend on the state of the bundled rules.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fuzz.generate import programs, sample_values
from fuzz.oracle import STATS, CallPlan, Defect, check_program, fd_grad
from fuzz.program import NAMESPACE, InputSpec, Program, program_from_lines, run_reference
from hypothesis import HealthCheck, given, settings

import rulekit
import rulekit._engine._guards
import rulekit._engine._program
from rulekit import Array, CoDual, NoRData

# -- planted rules ---------------------------------------------------------------------------------

_pool: dict[tuple[int, ...], np.ndarray] = {}  # the stale buffer of `twice_stale`


def _twice(x: Any) -> Any:
    return 2.0 * x


twice_wrong = rulekit.primitive(_twice)  # pullback off by a factor 1.5
twice_stale = rulekit.primitive(_twice)  # a pooled buffer that goes back dirty
twice_value = rulekit.primitive(_twice)  # wrong primal output
twice_crash = rulekit.primitive(_twice)  # IndexError in the pullback
twice_c_only = rulekit.primitive(_twice)  # refuses non-C-contiguous inputs
twice_mutates = rulekit.primitive(_twice)  # scales its input in place and never restores it
twice_unruled = rulekit.primitive(_twice)  # no rule at all


def _rule(kind: str) -> Any:
    def rule(f: CoDual, x: CoDual) -> Any:
        if kind == "c_only" and not x.x.flags.c_contiguous:
            raise rulekit.TracingError("twice_c_only: only C-contiguous inputs")
        y = CoDual(_twice(x.x) + (1e-3 if kind == "value" else 0.0), np.zeros_like(x.x))
        if kind == "mutates":
            x.x *= 1.0 + 1e-9

        def pullback(dy: Any) -> Any:
            if kind == "crash":
                raise IndexError("planted")
            if x.dx is None:
                return NoRData(), NoRData()
            if kind == "stale":
                buf = _pool.setdefault(x.x.shape, np.zeros_like(x.x))
                buf += 2.0 * y.dx  # never zeroed: right on the first call only
                x.dx += buf
            else:
                x.dx += (3.0 if kind == "wrong" else 2.0) * y.dx
            return NoRData(), NoRData()

        return y, pullback

    return rule


for _prim, _kind in [
    (twice_wrong, "wrong"),
    (twice_stale, "stale"),
    (twice_value, "value"),
    (twice_crash, "crash"),
    (twice_c_only, "c_only"),
    (twice_mutates, "mutates"),
]:
    rulekit.rrule.register(_prim, Array[np.float64])(_rule(_kind))


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    ns = types.SimpleNamespace(**{k: v for k, v in globals().items() if k.startswith("twice_")})
    monkeypatch.setitem(NAMESPACE, "planted", ns)
    _pool.clear()
    yield
    _pool.clear()


def _program(fn: str) -> Program:
    x0 = InputSpec("x0", (3, 4), "float64", active=True)
    lines = ["r0 = np.tanh(x0)", f"r1 = planted.{fn}(r0)", "r2 = np.exp(r1.T)"]
    return program_from_lines((x0,), lines, ["r2"])


def _plans(layouts: tuple[int, ...] = (0, 1, 2, 3, 4)) -> list[CallPlan]:
    return [CallPlan(seed, (k,), (k,)) for seed, k in enumerate(layouts)]


def _defect(fn: str, plans: list[CallPlan] | None = None) -> Defect:
    with pytest.raises(Defect) as info:
        check_program(_program(fn), plans or _plans())
    return info.value


# -- tests ---------------------------------------------------------------------------------------


@settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(programs())
def test_generated_programs_are_numpy_programs(program: Program) -> None:
    """The source runs in numpy and computes what the step-by-step reference computes."""
    rng = np.random.default_rng(0)
    args = [sample_values(s, rng) for s in program.inputs]
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    # (check=False: other values than the generator's samples may leave the smooth region, a
    # kink of a data-dependent step included; the source must compute the same function anyway)
    with np.errstate(all="ignore"):
        value, _ = run_reference(
            program, [a.copy() if isinstance(a, np.ndarray) else a for a in args], check=False
        )
        f = program.compile()
        f.__globals__.update({s.name: c for s, c in zip(program.inputs, copies, strict=True)})
        assert (
            f(*[c for s, c in zip(program.inputs, copies, strict=True) if not s.captured]) == value
        )
    assert "def f(" in repr(program) and program.source() in repr(program)


def test_a_clean_program_passes() -> None:
    x0 = InputSpec("x0", (3, 4), "float64", active=True)
    program = program_from_lines((x0,), ["r0 = np.cumsum(np.tanh(x0).T, axis=1)"], ["r0"])
    assert check_program(program, _plans()) == "ok"


@pytest.mark.usefixtures("planted")
def test_a_wrong_gradient_is_caught_on_the_first_call() -> None:
    d = _defect("twice_wrong")
    assert d.kind == "wrong gradient (first call)"


@pytest.mark.usefixtures("planted")
def test_a_gradient_wrong_from_the_second_call_on_is_caught() -> None:
    d = _defect("twice_stale")
    # the planted pool is shared by both objects: the first call of `vg` is right, the next
    # call (the first of `vg_nocopy`) is wrong
    assert d.kind.startswith("wrong gradient")
    text = str(d)
    assert "# call 1 of vg (copy=True)" in text and "wrong gradient of x0" in text
    # the reproducer is runnable and reproduces the defect: its last call's gradient is wrong
    _pool.clear()
    env: dict[str, Any] = {"planted": NAMESPACE["planted"]}
    exec(text.split("\n\n", 1)[1], env)
    observed = env["grads"][0] if isinstance(env["grads"], tuple) else env["grads"]
    expected = fd_grad(env["f"], lambda v: v, [np.array(env["x0"])], 0, 1e-6)
    assert not np.allclose(observed, expected, rtol=1e-3)  # (wrong by far more than rounding)


@pytest.mark.usefixtures("planted")
def test_a_wrong_value_is_caught() -> None:
    assert _defect("twice_value").kind == "wrong value (first call)"


@pytest.mark.usefixtures("planted")
def test_an_internal_error_is_caught() -> None:
    d = _defect("twice_crash")
    assert d.kind.startswith("internal error (IndexError at ") and d.kind.endswith("first call)")


@pytest.mark.usefixtures("planted")
def test_a_refusal_that_depends_on_the_layout_is_caught() -> None:
    d = _defect("twice_c_only", _plans((0, 0, 1, 1, 1)))  # C, C, then F layouts
    assert d.kind.startswith("refusal depending on the layout (TracingError")


@pytest.mark.usefixtures("planted")
def test_an_input_left_mutated_is_caught() -> None:
    x0 = InputSpec("x0", (3, 4), "float64", active=True)
    program = program_from_lines((x0,), ["r0 = planted.twice_mutates(x0)"], ["r0"])
    with pytest.raises(Defect) as info:
        check_program(program, _plans())
    assert info.value.kind == "input changed by the call (first call)"


@pytest.mark.usefixtures("planted")
def test_a_clean_refusal_is_not_a_defect() -> None:
    assert check_program(_program("twice_unruled"), _plans()) == "refused"


def test_complex_gradients_follow_pytorchs_convention() -> None:
    """The oracle's complex convention (∂L/∂x + i ∂L/∂y, by differences in Re and Im) is the one
    rulekit documents: a holomorphic program whose loss takes real and imaginary parts passes."""
    z0 = InputSpec("x0", (2, 3), "complex128", active=True)
    program = program_from_lines((z0,), ["r0 = x0 * x0"], ["r0"], complex_regs=("r0",))
    assert check_program(program, _plans()) == "ok"


# -- compile=True ----------------------------------------------------------------------------------


def _branch_program() -> Program:
    x0 = InputSpec("x0", (3, 4), "float64", active=True)
    lines = ["r0 = np.sum(x0)", "r1 = np.tanh(x0) if r0 > 0 else np.sin(2.0 * x0)"]
    return program_from_lines((x0,), lines, ["r1"])


def _same_layouts(seeds: list[int]) -> list[CallPlan]:
    return [CallPlan(seed, (0,), (0,)) for seed in seeds]


def test_compiled_objects_replay_their_trace() -> None:
    """Calls 2+ of a compiled object on the layouts of an earlier call are the replay path."""
    STATS.clear()
    x0 = InputSpec("x0", (3, 4), "float64", active=True)
    program = program_from_lines((x0,), ["r0 = np.cumsum(np.tanh(x0).T, axis=1)"], ["r0"])
    assert check_program(program, _same_layouts([0, 1, 2])) == "ok"
    # 2 compiled objects x 3 rounds x 2 sides; each traces once and replays the rest
    assert STATS["compiled calls"] == 12 and STATS["compiled calls replayed"] == 10


def test_a_guard_ignored_by_a_replay_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted compile=True defect: replays that ignore their guards (every recorded value
    compares equal) run the branch of the first call on inputs that take the other one. The
    eager objects get these inputs right, so it is reported as a defect of compile=True alone,
    on a replayed call, with a reproducer that builds the compiled object."""
    seeds = [0, 3, 1, 4]  # np.sum(x0) > 0, < 0, > 0, < 0 (the branch flips on every round)
    signs = [np.sum(0.7 * np.random.default_rng(s).standard_normal((3, 4))) > 0 for s in seeds]
    assert signs == [True, False, True, False]
    assert check_program(_branch_program(), _same_layouts(seeds)) == "ok"  # (the real engine)
    monkeypatch.setattr(rulekit._engine._program, "same", lambda a, b: True)
    with pytest.raises(Defect) as info:
        check_program(_branch_program(), _same_layouts(seeds))
    d = info.value
    assert d.kind == "wrong value (compile=True, later call, replayed)", d.kind
    text = str(d)
    assert "vgc = rulekit.value_and_grad(f, argnums=0, copy=True, compile=True)" in text
    # the reproducer reproduces it: its last call (a replay) returns the other branch's value
    env: dict[str, Any] = {}
    exec(text.split("\n\n", 1)[1], env)
    assert env["vgc"].tracer.replays >= 1
    x = env["x0"]
    expected = np.sum(np.cos(np.arange(1.0, 13.0)).reshape(3, 4) * np.sin(2.0 * x))
    assert not np.isclose(env["value"], expected)


def test_a_captured_array_ignored_by_a_replay_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted compile=True defect: replays that never look at what f captured use the array
    of the trace after the global was rebound to another one. The rebinding happens when the
    captured array's layout changes (C, then F): the arguments' layouts stay, so it replays."""
    x0 = InputSpec("x0", (3, 4), "float64", active=True)
    x1 = InputSpec("x1", (3, 4), "float64", active=False, captured=True)
    program = program_from_lines((x0, x1), ["r0 = np.tanh(x0 * x1)"], ["r0"])
    assert program.source().startswith("def f(x0):")
    plans = [CallPlan(seed, (0, seed % 2), (0, seed % 2)) for seed in range(4)]
    assert check_program(program, plans) == "ok"  # (the real engine)
    monkeypatch.setattr(rulekit._engine._guards.Captures, "changed", lambda self: None)
    with pytest.raises(Defect) as info:
        check_program(program, plans)
    d = info.value
    assert d.kind == "wrong value (compile=True, later call, replayed)", d.kind
    text = str(d)
    assert "x1 = _x1  # f captured x1: the global rebound" in text
    env: dict[str, Any] = {}
    exec(text.split("\n\n", 1)[1], env)  # the reproducer reproduces it
    expected = np.sum(np.cos(np.arange(1.0, 13.0)).reshape(3, 4) * np.tanh(env["x0"] * env["x1"]))
    assert not np.isclose(env["value"], expected)
