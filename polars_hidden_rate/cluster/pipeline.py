"""Local cloaking of parquet datasets on a Dask cluster: the workers read, link, count and write.

`count_and_write` runs [`local_cloaking_to_parquet`][polars_hidden_rate.local_cloaking_to_parquet]
with ``cluster=``. The driver holds futures, file metadata, split points, boxes and
scalars, never a column: its memory grows with the number of files, blocks and shards,
not with the records. Every stage is a set of pure tasks, each a function of files and
of other tasks' results, so a lost worker's results are recomputed by Dask from the
files, and the counts cannot change.

1. **Read** (one task per file of each side): the key columns (cast to the types both
   sides share), the coordinates as float64, and each record's global row. The task
   checks what `read_aligned` checks and returns
   scalars: rows, the largest ``|coordinate|``, missing values, null keys, and a sample
   of the first coordinate for the split points. The records stay on the worker, cut
   into ``H`` buckets by a hash of the key (by key), or by ranges of rows (by row order).
2. The driver sums those scalars, raises the local errors, and chooses the canonical
   exponent (`exponent_for` of the global largest)
   and the split points: ``B - 1`` for query blocks and ``S - 1`` for avatar shards,
   quantiles of the sample of ``(first coordinate, row)`` pairs, as a distributed sort
   chooses them.
3. **Link** (one task per bucket): an original and its avatar have the same key, so
   they meet in one bucket (Dask moves the pieces between workers, as its task-based
   shuffle does). The task links them as locally (`link_by_key`)
   and reports its key problems, which the driver sums; it multiplies both sides
   by ``2^e``, computes each ``T_i`` (`own_thresholds`)
   and cuts its originals by the block split points.
4. **Shards** (one per range of avatars): each avatar file cuts its avatars by the
   shard split points; a shard task gathers its pieces and builds its kd-tree where
   it runs. **Blocks** gather their pieces from every bucket.
5. The driver gathers the boxes and prunes (block, shard) pairs exactly
   (`pairs_within_reach`); one **count** task per
   pair left calls `count_within`; a task per block sums
   its partial counts.
6. **Write** (one task per originals file): the totals are routed back to their files
   by row, the file is read again, given ``local_cloaking`` and ``hidden``, and written
   as its part. The task returns a histogram of the counts; the driver builds the
   summary from the histograms (and, for a quartile above them, by bisection over the
   workers' counts).

The counts equal the local engine's, bit for bit: the same exponent, the same float64
thresholds, and every partial count exact (``docs/scale.md``).
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from polars.exceptions import ComputeError, NoDataError, ShapeError

from polars_hidden_rate import engine
from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.cluster.shards import (
    Box,
    TaskPlan,
    count_in_shard,
    pairs_in_reach,
    plan_tasks,
)
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.scale import exponent_for
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
    Dataset,
    Example,
    KeyProblems,
    MissingValues,
    inexact_counts,
    link_by_key,
    missing_values,
    raise_inexact,
    raise_missing,
)
from polars_hidden_rate.linkage import link_test_of_sample, sampled_rows
from polars_hidden_rate.outputs import with_counts, write_part
from polars_hidden_rate.projection import ProjectedCoordinates, Projection
from polars_hidden_rate.summary import CloakingSummary, histogram, summary_from_order_statistics
from polars_hidden_rate.tasks import (
    DaskTasks,
    pieces,
    require_client,
    worker_specs,
)
from polars_hidden_rate.verdict import (
    Evidence,
    UnlinkedAvatarsError,
    Verdict,
    compares_coordinates,
    copy_features,
    copy_fingerprints,
    unlinked_message,
)

if TYPE_CHECKING:
    from distributed import Client, Future

    from polars_hidden_rate.plan import CountPlan

_KEY = f"{RESERVED_PREFIX}_key"
_COORD = f"{RESERVED_PREFIX}_coord"
_ID = f"{RESERVED_PREFIX}_id"
_FINGERPRINT = f"{RESERVED_PREFIX}_fingerprint"
_BUCKET = f"{RESERVED_PREFIX}_bucket"
_AVATAR = "_avatar"

SAMPLE_PER_SPLIT = 64
"""Sampled first coordinates per split point, spread over the files by their rows."""
HISTOGRAM_BINS = 1024
"""Counts below this are summarised from the workers' histograms alone."""


# --- 1. read ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Side:
    """What every read task of one side needs: its role, keys and coordinate expressions."""

    role: str
    keys: tuple[pl.Expr, ...]  # empty: linked by row order
    key_names: tuple[str, ...]
    coordinates: tuple[pl.Expr, ...]
    names: tuple[str, ...]
    rows: int  # of the originals: row-order buckets are ranges of them
    projection: Projection | None = None  # fitted when the coordinates are projected
    # A hash of the raw copy features, where they are not the coordinates read
    # (verdict.copy_fingerprints): own copies are counted on coordinates and hash.
    fingerprint: pl.Expr | None = None


