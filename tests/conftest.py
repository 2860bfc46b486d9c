"""Test configuration: the Hypothesis profiles, the ``slow`` marker, the WBCD data, and the
summary's word on the real-data tests that did not run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.helpers import (
    HYPOTHESIS_PROFILE,
    SHARED_DATASETS,
    brute_rate,
    noisy_frames,
    real_data_summary,
    write_by_suffix,
)

WBCD = SHARED_DATASETS / "wbcd"

# Chosen by HYPOTHESIS_PROFILE: `ci` (make test, .ci/run) or `dev` (fast, the default).
settings.register_profile("ci", deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(HYPOTHESIS_PROFILE)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: multi-process clusters and large runs (deselect with -m 'not slow')"
    )


@pytest.fixture
def wbcd_dir() -> Path:
    if not WBCD.is_dir():
        pytest.skip(f"WBCD data not found at {WBCD}")
    return WBCD


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Say so when the tests on the real releases skipped: a run without the data passes
    without them."""
    lines = real_data_summary(terminalreporter.stats)
    if lines:
        terminalreporter.section("real data absent", sep="-", yellow=True, bold=True)
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
def pair(tmp_path: Path) -> dict[str, Any]:
    originals, avatars = noisy_frames()
    return {
        "originals": write_by_suffix(originals, tmp_path / "o.parquet"),
        "avatars": write_by_suffix(avatars, tmp_path / "a.parquet"),
        "rate": brute_rate(originals, avatars),
    }


@pytest.fixture(scope="module")
def slow_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Inputs whose count takes long enough (seconds) to be interrupted."""
    folder = tmp_path_factory.mktemp("slow")
    originals, avatars = noisy_frames(n=200_000, noise=0.3)
    return write_by_suffix(originals, folder / "o.parquet"), write_by_suffix(
        avatars, folder / "a.parquet"
    )
