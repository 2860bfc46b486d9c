"""What both cluster paths share: how many records a task holds, the boxes of query blocks
and of shards, the exact pruning of (block, shard) pairs, and the count of one block in one
shard.

The in-memory scatter path (`arrays`) and the parquet pipeline (`dataset`) cut
the queries into blocks and the indexed points into shards; the count of a record is the sum
of its partial counts over the shards, each the engine's exact count
(`within_result`), so the result is the local one, bit for
bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from polars_hidden_rate import engine
from polars_hidden_rate._types import BoolArray, CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine.boxes import queries_reaching
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.tasks import WorkerSpec, exchange_tasks, task_memory

# --- task sizing --------------------------------------------------------------------------------

# The scatter path. A task holds a shard's kd-tree (the shard in tree order, node boxes and
# orderings: about 16 bytes per coordinate at d = 5) and its queries; 48 leaves room.
TASK_BYTES_PER_AVATAR_COORD = 48
# Small shards keep tasks short, so a lost worker costs little to recompute.
MAX_SHARD_ROWS = 1 << 19
# Blocks: small enough to balance the load, large enough to amortise a task.
MIN_BLOCK_ROWS = 128
MAX_BLOCK_ROWS = 1 << 16
# Tasks per worker thread to aim for, and a ceiling that keeps the graph sane.
TASKS_PER_THREAD = 4
MAX_TASKS = 100_000


@dataclass(frozen=True)
class Sizing:
    """How the queries are cut into blocks and the indexed points into shards (for counting,
    the originals are the queries and the avatars the points; for the nearest two, the
    reverse)."""

    block_rows: int
    shard_rows: int


def size_tasks(n_queries: int, n_points: int, dim: int, workers: Sequence[WorkerSpec]) -> Sizing:
    """Choose block and shard sizes for ``workers``.

    A shard is capped by the memory of one worker thread (a task's temporaries
    grow with its shard), by `MAX_SHARD_ROWS`, and by an even split over
    the workers, so that every worker stores some of the points. Blocks are cut
    so that there are about `TASKS_PER_THREAD` tasks per thread, within
    ``[MIN_BLOCK_ROWS, MAX_BLOCK_ROWS]`` and at most `MAX_TASKS` tasks.

    Examples
    --------
    >>> size_tasks(10_000, 10_000, 5, [WorkerSpec(nthreads=1, memory_limit=4 << 30)] * 2)
    Sizing(block_rows=2500, shard_rows=5000)
    """
    by_memory = int(task_memory(workers)) // (TASK_BYTES_PER_AVATAR_COORD * dim)
    threads = sum(max(worker.nthreads, 1) for worker in workers)
    shard_rows = max(1, min(by_memory, MAX_SHARD_ROWS, math.ceil(n_points / len(workers))))
    n_shards = math.ceil(n_points / shard_rows)
    wanted_blocks = math.ceil(TASKS_PER_THREAD * threads / n_shards)
    block_rows = min(max(math.ceil(n_queries / wanted_blocks), MIN_BLOCK_ROWS), MAX_BLOCK_ROWS)
    block_rows = max(block_rows, math.ceil(n_queries / max(MAX_TASKS // n_shards, 1)), 1)
    return Sizing(block_rows=block_rows, shard_rows=shard_rows)


# The parquet pipeline.
BUCKETS_PER_THREAD = 4
"""Link buckets per worker thread, at least. A bucket's pieces leave for the shards only
once the link queued behind it on its thread is done: with ``k`` buckets a thread, all but
the last of them move while links still run (one or two a thread left the whole count
exchange to wait for after the last link: 4.8 s against 2.6 with four, at 2e7)."""
SHARDS_PER_THREAD = 1
"""Avatar shards (a count task each) per worker thread, at least."""
SHARD_ROWS = 1 << 20
"""Avatars per shard, at most: two workers walking trees of 5 million avatars took 238
worker-seconds to count 2e7 records, against 168 with 1.25 million (a tree's share of the
cache), for a graph a little larger."""
TASK_BYTES_PER_RECORD_COORD = 60
"""Bytes a task holds per record and per coordinate (plus 3 for the key, row and ``T``)."""


@dataclass(frozen=True)
class StageTasks:
    """The tasks each stage of the parquet pipeline submits (`TaskPlan.tasks`)."""

    read: int  # a read and a scalar task per file of each side
    link: int  # the exchange of files to buckets, a link and a problems task per bucket
    count: int  # the exchange of buckets to shards, a build-and-count per shard
    write: int  # the exchange of shards to files, an assembly and a write per file

    @property
    def total(self) -> int:
        return self.read + self.link + self.count + self.write


@dataclass(frozen=True)
class TaskPlan:
    """How many link buckets and avatar shards a run cuts the records into."""

    buckets: int
    shards: int

    def tasks(self, originals: int, avatars: int, *, verdict: bool = False) -> StageTasks:
        """The tasks a run on ``originals`` and ``avatars`` files submits, stage by stage:
        linear in files, buckets and shards (each exchange is Dask's P2P shuffle,
        `exchange_tasks`), known before it runs. Not counted: the fit of a projection
        (its own tasks per file) and the summary's bisection (a task per file and step,
        only for a quartile above the histograms).

        Examples
        --------
        >>> TaskPlan(buckets=2048, shards=954).tasks(1000, 1000).total
        25059
        """
        files, h, s = originals + avatars, self.buckets, self.shards
        return StageTasks(
            read=2 * files,
            link=exchange_tasks(files, h) + 2 * h,
            count=exchange_tasks(h, s) + s,
            write=exchange_tasks(s, originals) + (3 if verdict else 2) * originals,
        )


def plan_tasks(
    n_originals: int, n_avatars: int, dim: int, workers: Sequence[WorkerSpec]
) -> TaskPlan:
    """Buckets and shards in proportion to the worker threads, not to the records.

    The stages exchange pieces between every pair of tasks (files to buckets, buckets to
    shards, shards back to files), each on Dask's P2P shuffle: a task
    per producer and per consumer, not per pair, so the graph is linear in files plus
    buckets plus shards (`TaskPlan.tasks`). There are more than `BUCKETS_PER_THREAD` and
    `SHARDS_PER_THREAD` per thread only where shards would pass `SHARD_ROWS`
    records, or a task's share of a thread's memory (`records_per_task`) would not
    hold them.

    Examples
    --------
    >>> ten_gib = [WorkerSpec(nthreads=1, memory_limit=10 << 30)] * 2
    >>> plan_tasks(20_000_000, 20_000_000, 5, ten_gib)
    TaskPlan(buckets=8, shards=20)
    """
    threads = sum(max(worker.nthreads, 1) for worker in workers)
    most = records_per_task(dim, workers)

    def parts(records: int, per_thread: int, rows: int) -> int:
        return max(1, min(max(per_thread * threads, math.ceil(records / rows)), records))

    return TaskPlan(
        buckets=parts(max(n_originals, n_avatars), BUCKETS_PER_THREAD, most),
        shards=parts(n_avatars, SHARDS_PER_THREAD, min(SHARD_ROWS, most)),
    )


def records_per_task(dim: int, workers: Sequence[WorkerSpec]) -> int:
    """The most records of one side a link, block or shard task holds: its share
    (`task_memory`) of one thread's memory
    at `TASK_BYTES_PER_RECORD_COORD` bytes per coordinate."""
    return max(1, int(task_memory(workers) // (TASK_BYTES_PER_RECORD_COORD * (dim + 3))))


# --- boxes and pruning ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    """The bounding box of a query block or a shard; a block's ``reach`` is its largest
    threshold (a shard's is 0: only the blocks' thresholds reach)."""

    low: Float64Array
    high: Float64Array
    reach: float = 0.0

    @classmethod
    def around(cls, points: Float64Array, thresholds: Float64Array | None = None) -> Box | None:
        """The box of ``points`` (with the largest of ``thresholds``); None when empty."""
        if len(points) == 0:
            return None
        reach = 0.0 if thresholds is None else float(thresholds.max())
        return cls(points.min(axis=0), points.max(axis=0), reach)


def pairs_within_reach(
    block_low: Float64Array,
    block_high: Float64Array,
    largest: Float64Array,
    shard_low: Float64Array,
    shard_high: Float64Array,
) -> list[tuple[int, int]]:
    """The (block, shard) pairs whose boxes may hold a pair within a block threshold.

    Block ``b`` spans ``[block_low[b], block_high[b]]`` with thresholds up to
    ``largest[b]``; shard ``s`` spans ``[shard_low[s], shard_high[s]]``. ``gap`` is
    the float64 per-coordinate gap between the boxes and ``reach`` the sum of
    ``gap * gap`` in column order, like `engine.squared_distances`. Rounding
    is monotone, so every pair's computed ``d2`` is at least ``reach``;
    ``reach > max T`` proves that no pair of the two counts. Only the boxes are
    needed, so a driver can prune without holding the data.

    Examples
    --------
    >>> low, high = np.array([[0.0], [10.0]]), np.array([[1.0], [11.0]])
    >>> pairs_within_reach(low, high, np.array([4.0, 1.0]), low, high)
    [(0, 0), (1, 1)]
    """
    within = reach_mask(block_low, block_high, largest, shard_low, shard_high)
    return [(int(b), int(s)) for b, s in zip(*np.nonzero(within), strict=True)]


def reach_mask(
    block_low: Float64Array,
    block_high: Float64Array,
    largest: Float64Array,
    shard_low: Float64Array,
    shard_high: Float64Array,
) -> BoolArray:
    """`pairs_within_reach` as a ``blocks x shards`` mask: False where no pair can count."""
    reach = np.zeros((len(block_low), len(shard_low)))
    for k in range(block_low.shape[1]):
        gap = np.maximum(
            np.maximum(
                shard_low[None, :, k] - block_high[:, None, k],
                block_low[:, None, k] - shard_high[None, :, k],
            ),
            0.0,
        )
        reach += gap * gap
    within: BoolArray = ~(reach > largest[:, None])
    return within


def queries_in_reach(
    queries: Float64Array, thresholds: Float64Array, shards: Sequence[Box | None]
) -> list[IndexArray]:
    """For each shard, the rows (ascending) of the queries whose ball may reach its box: the
    test of `pairs_within_reach` with each query as a box of its own, so a query left out has
    no avatar of the shard within its threshold, exactly (`engine.boxes.queries_reaching`:
    for each query, only the shards near its first coordinate are tested).

    Examples
    --------
    >>> boxes = [Box(np.array([0.0]), np.array([1.0])), None, Box(np.array([5.0]), np.array([6.0]))]
    >>> queries, thresholds = np.array([[2.0], [4.5]]), np.array([1.0, 0.25])
    >>> [rows.tolist() for rows in queries_in_reach(queries, thresholds, boxes)]
    [[0], [], [1]]
    """
    found = [np.empty(0, dtype=np.int64) for _ in shards]
    kept = [s for s, box in enumerate(shards) if box is not None]
    if not kept or not len(queries):
        return found
    reached = queries_reaching(
        queries,
        thresholds,
        np.array([shards[s].low for s in kept]),  # type: ignore[union-attr]
        np.array([shards[s].high for s in kept]),  # type: ignore[union-attr]
    )
    for s, rows in zip(kept, reached, strict=True):
        found[s] = rows
    return found


def pairs_in_reach(
    blocks: Sequence[Box | None], shards: Sequence[Box | None]
) -> list[tuple[int, int]]:
    """The (block, shard) pairs that may hold a pair within a block threshold, among the
    blocks and shards that hold records (`pairs_within_reach` on their boxes)."""
    kept_blocks = [(b, box) for b, box in enumerate(blocks) if box is not None]
    kept_shards = [(s, box) for s, box in enumerate(shards) if box is not None]
    if not kept_blocks or not kept_shards:
        return []
    found = pairs_within_reach(
        np.array([box.low for _, box in kept_blocks]),
        np.array([box.high for _, box in kept_blocks]),
        np.array([box.reach for _, box in kept_blocks]),
        np.array([box.low for _, box in kept_shards]),
        np.array([box.high for _, box in kept_shards]),
    )
    return [(kept_blocks[b][0], kept_shards[s][0]) for b, s in found]


# --- the count of a block in a shard --------------------------------------------------------------


def count_in_shard(
    queries: Float64Array,
    thresholds: Float64Array,
    own: npt.ArrayLike,
    shard: KdTree,
    threads: int | None,
    closer_than: Float64Array | None = None,
    closer: BoolArray | None = None,
) -> CountArray:
    """A block's partial counts over one shard's tree (``own``: each query's avatar row in
    the shard, else -1), a pure function of its inputs. ``threads=None`` counts on one
    thread: Dask already runs a task per worker thread, and more would oversubscribe. With
    ``closer_than`` and ``closer``, the walk also flags the queries with a rival in the
    shard within ``closer_than`` (`engine.within_result`)."""
    result = engine.within_result(
        queries,
        thresholds,
        own,
        shard,
        threads=threads or 1,
        closer_than=closer_than if closer is not None else None,
    )
    if closer is not None and result.closer is not None:
        closer[:] = result.closer
    return result.counts
