"""Column types as the read takes them: integers beyond float64's precision refused (wide
integers, unsigned, decimals whose fractions float64 would merge), keys linked only to keys of
their own kind, an integer at 2^53 compared with floats exactly."""

from __future__ import annotations

import decimal

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from tests.helpers import (
    brute_force_counts,
    hidden_share,
    projected_counts,
)


def test_integers_beyond_float64_precision_are_refused() -> None:
    big = 2**63 - 1
    originals = pl.DataFrame({"id": [1, 2, 3], "d1": [big, big - 1, big - 4]})
    avatars = pl.DataFrame({"id": [1, 2, 3], "d1": [big, big - 2, big - 3]})
    with pytest.raises(pl.exceptions.ComputeError, match=r"'d1' of originals .* beyond 2\^53"):
        phr.local_cloaking(originals, avatars, coords="d1", on="id")
    small = originals.with_columns(pl.col("d1") - (big - 2**53))
    with pytest.raises(pl.exceptions.ComputeError, match=r"'d1' of avatars .* beyond 2\^53"):
        phr.hidden_rate(small, avatars, coords="d1")
    # At 2^53 and below, integers count exactly: [0, 1, 0] as in integer arithmetic.
    shift = big - 2**53
    exact = phr.local_cloaking(
        originals.with_columns(pl.col("d1") - shift),
        avatars.with_columns(pl.col("d1") - shift),
        coords="d1",
    )
    assert exact["local_cloaking"].to_list() == [0, 1, 0]


@pytest.mark.parametrize("value", [2**53 + 1, -(2**53) - 1])
def test_integers_one_past_2_53_are_refused(value: int) -> None:
    # The limit is 2^53 exactly: 2^53 + 1 is the first integer float64 cannot hold.
    originals = pl.DataFrame({"d1": [value, 0, 5]})
    avatars = pl.DataFrame({"d1": [2**53, 1, 4]})
    with pytest.raises(pl.exceptions.ComputeError, match=r"'d1' of originals .* beyond 2\^53"):
        phr.hidden_rate(originals, avatars, coords="d1")
    phr.hidden_rate(avatars, avatars, coords="d1")  # 2^53 itself is held exactly


def test_unsigned_integers_beyond_float64_precision_are_refused() -> None:
    frame = pl.DataFrame({"d1": pl.Series([2**64 - 1, 0, 5], dtype=pl.UInt64)})
    with pytest.raises(pl.exceptions.ComputeError, match="'d1' of originals"):
        phr.hidden_rate(frame, frame, coords="d1")


@pytest.mark.parametrize("big", [False, True])
def test_a_uint64_key_is_not_linked_to_an_int64_key(big: bool) -> None:
    """UInt64 and Int64 share no integer type: below 2^63 a cast to Int64 would link them
    silently, above it fail in Polars' conversion; both are refused as a schema mismatch."""
    start = 2**63 + 5 if big else 1
    originals = pl.DataFrame(
        {"id": pl.Series([start, start + 1], dtype=pl.UInt64), "d1": [0.0, 1.0]}
    )
    avatars = pl.DataFrame({"id": pl.Series([1, 2], dtype=pl.Int64), "d1": [0.5, 1.5]})
    match = r"key 'id' of originals is UInt64 but key 'id' of avatars is Int64"
    for left, right, pattern in (
        (originals, avatars, match),
        (avatars, originals, r"key 'id' of originals is Int64 but key 'id' of avatars is UInt64"),
    ):
        with pytest.raises(pl.exceptions.SchemaError, match=pattern):
            phr.local_cloaking(left, right, coords="d1", on="id")
        with pytest.raises(pl.exceptions.SchemaError, match=pattern):
            phr.hidden_rate(left.lazy(), right, coords="d1", on="id")


@pytest.mark.parametrize("edge", [2**53, -(2**53)])
def test_an_integer_feature_at_2_53_is_compared_with_floats(edge: int) -> None:
    """2^53 is exact in float64: the direct-match protection compares it; 2^53 + 1 it refuses."""
    originals = pl.DataFrame({"n": [edge, 0, 5]})
    avatars = pl.DataFrame({"n": [float(edge), 1.0, 5.0]})
    assert phr.row_direct_match_protection(originals, avatars) == pytest.approx(100 / 3)
    assert phr.row_direct_match_protection(avatars, originals) == pytest.approx(100 / 3)
    past = originals.with_columns(pl.col("n") + (1 if edge > 0 else -1))
    with pytest.raises(pl.exceptions.ComputeError, match=r"'n' of originals has 1 integer"):
        phr.row_direct_match_protection(past, avatars)


