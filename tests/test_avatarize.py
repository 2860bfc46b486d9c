"""The reference avatar generator: schema, order, seeds, exact neighbours, k against the rate."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import polars_hidden_rate as phr
from polars_hidden_rate.avatarize import avatar_weights, nearest_others
from tests.helpers import examples

STAGES = ["I", "II", "III", "IV"]


def cohort(n: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(20, 90, n)
    sex = rng.choice(["F", "M"], n)
    return pl.DataFrame(
        {
            "age": age.astype(np.int16),
            "weight": np.round(50 + 0.3 * age + 8 * (sex == "M") + rng.normal(0, 8, n), 1),
            "visits": rng.poisson(3, n).astype(np.uint32),
            "admitted": [
                dt.date(2021, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 700, n)
            ],
            "sex": sex,
            "stage": rng.choice(STAGES, n, p=[0.4, 0.3, 0.2, 0.1]),
            "centre": rng.choice(["north", "south", "east"], n),
            "smoker": rng.random(n) < 0.3,
        }
    ).with_columns(pl.col("stage").cast(pl.Enum(STAGES)), pl.col("centre").cast(pl.Categorical))


def test_schema_order_and_types_are_kept() -> None:
    records = cohort(300, seed=0)
    avatars = phr.avatarize(records, 10, seed=1)
    assert avatars.schema == records.schema
    assert avatars.height == records.height
    for name in ("sex", "stage", "centre", "smoker"):
        assert set(avatars[name].cast(pl.String).to_list()) <= set(
            records[name].cast(pl.String).to_list()
        )
    # Integer columns hold integers inside the originals' range (avatars are local averages).
    for name in ("age", "visits"):
        assert avatars[name].dtype.is_integer()
        assert records[name].min() <= avatars[name].min()  # type: ignore[operator]
        assert avatars[name].max() <= records[name].max()  # type: ignore[operator]
    assert not avatars.equals(records)


def test_row_i_is_the_avatar_of_record_i() -> None:
    rng = np.random.default_rng(2)
    far = np.r_[np.zeros(50), np.full(50, 1000.0)]
    records = pl.DataFrame(
        {"x": far + rng.normal(size=100), "y": rng.normal(size=100), "g": ["a"] * 50 + ["b"] * 50}
    )
    avatars = phr.avatarize(records, 5, seed=0, ncp=2)
    np.testing.assert_array_equal(avatars["x"].to_numpy() > 500, far > 500)
    assert avatars["g"].equals(records["g"])


def test_seed_reproducible() -> None:
    records = cohort(200, seed=3)
    first = phr.avatarize(records, 5, seed=42)
    assert first.equals(phr.avatarize(records.lazy(), 5, seed=42))
    assert not first.equals(phr.avatarize(records, 5, seed=43))


def test_larger_k_hides_more() -> None:
    records = cohort(800, seed=4)
    rates = {
        k: np.mean([phr.hidden_rate(records, phr.avatarize(records, k, seed=s)) for s in range(2)])
        for k in (5, 40)
    }
    assert rates[5] < rates[40]


def test_duplicates_average_to_themselves() -> None:
    # Each record's 2 nearest others are exact duplicates: its avatar is that duplicate.
    base = pl.DataFrame({"n": [1, 5, 9, 40], "c": ["a", "b", "a", "b"], "f": [0.5, 2.0, 3.0, 7.5]})
    records = pl.concat([base] * 3)
    avatars = phr.avatarize(records, 2, seed=0)
    assert avatars.select("n", "c").equals(records.select("n", "c"))
    np.testing.assert_allclose(avatars["f"].to_numpy(), records["f"].to_numpy(), rtol=1e-12)


@settings(max_examples=examples(60), deadline=None)
@given(
    arrays(
        np.float64, st.tuples(st.integers(2, 25), st.integers(1, 3)), elements=st.integers(-2, 2)
    ),
    st.integers(1, 24),
)
def test_nearest_others_exact_with_ties(coords: np.ndarray, k: int) -> None:
    n = len(coords)
    k = min(k, n - 1)
    neighbours, squared = nearest_others(coords, k)
    for i in range(n):
        d2 = ((coords[i] - coords) ** 2).sum(axis=1)
        others = [j for j in range(n) if j != i]
        expected = sorted(others, key=lambda j: (d2[j], j))[:k]
        assert neighbours[i].tolist() == expected
        np.testing.assert_array_equal(squared[i], d2[expected])


def test_weights_zero_distance_takes_all() -> None:
    squared = np.array([[0.0, 1.0, 4.0], [0.0, 0.0, 9.0], [1.0, 4.0, 16.0]])
    weights = avatar_weights(squared, np.random.default_rng(0))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    assert weights[0].tolist() == [1.0, 0.0, 0.0]
    assert weights[1, 2] == 0.0
    assert (weights[1, :2] > 0).all()
    assert (weights[2] > 0).all()


@pytest.mark.parametrize(("k", "error"), [(0, ValueError), (6, ValueError), (2.0, TypeError)])
def test_bad_k(k: object, error: type[Exception]) -> None:
    records = pl.DataFrame({"x": [1.0, 2.0, 3.0, 4.0, 6.0, 9.0]})
    with pytest.raises(error, match="k"):
        phr.avatarize(records, k, seed=0)  # type: ignore[arg-type]


def test_missing_values_are_refused_without_suggesting_an_option_it_lacks() -> None:
    """The projection's error suggests ``impute=``, which avatarize does not take."""
    records = pl.DataFrame(
        {"x": [1.0, None, 3.0, float("nan"), 6.0], "s": ["a", "b", None, "a", "b"]}
    )
    with pytest.raises(pl.exceptions.ComputeError) as raised:
        phr.avatarize(records, 2, seed=0)
    message = str(raised.value)
    assert message.startswith("records have missing values: 'x' (1 null), 's' (1 null), ")
    assert "'x' (1 NaN) in 5 rows" in message
    assert "impute" not in message
    assert "fill them (fill_null, fill_nan) or drop those records" in message
