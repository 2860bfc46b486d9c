"""The fit's passes over a list of parquet files: one task per file, partials merged in order.

Each file's task runs the passes of `passes` over that file's rows alone (blocks of
`BLOCK_ROWS` rows, restarting at each file) and returns a partial: moments,
modality counts, missing values, or a Gram matrix. The driver merges them in file order,
whatever order the tasks finish in, so the fit is deterministic and holds O(files + p^2)
numbers, never a column. It equals the fit of the files' concatenation up to rounding
(the blocks differ); the local and cluster runs of a dataset both use it, so theirs agree
bit for bit.

The fills of ``impute`` are exact too: a mean from each file's count and mean, a mode from
value counts summed by hash bucket (one task per bucket), and a median by selection: the
files' values stay where they were read, sorted, and the driver narrows the two middle
order statistics down by counting, in each file, the values at most a few pivots.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.frames import RESERVED_PREFIX
from polars_hidden_rate.projection.passes import (
    NO_FILLS,
    FeaturePartial,
    Fills,
    checked_fills,
    feature_partial,
    fitted_features,
    gram,
    imputation,
    imputed_source,
)
from polars_hidden_rate.projection.scaling import Scaling
from polars_hidden_rate.projection.types import FeatureSpec, Modality
from polars_hidden_rate.tasks import Tasks, pieces

T = TypeVar("T")

PIVOTS = 256
"""Pivots per round of the median's selection: each round narrows its range 256-fold."""
_SIGN_BITS = np.int64(0x7FFFFFFFFFFFFFFF)


def fit_features_of_files(
    files: Sequence[Path], spec: FeatureSpec, schema: pl.Schema, tasks: Tasks
) -> tuple[Scaling, int]:
    """Pass 1 over ``files``: fills, then one partial per file, merged in file order."""
    fills = imputed_values_of_files(files, spec, schema, tasks)
    handles = [
        tasks.run(f"moments-{p}", _features_task, path, spec, schema, fills)
        for p, path in enumerate(files)
    ]
    total = FeaturePartial.empty(spec)
    for partial in tasks.results(handles):
        total.merge(partial)
    return fitted_features(total, spec, schema, fills)


def gram_matrix(files: Sequence[Path], scaling: Scaling, tasks: Tasks) -> Float64Array:
    """Pass 2 over ``files``: each file's Gram matrix, summed in file order."""
    handles = [tasks.run(f"gram-{p}", _gram_task, path, scaling) for p, path in enumerate(files)]
    total = np.zeros((scaling.width, scaling.width), dtype=np.float64)
    for partial in tasks.results(handles):
        total += partial
    return total


def _features_task(
    path: Path, spec: FeatureSpec, schema: pl.Schema, fills: Fills
) -> FeaturePartial:
    """Task: pass 1 over one file."""
    return feature_partial(pl.scan_parquet(path, glob=False), spec, schema, fills)


def _gram_task(path: Path, scaling: Scaling) -> Float64Array:
    """Task: pass 2 over one file."""
    return gram(pl.scan_parquet(path, glob=False), scaling)


# --- fills --------------------------------------------------------------------------------


def imputed_values_of_files(
    files: Sequence[Path], spec: FeatureSpec, schema: pl.Schema, tasks: Tasks
) -> Fills:
    """The fills of `passes.imputed_values` on the files' concatenation, exactly
    for a median or a mode (a mean up to rounding)."""
    statistics = imputation(spec)
    if not statistics:
        return NO_FILLS
    by_kind = {
        kind: [name for name, statistic in statistics.items() if statistic == kind]
        for kind in ("median", "mean", "mode")
    }
    found: dict[str, float | Modality | None] = {}
    if by_kind["mean"]:
        found |= _means(files, by_kind["mean"], spec, schema, tasks)
    if by_kind["mode"]:
        found |= _modes(files, by_kind["mode"], spec, schema, tasks)
    if by_kind["median"]:
        found |= _medians(files, by_kind["median"], spec, schema, tasks)
    return checked_fills({name: found[name] for name in statistics})


