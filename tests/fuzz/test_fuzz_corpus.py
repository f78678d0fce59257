"""The defects the fuzzer found, as fixed regression cases, and programs whose trace depends
on the data, for compile=True (tests/fuzz/corpus.py)."""

from __future__ import annotations

import pytest
from fuzz.corpus import CASES, GUARD_CASES, Case
from fuzz.oracle import STATS, check_program


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_found_defect_stays_fixed(case: Case) -> None:
    assert check_program(case.program, list(case.plans)) == "ok", case.what


@pytest.mark.parametrize("case", GUARD_CASES, ids=[c.name for c in GUARD_CASES])
def test_compiled_replay_follows_the_data(case: Case) -> None:
    """Every call of both compiled objects right (value, gradients, inputs, returned gradients),
    and the calls took the paths the case is about: some replayed a recorded trace and, where
    the trace depends on what changed, some traced f again."""
    STATS.clear()
    assert check_program(case.program, list(case.plans)) == "ok", case.what
    calls, replayed = STATS["compiled calls"], STATS["compiled calls replayed"]
    assert calls == 2 * 2 * 3 and replayed >= 1, (calls, replayed)
    if case.retraces:
        traced_again = calls - replayed - 2  # (each object's first call traces)
        assert traced_again >= 1, (calls, replayed)
