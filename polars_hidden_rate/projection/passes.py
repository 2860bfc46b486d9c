"""The fit's two streaming passes over the originals: statistics, then the Gram matrix.

Blocks have a fixed size whatever the batches the source delivers, so a DataFrame
and a LazyFrame of the same rows give the same fit, bit for bit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt
import polars as pl
from polars.exceptions import ComputeError, NoDataError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
    MissingValues,
    inexact_values,
    missing_values,
    raise_inexact,
    raise_missing,
)
from polars_hidden_rate.frames.text_numbers import refuse_text_numbers
from polars_hidden_rate.projection.scaling import (
    CategoricalFeature,
    Feature,
    Model,
    NumericFeature,
    Scaling,
)
from polars_hidden_rate.projection.types import (
    FeatureSpec,
    Modality,
    gaps,
    modality_values,
    numeric_values,
)


class Fills(NamedTuple):
    """The value each feature's gaps get (features without one are not filled)."""

    numbers: dict[str, float]
    modalities: dict[str, Modality]


NO_FILLS = Fills({}, {})
Statistic = Literal["median", "mean", "mode"]

MAX_WIDTH = 4096
"""The most scaled columns (numeric columns plus modalities) a fit accepts."""
BLOCK_ROWS = 65536
"""Rows per block in the streaming passes."""
GRAM_BLOCK_VALUES = 1 << 22
"""Scaled values held per block in the Gram pass (32 MiB of float64)."""
EXTREME_EXPONENTS = (-960, 1000)
"""A numeric column is brought near 1 by a power of two (`NumericFeature`)
when its largest magnitude, or its spread, is below ``2^-960``, or its largest beyond
``2^1000``: there its mean and spread would lose bits, or its deviations overflow."""


def _blocks(frame: pl.LazyFrame, rows: int) -> Iterator[pl.DataFrame]:
    """The rows of ``frame`` in order, in blocks of exactly ``rows`` rows (the last may be less)."""
    pending: list[pl.DataFrame] = []
    held = 0
    for batch in frame.collect_batches(chunk_size=rows, maintain_order=True):
        if batch.height == 0:
            continue
        pending.append(batch)
        held += batch.height
        while held >= rows:
            merged = pl.concat(pending) if len(pending) > 1 else pending[0]
            yield merged.slice(0, rows)
            rest = merged.slice(rows)
            pending, held = ([rest] if rest.height else []), rest.height
    if held:
        yield pl.concat(pending) if len(pending) > 1 else pending[0]


@dataclass
class _Moments:
    """Count, mean, sum of squared deviations, min and max of float64 columns, block by block.

    Each column is held divided by a power of two, ``2^exponent``, that brings its
    largest magnitude so far below 1: no square overflows or needlessly underflows,
    and since such a scaling is exact, a column times ``2^k`` gives the same fit times
    ``2^k``, bit for bit.
    """

    count: int
    scaled_mean: Float64Array
    scaled_m2: Float64Array
    exponent: npt.NDArray[np.int64]
    low: Float64Array
    high: Float64Array

    def add(self, block: Float64Array) -> None:
        """Merge the moments of ``block``, taken at the exponent of both (at least its own)."""
        peak = np.abs(block).max(axis=0)
        exponent = np.maximum(
            self.exponent, np.where(peak > 0, np.frexp(peak)[1], _SMALLEST_EXPONENT)
        )
        scaled = np.ldexp(block, -exponent)
        mean = scaled.mean(axis=0)
        m2 = ((scaled - mean) ** 2).sum(axis=0)
        self.merge(_Moments(len(block), mean, m2, exponent, block.min(axis=0), block.max(axis=0)))

    def merge(self, other: _Moments) -> None:
        """Add the rows ``other`` summarises (after these), by Chan et al.'s pairwise formula.

        Both sides move to the larger exponent first, exactly; merging in a fixed order
        (blocks, then files) makes the result deterministic.
        """
        if other.count == 0:
            return
        exponent = np.maximum(self.exponent, other.exponent)
        shift, other_shift = self.exponent - exponent, other.exponent - exponent
        mean, m2 = np.ldexp(self.scaled_mean, shift), np.ldexp(self.scaled_m2, 2 * shift)
        other_mean = np.ldexp(other.scaled_mean, other_shift)
        other_m2 = np.ldexp(other.scaled_m2, 2 * other_shift)
        total = self.count + other.count
        delta = other_mean - mean
        self.scaled_mean = mean + delta * (other.count / total)
        self.scaled_m2 = m2 + other_m2 + delta**2 * (self.count * other.count / total)
        self.exponent = exponent
        self.count = total
        self.low = np.minimum(self.low, other.low)
        self.high = np.maximum(self.high, other.high)


