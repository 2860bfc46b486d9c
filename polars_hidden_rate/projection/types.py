"""Which columns a projection takes, and how: type families, feature resolution, time as seconds."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import polars as pl
from polars.exceptions import ColumnNotFoundError, SchemaError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.frames import ColumnSpec, is_selection, resolve_columns, shared_schema

Modality = str | bool
Impute = Literal["none", "median", "mean", "mode"]
"""How missing feature values are filled: not at all (an error), or with a statistic of the
originals: the median or mean of a numeric column (the mode of a categorical one), or the
mode everywhere."""

_TEXT = (pl.String, pl.Categorical, pl.Enum)
_PER_SECOND = {"ns": 1e9, "us": 1e6, "ms": 1e3}
_SECONDS_PER_DAY = 86400.0


def is_categorical(dtype: pl.DataType) -> bool:
    """String, Categorical, Enum and Boolean columns are categorical."""
    return dtype.base_type() in (*_TEXT, pl.Boolean)


def type_family(dtype: pl.DataType) -> str | None:
    """The family a feature's type belongs to; None when it cannot be projected.

    Two frames may hold a feature in different types of one family: any integer or
    float width, or String / Categorical / Enum.
    """
    if dtype.is_numeric():
        return "numeric"
    if dtype.base_type() in _TEXT:
        return "text"
    if dtype == pl.Boolean:
        return "Boolean"
    if isinstance(dtype, pl.Datetime):
        return f"Datetime(time_zone={dtype.time_zone!r})"
    if dtype.is_temporal():
        return str(dtype.base_type())
    return None


def check_feature_types(features: Sequence[str], schema: pl.Schema, role: str) -> None:
    """Every feature exists in ``schema`` and has a type that can be projected."""
    for name in features:
        if name not in schema:
            msg = f"feature {name!r} not found in {role}; available: {schema.names()}"
            raise ColumnNotFoundError(msg)
        if type_family(schema[name]) is None:
            msg = (
                f"feature {name!r} of {role} has unsupported type {schema[name]}; features must be "
                "numeric, temporal, String, Categorical, Enum or Boolean"
            )
            raise SchemaError(msg)


def check_same_types(
    features: Sequence[str], originals: pl.Schema, avatars: pl.Schema, role: str = "avatars"
) -> None:
    """Each feature of ``avatars`` exists and is of the originals' type family."""
    check_feature_types(features, avatars, role)
    for name in features:
        if type_family(originals[name]) != type_family(avatars[name]):
            msg = (
                f"feature {name!r} is {originals[name]} in originals but {avatars[name]} in "
                f"{role}; cast one of them so that both are of one kind"
            )
            raise SchemaError(msg)


def resolve_features(
    features: ColumnSpec | None,
    originals: pl.Schema,
    avatars: pl.Schema | None = None,
    exclude: Sequence[str] = (),
) -> list[str]:
    """The feature columns; by default every column of the originals (that the avatars share),
    less ``exclude``. A selector picks among the columns both frames share (``cs.numeric()``
    leaves out a numeric identifier that only the originals hold); names must be in both.
    Raises at once, on the schemas only, for a missing or unsupported feature."""
    if features is None:
        names = [
            name
            for name in originals.names()
            if (avatars is None or name in avatars) and name not in exclude
        ]
        if not names:
            msg = "no column to project: the originals and avatars share no column besides the keys"
            raise ColumnNotFoundError(msg)
    elif is_selection(features) and avatars is not None:
        shared = shared_schema(originals, avatars)
        names = resolve_columns(features, shared, "originals and avatars", "features")
    else:
        names = resolve_columns(features, originals, "originals", "features")
    check_feature_types(names, originals, "originals")
    if avatars is not None:
        check_same_types(names, originals, avatars)
    return names


