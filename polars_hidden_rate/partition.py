"""Spatial pruning: which avatars a block of queries must be compared with.

Both sets are split into the leaves of a balanced kd-tree. A leaf of queries
is compared only with the leaves of avatars whose bounding box lies within
reach of the queries' radii; every other avatar is provably too far. The test
is conservative (float64 with a relative margin), so pruning never changes a
count: it only decides how much work the exact engine does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from polars_hidden_rate._types import Float64Array, IndexArray

# Relative widening of radii and boxes: covers float64 rounding in the tests below.
MARGIN = 1e-9
# Queries whose leaves are pruned together: keeps the temporaries in cache.
PRUNE_ROWS = 2048


@dataclass(frozen=True)
class KdLeaves:
    """A balanced kd-tree in heap layout: node ``k`` has children ``2k + 1`` and ``2k + 2``.

    ``order`` lists the points leaf by leaf; leaf ``j`` holds
    ``order[starts[j]:starts[j + 1]]``. ``lower`` and ``upper`` bound every node.
    """

    order: IndexArray
    starts: IndexArray
    lower: Float64Array
    upper: Float64Array
    depth: int

    @property
    def first_leaf(self) -> int:
        return (1 << self.depth) - 1

    @property
    def n_leaves(self) -> int:
        return len(self.starts) - 1

    @classmethod
    def build(cls, points: Float64Array, leaf_size: int) -> KdLeaves:
        """Split at the median of the widest coordinate until leaves hold about ``leaf_size``."""
        n = len(points)
        depth = max(0, math.ceil(math.log2(max(n, 1) / leaf_size)))
        order = np.arange(n, dtype=np.int64)
        starts = np.array([0, n], dtype=np.int64)
        for _ in range(depth):
            next_starts = np.empty(2 * len(starts) - 1, dtype=np.int64)
            next_starts[0::2] = starts
            for j in range(len(starts) - 1):
                begin, end = starts[j], starts[j + 1]
                segment = order[begin:end]
                coords = points[segment]
                widest = int(np.argmax(coords.max(axis=0) - coords.min(axis=0)))
                mid = (end - begin) // 2
                order[begin:end] = segment[np.argpartition(coords[:, widest], mid)]
                next_starts[2 * j + 1] = begin + mid
            starts = next_starts
        tree = cls(order, starts, np.empty((0, 0)), np.empty((0, 0)), depth)
        lower, upper = tree.node_boxes(points, points)
        return cls(order, starts, lower, upper, depth)

    def node_boxes(
        self, point_lower: Float64Array, point_upper: Float64Array
    ) -> tuple[Float64Array, Float64Array]:
        """Per node, the smallest box holding ``[point_lower[i], point_upper[i]]`` of its points."""
        leaf_lower = np.minimum.reduceat(point_lower[self.order], self.starts[:-1], axis=0)
        leaf_upper = np.maximum.reduceat(point_upper[self.order], self.starts[:-1], axis=0)
        lower = np.empty(((1 << (self.depth + 1)) - 1, *leaf_lower.shape[1:]))
        upper = np.empty_like(lower)
        lower[self.first_leaf :], upper[self.first_leaf :] = leaf_lower, leaf_upper
        for level in range(self.depth - 1, -1, -1):
            nodes = np.arange((1 << level) - 1, (1 << (level + 1)) - 1)
            lower[nodes] = np.minimum(lower[2 * nodes + 1], lower[2 * nodes + 2])
            upper[nodes] = np.maximum(upper[2 * nodes + 1], upper[2 * nodes + 2])
        return lower, upper

    def leaf_of_position(self) -> IndexArray:
        """For each position in ``order``, the leaf holding it."""
        return np.repeat(np.arange(len(self.starts) - 1), np.diff(self.starts))


@dataclass(frozen=True)
class Reach:
    """Blocks of queries and, for each block, the avatar leaves it must scan."""

    block_rows: IndexArray  # query rows, block after block
    block_starts: IndexArray  # block b holds block_rows[block_starts[b]:block_starts[b + 1]]
    leaf_starts: IndexArray  # block b scans leaves[leaf_starts[b]:leaf_starts[b + 1]]
    leaves: IndexArray
    queries: Float64Array
    thresholds: Float64Array
    avatars: KdLeaves

    def batches(self, max_keys: int) -> Iterator[tuple[IndexArray, IndexArray]]:
        """``(rows, keys)`` pairs: query rows and, row by row, the leaves to scan (-1 pads).

        Each query keeps only the leaves of its block whose box lies within its own
        radius. Blocks with similar numbers of leaves go together, and no batch
        holds more than about ``max_keys`` keys, however wide one block's reach.
        """
        widths = np.diff(self.leaf_starts)
        sizes = np.diff(self.block_starts)
        by_width = np.argsort(widths, kind="stable")
        batch: list[int] = []
        rows_in_batch = 0
        for block in by_width[widths[by_width] > 0].tolist():
            if batch and (rows_in_batch + sizes[block]) * widths[block] > max_keys:
                yield self._keys(batch)
                batch, rows_in_batch = [], 0
            batch.append(block)
            rows_in_batch += int(sizes[block])
        if batch:
            yield self._keys(batch)

    def _keys(self, blocks: list[int]) -> tuple[IndexArray, IndexArray]:
        chosen = np.asarray(blocks, dtype=np.int64)
        widths = self.leaf_starts[chosen + 1] - self.leaf_starts[chosen]
        block_keys = np.full((len(chosen), int(widths.max())), -1, dtype=np.int64)
        slot = np.arange(block_keys.shape[1])
        block_keys[slot[None, :] < widths[:, None]] = self.leaves[
            _ranges(self.leaf_starts[chosen], widths)
        ]
        sizes = self.block_starts[chosen + 1] - self.block_starts[chosen]
        rows = self.block_rows[_ranges(self.block_starts[chosen], sizes)]
        keys = np.repeat(block_keys, sizes, axis=0)
        # Per query, drop the leaves of its block beyond its own radius; a few blocks at
        # a time keep the temporaries in cache.
        nodes = np.maximum(block_keys, 0) + self.avatars.first_leaf
        lower, upper = self.avatars.lower[nodes], self.avatars.upper[nodes]
        starts = np.concatenate([[0], np.cumsum(sizes)])
        step = max(1, PRUNE_ROWS // max(int(sizes.max()), 1))
        for first in range(0, len(chosen), step):
            part = slice(first, first + step)
            span = slice(starts[first], starts[min(first + step, len(chosen))])
            points = self.queries[rows[span]]
            reps = sizes[part]
            gap2 = np.zeros((len(points), block_keys.shape[1]))
            for k in range(points.shape[1]):
                coord = points[:, k : k + 1]
                gap = np.maximum(
                    np.maximum(
                        np.repeat(lower[part, :, k], reps, axis=0) - coord,
                        coord - np.repeat(upper[part, :, k], reps, axis=0),
                    ),
                    0.0,
                )
                gap2 += gap * gap
            reach2 = _reach(self.thresholds[rows[span]], points.shape[1]) ** 2
            keys[span][gap2 * (1 - MARGIN) > reach2[:, None]] = -1
        return rows, keys


def reachable_leaves(
    queries: Float64Array,
    thresholds: Float64Array,
    avatars: KdLeaves,
    query_leaf_size: int,
) -> Reach:
    """Split the queries into kd-tree blocks and find the avatar leaves each block may reach.

    Query ``i`` reaches the avatars within squared distance ``thresholds[i]``.
    The two trees are walked together, level by level, for all node pairs at
    once. A pair is dropped when, for every query of the query node, the box of
    the avatar node lies beyond the query's radius: either it misses the box of
    the queries widened by their radii, or its distance to the box of the
    queries exceeds their largest radius.
    """
    tree = KdLeaves.build(queries, query_leaf_size)
    reach = _reach(thresholds, queries.shape[1])
    wide_lower, wide_upper = tree.node_boxes(queries - reach[:, None], queries + reach[:, None])
    wide_lower *= _shrink(wide_lower)
    wide_upper *= _widen(wide_upper)
    reach2 = tree.node_boxes(reach, reach)[1] ** 2

    query_nodes = np.zeros(1, dtype=np.int64)
    avatar_nodes = np.zeros(1, dtype=np.int64)
    for level in range(max(tree.depth, avatars.depth) + 1):
        avatar_lower, avatar_upper = avatars.lower[avatar_nodes], avatars.upper[avatar_nodes]
        keep = (
            (avatar_lower <= wide_upper[query_nodes]) & (avatar_upper >= wide_lower[query_nodes])
        ).all(axis=1)
        query_nodes, avatar_nodes = query_nodes[keep], avatar_nodes[keep]
        avatar_lower, avatar_upper = avatar_lower[keep], avatar_upper[keep]
        gap = np.maximum(
            np.maximum(
                avatar_lower - tree.upper[query_nodes], tree.lower[query_nodes] - avatar_upper
            ),
            0.0,
        )
        keep = (gap * gap).sum(axis=1) * (1 - MARGIN) <= reach2[query_nodes]
        query_nodes, avatar_nodes = query_nodes[keep], avatar_nodes[keep]
        if level < tree.depth:
            query_nodes = np.stack([2 * query_nodes + 1, 2 * query_nodes + 2], axis=1).ravel()
            avatar_nodes = np.repeat(avatar_nodes, 2)
        if level < avatars.depth:
            avatar_nodes = np.stack([2 * avatar_nodes + 1, 2 * avatar_nodes + 2], axis=1).ravel()
            query_nodes = np.repeat(query_nodes, 2)

    by_block = np.argsort(query_nodes, kind="stable")
    blocks = query_nodes[by_block] - tree.first_leaf
    return Reach(
        block_rows=tree.order,
        block_starts=tree.starts,
        leaf_starts=np.searchsorted(blocks, np.arange(tree.n_leaves + 1)),
        leaves=avatar_nodes[by_block] - avatars.first_leaf,
        queries=queries,
        thresholds=thresholds,
        avatars=avatars,
    )


def _widen(values: Float64Array) -> Float64Array:
    """A factor that moves ``values`` away from zero's other side by the margin."""
    return np.where(values >= 0, 1 + MARGIN, 1 - MARGIN)


def _shrink(values: Float64Array) -> Float64Array:
    return np.where(values >= 0, 1 - MARGIN, 1 + MARGIN)


def _reach(thresholds: Float64Array, dim: int) -> Float64Array:
    """Radii from squared thresholds, widened for the rounding of the box tests and of
    float64 squares below the normal range (where the reference rounds absolutely)."""
    reach: Float64Array = np.sqrt(thresholds + 4 * (dim + 1) * 2.0**-1074) * (1 + MARGIN)
    return reach + np.finfo(np.float64).tiny


def _ranges(starts: IndexArray, lengths: IndexArray) -> IndexArray:
    """The concatenation of ``arange(s, s + n)`` for each start and length."""
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    ranges: IndexArray = np.arange(int(lengths.sum()), dtype=np.int64) + offsets
    return ranges
