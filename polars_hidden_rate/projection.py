"""Project raw records as the avatar method does: PCA, MCA or FAMD fitted on the originals.

The conventions are those of Octopize's saiph library:

- numeric columns (integers, floats, decimals; temporal columns as seconds) are
  z-scored with the originals' mean and population standard deviation; a constant
  column is divided by 1;
- categorical columns (String, Categorical, Enum, Boolean) are one-hot encoded and
  each dummy scaled as ``(dummy - p) / sqrt(p)``, ``p`` the modality's share among
  the originals (FAMD);
- all-categorical data gives MCA, whose correspondence-analysis coordinates are
  those of the same dummies divided by ``sqrt(q)`` (``q`` categorical columns),
  each row taken as a profile over the modalities the originals know.

The components are the eigenvectors of the Gram matrix of the originals' scaled
rows, found by an exact (LAPACK) eigendecomposition, each oriented so that its
largest loading is positive. The fit takes two streaming passes over the
originals (statistics, then the Gram matrix) and holds O(p^2) numbers, ``p``
the scaled width; :meth:`Projection.transform` is a set of Polars expressions,
so a LazyFrame stays lazy and each row's coordinates depend on that row alone.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt
import polars as pl
from polars.exceptions import (
    ColumnNotFoundError,
    ComputeError,
    DuplicateError,
    NoDataError,
    SchemaError,
)

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
    Aligned,
    ColumnSpec,
    Link,
    as_lazy,
    read_aligned,
    resolve_columns,
)

FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)
Model = Literal["PCA", "MCA", "FAMD"]
Modality = str | bool

DEFAULT_NCP = 5
"""The method's default number of components."""
MAX_WIDTH = 4096
"""The most scaled columns (numeric columns plus modalities) a fit accepts."""
RANK_RTOL = 1e-10
"""A component is a dimension of the originals when its eigenvalue exceeds this share of the
largest; the rest is rounding noise of an exactly rank-deficient Gram matrix."""
SIGN_RTOL = 1e-6
"""Loadings within this relative distance of a component's largest count as tied for its sign."""
BLOCK_ROWS = 65536
"""Rows per block in the streaming passes. Blocks have a fixed size whatever the batches the
source delivers, so a DataFrame and a LazyFrame of the same rows give the same fit, bit for bit."""
GRAM_BLOCK_VALUES = 1 << 22
"""Scaled values held per block in the Gram pass (32 MiB of float64)."""

_TEXT = (pl.String, pl.Categorical, pl.Enum)
_PER_SECOND = {"ns": 1e9, "us": 1e6, "ms": 1e3}
_SECONDS_PER_DAY = 86400.0
_PREFIX = "Dim"


@dataclass(frozen=True)
class NumericFeature:
    """A numeric column: ``(x - mean) / scale``, ``scale`` the population std or 1 if constant."""

    name: str
    dtype: pl.DataType
    mean: float
    scale: float


@dataclass(frozen=True, eq=False)
class CategoricalFeature:
    """A categorical column: its modalities, in a fixed order, and their shares in the originals."""

    name: str
    dtype: pl.DataType
    modalities: tuple[Modality, ...]
    shares: Float64Array


Feature = NumericFeature | CategoricalFeature


