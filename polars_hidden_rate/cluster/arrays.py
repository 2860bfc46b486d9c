"""Exact counting, and each avatar's nearest two originals, sharded over a Dask cluster.

The count decomposes exactly over the avatars: ``c_i`` is the sum, over any
partition of the avatars into shards, of the rivals of ``x_i`` in each shard.
The driver brings the data to the engine's canonical scale and computes every
threshold ``T_i`` from the link alone (`engine.linked_arrays`), splits the
originals into query blocks and the avatars into shards, and submits one pure
task per (block, shard) pair; each task is the single-machine building block
`engine.within_result`. The driver sums the partial counts, so the result
is the local result, bit for bit.

Both sides are sorted by their first coordinate before they are cut, so a block
and a shard cover narrow slabs of that coordinate; a pair whose bounding boxes
are provably farther apart than every threshold in the block is never submitted.

Blocks and shards are scattered once. When a worker dies, Dask recomputes lost
task results from their inputs, but scattered inputs held only by that worker
are gone: the driver scatters those again from its own copy and resubmits the
cancelled tasks. Tasks are pure, and each pair's partial count is added once,
so a re-run never changes the result.

The nearest two originals of each avatar (DCR, NNDR) decompose the same way over
the originals: the two smallest ``d2`` over all of them are the two smallest of
the per-shard two smallest. `nearest_two_distributed` cuts the originals
into shards and the avatars into blocks, runs the single-machine walk
(`nearest.squared_nearest_two`) per pair, and merges on the driver; both
kinds of run share the scattering, the tasks and the recovery (``_ScatteredPairs``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import CancelledError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from polars_hidden_rate import engine
from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.cluster.shards import (
    Box,
    Sizing,
    count_in_shard,
    pairs_in_reach,
    size_tasks,
)
from polars_hidden_rate.engine import nearest
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import NearestTwo
from polars_hidden_rate.tasks import DaskTasks, worker_specs

if TYPE_CHECKING:
    from distributed import Client, Future

# The logger's name stays the one docs/scale.md gives for filtering its warnings.
logger = logging.getLogger(__name__)
ResultT = TypeVar("ResultT")

# How often one (block, shard) task may be resubmitted after losing its inputs.
MAX_RESUBMITS = 3


def count_cloaking_distributed(
    originals: Float64Array,
    avatars: Float64Array,
    *,
    client: Client,
    tie_tol: float = 1e-9,
    threads: int | None = None,
    sizing: Sizing | None = None,
) -> CountArray:
    """Exact local cloaking, counted on a Dask cluster; equal to
    [`engine.count_cloaking`][polars_hidden_rate.count_cloaking].

    Parameters
    ----------
    originals, avatars
        Float64 arrays of shape ``(n, d)``; row ``i`` of ``avatars`` is the
        avatar of row ``i`` of ``originals``.
    client
        A ``dask.distributed.Client``.
    tie_tol
        Relative tie tolerance, as in [`engine.count_cloaking`][polars_hidden_rate.count_cloaking].
    threads
        Counting threads inside each task. None runs one per task: Dask already
        runs one task per worker thread, and more would oversubscribe the cores.
    sizing
        Block and shard sizes; default `size_tasks` for the client's workers.

    Returns
    -------
    numpy.ndarray
        The counts ``c_i`` as int64, one per original.
    """
    originals, avatars, thresholds = engine.linked_arrays(originals, avatars, tie_tol)
    n, dim = originals.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if sizing is None:
        sizing = size_tasks(n, len(avatars), dim, worker_specs(client))

    # Sort both sides by the first coordinate; `avatar_position[i]` is where avatar i went.
    query_order = np.argsort(originals[:, 0], kind="stable")
    avatar_order = np.argsort(avatars[:, 0], kind="stable")
    avatar_position = np.empty(n, dtype=np.int64)
    avatar_position[avatar_order] = np.arange(n, dtype=np.int64)
    block_starts = range(0, n, sizing.block_rows)
    shard_starts = range(0, len(avatars), sizing.shard_rows)
    blocks = [
        _QueryBlock(
            queries=originals[rows],
            thresholds=thresholds[rows],
            avatar_position=avatar_position[rows],
        )
        for rows in (query_order[start : start + sizing.block_rows] for start in block_starts)
    ]
    # Each shard's kd-tree is built once, here, and scattered in its place.
    shards = [
        KdTree.build(
            avatars[avatar_order[start : start + sizing.shard_rows]], threads=engine.usable_cores()
        )
        for start in shard_starts
    ]
    pairs = pairs_in_reach(
        [Box.around(block.queries, block.thresholds) for block in blocks],
        [Box.around(shard.points) for shard in shards],
    )

    starts = list(shard_starts)
    run = _ScatteredPairs(
        client,
        _COUNT_KEYS,
        count_block_in_shard,
        blocks,
        shards,
        lambda s: (starts[s], threads),
    )
    sorted_counts = np.zeros(n, dtype=np.int64)

    def add(b: int, s: int, partial: CountArray) -> None:
        start = b * sizing.block_rows
        sorted_counts[start : start + len(partial)] += partial

    run.complete(pairs, add)
    counts = np.empty(n, dtype=np.int64)
    counts[query_order] = sorted_counts
    return counts


@dataclass(frozen=True)
class _QueryBlock:
    """Originals sent together, with their thresholds and their avatars' sorted positions."""

    queries: Float64Array
    thresholds: Float64Array
    avatar_position: IndexArray