# Below every float64 exponent: a column of zeros so far sets no scale.
_SMALLEST_EXPONENT = -1100


def imputed_values(originals: pl.LazyFrame, spec: FeatureSpec, schema: pl.Schema) -> Fills:
    """The value each feature's gaps get, from the originals (one pass; none without ``impute``).

    The median or mean of a numeric column, the mode of a categorical one (or of every
    column with ``impute="mode"``); a tie between modes goes to the smallest.
    """
    if spec.impute == "none":
        return NO_FILLS
    statistics = []
    for name, statistic in imputation(spec).items():
        values = imputed_source(name, spec, schema)
        if statistic == "mode":
            found = values.drop_nulls().mode().sort().first()
        else:
            found = values.median() if statistic == "median" else values.mean()
        statistics.append(found.alias(name))
    if not statistics:
        return NO_FILLS
    return checked_fills(originals.select(statistics).collect().row(0, named=True))


def imputation(spec: FeatureSpec) -> dict[str, Statistic]:
    """The statistic that fills each feature's gaps, in feature order (none without ``impute``)."""
    if spec.impute == "none":
        return {}
    return {
        name: "mode"
        if name in spec.categorical or spec.impute == "mode"
        else ("median" if spec.impute == "median" else "mean")
        for name in spec.names
    }


def imputed_source(name: str, spec: FeatureSpec, schema: pl.Schema) -> pl.Expr:
    """The values a feature's fill is a statistic of: modalities, or numbers with NaN as null."""
    if name in spec.categorical:
        return modality_values(name, schema[name])
    return numeric_values(name, schema[name]).fill_nan(None)


def checked_fills(fills: dict[str, float | Modality | None]) -> Fills:
    """``fills``, numbers and modalities apart, once every feature has one (None: the feature
    is all missing)."""
    empty = [name for name, value in fills.items() if value is None]
    if empty:
        msg = f"features of originals have no value to impute from: {empty} are all missing"
        raise ComputeError(msg)
    numbers: dict[str, float] = {}
    modalities: dict[str, Modality] = {}
    for name, value in fills.items():
        if isinstance(value, str | bool):
            modalities[name] = value
        elif value is not None:
            numbers[name] = float(value)
    return Fills(numbers, modalities)


