"""The kit must catch broken rules: each broken rule has one defect and fails the check named.

The correct version of every rule passes all checks; each broken copy differs
from it in one place. A kit that passes a broken rule is a failing kit.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from rulekit import Array, CoDual, NoFData, NoRData, StatefulRRule, TracingError, zero_fdata
from testutils import RuleCheckError, check_rule, strategies

NO_R, NO_F = NoRData(), NoFData()
RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 4))
Y = RNG.normal(size=(3, 4))


# -- primal functions -------------------------------------------------------------------------


def scale(x: np.ndarray, a: float) -> np.ndarray:
    return x * a


def axpy(a: float, x: np.ndarray, y: np.ndarray) -> None:
    """y ← a·x + y, in place."""
    y += a * x


def scal(a: float, y: np.ndarray) -> None:
    """y ← a·y, in place."""
    y *= a


def row0(x: np.ndarray) -> np.ndarray:
    return x[0]


def square(x: np.ndarray) -> np.ndarray:
    return x * x


# -- correct rules ------------------------------------------------------------------------------


def scale_rule(f: CoDual, x: CoDual, a: CoDual) -> Any:
    """y = a·x ⇒ x̄ += a·ȳ, ā = ⟨x, ȳ⟩."""
    y = CoDual(x.x * a.x, np.zeros_like(x.x))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx += a.x * y.dx
        ra = type(a.x)(np.sum(x.x * y.dx)) if a.dx is not None else NO_R
        return NO_R, NO_R, ra

    return y, pullback


def axpy_rule(f: CoDual, a: CoDual, x: CoDual, y: CoDual) -> Any:
    """y ← a·x + y ⇒ x̄ += a·ȳ, ā = ⟨ȳ, x⟩, ȳ unchanged, y ← y_old."""
    if y.dx is None and (a.dx is not None or x.dx is not None):
        raise TracingError("axpy: active values written into a constant y")
    old = y.x.copy()
    y.x += a.x * x.x

    def pullback(dy: Any) -> tuple[Any, ...]:
        ra = type(a.x)(np.sum(y.dx * x.x)) if a.dx is not None else NO_R
        if x.dx is not None:
            x.dx += a.x * y.dx
        y.x[...] = old
        return NO_R, ra, NO_R, NO_R

    return CoDual(None, NO_F), pullback


def scal_rule(f: CoDual, a: CoDual, y: CoDual) -> Any:
    """y ← a·y ⇒ ā = ⟨ȳ, y_old⟩, ȳ ← a·ȳ, y ← y_old."""
    old = y.x.copy()
    y.x *= a.x

    def pullback(dy: Any) -> tuple[Any, ...]:
        ra = NO_R
        if y.dx is not None:
            ra = type(a.x)(np.sum(y.dx * old)) if a.dx is not None else NO_R
            y.dx *= a.x
        y.x[...] = old
        return NO_R, ra, NO_R

    return CoDual(None, NO_F), pullback


def row0_rule(f: CoDual, x: CoDual) -> Any:
    """y = x[0] (a view) ⇒ its fdata is x̄[0]: nothing to do in the pullback."""
    return CoDual(x.x[0], None if x.dx is None else x.dx[0]), lambda dy: (NO_R, NO_R)


class SquareRule(StatefulRRule):
    """y = x² ⇒ x̄ += 2x·ȳ; output and its fdata from the pool, a scratch for 2x·ȳ."""

    def __call__(self, f: CoDual, x: CoDual) -> Any:
        ytok, dytok = self.push(x.x.shape, x.x.dtype), self.push(x.x.shape, x.x.dtype)
        y, dy = ytok.buffer, dytok.buffer
        np.multiply(x.x, x.x, out=y)
        dy.fill(0)

        def pullback(_: Any) -> tuple[Any, ...]:
            if x.dx is not None:
                t = self.scratch("t", x.x.shape, x.x.dtype)
                np.multiply(x.x, dy, out=t)
                np.add(t, t, out=t)
                np.add(x.dx, t, out=x.dx)
            self.pop(dytok)
            self.pop(ytok)
            return NO_R, NO_R

        return CoDual(y, dy), pullback


class ScalRule(StatefulRRule):
    """`scal_rule` keeping y_old on the rule's stack (no allocation once warm)."""

    def __call__(self, f: CoDual, a: CoDual, y: CoDual) -> Any:
        tok = self.save(y.x)
        np.multiply(y.x, self.scalar(a.x), out=y.x)

        def pullback(dy: Any) -> tuple[Any, ...]:
            ra = NO_R
            if y.dx is not None:
                if a.dx is not None:
                    ra = type(a.x)(self.dot(y.dx, tok.buffer))
                np.multiply(y.dx, self.scalar(a.x), out=y.dx)
            self.restore(tok, into=y.x)
            return NO_R, ra, NO_R

        return CoDual(None, NO_F), pullback

    def dot(self, u: np.ndarray, v: np.ndarray) -> float:
        """⟨u, v⟩ through scratch buffers (np.vdot would allocate its 0-d result)."""
        t, total = self.scratch("t", u.shape, u.dtype), self.scratch("total", (), u.dtype)
        np.multiply(u, v, out=t)
        np.sum(t, out=total)
        return float(total[()])

    def scalar(self, a: float) -> np.ndarray:
        s = self.scratch("a", (), np.float64)  # a 0-d operand: a Python float would allocate one
        s.fill(a)
        return s