@dataclass(frozen=True)
class _ReadStats:
    """The scalars a read task returns to the driver."""

    rows: int
    largest: float
    missing: MissingValues
    beyond: dict[str, int]  # values float64 does not hold exactly (frames.inexact_values)
    null_keys: int
    null_key_example: Example | None
    sample_x: Float64Array
    sample_id: IndexArray


@dataclass(frozen=True)
class _Read:
    stats: _ReadStats
    pieces: tuple[pl.DataFrame, ...]  # by link bucket: keys, coordinates (float64), row


def read_partition(path: Path, side: _Side, offset: int, buckets: int, sample: int) -> _Read:
    """Task: read one file's keys and coordinates, check them, cut them into link buckets."""
    keys = [f"{_KEY}{i}" for i in range(max(len(side.keys), 1))]
    coords = [f"{_COORD}{k}" for k in range(len(side.names))]
    scanned = pl.scan_parquet(path, glob=False)
    if side.projection is not None:
        scanned = side.projection.with_inputs(scanned)
    frame = scanned.select(
        *(key.alias(name) for key, name in zip(side.keys, keys, strict=False)),
        *(column.alias(name) for column, name in zip(side.coordinates, side.names, strict=True)),
        *(() if side.fingerprint is None else (side.fingerprint.alias(_FINGERPRINT),)),
    ).collect()
    frame = frame.with_columns((pl.int_range(pl.len(), dtype=pl.Int64) + offset).alias(_ID))
    if not side.keys:  # by row order, the global row is the key
        frame = frame.with_columns(pl.col(_ID).alias(keys[0]))
    missing = missing_values(frame, {name: pl.col(name).cast(pl.Float64) for name in side.names})
    beyond = inexact_counts(frame, {name: frame.schema[name] for name in side.names})
    unset = frame.filter(pl.any_horizontal(pl.col(keys).is_null())) if side.keys else frame[:0]
    example = unset.select(keys).row(0) if unset.height else None
    if missing or beyond:  # the driver raises before any piece is asked for
        empty = np.empty(0)
        stats = _ReadStats(
            frame.height, 0.0, missing, beyond, unset.height, example, empty, empty.astype(np.int64)
        )
        return _Read(stats, ())
    frame = frame.rename(dict(zip(side.names, coords, strict=True))).with_columns(
        pl.col(coords).cast(pl.Float64)
    )
    values = frame.select(coords).to_numpy()
    ids = frame.get_column(_ID).to_numpy()
    order = np.lexsort((ids, values[:, 0]))
    spread = np.linspace(0, len(order) - 1, min(sample, len(order))).round().astype(np.int64)
    picked = order[np.unique(spread)]
    if side.keys:
        bucket = pl.struct(keys).hash(seed=0) % buckets
    else:
        bucket = pl.min_horizontal(pl.col(_ID) * buckets // max(side.rows, 1), buckets - 1)
    split = frame.with_columns(bucket.cast(pl.Int64).alias(_BUCKET)).partition_by(
        _BUCKET, as_dict=True, include_key=False
    )
    template = frame.clear()
    stats = _ReadStats(
        frame.height,
        float(np.abs(values).max(initial=0.0)),
        missing,
        beyond,
        unset.height,
        example,
        values[picked, 0].copy(),
        ids[picked].copy(),
    )
    return _Read(stats, tuple(split.get((h,), template) for h in range(buckets)))


def _stats(read: _Read) -> _ReadStats:
    return read.stats


def _piece(read: _Read, h: int) -> pl.DataFrame:
    return read.pieces[h]


# --- 2. split points ----------------------------------------------------------------------


@dataclass(frozen=True)
class Splits:
    """Split points of ``(first coordinate, row)`` pairs; piece ``k`` holds the pairs with
    exactly ``k`` split points at or below them, in lexicographic order."""

    x: Float64Array
    row: IndexArray

    @classmethod
    def from_sample(cls, samples: Sequence[_ReadStats], parts: int) -> Splits:
        """``parts - 1`` weighted quantiles of the sampled pairs (each file's sample weighs
        its rows)."""
        kept = [stats for stats in samples if len(stats.sample_x)]
        if parts <= 1 or not kept:
            return cls(np.empty(0), np.empty(0, dtype=np.int64))
        x = np.concatenate([stats.sample_x for stats in kept])
        row = np.concatenate([stats.sample_id for stats in kept])
        weight = np.concatenate(
            [np.full(len(stats.sample_x), stats.rows / len(stats.sample_x)) for stats in kept]
        )
        order = np.lexsort((row, x))
        cumulative = np.cumsum(weight[order])
        targets = cumulative[-1] * np.arange(1, parts) / parts
        picked = order[np.minimum(np.searchsorted(cumulative, targets), len(order) - 1)]
        return cls(x[picked], row[picked])

    def assign(self, x: Float64Array, row: IndexArray) -> IndexArray:
        """The piece of each pair: how many split points are at or below it.

        Examples
        --------
        >>> splits = Splits(np.array([1.0, 1.0, 2.0]), np.array([5, 9, 0]))
        >>> splits.assign(np.array([0.5, 1.0, 1.0, 1.0, 3.0]), np.array([0, 4, 5, 9, 1])).tolist()
        [0, 0, 1, 2, 3]
        """
        left = np.searchsorted(self.x, x, side="left")
        right = np.searchsorted(self.x, x, side="right")
        piece = left.astype(np.int64)
        ties = np.nonzero(right > left)[0]  # x equals a split point's: compare the rows
        if len(ties):
            ties = ties[np.argsort(left[ties], kind="stable")]
            starts, firsts = np.unique(left[ties], return_index=True)
            for start, group in zip(starts, np.split(ties, firsts[1:]), strict=True):
                stop = right[group[0]]
                piece[group] = start + np.searchsorted(self.row[start:stop], row[group], "right")
        return piece


def _cut(order_key: IndexArray, parts: int) -> list[IndexArray]:
    """The rows of each piece ``0 .. parts - 1``, each in its original order."""
    order = np.argsort(order_key, kind="stable")
    bounds = np.cumsum(np.bincount(order_key, minlength=parts))[:-1]
    return np.split(order, bounds)


# --- 3. link ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _LinkSpec:
    keys: int  # key columns
    left_names: tuple[str, ...]
    right_names: tuple[str, ...]
    dim: int
    exponent: int
    tie_tol: float
    query_splits: Splits
    avatar_splits: Splits
    originals: int  # files: the first pieces are the originals'
    sampled: IndexArray | None = None  # the link test's records (linkage.sampled_rows)
    copies: bool = False  # count own copies (on the coordinates, and the fingerprints if read)


@dataclass(frozen=True)
class _Queries:
    """Originals with their thresholds, at the canonical scale, and where their avatar is."""

    queries: Float64Array
    thresholds: Float64Array
    original_id: IndexArray
    avatar_id: IndexArray
    avatar_shard: IndexArray
    # Below each own d2, for the rivals strictly closer (engine.strictly_below); empty when
    # no verdict asks which records are hidden by ties only.
    below: Float64Array = field(default_factory=lambda: np.empty(0))

    @classmethod
    def concat(cls, parts: Sequence[_Queries], dim: int) -> _Queries:
        if not parts:
            return cls(np.empty((0, dim)), np.empty(0), *(np.empty(0, dtype=np.int64),) * 3)
        return cls(
            np.concatenate([p.queries for p in parts]).reshape(-1, dim),
            np.concatenate([p.thresholds for p in parts]),
            np.concatenate([p.original_id for p in parts]),
            np.concatenate([p.avatar_id for p in parts]),
            np.concatenate([p.avatar_shard for p in parts]),
            np.concatenate([p.below for p in parts]),
        )

    def take(self, rows: IndexArray) -> _Queries:
        return _Queries(
            self.queries[rows],
            self.thresholds[rows],
            self.original_id[rows],
            self.avatar_id[rows],
            self.avatar_shard[rows],
            self.below[rows] if len(self.below) else self.below,
        )


@dataclass(frozen=True)
class _Evidence:
    """A bucket's share of the verdict's evidence: its records among the link test's, with
    their coordinates and their own avatar's (as read), and its own copies."""

    ids: IndexArray
    originals: Float64Array
    avatars: Float64Array
    own_copies: int


@dataclass(frozen=True)
class _Linked:
    problems: KeyProblems
    blocks: tuple[_Queries, ...] = field(default=())
    evidence: _Evidence | None = None


def link_bucket(spec: _LinkSpec, blocks: int, *pieces: pl.DataFrame) -> _Linked:
    """Task: link the originals and avatars of one key bucket; thresholds; cut into blocks."""
    keys = [f"{_KEY}{i}" for i in range(spec.keys)]
    coords = [f"{_COORD}{k}" for k in range(spec.dim)]
    left = pl.concat(pieces[: spec.originals])
    right = pl.concat(pieces[spec.originals :])
    order, problems = link_by_key(left, right, keys, keys)
    if order is None:
        return _Linked(replace(problems, names=(spec.left_names, spec.right_names)))
    raw = left.select(coords).to_numpy()
    raw_avatars = right.select(coords).to_numpy()[order]
    # The canonical scale of the whole data set, on both sides: the local floats exactly.
    queries = np.ascontiguousarray(np.ldexp(raw, spec.exponent))
    avatars = np.ascontiguousarray(np.ldexp(raw_avatars, spec.exponent))
    original_id = left.get_column(_ID).to_numpy()
    avatar_id = right.get_column(_ID).to_numpy()[order]
    thresholds = engine.own_thresholds(queries, avatars, spec.tie_tol)
    below = np.empty(0)
    if spec.copies:  # a verdict: which hidden records have a rival strictly closer
        own = thresholds if spec.tie_tol == 0.0 else engine.own_thresholds(queries, avatars, 0.0)
        below = engine.strictly_below(own)
    linked = _Queries(
        queries,
        thresholds,
        original_id,
        avatar_id,
        spec.avatar_splits.assign(raw_avatars[:, 0], avatar_id),
        below,
    )
    block = spec.query_splits.assign(raw[:, 0], original_id)
    sampled = (
        np.ones(len(original_id), dtype=bool)
        if spec.sampled is None
        else np.isin(original_id, spec.sampled)
    )
    copies = 0
    if spec.copies:
        same = (raw == raw_avatars).all(axis=1)
        if _FINGERPRINT in left.columns:
            fingerprints = right.get_column(_FINGERPRINT).to_numpy()[order]
            same &= left.get_column(_FINGERPRINT).to_numpy() == fingerprints
        copies = int(np.count_nonzero(same))
    evidence = _Evidence(original_id[sampled], raw[sampled], raw_avatars[sampled], copies)
    cut = tuple(linked.take(rows) for rows in _cut(block, blocks))
    return _Linked(problems, cut, evidence)


def _problems(linked: _Linked) -> tuple[KeyProblems, _Evidence | None]:
    return linked.problems, linked.evidence


def _block_piece(linked: _Linked, b: int) -> _Queries:
    return linked.blocks[b]


def gather_block(dim: int, *pieces: _Queries) -> _Queries:
    """Task: one query block, from its piece of every bucket."""
    return _Queries.concat(pieces, dim)


# --- 4. shards ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Points:
    points: Float64Array
    ids: IndexArray


def shard_pieces(read: _Read, exponent: int, splits: Splits, shards: int) -> tuple[_Points, ...]:
    """Task: one avatar file's avatars at the canonical scale, cut by the shard split points."""
    frame = pl.concat(read.pieces)
    coords = [c for c in frame.columns if c.startswith(_COORD)]
    raw = frame.select(coords).to_numpy()
    ids = frame.get_column(_ID).to_numpy()
    scaled = np.ldexp(raw, exponent)
    return tuple(
        _Points(scaled[rows], ids[rows]) for rows in _cut(splits.assign(raw[:, 0], ids), shards)
    )


@dataclass(frozen=True)
class _Shard:
    """A shard's kd-tree, and the row of each of its avatars by global row."""

    tree: KdTree
    sorted_ids: IndexArray
    rows: IndexArray

    def rows_of(self, ids: IndexArray) -> IndexArray:
        """The row (in the tree's input order) of each avatar ``ids``; all must be here."""
        at = np.minimum(np.searchsorted(self.sorted_ids, ids), max(len(self.sorted_ids) - 1, 0))
        if len(ids) and not np.array_equal(self.sorted_ids[at], ids):
            msg = "an avatar was not found in the shard its split point gives"
            raise RuntimeError(msg)
        return self.rows[at]


def build_shard(dim: int, *pieces: _Points) -> _Shard:
    """Task: gather one shard's avatars from every file and build its kd-tree, here."""
    points = np.concatenate([p.points for p in pieces]).reshape(-1, dim)
    ids = np.concatenate([p.ids for p in pieces])
    order = np.argsort(ids, kind="stable")
    return _Shard(KdTree.build(points, threads=1), ids[order], order)


def shard_box(shard: _Shard) -> Box | None:
    """Task: the box of one shard's avatars, for the driver's pruning."""
    return Box.around(shard.tree.points)


def block_box(block: _Queries) -> Box | None:
    """Task: the box of one block's originals and their largest threshold."""
    return Box.around(block.queries, block.thresholds)


# --- 5. count -----------------------------------------------------------------------------


def count_pair(
    block: _Queries, shard: _Shard, s: int, threads: int | None
) -> tuple[IndexArray, CountArray, IndexArray]:
    """Task: the block's partial counts over one shard (a pure function of its inputs), as
    the queries with a rival there and their counts: most queries have none in most shards,
    so a block's partials, held until they are summed, stay small. With the block's
    ``below``, also the queries with a rival there strictly closer than their own avatar."""
    own = np.full(len(block.queries), -1, dtype=np.int64)
    mine = block.avatar_shard == s
    own[mine] = shard.rows_of(block.avatar_id[mine])
    closer = np.zeros(len(block.queries), dtype=bool) if len(block.below) else None
    counts = count_in_shard(
        block.queries, block.thresholds, own, shard.tree, threads, block.below, closer
    )
    found = np.flatnonzero(counts)
    strictly = np.empty(0, dtype=np.int64) if closer is None else np.flatnonzero(closer)
    return found, counts[found], strictly


def sum_partials(
    block: _Queries, *partials: tuple[IndexArray, CountArray, IndexArray]
) -> tuple[IndexArray, CountArray, int]:
    """Task: a block's counts, the sum of its partial counts, with its originals' rows; and
    its records hidden by ties only (no rival strictly closer in any shard; 0 without
    ``below``)."""
    total = np.zeros(len(block.queries), dtype=np.int64)
    closer = np.zeros(len(block.queries), dtype=bool)
    for rows, counts, strictly in partials:
        total[rows] += counts  # each query once per partial
        closer[strictly] = True
    ties_only = int(np.count_nonzero((total > 0) & ~closer)) if len(block.below) else 0
    return block.original_id, total, ties_only


def _ties_only(totals: tuple[IndexArray, CountArray, int]) -> int:
    return totals[2]


# --- 6. write -----------------------------------------------------------------------------


def route(totals: tuple[IndexArray, CountArray, int], offsets: IndexArray) -> tuple[Any, ...]:
    """Task: a block's counts cut by originals file: (row in the file, count) for each."""
    ids, counts, _ = totals
    part = np.searchsorted(offsets, ids, side="right") - 1
    return tuple(
        (ids[rows] - offsets[p], counts[rows]) for p, rows in enumerate(_cut(part, len(offsets)))
    )


def assemble(rows: int, *pieces: tuple[IndexArray, CountArray]) -> CountArray:
    """Task: one file's counts, in its row order, from every block; each row exactly once."""
    counts = np.full(rows, -1, dtype=np.int64)
    seen = 0
    for where, values in pieces:
        counts[where] = values
        seen += len(where)
    if seen != rows or (counts < 0).any():
        msg = f"{rows} originals in the file, but {seen} counts came back"
        raise RuntimeError(msg)
    return counts


@dataclass(frozen=True)
class _Written:
    rows: int
    not_hidden: int
    histogram: CountArray


def write_partition(
    path: Path, expected: int, counts: CountArray, staging: Path, index: int, bins: int
) -> _Written:
    """Task: read one originals file whole, add its counts, write it as its part; return
    the histogram of its counts (``bins`` exact bins, then one for the rest)."""
    frame = pl.read_parquet(path, glob=False)
    if frame.height != expected or len(counts) != expected:
        msg = f"originals file {str(path)!r} changed while it was being counted"
        raise ComputeError(msg)
    write_part(with_counts(frame, counts), staging, index)
    return _Written(expected, int(np.count_nonzero(counts == 0)), histogram(counts, bins))


def order_statistic(k: int, merged: CountArray, at_most: Callable[[int], int]) -> int:
    """The ``k``-th smallest count (from 0), from the histogram of every count (``merged``:
    how many equal ``0, 1, ..., bins - 1``, then how many are ``bins`` or more) and, when it
    lies at or above ``bins``, a bisection on ``at_most(value)``: how many counts are at most
    ``value``."""
    below = np.cumsum(merged[:-1])  # how many counts are at most 0, 1, ..., bins - 1
    if k < below[-1]:
        return int(np.searchsorted(below, k, side="right"))
    low = high = len(below)  # fewer than k + 1 counts lie below: it is at least this
    while at_most(high) <= k:  # a value at or above it, then bisect
        high *= 2
    while low < high:
        middle = (low + high) // 2
        if at_most(middle) > k:
            high = middle
        else:
            low = middle + 1
    return low


def count_at_most(counts: CountArray, value: int) -> int:
    """Task: how many counts are at most ``value`` (the summary's bisection)."""
    return int(np.count_nonzero(counts <= value))


# --- the driver ---------------------------------------------------------------------------


def count_and_write(
    request: CountPlan,
    originals: Dataset,
    avatars: Dataset,
    staging: Path,
    min_rate: float | None,
    *,
    tasks: TaskPlan | None = None,
    verdict: Verdict | None = None,
) -> CloakingSummary:
    """Count on the cluster of ``request`` and write one part per originals file into
    ``staging``; the summary of the counts. With ``verdict``, the link test runs on the
    records the local path tests (gathered from the link buckets, before any count), and
    own copies are counted where the coordinates are the given ones."""
    pipeline = _Pipeline(require_client(request.cluster), request, originals, avatars)
    return pipeline.run(staging, min_rate, tasks, verdict)


class _Pipeline:
    """One run's stages, each a method that submits its tasks, keyed
    ``phr-<stage>-<index>-<run>``. `run` drops each stage's futures once the next
    stage's tasks are submitted, so Dask frees every stage's data as soon as the next stage
    has it; no future is kept on the pipeline itself."""

    def __init__(
        self, client: Client, request: CountPlan, originals: Dataset, avatars: Dataset
    ) -> None:
        self.client = client
        self.tasks = DaskTasks(client)
        self.request = request
        self.originals = originals
        self.avatars = avatars

    def submit(self, name: str, function: Any, *args: Any) -> Future[Any]:
        return self.tasks.run(name, function, *args)  # type: ignore[no-any-return]

    def gather(self, futures: Sequence[Future[Any]]) -> list[Any]:
        return self.tasks.gather(futures)

    def run(
        self, staging: Path, min_rate: float | None, plan: TaskPlan | None, verdict: Verdict | None
    ) -> CloakingSummary:
        """Every stage in order (``docs/scale.md``), then the summary of the counts."""
        request, originals = self.request, self.originals
        left, right = _sides(request, originals, self.avatars, self.client)
        dim = len(left.names)
        if plan is None:
            workers = worker_specs(self.client)
            plan = plan_tasks(originals.rows, self.avatars.rows, dim, workers)
        left_reads, right_reads, left_stats, right_stats = self.read(left, right, plan)
        spec = self.link_spec(left, right, left_stats, right_stats, plan, verdict)
        links = self.link(spec, plan, left_reads, right_reads)
        cuts = self.cut_avatars(spec, plan, right_reads)
        del left_reads, right_reads
        evidence = self.check_links(links, left, right, right_stats, verdict, dim)
        shards = self.build_shards(dim, plan, cuts)
        blocks = self.gather_blocks(dim, plan, links)
        del cuts, links
        totals = self.count(blocks, shards)
        del blocks, shards
        counts = self.counts_by_file(totals)
        ties_only = None if evidence is None else self.ties_only(totals)
        del totals
        written = self.write(staging, counts)
        summary = self.summary(written, counts, min_rate)
        if evidence is None or verdict is None:
            return summary
        evidence = replace(evidence, hidden_by_ties_only=ties_only)
        gated = replace(summary, evidence=evidence, max_own_copies=verdict.max_own_copies)
        return replace(gated, passed=summary.passed and not gated.copies_fail)

    # --- 1. read ---------------------------------------------------------------------------

    def read(
        self, left: _Side, right: _Side, plan: TaskPlan
    ) -> tuple[list[Future[_Read]], list[Future[_Read]], list[_ReadStats], list[_ReadStats]]:
        """Each side's read tasks and their scalars, checked as the local read checks them."""
        sample = SAMPLE_PER_SPLIT * max(plan.blocks, plan.shards)
        left_reads = self.read_side(self.originals, left, plan.buckets, sample)
        right_reads = self.read_side(self.avatars, right, plan.buckets, sample)
        left_stats = self.gather(
            [self.submit(f"stats-originals-{p}", _stats, f) for p, f in enumerate(left_reads)]
        )
        right_stats = self.gather(
            [self.submit(f"stats-avatars-{q}", _stats, f) for q, f in enumerate(right_reads)]
        )
        _raise_read_errors(
            self.request,
            self.originals,
            self.avatars,
            left,
            right,
            left_stats,
            right_stats,
            self.client,
        )
        return left_reads, right_reads, left_stats, right_stats

    def read_side(
        self, dataset: Dataset, side: _Side, buckets: int, sample: int
    ) -> list[Future[_Read]]:
        n = max(dataset.rows, 1)
        return [
            self.submit(
                f"read-{side.role}-{p}",
                read_partition,
                part.path.absolute(),  # the workers may run elsewhere than here
                side,
                part.offset,
                buckets,
                math.ceil(sample * part.rows / n),
            )
            for p, part in enumerate(dataset.partitions)
        ]

    # --- 2. split points -------------------------------------------------------------------

    def link_spec(
        self,
        left: _Side,
        right: _Side,
        left_stats: Sequence[_ReadStats],
        right_stats: Sequence[_ReadStats],
        plan: TaskPlan,
        verdict: Verdict | None,
    ) -> _LinkSpec:
        """The canonical exponent of the whole data and the split points, from the scalars."""
        request = self.request
        dim = len(left.names)
        largest = max(stats.largest for stats in [*left_stats, *right_stats])
        return _LinkSpec(
            keys=max(len(left.keys), 1),
            left_names=left.key_names,
            right_names=right.key_names,
            dim=dim,
            exponent=exponent_for(largest, dim, request.tie_tol),
            tie_tol=request.tie_tol,
            query_splits=Splits.from_sample(left_stats, plan.blocks),
            avatar_splits=Splits.from_sample(right_stats, plan.shards),
            originals=len(left_stats),
            sampled=sampled_rows(self.originals.rows),
            copies=verdict is not None,
        )

    # --- 3. link ---------------------------------------------------------------------------

    def link(
        self,
        spec: _LinkSpec,
        plan: TaskPlan,
        left_reads: Sequence[Future[_Read]],
        right_reads: Sequence[Future[_Read]],
    ) -> list[Future[_Linked]]:
        """One link task per key bucket, from that bucket's piece of every file."""
        return [
            self.submit(
                f"link-bucket-{h}",
                link_bucket,
                spec,
                plan.blocks,
                *pieces(self.submit, "link-piece", [*left_reads, *right_reads], h, _piece),
            )
            for h in range(plan.buckets)
        ]

    def check_links(
        self,
        links: Sequence[Future[_Linked]],
        left: _Side,
        right: _Side,
        right_stats: Sequence[_ReadStats],
        verdict: Verdict | None,
        dim: int,
    ) -> Evidence | None:
        """The key problems of the whole link, raised as locally; with ``verdict``, the link
        test on the records the local path tests."""
        found = self.gather(
            [self.submit(f"problems-{h}", _problems, f) for h, f in enumerate(links)]
        )
        problems = [bucket for bucket, _ in found]
        _key_problems(left, right, [], right_stats, problems).raise_first()
        if verdict is None:
            return None
        shares = [e for _, e in found if e is not None]
        return _judge_link(self.request, verdict, shares, dim, self.originals.rows)

    # --- 4. shards and blocks --------------------------------------------------------------

    def cut_avatars(
        self, spec: _LinkSpec, plan: TaskPlan, right_reads: Sequence[Future[_Read]]
    ) -> list[Future[tuple[_Points, ...]]]:
        """Each avatar file's avatars at the canonical scale, cut by the shard split points."""
        return [
            self.submit(
                f"shard-pieces-{q}",
                shard_pieces,
                f,
                spec.exponent,
                spec.avatar_splits,
                plan.shards,
            )
            for q, f in enumerate(right_reads)
        ]

    def build_shards(
        self, dim: int, plan: TaskPlan, cuts: Sequence[Future[tuple[_Points, ...]]]
    ) -> list[Future[_Shard]]:
        """One task per shard: its pieces of every avatar file, its kd-tree built there."""
        return [
            self.submit(
                f"shard-{s}", build_shard, dim, *pieces(self.submit, "shard-piece", cuts, s)
            )
            for s in range(plan.shards)
        ]

    def gather_blocks(
        self, dim: int, plan: TaskPlan, links: Sequence[Future[_Linked]]
    ) -> list[Future[_Queries]]:
        """One task per query block: its pieces of every link bucket."""
        return [
            self.submit(
                f"block-{b}",
                gather_block,
                dim,
                *pieces(self.submit, "block-piece", links, b, _block_piece),
            )
            for b in range(plan.blocks)
        ]

    # --- 5. count --------------------------------------------------------------------------

    def count(
        self, blocks: Sequence[Future[_Queries]], shards: Sequence[Future[_Shard]]
    ) -> list[Future[tuple[IndexArray, CountArray, int]]]:
        """The pairs the boxes cannot exclude, one count task each; per block, the sum of
        its partial counts, with its originals' rows."""
        shard_boxes = self.gather(
            [self.submit(f"shard-box-{s}", shard_box, f) for s, f in enumerate(shards)]
        )
        block_boxes = self.gather(
            [self.submit(f"block-box-{b}", block_box, f) for b, f in enumerate(blocks)]
        )
        partials: list[list[Future[tuple[IndexArray, CountArray, IndexArray]]]] = [
            [] for _ in blocks
        ]
        for b, s in pairs_in_reach(block_boxes, shard_boxes):
            partials[b].append(
                self.submit(
                    f"count-within-{b}-{s}",
                    count_pair,
                    blocks[b],
                    shards[s],
                    s,
                    self.request.threads,
                )
            )
        return [
            self.submit(f"sum-{b}", sum_partials, blocks[b], *partials[b])
            for b in range(len(blocks))
        ]

    def ties_only(self, totals: Sequence[Future[tuple[IndexArray, CountArray, int]]]) -> int:
        """The records hidden by ties only, summed over the blocks."""
        found = [self.submit(f"ties-only-{b}", _ties_only, t) for b, t in enumerate(totals)]
        return int(sum(self.gather(found)))

    # --- 6. write --------------------------------------------------------------------------

    def counts_by_file(
        self, totals: Sequence[Future[tuple[IndexArray, CountArray, int]]]
    ) -> list[Future[CountArray]]:
        """Each originals file's counts in its row order, routed back from every block."""
        offsets = np.array([part.offset for part in self.originals.partitions], dtype=np.int64)
        routes = [
            self.submit(f"route-{b}", route, total, offsets) for b, total in enumerate(totals)
        ]
        return [
            self.submit(
                f"assemble-{p}",
                assemble,
                part.rows,
                *pieces(self.submit, "route-piece", routes, p),
            )
            for p, part in enumerate(self.originals.partitions)
        ]

    def write(self, staging: Path, counts: Sequence[Future[CountArray]]) -> list[_Written]:
        """Each originals file written as its part with its counts; their histograms."""
        return self.gather(
            [
                self.submit(
                    f"write-{p}",
                    write_partition,
                    part.path.absolute(),
                    part.rows,
                    counts[p],
                    staging.absolute(),
                    p,
                    HISTOGRAM_BINS,
                )
                for p, part in enumerate(self.originals.partitions)
            ]
        )

    def summary(
        self,
        written: Sequence[_Written],
        counts: Sequence[Future[CountArray]],
        min_rate: float | None,
    ) -> CloakingSummary:
        """From the histograms; an order statistic at or above their last bin is found by
        bisection over the workers' counts."""
        merged = np.sum([w.histogram for w in written], axis=0)
        n = sum(w.rows for w in written)
        not_hidden = sum(w.not_hidden for w in written)
        return summary_from_order_statistics(
            n,
            not_hidden,
            lambda k: order_statistic(k, merged, lambda value: self._at_most(counts, value)),
            min_rate=min_rate,
        )

    def _at_most(self, counts: Sequence[Future[CountArray]], value: int) -> int:
        tasks = [
            self.submit(f"at-most-{value}-{uuid.uuid4().hex[:8]}", count_at_most, f, value)
            for f in counts
        ]
        return int(sum(self.gather(tasks)))


def _sides(
    request: CountPlan, originals: Dataset, avatars: Dataset, client: Client
) -> tuple[_Side, _Side]:
    """The read specification of each side: keys cast to their common type (categories as
    text, so that their hashes and joins do not depend on codes), coordinates."""
    link = request.link
    names, projection = list(request.coords), None
    if request.projection is not None:
        # Fitted by the workers, a task per file, partials merged here in file order (the
        # very fit of the local dataset path); the workers compute the coordinates.
        files = [part.path.absolute() for part in originals.partitions]
        projection = request.projection.fit_files(files, DaskTasks(client, "phr-fit"))
        names = request.projection.names(projection)
    sides = []
    fingerprints = (None, None) if compares_coordinates(request) else copy_fingerprints(request)
    for role, dataset, which, key_names, fingerprint in (
        ("originals", originals, "left", link.left, fingerprints[0]),
        ("avatars", avatars, "right", link.right, fingerprints[1]),
    ):
        keys = tuple(
            key.cast(pl.String) if _is_text(dtype, dataset.schema[name]) else key
            for key, name, dtype in zip(
                link.key_columns(which),  # type: ignore[arg-type]
                key_names,
                link.common_types,
                strict=True,
            )
        )
        if projection is None:
            coordinates = [pl.col(name) for name in names]
        else:
            projection.check_schema(dataset.schema)  # here, before any task runs
            coordinates = projection.coordinates(names)  # of the inputs read_partition adds
        sides.append(
            _Side(
                role=role,
                keys=keys,
                key_names=tuple(key_names) or ("row",),
                coordinates=tuple(coordinates),
                names=tuple(names),
                rows=originals.rows,
                projection=projection,
                fingerprint=fingerprint,
            )
        )
    return sides[0], sides[1]


def _is_text(common: pl.DataType | None, own: pl.DataType) -> bool:
    dtype = common if common is not None else own
    return isinstance(dtype, pl.Categorical | pl.Enum)


def _raise_read_errors(
    request: CountPlan,
    originals: Dataset,
    avatars: Dataset,
    left: _Side,
    right: _Side,
    left_stats: Sequence[_ReadStats],
    right_stats: Sequence[_ReadStats],
    client: Client,
) -> None:
    """The errors of `read_aligned`, in its order, from the
    read tasks' scalars: empty sides, missing or inexact coordinates, heights, null keys."""
    for side, stats, dataset in ((left, left_stats, originals), (right, right_stats, avatars)):
        rows = sum(s.rows for s in stats)
        if rows == 0:
            msg = f"{side.role} is empty: there is nothing to measure"
            raise NoDataError(msg)
        missing: MissingValues = Counter()
        for s in stats:
            missing += s.missing
        if missing and side.projection is not None:
            # As locally: the features whose gaps (or values) made a coordinate missing.
            files = [part.path.absolute() for part in dataset.partitions]
            client.gather(
                client.submit(_missing_features, files, side.projection, side.role, pure=False)
            )
        raise_missing(missing, f"coords of {side.role}", rows=rows)
        beyond = {name: sum(s.beyond.get(name, 0) for s in stats) for name in side.names}
        raise_inexact(beyond, dataset.schema, "coords column", side.role)
    if request.link.by_row_order and originals.rows != avatars.rows:
        msg = (
            f"originals have {originals.rows} rows but avatars have {avatars.rows}; "
            "linking by row order needs equal heights (or give `on`)"
        )
        raise ShapeError(msg)
    _key_problems(left, right, left_stats, [], []).raise_first()


def _missing_features(files: list[Path], projection: Projection, role: str) -> None:
    """Task: raise the local error naming the features of one side with gaps."""
    frame = pl.scan_parquet(files, glob=False)
    ProjectedCoordinates.raise_missing_features(frame, projection, frame.collect_schema(), role)


def _key_problems(
    left: _Side,
    right: _Side,
    left_stats: Sequence[_ReadStats],
    right_stats: Sequence[_ReadStats],
    buckets: Sequence[KeyProblems],
) -> KeyProblems:
    """The key problems of the whole link: null keys from the read tasks (files in row
    order), the rest from the link buckets."""
    names = (left.key_names, right.key_names)
    nulls = KeyProblems(
        names,
        nulls=(sum(s.null_keys for s in left_stats), sum(s.null_keys for s in right_stats)),
        null_examples=(
            next((s.null_key_example for s in left_stats if s.null_keys), None),
            next((s.null_key_example for s in right_stats if s.null_keys), None),
        ),
    )
    found = (replace(b, nulls=(0, 0), null_examples=(None, None)) for b in buckets)
    return KeyProblems.combine([nulls, *found])


def _judge_link(
    request: CountPlan, verdict: Verdict, pieces: Sequence[_Evidence], dim: int, population: int
) -> Evidence:
    """The link test on the records gathered from the buckets (in record order, the rows the
    local path takes); refuses a random link as the local path does."""
    ids = np.concatenate([p.ids for p in pieces])
    order = np.argsort(ids, kind="stable")
    x = np.concatenate([p.originals for p in pieces]).reshape(-1, dim)[order]
    y = np.concatenate([p.avatars for p in pieces]).reshape(-1, dim)[order]
    test = link_test_of_sample(x, y, population)
    if not test.linked and not verdict.allow_unlinked:
        raise UnlinkedAvatarsError(unlinked_message(test, request), test)
    copies = sum(p.own_copies for p in pieces)
    return Evidence(population, test, copies, tuple(copy_features(request)))
