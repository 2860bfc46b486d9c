"""Test configuration: the Hypothesis profiles, the ``slow`` marker, the WBCD data, and the
summary's word on the real-data tests that did not run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.helpers import HYPOTHESIS_PROFILE, SHARED_DATASETS, real_data_summary

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
