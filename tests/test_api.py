"""The Polars API: eager, lazy and streaming paths, links, order, and what is read."""

from __future__ import annotations

import numpy as np
import polars as pl
import polars.selectors as cs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polars_hidden_rate as phr
from tests.helpers import brute_force_counts, examples, hidden_share

DIMS = ["Dim1", "Dim2", "Dim3", "Dim4", "Dim5"]


def make_frames(
    n: int, d: int, seed: int, offset: float = 0.0
) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, (n, d)).astype(float) + offset
    y = x + rng.integers(-1, 2, (n, d))
    names = [f"Dim{k + 1}" for k in range(d)]
    originals = pl.DataFrame(x, schema=names).with_columns(
        id=pl.int_range(n, dtype=pl.Int64) * 7, payload=pl.int_range(n).cast(pl.String)
    )
    avatars = pl.DataFrame(y, schema=names).with_columns(id=pl.int_range(n, dtype=pl.Int64) * 7)
    return originals, avatars


def expected_counts(
    originals: pl.DataFrame, avatars: pl.DataFrame, coords: list[str]
) -> np.ndarray:
    return brute_force_counts(
        originals.select(coords).to_numpy(), avatars.select(coords).to_numpy(), 1e-9
    )


@pytest.mark.parametrize("d", [2, 5, 12])
@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_eager_lazy_streaming_and_keyed_agree(d: int, offset: float) -> None:
    originals, avatars = make_frames(400, d, seed=d, offset=offset)
    coords = [c for c in originals.columns if c.startswith("Dim")]
    expected = expected_counts(originals, avatars, coords)
    shuffled = avatars.sample(fraction=1.0, shuffle=True, seed=1)

    eager = phr.local_cloaking(originals, avatars, coords=coords)
    lazy = phr.local_cloaking(originals.lazy(), avatars.lazy(), coords=coords)
    assert isinstance(lazy, pl.LazyFrame)
    keyed = originals.lazy().avatar.local_cloaking(shuffled.lazy(), coords=coords, on="id")  # type: ignore[attr-defined]
    for frame in (eager, lazy.collect(), lazy.collect(engine="streaming"), keyed.collect()):
        assert frame.columns == [*originals.columns, "local_cloaking", "hidden"]
        assert frame.drop("local_cloaking", "hidden").equals(originals)
        np.testing.assert_array_equal(frame["local_cloaking"].to_numpy(), expected)
        np.testing.assert_array_equal(frame["hidden"].to_numpy(), expected > 0)


def test_output_types() -> None:
    originals, avatars = make_frames(50, 2, seed=0)
    frame = originals.avatar.local_cloaking(avatars, coords=["Dim1", "Dim2"])  # type: ignore[attr-defined]
    assert frame.schema["local_cloaking"] == pl.get_index_type()
    assert frame.schema["hidden"] == pl.Boolean
    rate = originals.avatar.hidden_rate(avatars, coords=["Dim1", "Dim2"])  # type: ignore[attr-defined]
    assert isinstance(rate, float)
    expected = hidden_share(expected_counts(originals, avatars, ["Dim1", "Dim2"]))
    assert 0.0 < expected < 100.0  # neither end: a rate stuck at 0 or 100 would fail
    assert rate == expected


@settings(max_examples=examples(40), deadline=None)
@given(n=st.integers(2, 80), d=st.integers(1, 6), seed=st.integers(0, 1000), ncp=st.integers(1, 6))
def test_hidden_rate_is_share_of_nonzero_counts(n: int, d: int, seed: int, ncp: int) -> None:
    originals, avatars = make_frames(n, d, seed)
    coords = [f"Dim{k + 1}" for k in range(d)]
    ncp = min(ncp, d)
    counts = expected_counts(originals, avatars, coords[:ncp])
    rate = phr.hidden_rate(originals.lazy(), avatars, coords=coords, ncp=ncp)
    assert rate == pytest.approx(hidden_share(counts), abs=1e-12)


