"""The hook into the metric: count in the projected space, fitted when the counting runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
from polars.exceptions import ComputeError

from polars_hidden_rate.checks import check_count
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
    Aligned,
    ColumnSpec,
    Link,
    missing_values,
    raise_missing,
    read_aligned,
)
from polars_hidden_rate.projection.model import Projection
from polars_hidden_rate.projection.types import as_seconds, is_categorical, resolve_features

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
        wanted = None if ncp is None else check_count(ncp, "ncp")
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
    numbers = {
        name: as_seconds(name, schema[name])
        for name in features
        if not is_categorical(schema[name])
    }
    others = [name for name in features if name not in numbers]
    raise_missing(missing_values(frame, numbers, others), "features of avatars")
