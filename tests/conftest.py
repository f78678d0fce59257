"""Fixtures shared by the test packages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rulekit import registry


@pytest.fixture
def registrations() -> Iterator[None]:
    """Remove every registration a test makes (the registry is process-global)."""
    before = set(registry.entries())
    yield
    for reg in registry.entries():
        if reg not in before:
            registry.remove(reg)
