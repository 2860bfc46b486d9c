"""The originals' statistics and the one scaling rule: frames to scaled columns and back.

Every scaled column ``j`` is ``(indicator_j - centre_j) / divisor_j``. A numeric
column's indicator is its value (temporal columns in seconds), with the mean as
centre and the population standard deviation as divisor. A modality's indicator is
``profile`` where the row holds it and 0 elsewhere, with its share ``p`` as centre
and ``sqrt(p)`` as divisor (``sqrt(p q)`` for MCA, ``q`` categorical columns, whose
rows are profiles: ``profile = q / r`` over the ``r`` modalities the originals know;
1 otherwise). `Scaling.expressions` writes that rule as Polars expressions, and
every other form (the numpy matrix, the coordinates, the inverse) is derived from it
or from `Scaling.centres` and `Scaling.divisors`.

A numeric column of extreme magnitude is first multiplied by a power of two (exactly)
that brings it near 1 (`NumericFeature.exponent`), so that a column whose spread
is subnormal, or whose values are near the float64 maximum, is standardized as safely
as any other.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import polars as pl

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.frames import RESERVED_PREFIX, inexact_values
from polars_hidden_rate.projection.types import (
    Modality,
    from_seconds,
    modality_values,
    numeric_values,
)

Model = Literal["PCA", "MCA", "FAMD"]
_PROFILE = f"{RESERVED_PREFIX}_profile"


@dataclass(frozen=True)
class NumericFeature:
    """A numeric column: ``(x 2^exponent - mean) / scale``, ``scale`` the population std or 1
    if constant; a missing ``x`` is ``fill`` (None: not filled).

    ``exponent`` is 0 unless the column's magnitude is extreme (its largest value beyond
    2^1000 or below 2^-960, or its spread below 2^-960): then ``x 2^exponent`` lies in
    ``[-1, 1]``, and ``mean`` and ``scale`` are in those units, where they keep every bit.
    """

    name: str
    dtype: pl.DataType
    mean: float
    scale: float
    fill: float | None = None
    exponent: int = 0

    def values(self, schema: pl.Schema) -> pl.Expr:
        """The column's values as float64 times ``2^exponent``, gaps filled; NaN where float64
        does not hold the value exactly (`inexact_values`)."""
        dtype = schema[self.name]
        values = numeric_values(self.name, dtype, self.fill)
        if self.exponent:
            values = times_power_of_two(values, self.exponent)
        inexact = inexact_values(pl.col(self.name), dtype)
        return values if inexact is None else pl.when(inexact).then(float("nan")).otherwise(values)


def times_power_of_two(values: pl.Expr, exponent: int) -> pl.Expr:
    """``values * 2^exponent``, exactly (in two factors, each a float64, when one overflows)."""
    if abs(exponent) <= _LARGEST_EXPONENT:
        return values * 2.0**exponent
    half = exponent // 2
    return values * 2.0**half * 2.0 ** (exponent - half)


_LARGEST_EXPONENT = 1000


@dataclass(frozen=True, eq=False)
class CategoricalFeature:
    """A categorical column: its modalities, in a fixed order, and their shares in the originals;
    a missing value is ``fill`` (None: not filled)."""

    name: str
    dtype: pl.DataType
    modalities: tuple[Modality, ...]
    shares: Float64Array
    fill: Modality | None = None

    def values(self, schema: pl.Schema) -> pl.Expr:
        """The column's modalities (str or bool), gaps filled."""
        return modality_values(self.name, schema[self.name], self.fill)


Feature = NumericFeature | CategoricalFeature


def feature_width(feature: Feature) -> int:
    """The scaled columns of one feature: 1, or one per modality."""
    return 1 if isinstance(feature, NumericFeature) else len(feature.modalities)


