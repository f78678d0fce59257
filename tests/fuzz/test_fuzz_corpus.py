"""The defects the fuzzer found, as fixed regression cases (tests/fuzz/corpus.py)."""

from __future__ import annotations

import pytest
from fuzz.corpus import CASES, Case
from fuzz.oracle import check_program


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_found_defect_stays_fixed(case: Case) -> None:
    assert check_program(case.program, list(case.plans)) == "ok", case.what