# ---------------------------------------------------------------------------------------------
# Types: which columns are which, and which pairs of types are compatible
# ---------------------------------------------------------------------------------------------


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
    less ``exclude``. Raises at once, on the schemas only, for a missing or unsupported feature."""
    if features is None:
        names = [
            name
            for name in originals.names()
            if (avatars is None or name in avatars) and name not in exclude
        ]
        if not names:
            msg = "no column to project: the originals and avatars share no column besides the keys"
            raise ColumnNotFoundError(msg)
    else:
        names = resolve_columns(features, originals, "originals", "features")
    check_feature_types(names, originals, "originals")
    if avatars is not None:
        check_same_types(names, originals, avatars)
    return names


def check_ncp_option(ncp: int | None) -> int | None:
    """``ncp`` is None or a positive integer (its upper bound is known after the fit)."""
    if ncp is None:
        return None
    if isinstance(ncp, bool) or not isinstance(ncp, int | np.integer):
        msg = f"`ncp` must be an integer, got {ncp!r}"
        raise TypeError(msg)
    if ncp < 1:
        msg = f"`ncp` must be at least 1, got ncp={ncp}"
        raise ValueError(msg)
    return int(ncp)


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


def _key(name: str, dtype: pl.DataType) -> pl.Expr:
    """A categorical column as the values its modalities are stored as (str or bool)."""
    return pl.col(name).cast(pl.String) if dtype.base_type() in _TEXT else pl.col(name)


# ---------------------------------------------------------------------------------------------
# Streaming passes
# ---------------------------------------------------------------------------------------------


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

    @classmethod
    def empty(cls, width: int) -> _Moments:
        return cls(
            0,
            np.zeros(width),
            np.zeros(width),
            np.full(width, _SMALLEST_EXPONENT, dtype=np.int64),
            np.full(width, np.inf),
            np.full(width, -np.inf),
        )

    def add(self, block: Float64Array) -> None:
        peak = np.abs(block).max(axis=0)
        exponent = np.maximum(
            self.exponent, np.where(peak > 0, np.frexp(peak)[1], _SMALLEST_EXPONENT)
        )
        shift = self.exponent - exponent
        self.exponent = exponent
        self.scaled_mean = np.ldexp(self.scaled_mean, shift)
        self.scaled_m2 = np.ldexp(self.scaled_m2, 2 * shift)
        scaled = np.ldexp(block, -exponent)
        # Chan et al.'s pairwise combination: stable, and fixed blocks make it deterministic.
        rows = len(block)
        mean = scaled.mean(axis=0)
        m2 = ((scaled - mean) ** 2).sum(axis=0)
        total = self.count + rows
        delta = mean - self.scaled_mean
        self.scaled_mean = self.scaled_mean + delta * (rows / total)
        self.scaled_m2 = self.scaled_m2 + m2 + delta**2 * (self.count * rows / total)
        self.count = total
        self.low = np.minimum(self.low, block.min(axis=0))
        self.high = np.maximum(self.high, block.max(axis=0))

    @property
    def mean(self) -> Float64Array:
        mean: Float64Array = np.ldexp(self.scaled_mean, self.exponent)
        return mean

    @property
    def std(self) -> Float64Array:
        """The population standard deviations."""
        std: Float64Array = np.ldexp(np.sqrt(self.scaled_m2 / self.count), self.exponent)
        return std


# Below every float64 exponent: a column of zeros so far sets no scale.
_SMALLEST_EXPONENT = -1100


def _fit_features(
    originals: pl.LazyFrame, names: list[str], schema: pl.Schema
) -> tuple[list[Feature], int]:
    """Pass 1: means, standard deviations and modality counts; nulls and NaN are errors."""
    numeric = [name for name in names if not is_categorical(schema[name])]
    categorical = [name for name in names if is_categorical(schema[name])]
    moments = _Moments.empty(len(numeric))
    counts: dict[str, dict[Modality, int]] = {name: {} for name in categorical}
    nulls = dict.fromkeys(names, 0)
    not_finite = dict.fromkeys(numeric, 0)
    source = originals.select(
        *(as_seconds(name, schema[name]) for name in numeric),
        *(_key(name, schema[name]) for name in categorical),
    )
    for block in _blocks(source, BLOCK_ROWS):
        bad = False
        for name, count in block.null_count().row(0, named=True).items():
            nulls[name] += count
            bad = bad or count > 0
        values = block.select(numeric).to_numpy().astype(np.float64, copy=False)
        finite = np.isfinite(values).sum(axis=0)
        for name, ok in zip(numeric, finite, strict=True):
            not_finite[name] += len(values) - int(ok)
            bad = bad or ok < len(values)
        if bad:
            continue
        if numeric:
            moments.add(values)
        else:
            moments.count += block.height
        for name in categorical:
            tally = counts[name]
            for value, count in block.get_column(name).value_counts().iter_rows():
                tally[value] = tally.get(value, 0) + count
        _check_width(len(numeric), counts)
    culprits = [f"{name!r} ({count} null)" for name, count in nulls.items() if count]
    culprits += [
        f"{name!r} ({count} NaN or infinite)"
        for name, count in not_finite.items()
        if count - nulls[name]
    ]
    if culprits:
        msg = (
            f"features of originals have missing values: {', '.join(culprits)}; impute them "
            "before anonymizing (this metric does not)"
        )
        raise ComputeError(msg)
    if moments.count == 0:
        msg = "originals is empty: there is nothing to project"
        raise NoDataError(msg)
    n = moments.count
    fitted: dict[str, Feature] = {}
    std, means = moments.std, moments.mean
    for k, name in enumerate(numeric):
        constant = bool(moments.low[k] == moments.high[k])
        # A constant column: its exact value as mean, divided by 1 (saiph's convention).
        mean = float(moments.low[k]) if constant else float(means[k])
        scale = 1.0 if constant or not std[k] > 0 else float(std[k])
        fitted[name] = NumericFeature(name, schema[name], mean, scale)
    for name in categorical:
        modalities = _modality_order(counts[name], schema[name])
        shares = np.array([counts[name][m] / n for m in modalities], dtype=np.float64)
        fitted[name] = CategoricalFeature(name, schema[name], modalities, shares)
    return [fitted[name] for name in names], n


def _check_width(numeric: int, counts: dict[str, dict[Modality, int]]) -> None:
    """Stop as soon as the scaled columns exceed :data:`MAX_WIDTH` (an identifier among them?)."""
    width = numeric + sum(len(tally) for tally in counts.values())
    if width > MAX_WIDTH:
        widest = max(counts, key=lambda name: len(counts[name]))
        msg = (
            f"the features make more than {MAX_WIDTH} scaled columns (numbers and modalities); "
            f"{widest!r} alone has {len(counts[widest])} modalities (is it an identifier?)"
        )
        raise ValueError(msg)


def _modality_order(counts: dict[Modality, int], dtype: pl.DataType) -> tuple[Modality, ...]:
    """Enum modalities in the Enum's order; others sorted (False before True)."""
    if isinstance(dtype, pl.Enum):
        return tuple(m for m in dtype.categories.to_list() if m in counts)
    return tuple(sorted(counts))


