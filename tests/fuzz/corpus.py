"""Minimal programs of the defects the fuzzer found, kept as regression cases; and programs
whose recorded trace depends on the data, for `compile=True` (GUARD_CASES).

Each case is a program and the calls (seed and layout per call, for the copy=True and the
copy=False object) that exposed the defect, checked by the same oracle as the fuzzer. LAYOUTS:
0 C, 1 F, 2 strided, 3 negative strides, 4 F order with axis 0 reversed.

A guard case's seeds are chosen so that the data-dependent part changes between calls (the
branch taken, the loop count, the argmax, the mask, the Python int, the captured array), and its
layouts repeat, so that the compiled objects replay a trace on some calls and must see, on
others, that it no longer applies.
"""

from __future__ import annotations

import dataclasses

from fuzz.oracle import CallPlan
from fuzz.program import InputSpec, Program, Step, program_from_lines, weighted_loss


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    what: str  # the defect as found
    program: Program
    plans: tuple[CallPlan, ...]
    retraces: bool = False  # (guard cases) the compiled objects must trace f again on some call


def _x(shape: tuple[int, ...], dtype: str = "float64", name: str = "x0") -> InputSpec:
    return InputSpec(name, shape, dtype, active=True)


def _plans(copy: list[int], nocopy: list[int] | None = None) -> tuple[CallPlan, ...]:
    nocopy = copy if nocopy is None else nocopy
    return tuple(
        CallPlan(seed, (a, a, a), (b, b, b))
        for seed, (a, b) in enumerate(zip(copy, nocopy, strict=True))
    )


CASES = [
    Case(
        "cumsum_of_transpose_then_exp",
        "issue #11: wrong gradient from the second call on (pooled buffers go back dirty)",
        program_from_lines(
            (_x((3, 4)),), ["r0 = np.cumsum(x0.T, axis=1)", "r1 = np.exp(r0)"], ["r1"]
        ),
        _plans([0, 0, 0, 0, 0]),
    ),
    Case(
        "tanh_of_f_ordered_input",
        "wrong gradient (2x) from the second call of a copy=False object on F-ordered input",
        program_from_lines((_x((2, 2)),), ["r0 = np.tanh(x0)"], ["r0"]),
        _plans([0, 0, 0, 0, 0], [0, 1, 1, 1, 1]),
    ),
    Case(
        "inplace_subtract_on_input",
        "wrong gradient (2x) from a later call: `x0 -= 0.5` on an F-ordered input",
        program_from_lines((_x((2, 2, 4)),), ["x0 -= 0.5"], ["x0"]),
        _plans([0, 0, 0, 0, 0], [0, 1, 1, 1, 1]),
    ),
    Case(
        "ravel_after_layout_change",
        "ViewMismatchError from ravel when one object sees an F-ordered, then a C-ordered input",
        program_from_lines((_x((2, 2)),), ["r0 = x0.ravel()"], ["r0"]),
        _plans([0, 0, 0, 0, 0], [1, 0, 1, 0, 1]),
    ),
    Case(
        "flatten_of_transposed_cumsum",
        "ViewMismatchError from flatten of a cumsum of a transposed view, first call",
        program_from_lines(
            (_x((3, 3, 3), "float32"),),
            ["r0 = np.transpose(x0)", "r1 = np.cumsum(r0, axis=2)", "r2 = r1.flatten()"],
            ["r2"],
        ),
        _plans([0, 1, 2, 3, 4]),
    ),
    Case(
        "matmul_of_empty",
        "ValueError in the matmul pullback for a (0, 1) x (1, 0) product",
        program_from_lines((_x((1, 0)),), ["r0 = x0.T @ x0"], ["r0"]),
        _plans([0, 1, 2, 3, 4]),
    ),
    Case(
        "reshape_then_out_on_non_contiguous_input",
        "wrong value and gradient: np.reshape of a non-C-contiguous input is a copy in numpy, "
        "but the engine lets a later out= write show through it",
        program_from_lines(
            (_x((4, 4)),),
            ["r0 = np.reshape(x0, (16,))", "np.multiply(x0, x0, out=x0)"],
            ["r0"],
        ),
        _plans([4, 3, 1, 2, 4]),
    ),
    Case(
        "dot_of_complex_and_real_vectors",
        "AxisError in the np.dot pullback for a complex 1-D · real 1-D product",
        program_from_lines(
            (_x((3,), "complex128"), InputSpec("x1", (3,), "float64", active=False)),
            ["r0 = np.dot(x0, x1)"],
            ["r0"],
            complex_regs=("r0",),
        ),
        _plans([0, 1, 2, 3, 4]),
    ),
    Case(
        "copy_of_f_ordered_input_then_write_through_ravel",
        "wrong value and gradient: x.copy() of an F-ordered input must be C-ordered (numpy's "
        "default), so that its ravel is a view and a write through it shows in the copy",
        program_from_lines(
            (_x((2, 2)),),
            ["r0 = x0.copy()", "r1 = r0.ravel()", "np.add(r1, r1, out=r1)"],
            ["r0"],
        ),
        _plans([1, 4, 1, 4, 1]),
    ),
    Case(
        "indexing_a_numpy_scalar_computed_from_a_constant",
        "compile=True only (issue #15): TypeError 'TrackedScalar' object is not subscriptable, "
        "where eager indexes the plain np.float64 (`r0[None]` after `r0 = np.std(x1)`)",
        program_from_lines(
            (_x((3,)), InputSpec("x1", (4,), "float64", active=False)),
            ["r0 = np.std(x1)", "r1 = r0[None] * np.tanh(x0)"],
            ["r1"],
        ),
        _plans([0, 0, 0, 0, 0]),
    ),
]