def count_block_in_shard(
    block: _QueryBlock, shard: KdTree, shard_start: int, threads: int | None
) -> CountArray:
    """One task: the block's partial counts over one shard's tree (a pure function of its
    inputs)."""
    own = block.avatar_position - shard_start
    own[(own < 0) | (own >= len(shard.points))] = -1
    return count_in_shard(block.queries, block.thresholds, own, shard, threads)


def nearest_two_distributed(
    originals: Float64Array,
    avatars: Float64Array,
    *,
    client: Client,
    threads: int | None = None,
    sizing: Sizing | None = None,
) -> NearestTwo:
    """Each avatar's nearest two originals, on a Dask cluster; bit-identical to
    [`nearest.nearest_two`][polars_hidden_rate.engine.nearest.nearest_two].

    The two smallest ``d2`` over all originals are the two smallest of the per-shard
    two smallest, so the originals are cut into shards (a kd-tree each), the avatars
    into blocks, and the driver merges each pair's result
    (`nearest.merge_nearest_two`).

    Parameters
    ----------
    originals
        Float64 array of shape ``(n, d)``, ``n >= 1``.
    avatars
        Float64 array of shape ``(m, d)``: the queries, in any number.
    client
        A ``dask.distributed.Client``.
    threads
        Search threads inside each task; None runs one per task, as in
        `count_cloaking_distributed`.
    sizing
        Avatar block and original shard sizes; default `size_tasks` for the
        client's workers.

    Returns
    -------
    NearestTwo
        Equal, array for array, to ``nearest_two(originals, avatars)``.
    """
    # Scaled once, here, as the local path does: the tasks see the very same floats.
    points, queries, exponent = nearest.scaled_pair(originals, avatars)
    m, dim = queries.shape
    if m == 0:
        return NearestTwo.from_squared(np.empty((0, 2)), exponent)
    if sizing is None:
        sizing = size_tasks(m, len(points), dim, worker_specs(client))

    # Blocks and shards are slabs of the first coordinate, so a block meets few tree nodes.
    query_order = np.argsort(queries[:, 0], kind="stable")
    point_order = np.argsort(points[:, 0], kind="stable")
    blocks = [query_order[i : i + sizing.block_rows] for i in range(0, m, sizing.block_rows)]
    shards = [
        KdTree.build(points[point_order[i : i + sizing.shard_rows]], threads=engine.usable_cores())
        for i in range(0, len(points), sizing.shard_rows)
    ]
    run = _ScatteredPairs(
        client,
        _NEAREST_KEYS,
        nearest_two_in_shard,
        [queries[rows] for rows in blocks],
        shards,
        lambda s: (threads,),
    )
    best = np.full((m, 2), np.inf)

    def merge(b: int, s: int, partial: Float64Array) -> None:
        rows = blocks[b]
        merged = best[rows]
        nearest.merge_nearest_two(merged, partial)
        best[rows] = merged

    run.complete(((b, s) for b in range(len(blocks)) for s in range(len(shards))), merge)
    return NearestTwo.from_squared(best, exponent)


def nearest_two_in_shard(queries: Float64Array, shard: KdTree, threads: int | None) -> Float64Array:
    """One task: the block's two smallest ``d2`` over one shard's tree (a pure function of
    its inputs)."""
    return nearest.squared_nearest_two(shard, queries, threads=threads or 1)


