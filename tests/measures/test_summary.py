"""The summary of the counts (`summarize`)."""

from __future__ import annotations

import polars as pl
import pytest

from polars_hidden_rate.measures.summary import summarize


def test_summarize_refuses_missing_counts() -> None:
    with pytest.raises(pl.exceptions.ComputeError, match="null in 1 of 3"):
        summarize(pl.DataFrame({"local_cloaking": [0, None, 4]}))