def _steps(inputs: tuple[InputSpec, ...], steps: list[tuple[str, ...]], loss: list[str]) -> Program:
    """A program of multi-line steps (each writes the register its first line assigns)."""
    return Program(
        inputs,
        tuple(Step("manual", lines[0].split()[0], (), lines) for lines in steps),
        weighted_loss(loss),
    )


_K = InputSpec("x1", (), "int", active=False)  # a Python int argument: 1, 2 or 3 per call

GUARD_CASES = [
    Case(
        "branch_on_the_sign_of_a_sum",
        "the branch taken flips on every round (np.sum(x0) > 0 for seeds 0 and 1 only)",
        program_from_lines(
            (_x((3, 4)),),
            ["r0 = np.sum(x0)", "r1 = np.tanh(x0) * r0 if r0 > 0 else np.cumsum(x0, axis=1)"],
            ["r1"],
        ),
        tuple(CallPlan(seed, (0,), (0,)) for seed in [0, 3, 1, 4, 7]),
        retraces=True,
    ),
    Case(
        "data_dependent_loop_count",
        "`while Σ r² > 1: r = r / 2` halves 0, 1, 2 times on seeds 0, 1, 2",
        _steps(
            (_x((5,)),),
            [("r0 = x0 * 1.0", "while np.sum(r0 * r0) > 1.0: r0 = 0.5 * r0"), ("r1 = r0 ** 3",)],
            ["r1"],
        ),
        tuple(CallPlan(seed, (0,), (0,)) for seed in [0, 1, 2, 3, 7]),
        retraces=True,
    ),
    Case(
        "indices_from_argmax_and_argsort",
        "argmax of a constant along axis 1, argmin and argsort of the input: new on each call",
        program_from_lines(
            (_x((3, 4)), InputSpec("x1", (3, 4), "float64", active=False)),
            [
                "r0 = np.take_along_axis(x0, np.argmax(x1, axis=1, keepdims=True), axis=1)",
                "r1 = x0.ravel()[np.argmin(x0)] * x0",
                "r2 = np.tanh(x0[0])[np.argsort(x0[1])]",
            ],
            ["r0", "r1", "r2"],
        ),
        tuple(CallPlan(seed, (0, 0), (1, 1)) for seed in range(5)),
    ),
    Case(
        "boolean_masks",
        "np.where(x > 0, ...), the sum of x[x > 0] (its shape changes), r[x < 0] = 0",
        _steps(
            (_x((3, 4)),),
            [
                ("r0 = np.where(x0 > 0, x0, 0.1 * x0)",),
                ("r1 = np.sum(x0[x0 > 0] ** 2)",),
                ("r2 = np.exp(x0)", "r2[x0 < 0] = 0.0"),
            ],
            ["r0", "r1", "r2"],
        ),
        tuple(CallPlan(seed, (0,), (0,)) for seed in range(5)),
        retraces=True,
    ),
    Case(
        "python_int_argument",
        "x1 (2, 3, 3, 2, 3 on seeds 0-4) is a loop count and a shift",
        program_from_lines(
            (_x((3, 4)), _K),
            [
                "r0 = sum(np.sin(j * x0) for j in range(1, x1 + 1))",
                "r1 = np.roll(r0, x1, axis=-1) if x1 > 2 else r0 * x1",
            ],
            ["r1"],
        ),
        tuple(CallPlan(seed, (0, 0), (0, 0)) for seed in range(5)),
        retraces=True,
    ),
    Case(
        "captured_array",
        "x1 is a global of f: rebound when its layout changes (C, F), else written in place",
        program_from_lines(
            (_x((3, 4)), InputSpec("x1", (3, 4), "float64", active=False, captured=True)),
            ["r0 = np.tanh(x0 * x1) + x1.sum()"],
            ["r0"],
        ),
        tuple(CallPlan(seed, (0, k), (0, k)) for seed, k in enumerate([0, 0, 1, 1, 0])),
        retraces=True,
    ),
]
