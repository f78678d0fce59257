"""Minimal programs of the defects the fuzzer found, kept as regression cases.

Each case is a program and the calls (seed and layout per call, for the copy=True and the
copy=False object) that exposed the defect, checked by the same oracle as the fuzzer. LAYOUTS:
0 C, 1 F, 2 strided, 3 negative strides, 4 F order with axis 0 reversed.
"""

from __future__ import annotations

import dataclasses

from fuzz.oracle import CallPlan
from fuzz.program import InputSpec, Program, program_from_lines


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    what: str  # the defect as found
    program: Program
    plans: tuple[CallPlan, ...]


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
]
