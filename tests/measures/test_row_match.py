"""Direct matches (`row_match`): decimals compared with floats by the exact rule."""

from __future__ import annotations

import polars as pl
import pytest

import polars_hidden_rate as phr


def test_direct_matches_compare_decimals_with_floats_by_the_exact_rule() -> None:
    originals = pl.DataFrame({"x": pl.Series([1, 2, 3], dtype=pl.Decimal(38, 0))})
    avatars = pl.DataFrame({"x": [1.0, 2.5, 3.0]})
    assert phr.row_direct_match_protection(originals, avatars) == pytest.approx(100 / 3)
    beyond = pl.DataFrame({"x": pl.Series([2**53 + 1, 2, 3], dtype=pl.Decimal(38, 0))})
    with pytest.raises(pl.exceptions.ComputeError, match=r"feature 'x' of originals .* 2\^53"):
        phr.row_direct_match_protection(beyond, avatars)