@dataclass(frozen=True, eq=False)
class Scaling:
    """The originals' statistics: frames to scaled columns and back.

    Attributes
    ----------
    features, model
        What it is built from.
    names
        The features' names, in order.
    categorical
        The categorical features, in order.
    centres
        What each scaled column subtracts: the mean, or the modality's share.
    divisors
        What each scaled column divides by: the std, or ``sqrt(p)`` (``sqrt(p q)`` for MCA).
    width
        The number of scaled columns: one per numeric feature and per modality.
    input_names
        The columns of `inputs`: one per feature, by position, then the MCA profile.
    """

    features: tuple[Feature, ...]
    model: Model
    names: tuple[str, ...] = field(init=False)
    categorical: tuple[CategoricalFeature, ...] = field(init=False)
    centres: Float64Array = field(init=False)
    divisors: Float64Array = field(init=False)
    width: int = field(init=False)
    input_names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        # Worked out once: every form of the rule (expressions, coordinates, inverse) reads them.
        names: list[str] = []
        inputs: list[str] = []
        categorical: list[CategoricalFeature] = []
        for i, feature in enumerate(self.features):
            names.append(feature.name)
            inputs.append(f"{RESERVED_PREFIX}_input{i}")
            if isinstance(feature, CategoricalFeature):
                categorical.append(feature)
        q = len(categorical) if self.model == "MCA" else 1
        centres: list[Float64Array | list[float]] = []
        divisors: list[Float64Array | list[float]] = []
        for feature in self.features:
            if isinstance(feature, NumericFeature):
                centres.append([feature.mean])
                divisors.append([feature.scale])
            else:
                centres.append(feature.shares)
                divisors.append(np.sqrt(feature.shares * q))
        centre = np.concatenate(centres or [np.zeros(0)])
        assign = object.__setattr__  # frozen: derived fields are set here, once
        assign(self, "names", tuple(names))
        assign(self, "categorical", tuple(categorical))
        assign(self, "centres", centre)
        assign(self, "divisors", np.concatenate(divisors or [np.zeros(0)]))
        assign(self, "width", len(centre))
        assign(self, "input_names", [*inputs, _PROFILE] if self.model == "MCA" else inputs)

    @property
    def column_names(self) -> list[str]:
        """``name`` for a numeric column, ``name=modality`` for each dummy."""
        names: list[str] = []
        for feature in self.features:
            if isinstance(feature, NumericFeature):
                names.append(feature.name)
            else:
                names.extend(f"{feature.name}={m}" for m in feature.modalities)
        return names

    def profile(self, schema: pl.Schema) -> pl.Expr:
        """A row's weight on its modalities: ``q / r`` for MCA (``r`` known), else 1."""
        if self.model != "MCA":
            return pl.lit(1.0)
        known = pl.sum_horizontal(
            [f.values(schema).is_in(list(f.modalities)).cast(pl.Float64) for f in self.categorical],
            ignore_nulls=False,
        )
        return pl.when(known > 0).then(float(len(self.categorical)) / known).otherwise(0.0)

    def expressions(self, schema: pl.Schema) -> list[pl.Expr]:
        """The scaled columns of a frame with ``schema``: the rule itself, in column order."""
        # Only modalities weigh by the profile: numbers alone need none.
        profile = self.profile(schema) if self.categorical else pl.lit(1.0)
        indicators: list[pl.Expr] = []
        for feature in self.features:
            if isinstance(feature, NumericFeature):
                indicators.append(feature.values(schema))
            else:
                key = feature.values(schema)
                indicators.extend(
                    (key == pl.lit(m)).cast(pl.Float64) * profile for m in feature.modalities
                )
        scaled: list[pl.Expr] = []
        columns = zip(indicators, self.centres, self.divisors, strict=True)
        for j, (indicator, centre, divisor) in enumerate(columns):
            # Named by position, never by user text: a dummy "smoker=yes" may be a column's name.
            scaled.append(((indicator - centre) / divisor).alias(f"{RESERVED_PREFIX}_scaled{j}"))
        return scaled

    def matrix(self, frame: pl.DataFrame) -> Float64Array:
        """The scaled rows of ``frame`` (checked, null-free), float64 of shape ``(n, width)``."""
        if not self.features:
            return np.empty((frame.height, 0))
        scaled = frame.select(self.expressions(frame.schema)).to_numpy()
        return np.ascontiguousarray(scaled, dtype=np.float64)

    def inputs(self, schema: pl.Schema) -> list[pl.Expr]:
        """What `coordinate` reads from a frame with ``schema``, each worked out once per
        row however many components are asked for: a numeric feature's scaled column, a
        categorical one's modality as its position among the originals' (their number for a
        modality they never had, null for a gap), and for MCA the row's profile."""
        scaled = self.expressions(schema)
        inputs: list[pl.Expr] = []
        offset = 0
        for feature, name in zip(self.features, self.input_names, strict=False):
            if isinstance(feature, NumericFeature):
                inputs.append(scaled[offset].alias(name))
                offset += 1
            else:
                key = feature.values(schema)
                positions = key.replace_strict(
                    list(feature.modalities),
                    list(range(len(feature.modalities))),
                    default=len(feature.modalities),
                    return_dtype=pl.UInt32,
                )
                inputs.append(pl.when(key.is_null()).then(None).otherwise(positions).alias(name))
                offset += len(feature.modalities)
        if self.model == "MCA":
            inputs.append(self.profile(schema).alias(_PROFILE))
        return inputs

    def coordinate(self, component: Float64Array) -> pl.Expr:
        """The scaled rows along ``component``, as a Polars expression of the columns of
        `inputs` (a frame must have them first).

        Numeric columns take their scaled value times the loading; a categorical
        column sums to one lookup, ``profile * v_x / d_x - sum_m v_m p_m / d_m``, for
        the modality ``x`` the row holds (a modality the originals never had adds
        only the constant). The operations, and their order, are those of the
        scaled columns themselves, so the coordinates do not depend on this form.
        """
        centres, divisors = self.centres, self.divisors
        terms: list[pl.Expr] = []
        lookups: list[pl.Expr] = []
        constant = 0.0
        offset = 0
        for feature, name in zip(self.features, self.input_names, strict=False):
            if isinstance(feature, NumericFeature):
                terms.append(pl.col(name) * float(component[offset]))
                offset += 1
            else:
                columns = slice(offset, offset + len(feature.modalities))
                per_unit = component[columns] / divisors[columns]
                # The last entry is that of a modality the originals never had.
                table = pl.Series([*per_unit.tolist(), 0.0], dtype=pl.Float64)
                lookups.append(pl.lit(table).gather(pl.col(name)))
                constant -= float(per_unit @ centres[columns])
                offset += len(feature.modalities)
        if lookups:
            profile = pl.col(_PROFILE) if self.model == "MCA" else pl.lit(1.0)
            terms.append(profile * _sum_in_order(lookups) + constant)
        return _sum_in_order(terms)

    def unscale(self, matrix: Float64Array) -> pl.DataFrame:
        """Scaled rows back to the features: numbers de-scaled (integers rounded), and for each
        categorical column the modality with the largest indicator (the first on a tie)."""
        indicators = matrix * self.divisors + self.centres
        columns: list[pl.Series] = []
        offset = 0
        for feature in self.features:
            if isinstance(feature, NumericFeature):
                values = np.ldexp(indicators[:, offset], -feature.exponent)
                columns.append(from_seconds(values, feature.name, feature.dtype))
            else:
                block = indicators[:, offset : offset + len(feature.modalities)]
                picked = [feature.modalities[i] for i in np.argmax(block, axis=1)]
                columns.append(_modalities_as(picked, feature.name, feature.dtype))
            offset += feature_width(feature)
        return pl.DataFrame(columns)


