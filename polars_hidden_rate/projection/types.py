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
from polars_hidden_rate.frames import (
    ColumnSpec,
    default_features,
    is_selection,
    is_text,
    resolve_columns,
    shared_schema,
)

Modality = str | bool
Impute = Literal["none", "median", "mean", "mode"]
"""How missing feature values are filled: not at all (an error), or with a statistic of the
originals: the median or mean of a numeric column (the mode of a categorical one), or the
mode everywhere."""

_PER_SECOND = {"ns": 1e9, "us": 1e6, "ms": 1e3}
_SECONDS_PER_DAY = 86400.0


def is_categorical(dtype: pl.DataType) -> bool:
    """String, Categorical, Enum and Boolean columns are categorical."""
    return is_text(dtype) or dtype == pl.Boolean


def type_family(dtype: pl.DataType) -> str | None:
    """The family a feature's type belongs to; None when it cannot be projected.

    Two frames may hold a feature in different types of one family: any integer or
    float width, or String / Categorical / Enum.
    """
    if dtype.is_numeric():
        return "numeric"
    if is_text(dtype):
        return "text"
    if dtype == pl.Boolean:
        return "Boolean"
    if isinstance(dtype, pl.Datetime):
        return f"Datetime(time_zone={dtype.time_zone!r})"
    if dtype.is_temporal():
        return str(dtype.base_type())
    return None


def check_feature_types(
    features: Sequence[str], schema: pl.Schema, role: str, originals: pl.Schema | None = None
) -> None:
    """Every feature exists in ``schema`` (the ``role`` side's) and has a type that can be
    projected; given the ``originals``' schema, each is of its type family there."""
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
    if originals is None:
        return
    for name in features:
        if type_family(originals[name]) != type_family(schema[name]):
            msg = (
                f"feature {name!r} is {originals[name]} in originals but {schema[name]} in "
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
        names = default_features(originals, avatars, exclude)
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
        check_feature_types(names, avatars, "avatars", originals)
    return names


@dataclass(frozen=True)
class FeatureSpec:
    """The features to project, which of them are categorical, and how to fill their gaps;
    ``named``: those of ``categorical`` named as such (the others are by type)."""

    names: tuple[str, ...]
    categorical: frozenset[str]
    impute: Impute = "none"
    categorical_rule: str = "by type (text, categorical and boolean columns)"
    named: frozenset[str] = frozenset()

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
        kinds = set(forced)
        for name in names:
            if is_categorical(originals[name]):
                kinds.add(name)
        rule = cls.categorical_rule if categorical is None else "named, and by type"
        return cls(tuple(names), frozenset(kinds), impute, rule, frozenset(forced))  # type: ignore[arg-type]

    @property
    def numeric(self) -> list[str]:
        return [name for name in self.names if name not in self.categorical]


def from_seconds(values: Float64Array, name: str, dtype: pl.DataType) -> pl.Series:
    """Inverse of `numeric_values`: float64 values back to ``dtype``, integers rounded."""
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
    """A categorical column as the values its modalities are stored as, each value exactly:
    Booleans as they are, others as text. A number is keyed by its exact value: an integer
    by its digits, whatever the type that holds it (so 1, 1.0 and Decimal 1.00 are one
    modality, and 2^53 + 1 is not 2^53), ``-0.0`` as ``0``; any other float by its shortest
    round-trip text, and so is a decimal that its float64 gives back (Decimal 0.5 and 0.5
    are one modality), other decimals by their digits. NaN is missing (null), as a null is."""
    column = pl.col(name)
    if dtype == pl.Boolean:
        return column
    if dtype.is_integer() or (isinstance(dtype, pl.Decimal) and dtype.scale == 0):
        return column.cast(pl.String)
    if isinstance(dtype, pl.Decimal):
        value = column.cast(pl.Float64)
        # The digits without the zeros a scale pads with: "1.50" -> "1.5", "-0.00" -> "0".
        digits = column.cast(pl.String).str.replace(r"0+$", "").str.replace(r"\.$", "")
        digits = pl.when(digits == "-0").then(pl.lit("0")).otherwise(digits)
        given_back = value.cast(dtype, strict=False) == column
        return pl.when(given_back).then(_float_key(value)).otherwise(digits)
    if dtype.is_float():
        return _float_key(column.cast(pl.Float64))
    return column.cast(pl.String)


def _float_key(value: pl.Expr) -> pl.Expr:
    """A float64's modality: integral values an integer type holds by their digits, others
    by their shortest round-trip text; NaN as null."""
    integral = value.is_finite() & (value == value.round()) & (value.abs() < _INT128_LIMIT)
    return (
        pl.when(value.is_nan())
        .then(None)
        .when(integral)
        .then(value.cast(pl.Int128).cast(pl.String))
        .otherwise(value.cast(pl.String))
    )


_INT128_LIMIT = 2.0**127


def numeric_values(name: str, dtype: pl.DataType, fill: float | None = None) -> pl.Expr:
    """A numeric or temporal feature as float64, temporal columns in seconds; NaN and nulls
    replaced by ``fill``."""
    column = pl.col(name)
    if dtype == pl.Date:
        values = column.cast(pl.Int32).cast(pl.Float64) * _SECONDS_PER_DAY
    elif isinstance(dtype, pl.Datetime | pl.Duration):
        values = column.cast(pl.Int64).cast(pl.Float64) / _PER_SECOND[dtype.time_unit or "us"]
    elif dtype == pl.Time:
        values = column.cast(pl.Int64).cast(pl.Float64) / _PER_SECOND["ns"]
    else:
        values = column.cast(pl.Float64)
    return values if fill is None else values.fill_nan(None).fill_null(fill)


def modality_values(name: str, dtype: pl.DataType, fill: Modality | None = None) -> pl.Expr:
    """A categorical feature's modalities (`modality_key`), gaps replaced by ``fill``."""
    key = modality_key(name, dtype)
    return key if fill is None else key.fill_null(pl.lit(fill))


def gaps(name: str, dtype: pl.DataType, categorical: bool, filled: bool) -> pl.Expr:
    """A float64 expression whose nulls, NaN and infinities are the feature's missing values
    (``filled``: once its fill replaces nulls and NaN), for
    `missing_values`.

    A numeric feature counts as its values do; so does a numeric column taken as
    categorical (null and NaN are missing, infinities refused); any other categorical
    column counts its nulls.
    """
    if dtype.is_numeric() or not categorical:
        values = numeric_values(name, dtype)
        return values.fill_nan(None).fill_null(0.0) if filled else values
    present = pl.lit(0.0, dtype=pl.Float64)
    return present if filled else pl.when(pl.col(name).is_null()).then(None).otherwise(present)
