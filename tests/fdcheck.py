"""Shared helpers for the tests: seeded inputs, finite differences, engine gradient checks,
docs pages run as scripts.

`check_grads` is the one engine check: `rulekit.value_and_grad(f)` against `f`
itself and against central differences (`fd_grad`). Every tolerance is an
argument; each test file passes the ones it has always used.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np

import rulekit

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the repository

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


def fd_grad(f: Callable[..., Any], args: tuple[Any, ...], argnum: int, eps: float = 1e-6) -> Any:
    """Central-difference gradient of scalar `f` w.r.t. `args[argnum]` (array or float)."""
    x = args[argnum]

    def at(v: Any) -> float:
        a = list(args)
        a[argnum] = v
        copies = [np.array(e, copy=True) if isinstance(e, np.ndarray) else e for e in a]
        return float(f(*copies))

    if not isinstance(x, np.ndarray):
        return (at(x + eps) - at(x - eps)) / (2 * eps)
    g = np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(x.shape):
        xp = x.astype(np.float64, copy=True)
        xm = x.astype(np.float64, copy=True)
        xp[i] += eps
        xm[i] -= eps
        g[i] = (at(xp) - at(xm)) / (2 * eps)
    return g


# -- the engine against finite differences ---------------------------------------------------------


def _fresh(args: tuple[Any, ...]) -> list[Any]:
    # f may write into its arguments (and the engine passes contiguous ones straight through)
    return [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args]


def _assert_fd(
    f: Callable[..., Any], args: tuple[Any, ...], nums: tuple[int, ...], grads: tuple[Any, ...],
    rtol: float, atol: float,
) -> None:  # fmt: skip
    for i, g in zip(nums, grads, strict=True):
        np.testing.assert_allclose(
            g, fd_grad(f, args, i), rtol=rtol, atol=atol, equal_nan=False,
            err_msg=f"gradient w.r.t. argument {i}",
        )  # fmt: skip


def check_grads(
    f: Callable[..., Any],
    *args: Any,
    argnums: int | tuple[int, ...] | None = None,
    rtol: float = 1e-6,
    atol: float = 1e-8,
    value_rtol: float = 1e-12,
    value_atol: float = 0.0,
) -> Any:
    """`rulekit.value_and_grad(f, argnums)(*args)` against `f(*args)` and central differences.

    The value must match `f` to `value_rtol`/`value_atol`, the gradient w.r.t. each
    argument in `argnums` (default: every one) `fd_grad` to `rtol`/`atol`; a failure
    names the argument. Each call gets fresh copies of the array arguments. Returns
    the gradients as `value_and_grad` does (one for an int `argnums`, else a tuple).
    """
    nums = tuple(range(len(args))) if argnums is None else argnums
    value, grads = rulekit.value_and_grad(f, argnums=nums)(*_fresh(args))
    np.testing.assert_allclose(value, f(*_fresh(args)), rtol=value_rtol, atol=value_atol)
    if isinstance(nums, int):
        _assert_fd(f, args, (nums,), (grads,), rtol, atol)
    else:
        _assert_fd(f, args, nums, grads, rtol, atol)
    return grads


def check_warm_grads(f: Callable[..., Any], *args: Any, rtol: float, atol: float) -> None:
    """`value_and_grad(f, copy=False)` allocates nothing once warm, and its gradients are right.

    Three calls warm the rules up; the fourth must allocate no numpy memory; the
    gradients w.r.t. every argument must then match `fd_grad` to `rtol`/`atol`.
    """
    from testutils import count_allocations  # (the kit: only the tests that use it need it)

    nums = tuple(range(len(args)))
    vg = rulekit.value_and_grad(f, argnums=nums, copy=False)
    for _ in range(3):
        vg(*args)
    assert count_allocations(vg, *args).count == 0
    _, grads = vg(*args)
    _assert_fd(f, args, nums, grads, rtol, atol)


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