CORRECT = [
    (scale, (X, 2.5), scale_rule),
    (axpy, (0.7, X, Y), axpy_rule),
    (scal, (1.5, Y), scal_rule),
    (row0, (X,), row0_rule),
    (square, (X,), SquareRule()),
    (scal, (1.5, Y), ScalRule()),
]


@pytest.mark.parametrize(("f", "args", "rule"), CORRECT, ids=lambda v: getattr(v, "__name__", ""))
def test_correct_rules_pass_every_check(f: Any, args: tuple[Any, ...], rule: Any) -> None:
    report = check_rule(f, *args, rule=rule)
    for name in ("interface", "mutation", "aliasing", "correctness", "statefulness"):
        assert report.checks[name].startswith("pass"), report
    if isinstance(rule, StatefulRRule):
        assert report.checks["allocation"] == "pass" and report.allocations == 0


# -- broken rules: one defect each ---------------------------------------------------------------


def wrong_derivative(f: CoDual, x: CoDual, a: CoDual) -> Any:
    y, pb = scale_rule(f, x, a)

    def pullback(dy: Any) -> tuple[Any, ...]:
        r = pb(dy)
        if x.dx is not None:
            x.dx += 0.01 * y.dx  # the derivative is a, not a + 0.01
        return r

    return y, pullback


def overwrites_fdata(f: CoDual, x: CoDual, a: CoDual) -> Any:
    y = CoDual(x.x * a.x, np.zeros_like(x.x))

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx[...] = a.x * y.dx  # = instead of +=
        ra = type(a.x)(np.sum(x.x * y.dx)) if a.dx is not None else NO_R
        return NO_R, NO_R, ra

    return y, pullback


def forgets_restore(f: CoDual, a: CoDual, x: CoDual, y: CoDual) -> Any:
    y.x += a.x * x.x

    def pullback(dy: Any) -> tuple[Any, ...]:
        ra = type(a.x)(np.sum(y.dx * x.x)) if a.dx is not None else NO_R
        if x.dx is not None:
            x.dx += a.x * y.dx
        return NO_R, ra, NO_R, NO_R

    return CoDual(None, NO_F), pullback


def restores_primal_not_fdata(f: CoDual, a: CoDual, y: CoDual) -> Any:
    old = y.x.copy()
    y.x *= a.x

    def pullback(dy: Any) -> tuple[Any, ...]:
        ra = type(a.x)(np.sum(y.dx * old)) if a.dx is not None and y.dx is not None else NO_R
        y.x[...] = old  # but ȳ is not turned into a·ȳ (the cotangent of y_old)
        return NO_R, ra, NO_R

    return CoDual(None, NO_F), pullback


def too_few_rdata(f: CoDual, x: CoDual, a: CoDual) -> Any:
    y, pb = scale_rule(f, x, a)
    return y, lambda dy: pb(dy)[:2]


def rdata_wrong_type(f: CoDual, x: CoDual, a: CoDual) -> Any:
    y, pb = scale_rule(f, x, a)

    def pullback(dy: Any) -> tuple[Any, ...]:
        r = pb(dy)
        return (*r[:2], np.float32(r[2]) if a.dx is not None else NO_R)  # a is a Python float

    return y, pullback


def mutates_input(f: CoDual, x: CoDual, a: CoDual) -> Any:
    y, pb = scale_rule(f, x, a)
    x.x[0, 0] += 1.0  # the primal does not touch x
    return y, pb


def copies_a_view(f: CoDual, x: CoDual) -> Any:
    y = x.x[0].copy()  # numpy returns a view
    return CoDual(y, np.zeros_like(y)), lambda dy: (NO_R, NO_R)


