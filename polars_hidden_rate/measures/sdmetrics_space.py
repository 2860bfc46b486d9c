"""SDMetrics' space: its distance to the closest record, exactly as SDMetrics 0.32 computes it
(``sdmetrics/single_table/privacy/dcr_utils.py``, ``calculate_dcr``), for the DCR measures
that take ``space="sdmetrics"`` (the overfitting and the baseline protections).

- **Columns.** SDMetrics reads each column's ``sdtype`` from its metadata; here the types and
  ``categorical`` play that part: a column of a number type is ``numerical`` unless named in
  ``categorical`` (or chosen by ``categorical="auto"``), any other (text, categories,
  booleans) ``categorical``. Temporal columns are refused: SDMetrics' differences of dates
  depend on the time unit pandas holds them in, which a Polars frame does not say. The
  columns are taken in the originals' order (the order SDMetrics sums them in is its
  metadata's: a metadata listing them in the table's order gives the very same floats).
- **Range.** For one search, each numerical column's range is ``max - min`` over the
  **reference** set alone (the training set, the holdout, or the originals a baseline is
  measured against), missing values skipped, in float64.
- **Distance.** Per numerical column ``min(|a - b| / range, 1)``, or where the range is 0
  ``1`` when the two differ and ``0`` when equal; then ``1`` when exactly one of the two is
  missing (null or NaN) and ``0`` when both are. Per categorical column ``0`` when equal
  (both missing counts as equal), ``1`` otherwise. The record's distance is the sum over the
  columns, added left to right as pandas adds them, divided by the number of columns; its
  DCR the minimum over the reference set.

Unlike the package's projected space (local cloaking's, a Euclidean distance between FAMD
coordinates scaled by standard deviations), each column's difference is capped at 1 and
every column weighs the same, whatever its spread or the number of its categories. The
searches are exact and sub-quadratic: a kd-tree of the reference records
(`polars_hidden_rate.engine.nearest.capped_nearest`), pruned by a bound summed in the
distance's order that never exceeds a record's float64 distance, so the nearest is found
whatever ties; none is sampled. Arrays out, for the measures above.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl
from polars.exceptions import ComputeError, NoDataError, SchemaError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.engine import usable_cores
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import capped_nearest
from polars_hidden_rate.frames import inexact_counts, is_text, raise_inexact
from polars_hidden_rate.plan import CountOptions, CountPlan
from polars_hidden_rate.progress import Progress
from polars_hidden_rate.projection.coordinates import auto_categorical

DcrSpace = Literal["projected", "sdmetrics"]
"""Where a DCR measure measures: ``"projected"``, the package's projection fitted on the
originals (the space of local cloaking), or ``"sdmetrics"``, SDMetrics' own distance."""

SPACE_ROW = (
    "  space",
    "SDMetrics' distance (each column's difference over the reference set's range, capped "
    "at 1; categories equal or not; the mean over the columns)",
)
"""The line a DCR measure's rows add when measured in SDMetrics' space."""

SDMETRICS_REFUSED = ("ncp", "impute", "tie_tol")
"""The options with no meaning in SDMetrics' space: the projection's shape and its fill of
gaps (SDMetrics compares missing values its own way), and the tie rule (SDMetrics compares
its distances exactly)."""


def check_dcr_space(space: object, caller: str) -> DcrSpace:
    """``space`` checked: ``"projected"`` or ``"sdmetrics"``."""
    if space not in ("projected", "sdmetrics"):
        msg = f"{caller}(): `space` must be 'projected' or 'sdmetrics', got {space!r}"
        raise ValueError(msg)
    return space


def refuse_sdmetrics_options(options: CountOptions, caller: str) -> None:
    """The options that shape the projection or the tie rule have no meaning in SDMetrics'
    space (`SDMETRICS_REFUSED`)."""
    for option in SDMETRICS_REFUSED:
        if options.get(option) not in (None, "none"):
            msg = (
                f"{caller}(space='sdmetrics') takes no `{option}`: SDMetrics' distance takes "
                "the columns as they are, missing values included, and compares distances "
                "exactly"
            )
            raise ValueError(msg)