def _source(path: Path, names: Sequence[str], spec: FeatureSpec, schema: pl.Schema) -> pl.DataFrame:
    """One file's imputed sources (`imputed_source`) of ``names``."""
    return (
        pl.scan_parquet(path, glob=False)
        .select(imputed_source(name, spec, schema).alias(name) for name in names)
        .collect()
    )


def _means(
    files: Sequence[Path], names: list[str], spec: FeatureSpec, schema: pl.Schema, tasks: Tasks
) -> dict[str, float | None]:
    """Each file's count and mean, merged in file order."""
    handles = [
        tasks.run(f"mean-{p}", _mean_task, path, names, spec, schema)
        for p, path in enumerate(files)
    ]
    count = dict.fromkeys(names, 0)
    mean = dict.fromkeys(names, 0.0)
    for partial in tasks.results(handles):
        for name, (rows, value) in partial.items():
            if rows:
                count[name] += rows
                mean[name] += (value - mean[name]) * (rows / count[name])
    return {name: mean[name] if count[name] else None for name in names}


def _mean_task(
    path: Path, names: list[str], spec: FeatureSpec, schema: pl.Schema
) -> dict[str, tuple[int, float]]:
    """Task: the count and mean of each column's values in one file."""
    frame = _source(path, names, spec, schema)
    return {
        name: (int(column.count()), float(column.mean() or 0.0))  # type: ignore[arg-type]
        for name, column in frame.to_dict().items()
    }


def _modes(
    files: Sequence[Path], names: list[str], spec: FeatureSpec, schema: pl.Schema, tasks: Tasks
) -> dict[str, float | Modality | None]:
    """Value counts by hash bucket, summed by one task per bucket; the most frequent value
    overall, the smallest among ties (as Polars' ``mode().sort().first()``)."""
    buckets = len(files)
    counted = [
        tasks.run(f"mode-{p}", _mode_task, path, names, spec, schema, buckets)
        for p, path in enumerate(files)
    ]
    tops = [
        tasks.run(
            f"mode-bucket-{h}",
            _mode_bucket,
            names,
            *pieces(tasks.run, "mode-piece", counted, h),
        )
        for h in range(buckets)
    ]
    best: dict[str, tuple[int, Any] | None] = dict.fromkeys(names)
    for top in tasks.results(tops):
        for name, candidate in top.items():
            held = best[name]
            if candidate is not None and (
                held is None
                or candidate[0] > held[0]
                or (candidate[0] == held[0] and candidate[1] < held[1])
            ):
                best[name] = candidate
    return {name: None if found is None else found[1] for name, found in best.items()}


# A mode's value counts: each value under this name, never the column's own (it may be "count").
_VALUE = f"{RESERVED_PREFIX}_value"
_COUNT = f"{RESERVED_PREFIX}_count"
_BUCKET = f"{RESERVED_PREFIX}_bucket"


def _mode_task(
    path: Path, names: list[str], spec: FeatureSpec, schema: pl.Schema, buckets: int
) -> list[dict[str, pl.DataFrame]]:
    """Task: one file's value counts of each column, cut into hash buckets."""
    frame = _source(path, names, spec, schema)
    pieces: list[dict[str, pl.DataFrame]] = [{} for _ in range(buckets)]
    for name in names:
        values = frame.select(pl.col(name).alias(_VALUE)).drop_nulls()
        counts = values.group_by(_VALUE).len(name=_COUNT)
        split = counts.with_columns(
            (pl.col(_VALUE).hash(seed=0) % buckets).alias(_BUCKET)
        ).partition_by(_BUCKET, as_dict=True, include_key=False)
        for h in range(buckets):
            pieces[h][name] = split.get((h,), counts.clear())
    return pieces


def _mode_bucket(names: list[str], *pieces: dict[str, pl.DataFrame]) -> dict[str, Any]:
    """Task: each column's most frequent value in one bucket (smallest among ties) and its
    count, or None."""
    tops: dict[str, Any] = {}
    for name in names:
        counts = (
            pl.concat([piece[name] for piece in pieces]).group_by(_VALUE).agg(pl.col(_COUNT).sum())
        )
        if counts.height == 0:
            tops[name] = None
            continue
        top = counts.filter(pl.col(_COUNT) == pl.col(_COUNT).max()).sort(_VALUE).row(0)
        tops[name] = (int(top[1]), top[0])
    return tops