def view_with_fresh_fdata(f: CoDual, x: CoDual) -> Any:
    return CoDual(x.x[0], np.zeros(x.x.shape[1])), lambda dy: (NO_R, NO_R)


class AllocatingSquare(SquareRule):
    def __call__(self, f: CoDual, x: CoDual) -> Any:
        y = CoDual(x.x * x.x, np.zeros_like(x.x))  # new memory on every call

        def pullback(_: Any) -> tuple[Any, ...]:
            if x.dx is not None:
                x.dx += 2 * x.x * y.dx
            return NO_R, NO_R

        return y, pullback


class SharedBufferScal(ScalRule):
    def __call__(self, f: CoDual, a: CoDual, y: CoDual) -> Any:
        old = self.scratch("old", y.x.shape, y.x.dtype)  # one buffer for every pending call
        np.copyto(old, y.x)
        np.multiply(y.x, self.scalar(a.x), out=y.x)

        def pullback(dy: Any) -> tuple[Any, ...]:
            ra = NO_R
            if y.dx is not None:
                if a.dx is not None:
                    ra = type(a.x)(self.dot(y.dx, old))
                np.multiply(y.dx, self.scalar(a.x), out=y.dx)
            np.copyto(y.x, old)
            return NO_R, ra, NO_R

        return CoDual(None, NO_F), pullback


def crashes_on_inactive(f: CoDual, x: CoDual, a: CoDual) -> Any:
    y = CoDual(x.x * a.x, np.zeros_like(x.x))

    def pullback(dy: Any) -> tuple[Any, ...]:
        x.dx += a.x * y.dx  # x.dx is None when x is a constant
        ra = type(a.x)(np.sum(x.x * y.dx)) if a.dx is not None else NO_R
        return NO_R, NO_R, ra

    return y, pullback


def writes_into_inactive(f: CoDual, x: CoDual, a: CoDual) -> Any:
    y, pb = scale_rule(f, x, a)

    def pullback(dy: Any) -> tuple[Any, ...]:
        r = pb(dy)
        if x.dx is None:
            x.x[0, 0] = 0.0  # uses a constant's memory as scratch
        return r

    return y, pullback


class BreaksOnShapeChange(SquareRule):
    buf: np.ndarray | None = None

    def __call__(self, f: CoDual, x: CoDual) -> Any:
        if self.buf is None:
            self.buf = np.empty((2, *x.x.shape))  # sized by the first call, never again
        y, dy = self.buf[0], self.buf[1]
        np.multiply(x.x, x.x, out=y)
        dy.fill(0)

        def pullback(_: Any) -> tuple[Any, ...]:
            if x.dx is not None:
                x.dx += 2 * x.x * dy
            return NO_R, NO_R

        return CoDual(y, dy), pullback


def forward_writes_fdata(f: CoDual, x: CoDual, a: CoDual) -> Any:
    if x.dx is not None:
        x.dx.fill(0)  # the forward pass must never touch fdata
    return scale_rule(f, x, a)


BROKEN = [
    ("wrong derivative", scale, (X, 2.5), wrong_derivative, "correctness", "argument 0"),
    ("overwrites fdata", scale, (X, 2.5), overwrites_fdata, "correctness", "argument 0"),
    ("forgets to restore", axpy, (0.7, X, Y), forgets_restore, "mutation", "argument 2"),
    ("restores primal not fdata", scal, (1.5, Y), restores_primal_not_fdata, "mutation", None),
    ("wrong number of rdata", scale, (X, 2.5), too_few_rdata, "interface", None),
    ("rdata of the wrong type", scale, (X, 2.5), rdata_wrong_type, "interface", "argument 1"),
    ("mutates an input", scale, (X, 2.5), mutates_input, "mutation", "argument 0"),
    ("copies instead of a view", row0, (X,), copies_a_view, "aliasing", None),
    ("view with fresh fdata", row0, (X,), view_with_fresh_fdata, "aliasing", "argument 0"),
    ("allocates every call", square, (X,), AllocatingSquare(), "allocation", None),
    ("not reentrant", scal, (1.5, Y), SharedBufferScal(), "statefulness", None),
    ("crashes on inactive", scale, (X, 2.5), crashes_on_inactive, "interface", None),
    ("writes into inactive", scale, (X, 2.5), writes_into_inactive, "mutation", "argument 0"),
    ("breaks on shape change", square, (X,), BreaksOnShapeChange(), "statefulness", None),
    ("forward writes fdata", scale, (X, 2.5), forward_writes_fdata, "interface", "argument 0"),
]


