"""Fixtures shared by the test packages.

- `registrations`: every rule a test registers is removed after it (the registry is
  process-global); the one registry-cleanup fixture of the suite.
- `rng`: a random generator seeded for each test, so that a test's inputs never depend
  on which tests ran before it (no module-level generator shared by several tests).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from rulekit import registry

#: The seed of `rng`: every test starts from the same state.
SEED = 0


def _load_bundled_rules() -> None:
    """Register every bundled rule now, so that none is registered lazily *during* a test
    (and then removed with that test's own registrations, leaving later tests without it)."""
    load_all = getattr(registry, "load_all", None)  # (the lazy loader, where there is one)
    if load_all is not None:
        load_all()
    import rules  # noqa: F401  (registers the bundled rules on import)


@pytest.fixture
def registrations() -> Iterator[None]:
    """Remove every registration a test makes (the registry is process-global).

    The bundled rules are registered before the snapshot, so only the test's own
    registrations are removed.
    """
    _load_bundled_rules()
    before = set(registry.entries())
    yield
    for reg in registry.entries():
        if reg not in before:
            registry.remove(reg)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh `np.random.default_rng(SEED)` for each test (not for hypothesis `@given`
    tests: draw from a seed strategy there, as a function-scoped fixture is shared by
    all their examples)."""
    return np.random.default_rng(SEED)
