"""The NEP 49 allocation counter (`testutils._alloc`): exact counts, bytes, safety."""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
import pathlib
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg.blas import dgemm

from testutils._alloc import AllocationCount, count_allocations, counting

ROOT = pathlib.Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)


def handler_name() -> str:
    return str(importlib.import_module("numpy._core.multiarray").get_handler_name())


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


# --- exact counts ----------------------------------------------------------------------------


def test_add_allocates_once_per_call() -> None:
    a, b = rand(1000), rand(1000, seed=1)

    def ten_adds() -> None:
        for _ in range(10):
            np.add(a, b)

    n = count_allocations(ten_adds)
    assert (n.count, n.bytes, n.mallocs, n.callocs, n.reallocs) == (10, 80_000, 10, 0, 0)


@SETTINGS
@given(n=st.integers(1, 5000), calls=st.integers(1, 5))
def test_add_allocates_once_per_call_at_every_size(n: int, calls: int) -> None:
    """Small sizes too: numpy's small-block cache belongs to its default handler, not ours."""
    a, b = rand(n), rand(n, seed=1)

    def adds() -> None:
        for _ in range(calls):
            np.add(a, b)

    assert count_allocations(adds) == AllocationCount(calls, calls * 8 * n, calls, 0, 0)


def test_small_arrays_are_counted_although_numpy_caches_them() -> None:
    a = np.ones(4)
    for _ in range(3):  # warm numpy's default small-block cache
        np.add(a, a)
    assert count_allocations(np.add, a, a).count == 1
    assert count_allocations(np.empty, 0).count == 1  # numpy asks for 1 byte


def test_out_allocates_nothing() -> None:
    a, b, c = rand(1000), rand(1000, seed=1), np.empty(1000)
    np.add(a, b, out=c)
    assert count_allocations(np.add, a, b, out=c) == AllocationCount(0, 0, 0, 0, 0)


def test_inplace_dgemm_allocates_nothing_once_warm() -> None:
    A, B = rand(30, 20), rand(20, 40, seed=1)
    C = np.zeros((30, 40))
    dgemm(1.0, B.T, A.T, c=C.T, overwrite_c=1)  # warm-up
    C[...] = 0.0
    out: list[np.ndarray] = []
    n = count_allocations(lambda: out.append(dgemm(1.0, B.T, A.T, c=C.T, overwrite_c=1)))
    assert n.count == 0
    assert np.shares_memory(out[0], C)
    np.testing.assert_allclose(C, A @ B, rtol=1e-12, atol=1e-12)


def test_freed_temporary_is_counted() -> None:
    a, b, c = rand(1000), rand(1000, seed=1), rand(1000, seed=2)
    n = count_allocations(lambda: (a + b) * c)
    assert (n.count, n.bytes) == (2, 16_000)


@pytest.mark.skipif(sys.platform != "linux", reason="numpy elides temporaries where it can")
def test_elided_temporary_is_not_an_allocation() -> None:
    """Above 256 KiB numpy reuses the refcount-1 temporary `a + b` for `* c` in place."""
    a, b, c = rand(40_000), rand(40_000, seed=1), rand(40_000, seed=2)
    assert count_allocations(lambda: (a + b) * c).count == 1


@SETTINGS
@given(n=st.integers(1, 300), ops=st.integers(1, 8))
def test_every_temporary_of_a_chain_is_counted(n: int, ops: int) -> None:
    a, b = rand(n), rand(n, seed=1)

    def chain() -> None:
        x = a
        for _ in range(ops):
            x = np.multiply(x, b) + b  # two arrays per step, all but the last freed

    assert count_allocations(chain).count == 2 * ops


def test_a_python_scalar_operand_costs_a_0d_array() -> None:
    a = rand(1000)
    n = count_allocations(np.add, a, 1.0)
    assert (n.count, n.bytes) == (2, 8008)  # the result and the 0-d array holding 1.0
    assert count_allocations(np.add, 1.0, 2.0).count == 3  # even the result is an array first


def test_scalar_operands_of_an_out_call_cost_8_bytes_but_0d_arrays_are_free() -> None:
    a = rand(64)
    for alpha in (1.5, np.float64(1.5)):
        assert count_allocations(np.multiply, a, alpha, out=a) == AllocationCount(1, 8, 1, 0, 0)
    assert count_allocations(np.multiply, a, np.array(1.5), out=a).count == 0