@pytest.mark.parametrize(
    ("defect", "f", "args", "rule", "check", "argument"), BROKEN, ids=[b[0] for b in BROKEN]
)
def test_broken_rule_is_caught_by_the_check_that_names_it(
    defect: str, f: Any, args: tuple[Any, ...], rule: Any, check: str, argument: str | None
) -> None:
    with pytest.raises(RuleCheckError) as info:
        check_rule(f, *args, rule=rule)
    assert info.value.check == check, f"{defect}: {info.value}"
    if argument is not None:
        assert info.value.argument == argument, f"{defect}: {info.value}"
    assert f"{check} check failed" in str(info.value)


def test_callers_arguments_are_never_modified() -> None:
    x, y = X.copy(), Y.copy()
    for rule in (axpy_rule, forgets_restore):
        with contextlib.suppress(RuleCheckError):
            check_rule(axpy, 0.7, x, y, rule=rule)
        np.testing.assert_array_equal(x, X)
        np.testing.assert_array_equal(y, Y)


# -- no false alarms across dtypes, layouts, shapes; keyword out=; tuple outputs -------------------


def complex_scale_rule(f: CoDual, x: CoDual, a: CoDual) -> Any:
    """y = a·x (a real) ⇒ x̄ += a·ȳ, ā = Re⟨x, ȳ⟩ (= Re Σ conj(x)·ȳ).

    For a 0-d x numpy returns a scalar: its cotangent is the pullback's argument.
    """
    value = x.x * a.x
    y = CoDual(value, zero_fdata(value))

    def pullback(dy: Any) -> tuple[Any, ...]:
        g = y.dx if isinstance(y.dx, np.ndarray) else dy
        if x.dx is not None:
            x.dx += a.x * g
        ra = type(a.x)(np.real(np.vdot(x.x, g))) if a.dx is not None else NO_R
        return NO_R, NO_R, ra

    return y, pullback


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(args=strategies.args_for(scale, Array[np.inexact], float))
def test_a_correct_rule_is_never_flagged(args: tuple[Any, ...]) -> None:
    check_rule(scale, *args, rule=complex_scale_rule)


def test_float32_wrong_by_one_percent_is_caught() -> None:
    x32 = X.astype(np.float32)
    check_rule(scale, x32, 2.5, rule=scale_rule)

    def off(f: CoDual, x: CoDual, a: CoDual) -> Any:
        y, pb = scale_rule(f, x, a)

        def pullback(dy: Any) -> tuple[Any, ...]:
            r = pb(dy)
            if x.dx is not None:
                x.dx += np.float32(0.01 * a.x) * y.dx
            return r

        return y, pullback

    with pytest.raises(RuleCheckError, match="correctness"):
        check_rule(scale, x32, 2.5, rule=off)