@dataclass
class FeaturePartial:
    """Pass 1 over some of the originals' rows: moments of the numeric features, modality
    counts of the categorical ones, the missing values found and the values float64 does not
    hold exactly (blocks with any are left out).
    """

    moments: _Moments
    numeric: list[str]
    counts: dict[str, dict[Modality, int]]
    missing: MissingValues
    inexact: Counter[str]

    @classmethod
    def empty(cls, spec: FeatureSpec) -> FeaturePartial:
        """Nothing counted yet: moments of the numeric features and a tally per categorical
        one, each in feature order."""
        numeric: list[str] = []
        counts: dict[str, dict[Modality, int]] = {}
        for name in spec.names:
            if name in spec.categorical:
                counts[name] = {}
            else:
                numeric.append(name)
        width = len(numeric)
        moments = _Moments(
            0,
            np.zeros(width),
            np.zeros(width),
            np.full(width, _SMALLEST_EXPONENT, dtype=np.int64),
            np.full(width, np.inf),
            np.full(width, -np.inf),
        )
        return cls(moments, numeric, counts, Counter(), Counter())

    def add(self, block: pl.DataFrame, numbers: dict[str, pl.Expr], flags: dict[str, str]) -> None:
        """Count one block of `feature_partial`'s columns: the numeric features as float64
        (first), the modalities, each feature's values for its gaps (``numbers``, as
        `missing_values` reads them) and the numeric features' flags of inexact values
        (``flags``: their columns)."""
        found = missing_values(block, numbers)
        self.missing += found
        inexact: Counter[str] = Counter()
        for name, column in flags.items():
            count = int(block.get_column(column).sum())
            if count:
                inexact[name] = count
        self.inexact += inexact
        if found or inexact:
            return
        if self.numeric:
            values = block.select(pl.nth(range(len(self.numeric))))
            self.moments.add(values.to_numpy().astype(np.float64, copy=False))
        else:
            self.moments.count += block.height
        for k, tally in enumerate(self.counts.values()):
            for value, count in block.get_column(_column("key", k)).value_counts().iter_rows():
                tally[value] = tally.get(value, 0) + count
        _check_width(len(self.numeric), self.counts)

    def merge(self, other: FeaturePartial) -> None:
        """Add the rows ``other`` covers, after these; the width is checked again."""
        self.missing += other.missing
        self.inexact += other.inexact
        self.moments.merge(other.moments)
        for name, tally in self.counts.items():
            for value, count in other.counts[name].items():
                tally[value] = tally.get(value, 0) + count
        _check_width(len(self.numeric), self.counts)


def _column(kind: str, k: int) -> str:
    """The name of pass 1's ``k``-th column of ``kind``: by position, never by user text."""
    return f"{RESERVED_PREFIX}_{kind}{k}"


def feature_partial(
    originals: pl.LazyFrame, spec: FeatureSpec, schema: pl.Schema, fills: Fills
) -> FeaturePartial:
    """Pass 1 over ``originals``, in blocks of `BLOCK_ROWS` rows, gaps filled by ``fills``."""
    numeric_fills, modality_fills = fills
    partial = FeaturePartial.empty(spec)
    # The values first (`FeaturePartial.add` reads them by position), then per categorical
    # feature its modalities and gaps, then the flags of inexact values; named by position.
    columns: list[pl.Expr] = []
    numbers: dict[str, pl.Expr] = {}
    for k, name in enumerate(partial.numeric):
        values = numeric_values(name, schema[name], numeric_fills.get(name))
        columns.append(values.alias(_column("value", k)))
        numbers[name] = pl.col(_column("value", k))
    for k, name in enumerate(partial.counts):
        filled = name in modality_fills
        columns.append(
            modality_values(name, schema[name], modality_fills.get(name)).alias(_column("key", k))
        )
        columns.append(gaps(name, schema[name], True, filled).alias(_column("gap", k)))
        numbers[name] = pl.col(_column("gap", k))
    flags: dict[str, str] = {}
    for name in partial.numeric:
        rule = inexact_values(pl.col(name), schema[name])
        if rule is not None:
            flags[name] = _column("inexact", len(flags))
            columns.append(rule.alias(flags[name]))
    for block in _blocks(originals.select(columns), BLOCK_ROWS):
        partial.add(block, numbers, flags)
    return partial