def _medians(
    files: Sequence[Path], names: list[str], spec: FeatureSpec, schema: pl.Schema, tasks: Tasks
) -> dict[str, float | None]:
    """The median of each column, as Polars' ``median()``: the two middle values by exact
    selection over the files' sorted values, then interpolated as Polars does. (Where the
    middle values are zeros of both signs, Polars' sign depends on the rows' order; this
    takes ``-0.0`` below ``0.0``.)"""
    keys = [
        tasks.run(f"median-keys-{p}", _median_keys, path, names, spec, schema)
        for p, path in enumerate(files)
    ]
    ranged = [tasks.run(f"median-range-{p}", _key_range, f) for p, f in enumerate(keys)]
    ranges = list(tasks.results(ranged))
    rows = {name: sum(r[name][0] for r in ranges) for name in names}
    # Each target (column, rank k) has the k-th smallest key in [low, high].
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    for name, n in rows.items():
        if n:
            low = min(r[name][1] for r in ranges if r[name][0])
            high = max(r[name][2] for r in ranges if r[name][0])
            for k in {(n - 1) // 2, n // 2}:
                bounds[(name, k)] = (low, high)
    round_ = 0
    while any(low < high for low, high in bounds.values()):
        pivots = {
            target: np.array(sorted({low + (high - low) * j // PIVOTS for j in range(PIVOTS)}))
            for target, (low, high) in bounds.items()
            if low < high
        }
        counts = {target: np.zeros(len(p), dtype=np.int64) for target, p in pivots.items()}
        handles = [
            tasks.run(f"median-count-{round_}-{p}", _count_at_most, f, pivots)
            for p, f in enumerate(keys)
        ]
        for partial in tasks.results(handles):
            for target, found in partial.items():
                counts[target] += found
        for target, at_most in counts.items():
            low, high = bounds[target]
            above = int(np.searchsorted(at_most, target[1], side="right"))  # first count > k
            if above < len(at_most):
                high = int(pivots[target][above])
            if above > 0:
                low = int(pivots[target][above - 1]) + 1
            bounds[target] = (low, high)
        round_ += 1
    medians: dict[str, float | None] = {}
    for name, n in rows.items():
        if not n:
            medians[name] = None
            continue
        lower = _from_key(bounds[(name, (n - 1) // 2)][0])
        upper = _from_key(bounds[(name, n // 2)][0])
        # Polars' linear interpolation half way (equal values as they are, so inf stays inf).
        medians[name] = lower if lower == upper else lower + (upper - lower) * 0.5
    return medians


def _ordered(values: Float64Array) -> IndexArray:
    """Integers in the order of the floats (``-0.0`` just below ``0.0``): their bits, the
    magnitude bits of negative ones reversed."""
    bits = values.view(np.int64)
    keys: IndexArray = np.where(bits < 0, bits ^ _SIGN_BITS, bits)
    return keys


def _from_key(key: int) -> float:
    """The float of a key of `_ordered`."""
    return float(_ordered(np.array([key], dtype=np.int64).view(np.float64)).view(np.float64)[0])


def _median_keys(
    path: Path, names: list[str], spec: FeatureSpec, schema: pl.Schema
) -> dict[str, IndexArray]:
    """Task: one file's values of each column (nulls and NaN left out) as sorted keys; they
    stay on the worker for the counting rounds."""
    frame = _source(path, names, spec, schema)
    return {
        name: np.sort(_ordered(frame.get_column(name).drop_nulls().to_numpy().astype(np.float64)))
        for name in names
    }


def _key_range(keys: dict[str, IndexArray]) -> dict[str, tuple[int, int, int]]:
    """Task: how many keys each column has in one file, and the smallest and largest."""
    return {
        name: (len(held), int(held[0]), int(held[-1])) if len(held) else (0, 0, 0)
        for name, held in keys.items()
    }


def _count_at_most(
    keys: dict[str, IndexArray], pivots: dict[tuple[str, int], IndexArray]
) -> dict[tuple[str, int], IndexArray]:
    """Task: how many of one file's keys are at most each pivot."""
    return {
        target: np.searchsorted(keys[target[0]], points, side="right").astype(np.int64)
        for target, points in pivots.items()
    }
