"""Bad input gets a typed error that names the culprit, and nothing is touched."""

from __future__ import annotations

import polars as pl
import pytest
from polars.exceptions import (
    ColumnNotFoundError,
    ComputeError,
    DuplicateError,
    NoDataError,
    SchemaError,
    ShapeError,
)

import polars_hidden_rate as phr


@pytest.fixture
def frames() -> tuple[pl.DataFrame, pl.DataFrame]:
    originals = pl.DataFrame(
        {"Dim1": [0.0, 1.0, 2.0, 3.0], "Dim2": [0.0, 1.0, 0.0, 1.0], "id": [1, 2, 3, 4]}
    )
    avatars = pl.DataFrame(
        {"Dim1": [0.5, 1.0, 2.5, 3.0], "Dim2": [0.0, 0.5, 0.0, 1.0], "id": [4, 3, 2, 1]}
    )
    return originals, avatars


def run(originals: pl.DataFrame, avatars: pl.DataFrame, /, **options: object) -> None:
    options.setdefault("coords", ["Dim1", "Dim2"])
    phr.local_cloaking(originals, avatars, **options)  # type: ignore[arg-type]
    phr.local_cloaking(originals.lazy(), avatars.lazy(), **options).collect()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "error", "culprit"),
    [
        ({"coords": ["Dim1", "Dim9"]}, ColumnNotFoundError, "Dim9"),
        ({"coords": "nope"}, ColumnNotFoundError, "nope"),
        ({"coords": ["Dim1"], "on": "key"}, ColumnNotFoundError, "key"),
        ({"ncp": 0}, ValueError, "ncp"),
        ({"ncp": 3}, ValueError, "ncp"),
        ({"features": ["Dim1"]}, ValueError, "coords"),
        ({"tie_tol": -1.0}, ValueError, "tie_tol"),
        ({"tie_tol": float("nan")}, ValueError, "tie_tol"),
        ({"threads": 0}, ValueError, "threads"),
        ({"on": "id", "left_on": "id"}, ValueError, "on"),
        ({"left_on": "id"}, ValueError, "right_on"),
        ({"device": "tpu"}, ValueError, "device"),
    ],
)
def test_bad_options(
    frames: tuple[pl.DataFrame, pl.DataFrame],
    options: dict[str, object],
    error: type[Exception],
    culprit: str,
) -> None:
    with pytest.raises(error, match=culprit):
        run(*frames, **options)


def test_coordinate_missing_from_avatars(frames: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    originals, avatars = frames
    with pytest.raises(ColumnNotFoundError, match="'Dim2' not found in avatars"):
        run(originals, avatars.drop("Dim2"))


def test_non_numeric_coordinate(frames: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    originals, avatars = frames
    with pytest.raises(SchemaError, match="'Dim2' of avatars must be numeric"):
        run(originals, avatars.with_columns(pl.col("Dim2").cast(pl.String)))
    with pytest.raises(SchemaError, match="'Dim1' of originals must be numeric"):
        run(originals.with_columns(pl.col("Dim1") > 1), avatars)


@pytest.mark.parametrize(
    ("value", "kind"), [(None, "null"), (float("nan"), "NaN"), (float("inf"), "infinite")]
)
def test_missing_or_non_finite_coordinates(
    frames: tuple[pl.DataFrame, pl.DataFrame], value: float | None, kind: str
) -> None:
    originals, avatars = frames
    broken = avatars.with_columns(
        Dim2=pl.when(pl.col("id") > 2).then(pl.lit(value, pl.Float64)).otherwise(pl.col("Dim2"))
    )
    with pytest.raises(
        ComputeError, match=f"coords of avatars have missing values: 'Dim2' \\(2 {kind}\\)"
    ):
        run(originals, broken)


def test_heights_differ_with_row_order_link(frames: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    originals, avatars = frames
    with pytest.raises(ShapeError, match="4 rows but avatars have 3"):
        run(originals, avatars.head(3))


def test_duplicate_keys(frames: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    originals, avatars = frames
    with pytest.raises(DuplicateError, match=r"not unique in avatars: 2 rows.*'id': 1"):
        run(originals, avatars.with_columns(id=pl.Series([4, 1, 2, 1])), on="id")


def test_original_without_avatar(frames: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    originals, avatars = frames
    with pytest.raises(ComputeError, match=r"1 originals have no avatar.*values not shown"):
        run(originals, avatars.with_columns(id=pl.Series([40, 3, 2, 1])), on="id")


def test_avatar_without_original(frames: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    originals, avatars = frames
    extra = pl.concat([avatars, pl.DataFrame({"Dim1": [9.0], "Dim2": [9.0], "id": [99]})])
    with pytest.raises(ComputeError, match=r"1 avatars have no original.*'id': 99"):
        run(originals, extra, on="id")


def test_key_types_differ(frames: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    originals, avatars = frames
    with pytest.raises(SchemaError, match="key 'id'"):
        run(originals, avatars.with_columns(pl.col("id").cast(pl.String)), on="id")


def test_empty_frames(frames: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    originals, avatars = frames
    with pytest.raises(NoDataError, match="originals is empty"):
        run(originals.clear(), avatars.clear())


@pytest.mark.parametrize("column", ["local_cloaking", "hidden"])
def test_output_column_already_present(
    frames: tuple[pl.DataFrame, pl.DataFrame], column: str
) -> None:
    originals, avatars = frames
    with pytest.raises(DuplicateError, match=column):
        run(originals.with_columns(pl.lit(1).alias(column)), avatars)


def test_not_a_frame(frames: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    originals, _ = frames
    with pytest.raises(TypeError, match="avatars must be a polars DataFrame"):
        phr.hidden_rate(originals, originals.to_dict(), coords=["Dim1"])  # type: ignore[arg-type]


def test_errors_leave_inputs_untouched(frames: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    originals, avatars = frames
    before = (originals.clone(), avatars.clone())
    with pytest.raises(DuplicateError):
        run(originals, avatars.with_columns(id=pl.Series([4, 1, 2, 1])), on="id")
    assert originals.equals(before[0])
    assert avatars.equals(before[1])
