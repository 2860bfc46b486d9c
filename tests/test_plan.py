"""The plan a query is read through: counts follow their records through any reordering plan
(keyed, or by row order where the plan keeps it), a plan that changes its records between
reads is refused, and the counts survive power-of-two scales."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import polars.selectors as cs
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import polars_hidden_rate as phr
from tests.helpers import (
    GRID_COORDS,
    assert_counts_by_id,
    brute_force_counts,
    counts_by_id,
    examples,
    hidden_share,
    noisy_pair,
)

# --- 1. Every record keeps its own count under any lazy plan --------------------------------


def _join(frame: pl.LazyFrame) -> pl.LazyFrame:
    rng = np.random.default_rng(7)
    ids = frame.select("id").collect()["id"].to_numpy()
    lookup = pl.LazyFrame({"id": rng.permutation(ids), "region": rng.integers(0, 5, len(ids))})
    return frame.join(lookup, on="id")


REORDERING_PLANS: dict[str, Callable[[pl.LazyFrame], pl.LazyFrame]] = {
    "join": _join,
    "unique": lambda frame: frame.unique(),
    "group_by_explode": lambda frame: (
        frame.group_by("site").agg(pl.all()).explode(cs.exclude("site"))
    ),
    # A new random order at every read.
    "shuffle": lambda frame: frame.select(pl.struct(pl.all()).shuffle()).unnest(cs.all()),
    "sort_with_ties": lambda frame: frame.sort("site", maintain_order=False),
    "filter": lambda frame: frame.filter(pl.col("id") % 2 == 0).unique(),
}


def _collectors(tmp_path: Path) -> dict[str, Callable[[pl.LazyFrame], pl.DataFrame]]:
    def sunk(frame: pl.LazyFrame) -> pl.DataFrame:
        path = tmp_path / "out.parquet"
        frame.sink_parquet(path)
        return pl.read_parquet(path)

    return {
        "collect": lambda frame: frame.collect(),
        "streaming": lambda frame: frame.collect(engine="streaming"),
        "sink": sunk,
    }


@pytest.mark.parametrize("plan", sorted(REORDERING_PLANS))
def test_keyed_counts_follow_their_records(plan: str, tmp_path: Path) -> None:
    originals, avatars = noisy_pair(3000, seed=1)
    reorder = REORDERING_PLANS[plan]
    left = reorder(originals.lazy())
    right = avatars.lazy()
    if plan == "filter":  # filters on both sides: the avatars lose the same records
        right = right.filter(pl.col("id") % 2 == 0)
    kept = left.collect()
    expected = counts_by_id(kept, right.collect())
    per_record = phr.local_cloaking(left, right, coords=GRID_COORDS, on="id")
    assert isinstance(per_record, pl.LazyFrame)
    for name, collect in _collectors(tmp_path).items():
        result = collect(per_record)
        assert result.height == kept.height, name
        assert_counts_by_id(result, expected)
    eager = phr.local_cloaking(kept, avatars.filter(pl.col("id").is_in(kept["id"].implode())),
                               coords=GRID_COORDS, on="id")  # fmt: skip
    assert_counts_by_id(eager, expected)


@pytest.mark.parametrize("plan", ["shuffle", "join", "group_by_explode"])
def test_row_order_link_counts_the_rows_it_shows(plan: str, tmp_path: Path) -> None:
    # By row order the link *is* the order the plan gives: each output row must carry the
    # count of the row it shows, linked to the avatar of the same position.
    originals, avatars = noisy_pair(2000, seed=2)
    left = REORDERING_PLANS[plan](originals.lazy())
    per_record = phr.local_cloaking(left, avatars.lazy(), coords=GRID_COORDS)
    for collect in _collectors(tmp_path).values():
        result = collect(per_record)
        expected = brute_force_counts(
            result.select(GRID_COORDS).to_numpy(), avatars.select(GRID_COORDS).to_numpy(), 1e-9
        )
        np.testing.assert_array_equal(result["local_cloaking"].to_numpy(), expected)


def test_a_plan_that_changes_its_records_between_reads_is_refused() -> None:
    # Two versions of each record; each read keeps a random one of them.
    originals, avatars = noisy_pair(500, seed=3)
    doubled = pl.concat([originals, originals.with_columns(pl.col("d1") + 100.0)])
    either = (
        doubled.lazy()
        .with_columns(draw=pl.int_range(pl.len()).shuffle())
        .sort("draw")
        .unique("id", keep="first")
        .drop("draw")
    )
    with pytest.raises(pl.exceptions.ComputeError, match="gave other records when read again"):
        phr.local_cloaking(either, avatars.lazy(), coords=GRID_COORDS, on="id").collect()


def test_keyed_join_back_keeps_the_originals_order() -> None:
    originals, avatars = noisy_pair(4000, seed=4)
    result = phr.local_cloaking(
        originals.lazy(), avatars.sample(fraction=1.0, shuffle=True, seed=0).lazy(),
        coords=GRID_COORDS, on="id",
    ).collect()  # fmt: skip
    assert result.drop("local_cloaking", "hidden").equals(originals)
    assert_counts_by_id(result, counts_by_id(originals, avatars))


def test_projected_keyed_counts_follow_their_records() -> None:
    originals, avatars = noisy_pair(1500, seed=5, d=4)
    left = REORDERING_PLANS["shuffle"](originals.lazy())
    features = ["d1", "d2", "d3", "d4"]
    result = phr.local_cloaking(left, avatars.lazy(), features=features, ncp=3, on="id").collect()
    projection = phr.Projection.fit(originals, features=features, ncp=3)
    dims = projection.coordinate_columns()
    expected = counts_by_id(
        projection.transform(originals), projection.transform(avatars), coords=dims
    )
    assert_counts_by_id(result, expected)


# --- 4. No rescaling changes a count ---------------------------------------------------------


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 40),
    d=st.integers(1, 4),
    exponent=st.integers(-1000, 1000),
    offset=st.sampled_from([0.0, 0.5, 1024.0, 2.0**20]),
)
def test_counts_survive_power_of_two_scales_and_reordering(
    seed: int, n: int, d: int, exponent: int, offset: float
) -> None:
    rng = np.random.default_rng(seed)
    # Dyadic grids with duplicates, zero distances and exact ties, around an offset.
    x = rng.integers(-3, 4, (n, d)) * 0.25 + offset
    y = x + rng.integers(-2, 3, (n, d)) * 0.25
    scaled_x, scaled_y = np.ldexp(x, exponent), np.ldexp(y, exponent)
    assume(np.array_equal(np.ldexp(scaled_x, -exponent), x))
    assume(np.array_equal(np.ldexp(scaled_y, -exponent), y))
    names = [f"d{k + 1}" for k in range(d)]
    ids = pl.Series("id", rng.permutation(n), dtype=pl.Int64)
    originals = pl.DataFrame(scaled_x, schema=names).with_columns(ids)
    avatars = pl.DataFrame(scaled_y, schema=names).with_columns(ids)
    order = pl.Series("draw", rng.permutation(n))
    reordered = originals.lazy().with_columns(order).sort("draw").drop("draw")
    expected = dict(zip(ids.to_list(), brute_force_counts(x, y, 1e-9).tolist(), strict=True))
    result = phr.local_cloaking(reordered, avatars.lazy(), coords=names, on="id").collect()
    assert_counts_by_id(result, expected)
    rate = phr.hidden_rate(originals, avatars, coords=names)
    assert rate == hidden_share(np.array(list(expected.values())))
