"""The worker tasks of the cluster's parquet pipeline, and the values they pass each other.

Each function here is a pure task of one stage of `polars_hidden_rate.cluster.pipeline`
(read, link, shards and blocks, count, write; the stages are described there and in
``docs/scale.md``): a function of files and of other tasks' results, so that Dask may
recompute any of them from the files after a worker is lost, and the counts cannot change.
The driver submits them; nothing here submits a task or holds a client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl
from polars.exceptions import ComputeError

from polars_hidden_rate import engine
from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.cluster.shards import Box, count_in_shard, queries_in_reach
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
    Example,
    KeyProblems,
    MissingValues,
    inexact_counts,
    link_by_key,
    missing_values,
)
from polars_hidden_rate.measures.summary import histogram
from polars_hidden_rate.outputs import with_counts, write_part
from polars_hidden_rate.projection import ProjectedCoordinates, Projection

_KEY = f"{RESERVED_PREFIX}_key"
_COORD = f"{RESERVED_PREFIX}_coord"
_ID = f"{RESERVED_PREFIX}_id"
_FINGERPRINT = f"{RESERVED_PREFIX}_fingerprint"
_BUCKET = f"{RESERVED_PREFIX}_bucket"


# --- 1. read ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
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
class ReadStats:
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
class Read:
    stats: ReadStats
    pieces: tuple[pl.DataFrame, ...]  # by link bucket: keys, coordinates (float64), row


def read_partition(path: Path, side: Side, offset: int, buckets: int, sample: int) -> Read:
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
        stats = ReadStats(
            frame.height, 0.0, missing, beyond, unset.height, example, empty, empty.astype(np.int64)
        )
        return Read(stats, ())
    frame = frame.rename(dict(zip(side.names, coords, strict=True))).with_columns(
        pl.col(coords).cast(pl.Float64)
    )
    largest = frame.select(pl.max_horizontal(pl.col(coords).abs().max())).item()
    sample_x, sample_id = _spread_sample(
        frame.get_column(coords[0]).to_numpy(), frame.get_column(_ID).to_numpy(), sample
    )
    if side.keys:
        bucket = pl.struct(keys).hash(seed=0) % buckets
    else:
        bucket = pl.min_horizontal(pl.col(_ID) * buckets // max(side.rows, 1), buckets - 1)
    split = frame.with_columns(bucket.cast(pl.Int64).alias(_BUCKET)).partition_by(
        _BUCKET, as_dict=True, include_key=False
    )
    template = frame.clear()
    stats = ReadStats(
        frame.height,
        0.0 if largest is None else float(largest),
        missing,
        beyond,
        unset.height,
        example,
        sample_x,
        sample_id,
    )
    return Read(stats, tuple(split.get((h,), template) for h in range(buckets)))


OVERSAMPLE = 8
"""Rows sorted per sampled pair: the sample is spread over the sorted pairs of every
``m``-th row (``m`` keeping about ``OVERSAMPLE`` times the sample), not of every row (the
sort of a whole file's pairs was a third of its read)."""


def _spread_sample(
    x: Float64Array, ids: IndexArray, sample: int
) -> tuple[Float64Array, IndexArray]:
    """About ``sample`` ``(x, row)`` pairs spread evenly over the sorted pairs of a
    systematic subsample (a pure function of the file: the split points only balance the
    shards, and no count depends on them)."""
    step = max(1, len(x) // max(OVERSAMPLE * sample, 1))
    x, ids = x[::step], ids[::step]
    order = np.lexsort((ids, x))
    spread = np.linspace(0, len(order) - 1, min(sample, len(order))).round().astype(np.int64)
    picked = order[np.unique(spread)]
    return x[picked], ids[picked]


def read_stats(read: Read) -> ReadStats:
    return read.stats


def read_pieces(read: Read) -> tuple[pl.DataFrame, ...]:
    """Cut: a read's pieces, one per link bucket (the exchange to the link tasks)."""
    return read.pieces


# --- 2. split points ----------------------------------------------------------------------


@dataclass(frozen=True)
class Splits:
    """Split points of ``(first coordinate, row)`` pairs; piece ``k`` holds the pairs with
    exactly ``k`` split points at or below them, in lexicographic order."""

    x: Float64Array
    row: IndexArray

    @classmethod
    def from_sample(cls, samples: Sequence[ReadStats], parts: int) -> Splits:
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
    # numpy sorts 16-bit keys by radix, seven times faster than 64-bit ones here.
    narrow = order_key.astype(np.int16) if parts <= np.iinfo(np.int16).max else order_key
    order = np.argsort(narrow, kind="stable")
    bounds = np.cumsum(np.bincount(order_key, minlength=parts))[:-1]
    return np.split(order, bounds)


# --- 3. link ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkSpec:
    keys: int  # key columns
    left_names: tuple[str, ...]
    right_names: tuple[str, ...]
    dim: int
    exponent: int
    tie_tol: float
    avatar_splits: Splits
    originals: int  # files: the first pieces are the originals'
    sampled: IndexArray | None = None  # the link test's records (linkage.sampled_rows)
    copies: bool = False  # count own copies (on the coordinates, and the fingerprints if read)


@dataclass(frozen=True)
class Queries:
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
    def concat(cls, parts: Sequence[Queries], dim: int) -> Queries:
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

    def take(self, rows: IndexArray) -> Queries:
        return Queries(
            self.queries[rows],
            self.thresholds[rows],
            self.original_id[rows],
            self.avatar_id[rows],
            self.avatar_shard[rows],
            self.below[rows] if len(self.below) else self.below,
        )


@dataclass(frozen=True)
class BucketEvidence:
    """A bucket's share of the verdict's evidence: its records among the link test's, with
    their coordinates and their own avatar's (as read), and its own copies."""

    ids: IndexArray
    originals: Float64Array
    avatars: Float64Array
    own_copies: int


@dataclass(frozen=True)
class Points:
    points: Float64Array
    ids: IndexArray


@dataclass(frozen=True)
class Linked:
    problems: KeyProblems
    queries: Queries | None = None  # None when the bucket's link failed
    evidence: BucketEvidence | None = None
    # Row i: the own avatar of query i, at the canonical scale (every avatar is linked in
    # exactly one bucket, so the buckets' avatars are all the avatars, each once).
    avatars: Float64Array | None = None


def link_bucket(spec: LinkSpec, *pieces: pl.DataFrame) -> Linked:
    """Task: link the originals and avatars of one key bucket, and their thresholds."""
    keys = [f"{_KEY}{i}" for i in range(spec.keys)]
    coords = [f"{_COORD}{k}" for k in range(spec.dim)]
    left = pl.concat(pieces[: spec.originals])
    right = pl.concat(pieces[spec.originals :])
    order, problems = link_by_key(left, right, keys, keys)
    if order is None:
        return Linked(replace(problems, names=(spec.left_names, spec.right_names)))
    # Fresh C-order arrays of this task's own: the evidence and the shard of each avatar are
    # taken from the values as read, then both are scaled in place (a copy less of each).
    raw = left.select(coords).to_numpy(order="c", writable=True)  # a copy, never a view
    raw_avatars = right.select(coords).to_numpy(order="c")[order]
    original_id = left.get_column(_ID).to_numpy()
    avatar_id = right.get_column(_ID).to_numpy()[order]
    avatar_shard = spec.avatar_splits.assign(raw_avatars[:, 0], avatar_id)
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
    evidence = BucketEvidence(original_id[sampled], raw[sampled], raw_avatars[sampled], copies)
    # The canonical scale of the whole data set, on both sides: the local floats exactly.
    queries = np.ldexp(raw, spec.exponent, out=raw)
    avatars = np.ldexp(raw_avatars, spec.exponent, out=raw_avatars)
    thresholds = engine.own_thresholds(queries, avatars, spec.tie_tol)
    below = np.empty(0)
    if spec.copies:  # a verdict: which hidden records have a rival strictly closer
        own = thresholds if spec.tie_tol == 0.0 else engine.own_thresholds(queries, avatars, 0.0)
        below = engine.strictly_below(own)
    linked = Queries(queries, thresholds, original_id, avatar_id, avatar_shard, below)
    return Linked(problems, linked, evidence, avatars)


def link_problems(linked: Linked) -> tuple[KeyProblems, BucketEvidence | None]:
    return linked.problems, linked.evidence


# --- 4. shards ----------------------------------------------------------------------------


def shard_avatars(linked: Linked, shards: int, dim: int) -> tuple[Points, ...]:
    """Cut: a link bucket's avatars, at the canonical scale, by the shard of each (the
    exchange to the shard builds). A bucket that failed to link gives none: the driver
    raises its key problems before any shard is counted."""
    queries = linked.queries
    if queries is None or linked.avatars is None:
        nothing = Points(np.empty((0, dim)), np.empty(0, dtype=np.int64))
        return (nothing,) * shards
    cut = _cut(queries.avatar_shard, shards)
    return tuple(Points(linked.avatars[rows], queries.avatar_id[rows]) for rows in cut)


@dataclass(frozen=True)
class Shard:
    """A shard's kd-tree, and the row of each of its avatars by global row."""

    tree: KdTree
    sorted_ids: IndexArray
    rows: IndexArray

    def rows_of(self, ids: IndexArray) -> IndexArray:
        """The row (in the tree's input order) of each avatar ``ids``; all must be here."""
        # Searched in ascending order (numpy bounds each search by the last one's result, and
        # the reads stay near): five times faster than in the queries' order, at random.
        ascending = np.argsort(ids)  # unique ids: no stable sort needed (four times faster)
        at = np.empty(len(ids), dtype=np.int64)
        at[ascending] = np.searchsorted(self.sorted_ids, ids[ascending])
        at = np.minimum(at, max(len(self.sorted_ids) - 1, 0))
        if len(ids) and not np.array_equal(self.sorted_ids[at], ids):
            msg = "an avatar was not found in the shard its split point gives"
            raise RuntimeError(msg)
        return self.rows[at]


def build_shard(dim: int, *pieces: Points) -> Shard:
    """Task: gather one shard's avatars from every file and build its kd-tree, here."""
    points = np.concatenate([p.points for p in pieces]).reshape(-1, dim)
    ids = np.concatenate([p.ids for p in pieces])
    order = np.argsort(ids, kind="stable")
    return Shard(KdTree.build(points, threads=1), ids[order], order)


def shard_box(shard: Shard) -> Box | None:
    """Task: the box of one shard's avatars, for the driver's pruning."""
    return Box.around(shard.tree.points)


# --- 5. count -----------------------------------------------------------------------------


def route_queries(linked: Linked, shards: Sequence[Box | None]) -> tuple[Queries, ...]:
    """Cut: a link bucket's queries for each shard, those whose ball may reach its box
    (`queries_in_reach`, exact) and those whose own avatar it holds (the exchange to the
    count tasks)."""
    queries = linked.queries
    if queries is None:  # the driver raised the bucket's key problems before this
        msg = "a link bucket that failed to link was asked for its queries"
        raise RuntimeError(msg)
    reached = queries_in_reach(queries.queries, queries.thresholds, shards, queries.avatar_shard)
    return tuple(queries.take(rows) for rows in reached)


@dataclass(frozen=True)
class ShardCounts:
    """A shard's partial counts: every query whose own avatar it holds (zeros included,
    so that each original is accounted for once), the other queries with a rival there,
    and the queries with a rival there strictly closer than their own avatar."""

    own_ids: IndexArray
    own_counts: CountArray
    rival_ids: IndexArray
    rival_counts: CountArray
    strictly: IndexArray


def count_shard(shard: Shard, s: int, threads: int | None, *pieces: Queries) -> ShardCounts:
    """Task: the partial counts of the queries routed to shard ``s``, from every bucket (a
    pure function of its inputs)."""
    block = Queries.concat(pieces, shard.tree.points.shape[1])
    mine = block.avatar_shard == s
    own = np.full(len(block.queries), -1, dtype=np.int64)
    own[mine] = shard.rows_of(block.avatar_id[mine])
    closer = np.zeros(len(block.queries), dtype=bool) if len(block.below) else None
    counts = (
        count_in_shard(
            block.queries, block.thresholds, own, shard.tree, threads, block.below, closer
        )
        if len(block.queries)
        else np.zeros(0, dtype=np.int64)
    )
    rivals = np.flatnonzero(~mine & (counts > 0))
    strictly = np.empty(0, dtype=np.int64) if closer is None else block.original_id[closer]
    return ShardCounts(
        block.original_id[mine],
        counts[mine],
        block.original_id[rivals],
        counts[rivals],
        strictly,
    )


# --- 6. write -----------------------------------------------------------------------------


def route_counts(partial: ShardCounts, offsets: IndexArray) -> tuple[ShardCounts, ...]:
    """Cut: a shard's partial counts by originals file, as rows in the file (the exchange
    to the write tasks)."""

    def by_file(ids: IndexArray) -> list[IndexArray]:
        return _cut(np.searchsorted(offsets, ids, side="right") - 1, len(offsets))

    own, rival, strictly = (
        by_file(partial.own_ids),
        by_file(partial.rival_ids),
        by_file(partial.strictly),
    )
    return tuple(
        ShardCounts(
            partial.own_ids[own[p]] - offsets[p],
            partial.own_counts[own[p]],
            partial.rival_ids[rival[p]] - offsets[p],
            partial.rival_counts[rival[p]],
            partial.strictly[strictly[p]] - offsets[p],
        )
        for p in range(len(offsets))
    )


def assemble(rows: int, *pieces: ShardCounts) -> CountArray:
    """Task: one file's counts, in its row order, from every shard: each row's count in
    its own avatar's shard exactly once, plus its counts in the others."""
    counts = np.full(rows, -1, dtype=np.int64)
    seen = 0
    for piece in pieces:
        counts[piece.own_ids] = piece.own_counts
        seen += len(piece.own_ids)
    if seen != rows or (counts < 0).any():
        msg = f"{rows} originals in the file, but {seen} counts came back"
        raise RuntimeError(msg)
    for piece in pieces:
        np.add.at(counts, piece.rival_ids, piece.rival_counts)
    return counts


def ties_in_file(rows: int, *pieces: ShardCounts) -> int:
    """Task: one file's records hidden by ties only (no rival strictly closer in any shard)."""
    counts = assemble(rows, *pieces)
    closer = np.zeros(rows, dtype=bool)
    for piece in pieces:
        closer[piece.strictly] = True
    return int(np.count_nonzero((counts > 0) & ~closer))


@dataclass(frozen=True)
class Written:
    rows: int
    not_hidden: int
    histogram: CountArray


def write_partition(
    path: Path, expected: int, counts: CountArray, staging: Path, index: int, bins: int
) -> Written:
    """Task: read one originals file whole, add its counts, write it as its part; return
    the histogram of its counts (``bins`` exact bins, then one for the rest)."""
    frame = pl.read_parquet(path, glob=False)
    if frame.height != expected or len(counts) != expected:
        msg = f"originals file {str(path)!r} changed while it was being counted"
        raise ComputeError(msg)
    write_part(with_counts(frame, counts), staging, index)
    return Written(expected, int(np.count_nonzero(counts == 0)), histogram(counts, bins))


def count_at_most(counts: CountArray, value: int) -> int:
    """Task: how many counts are at most ``value`` (the summary's bisection)."""
    return int(np.count_nonzero(counts <= value))


def raise_missing_features(files: list[Path], projection: Projection, role: str) -> None:
    """Task: raise the local error naming the features of one side with gaps."""
    frame = pl.scan_parquet(files, glob=False)
    ProjectedCoordinates.raise_missing_features(frame, projection, frame.collect_schema(), role)
