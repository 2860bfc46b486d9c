"""Numbers written as text: refused with the notation they are in and the fix, whenever they
are read; text that is no number stays categories."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr

# --- 9. Numbers written as text are never categories ----------------------------------------


def _as_text(values: np.ndarray, notation: str) -> pl.Series:
    """Numbers as a person's csv writes them, read as text: decimal comma, padded, grouped."""
    written = [f"{value:.6f}" for value in values]
    if notation == "decimal comma":
        written = [text.replace(".", ",") for text in written]
    elif notation == "spaces":
        written = [f" {text}" for text in written]
    else:  # digit groups: thousands
        written = [f"{value * 1e4:,.2f}" for value in values]
    return pl.Series(written)


def _text_pair(notation: str, n: int = 60) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(11)
    x = rng.normal(size=n)
    originals = pl.DataFrame({"x": _as_text(x, notation), "y": rng.normal(size=n)})
    avatars = pl.DataFrame(
        {"x": _as_text(x + rng.normal(0, 0.3, n), notation), "y": originals["y"]}
    )
    return originals, avatars


@pytest.mark.parametrize(
    ("notation", "described", "fix"),
    [
        ("decimal comma", "a decimal comma", "decimal_comma=True"),
        ("spaces", "spaces around it", "str.strip_chars()"),
        ("digit groups", "digit group separators", "remove the separators"),
    ],
)
def test_numbers_written_as_text_are_refused(notation: str, described: str, fix: str) -> None:
    # Projected as categories, every avatar value was unseen and every record a tie: 100 %.
    originals, avatars = _text_pair(notation)
    pattern = (
        f"feature 'x' of originals is text but every value is a number written with {described}"
    )
    with pytest.raises(pl.exceptions.ComputeError, match=pattern) as raised:
        phr.hidden_rate(originals, avatars)
    assert fix in str(raised.value)
    # The originals' values are never quoted (a message lands in CI logs).
    assert "e.g." not in str(raised.value)
    assert not any(f"'{value}'" in str(raised.value) for value in originals["x"].to_list())
    with pytest.raises(pl.exceptions.ComputeError, match=pattern):
        phr.Projection.fit(originals.with_columns(pl.col("x").cast(pl.Categorical)))


def test_numbers_written_as_text_are_refused_when_collected() -> None:
    # At collect time, from the counts the fit makes anyway: the plan itself reads nothing.
    originals, avatars = _text_pair("decimal comma")
    per_record = phr.local_cloaking(originals.lazy(), avatars.lazy())
    assert isinstance(per_record, pl.LazyFrame)
    with pytest.raises(pl.exceptions.ComputeError, match="written with a decimal comma"):
        per_record.collect()


def test_many_numbers_written_as_text_are_named_as_such() -> None:
    # More distinct values than a fit takes modalities: still named as numbers held as text.
    originals, avatars = _text_pair("decimal comma", n=5000)
    with pytest.raises(pl.exceptions.ComputeError, match="'x' of originals is text"):
        phr.hidden_rate(originals, avatars)


def test_numbers_written_as_text_are_refused_by_the_file_by_file_fit(tmp_path: Path) -> None:
    originals, _ = _text_pair("decimal comma")
    files = []
    for part in range(2):
        files.append(tmp_path / f"part{part}.parquet")
        originals.slice(30 * part, 30).write_parquet(files[-1])
    with pytest.raises(pl.exceptions.ComputeError, match="'x' of originals is text"):
        phr.Projection.fit_partitioned(files)


@pytest.mark.parametrize(
    "values",
    [
        ["01", "02", "10", "01"],
        ["1.5", "2", "1.5", "3"],
        ["1,5", "x", "2,5", "1,5"],
        ["", "1,5", "2,5", ""],
    ],
)
def test_text_that_is_not_numbers_in_another_notation_stays_categories(values: list[str]) -> None:
    # Codes written plainly (postcodes, "01"), or text that is not all numbers.
    originals = pl.DataFrame({"code": values, "y": [0.0, 1.0, 2.0, 3.0]})
    avatars = originals.with_columns(pl.col("y") + 0.1)
    assert phr.Projection.fit(originals).model == "FAMD"
    assert phr.hidden_rate(originals, avatars) >= 0