@dataclass(frozen=True)
class SdmetricsColumns:
    """The columns of SDMetrics' distance, in the originals' order, each numerical or not."""

    names: tuple[str, ...]
    numerical: tuple[bool, ...]

    @classmethod
    def of(
        cls, names: Collection[str], schema: pl.Schema, categorical: Collection[str]
    ) -> SdmetricsColumns:
        """``names`` in the order of ``schema`` (the originals'), numerical where of a number
        type and not in ``categorical``."""
        ordered = tuple(name for name in schema.names() if name in names)
        for name in ordered:
            if schema[name].is_temporal():
                msg = (
                    f"column {name!r} is {schema[name]}: SDMetrics' distance of dates depends "
                    "on the time unit pandas holds them in; cast it to a number (seconds) or "
                    "leave it out of `features`"
                )
                raise SchemaError(msg)
        numerical = tuple(schema[name].is_numeric() and name not in categorical for name in ordered)
        return cls(ordered, numerical)

    @classmethod
    def of_plan(cls, request: CountPlan) -> SdmetricsColumns:
        """The columns of a plan: its features (or ``coords``, all numerical), categorical as
        its projection takes them (by type, named, or ``"auto"``; fitted or not)."""
        schema = request.originals.collect_schema()
        projection = request.projection
        if projection is None:
            return cls.of(request.coords, schema, ())
        if projection.fitted is not None:
            chosen = {f.name for f in projection.fitted.scaling.categorical}
        else:
            chosen = set(projection.spec.categorical)
            if projection.auto:
                chosen |= auto_categorical(request.originals, projection.features)
        return cls.of(projection.features, schema, chosen)

    def arrays(self, read: Mapping[str, pl.DataFrame]) -> dict[str, Float64Array]:
        """Each set's columns as float64 of shape ``(n, d)`` in this order: numbers as they
        are (refused when infinite or beyond float64's exact integers), categories as codes
        shared by the sets; a missing value (null, or NaN) as NaN in both."""
        columns: dict[str, list[np.ndarray]] = {role: [] for role in read}
        for name, numerical in zip(self.names, self.numerical, strict=True):
            parts = [frame.get_column(name) for frame in read.values()]
            if numerical:
                for role, frame in read.items():
                    dtypes = {name: frame.schema[name]}
                    raise_inexact(inexact_counts(frame, dtypes), dtypes, "column", role)
                    values = frame.get_column(name).cast(pl.Float64).fill_null(np.nan)
                    if values.is_infinite().any():
                        msg = (
                            f"column {name!r} of {role} holds infinite values: SDMetrics' "
                            "distance divides by the column's range"
                        )
                        raise ComputeError(msg)
                    columns[role].append(values.to_numpy())
                continue
            if all(is_text(part.dtype) for part in parts):
                parts = [part.cast(pl.String) for part in parts]
            elif all(part.dtype.is_numeric() or part.dtype == pl.Boolean for part in parts):
                parts = [part.cast(pl.Float64).fill_nan(None) for part in parts]
            else:
                parts = [part.cast(pl.String) for part in parts]
            codes = pl.concat(parts).rank("dense").cast(pl.Float64).fill_null(np.nan).to_numpy()
            ends = np.cumsum([0, *(len(part) for part in parts)])
            for k, role in enumerate(read):
                columns[role].append(codes[ends[k] : ends[k + 1]])
        return {
            role: np.column_stack(arrays) if arrays else np.empty((read[role].height, 0))
            for role, arrays in columns.items()
        }

    def read(self, frames: Mapping[str, pl.LazyFrame]) -> dict[str, Float64Array]:
        """`arrays` of the sets ``frames`` names by role, each read once."""
        names = list(self.names)
        return self.arrays({role: frame.select(names).collect() for role, frame in frames.items()})


def ranges_of(reference: Float64Array, numerical: Sequence[bool]) -> list[float]:
    """Each numerical column's ``max - min`` over ``reference``, missing values skipped (NaN
    when all are missing); NaN for the categorical columns, which take none."""
    found = []
    for k, is_numerical in enumerate(numerical):
        present = reference[:, k][~np.isnan(reference[:, k])]
        found.append(
            float(present.max() - present.min()) if is_numerical and len(present) else np.nan
        )
    return found


def _tree_columns(values: Float64Array, gaps: Sequence[int], fills: Float64Array) -> Float64Array:
    """``values`` as `capped_nearest` takes them: for each column of ``gaps`` its missing
    values as the fill and an indicator column after the ``d`` columns (1: missing)."""
    d = values.shape[1]
    found = np.empty((len(values), d + len(gaps)), dtype=np.float64)
    found[:, :d] = values
    for j, k in enumerate(gaps):
        absent = np.isnan(values[:, k])
        found[:, d + j] = absent
        found[absent, k] = fills[k]
    return found


def sdmetrics_dcr(
    queries: Float64Array,
    reference: Float64Array,
    numerical: Sequence[bool],
    *,
    threads: int | None = None,
    bar: Progress | None = None,
) -> Float64Array:
    """Each query's DCR to ``reference`` in SDMetrics' space (``calculate_dcr(queries,
    reference)``), the ranges over ``reference``: the engine's exact nearest search in
    SDMetrics' capped distance (`capped_nearest`, a kd-tree of the reference records, copies
    collapsed where they abound), the smallest sum over the number of columns (division is
    monotone, so the very float of the smallest quotient). ``bar`` advances by each query
    walked."""
    if len(reference) == 0:
        raise NoDataError("there are no reference records to measure distances to")
    if not numerical:
        raise NoDataError("there are no columns to measure SDMetrics' distance on")
    ranges = np.array(ranges_of(reference, numerical), dtype=np.float64)
    gaps = [
        k
        for k in range(len(numerical))
        if np.isnan(reference[:, k]).any() or np.isnan(queries[:, k]).any()
    ]
    # A missing value's place in the tree: the reference's least (no box widened).
    fills = np.array(
        [np.nanmin(column) if not np.isnan(column).all() else 0.0 for column in reference.T],
        dtype=np.float64,
    )
    points = _tree_columns(reference, gaps, fills)
    threads = threads or usable_cores()
    tree = KdTree.build_collapsed(points, threads=threads) or KdTree.build(
        points, threads=threads, overwrite_input=True
    )
    missing = np.full(len(numerical), -1, dtype=np.int64)
    missing[gaps] = len(numerical) + np.arange(len(gaps), dtype=np.int64)
    total = capped_nearest(
        tree,
        _tree_columns(queries, gaps, fills),
        kinds=np.array(numerical, dtype=np.int64),
        ranges=ranges,
        missing=missing,
        threads=threads,
        bar=bar,
    )
    found: Float64Array = total / len(numerical)
    return found
