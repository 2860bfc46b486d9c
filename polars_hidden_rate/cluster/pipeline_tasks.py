"""The worker tasks of the cluster's parquet pipeline, and the values they pass each other.

Each function here is a pure task of one stage of `polars_hidden_rate.cluster.pipeline`
(read, link, shards and blocks, count, write; the stages are described there and in
``docs/scale.md``): a function of files and of other tasks' results, so that Dask may
recompute any of them from the files after a worker is lost, and the counts cannot change.
The driver submits them; nothing here submits a task or holds a client.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl

from polars_hidden_rate import engine
from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.cluster.shards import Box, count_in_shard, queries_in_reach
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
    CoordinateProblems,
    Example,
    KeyProblems,
    float64_rows,
    link_by_key,
)
from polars_hidden_rate.measures.summary import histogram
from polars_hidden_rate.outputs import write_counted_part
from polars_hidden_rate.projection import ProjectedCoordinates, Projection

_KEY = f"{RESERVED_PREFIX}_key"
_COORD = f"{RESERVED_PREFIX}_coord"
_ID = f"{RESERVED_PREFIX}_id"
_FINGERPRINT = f"{RESERVED_PREFIX}_fingerprint"


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
    # (link.sets.copy_fingerprints): own copies are counted on coordinates and hash.
    fingerprint: pl.Expr | None = None


@dataclass(frozen=True)
class ReadStats:
    """The scalars a read task returns to the driver."""

    rows: int
    largest: float
    problems: CoordinateProblems  # what the driver sums and raises as a local read does
    null_keys: int
    null_key_example: Example | None
    sample_x: Float64Array
    sample_id: IndexArray


@dataclass(frozen=True)
class ReadPiece:
    """A read's records of one link bucket, in the file's order: the keys (and the copy
    fingerprints) as a frame, the coordinates as one C-order float64 block, the global rows.
    Numpy arrays, not a frame, for the coordinates and rows: P2P pickles every piece, and a
    frame pickles at twice the CPU of the same bytes as arrays (0.43 s against 0.22 for 2.5
    million rows of 7 columns, measured)."""

    keys: pl.DataFrame
    coordinates: Float64Array
    rows: IndexArray


@dataclass(frozen=True)
class Read:
    stats: ReadStats
    pieces: tuple[ReadPiece, ...]  # by link bucket


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
    problems = CoordinateProblems.of(frame, side.names, side.role)
    unset = frame.filter(pl.any_horizontal(pl.col(keys).is_null())) if side.keys else frame[:0]
    example = unset.select(keys).row(0) if unset.height else None
    keyed = [*keys, *(() if side.fingerprint is None else (_FINGERPRINT,))]
    if problems.missing or problems.inexact:  # the driver raises before any link task reads
        empty = np.empty(0)
        stats = ReadStats(
            frame.height, 0.0, problems, unset.height, example, empty, empty.astype(np.int64)
        )
        nothing = ReadPiece(
            frame.select(keyed).clear(), np.empty((0, len(coords))), empty.astype(np.int64)
        )
        return Read(stats, (nothing,) * buckets)
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
    rows, starts = _grouped(frame.select(bucket.cast(pl.Int64)).to_series().to_numpy(), buckets)
    grouped_keys = frame.select(keyed)[rows]
    # Gathered column by column into one C-order block (no row-major copy in between).
    grouped_coordinates = float64_rows([frame.get_column(name) for name in coords], rows)
    grouped_rows = frame.get_column(_ID).to_numpy()[rows]
    pieces = tuple(
        ReadPiece(
            grouped_keys.slice(start, stop - start),
            grouped_coordinates[start:stop],
            grouped_rows[start:stop],
        )
        for start, stop in itertools.pairwise(starts)
    )
    stats = ReadStats(
        frame.height,
        0.0 if largest is None else float(largest),
        problems,
        unset.height,
        example,
        sample_x,
        sample_id,
    )
    return Read(stats, pieces)


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


def read_pieces(read: Read) -> tuple[ReadPiece, ...]:
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
        right = np.searchsorted(self.x, x, side="right").astype(np.int64)
        piece = right.copy()
        if not len(self.x):
            return piece
        # x equals a split point's (the one before `right`): compare the rows. One search
        # for all, a second only for these (half the time of two full searches).
        ties = np.flatnonzero((right > 0) & (self.x[np.maximum(right - 1, 0)] == x))
        piece[ties] = np.searchsorted(self.x, x[ties], side="left")
        if len(ties):
            ties = ties[np.argsort(piece[ties], kind="stable")]
            starts, firsts = np.unique(piece[ties], return_index=True)
            for start, group in zip(starts, np.split(ties, firsts[1:]), strict=True):
                stop = right[group[0]]
                piece[group] = start + np.searchsorted(self.row[start:stop], row[group], "right")
        return piece

    def slabs(self, parts: int, dim: int, exponent: int = 0) -> list[Box | None]:
        """The box, at the scale ``2^exponent``, of each piece ``0 .. parts - 1`` that
        `assign` may give: the first coordinate between its split points (closed: a pair
        tied with a split point's value may fall on either side of it), the others
        unbounded; None for a piece no pair falls in. Scaling by a power of two keeps the
        order of any two values, so a ball that misses a piece's slab has no point of the
        piece, scaled as the split points are, within it, exactly (the box test of
        `queries_in_reach`).

        Examples
        --------
        >>> splits = Splits(np.array([1.0, 2.0]), np.array([0, 0]))
        >>> [box.low.tolist() + box.high.tolist() for box in splits.slabs(3, 1, exponent=1)]
        [[-inf, 2.0], [2.0, 4.0], [4.0, inf]]
        """
        low = np.ldexp(np.concatenate([[-np.inf], self.x]), exponent)
        high = np.ldexp(np.concatenate([self.x, [np.inf]]), exponent)
        slabs: list[Box | None] = [None] * parts
        for k in range(min(parts, len(low))):
            lower, upper = np.full(dim, -np.inf), np.full(dim, np.inf)
            lower[0], upper[0] = low[k], high[k]
            slabs[k] = Box(lower, upper)
        return slabs


def _grouped(order_key: IndexArray, parts: int) -> tuple[IndexArray, IndexArray]:
    """The rows grouped by piece ``0 .. parts - 1``, each group in its original order, and
    where each group starts (``parts + 1`` bounds): piece ``k`` is
    ``rows[starts[k]:starts[k + 1]]``."""
    # numpy sorts 16-bit keys by radix, seven times faster than 64-bit ones here.
    narrow = order_key.astype(np.int16) if parts <= np.iinfo(np.int16).max else order_key
    rows = np.argsort(narrow, kind="stable")
    starts = np.zeros(parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(order_key, minlength=parts), out=starts[1:])
    return rows, starts


def _cut(order_key: IndexArray, parts: int) -> list[IndexArray]:
    """The rows of each piece ``0 .. parts - 1``, each in its original order."""
    rows, starts = _grouped(order_key, parts)
    return np.split(rows, starts[1:-1])


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
    shards: int  # the count's shards (`avatar_splits` gives pieces 0 .. shards - 1)
    sampled: IndexArray | None = None  # the link test's records (linkage.sampled_rows)
    copies: bool = False  # count own copies (on the coordinates, and the fingerprints if read)


@dataclass(frozen=True)
class Queries:
    """Originals with their thresholds, at the canonical scale."""

    queries: Float64Array
    thresholds: Float64Array
    original_id: IndexArray
    # Below each own d2, for the rivals strictly closer (engine.strictly_below); empty when
    # no verdict asks which records are hidden by ties only.
    below: Float64Array = field(default_factory=lambda: np.empty(0))

    @classmethod
    def concat(cls, parts: Sequence[Queries], dim: int) -> Queries:
        return cls(
            np.concatenate([p.queries for p in parts]).reshape(-1, dim),
            np.concatenate([p.thresholds for p in parts]),
            np.concatenate([p.original_id for p in parts]),
            np.concatenate([p.below for p in parts]),
        )

    def take(self, rows: IndexArray | slice) -> Queries:
        """The queries ``rows`` (a slice gives views: no copy)."""
        below = self.below[rows] if len(self.below) else self.below
        queries = self.queries[rows] if isinstance(rows, slice) else np.take(self.queries, rows, 0)
        return Queries(queries, self.thresholds[rows], self.original_id[rows], below)


@dataclass(frozen=True)
class BucketEvidence:
    """A bucket's share of the verdict's evidence: its records among the link test's, with
    their coordinates and their own avatar's (as read), and its own copies."""

    ids: IndexArray
    originals: Float64Array
    avatars: Float64Array
    own_copies: int


@dataclass(frozen=True)
class Linked:
    problems: KeyProblems
    queries: Queries | None = None  # None when the bucket's link failed
    evidence: BucketEvidence | None = None  # with a verdict only
    # Row i: the own avatar of query i, at the canonical scale (every avatar is linked in
    # exactly one bucket, so the buckets' avatars are all the avatars, each once).
    avatars: Float64Array | None = None
    # The rows are grouped by their avatar's shard: shard s holds rows starts[s]:starts[s + 1].
    starts: IndexArray | None = None


def link_bucket(spec: LinkSpec, *pieces: ReadPiece) -> Linked:
    """Task: link the originals and avatars of one key bucket, and their thresholds; the
    linked pairs grouped by the shard of their avatar (each shard's then a slice)."""
    keys = [f"{_KEY}{i}" for i in range(spec.keys)]
    originals, avatars_read = pieces[: spec.originals], pieces[spec.originals :]
    left = pl.concat([piece.keys for piece in originals])
    right = pl.concat([piece.keys for piece in avatars_read])
    order, problems = link_by_key(left, right, keys, keys)
    if order is None:
        return Linked(replace(problems, names=(spec.left_names, spec.right_names)))
    left_coordinates, right_coordinates = (
        np.concatenate([piece.coordinates for piece in side]).reshape(-1, spec.dim)
        for side in (originals, avatars_read)
    )
    # Each avatar's shard in its own row order (sequential reads), then in the originals'.
    shard = spec.avatar_splits.assign(
        np.ascontiguousarray(right_coordinates[:, 0]),
        np.concatenate([piece.rows for piece in avatars_read]),
    )
    rows, starts = _grouped(shard[order], spec.shards)
    # Fresh C-order arrays of this task's own: the evidence is taken from the values as
    # read, then both are scaled in place (a copy less of each). `np.take` copies whole
    # rows: three times faster than fancy indexing on a 2-D array.
    raw = np.take(left_coordinates, rows, axis=0)
    raw_avatars = np.take(right_coordinates, order[rows], axis=0)
    del left_coordinates, right_coordinates
    original_id = np.concatenate([piece.rows for piece in originals])[rows]
    evidence = None
    if spec.copies:  # a verdict: the link test's records and the own copies
        same = (raw == raw_avatars).all(axis=1)
        if _FINGERPRINT in left.columns:
            fingerprints = right.get_column(_FINGERPRINT).to_numpy()[order[rows]]
            same &= left.get_column(_FINGERPRINT).to_numpy()[rows] == fingerprints
        sampled = (
            np.ones(len(original_id), dtype=bool)
            if spec.sampled is None
            else np.isin(original_id, spec.sampled)
        )
        evidence = BucketEvidence(
            original_id[sampled], raw[sampled], raw_avatars[sampled], int(np.count_nonzero(same))
        )
    # The canonical scale of the whole data set, on both sides: the local floats exactly.
    queries = np.ldexp(raw, spec.exponent, out=raw)
    avatars = np.ldexp(raw_avatars, spec.exponent, out=raw_avatars)
    thresholds = engine.own_thresholds(queries, avatars, spec.tie_tol)
    below = np.empty(0)
    if spec.copies:  # a verdict: which hidden records have a rival strictly closer
        own = thresholds if spec.tie_tol == 0.0 else engine.own_thresholds(queries, avatars, 0.0)
        below = engine.strictly_below(own)
    linked = Queries(queries, thresholds, original_id, below)
    return Linked(problems, linked, evidence, avatars, starts)


def link_problems(linked: Linked) -> tuple[KeyProblems, BucketEvidence | None]:
    return linked.problems, linked.evidence


# --- 4. count -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardInput:
    """A link bucket's share of one shard's count: the shard's avatars linked in the bucket,
    the queries that own them (query ``i`` owns ``avatars[i]``), and the queries from other
    shards whose ball may reach the shard's slab."""

    avatars: Float64Array
    owners: Queries
    others: Queries


def route_to_shards(
    linked: Linked, slabs: Sequence[Box | None], dim: int
) -> tuple[ShardInput, ...]:
    """Cut: a link bucket's avatars by their shard, with the queries that own them (slices
    of the bucket's arrays, no copy) and those whose ball may reach the shard's slab
    (`Splits.slabs`; `queries_in_reach`, exact): the exchange to the count tasks, which
    build each shard's tree where they run. A bucket that failed to link sends nothing:
    the driver raises its key problems before any count is used."""
    queries, avatars, starts = linked.queries, linked.avatars, linked.starts
    if queries is None or avatars is None or starts is None:
        nothing = Queries(np.empty((0, dim)), np.empty(0), np.empty(0, dtype=np.int64))
        return (ShardInput(np.empty((0, dim)), nothing, nothing),) * len(slabs)
    reached = queries_in_reach(queries.queries, queries.thresholds, slabs)
    inputs = []
    for s, near in enumerate(reached):
        own = slice(starts[s], starts[s + 1])
        others = near[(near < own.start) | (near >= own.stop)]
        inputs.append(ShardInput(avatars[own], queries.take(own), queries.take(others)))
    return tuple(inputs)


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


def count_shard(dim: int, threads: int | None, *pieces: ShardInput) -> ShardCounts:
    """Task: build one shard's kd-tree from its avatars of every bucket, here, and count the
    queries routed to it (a pure function of its inputs)."""
    avatars = np.concatenate([p.avatars for p in pieces]).reshape(-1, dim)
    owned = len(avatars)
    if owned == 0:  # no avatar here: nothing to count (the queries sent count 0 here)
        nothing = np.empty(0, dtype=np.int64)
        return ShardCounts(nothing, nothing, nothing, nothing, nothing)
    # The owners first, in the order of their avatars: query i < owned owns avatar i.
    block = Queries.concat([p.owners for p in pieces] + [p.others for p in pieces], dim)
    own = np.full(len(block.queries), -1, dtype=np.int64)
    own[:owned] = np.arange(owned)
    tree = KdTree.build(avatars, threads=threads or 1, overwrite_input=True)
    closer = np.zeros(len(block.queries), dtype=bool) if len(block.below) else None
    counts = count_in_shard(
        block.queries, block.thresholds, own, tree, threads, block.below, closer
    )
    rivals = owned + np.flatnonzero(counts[owned:] > 0)
    ids = block.original_id
    strictly = np.empty(0, dtype=np.int64) if closer is None else ids[closer]
    return ShardCounts(ids[:owned], counts[:owned], ids[rivals], counts[rivals], strictly)


# --- 5. write -----------------------------------------------------------------------------


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
    path: Path,
    expected: int,
    counts: CountArray,
    staging: Path,
    index: int,
    bins: int,
    columns: tuple[str, ...],
    metadata: dict[str, str] | None,
) -> Written:
    """Task: read one originals file whole, add its counts, write it as its part
    (`write_counted_part`, as the local path does); return the histogram of its counts
    (``bins`` exact bins, then one for the rest)."""
    write_counted_part(path, expected, counts, staging, index, columns=columns, metadata=metadata)
    return Written(expected, int(np.count_nonzero(counts == 0)), histogram(counts, bins))


def count_at_most(counts: CountArray, value: int) -> int:
    """Task: how many counts are at most ``value`` (the summary's bisection)."""
    return int(np.count_nonzero(counts <= value))


def raise_missing_features(files: list[Path], projection: Projection, role: str) -> None:
    """Task: raise the local error naming the features of one side with gaps."""
    frame = pl.scan_parquet(files, glob=False)
    ProjectedCoordinates.raise_missing_features(frame, projection, frame.collect_schema(), role)
