"""The path of one `hidden_rate` call stays short: the distinct package functions (and their
modules) it runs, counted with ``sys.setprofile`` over the package's frames on this thread.

Not a timing test: a bound on the hops, so that a wrapper, a second check or a second fit on
the path shows here. The bounds are what the path takes now, with a little room for the
thread pool (whether a helper's result is unwrapped on this thread depends on timing).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr

# (functions, modules) at most, per call: what the path takes now (the thread pool has no
# part in a count of 500 rows); at most 50 functions for `coords` and 110 for `ncp`.
BOUNDS = {"coords": (50, 16), "ncp": (100, 23)}
ROWS = 500


def _frames() -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(0)
    names = ("a", "b", "c", "d")
    originals = pl.DataFrame({name: rng.normal(size=ROWS) for name in names})
    avatars = pl.DataFrame({name: rng.normal(size=ROWS) for name in names})
    return originals, avatars


def _path(options: dict[str, Any]) -> set[tuple[str, str]]:
    """The package functions (file, qualified name) one warm call runs on this thread."""
    originals, avatars = _frames()
    phr.hidden_rate(originals, avatars, **options)  # compiles and imports first
    root = str(Path(phr.__file__).parent)
    seen: set[tuple[str, str]] = set()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(root):
            seen.add((frame.f_code.co_filename, frame.f_code.co_qualname))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        phr.hidden_rate(originals, avatars, **options)
    finally:
        sys.setprofile(previous)
    return seen


@pytest.mark.parametrize(
    ("kind", "options"), [("coords", {"coords": ["a", "b"]}), ("ncp", {"ncp": 3})]
)
def test_hidden_rate_runs_few_functions(kind: str, options: dict[str, Any]) -> None:
    seen = _path(options)
    functions, modules = BOUNDS[kind]
    assert len(seen) <= functions, sorted(seen)
    assert len({file for file, _ in seen}) <= modules, sorted({file for file, _ in seen})