def test_views_are_free_and_reductions_allocate_their_0d_result() -> None:
    a = rand(64)
    for view in (lambda: a[1:4], lambda: a.T, lambda: a.reshape(8, 8), lambda: a[3]):
        assert count_allocations(view).count == 0
    for reduce in (np.sum, lambda x: np.dot(x, x)):
        assert count_allocations(reduce, a) == AllocationCount(1, 8, 1, 0, 0)


# --- bytes -----------------------------------------------------------------------------------


def test_bytes_of_empty_zeros_and_resize() -> None:
    assert count_allocations(np.empty, 1000) == AllocationCount(1, 8000, 1, 0, 0)
    assert count_allocations(np.zeros, 1000) == AllocationCount(1, 8000, 0, 1, 0)
    with counting() as c:
        x = np.empty(100)
        x.resize(2000, refcheck=False)
    assert c.result == AllocationCount(2, 16_800, 1, 0, 1)


def test_realloc_goes_through_the_handler_that_allocated_the_array() -> None:
    """numpy reallocates with the array's own handler: a resize of an array made outside
    any counting block is invisible, one made under the counter is counted when active."""
    outside = np.empty(100)
    assert count_allocations(outside.resize, 2000, refcheck=False).count == 0
    with counting():
        inside = np.empty(100)
    assert count_allocations(inside.resize, 2000, refcheck=False).reallocs == 1


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 40), min_size=0, max_size=3),
    dtype=st.sampled_from(["f8", "f4", "c16", "i1", "i8", "bool"]),
)
def test_bytes_equal_nbytes(shape: list[int], dtype: str) -> None:
    n = count_allocations(np.empty, tuple(shape), dtype)
    assert (n.count, n.bytes) == (1, np.empty(tuple(shape), dtype).nbytes)


def test_allocation_count_reads_as_int_and_text() -> None:
    n = count_allocations(np.empty, 10)
    assert int(n) == 1
    assert str(n) == "1 allocation, 80 bytes (1 malloc, 0 calloc, 0 realloc)"
    assert str(AllocationCount(2, 3, 1, 1, 0)).startswith("2 allocations, 3 bytes")


def test_count_allocations_passes_arguments() -> None:
    got: list[tuple[object, ...]] = []
    n = count_allocations(lambda *a, **k: got.append((a, k)), 1, 2, x=3)
    assert got == [((1, 2), {"x": 3})]
    assert n.count == 0


def test_handler_struct_matches_numpy_layout() -> None:
    from testutils._alloc import _Handler

    assert (_Handler.version.offset, _Handler.allocator.offset) == (127, 128)
    assert ctypes.sizeof(_Handler) == 128 + 5 * ctypes.sizeof(ctypes.c_void_p)


# --- install / remove ------------------------------------------------------------------------


def test_handler_is_installed_inside_and_restored_after() -> None:
    before = handler_name()
    with counting() as c:
        assert handler_name().startswith("rulekit_counting_")
        np.empty(7)
        assert (c.count, c.bytes) == (1, 56)  # live read
    assert handler_name() == before
    assert c.result == AllocationCount(1, 56, 1, 0, 0)
    assert (c.count, c.bytes) == (1, 56)


def test_exception_restores_previous_handler() -> None:
    before = handler_name()
    with pytest.raises(ZeroDivisionError), counting() as c:
        np.empty(3)
        1 / 0  # noqa: B018
    assert handler_name() == before
    assert c.result is not None
    assert c.result.count == 1
    empty: dict[str, int] = {}
    with pytest.raises(KeyError):
        count_allocations(lambda: empty["x"])
    assert handler_name() == before


def test_repeated_install_and_remove() -> None:
    before = handler_name()
    a = np.ones(10)
    for _ in range(1000):
        with counting() as c:
            np.add(a, a)
        assert c.count == 1
    assert handler_name() == before