@dataclass(frozen=True)
class FeatureSpec:
    """The features to project, which of them are categorical, and how to fill their gaps."""

    names: tuple[str, ...]
    categorical: frozenset[str]
    impute: Impute = "none"

    @classmethod
    def resolve(
        cls,
        features: ColumnSpec | None,
        categorical: ColumnSpec | None,
        impute: object,
        originals: pl.Schema,
        avatars: pl.Schema | None = None,
        exclude: Sequence[str] = (),
    ) -> FeatureSpec:
        """Check the request on the schemas. Columns of categorical types are categorical, and
        so is every column named in ``categorical``, whatever its type (a selector picks
        among the features)."""
        names = resolve_features(features, originals, avatars, exclude)
        forced = set()
        if categorical is not None:
            among = pl.Schema({name: originals[name] for name in names})
            schema, role = (
                (among, "the features") if is_selection(categorical) else (originals, "originals")
            )
            forced = set(resolve_columns(categorical, schema, role, "categorical"))
            outside = sorted(forced - set(names))
            if outside:
                msg = f"categorical column {outside[0]!r} is not among the features {names}"
                raise ColumnNotFoundError(msg)
        if impute not in get_args(Impute):
            msg = f"`impute` must be one of {', '.join(get_args(Impute))}; got {impute!r}"
            raise ValueError(msg)
        kinds = {name for name in names if is_categorical(originals[name])} | forced
        return cls(tuple(names), frozenset(kinds), impute)  # type: ignore[arg-type]

    @property
    def numeric(self) -> list[str]:
        return [name for name in self.names if name not in self.categorical]


def as_seconds(name: str, dtype: pl.DataType) -> pl.Expr:
    """A numeric or temporal column as float64; temporal columns in seconds."""
    column = pl.col(name)
    if dtype == pl.Date:
        return column.cast(pl.Int32).cast(pl.Float64) * _SECONDS_PER_DAY
    if isinstance(dtype, pl.Datetime | pl.Duration):
        return column.cast(pl.Int64).cast(pl.Float64) / _PER_SECOND[dtype.time_unit or "us"]
    if dtype == pl.Time:
        return column.cast(pl.Int64).cast(pl.Float64) / _PER_SECOND["ns"]
    return column.cast(pl.Float64)


def from_seconds(values: Float64Array, name: str, dtype: pl.DataType) -> pl.Series:
    """Inverse of :func:`as_seconds`: float64 values back to ``dtype``, integers rounded."""
    if dtype == pl.Date:
        return pl.Series(name, np.rint(values / _SECONDS_PER_DAY)).cast(pl.Int32).cast(dtype)
    if isinstance(dtype, pl.Datetime | pl.Duration):
        physical = np.rint(values * _PER_SECOND[dtype.time_unit or "us"])
        return pl.Series(name, physical).cast(pl.Int64).cast(dtype)
    if dtype == pl.Time:
        return pl.Series(name, np.rint(values * _PER_SECOND["ns"])).cast(pl.Int64).cast(dtype)
    if dtype.is_integer():
        rounded = np.rint(values)
        with contextlib.suppress(TypeError):  # numpy has no 128-bit integers
            info = np.iinfo(str(dtype).lower())
            rounded = np.clip(rounded, info.min, info.max)
        return pl.Series(name, rounded).cast(dtype)
    return pl.Series(name, values).cast(dtype)


def modality_key(name: str, dtype: pl.DataType) -> pl.Expr:
    """A categorical column as the values its modalities are stored as: Booleans as they are,
    numbers as the text of their float64 value (so 1 and 1.0 are one modality), others as text."""
    column = pl.col(name)
    if dtype == pl.Boolean:
        return column
    if dtype.is_numeric():
        return column.cast(pl.Float64).cast(pl.String)
    return column.cast(pl.String)


def numeric_values(name: str, dtype: pl.DataType, fill: float | None = None) -> pl.Expr:
    """A numeric feature as float64 (:func:`as_seconds`), NaN and nulls replaced by ``fill``."""
    values = as_seconds(name, dtype)
    return values if fill is None else values.fill_nan(None).fill_null(fill)


def modality_values(name: str, dtype: pl.DataType, fill: Modality | None = None) -> pl.Expr:
    """A categorical feature's modalities (:func:`modality_key`), nulls replaced by ``fill``."""
    key = modality_key(name, dtype)
    return key if fill is None else key.fill_null(pl.lit(fill))
