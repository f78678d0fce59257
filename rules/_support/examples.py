"""Example data for the rules' call examples (`rulekit.example`): small, seeded, reproducible."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["randn"]


def randn(*shape: int, seed: int = 0, dtype: Any = np.float64) -> np.ndarray:
    """Seeded standard-normal data of `shape` and `dtype` for the rules' call examples.

    A complex `dtype` draws the imaginary parts from `seed + 1`.
    """
    x = np.asarray(np.random.default_rng(seed).normal(size=shape))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * np.random.default_rng(seed + 1).normal(size=shape)
    return np.asarray(x, dtype=dtype)