RUN = 32
"""How many terms a coordinate adds left to right before the runs' sums meet in a tree."""


def _sum_in_order(terms: list[pl.Expr]) -> pl.Expr:
    """The terms' sum in one fixed order, null where any term is: left to right in runs of
    `RUN` terms (``((t1 + t2) + t3) + ...``: up to 32 terms, the plain left-to-right sum), then
    the runs' sums added pairwise, level by level (``(r1 + r2) + (r3 + r4)``, an odd last one
    carried up as it is). Its depth is ``RUN + log2(len(terms) / RUN)``: Polars takes time and
    memory quadratic in an expression's depth, which a chain of a thousand columns made
    minutes and gigabytes. Not ``pl.sum_horizontal``: from three terms it adds in a tree its
    thread pool shapes, so the last bits of a sum would depend on the threads, and an eager
    frame could differ from the same frame lazy."""
    level: list[pl.Expr] = []
    for start in range(0, len(terms), RUN):
        level.append(functools.reduce(operator.add, terms[start : start + RUN]))
    while len(level) > 1:
        pairs = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
        level = [*pairs, level[-1]] if len(level) % 2 else pairs
    return level[0]


def _modalities_as(picked: list[Modality], name: str, dtype: pl.DataType) -> pl.Series:
    """Modalities back in the column's type (numbers were keyed by their exact text)."""
    if dtype == pl.Boolean:
        return pl.Series(name, picked, dtype=pl.Boolean)
    text = pl.Series(name, picked, dtype=pl.String)
    return text.cast(pl.Float64).cast(dtype) if dtype.is_float() else text.cast(dtype)
