"""The hook into the metric: count in the projected space, fitted when the counting runs."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl
from polars.exceptions import ComputeError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import AllComponents, check_ncp_option
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
    UNSEEN_LIMIT,
    Aligned,
    ColumnSpec,
    Link,
    MissingValuesError,
    inexact_counts,
    missing_values,
    raise_inexact,
    raise_missing,
    raise_unseen,
    read_aligned,
    read_coordinates,
)
from polars_hidden_rate.frames.text_numbers import text_numbers_example
from polars_hidden_rate.projection.model import Projection
from polars_hidden_rate.projection.scaling import CategoricalFeature, NumericFeature
from polars_hidden_rate.projection.types import FeatureSpec, Impute, gaps
from polars_hidden_rate.tasks import Tasks

_COORD = f"{RESERVED_PREFIX}_dim"
AUTO_CATEGORIES = 10
"""``categorical="auto"``: number columns (integer or float) with at most this many distinct
values in the originals are categorical (the avatar paper's rule, ``get_categorical_continuous``:
``len(unique()) <= 10`` whatever the type; gaps are not counted as a value)."""
AUTO_RULE = (
    f"auto: number columns with at most {AUTO_CATEGORIES} distinct values, "
    "and text, categorical and boolean columns by type"
)
CATEGORICAL_REASONS = {
    "named": "named (categorical=, --categorical)",
    "by_type": "by type (text, categorical and boolean columns)",
    "auto": f"by the auto rule (numbers with at most {AUTO_CATEGORIES} distinct values)",
}
"""Why a feature is categorical, the words of each reason (`categorical_by`)."""
ID_MIN_RECORDS = 50
"""From this many records, a default feature unique per row (integers or text) is taken for
an identifier and refused."""
INDEX_NAMES = ("", "index", "__index_level_0__", "level_0")
_ROW = f"{RESERVED_PREFIX}_row"


@dataclass(frozen=True)
class ProjectedCoordinates:
    """A checked request to count in the projected space: fitted when the counting runs."""

    spec: FeatureSpec
    ncp: int | AllComponents | None
    fitted: Projection | None = None  # fitted beforehand: `read` uses it
    auto: bool = False  # categorical="auto": integer columns are chosen when fitting
    defaulted: bool = False  # features not named: identifiers are refused when fitting

    @classmethod
    def plan(
        cls,
        features: ColumnSpec | None,
        categorical: ColumnSpec | None,
        impute: Impute,
        ncp: int | AllComponents | None,
        originals: pl.Schema,
        avatars: pl.Schema,
        link: Link,
    ) -> ProjectedCoordinates:
        """Schema-level checks, at plan time; the default features exclude the key columns,
        and a feature named like an index is refused unless named."""
        auto = isinstance(categorical, str) and categorical == "auto"
        spec = FeatureSpec.resolve(
            features,
            None if auto else categorical,
            impute,
            originals,
            avatars,
            (*link.left, *link.right),
        )
        if auto:
            spec = replace(spec, categorical_rule=AUTO_RULE)
        if features is None:
            _refuse_index_names(spec.names)
        wanted = check_ncp_option(ncp)
        numeric = not spec.categorical and not auto  # one scaled column per feature: known now
        if isinstance(wanted, int) and numeric and wanted > len(spec.names):
            msg = (
                f"`ncp` must satisfy 1 <= ncp <= {len(spec.names)} (one per feature) or be "
                f"'all', got ncp={wanted}"
            )
            raise ValueError(msg)
        return cls(spec, wanted, auto=auto, defaulted=features is None)

    @property
    def features(self) -> tuple[str, ...]:
        return self.spec.names

    def fit(self, originals: pl.LazyFrame) -> Projection:
        """The projection of this request, fitted on ``originals`` (two streaming passes):
        its features resolved and its ``ncp`` checked at plan time, not again."""
        schema = originals.collect_schema()
        return Projection.fit_spec(originals, schema, self._spec(originals, schema), self.ncp)

    def fit_files(self, files: Sequence[Path], tasks: Tasks | None = None) -> Projection:
        """The projection of this request, fitted on parquet ``files`` by one task per file
        ([`Projection.fit_partitioned`][polars_hidden_rate.Projection.fit_partitioned])."""
        scanned = pl.scan_parquet(list(files), glob=False)
        spec = self._spec(scanned, scanned.collect_schema())
        return Projection.fit_partitioned(
            files,
            features=list(spec.names),
            ncp=self.ncp,
            categorical=sorted(spec.categorical) or None,
            impute=spec.impute,
            tasks=tasks,
        )

    def _spec(self, originals: pl.LazyFrame, schema: pl.Schema) -> FeatureSpec:
        """The fit's features, the same for both fits; ``categorical="auto"`` and the
        identifier rule read the distinct counts of the integer and text features."""
        if not (self.auto or self.defaulted):
            return self.spec
        chosen = self._read_distinct(originals, schema)
        return replace(self.spec, categorical=self.spec.categorical | chosen)

    def _read_distinct(self, originals: pl.LazyFrame, schema: pl.Schema) -> frozenset[str]:
        """Refuse a default feature unique per row (an identifier); with ``auto``, the
        number features with at most `AUTO_CATEGORIES` distinct values."""
        discrete: list[str] = []  # integers and modalities: where an identifier may hide
        for name in self.spec.names:
            if schema[name].is_integer() or name in self.spec.categorical:
                discrete.append(name)
        candidates = _auto_candidates(self.spec.names, schema) if self.auto else []
        counted = list(dict.fromkeys([*discrete, *candidates]))
        if not counted:
            return frozenset()
        row = (
            originals.select(pl.len().alias(_ROWS), *_distinct_counts(counted))
            .collect()
            .row(0, named=True)
        )
        rows = int(row.pop(_ROWS))
        if self.defaulted and rows >= ID_MIN_RECORDS:
            for name in discrete:
                if row[name] == rows and not _numbers_as_text(originals, name, schema):
                    msg = (
                        f"feature {name!r} is unique per row in the originals ({rows} values): "
                        "it looks like an identifier, which is never projected; link by it "
                        f"with on={name!r} (--on), drop it, or name the features to project"
                    )
                    raise ComputeError(msg)
        return frozenset(name for name in candidates if row[name] <= AUTO_CATEGORIES)

    def categorical_by(self, categorical: Sequence[str]) -> dict[str, list[str]]:
        """The fit's ``categorical`` columns by why they are (`CATEGORICAL_REASONS`): named
        in ``categorical``, by type, or chosen by ``categorical="auto"`` when fitting."""
        spec = self.spec
        return {
            "named": [name for name in categorical if name in spec.named],
            "by_type": [name for name in categorical if name in spec.categorical - spec.named],
            "auto": [name for name in categorical if name not in spec.categorical],
        }

    def with_fit(self, projection: Projection) -> ProjectedCoordinates:
        """This request with its projection already fitted: `read` fits nothing."""
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
        carry_avatars: Sequence[pl.Expr] = (),
    ) -> Aligned:
        """Fit on the originals (unless fitted beforehand), transform both frames, and read
        the linked coordinates (with ``carry`` and ``carry_avatars``, as
        `read_aligned`).
        """
        projection = self.fitted if self.fitted is not None else self.fit(originals)
        names = self.names(projection)
        left_schema, right_schema = originals.collect_schema(), avatars.collect_schema()
        unseen = unseen_modalities(avatars, projection, right_schema)
        carried = list(map(_output_column, carry))
        carried_avatars = list(map(_output_column, carry_avatars))
        coordinates = projection.coordinates(names)
        # Not `Projection.with_inputs`: `plan` checked both frames' features and their type
        # families against each other, and refused reserved names, once.
        left = originals.with_columns(projection.scaling.inputs(left_schema))
        right = avatars.with_columns(projection.scaling.inputs(right_schema))
        left = left.select(*link.left, *coordinates, *carry)
        right = right.select(*link.right, *coordinates, *carry_avatars)
        try:
            aligned = read_aligned(left, right, names, link, carried, carried_avatars)
        except MissingValuesError:  # only a missing coordinate: key errors are the user's own
            _raise_missing_features(originals, projection, left_schema, "originals")
            _raise_missing_features(avatars, projection, right_schema, "avatars")
            raise
        return replace(aligned, projection=projection, unseen=unseen)

    def coordinates_of(self, frame: pl.LazyFrame, role: str) -> Float64Array:
        """``frame``'s coordinates (the ``role`` side) in the fitted projection, read on their
        own, linked to nothing; a missing coordinate is explained as in `read`."""
        if self.fitted is None:
            raise ValueError("fit the projection first (with_fit)")
        projection = self.fitted
        names = self.names(projection)
        schema = frame.collect_schema()
        if role != "originals":  # coded as the originals are, as the avatars must be
            unseen_modalities(frame, projection, schema, role)
        try:
            return read_coordinates(
                projection.with_inputs(frame).select(projection.coordinates(names)), names, role
            )
        except MissingValuesError:
            _raise_missing_features(frame, projection, schema, role)
            raise


def _output_column(expr: pl.Expr) -> pl.Expr:
    """The column ``expr`` adds, by its name."""
    return pl.col(expr.meta.output_name())


def _raise_missing_features(
    frame: pl.LazyFrame, projection: Projection, schema: pl.Schema, role: str
) -> None:
    """The errors of `ProjectedCoordinates.raise_missing_features`, in that order."""
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
        projection.with_inputs(frame.with_row_index(_ROW))
        .select(
            _ROW,
            *projection.coordinates(coordinates),
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


_ROWS = f"{RESERVED_PREFIX}_rows"
SNIFFED_VALUES = 10_000


def _refuse_index_names(features: Sequence[str]) -> None:
    """A default feature named like a written-out index (pandas' ``Unnamed: 0``, ``index``,
    an empty name) is an identifier, not a feature."""
    for name in features:
        if name.strip().lower() in INDEX_NAMES or re.fullmatch(r"Unnamed: \d+", name):
            msg = (
                f"feature {name!r} is named like an index column, which is never projected: "
                "drop it, or name the features to project"
            )
            raise ComputeError(msg)


def unseen_modalities(
    frame: pl.LazyFrame, projection: Projection, schema: pl.Schema, role: str = "avatars"
) -> dict[str, int]:
    """For each categorical feature, the records of ``frame`` (the ``role`` set: the avatars,
    a synthetic set, a holdout) whose value is none of the originals' modalities (missing
    values aside). Refuses a feature where they are more than `UNSEEN_LIMIT` of the records
    (`polars_hidden_rate.frames.problems.raise_unseen`, the one rule)."""
    features = projection.scaling.categorical
    if not features:
        return {}
    flags = {
        f.name: f.values(schema).is_not_null() & ~f.values(schema).is_in(list(f.modalities))
        for f in features
    }
    row = (
        frame.select(pl.len().alias(_ROWS), *(flag.sum().alias(n) for n, flag in flags.items()))
        .collect()
        .row(0, named=True)
    )
    rows = int(row.pop(_ROWS))
    for feature in features:
        if rows and row[feature.name] > UNSEEN_LIMIT * rows:
            examples = (
                frame.select(feature.values(schema).filter(flags[feature.name]).unique())
                .head(3)
                .collect()
                .to_series()
                .sort()
                .to_list()
            )
            raise_unseen(feature.name, role, row[feature.name], rows, examples)
    return {name: int(count) for name, count in row.items()}


def auto_categorical(frame: pl.LazyFrame, names: Sequence[str]) -> set[str]:
    """The columns of ``names`` that ``categorical="auto"`` takes as categorical in ``frame``
    (the originals): numbers with at most `AUTO_CATEGORIES` distinct values (gaps not
    counted); text, categorical and Boolean columns are categorical by type anyway."""
    candidates = _auto_candidates(names, frame.collect_schema())
    if not candidates:
        return set()
    row = frame.select(_distinct_counts(candidates)).collect().row(0, named=True)
    return {name for name in candidates if row[name] <= AUTO_CATEGORIES}


def _auto_candidates(names: Sequence[str], schema: pl.Schema) -> list[str]:
    """The columns the ``auto`` rule reads the distinct values of: the numbers."""
    return [name for name in names if schema[name].is_numeric()]


def _distinct_counts(names: Sequence[str]) -> list[pl.Expr]:
    return [pl.col(name).drop_nulls().n_unique() for name in names]


def _numbers_as_text(originals: pl.LazyFrame, name: str, schema: pl.Schema) -> bool:
    """Whether a text column holds numbers in another notation: the fit refuses it with
    its own, more useful message (`polars_hidden_rate.frames.text_numbers`)."""
    if schema[name].is_integer():
        return False
    values = originals.select(pl.col(name).cast(pl.String).drop_nulls().head(SNIFFED_VALUES))
    return text_numbers_example(values.collect().to_series().to_list()) is not None