@dataclass(frozen=True)
class _Keys:
    """The key prefixes of one kind of run: its tasks, its scattered blocks and shards."""

    task: str
    block: str
    shard: str


_COUNT_KEYS = _Keys("count-within", "query-block", "avatar-shard")
_NEAREST_KEYS = _Keys("nearest-two", "avatar-block", "original-shard")


class _ScatteredPairs(Generic[ResultT]):
    """The scattered inputs of one run and its pure (block, shard) tasks, with their recovery.

    ``task(block, shard, *extra(s))`` is submitted for each pair; its result goes to the
    driver's ``combine`` exactly once, however often the pair was resubmitted.
    """

    def __init__(
        self,
        client: Client,
        keys: _Keys,
        task: Callable[..., ResultT],
        blocks: Sequence[Any],
        shards: Sequence[Any],
        extra: Callable[[int], tuple[Any, ...]],
    ) -> None:
        self.client = client
        self.tasks = DaskTasks(client)
        self.keys = keys
        self.task = task
        self.blocks = blocks
        self.shards = shards
        self.extra = extra
        self.block_futures = self._scatter(keys.block, dict(enumerate(blocks)), 0)
        self.shard_futures = self._scatter(keys.shard, dict(enumerate(shards)), 0)
        self.block_generation = [0] * len(blocks)
        self.shard_generation = [0] * len(shards)
        self.attempts: dict[tuple[int, int], int] = {}

    def complete(
        self, pairs: Iterable[tuple[int, int]], combine: Callable[[int, int, ResultT], None]
    ) -> None:
        """Run the task of every pair and pass each result to ``combine(b, s, result)`` as it
        arrives; pairs whose inputs were lost with a worker are scattered again and resubmitted.
        The scattered inputs are released at the end, also on an error."""
        from distributed import as_completed

        pending = {self.submit(b, s): (b, s) for b, s in pairs}
        try:
            finished = as_completed(list(pending))
            for future in finished:
                b, s = pending.pop(future)
                try:
                    result = future.result()
                except CancelledError:
                    # Its inputs were lost with a worker: scatter them again and resubmit.
                    if self.attempts[b, s] > MAX_RESUBMITS:
                        msg = f"block {b} x shard {s} was lost {self.attempts[b, s]} times"
                        raise RuntimeError(f"{msg}; giving up") from None
                    self.recover(b, s)
                    retry = self.submit(b, s)
                    pending[retry] = (b, s)
                    finished.add(retry)
                    continue
                future.release()
                combine(b, s, result)
        finally:
            if pending:
                self.client.cancel(list(pending))
            self.release()

    def submit(self, b: int, s: int) -> Future[ResultT]:
        """Submit block ``b`` x shard ``s``; its key names the run, the pair and the attempt."""
        attempt = self.attempts.get((b, s), 0)
        self.attempts[b, s] = attempt + 1
        return self.tasks.run(  # type: ignore[no-any-return]
            f"{self.keys.task}-{b}-{s}-{attempt}",
            self.task,
            self.block_futures[b],
            self.shard_futures[s],
            *self.extra(s),
            pure=True,
        )

    def recover(self, b: int, s: int) -> None:
        """Scatter again block ``b`` and shard ``s`` if no worker holds them any more."""
        if self._lost(self.block_futures[b]):
            logger.warning("%s %d was lost with a worker; scattering it again", self.keys.block, b)
            self.block_generation[b] += 1
            self.block_futures[b] = self._scatter(
                self.keys.block, {b: self.blocks[b]}, self.block_generation[b]
            )[b]
        if self._lost(self.shard_futures[s]):
            logger.warning("%s %d was lost with a worker; scattering it again", self.keys.shard, s)
            self.shard_generation[s] += 1
            self.shard_futures[s] = self._scatter(
                self.keys.shard, {s: self.shards[s]}, self.shard_generation[s]
            )[s]

    def release(self) -> None:
        """Drop the scattered inputs from the cluster."""
        self.client.cancel([*self.block_futures.values(), *self.shard_futures.values()])

    def _lost(self, future: Future[Any]) -> bool:
        if future.status != "finished":
            return True
        holders = self.client.who_has([future]).get(future.key, ())
        return not holders

    def _scatter(self, name: str, data: dict[int, Any], generation: int) -> dict[int, Future[Any]]:
        futures = self.tasks.scatter({f"{name}-{i}-{generation}": v for i, v in data.items()})
        return {i: futures[f"{name}-{i}-{generation}"] for i in data}