def test_nested_blocks_both_count() -> None:
    with counting() as outer:
        np.empty(1)
        with counting() as inner:
            np.empty(2)
            with counting() as innermost:
                pass
        np.zeros(3)
    assert innermost.count == 0
    assert inner.result == AllocationCount(1, 16, 1, 0, 0)
    assert outer.result == AllocationCount(3, 48, 2, 1, 0)


def test_an_instance_is_single_use() -> None:
    c = counting()
    with c:
        pass
    with pytest.raises(RuntimeError), c:
        pass


def test_nothing_is_counted_after_removal() -> None:
    with counting() as c:
        kept = [np.empty(100) for _ in range(5)]
    with counting() as later:
        del kept[:]  # freed through the old handler: frees are never counted
        x = np.empty(10)
    assert (c.count, later.count) == (5, 1)
    x.resize(20, refcheck=False)  # a realloc through our handler, outside any block
    assert c.count == 5


def test_arrays_allocated_under_the_counter_outlive_it() -> None:
    rng = np.random.default_rng(3)
    sizes = rng.integers(0, 3000, size=5000)
    with counting() as c:
        arrays = [np.empty(int(s)) for s in sizes] + [np.zeros(int(s)) for s in sizes[:500]]
    assert c.count == 5500
    for a in arrays[::7]:
        a.resize(a.size + 10, refcheck=False)  # realloc after removal
    for a in arrays:
        a[...] = 1.0
    del arrays
    gc.collect()
    assert count_allocations(np.empty, 10).count == 1


# --- threads ---------------------------------------------------------------------------------


def test_other_threads_are_not_counted() -> None:
    start, done = threading.Event(), threading.Event()

    def worker() -> None:
        start.wait()
        for _ in range(2000):
            np.add(np.ones(50), 1.0)
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    with counting() as c:
        start.set()
        assert done.wait(60)
        np.empty(5)
    t.join()
    assert c.result == AllocationCount(1, 40, 1, 0, 0)


def test_concurrent_blocks_in_threads_count_independently() -> None:
    barrier = threading.Barrier(4)
    results: dict[int, AllocationCount] = {}

    def worker(k: int) -> None:
        with counting() as c:
            barrier.wait()
            for _ in range(100 * (k + 1)):
                np.empty(k + 1)
            barrier.wait()
        assert c.result is not None
        results[k] = c.result

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {
        k: AllocationCount(100 * (k + 1), 800 * (k + 1) ** 2, 100 * (k + 1), 0, 0) for k in range(4)
    }


# --- interpreter exit ------------------------------------------------------------------------

EXIT_SCRIPTS = {
    "removed, arrays outlive it": """
        with counting() as c:
            kept = [np.empty(n) for n in range(200)]
        assert c.count == 200
        kept[5].resize(1000, refcheck=False)
        del kept[::2]
    """,
    "exit with arrays alive, in cycles and in a thread": """
        import threading
        with counting():
            KEEP = [np.zeros(n) for n in range(300)]
            cycle = [np.empty(1000)]
            cycle.append(cycle)
            obj = np.empty(3, dtype=object)
            obj[0] = obj
        t = threading.Thread(target=lambda: KEEP.append(np.empty(9)))
        t.start(); t.join()
    """,
    "exit with the counter installed": """
        import atexit
        c = counting()
        c.__enter__()
        KEEP = [np.empty(n) for n in range(100)]
        atexit.register(lambda: [np.ones(n) + 1 for n in range(100)])
        assert c.count == 100
    """,
}


@pytest.mark.parametrize("body", EXIT_SCRIPTS.values(), ids=EXIT_SCRIPTS.keys())
def test_interpreter_exit_is_clean(body: str) -> None:
    script = "import numpy as np\nfrom testutils._alloc import counting\n" + textwrap.dedent(body)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_the_kit_counts_the_primal_call_to_allow_its_unavoidable_copies() -> None:
    """f2py copies C-ordered operands of dgemm: 2 copies + the output; F-ordered: the output."""
    from testutils._call import Call
    from testutils._statecheck import primal_allocations

    A, B = rand(3, 4), rand(4, 5, seed=1)
    assert primal_allocations(Call(dgemm, (1.0, A, B), {})) == (3, 1)
    F = (np.asfortranarray(A), np.asfortranarray(B))
    assert primal_allocations(Call(dgemm, (1.0, *F), {})) == (1, 1)
