"""The suite's finite-difference checker of the engine, seeded inputs, docs pages run as scripts.

One implementation of the numbers: the central difference (`perturb`,
`fd_tangent`), its rounding error (`fd_noise`) and the relative tolerance per
precision (`testutils.RTOL`) are the conformance kit's. The kit checks one rule
by a dot-product test along random directions; here the engine is checked
element by element, argument by argument:

- `fd_grad(f, args, i)`: the gradient of a real scalar `f` w.r.t. `args[i]`
  (a complex argument: ∂f/∂Re + i·∂f/∂Im, the engine's convention); `fd_vjp(f, args,
  i, dy)` the same of Re⟨dy, f(x)⟩ for `f` with any output;
- `check_grads(f, *args)`: `value_and_grad(f)` against `f` and `fd_grad`; with
  `layouts=`/`calls=`, one `value_and_grad` object on every argument in every
  memory layout, on its first and later calls (warm rules, stateful caches);
- `check_pullback(f, *args)`: `value_and_pullback` of `f` with any output against
  the finite-difference gradient of Re⟨ȳ, f(x)⟩, the gradients of each
  argument's dtype and shape (a scalar's type);
- `check_warm_grads(f, *args)`: allocation-free once warm, and right.

An element passes when |engine − fd| ≤ atol + rtol·|fd| + R, R the rounding
error of that central difference (the kit's `fd_noise`); rtol defaults to the
kit's `RTOL` for the least precise float dtype among the arguments.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import rulekit
from testutils import RTOL
from testutils._fdmath import fd_noise, precision_of
from testutils._layouts import VARIANTS, relayout_values
from testutils._trees import clone, fd_tangent, perturb, widen

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the repository

#: The memory layouts `layouts=` may name (the kit's): "C", "F", "negative", "strided", and
#: "mixed" (the k-th array argument in the ((k + 1) mod 4)-th of the others).
EVERY_LAYOUT: tuple[str, ...] = VARIANTS

#: The finite-difference step. Central differences are off by h²·|f'''|/6 (~1e-12) plus
#: their rounding error, which the comparison adds to the tolerance (`fd_noise`).
STEP = 1e-6

#: Absolute floor of the comparison, for a gradient element that is exactly 0 while the
#: truncation error of its difference is not (h²·|f'''|/6 ≈ 1e-12·|f'''|, far below 1e-8).
ATOL = 1e-8

# -- inputs ---------------------------------------------------------------------------------------


def rand(seed: int, shape: tuple[int, ...], dtype: Any = np.float64) -> Any:
    """Standard-normal values of `shape` and `dtype` from `seed` (complex: Re, Im drawn apart)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.normal(size=shape)
    return np.asarray(x, dtype=dtype)


def layout_array(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, layout: str
) -> np.ndarray:
    """An array of `shape`: C- ("C") or F-ordered ("F"), or a strided view ("S") of a larger one."""
    big = tuple(2 * n for n in shape) if layout == "S" else shape
    x = rng.standard_normal(big)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(big)
    x = np.array(x, dtype=dtype, order="F" if layout == "F" else "C")
    return x[tuple(slice(None, None, 2) for _ in shape)] if layout == "S" else x


# -- finite differences ---------------------------------------------------------------------------


def _fd(
    out: Callable[..., Any],
    w: Any,
    args: Sequence[Any],
    argnum: int,
    eps: float,
    noise: bool = True,
) -> tuple[Any, Any]:
    """∂/∂args[argnum] of Re⟨w, out(*args)⟩ by central differences, element by element, and
    (if `noise`) the rounding error of each difference: the kit's `perturb`, `fd_tangent`
    and `fd_noise`. `w=None`: `out` is real and scalar, differentiated itself.

    The differentiated argument is widened to double precision; every call gets fresh
    copies of the arguments (in their layouts: `out` may write into them).
    """
    x = widen(args[argnum])

    def at(v: Any) -> Any:
        a = [clone(e) for e in args]
        a[argnum] = v
        return out(*a)

    def diff(t: Any) -> tuple[float, float]:
        yp, ym = at(perturb(x, t, eps)), at(perturb(x, t, -eps))
        if w is not None:
            d = rulekit.inner(w, fd_tangent(yp, ym, eps))
            return d, fd_noise(w, yp, ym, eps) if noise else 0.0
        if np.iscomplexobj(yp) or np.size(yp) != 1:
            raise TypeError(f"finite differences: f must return a real scalar, got {yp!r}")
        d = float(np.asarray(fd_tangent(yp, ym, eps)))
        return d, fd_noise(_weight(yp), yp, ym, eps) if noise else 0.0

    complex_x = np.iscomplexobj(x)
    units = (1.0, 1j) if complex_x else (1.0,)
    if not isinstance(x, np.ndarray):
        g: Any = 0j if complex_x else 0.0
        worst = 0.0
        for u in units:
            d, r = diff(type(x)(u))
            g, worst = g + u * d, max(worst, r)
        return g, worst
    g = np.zeros(x.shape, np.complex128 if complex_x else np.float64)
    rounding = np.zeros(x.shape)
    t = np.zeros_like(g)
    for k in np.ndindex(x.shape):
        for u in units:
            t[k] = u
            d, r = diff(t)
            t[k] = 0
            g[k] += u * d
            rounding[k] = max(float(rounding[k]), r)
    return g, rounding


