"""Exact counting sharded over a Dask cluster.

The count decomposes exactly over the avatars: ``c_i`` is the sum, over any
partition of the avatars into shards, of the rivals of ``x_i`` in each shard.
The driver brings the data to the engine's canonical scale and computes every
threshold ``T_i`` from the link alone (:func:`engine.linked_arrays`), splits the
originals into query blocks and the avatars into shards, and submits one pure
task per (block, shard) pair; each task is the single-machine building block
:func:`engine.count_within`. The driver sums the partial counts, so the result
is the local result, bit for bit.

Both sides are sorted by their first coordinate before they are cut, so a block
and a shard cover narrow slabs of that coordinate; a pair whose bounding boxes
are provably farther apart than every threshold in the block is never submitted.

Blocks and shards are scattered once. When a worker dies, Dask recomputes lost
task results from their inputs, but scattered inputs held only by that worker
are gone: the driver scatters those again from its own copy and resubmits the
cancelled tasks. Tasks are pure, and each pair's partial count is added once,
so a re-run never changes the result.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Sequence
from concurrent.futures import CancelledError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from polars_hidden_rate import engine
from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.kdtree import KdTree

if TYPE_CHECKING:
    from distributed import Client, Future

logger = logging.getLogger(__name__)

EXTRA_HINT = "pip install polars-hidden-rate[dask]"

# Sizing. A task holds a shard's kd-tree (the shard in tree order, node boxes and
# orderings: about 16 bytes per coordinate at d = 5) and its queries; 48 leaves room.
TASK_BYTES_PER_AVATAR_COORD = 48
# The share of a worker thread's memory one task's shard-sized temporaries may take;
# the rest is for the shards the worker stores and Dask.
TASK_MEMORY_FRACTION = 0.25
# Assumed memory per worker thread when a worker reports no memory limit.
DEFAULT_THREAD_MEMORY = 2 << 30
# Small shards keep tasks short, so a lost worker costs little to recompute.
MAX_SHARD_ROWS = 1 << 19
# Blocks: small enough to balance the load, large enough to amortise a task.
MIN_BLOCK_ROWS = 128
MAX_BLOCK_ROWS = 1 << 16
# Tasks per worker thread to aim for, and a ceiling that keeps the graph sane.
TASKS_PER_THREAD = 4
MAX_TASKS = 100_000
# How often one (block, shard) task may be resubmitted after losing its inputs.
MAX_RESUBMITS = 3


@dataclass(frozen=True)
class Sizing:
    """How the originals are cut into query blocks and the avatars into shards."""

    block_rows: int
    shard_rows: int


@dataclass(frozen=True)
class WorkerSpec:
    """What sizing needs to know of one worker."""

    nthreads: int
    memory_limit: int


def require_client(cluster: object) -> Client:
    """``cluster`` as a ``dask.distributed.Client``, or a clear error.

    Raises
    ------
    ImportError
        When ``dask[distributed]`` is not installed, naming the extra to install.
    TypeError
        When ``cluster`` is not a ``Client``.
    """
    try:
        import distributed
    except ImportError as exc:
        msg = f"`cluster=` needs dask.distributed, which is not installed: {EXTRA_HINT}"
        raise ImportError(msg) from exc
    if not isinstance(cluster, distributed.Client):
        hint = " (wrap it: Client(cluster))" if hasattr(cluster, "scheduler_address") else ""
        msg = f"`cluster` must be a dask.distributed.Client, got {type(cluster).__name__}{hint}"
        raise TypeError(msg)
    return cluster


def size_tasks(n_queries: int, n_avatars: int, dim: int, workers: Sequence[WorkerSpec]) -> Sizing:
    """Choose block and shard sizes for ``workers``.

    A shard is capped by the memory of one worker thread (a task's temporaries
    grow with its shard), by :data:`MAX_SHARD_ROWS`, and by an even split over
    the workers, so that every worker stores some of the avatars. Blocks are cut
    so that there are about :data:`TASKS_PER_THREAD` tasks per thread, within
    ``[MIN_BLOCK_ROWS, MAX_BLOCK_ROWS]`` and at most :data:`MAX_TASKS` tasks.

    Examples
    --------
    >>> size_tasks(10_000, 10_000, 5, [WorkerSpec(nthreads=1, memory_limit=4 << 30)] * 2)
    Sizing(block_rows=2500, shard_rows=5000)
    """
    if not workers:
        msg = "the Dask cluster has no workers"
        raise RuntimeError(msg)
    threads = sum(max(worker.nthreads, 1) for worker in workers)
    thread_memory = min(
        (worker.memory_limit or DEFAULT_THREAD_MEMORY * worker.nthreads) / max(worker.nthreads, 1)
        for worker in workers
    )
    by_memory = int(thread_memory * TASK_MEMORY_FRACTION) // (TASK_BYTES_PER_AVATAR_COORD * dim)
    shard_rows = max(1, min(by_memory, MAX_SHARD_ROWS, math.ceil(n_avatars / len(workers))))
    n_shards = math.ceil(n_avatars / shard_rows)
    wanted_blocks = math.ceil(TASKS_PER_THREAD * threads / n_shards)
    block_rows = min(max(math.ceil(n_queries / wanted_blocks), MIN_BLOCK_ROWS), MAX_BLOCK_ROWS)
    block_rows = max(block_rows, math.ceil(n_queries / max(MAX_TASKS // n_shards, 1)), 1)
    return Sizing(block_rows=block_rows, shard_rows=shard_rows)


def count_cloaking_distributed(
    originals: Float64Array,
    avatars: Float64Array,
    *,
    client: Client,
    tie_tol: float = 1e-9,
    threads: int | None = None,
    sizing: Sizing | None = None,
) -> CountArray:
    """Exact local cloaking, counted on a Dask cluster; equal to :func:`engine.count_cloaking`.

    Parameters
    ----------
    originals, avatars
        Float64 arrays of shape ``(n, d)``; row ``i`` of ``avatars`` is the
        avatar of row ``i`` of ``originals``.
    client
        A ``dask.distributed.Client``.
    tie_tol
        Relative tie tolerance, as in :func:`engine.count_cloaking`.
    threads
        Counting threads inside each task. None runs one per task: Dask already
        runs one task per worker thread, and more would oversubscribe the cores.
    sizing
        Block and shard sizes; default :func:`size_tasks` for the client's workers.

    Returns
    -------
    numpy.ndarray
        The counts ``c_i`` as int64, one per original.
    """
    from distributed import as_completed

    originals, avatars, thresholds = engine.linked_arrays(originals, avatars, tie_tol)
    n, dim = originals.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if sizing is None:
        sizing = size_tasks(n, len(avatars), dim, _workers(client))

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
    pairs = _pairs_within_reach(blocks, [shard.points for shard in shards])

    run = _Run(client, uuid.uuid4().hex[:16], blocks, shards, list(shard_starts), threads)
    sorted_counts = np.zeros(n, dtype=np.int64)
    pending = {run.submit(b, s): (b, s) for b, s in pairs}
    try:
        finished = as_completed(list(pending))
        for future in finished:
            b, s = pending.pop(future)
            try:
                partial = future.result()
            except CancelledError:
                # Its inputs were lost with a worker: scatter them again and resubmit.
                if run.attempts[b, s] > MAX_RESUBMITS:
                    msg = f"block {b} x shard {s} was lost {run.attempts[b, s]} times; giving up"
                    raise RuntimeError(msg) from None
                run.recover(b, s)
                retry = run.submit(b, s)
                pending[retry] = (b, s)
                finished.add(retry)
                continue
            future.release()
            start = b * sizing.block_rows
            sorted_counts[start : start + len(partial)] += partial
    finally:
        if pending:
            client.cancel(list(pending))
        run.release()
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
    return engine.count_within(block.queries, block.thresholds, own, shard, threads=threads or 1)


def _pairs_within_reach(
    blocks: list[_QueryBlock], shards: list[Float64Array]
) -> list[tuple[int, int]]:
    """The (block, shard) pairs whose boxes may hold a pair within a block threshold.

    ``gap`` is the float64 per-coordinate gap between the boxes and ``reach`` the
    sum of ``gap * gap`` in column order, like :func:`engine.squared_distances`.
    Rounding is monotone, so every pair's computed ``d2`` is at least ``reach``;
    ``reach > max T`` proves that no pair of the two counts.
    """
    block_low = np.array([block.queries.min(axis=0) for block in blocks])
    block_high = np.array([block.queries.max(axis=0) for block in blocks])
    shard_low = np.array([shard.min(axis=0) for shard in shards])
    shard_high = np.array([shard.max(axis=0) for shard in shards])
    reach = np.zeros((len(blocks), len(shards)))
    for k in range(block_low.shape[1]):
        gap = np.maximum(
            np.maximum(
                shard_low[None, :, k] - block_high[:, None, k],
                block_low[:, None, k] - shard_high[None, :, k],
            ),
            0.0,
        )
        reach += gap * gap
    largest = np.array([block.thresholds.max() for block in blocks])
    within = ~(reach > largest[:, None])
    return [(int(b), int(s)) for b, s in zip(*np.nonzero(within), strict=True)]


class _Run:
    """The scattered inputs of one counting run and the tasks over them."""

    def __init__(
        self,
        client: Client,
        token: str,
        blocks: list[_QueryBlock],
        shards: list[KdTree],
        shard_starts: list[int],
        threads: int | None,
    ) -> None:
        self.client = client
        self.token = token
        self.blocks = blocks
        self.shards = shards
        self.shard_starts = shard_starts
        self.threads = threads
        self.block_futures = self._scatter("phr-query-block", dict(enumerate(blocks)), 0)
        self.shard_futures = self._scatter("phr-avatar-shard", dict(enumerate(shards)), 0)
        self.block_generation = [0] * len(blocks)
        self.shard_generation = [0] * len(shards)
        self.attempts: dict[tuple[int, int], int] = {}

    def submit(self, b: int, s: int) -> Future[CountArray]:
        """Submit block ``b`` x shard ``s``; its key names the run, the pair and the attempt."""
        attempt = self.attempts.get((b, s), 0)
        self.attempts[b, s] = attempt + 1
        return self.client.submit(
            count_block_in_shard,
            self.block_futures[b],
            self.shard_futures[s],
            self.shard_starts[s],
            self.threads,
            key=f"phr-count-within-{self.token}-{b}-{s}-{attempt}",
            pure=True,
        )

    def recover(self, b: int, s: int) -> None:
        """Scatter again block ``b`` and shard ``s`` if no worker holds them any more."""
        if self._lost(self.block_futures[b]):
            logger.warning("query block %d was lost with a worker; scattering it again", b)
            self.block_generation[b] += 1
            self.block_futures[b] = self._scatter(
                "phr-query-block", {b: self.blocks[b]}, self.block_generation[b]
            )[b]
        if self._lost(self.shard_futures[s]):
            logger.warning("avatar shard %d was lost with a worker; scattering it again", s)
            self.shard_generation[s] += 1
            self.shard_futures[s] = self._scatter(
                "phr-avatar-shard", {s: self.shards[s]}, self.shard_generation[s]
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
        keyed = {f"{name}-{self.token}-{i}-{generation}": value for i, value in data.items()}
        futures = self.client.scatter(keyed)
        return {i: futures[f"{name}-{self.token}-{i}-{generation}"] for i in data}


def _workers(client: Client) -> list[WorkerSpec]:
    info = client.scheduler_info(n_workers=-1)["workers"]
    return [
        WorkerSpec(nthreads=int(worker["nthreads"]), memory_limit=int(worker["memory_limit"] or 0))
        for worker in info.values()
    ]
