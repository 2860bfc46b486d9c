"""Raw files as they come: categories coded as numbers, and missing values imputed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate.projection import CategoricalFeature, NumericFeature
from polars_hidden_rate.projection.types import Impute
from tests.helpers import (
    brute_force_counts,
    hidden_share,
    launch,
)


def coded_pair(n: int = 300, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two numeric columns and a category coded 0/1/2, as a published release holds them."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    stage = rng.integers(0, 3, n)
    originals = pl.DataFrame(
        {"id": np.arange(n), "age": x[:, 0] * 10 + 50, "bmi": x[:, 1] * 4 + 25, "stage": stage}
    )
    avatars = pl.DataFrame(
        {
            "id": np.arange(n),
            "age": originals["age"] + rng.normal(size=n) * 4,
            "bmi": originals["bmi"] + rng.normal(size=n) * 2,
            "stage": np.where(rng.random(n) < 0.3, rng.integers(0, 3, n), stage),
        }
    )
    return originals, avatars


def reference(
    originals: pl.DataFrame, avatars: pl.DataFrame, projection: phr.Projection
) -> np.ndarray:
    dims = projection.coordinate_columns()
    return brute_force_counts(
        projection.transform(originals).select(dims).to_numpy(),
        projection.transform(avatars).select(dims).to_numpy(),
        1e-9,
    )


def test_integer_codes_project_as_categories() -> None:
    originals, avatars = coded_pair()
    features = ["age", "bmi", "stage"]
    as_numbers = phr.Projection.fit(originals, features=features, ncp=3)
    as_codes = phr.Projection.fit(originals, features=features, ncp=3, categorical=["stage"])
    assert as_numbers.model == "PCA"
    assert as_codes.model == "FAMD"
    stage = as_codes.scaling.features[2]
    assert isinstance(stage, CategoricalFeature)
    assert stage.modalities == ("0", "1", "2")  # integer codes keyed exactly, by their digits
    got = phr.local_cloaking(originals, avatars, features=features, ncp=3, categorical="stage")
    np.testing.assert_array_equal(
        got["local_cloaking"].to_numpy(), reference(originals, avatars, as_codes)
    )
    assert got["stage"].dtype == pl.Int64  # the output keeps the column as given
    numbers = phr.local_cloaking(originals, avatars, features=features, ncp=3)
    assert not numbers["local_cloaking"].equals(got["local_cloaking"])


def test_a_code_read_as_float_is_the_same_category() -> None:
    originals, avatars = coded_pair(seed=1)
    floats = avatars.with_columns(pl.col("stage").cast(pl.Float64))
    options: phr.CountOptions = {
        "features": ["age", "bmi", "stage"],
        "categorical": ["stage"],
        "on": "id",
    }
    as_ints = phr.local_cloaking(originals, avatars, **options)
    as_floats = phr.local_cloaking(originals, floats, **options)
    assert as_ints["local_cloaking"].to_list() == as_floats["local_cloaking"].to_list()


def test_coded_categories_unscale_to_their_type() -> None:
    originals, _ = coded_pair(seed=2)
    projection = phr.Projection.fit(originals, features=["age", "stage"], categorical=["stage"])
    back = projection.unscale(projection.scaled(originals))
    assert back["stage"].dtype == pl.Int64
    assert back["stage"].to_list() == originals["stage"].to_list()


def with_gaps(frame: pl.DataFrame, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    holes = pl.Series(rng.random(frame.height) < 0.1)
    return frame.with_columns(
        age=pl.when(holes).then(None).otherwise(pl.col("age")),
        bmi=pl.when(pl.Series(rng.random(frame.height) < 0.1)).then(float("nan")).otherwise("bmi"),
        stage=pl.when(pl.Series(rng.random(frame.height) < 0.1)).then(None).otherwise("stage"),
    )


IMPUTES: list[Impute] = ["median", "mean", "mode"]


@pytest.mark.parametrize("impute", IMPUTES)
def test_imputation_fills_both_frames_with_the_originals_statistics(impute: Impute) -> None:
    originals, avatars = coded_pair(seed=3)
    originals, avatars = with_gaps(originals, 1), with_gaps(avatars, 2)
    features = ["age", "bmi", "stage"]
    projection = phr.Projection.fit(
        originals,
        features=features,
        ncp=3,
        categorical=["stage"],
        impute=impute,
    )
    present = {name: originals[name].fill_nan(None).drop_nulls() for name in ("age", "bmi")}
    fills = {f.name: f.fill for f in projection.scaling.features}
    for name, values in present.items():
        if impute == "median":
            assert fills[name] == values.median()
        elif impute == "mean":
            assert fills[name] == values.mean()
        else:
            assert fills[name] == values.mode().sort()[0]
    stage_mode = originals["stage"].drop_nulls().mode().sort()[0]
    assert fills["stage"] == str(stage_mode)
    # The same counts as projecting frames filled by hand, without imputation.
    filled = {
        side: frame.with_columns(
            pl.col("age").fill_null(fills["age"]),
            pl.col("bmi").fill_nan(None).fill_null(fills["bmi"]),
            pl.col("stage").fill_null(int(float(str(fills["stage"])))),
        )
        for side, frame in (("originals", originals), ("avatars", avatars))
    }
    by_hand = phr.Projection.fit(
        filled["originals"], features=features, ncp=3, categorical=["stage"]
    )
    expected = reference(filled["originals"], filled["avatars"], by_hand)
    got = phr.local_cloaking(
        originals.lazy(), avatars.lazy(), features=features, ncp=3, on="id",
        categorical=["stage"], impute=impute,
    ).collect()  # fmt: skip
    np.testing.assert_array_equal(got["local_cloaking"].to_numpy(), expected)
    # The output keeps the values as given, gaps included.
    assert got.drop("local_cloaking", "hidden").equals(originals, null_equal=True)
    rate = phr.hidden_rate(
        originals,
        avatars,
        features=features,
        ncp=3,
        categorical=["stage"],
        impute=impute,
    )
    assert rate == hidden_share(expected)


def test_missing_values_without_imputation_name_the_way_out() -> None:
    originals, avatars = coded_pair(seed=4)
    with pytest.raises(pl.exceptions.ComputeError, match=r"'age' \(\d+ null\).*impute="):
        phr.hidden_rate(with_gaps(originals, 0), avatars, features=["age", "bmi"])


def test_a_feature_without_any_value_cannot_be_imputed() -> None:
    originals, avatars = coded_pair(seed=5)
    empty = originals.with_columns(age=pl.lit(None, pl.Float64))
    with pytest.raises(pl.exceptions.ComputeError, match=r"no value to impute from: \['age'\]"):
        phr.hidden_rate(empty, avatars, features=["age", "bmi"], impute="median")


def test_imputation_and_categories_are_for_raw_features() -> None:
    originals, avatars = coded_pair(seed=6)
    with pytest.raises(ValueError, match="`categorical` and `impute`"):
        phr.hidden_rate(originals, avatars, coords=["age", "bmi"], impute="mean")
    with pytest.raises(ValueError, match="`impute` must be one of none, median, mean, mode"):
        phr.hidden_rate(originals, avatars, features=["age"], impute="zero")  # type: ignore[arg-type]
    with pytest.raises(pl.exceptions.ColumnNotFoundError, match="'id' is not among the features"):
        phr.hidden_rate(originals, avatars, features=["age", "bmi"], categorical=["id"])


def test_numeric_fill_is_a_number() -> None:
    originals, _ = coded_pair(seed=7)
    projection = phr.Projection.fit(with_gaps(originals, 3), features=["age"], impute="median")
    (age,) = projection.scaling.features
    assert isinstance(age, NumericFeature)
    assert isinstance(age.fill, float)


def test_a_nan_code_is_missing_with_or_without_categorical(tmp_path: Path) -> None:
    # Issue 20 item 2: NaN in a numeric column declared categorical was a modality 'NaN'.
    rng = np.random.default_rng(21)
    n = 120
    k = rng.integers(0, 3, n).astype(float)
    k[7] = np.nan
    originals = pl.DataFrame({"x": rng.normal(size=n), "k": k})
    avatars = originals.with_columns(pl.col("x") + rng.normal(scale=0.2, size=n))
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o)
    avatars.write_csv(a)
    for extra in ([], ["--categorical", "k"]):
        done = launch("check", str(o), str(a), "--ncp", "2", *extra)
        assert done.returncode == 2, (extra, done.stdout)
        assert "'k'" in done.stderr
        assert "NaN" in done.stderr
    filled = launch("check", str(o), str(a), "--ncp", "2", "--categorical", "k", "--impute", "mode")
    assert filled.returncode == 0, filled.stderr