def _weight(y: Any) -> Any:
    """The cotangent 1 of a scalar result `y` (of its shape when a 0-d array)."""
    return np.ones(np.shape(y)) if isinstance(y, np.ndarray) else 1.0


def fd_grad(f: Callable[..., Any], args: tuple[Any, ...], argnum: int, eps: float = STEP) -> Any:
    """Central-difference gradient of real scalar `f` w.r.t. `args[argnum]` (array or scalar).

    A complex argument gets ∂f/∂Re + i·∂f/∂Im. Returns a float64/complex128 array, or a
    float/complex for a scalar argument.
    """
    return _fd(f, None, args, argnum, eps, noise=False)[0]


def fd_vjp(f: Callable[..., Any], args: tuple[Any, ...], argnum: int, dy: Any,
           eps: float = STEP) -> Any:  # fmt: skip
    """Central-difference x̄ = ∂/∂args[argnum] of Re⟨dy, f(*args)⟩ (any output structure)."""
    return _fd(f, dy, args, argnum, eps, noise=False)[0]


# -- the engine against finite differences ---------------------------------------------------------


def _tolerances(args: Sequence[Any], rtol: float | None) -> float:
    """`rtol`, or the kit's for the least precise float dtype among the arguments."""
    return RTOL[precision_of(list(args))] if rtol is None else rtol


def _assert_close(got: Any, want: Any, noise: Any, rtol: float, atol: float, what: str) -> None:
    """|got − want| ≤ atol + rtol·|want| + noise, element by element (NaN fails)."""
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape}, finite differences {w.shape}"
    err = np.abs(g - w)
    tol = atol + rtol * np.abs(w) + noise
    bad = ~(err <= tol)
    if np.any(bad):
        k = np.unravel_index(np.argmax(np.where(bad, err / np.maximum(tol, 1e-300), 0)), g.shape)
        raise AssertionError(
            f"{what}: {np.count_nonzero(bad)} of {g.size} elements off; at {k if g.ndim else ''}"
            f" the engine gives {g[k]!r}, finite differences {w[k]!r} (error {err[k]:.3g} > "
            f"tolerance {tol[k]:.3g} = atol {atol:g} + rtol {rtol:g}·|fd| + "
            f"{np.asarray(noise)[k] if np.ndim(noise) else noise:.3g} rounding of the difference)"
        )


