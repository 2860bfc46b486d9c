"""Test configuration: the Hypothesis profiles, the ``slow`` marker and the WBCD data."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from tests.helpers import HYPOTHESIS_PROFILE

WBCD = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "wbcd"

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
