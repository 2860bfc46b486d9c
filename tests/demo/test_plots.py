"""The synthetic cohort, the k table, and the PNG plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from polars_hidden_rate.demo.cohort import cohort, k_table
from polars_hidden_rate.measures.summary import summarize

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_cohort_is_seeded_mixed_and_structured() -> None:
    frame = cohort(2000, seed=3)
    assert frame.equals(cohort(2000, seed=3))
    assert not frame.equals(cohort(2000, seed=4))
    assert frame.height == 2000
    assert frame.null_count().sum_horizontal().item() == 0
    numeric = [name for name, dtype in frame.schema.items() if dtype.is_numeric()]
    text = [name for name, dtype in frame.schema.items() if dtype == pl.String]
    assert len(numeric) >= 5
    assert len(text) >= 3
    assert set(numeric + text) == set(frame.columns)
    # Blood pressure rises with age; diabetes is likelier with age.
    assert frame.select(pl.corr("age", "systolic_bp")).item() > 0.2
    by_diabetes = frame.group_by("diabetes").agg(pl.col("age").mean()).sort("diabetes")
    assert by_diabetes["age"][1] > by_diabetes["age"][0]
    for column in text:
        assert 2 <= frame[column].n_unique() <= 4


@pytest.mark.parametrize("rows", [0, -3, 2.5, True])
def test_cohort_rejects_bad_size(rows: object) -> None:
    with pytest.raises(ValueError, match="rows"):
        cohort(rows)  # type: ignore[arg-type]


def test_k_table_matches_summaries() -> None:
    rng = np.random.default_rng(0)
    per_record = pl.DataFrame(
        {"k": np.repeat([2, 5, 10], 50), "local_cloaking": rng.integers(0, 6, 150)}
    )
    table = k_table(per_record)
    assert table["k"].to_list() == [2, 5, 10]
    for k, rate, median in table.iter_rows():
        summary = summarize(per_record.filter(pl.col("k") == k))
        assert (rate, median) == (summary.hidden_rate, summary.local_cloaking_median)


def _is_png(path: Path) -> bool:
    return path.stat().st_size > 1000 and path.read_bytes()[:8] == PNG_SIGNATURE


def test_plots_are_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from polars_hidden_rate.demo.plots import cloaking_histogram, k_curve

    rng = np.random.default_rng(1)
    per_record = pl.DataFrame(
        {"k": np.repeat([2, 5], 100), "local_cloaking": rng.integers(0, 40, 200)}
    )
    histogram = cloaking_histogram(per_record, tmp_path / "histogram.png")
    single = cloaking_histogram(per_record.drop("k"), tmp_path / "single.png")
    zeros = cloaking_histogram(
        per_record.drop("k").with_columns(local_cloaking=0), tmp_path / "z.png"
    )
    curve = k_curve(k_table(per_record), tmp_path / "curve.png")
    for path in (histogram, single, zeros, curve):
        assert _is_png(path)