# ---------------------------------------------------------------------------------------------
# Scaling: the full scaled matrix and its inverse
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Scaling:
    """The originals' statistics: frames to scaled matrices and back."""

    features: tuple[Feature, ...]
    model: Model

    @property
    def width(self) -> int:
        return sum(_width(feature) for feature in self.features)

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

    @property
    def n_categorical(self) -> int:
        return sum(isinstance(f, CategoricalFeature) for f in self.features)

    def matrix(self, frame: pl.DataFrame) -> Float64Array:
        """The scaled rows of ``frame`` (checked, null-free), float64 of shape ``(n, width)``."""
        schema = frame.schema
        out = np.empty((frame.height, self.width), dtype=np.float64)
        codes: list[tuple[int, CategoricalFeature, np.ndarray]] = []
        offset = 0
        for feature in self.features:
            if isinstance(feature, NumericFeature):
                x = frame.select(as_seconds(feature.name, schema[feature.name])).to_series()
                out[:, offset] = (x.to_numpy().astype(np.float64) - feature.mean) / feature.scale
            else:
                code = (
                    frame.select(_key(feature.name, schema[feature.name]))
                    .to_series()
                    .replace_strict(
                        list(feature.modalities),
                        list(range(len(feature.modalities))),
                        default=-1,
                        return_dtype=pl.Int64,
                    )
                    .to_numpy()
                )
                codes.append((offset, feature, code))
            offset += _width(feature)
        if not codes:
            return out
        # MCA takes each row as a profile over the known modalities: q / r, r of them known.
        known = sum((code >= 0).astype(np.float64) for _, _, code in codes)
        if self.model == "MCA":
            q = float(len(codes))
            profile = np.divide(q, known, out=np.zeros_like(known), where=known > 0)
        else:
            profile = np.ones(frame.height)
        divisor = math.sqrt(len(codes)) if self.model == "MCA" else 1.0
        rows = np.arange(frame.height)
        for offset, feature, code in codes:
            dummies = np.zeros((frame.height, len(feature.modalities)))
            seen = code >= 0
            dummies[rows[seen], code[seen]] = profile[seen]
            root = np.sqrt(feature.shares)
            block = slice(offset, offset + len(feature.modalities))
            out[:, block] = (dummies - feature.shares) / root / divisor
        return out

    def unscale(self, matrix: Float64Array) -> pl.DataFrame:
        """Scaled rows back to the features: numbers de-scaled (integers rounded), and for each
        categorical column the modality with the largest share (the first on a tie)."""
        columns: list[pl.Series] = []
        offset = 0
        q = self.n_categorical
        for feature in self.features:
            if isinstance(feature, NumericFeature):
                values = matrix[:, offset] * feature.scale + feature.mean
                columns.append(from_seconds(values, feature.name, feature.dtype))
            else:
                block = matrix[:, offset : offset + len(feature.modalities)]
                root = np.sqrt(feature.shares * (q if self.model == "MCA" else 1))
                shares = block * root + feature.shares
                chosen = np.argmax(shares, axis=1)
                picked = [feature.modalities[i] for i in chosen]
                dtype = pl.Boolean if feature.dtype == pl.Boolean else pl.String
                columns.append(pl.Series(feature.name, picked, dtype=dtype).cast(feature.dtype))
            offset += _width(feature)
        return pl.DataFrame(columns)