def add_into(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> np.ndarray:
    return np.add(x, y, out=out)


def add_into_rule(f: CoDual, x: CoDual, y: CoDual, out: Any) -> Any:
    """out ← x + y (returned) ⇒ x̄ += out̄, ȳ += out̄, out̄ ← 0, out ← out_old."""
    o = out if isinstance(out, CoDual) else CoDual(out, None)
    old = o.x.copy()
    np.add(x.x, y.x, out=o.x)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if o.dx is not None:
            for a in (x, y):
                if a.dx is not None:
                    a.dx += o.dx
            o.dx.fill(0)
        o.x[...] = old
        return NO_R, NO_R, NO_R

    return CoDual(o.x, o.dx), pullback


def test_keyword_out_is_a_mutated_argument_and_an_aliased_output() -> None:
    c = np.zeros((3, 4))
    report = check_rule(add_into, X, Y, kwargs={"out": c}, rule=add_into_rule)
    assert report.checks["mutation"] == "pass" and report.checks["aliasing"] == "pass"

    def forgets_out_fdata(f: CoDual, x: CoDual, y: CoDual, out: Any) -> Any:
        yy, pb = add_into_rule(f, x, y, out)

        def pullback(dy: Any) -> tuple[Any, ...]:
            saved = out.dx.copy() if isinstance(out, CoDual) else None
            r = pb(dy)
            if saved is not None:
                out.dx[...] = saved  # out̄ should be zero: out's old value is overwritten
            return r

        return yy, pullback

    with pytest.raises(RuleCheckError) as info:
        check_rule(add_into, X, Y, kwargs={"out": c}, rule=forgets_out_fdata)
    assert info.value.check == "mutation" and info.value.argument == "out="


def head_and_double_tail(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x[:1], x[1:] * 2.0


def head_tail_rule(f: CoDual, x: CoDual) -> Any:
    """(x[:1] (a view), 2·x[1:]) ⇒ x̄[1:] += 2·ȳ₂."""
    head = x.x[:1]
    tail = x.x[1:] * 2.0
    dtail = np.zeros_like(tail)
    fd = None if x.dx is None else (x.dx[:1], dtail)

    def pullback(dy: Any) -> tuple[Any, ...]:
        if x.dx is not None:
            x.dx[1:] += 2.0 * dtail
        return NO_R, NO_R

    return CoDual((head, tail), fd), pullback


def test_tuple_output_with_a_view_and_a_new_array() -> None:
    report = check_rule(head_and_double_tail, X, rule=head_tail_rule)
    assert report.checks["aliasing"] == "pass"


def test_reference_replaces_the_primal_for_unspecified_results() -> None:
    def zeros_rule(f: CoDual, x: CoDual) -> Any:
        return CoDual(np.zeros_like(x.x), np.zeros_like(x.x)), lambda dy: (NO_R, NO_R)

    report = check_rule(np.empty_like, X, rule=zeros_rule, reference=np.zeros_like)
    assert report.checks["correctness"] == "pass"


def test_a_write_of_the_value_already_there_is_still_a_mutation() -> None:
    import operator

    import rules  # noqa: F401  (the setitem rule)

    # x[0] = 0.5 where x[0] is 0.5 changes nothing on these inputs; the kit still sees the
    # write (on random inputs) and checks the rule as a mutation of x.
    report = check_rule(operator.setitem, np.array([0.5, 2.0]), 0, 0.5)
    assert report.checks["mutation"] == "pass"


def test_a_read_only_overlapping_view_may_carry_its_own_fdata() -> None:
    import rules  # noqa: F401  (np.broadcast_to)

    report = check_rule(np.broadcast_to, np.arange(3.0), (2, 3))
    assert report.checks["aliasing"] == "pass" and report.checks["correctness"] == "pass"


def test_the_docs_show_the_message_the_kit_prints() -> None:
    """docs/testing-your-rules.md pastes the kit's real output for the `=`-for-`+=` slip."""
    import pathlib
    import re

    page = (pathlib.Path(__file__).parents[2] / "docs" / "testing-your-rules.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    shown = re.search(r"prints \(real output.*?\n\n```text\n(.*?)```", page, re.S)
    assert shown is not None
    namespace: dict[str, Any] = {"__name__": "__main__"}  # as `python example.py` runs it
    for block in blocks[:2]:
        exec(compile(block.replace("print(", "str("), "docs", "exec"), namespace)
    with pytest.raises(RuleCheckError) as info:
        check_rule(namespace["logcosh"], np.linspace(-2, 2, 7), rule=namespace["overwriting_rrule"])

    def words(text: str) -> str:  # (the digits of the numbers may differ across platforms)
        return re.sub(r"-?\d[\d.e+-]*", "#", text.strip())

    assert words(str(info.value)) == words(shown.group(1))


def test_where_finite_differences_cannot_judge_the_kit_says_so() -> None:
    """arctan2 on its branch cut (y = 0, x < 0) is not differentiable: no verdict, a reason."""
    import rules  # noqa: F401  (np.arctan2)
    from testutils import UncheckableInput

    with pytest.raises(UncheckableInput, match="not differentiable along argument 0"):
        check_rule(np.arctan2, np.array([0.0, 0.5]), np.array([-1.0, 2.0]))
    check_rule(np.arctan2, np.array([0.1, 0.5]), np.array([-1.0, 2.0]))  # off the cut: a verdict


def test_layout_copies_keep_values_and_identity() -> None:
    from testutils._layouts import relayout, relayout_values

    for layout, flag in (("C", "C_CONTIGUOUS"), ("F", "F_CONTIGUOUS")):
        assert relayout(X, layout).flags[flag]
    assert all(s < 0 for s in relayout(X, "negative").strides)
    strided = relayout(X, "strided")
    assert not (strided.flags.c_contiguous or strided.flags.f_contiguous)
    for layout in ("C", "F", "negative", "strided"):
        np.testing.assert_array_equal(relayout(X, layout), X)
    a, b, out = relayout_values([X, Y, X], "mixed")  # X twice: one object, as in f(x, out=x)
    assert a is out and a.flags.f_contiguous and any(s < 0 for s in b.strides)