def _variants(args: tuple[Any, ...], layouts: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """The arguments as given, then in each of `layouts` (fresh copies, the same values)."""
    out = [("arguments as given", [clone(a) for a in args])]
    for n, layout in enumerate(layouts, 1):
        if layout not in EVERY_LAYOUT:
            raise ValueError(f"unknown layout {layout!r}: one of {EVERY_LAYOUT}")
        out.append((f"layout {n}: {layout}", list(relayout_values(list(args), layout))))
    return out


def check_grads(
    f: Callable[..., Any],
    *args: Any,
    argnums: int | tuple[int, ...] | None = None,
    rtol: float | None = None,
    atol: float = ATOL,
    value_rtol: float = 1e-12,
    value_atol: float = 0.0,
    layouts: Sequence[str] = (),
    calls: int = 1,
    copy: bool = True,
) -> Any:
    """`rulekit.value_and_grad(f, argnums)(*args)` against `f(*args)` and central differences.

    The value must match `f` to `value_rtol`/`value_atol`, the gradient w.r.t. each
    argument in `argnums` (default: every one) `fd_grad` to `rtol` (default: the kit's
    for the arguments' precision) and `atol`, plus the rounding error of each difference;
    a failure names the argument, the layout and the call. One `value_and_grad` object
    (`value_and_grad(f, argnums, copy=copy)`) is called `calls` times on the arguments
    as given, then as often in each of `layouts` in turn (names of `EVERY_LAYOUT`,
    repeats allowed), each time on fresh copies. Returns the first call's gradients as
    `value_and_grad` does (one for an int `argnums`, else a tuple).
    """
    nums = tuple(range(len(args))) if argnums is None else argnums
    each = (nums,) if isinstance(nums, int) else nums
    rt = _tolerances(args, rtol)
    want = f(*[clone(a) for a in args])
    fds = {i: _fd(f, None, args, i, STEP) for i in each}
    vg = rulekit.value_and_grad(f, argnums=nums, copy=copy)
    first = None
    for where, values in _variants(args, layouts):
        for call in range(1, calls + 1):
            value, grads = vg(*[clone(a) for a in values] if call > 1 else values)
            context = f" ({where}, call {call} of {calls})"
            np.testing.assert_allclose(value, want, rtol=value_rtol, atol=value_atol,
                                       err_msg="value" + context)  # fmt: skip
            for i, g in zip(each, (grads,) if isinstance(nums, int) else grads, strict=True):
                fd, noise = fds[i]
                _assert_close(g, fd, noise, rt, atol, f"gradient w.r.t. argument {i}{context}")
            first = clone(grads) if first is None else first  # (copy=False: buffers)
    return first


def _differentiable(a: Any) -> bool:
    return not isinstance(a, (bool, np.bool_)) and np.asarray(a).dtype.kind in "fc"


def check_pullback(
    f: Callable[..., Any],
    *args: Any,
    dy: Any = None,
    seed: int = 0,
    rtol: float | None = None,
    atol: float = ATOL,
    value_rtol: float = 1e-12,
    layouts: Sequence[str] = (),
) -> tuple[Any, ...]:
    """`rulekit.value_and_pullback(f, dy, *args)` against `f` and central differences.

    For a function with any output: `dy` (default: standard-normal of the output's
    tangent type, from `seed`) is pulled back, and the cotangent of every float or
    complex argument must match the finite-difference gradient of Re⟨dy, f(x)⟩
    (`rtol`, `atol` as in `check_grads`) and have the argument's dtype and shape (a
    scalar argument: its type). Repeated on the arguments in each of `layouts`.
    Returns the cotangents of the arguments as given.
    """
    want = f(*[clone(a) for a in args])
    if dy is None:
        dy = rulekit.randn_tangent(want, np.random.default_rng(seed))
    rt = _tolerances(args, rtol)
    nums = [i for i, a in enumerate(args) if _differentiable(a)]
    fds = {i: _fd(f, dy, args, i, STEP) for i in nums}
    first: tuple[Any, ...] | None = None
    for where, values in _variants(args, layouts):
        value, grads = rulekit.value_and_pullback(f, dy, *values)
        np.testing.assert_allclose(value, want, rtol=value_rtol, err_msg=f"value ({where})")
        for i in nums:
            what = f"cotangent of argument {i} ({where})"
            a, g = args[i], grads[i]
            if isinstance(a, np.ndarray):
                assert isinstance(g, np.ndarray), f"{what}: {type(g).__name__}, not an array"
                assert (g.dtype, g.shape) == (a.dtype, a.shape), (
                    f"{what}: {g.dtype} {g.shape}, the argument is {a.dtype} {a.shape}"
                )
            else:
                assert type(g) is type(a), f"{what}: {type(g).__name__}, not {type(a).__name__}"
            _assert_close(g, fds[i][0], fds[i][1], rt, atol, what)
        first = grads if first is None else first
    assert first is not None
    return first


def check_warm_grads(
    f: Callable[..., Any], *args: Any, rtol: float | None = None, atol: float = ATOL
) -> None:
    """`value_and_grad(f, copy=False)` allocates nothing once warm, and its gradients are right.

    Three calls warm the rules up; the fourth must allocate no numpy memory; the
    gradients w.r.t. every argument must then match `fd_grad` (tolerances as in
    `check_grads`).
    """
    from testutils import count_allocations  # (only the tests that use it need the counter)

    nums = tuple(range(len(args)))
    vg = rulekit.value_and_grad(f, argnums=nums, copy=False)
    for _ in range(3):
        vg(*args)
    assert count_allocations(vg, *args).count == 0
    _, grads = vg(*args)
    rt = _tolerances(args, rtol)
    for i, g in zip(nums, grads, strict=True):
        fd, noise = _fd(f, None, args, i, STEP)
        _assert_close(g, fd, noise, rt, atol, f"gradient w.r.t. argument {i} (warm)")


# -- docs pages ------------------------------------------------------------------------------------


def python_blocks(path: pathlib.Path) -> list[str]:
    """The ```python code blocks of a Markdown page, in order."""
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def run_doc_page(page: str, min_blocks: int = 1) -> None:
    """Run the python blocks of `page` (a path from the repository root) in order, as one script.

    The page must have at least `min_blocks` of them.
    """
    blocks = python_blocks(ROOT / page)
    assert len(blocks) >= min_blocks, f"{page}: {len(blocks)} python blocks, want ≥ {min_blocks}"
    namespace: dict[str, object] = {"__name__": "docs_" + pathlib.Path(page).stem.replace("-", "_")}
    for block in blocks:
        exec(compile(block, page, "exec"), namespace)
