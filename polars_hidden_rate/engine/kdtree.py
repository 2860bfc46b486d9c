"""A compiled kd-tree that counts, in float64, the avatars within each query's radius.

Every distance it compares is the engine's definition (direct differences,
squared and summed in column order, no fused multiply-add), so a count taken
point by point is the float64 count itself. Boxes only skip work, and never
change a count: the box bounds are computed with the same operations in the
same order, and rounding is monotone, so every point's float64 ``d2`` lies
within its node's computed ``[near, far]`` exactly (see
`_kernels.box_bounds`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import BoolArray, CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine._kernels import (
    NO_PROBE,
    Probe,
    SplitDims,
    Strictly,
    TreeArrays,
    count_walk,
    distinct_rows,
    leaves_below,
    node_boxes,
    node_splits,
    permute_rows,
    repeated_rows,
    split_nodes,
)
from polars_hidden_rate.engine.arrays import check_rows, linked_queries
from polars_hidden_rate.engine.parallel import parallel_map

# Points per leaf: small leaves prune well, and the leaf scan is cheap (measured).
LEAF_SIZE = 16
# Queries per task handed to a thread: about four tasks per thread, within these bounds.
QUERIES_PER_TASK = 4096
MIN_QUERIES_PER_TASK = 256
# Fewer queries than this walk in one task on the calling thread: handing tasks to helpers
# costs more than it saves there (measured: 500 and 1,000 queries at d = 2 to 16).
PARALLEL_WALK_MIN = 1024
# Tree levels built in one thread before the subtrees below are built side by side,
# for trees of at least this many avatars (below, starting threads costs more).
SHARED_LEVELS = 3
PARALLEL_BUILD_MIN = 1 << 16
# A tree is collapsed (`KdTree.collapsed`) when at least one point in COLLAPSE_SHARE
# repeats the one before it in tree order: runs of identical avatars then straddle the
# median splits, and every such boundary is walked down to a leaf by each query near it
# (measured: the discrete profile at d = 5, 6 % of repeats, counts 1.7 to 2.2 times faster).
COLLAPSE_SHARE = 16
# Avatars drawn to tell heavy duplicates before any tree is built (`KdTree.build_collapsed`).
COLLAPSE_SAMPLE = 4096
# The cap of a count without one.
_NO_CAP = int(np.iinfo(np.int64).max)


@dataclass(frozen=True)
class KdTree:
    """A kd-tree of fixed depth in heap layout: node ``k`` has children ``2k + 1`` and
    ``2k + 2``.

    ``points`` holds the avatars leaf by leaf (``points[p] = avatars[order[p]]``);
    node ``k`` holds positions ``begin[k]:end[k]`` and is bounded by
    ``lower[k]``, ``upper[k]``. ``position[j]`` is where avatar ``j`` went.

    ``weights`` is None when each point is one avatar. In a collapsed tree
    (`collapsed`) each point is one distinct avatar, standing for
    ``weights[p + 1] - weights[p]`` identical ones (cumulative counts by position);
    ``position[j]`` is then the point of avatar ``j``'s value and ``order[p]`` one
    avatar of point ``p``.
    """

    points: Float64Array
    order: IndexArray
    position: IndexArray
    begin: IndexArray
    end: IndexArray
    lower: Float64Array
    upper: Float64Array
    weights: IndexArray | None = None

    @cached_property
    def arrays(self) -> TreeArrays:
        """The tree as the kernels take it, one value, with its `splits` (made on first use)."""
        split_dim, split_value = node_splits(self.lower, self.upper)
        return TreeArrays(
            self.points, self.begin, self.end, self.lower, self.upper, split_dim, split_value
        )

    @property
    def splits(self) -> tuple[SplitDims, Float64Array]:
        """Per inner node, a coordinate and a value that separate its children
        (`node_splits`), for every walk, which starts at a query's own leaf (the count's,
        the nearest-record, within-reach and tied-match walks, and `leaves_of`); made on
        first use (`arrays`), 12 bytes per inner node (about one per 16 points)."""
        arrays = self.arrays
        return arrays.split_dim, arrays.split_value

    @property
    def avatars(self) -> int:
        """How many avatars the tree holds (more than its points when collapsed)."""
        return len(self.position)

    def collapsed(self, *, threads: int = 1) -> KdTree | None:
        """This tree's avatars with each distinct value once, weighted by its copies, or
        None when fewer than one point in `COLLAPSE_SHARE` repeats the one before it
        (tree order; a pass over the points).

        The counts do not change: identical avatars have the same float64 ``d2`` to any
        query, so a point counts for all its copies (less the query's own avatar) exactly
        when one of them would. On duplicated data the walk then stops at the boundaries
        between distinct values instead of following each copy down to a leaf.
        """
        if self.weights is not None or repeated_rows(self.points) * COLLAPSE_SHARE < len(
            self.points
        ):
            return None
        group, distinct = distinct_rows(self.points, self.points.view(np.uint64))
        inner, representative = _weighted_tree(self.points, group, distinct, threads)
        return replace(
            inner,
            order=self.order[representative[inner.order]],
            position=inner.position[group[self.position]],
        )

    @classmethod
    def build_collapsed(
        cls, avatars: npt.ArrayLike, *, threads: int = 1, sample: int | None = None
    ) -> KdTree | None:
        """The collapsed tree of ``avatars`` (see `collapsed`), built without the plain
        one, when more than ``4 * sample`` avatars hold heavy duplicates: at most
        ``1 - 1 / COLLAPSE_SHARE`` of ``sample`` (default `COLLAPSE_SAMPLE`) of them,
        drawn with a fixed seed, are distinct. Else None (the plain tree, then
        `collapsed`, decide)."""
        sample = COLLAPSE_SAMPLE if sample is None else sample
        avatars = np.ascontiguousarray(avatars, dtype=np.float64)
        n = len(avatars)
        if n <= 4 * sample:
            return None
        drawn = avatars[np.sort(np.random.default_rng(0).choice(n, sample, replace=False))]
        _, seen = distinct_rows(drawn, drawn.view(np.uint64))
        if seen * COLLAPSE_SHARE > (COLLAPSE_SHARE - 1) * sample:
            return None
        group, distinct = distinct_rows(avatars, avatars.view(np.uint64))
        inner, representative = _weighted_tree(avatars, group, distinct, threads)
        return replace(inner, order=representative[inner.order], position=inner.position[group])

    @classmethod
    def build(
        cls,
        avatars: npt.ArrayLike,
        leaf_size: int | None = None,
        *,
        threads: int = 1,
        overwrite_input: bool = False,
        companions: tuple[Float64Array, ...] = (),
    ) -> KdTree:
        """Split at the median of the widest coordinate, or at the end of the run of values
        tied with it (`split_between_ties`), to the depth at which median splits leave at
        most ``leaf_size`` (default `LEAF_SIZE`) in a leaf; a leaf below a split between
        ties may hold more.

        With ``overwrite_input``, writable contiguous float64 ``avatars`` are reordered in
        place and become `points` (no copy): for callers that own them. The rows of each of
        ``companions`` (writable C-order 2-D float64 arrays of as many rows, the caller's)
        are reordered with them: row ``p`` of each then belongs to point ``p``.
        """
        avatars = np.ascontiguousarray(avatars, dtype=np.float64)
        # The splits move the rows themselves: the caller's array, or a copy of it.
        points = avatars if overwrite_input and avatars.flags.writeable else avatars.copy()
        n = len(points)
        for rows in companions:
            if not (
                rows.dtype == np.float64
                and rows.ndim == 2
                and rows.flags.c_contiguous
                and rows.flags.writeable
                and len(rows) == n
            ):
                msg = f"each companion must be a writable C-order 2-D float64 array of {n} rows"
                raise ValueError(msg)
        # numba iterates no empty tuple: an array of no columns moves nothing.
        companions = companions or (np.empty((0, 0)),)
        depth = max(0, math.ceil(math.log2(max(n, 1) / (leaf_size or LEAF_SIZE))))
        order = np.arange(n, dtype=np.int64)
        begin = np.zeros((1 << (depth + 1)) - 1, dtype=np.int64)
        end = np.zeros_like(begin)
        end[0] = n
        # The top levels in one thread, then the subtrees below them side by side.
        if threads > 1 and n >= PARALLEL_BUILD_MIN and depth > SHARED_LEVELS:
            top = SHARED_LEVELS
            split_nodes(points, order, companions, begin, end, 0, top, 0)
            for _ in parallel_map(
                threads,
                lambda part: split_nodes(points, order, companions, begin, end, top, depth, part),
                1 << top,
            ):
                pass
        else:
            split_nodes(points, order, companions, begin, end, 0, depth, 0)
        lower, upper = node_boxes(points, begin, end, depth)
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n, dtype=np.int64)
        return cls(points, order, position, begin, end, lower, upper)

    def count_rivals(
        self,
        queries: Float64Array,
        thresholds: Float64Array,
        own: IndexArray | None,
        *,
        threads: int = 1,
        cap: int | None = None,
        advance: Callable[[int], None] = lambda done: None,
        rows: IndexArray | None = None,
    ) -> CountArray:
        """For each query, the avatars ``j != own[i]`` within ``thresholds[i]``: the counts
        of `count_and_closer` without the flags, by a walk that does not look for them."""
        counts, _ = self.count_and_closer(
            queries, thresholds, own, None, threads=threads, cap=cap, advance=advance, rows=rows
        )
        return counts

    def count_and_closer(
        self,
        queries: Float64Array,
        thresholds: Float64Array,
        own: IndexArray | None,
        closer_than: Float64Array | None,
        *,
        threads: int = 1,
        cap: int | None = None,
        advance: Callable[[int], None] = lambda done: None,
        rows: IndexArray | None = None,
    ) -> tuple[CountArray, BoolArray | None]:
        """For each query, the avatars ``j != own[i]`` within ``thresholds[i]``, and with
        ``closer_than`` (one squared distance per query, at most its threshold; None: not
        asked) whether one of them lies within ``closer_than[i]``, found by the same walk (a
        walk capped at ``cap`` goes on until it knows).

        ``own[i]`` is -1 when query ``i`` has no avatar in the tree; ``own=None``
        says query ``i``'s own avatar is avatar ``i`` (one query per avatar).
        Queries run in tree order (by their own avatar's place, or by the leaf holding
        them), so that consecutive queries walk nodes already in cache. With
        ``cap``, each count is ``min(count, cap)`` and a walk stops at its
        ``cap``-th rival. ``rows`` (with ``own``), every query once: the queries walked in
        that order instead, for a caller whose queries already come with their neighbours
        (the points of a tree of their own).
        """
        shape = (self.avatars, self.points.shape[1])
        queries, thresholds, own = linked_queries(queries, thresholds, own, shape)
        if rows is not None:
            if own is None:
                raise ValueError("`rows` needs `own`")
            check_rows(rows, len(queries), every=True)
        below = None
        if closer_than is not None:
            below = np.ascontiguousarray(closer_than, dtype=np.float64)
            if below.shape != (len(queries),):
                msg = f"`closer_than` must hold one value per query ({len(queries)})"
                raise ValueError(msg)
        return self.walk_counts(
            queries, thresholds, own, below, threads=threads, cap=cap, advance=advance, rows=rows
        )

    def walk_counts(
        self,
        queries: Float64Array,
        thresholds: Float64Array,
        own: IndexArray | None,
        closer_than: Float64Array | None,
        *,
        threads: int = 1,
        cap: int | None = None,
        advance: Callable[[int], None] = lambda done: None,
        rows: IndexArray | None = None,
    ) -> tuple[CountArray, BoolArray | None]:
        """`count_and_closer` of arguments it checked (`linked_queries`, `check_rows`, one
        C-order float64 ``closer_than`` per query), for the engine's counts, which check
        them once at their own boundary."""
        if rows is not None:
            own_position = self.own_positions(own)
        elif own is None:  # in tree order: the tree's own arrays, no per-query copies
            own_position, rows = self.position, self.order  # `own_positions(None)`
            if self.weights is not None:  # one point for many avatars: sort the queries
                rows = np.argsort(self.position, kind="stable")
        else:
            # A query without its avatar here whose ball misses the root box counts 0 (its
            # `near` bounds every point's d2): it is not walked, nor placed.
            own_position = self.own_positions(own)
            reached = own >= 0
            outside = np.flatnonzero(~reached)
            reached[outside] = self.reaches(queries[outside], thresholds[outside])
            walked = np.flatnonzero(reached)
            place = own_position[walked]
            orphans = np.flatnonzero(place < 0)
            place[orphans] = self.near_positions(queries[walked[orphans]])
            # Any order of equal places walks the same nodes, and no count depends on the
            # order: numpy's default sort, four times faster than a stable one here.
            rows = walked[np.argsort(place)]
        counts = np.zeros(len(queries), dtype=np.int64)
        size = queries_per_task(len(rows), threads)
        strictly: Strictly | None = None
        if closer_than is not None:
            strictly = Strictly(closer_than, np.zeros(len(queries), dtype=np.bool_))

        def run(task: int) -> int:
            chosen = rows[task * size : (task + 1) * size]
            count_walk(
                arrays,
                queries,
                thresholds,
                own_position,
                chosen,
                limit,
                counts,
                NO_PROBE,
                strictly,
                self.weights,
            )
            return len(chosen)

        limit = _NO_CAP if cap is None else cap
        arrays = self.arrays  # its splits made here, before the threads
        tasks = -(-len(rows) // size)
        if tasks == 1:  # no helper to hand it to
            advance(run(0))
        else:
            for done in parallel_map(threads, run, tasks):
                advance(done)
        return counts, None if strictly is None else strictly.found

    def leaves_of(self, queries: Float64Array, *, threads: int = 1) -> IndexArray:
        """The leaf whose cell holds each query (`leaves_below`; the root where the tree has
        no splits), where the walks start: queries sorted by it (`nearest.walk_order`) walk
        nodes already in cache. On ``threads`` threads, by blocks of queries (one comparison
        per level: 0.11 s on one thread for 1e6 queries at d = 5, a third of the descent
        towards the nearer child box that it replaces)."""
        arrays = self.arrays
        size = queries_per_task(len(queries), threads)
        blocks = -(-len(queries) // size)
        if threads <= 1 or blocks <= 1:
            return leaves_below(arrays, queries)
        leaves = np.empty(len(queries), dtype=np.int64)

        def descend(block: int) -> None:
            part = slice(block * size, (block + 1) * size)
            leaves[part] = leaves_below(arrays, queries[part])

        for _ in parallel_map(threads, descend, blocks):
            pass
        return leaves

    def near_positions(self, queries: Float64Array, *, threads: int = 1) -> IndexArray:
        """The first position in `points` of the leaf whose cell holds each query
        (`leaves_of`)."""
        positions: IndexArray = self.begin[self.leaves_of(queries, threads=threads)]
        return positions

    def reaches(self, queries: Float64Array, thresholds: Float64Array) -> npt.NDArray[np.bool_]:
        """Whether each query's ball may reach the tree's box: the walks' box test at the
        root, the same operations in the same order (a query it rejects has no point within
        its threshold, exactly, and counts 0 here).

        Examples
        --------
        >>> tree = KdTree.build(np.array([[0.0, 0.0], [1.0, 1.0]]))
        >>> tree.reaches(np.array([[3.0, 1.0], [3.0, 1.0]]), np.array([3.9, 4.0])).tolist()
        [False, True]
        """
        near = np.zeros(len(queries))
        for k in range(queries.shape[1]):
            column = queries[:, k]
            gap = np.maximum(np.maximum(self.lower[0, k] - column, column - self.upper[0, k]), 0.0)
            near += gap * gap
        reached: npt.NDArray[np.bool_] = near <= thresholds
        return reached

    def own_positions(self, own: IndexArray | None) -> IndexArray:
        """Where each own avatar sits in `points` (-1 for none); for ``own=None``
        (query ``i`` owns avatar ``i``), `position` itself."""
        if own is None:
            return self.position
        positions: IndexArray = np.where(own >= 0, self.position[np.maximum(own, 0)], -1)
        return positions

    def walk_work(
        self,
        queries: Float64Array,
        thresholds: Float64Array,
        own: IndexArray | None,
        rows: IndexArray,
        *,
        cap: int | None = None,
        box_cost: float = 1.0,
        point_cost: float = 1.0,
        budget: float = math.inf,
    ) -> tuple[IndexArray, CountArray]:
        """The boxes tested and the points compared (columns 0 and 1) by the walk of each
        query in ``rows``, on this thread, and the rivals it found (capped at ``cap``); a
        walk stops once ``boxes * box_cost + points * point_cost`` passes ``budget``.
        ``own=None`` as in `count_rivals`. Only the sampled rows are copied."""
        rows = np.asarray(rows, dtype=np.int64)
        mine = self.own_positions(rows if own is None else own[rows])
        work = np.zeros((len(rows), 2), dtype=np.int64)
        found = np.zeros(len(rows), dtype=np.int64)
        probe = Probe(work, np.array([box_cost, point_cost, budget]))
        limit = _NO_CAP if cap is None else cap
        count_walk(
            self.arrays,
            queries[rows],
            thresholds[rows],
            mine,
            np.arange(len(rows)),
            limit,
            found,
            probe,
            None,
            self.weights,
        )
        return work, found


def build_side_by_side(
    arrays: Sequence[Float64Array], *, threads: int, overwrite_input: bool = False
) -> list[KdTree]:
    """`KdTree.build` of each array (``overwrite_input`` as there), side by side where there
    are threads for each: a build's first levels run on one thread, so two builds at once
    keep both cores of a 2-core machine busy (0.49 s against 0.59 s for two trees of 1e6 x
    5). Else one after the other, each on every thread."""
    if not 1 < len(arrays) <= threads:
        return [KdTree.build(a, threads=threads, overwrite_input=overwrite_input) for a in arrays]
    each = threads // len(arrays)
    trees: list[KdTree | None] = [None] * len(arrays)

    def build(k: int) -> None:
        trees[k] = KdTree.build(arrays[k], threads=each, overwrite_input=overwrite_input)

    for _ in parallel_map(threads, build, len(arrays)):
        pass
    return [tree for tree in trees if tree is not None]


def restore_rows(points: Float64Array, position: IndexArray) -> None:
    """Put the `points` of a plain tree, the avatars reordered in place by ``KdTree.build(...,
    overwrite_input=True)``, back in their row order with its `position`: ``points[j]`` is
    then avatar ``j`` again, and the tree no longer walks (a pass over them, no copy)."""
    permute_rows(points, position)


def queries_per_task(queries: int, threads: int) -> int:
    """Queries per task handed to a thread: about four tasks per thread, within
    `MIN_QUERIES_PER_TASK` and `QUERIES_PER_TASK`; all in one below `PARALLEL_WALK_MIN`."""
    if queries < PARALLEL_WALK_MIN:
        return max(queries, 1)
    return min(max(queries // (4 * threads), MIN_QUERIES_PER_TASK), QUERIES_PER_TASK)


def _weighted_tree(
    points: Float64Array, group: IndexArray, distinct: int, threads: int
) -> tuple[KdTree, IndexArray]:
    """The tree of one row of each group of ``points`` (``group`` from `distinct_rows`),
    weighted by the group's size, and that row of each group. Its ``order`` and
    ``position`` still refer to the groups; the caller maps them to its avatars."""
    representative = np.empty(distinct, dtype=np.int64)
    representative[group] = np.arange(len(group))  # any row of a group: all are equal
    inner = KdTree.build(points[representative], threads=threads, overwrite_input=True)
    copies = np.bincount(group, minlength=distinct)[inner.order]
    weights = np.zeros(distinct + 1, dtype=np.int64)
    np.cumsum(copies, out=weights[1:])
    return replace(inner, weights=weights), representative
