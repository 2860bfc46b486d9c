"""The hook into the metric: count in the projected space, fitted when the counting runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl
from polars.exceptions import ComputeError

from polars_hidden_rate.checks import check_count
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
    Aligned,
    ColumnSpec,
    Link,
    MissingValuesError,
    inexact_counts,
    missing_values,
    raise_inexact,
    raise_missing,
    read_aligned,
)
from polars_hidden_rate.projection.model import Projection
from polars_hidden_rate.projection.partitioned import Tasks
from polars_hidden_rate.projection.scaling import CategoricalFeature, NumericFeature
from polars_hidden_rate.projection.types import FeatureSpec, Impute, gaps

_COORD = f"{RESERVED_PREFIX}_dim"
_ROW = f"{RESERVED_PREFIX}_row"


@dataclass(frozen=True)
class ProjectedCoordinates:
    """A checked request to count in the projected space: fitted when the counting runs."""

    spec: FeatureSpec
    ncp: int | None
    fitted: Projection | None = None  # fitted beforehand: :meth:`read` uses it

    @classmethod
    def plan(
        cls,
        features: ColumnSpec | None,
        categorical: ColumnSpec | None,
        impute: Impute,
        ncp: int | None,
        originals: pl.Schema,
        avatars: pl.Schema,
        link: Link,
    ) -> ProjectedCoordinates:
        """Schema-level checks, at plan time; the default features exclude the key columns."""
        spec = FeatureSpec.resolve(
            features, categorical, impute, originals, avatars, (*link.left, *link.right)
        )
        wanted = None if ncp is None else check_count(ncp, "ncp")
        if wanted is not None and not spec.categorical and wanted > len(spec.names):
            msg = (
                f"`ncp` must satisfy 1 <= ncp <= {len(spec.names)} (one per feature), "
                f"got ncp={wanted}"
            )
            raise ValueError(msg)
        return cls(spec, wanted)

    @property
    def features(self) -> tuple[str, ...]:
        return self.spec.names

    def fit(self, originals: pl.LazyFrame) -> Projection:
        """The projection of this request, fitted on ``originals`` (two streaming passes)."""
        return Projection.fit(originals, **self._options())

    def fit_files(self, files: Sequence[Path], tasks: Tasks | None = None) -> Projection:
        """The projection of this request, fitted on parquet ``files`` by one task per file
        (:meth:`Projection.fit_partitioned`)."""
        return Projection.fit_partitioned(files, **self._options(), tasks=tasks)

    def _options(self) -> dict[str, Any]:
        """The fit's options, the same for both fits."""
        return {
            "features": list(self.spec.names),
            "ncp": self.ncp,
            "categorical": sorted(self.spec.categorical) or None,
            "impute": self.spec.impute,
        }

    def with_fit(self, projection: Projection) -> ProjectedCoordinates:
        """This request with its projection already fitted: :meth:`read` fits nothing."""
        return replace(self, fitted=projection)

    @staticmethod
    def names(projection: Projection) -> list[str]:
        """The names the counting gives the projected coordinates."""
        return [f"{_COORD}{k + 1}" for k in range(projection.ncp)]

    @staticmethod
    def raise_missing_features(
        frame: pl.LazyFrame, projection: Projection, schema: pl.Schema, role: str = "avatars"
    ) -> None:
        """Name the features of ``frame`` (the ``role`` side) that made a coordinate missing,
        if any: gaps the model does not fill, values float64 does not hold exactly, or a
        value so far from the originals that its coordinates overflow."""
        _raise_missing_features(frame, projection, schema, role)

    def read(
        self,
        originals: pl.LazyFrame,
        avatars: pl.LazyFrame,
        link: Link,
        carry: Sequence[pl.Expr] = (),
    ) -> Aligned:
        """Fit on the originals (unless fitted beforehand), transform both frames, and read
        the linked coordinates (with ``carry``, as :func:`~polars_hidden_rate.frames.read_aligned`).
        """
        projection = self.fitted if self.fitted is not None else self.fit(originals)
        names = self.names(projection)
        left_schema, right_schema = originals.collect_schema(), avatars.collect_schema()
        carried = [pl.col(expr.meta.output_name()) for expr in carry]
        left = originals.select(*link.left, *projection.coordinates(left_schema, names), *carry)
        right = avatars.select(*link.right, *projection.coordinates(right_schema, names))
        try:
            return read_aligned(left, right, names, link, carried)
        except MissingValuesError:  # only a missing coordinate: key errors are the user's own
            _raise_missing_features(originals, projection, left_schema, "originals")
            _raise_missing_features(avatars, projection, right_schema, "avatars")
            raise


def _raise_missing_features(
    frame: pl.LazyFrame, projection: Projection, schema: pl.Schema, role: str
) -> None:
    """The errors of :meth:`ProjectedCoordinates.raise_missing_features`, in that order."""
    features = projection.scaling.features
    numbers = {
        f.name: gaps(f.name, schema[f.name], isinstance(f, CategoricalFeature), f.fill is not None)
        for f in features
    }
    raise_missing(missing_values(frame, numbers), f"features of {role}")
    dtypes = {f.name: schema[f.name] for f in features if isinstance(f, NumericFeature)}
    raise_inexact(inexact_counts(frame, dtypes), dtypes, "feature", role)
    _raise_overflow(frame, projection, schema, role)


def _raise_overflow(
    frame: pl.LazyFrame, projection: Projection, schema: pl.Schema, role: str
) -> None:
    """Name the row whose coordinates are not finite though its features are, and the
    feature farthest from the originals there: its value overflows the projection."""
    numeric = [f for f in projection.scaling.features if isinstance(f, NumericFeature)]
    if not numeric:
        return  # modalities add bounded amounts: only numbers can overflow
    coordinates = [f"{_COORD}{k + 1}" for k in range(projection.ncp)]
    deviations = [
        ((f.values(schema) - f.mean) / f.scale).alias(f"{RESERVED_PREFIX}_z{i}")
        for i, f in enumerate(numeric)
    ]
    found = (
        frame.with_row_index(_ROW)
        .select(
            _ROW,
            *projection.coordinates(schema, coordinates),
            *deviations,
            *(pl.col(f.name).alias(f"{RESERVED_PREFIX}_x{i}") for i, f in enumerate(numeric)),
        )
        .filter(~pl.all_horizontal(pl.col(c).is_finite() for c in coordinates))
        .head(1)
        .collect()
    )
    if found.height == 0:
        return
    row = found.row(0, named=True)
    far = {f.name: abs(row[f"{RESERVED_PREFIX}_z{i}"]) for i, f in enumerate(numeric)}
    i, name = max(enumerate(far), key=lambda item: far[item[1]])
    value, deviation = row[f"{RESERVED_PREFIX}_x{i}"], far[name]
    distance = (
        f"{deviation:.3g} standard deviations"
        if math.isfinite(deviation)
        else "more standard deviations than float64 can count"
    )
    msg = (
        f"feature {name!r} of {role} holds {value!r} at row {row[_ROW]} (counting from 0), "
        f"{distance} from the originals' mean: too far to project, its coordinates overflow "
        "float64; check that value, or drop that record"
    )
    raise ComputeError(msg)