def test_keys_with_different_names_and_several_columns() -> None:
    originals, avatars = make_frames(300, 3, seed=4)
    originals = originals.with_columns(part=pl.col("id") % 3, key=pl.col("id") // 3)
    avatars = avatars.select(
        "Dim1", "Dim2", "Dim3", part_av=pl.col("id") % 3, key_av=pl.col("id") // 3
    ).reverse()
    expected = expected_counts(originals, avatars.reverse(), ["Dim1", "Dim2", "Dim3"])
    frame = phr.local_cloaking(
        originals,
        avatars,
        coords=cs.starts_with("Dim"),
        left_on=["part", "key"],
        right_on=["part_av", "key_av"],
    )
    np.testing.assert_array_equal(frame["local_cloaking"].to_numpy(), expected)


def test_row_order_kept_after_lazy_filter() -> None:
    originals, avatars = make_frames(2000, 3, seed=9)
    coords = ["Dim1", "Dim2", "Dim3"]
    keep = pl.col("id") % 3 != 0
    lazy = (
        originals.lazy()
        .filter(keep)
        .avatar.local_cloaking(  # type: ignore[attr-defined]
            avatars.lazy().filter(keep), coords=coords
        )
    )
    expected_originals = originals.filter(keep)
    for engine in ("auto", "streaming"):
        frame = lazy.collect(engine=engine)
        assert frame["id"].to_list() == expected_originals["id"].to_list()
        np.testing.assert_array_equal(
            frame["local_cloaking"].to_numpy(),
            expected_counts(expected_originals, avatars.filter(keep), coords),
        )


def test_ncp_takes_leading_coords_in_given_order() -> None:
    originals, avatars = make_frames(300, 3, seed=5)
    frame = phr.local_cloaking(originals, avatars, coords=["Dim3", "Dim1", "Dim2"], ncp=2)
    np.testing.assert_array_equal(
        frame["local_cloaking"].to_numpy(), expected_counts(originals, avatars, ["Dim3", "Dim1"])
    )


def test_lazy_reads_only_coordinate_and_key_columns() -> None:
    originals, avatars = make_frames(100, 2, seed=6)

    def explode(series: pl.Series) -> pl.Series:
        raise AssertionError("a column the counting does not need was computed")

    poisoned = originals.lazy().with_columns(
        pl.col("payload").map_batches(explode, return_dtype=pl.String)
    )
    rate = phr.hidden_rate(poisoned, avatars.lazy(), coords=["Dim1", "Dim2"], on="id")
    assert rate == pytest.approx(
        hidden_share(expected_counts(originals, avatars, ["Dim1", "Dim2"]))
    )


def test_lazy_result_counts_only_when_collected() -> None:
    originals, avatars = make_frames(30, 2, seed=7)
    broken = originals.with_columns(Dim1=pl.lit(float("nan")))
    lazy = phr.local_cloaking(broken.lazy(), avatars.lazy(), coords=["Dim1", "Dim2"])
    with pytest.raises(pl.exceptions.ComputeError):
        lazy.collect()


def test_inputs_are_not_mutated() -> None:
    originals, avatars = make_frames(100, 2, seed=8)
    before = (originals.clone(), avatars.clone())
    phr.local_cloaking(originals, avatars, coords=["Dim1", "Dim2"], on="id")
    assert originals.equals(before[0])
    assert avatars.equals(before[1])


def test_integer_and_float_coordinates_mix() -> None:
    originals, avatars = make_frames(200, 2, seed=10)
    as_int = originals.with_columns(pl.col("Dim1", "Dim2").cast(pl.Int32))
    frame = phr.local_cloaking(as_int, avatars, coords=["Dim1", "Dim2"])
    np.testing.assert_array_equal(
        frame["local_cloaking"].to_numpy(), expected_counts(originals, avatars, ["Dim1", "Dim2"])
    )


@pytest.mark.parametrize(
    ("left_type", "right_type"),
    [(pl.UInt32, pl.Int64), (pl.Int16, pl.UInt16), (pl.String, pl.Categorical)],
)
def test_keys_of_related_types_match(left_type: pl.DataType, right_type: pl.DataType) -> None:
    """Ids written as UInt32 come back from csv as Int64; text keys may be categorical."""
    originals, avatars = make_frames(200, 2, seed=13)
    originals = originals.with_columns(pl.col("id").cast(pl.String).cast(left_type))
    shuffled = avatars.sample(fraction=1.0, shuffle=True, seed=2).with_columns(
        pl.col("id").cast(pl.String).cast(right_type)
    )
    frame = phr.local_cloaking(originals, shuffled, coords=["Dim1", "Dim2"], on="id")
    assert frame.schema["id"] == left_type
    np.testing.assert_array_equal(
        frame["local_cloaking"].to_numpy(), expected_counts(originals, avatars, ["Dim1", "Dim2"])
    )


def test_hidden_rate_is_rounded_once() -> None:
    # One of three hidden: 100 * 1 / 3 is 33.333333333333336, while 100 * (1 / 3), rounded
    # twice, is 33.33333333333333. Every path (API, CLI, report) gives the former.
    originals = pl.DataFrame({"x": [0.0, 10.0, 20.0]})
    avatars = pl.DataFrame({"x": [0.5, 10.4, 30.0]})
    assert phr.hidden_rate(originals, avatars, coords="x") == 100.0 * 1 / 3