WIDE_INTEGERS = [pl.Decimal(38, 0), pl.Int128(), pl.UInt64(), pl.UInt128(), pl.Int64()]


@pytest.mark.parametrize("dtype", WIDE_INTEGERS, ids=str)
def test_wide_integer_coordinates_beyond_2_53_are_refused(dtype: pl.DataType) -> None:
    # The example: as float64, 2^53 + 1 and 2^53 merge and record 0 (exposed) ties.
    big = 2**53
    originals = pl.DataFrame({"d1": pl.Series([big + 1, 0, 10], dtype=dtype)})
    avatars = pl.DataFrame({"d1": pl.Series([big + 1, big, 10], dtype=dtype)})
    with pytest.raises(pl.exceptions.ComputeError, match=r"'d1' of originals .* beyond 2\^53"):
        phr.local_cloaking(originals, avatars, coords="d1")
    # 2^53 itself is exact: the counts are those of the float64 brute force.
    exact = originals.with_columns(pl.Series("d1", [big, 0, 10], dtype=dtype))
    counts = phr.local_cloaking(exact, avatars.with_columns(exact["d1"]), coords="d1")
    values = exact["d1"].cast(pl.Float64).to_numpy()[:, None]
    expected = brute_force_counts(values, values, 1e-9)
    assert counts["local_cloaking"].to_list() == expected.tolist()


@pytest.mark.parametrize("dtype", WIDE_INTEGERS, ids=str)
@pytest.mark.parametrize("side", ["originals", "avatars"])
def test_wide_integer_features_beyond_2_53_are_refused(dtype: pl.DataType, side: str) -> None:
    big = 2**53
    frames = {
        role: pl.DataFrame({
            "x": pl.Series([big - 6, big - 4, big - 1, big], dtype=dtype),
            "y": [0.0, 2.0, 1.0, 3.0],
        })
        for role in ("originals", "avatars")
    }  # fmt: skip
    # Within 2^53 the projection counts as the brute force on its own coordinates.
    rate = phr.hidden_rate(frames["originals"], frames["avatars"])
    assert rate == hidden_share(projected_counts(frames["originals"], frames["avatars"]))
    frames[side] = frames[side].with_columns(
        pl.Series("x", [big - 6, big - 4, big + 1, big], dtype=dtype)
    )
    with pytest.raises(pl.exceptions.ComputeError, match=rf"feature 'x' of {side} .* beyond 2\^53"):
        phr.hidden_rate(frames["originals"], frames["avatars"])
    with pytest.raises(pl.exceptions.ComputeError, match=rf"feature 'x' of {side} .* beyond 2\^53"):
        phr.local_cloaking(frames["originals"].lazy(), frames["avatars"].lazy()).collect()


def test_decimal_fractions_that_float64_merges_are_refused() -> None:
    # 2^52 + 0.01 and 2^52 + 0.02 are two Decimal(38, 2) values but one float64.
    base = decimal.Decimal(2**52)
    merged = [base + decimal.Decimal("0.01"), base + decimal.Decimal("0.02"), base]
    originals = pl.DataFrame({"d1": pl.Series(merged, dtype=pl.Decimal(38, 2))})
    with pytest.raises(pl.exceptions.ComputeError, match=r"'d1' of originals .* float64"):
        phr.hidden_rate(originals, originals, coords="d1")
    with pytest.raises(pl.exceptions.ComputeError, match=r"feature 'd1' of originals"):
        phr.Projection.fit(originals.with_columns(y=pl.Series([0.0, 1.0, 3.0])))
    # Fractions float64 tells apart are read as their nearest float64, as decimal text is.
    text = ["0.10", "0.35", "1.20", "2.05"]
    shifted = ["0.20", "0.30", "1.25", "2.00"]
    as_decimal = [pl.DataFrame({"d1": pl.Series([decimal.Decimal(v) for v in values],
                                                 dtype=pl.Decimal(38, 2))})
                  for values in (text, shifted)]  # fmt: skip
    counts = phr.local_cloaking(*as_decimal, coords="d1", tie_tol=0.0)["local_cloaking"]
    x, y = (np.array([float(v) for v in values])[:, None] for values in (text, shifted))
    assert counts.to_list() == brute_force_counts(x, y, 0.0).tolist()