def _width(feature: Feature) -> int:
    return 1 if isinstance(feature, NumericFeature) else len(feature.modalities)


def _gram(originals: pl.LazyFrame, scaling: Scaling) -> Float64Array:
    """Pass 2: the p x p Gram matrix of the originals' scaled rows, block by block."""
    width = scaling.width
    gram = np.zeros((width, width), dtype=np.float64)
    rows = max(256, min(BLOCK_ROWS, GRAM_BLOCK_VALUES // max(width, 1)))
    names = [feature.name for feature in scaling.features]
    for block in _blocks(originals.select(names), rows):
        scaled = scaling.matrix(block)
        gram += scaled.T @ scaled
    return gram


def _decompose(gram: Float64Array) -> tuple[Float64Array, Float64Array]:
    """Eigenvalues (descending, >= 0) and components (rows), each with its largest loading > 0."""
    values, vectors = np.linalg.eigh(gram)
    values = np.clip(values[::-1], 0.0, None)
    components = np.ascontiguousarray(vectors[:, ::-1].T)
    for k, component in enumerate(components):
        magnitude = np.abs(component)
        lead = int(np.argmax(magnitude >= magnitude.max() * (1.0 - SIGN_RTOL)))
        if component[lead] < 0:
            components[k] = -component
    return values, components


# ---------------------------------------------------------------------------------------------
# The fitted projection
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, repr=False)
class Projection:
    """A PCA, MCA or FAMD model fitted on the originals, as in the avatar method.

    Build it with :meth:`Projection.fit`; apply it to any frame with the same
    features with :meth:`transform`.

    Attributes
    ----------
    scaling
        The originals' statistics (means, scales, modalities and shares).
    n_rows
        The number of originals it was fitted on.
    eigenvalues
        The eigenvalues of the Gram matrix of the originals' scaled rows, all
        ``p`` of them, descending.
    components
        The ``p x p`` orthonormal components (rows), in the order of
        ``eigenvalues``; rows past :attr:`n_components` span directions the
        originals do not vary along.
    n_components
        The number of dimensions available: the rank of the originals' scaled rows.
    ncp
        The number of components :meth:`transform` adds.
    """

    scaling: Scaling
    n_rows: int
    eigenvalues: Float64Array
    components: Float64Array
    n_components: int
    ncp: int

    @classmethod
    def fit(
        cls,
        originals: pl.DataFrame | pl.LazyFrame,
        *,
        features: ColumnSpec | None = None,
        ncp: int | None = None,
    ) -> Projection:
        """Fit the projection on the originals, in two streaming passes.

        Parameters
        ----------
        originals
            The original records, a DataFrame or a LazyFrame (read twice, in
            blocks: it may be larger than memory).
        features
            The columns to project, by name or selector; default: all columns.
            Numeric and temporal columns are numeric; String, Categorical, Enum
            and Boolean columns are categorical. All numeric gives PCA, all
            categorical MCA, a mix FAMD.
        ncp
            The number of components to keep; default 5, capped at the
            dimensions available (:attr:`n_components`).

        Returns
        -------
        Projection

        Raises
        ------
        ColumnNotFoundError
            A feature is not a column of the originals.
        SchemaError
            A feature has a type that cannot be projected.
        ComputeError
            A feature has null (or NaN, infinite) values.
        ValueError
            ``ncp`` exceeds the dimensions available.

        Examples
        --------
        >>> import polars as pl
        >>> from polars_hidden_rate import Projection
        >>> originals = pl.DataFrame({"age": [30, 40, 50, 60], "smoker": ["y", "n", "n", "y"]})
        >>> proj = Projection.fit(originals, ncp=2)
        >>> proj.model, proj.n_components
        ('FAMD', 2)
        >>> proj.explained_variance_ratio.round(3).tolist()
        [0.5, 0.5]
        """
        frame = as_lazy(originals, "originals")
        schema = frame.collect_schema()
        names = resolve_features(features, schema)
        wanted = check_ncp_option(ncp)
        fitted, n_rows = _fit_features(frame, names, schema)
        if all(isinstance(f, NumericFeature) for f in fitted):
            model: Model = "PCA"
        elif all(isinstance(f, CategoricalFeature) for f in fitted):
            model = "MCA"
        else:
            model = "FAMD"
        scaling = Scaling(tuple(fitted), model)
        eigenvalues, components = _decompose(_gram(frame, scaling))
        top = float(eigenvalues[0]) if len(eigenvalues) else 0.0
        rank = int(np.count_nonzero(eigenvalues > top * RANK_RTOL)) if top > 0 else 0
        if rank == 0:
            msg = f"the originals do not vary in the features {names}: there is nothing to project"
            raise ValueError(msg)
        if wanted is not None and wanted > rank:
            msg = (
                f"`ncp` must satisfy 1 <= ncp <= {rank}, the dimensions the originals span in "
                f"the projected space of {names}; got ncp={wanted}"
            )
            raise ValueError(msg)
        return cls(
            scaling=scaling,
            n_rows=n_rows,
            eigenvalues=eigenvalues,
            components=components,
            n_components=rank,
            ncp=wanted if wanted is not None else min(DEFAULT_NCP, rank),
        )

    def __repr__(self) -> str:
        return (
            f"Projection(model={self.model!r}, features={self.features}, ncp={self.ncp}, "
            f"n_components={self.n_components}, n_rows={self.n_rows})"
        )

    @property
    def model(self) -> Model:
        """``"PCA"``, ``"MCA"`` or ``"FAMD"``."""
        return self.scaling.model

    @property
    def features(self) -> list[str]:
        """The projected columns, in order."""
        return [feature.name for feature in self.scaling.features]

    @property
    def explained_variance_ratio(self) -> Float64Array:
        """The share of the originals' total variance along each of the ``ncp`` components."""
        ratio: Float64Array = self.eigenvalues[: self.ncp] / self.eigenvalues.sum()
        return ratio

    def coordinate_columns(self, ncp: int | None = None) -> list[str]:
        """``["Dim1", ..., "DimN"]``."""
        return [f"{_PREFIX}{k + 1}" for k in range(self.ncp if ncp is None else ncp)]

    def transform(self, frame: FrameT) -> FrameT:
        """Add the coordinates ``Dim1`` ... ``DimN`` (N = ``ncp``) to ``frame``.

        The frame is scaled with the originals' statistics: a modality the
        originals never had contributes nothing (its dummies are all zero), and
        a null feature gives null coordinates. A LazyFrame stays lazy.

        Parameters
        ----------
        frame
            A DataFrame or LazyFrame holding the features, each of the type
            family it has in the originals.

        Returns
        -------
        DataFrame or LazyFrame
            ``frame`` with float64 columns ``Dim1`` ... ``DimN`` added.

        Examples
        --------
        >>> import polars as pl
        >>> from polars_hidden_rate import Projection
        >>> originals = pl.DataFrame({"x": [0.0, 1.0, 2.0, 3.0], "y": [0.0, 2.0, 4.0, 6.0]})
        >>> proj = Projection.fit(originals, ncp=1)
        >>> proj.transform(originals).with_columns(pl.col("Dim1").round(4))
        shape: (4, 3)
        ┌─────┬─────┬─────────┐
        │ x   ┆ y   ┆ Dim1    │
        │ --- ┆ --- ┆ ---     │
        │ f64 ┆ f64 ┆ f64     │
        ╞═════╪═════╪═════════╡
        │ 0.0 ┆ 0.0 ┆ -1.8974 │
        │ 1.0 ┆ 2.0 ┆ -0.6325 │
        │ 2.0 ┆ 4.0 ┆ 0.6325  │
        │ 3.0 ┆ 6.0 ┆ 1.8974  │
        └─────┴─────┴─────────┘
        """
        if not isinstance(frame, pl.DataFrame | pl.LazyFrame):
            msg = f"frame must be a polars DataFrame or LazyFrame, got {type(frame).__name__}"
            raise TypeError(msg)
        schema = frame.collect_schema()
        names = self.coordinate_columns()
        taken = [name for name in names if name in schema]
        if taken:
            msg = f"frame already has a column named {taken[0]!r}; rename or drop it first"
            raise DuplicateError(msg)
        return frame.with_columns(self.coordinates(schema, names))

    def coordinates(self, schema: pl.Schema, names: Sequence[str]) -> list[pl.Expr]:
        """Expressions for the first ``len(names)`` coordinates of a frame with ``schema``.

        Each row's coordinates depend on that row alone, whatever the engine or batching.
        """
        if len(names) > self.n_components:
            msg = f"asked for {len(names)} coordinates; the originals span {self.n_components}"
            raise ValueError(msg)
        check_same_types(self.features, _fitted_schema(self.scaling), schema, "frame")
        return [self._coordinate(k, schema).alias(name) for k, name in enumerate(names)]

    def _coordinate(self, k: int, schema: pl.Schema) -> pl.Expr:
        component = self.components[k]
        terms: list[pl.Expr] = []
        lookups: list[pl.Expr] = []
        constant = 0.0
        offset = 0
        for feature in self.scaling.features:
            if isinstance(feature, NumericFeature):
                scaled = (as_seconds(feature.name, schema[feature.name]) - feature.mean) / (
                    feature.scale
                )
                terms.append(scaled * float(component[offset]))
            else:
                # sum_m v_m (d_m - p_m) / sqrt(p_m) = v_x / sqrt(p_x) - sum_m v_m sqrt(p_m)
                loadings = component[offset : offset + len(feature.modalities)]
                root = np.sqrt(feature.shares)
                key = _key(feature.name, schema[feature.name])
                lookup = key.replace_strict(
                    list(feature.modalities),
                    (loadings / root).tolist(),
                    default=0.0,
                    return_dtype=pl.Float64,
                )
                lookups.append(pl.when(key.is_null()).then(None).otherwise(lookup))
                constant -= float(loadings @ root)
            offset += _width(feature)
        if not lookups:
            return pl.sum_horizontal(terms, ignore_nulls=False)
        categorical = pl.sum_horizontal(lookups, ignore_nulls=False)
        if self.model == "MCA":
            q = float(len(lookups))
            known = pl.sum_horizontal(
                [
                    _key(f.name, schema[f.name]).is_in(list(f.modalities)).cast(pl.Float64)
                    for f in self.scaling.features
                    if isinstance(f, CategoricalFeature)
                ],
                ignore_nulls=False,
            )
            profile = pl.when(known > 0).then(pl.lit(q) / known).otherwise(0.0)
            return (profile * categorical + constant) / math.sqrt(q)
        return pl.sum_horizontal([*terms, categorical + constant], ignore_nulls=False)

    def scaled(self, frame: pl.DataFrame | pl.LazyFrame) -> Float64Array:
        """The full scaled matrix of ``frame``: ``(n, p)`` float64, columns as
        :attr:`scaled_columns`. Its rows times ``components.T`` are the coordinates."""
        data = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
        check_same_types(self.features, _fitted_schema(self.scaling), data.schema, "frame")
        nulls = data.select(self.features).null_count().row(0, named=True)
        culprits = [name for name, count in nulls.items() if count]
        if culprits:
            msg = f"features {culprits} of frame have null values"
            raise ComputeError(msg)
        return self.scaling.matrix(data)

    @property
    def scaled_columns(self) -> list[str]:
        """The columns of :meth:`scaled`: ``name``, or ``name=modality`` for each dummy."""
        return self.scaling.column_names

    def unscale(self, matrix: Float64Array) -> pl.DataFrame:
        """Map scaled rows back to the features, in the originals' types.

        Numeric columns are de-scaled (integer and temporal columns rounded);
        a categorical column takes the modality with the largest share.
        """
        return self.scaling.unscale(np.asarray(matrix, dtype=np.float64))


def _fitted_schema(scaling: Scaling) -> pl.Schema:
    return pl.Schema({feature.name: feature.dtype for feature in scaling.features})


# ---------------------------------------------------------------------------------------------
# The hook into the metric
# ---------------------------------------------------------------------------------------------

_COORD = f"{RESERVED_PREFIX}_dim"


@dataclass(frozen=True)
class ProjectedCoordinates:
    """A checked request to count in the projected space: fitted when the counting runs."""

    features: tuple[str, ...]
    ncp: int | None

    @classmethod
    def plan(
        cls,
        features: ColumnSpec | None,
        ncp: int | None,
        originals: pl.Schema,
        avatars: pl.Schema,
        link: Link,
    ) -> ProjectedCoordinates:
        """Schema-level checks, at plan time; the default features exclude the key columns."""
        names = resolve_features(features, originals, avatars, (*link.left, *link.right))
        wanted = check_ncp_option(ncp)
        numeric = [name for name in names if not is_categorical(originals[name])]
        if wanted is not None and len(numeric) == len(names) and wanted > len(names):
            msg = f"`ncp` must satisfy 1 <= ncp <= {len(names)} (one per feature), got ncp={wanted}"
            raise ValueError(msg)
        return cls(tuple(names), wanted)

    def read(
        self,
        originals: pl.LazyFrame,
        avatars: pl.LazyFrame,
        link: Link,
        carry: Sequence[pl.Expr] = (),
    ) -> Aligned:
        """Fit on the originals, transform both frames, and read the linked coordinates
        (with ``carry``, as :func:`~polars_hidden_rate.frames.read_aligned`)."""
        projection = Projection.fit(originals, features=list(self.features), ncp=self.ncp)
        names = [f"{_COORD}{k + 1}" for k in range(projection.ncp)]
        left_schema, right_schema = originals.collect_schema(), avatars.collect_schema()
        carried = [pl.col(expr.meta.output_name()) for expr in carry]
        left = originals.select(*link.left, *projection.coordinates(left_schema, names), *carry)
        right = avatars.select(*link.right, *projection.coordinates(right_schema, names))
        try:
            return read_aligned(left, right, names, link, carried)
        except ComputeError:
            _raise_missing_features(avatars, list(self.features), right_schema)
            raise


def _raise_missing_features(frame: pl.LazyFrame, features: list[str], schema: pl.Schema) -> None:
    """Name the avatar features whose nulls or NaN made a coordinate missing."""
    checks = frame.select(
        *(pl.col(name).null_count().alias(f"null\0{name}") for name in features),
        *(
            (~as_seconds(name, schema[name]).is_finite()).sum().alias(f"NaN or infinite\0{name}")
            for name in features
            if not is_categorical(schema[name])
        ),
    ).collect()
    culprits = [
        f"{label.split(chr(0))[1]!r} ({count} {label.split(chr(0))[0]})"
        for label, count in checks.row(0, named=True).items()
        if count
    ]
    if culprits:
        msg = f"features of avatars have missing values: {', '.join(culprits)}"
        raise ComputeError(msg)
