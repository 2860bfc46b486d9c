"""Shared test helpers: the float64 brute-force reference and the WBCD data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

WBCD = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "wbcd"


def brute_force_counts(originals: np.ndarray, avatars: np.ndarray, tie_tol: float) -> np.ndarray:
    """c_i = #{j != i : d2(x_i, y_j) <= d2(x_i, y_i) * (1 + tie_tol)}, all in float64.

    Squared direct differences summed column by column, written independently of the package.
    """
    n, d = originals.shape
    counts = np.empty(n, dtype=np.int64)
    for i in range(n):
        d2 = np.zeros(n)
        for k in range(d):
            diff = originals[i, k] - avatars[:, k]
            d2 += diff * diff
        threshold = d2[i] * (1.0 + tie_tol)
        counts[i] = int(np.count_nonzero(d2 <= threshold)) - 1
    return counts


@pytest.fixture
def wbcd_dir() -> Path:
    if not WBCD.is_dir():
        pytest.skip(f"WBCD data not found at {WBCD}")
    return WBCD
