"""The fitted projection: components from the Gram matrix, and the coordinates of any frame."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import polars as pl
from polars.exceptions import ComputeError, DuplicateError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import AllComponents, check_ncp_option
from polars_hidden_rate.frames import ColumnSpec, as_lazy, inexact_counts, raise_inexact
from polars_hidden_rate.projection import partitioned
from polars_hidden_rate.projection.passes import fit_features, gram
from polars_hidden_rate.projection.scaling import (
    Model,
    NumericFeature,
    Scaling,
)
from polars_hidden_rate.projection.types import FeatureSpec, Impute, check_feature_types
from polars_hidden_rate.tasks import LocalTasks, Tasks

FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)

DEFAULT_NCP = 5
"""The method's default number of components."""
RANK_RTOL = 1e-10
"""A component is a dimension of the originals when its eigenvalue exceeds this share of the
largest; the rest is rounding noise of an exactly rank-deficient Gram matrix."""
SIGN_RTOL = 1e-6
"""Loadings within this relative distance of a component's largest count as tied for its sign."""
_PREFIX = "Dim"


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


@dataclass(frozen=True, eq=False, repr=False)
class Projection:
    """A PCA, MCA or FAMD model fitted on the originals, as in the avatar method.

    Build it with [`Projection.fit`][polars_hidden_rate.Projection.fit]; apply it to any frame with
    the same features with [`transform`][polars_hidden_rate.Projection.transform].

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
        ``eigenvalues``; rows past `n_components` span directions the
        originals do not vary along.
    n_components
        The rank of the originals' scaled rows: the components along which they vary.
    ncp
        The number of components [`transform`][polars_hidden_rate.Projection.transform] adds:
        at most [`max_ncp`][polars_hidden_rate.Projection.max_ncp], one per column of the
        scaled space.
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
        ncp: int | AllComponents | None = None,
        categorical: ColumnSpec | None = None,
        impute: Impute = "none",
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
            The number of components to keep: default 5 (the method's default; the rank
            `n_components` when the originals span fewer); ``"all"`` keeps every
            component of the scaled space (`max_ncp`, saiph's ``nf=None``), also the
            directions the originals do not vary along, where synthetic records that
            break the originals' exact dependencies have distance; an integer takes
            the first ``ncp``, up to `max_ncp`.
        categorical
            Features to treat as categorical whatever their type, by name or
            selector: categories coded as integers, for example.
        impute
            ``"none"`` (default: a missing value is an error), or fill missing
            values (null, NaN) of both frames with the originals' ``"median"`` or
            ``"mean"`` (the mode for categorical columns), or ``"mode"``
            everywhere. The fill values are part of the fitted model.

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
            A feature has null, NaN or infinite values (without ``impute``: null or
            NaN; with it: infinite, or no value at all to impute from).
        ValueError
            ``ncp`` exceeds `max_ncp`, the columns of the scaled space.

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
        spec = FeatureSpec.resolve(features, categorical, impute, schema)
        return cls.fit_spec(frame, schema, spec, check_ncp_option(ncp))

    @classmethod
    def fit_spec(
        cls,
        originals: pl.LazyFrame,
        schema: pl.Schema,
        spec: FeatureSpec,
        ncp: int | AllComponents | None,
    ) -> Projection:
        """`fit` of a request already checked: ``spec`` resolved on ``schema`` (the
        originals'), ``ncp`` as `check_ncp_option` gives it."""
        scaling, n_rows = fit_features(originals, spec, schema)
        return cls._from_gram(scaling, n_rows, gram(originals, scaling), list(spec.names), ncp)

    @classmethod
    def fit_partitioned(
        cls,
        files: Sequence[str | os.PathLike[str]],
        *,
        features: ColumnSpec | None = None,
        ncp: int | AllComponents | None = None,
        categorical: ColumnSpec | None = None,
        impute: Impute = "none",
        tasks: Tasks | None = None,
    ) -> Projection:
        """Fit the projection on the rows of parquet ``files``, one task per file.

        The passes of [`fit`][polars_hidden_rate.Projection.fit] run over each file alone
        (`partitioned`); the partials are merged in file order, so the fit is deterministic, holds
        no column, and equals [`fit`][polars_hidden_rate.Projection.fit] on the files' concatenation
        up to rounding (the eigenvalues to about 1e-15 relative).

        Parameters
        ----------
        files
            Parquet files with the same schema, in order.
        features, ncp, categorical, impute
            As for [`fit`][polars_hidden_rate.Projection.fit].
        tasks
            Where the per-file tasks run: `DaskTasks` on a Dask
            cluster's workers; default `LocalTasks`, here.

        Returns
        -------
        Projection

        Raises
        ------
        ValueError
            ``files`` is empty; and as [`fit`][polars_hidden_rate.Projection.fit].
        """
        paths = [Path(file) for file in files]
        if not paths:
            msg = "files is empty: there is nothing to project"
            raise ValueError(msg)
        schema = pl.scan_parquet(paths, glob=False).collect_schema()
        spec = FeatureSpec.resolve(features, categorical, impute, schema)
        wanted = check_ncp_option(ncp)
        runner = LocalTasks() if tasks is None else tasks
        scaling, n_rows = partitioned.fit_features_of_files(paths, spec, schema, runner)
        matrix = partitioned.gram_matrix(paths, scaling, runner)
        return cls._from_gram(scaling, n_rows, matrix, list(spec.names), wanted)

    @classmethod
    def _from_gram(
        cls,
        scaling: Scaling,
        n_rows: int,
        gram: Float64Array,
        names: list[str],
        wanted: int | AllComponents | None,
    ) -> Projection:
        """The projection whose components are those of ``gram``; ``wanted`` is ``ncp``."""
        eigenvalues, components = _decompose(gram)
        width = len(eigenvalues)
        top = float(eigenvalues[0]) if width else 0.0
        rank = int(np.count_nonzero(eigenvalues > top * RANK_RTOL)) if top > 0 else 0
        if rank == 0:
            msg = f"the originals do not vary in the features {names}: there is nothing to project"
            raise ValueError(msg)
        # An integer past the scaled width is refused, not capped: a gate states the space it
        # measured, and the one asked for does not exist ("all" asks for every component).
        if isinstance(wanted, int) and wanted > width:
            msg = (
                f"`ncp` must satisfy 1 <= ncp <= {width}, the columns of the scaled space of "
                f"{names} (the originals span {rank} of them), or be 'all'; got ncp={wanted}"
            )
            raise ValueError(msg)
        defaulted = min(DEFAULT_NCP, rank)
        return cls(
            scaling=scaling,
            n_rows=n_rows,
            eigenvalues=eigenvalues,
            components=components,
            n_components=rank,
            ncp=defaulted if wanted is None else width if wanted == "all" else wanted,
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
        return list(self.scaling.names)

    @property
    def max_ncp(self) -> int:
        """The number of components there are, one per column of the scaled space: what
        ``ncp="all"`` keeps. Those past `n_components` are directions the originals do not
        vary along (their eigenvalues are 0)."""
        return len(self.components)

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
        originals never had contributes nothing (its dummies are all zero), a
        null feature gives null coordinates, and a value float64 does not hold
        exactly (an integer beyond 2^53: docs/guarantees.md) NaN coordinates.
        A LazyFrame stays lazy.

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
        as_lazy(frame, "frame")  # a TypeError naming what it is instead, and the conversion
        if isinstance(frame, pl.DataFrame):
            return self.transform(frame.lazy()).collect()
        schema = frame.collect_schema()
        names = self.coordinate_columns()
        taken = [name for name in names if name in schema]
        if taken:
            msg = f"frame already has a column named {taken[0]!r}; rename or drop it first"
            raise DuplicateError(msg)
        with_inputs = self.with_inputs(frame)
        return with_inputs.with_columns(self.coordinates(names)).drop(self.scaling.input_names)

    def with_inputs(self, frame: FrameT) -> FrameT:
        """``frame`` with the columns [`coordinates`][polars_hidden_rate.Projection.coordinates]
        reads (reserved names, one per feature): each feature scaled, or its modality looked up,
        once per row, whatever the number of components.

        Raises
        ------
        ColumnNotFoundError, SchemaError
            A feature is missing from ``frame``, or of another type family than in the
            originals.
        DuplicateError
            ``frame`` already has a column of that name.
        """
        schema = frame.collect_schema()
        self.check_schema(schema)
        taken = [name for name in self.scaling.input_names if name in schema]
        if taken:
            msg = f"frame already has a column named {taken[0]!r}; rename or drop it first"
            raise DuplicateError(msg)
        return frame.with_columns(self.scaling.inputs(schema))

    def check_schema(self, schema: pl.Schema) -> None:
        """Every feature is a column of ``schema``, of the type family it has in the originals
        (ColumnNotFoundError, SchemaError)."""
        check_feature_types(self.features, schema, "frame", _fitted_schema(self.scaling))

    def coordinates(self, names: Sequence[str]) -> list[pl.Expr]:
        """Expressions for the first ``len(names)`` coordinates of a frame that
        [`with_inputs`][polars_hidden_rate.Projection.with_inputs] gave.

        Each row's coordinates depend on that row alone, whatever the engine or batching.
        """
        if len(names) > len(self.components):
            msg = f"asked for {len(names)} coordinates; the scaled space has {self.max_ncp}"
            raise ValueError(msg)
        coordinates: list[pl.Expr] = []
        for component, name in zip(self.components, names, strict=False):
            coordinates.append(self.scaling.coordinate(component).alias(name))
        return coordinates

    def scaled(self, frame: pl.DataFrame | pl.LazyFrame) -> Float64Array:
        """The full scaled matrix of ``frame``: ``(n, p)`` float64, columns as
        [`scaled_columns`][polars_hidden_rate.Projection.scaled_columns]. Its rows times
        ``components.T`` are the coordinates."""
        data = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
        check_feature_types(self.features, data.schema, "frame", _fitted_schema(self.scaling))
        nulls = data.select(self.features).null_count().row(0, named=True)
        culprits = [name for name, count in nulls.items() if count]
        if culprits:
            msg = f"features {culprits} of frame have null values"
            raise ComputeError(msg)
        numeric = [f.name for f in self.scaling.features if isinstance(f, NumericFeature)]
        dtypes = {name: data.schema[name] for name in numeric}
        raise_inexact(inexact_counts(data, dtypes), dtypes, "feature", "frame")
        return self.scaling.matrix(data)

    @property
    def scaled_columns(self) -> list[str]:
        """The columns of [`scaled`][polars_hidden_rate.Projection.scaled]: ``name``, or
        ``name=modality`` for each dummy."""
        return self.scaling.column_names

    def unscale(self, matrix: Float64Array) -> pl.DataFrame:
        """Map scaled rows back to the features, in the originals' types.

        Numeric columns are de-scaled (integer and temporal columns rounded);
        a categorical column takes the modality with the largest share.
        """
        return self.scaling.unscale(np.asarray(matrix, dtype=np.float64))


def _fitted_schema(scaling: Scaling) -> pl.Schema:
    return pl.Schema({feature.name: feature.dtype for feature in scaling.features})