def fitted_features(
    partial: FeaturePartial, spec: FeatureSpec, schema: pl.Schema, fills: Fills
) -> tuple[Scaling, int]:
    """The scaling pass 1 fits from the originals' whole ``partial`` (PCA, MCA or FAMD by the
    features' kinds), and the rows: numbers held as text (`refuse_text_numbers`, on the
    modalities counted), gaps and no rows are errors."""
    refuse_text_numbers(partial.counts, "originals")
    raise_missing(
        partial.missing,
        "features of originals",
        hint="; give impute='median', 'mean' or 'mode' to fill them, or drop those records",
    )
    raise_inexact(
        partial.inexact,
        schema,
        "feature",
        "originals",
        hint="rescale it, or declare it `categorical` if it is a code",
    )
    moments = partial.moments
    if moments.count == 0:
        msg = "originals is empty: there is nothing to project"
        raise NoDataError(msg)
    n = moments.count
    numeric_fills, modality_fills = fills
    fitted: dict[str, Feature] = {}
    # The population standard deviations and the means, back from their power-of-two units.
    std = np.ldexp(np.sqrt(moments.scaled_m2 / n), moments.exponent)
    means = np.ldexp(moments.scaled_mean, moments.exponent)
    low, high = EXTREME_EXPONENTS
    for k, name in enumerate(partial.numeric):
        fill = numeric_fills.get(name)
        constant = bool(moments.low[k] == moments.high[k])
        peak = int(moments.exponent[k])  # the largest magnitude is below 2^peak
        if not constant and (peak > high or peak < low or not std[k] >= 2.0**low):
            # Measured as x 2^-peak, in [-1, 1]: mean and spread held where they keep every
            # bit (a subnormal spread), and no deviation overflows.
            spread = float(np.sqrt(moments.scaled_m2[k] / n))
            mean, scale = float(moments.scaled_mean[k]), spread if spread > 0 else 1.0
            fitted[name] = NumericFeature(name, schema[name], mean, scale, fill, -peak)
            continue
        # A constant column: its exact value as mean, divided by 1 (saiph's convention).
        mean = float(moments.low[k]) if constant else float(means[k])
        scale = 1.0 if constant or not std[k] > 0 else float(std[k])
        fitted[name] = NumericFeature(name, schema[name], mean, scale, fill)
    for name, counts in partial.counts.items():
        modalities = _modality_order(counts, schema[name])
        shares = np.array([counts[m] / n for m in modalities], dtype=np.float64)
        fitted[name] = CategoricalFeature(
            name, schema[name], modalities, shares, modality_fills.get(name)
        )
    features: list[Feature] = []
    for name in spec.names:  # in feature order
        features.append(fitted[name])
    model: Model = (
        "FAMD" if partial.counts and partial.numeric else "MCA" if partial.counts else "PCA"
    )
    return Scaling(tuple(features), model), n


def fit_features(
    originals: pl.LazyFrame, spec: FeatureSpec, schema: pl.Schema
) -> tuple[Scaling, int]:
    """Pass 1: means, standard deviations and modality counts (the scaling, and the rows);
    gaps are filled or are errors."""
    fills = imputed_values(originals, spec, schema)
    return fitted_features(feature_partial(originals, spec, schema, fills), spec, schema, fills)


def _check_width(numeric: int, counts: dict[str, dict[Modality, int]]) -> None:
    """Stop as soon as the scaled columns exceed `MAX_WIDTH` (an identifier among them?)."""
    width = numeric + sum(map(len, counts.values()))
    if width > MAX_WIDTH:
        refuse_text_numbers(counts, "originals")  # a numeric column read as text, most likely
        widest = max(counts, key=lambda name: len(counts[name]))
        msg = (
            f"the features make more than {MAX_WIDTH} scaled columns (numbers and modalities); "
            f"{widest!r} alone has {len(counts[widest])} modalities (is it an identifier?)"
        )
        raise ValueError(msg)


def _modality_order(counts: dict[Modality, int], dtype: pl.DataType) -> tuple[Modality, ...]:
    """Enum modalities in the Enum's order, numbers by value; others sorted (False before True)."""
    if isinstance(dtype, pl.Enum):
        return tuple(m for m in dtype.categories.to_list() if m in counts)
    if dtype.is_numeric():
        return tuple(sorted(counts, key=lambda key: Decimal(str(key))))  # exact, as keyed
    return tuple(sorted(counts))


def gram(originals: pl.LazyFrame, scaling: Scaling) -> Float64Array:
    """Pass 2: the p x p Gram matrix of the originals' scaled rows, block by block."""
    width = scaling.width
    gram = np.zeros((width, width), dtype=np.float64)
    rows = max(256, min(BLOCK_ROWS, GRAM_BLOCK_VALUES // max(width, 1)))
    for block in _blocks(originals.select(scaling.names), rows):
        scaled = scaling.matrix(block)
        gram += scaled.T @ scaled
    return gram
