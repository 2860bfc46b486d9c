"""A compiled kd-tree that counts, in float64, the avatars within each query's radius.

Every distance it compares is the engine's definition (direct differences,
squared and summed in column order, no fused multiply-add), so a count taken
point by point is the float64 count itself. Boxes only skip work, and never
change a count: the box bounds are computed with the same operations in the
same order, and rounding is monotone, so every point's float64 ``d2`` lies
within its node's computed ``[near, far]`` exactly (see :func:`_count`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numba
import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine.arrays import linked_queries
from polars_hidden_rate.engine.parallel import parallel_map

# Points per leaf: small leaves prune well, and the leaf scan is cheap (measured).
LEAF_SIZE = 16
# Queries per task handed to a thread: about four tasks per thread, within these bounds.
QUERIES_PER_TASK = 4096
MIN_QUERIES_PER_TASK = 256
# Tree levels built in one thread before the subtrees below are built side by side,
# for trees of at least this many avatars (below, starting threads costs more).
SHARED_LEVELS = 3
PARALLEL_BUILD_MIN = 1 << 16


# The cap of a count without one.
_NO_CAP = int(np.iinfo(np.int64).max)
F = TypeVar("F", bound=Callable[..., object])


def _kernel(function: F) -> F:
    """Compile without fastmath (it would fuse and reorder the sums), releasing the GIL,
    cached on disk where numba finds a writable place (else compiled per process)."""
    try:
        compiled = numba.njit(nogil=True, cache=True, error_model="numpy")(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        compiled = numba.njit(nogil=True, error_model="numpy")(function)
    return compiled  # type: ignore[return-value]


@dataclass(frozen=True)
class KdTree:
    """A balanced kd-tree in heap layout: node ``k`` has children ``2k + 1`` and ``2k + 2``.

    ``points`` holds the avatars leaf by leaf (``points[p] = avatars[order[p]]``);
    node ``k`` holds positions ``begin[k]:end[k]`` and is bounded by
    ``lower[k]``, ``upper[k]``. ``position[j]`` is where avatar ``j`` went.
    """

    points: Float64Array
    order: IndexArray
    position: IndexArray
    begin: IndexArray
    end: IndexArray
    lower: Float64Array
    upper: Float64Array

    @classmethod
    def build(
        cls,
        avatars: npt.ArrayLike,
        leaf_size: int | None = None,
        *,
        threads: int = 1,
        overwrite_input: bool = False,
    ) -> KdTree:
        """Split at the median of the widest coordinate until leaves hold at most ``leaf_size``
        (default :data:`LEAF_SIZE`).

        With ``overwrite_input``, writable contiguous float64 ``avatars`` are reordered in
        place and become :attr:`points` (no copy): for callers that own them.
        """
        avatars = np.ascontiguousarray(avatars, dtype=np.float64)
        n = len(avatars)
        depth = max(0, math.ceil(math.log2(max(n, 1) / (leaf_size or LEAF_SIZE))))
        order = np.arange(n, dtype=np.int64)
        begin = np.zeros((1 << (depth + 1)) - 1, dtype=np.int64)
        end = np.zeros_like(begin)
        end[0] = n
        # The top levels in one thread, then the subtrees below them side by side.
        if threads > 1 and n >= PARALLEL_BUILD_MIN and depth > SHARED_LEVELS:
            top = SHARED_LEVELS
            _split(avatars, order, begin, end, 0, top, 0)
            for _ in parallel_map(
                threads, lambda part: _split(avatars, order, begin, end, top, depth, part), 1 << top
            ):
                pass
        else:
            _split(avatars, order, begin, end, 0, depth, 0)
        if overwrite_input and avatars.flags.writeable:
            _permute_rows(avatars, order)
            points = avatars
        else:
            points = avatars[order]
        lower, upper = _boxes(points, begin, end, depth)
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n, dtype=np.int64)
        return cls(points, order, position, begin, end, lower, upper)

    def count_within(
        self,
        queries: Float64Array,
        thresholds: Float64Array,
        own: IndexArray | None,
        *,
        threads: int = 1,
        cap: int | None = None,
        advance: Callable[[int], None] = lambda done: None,
        closer_than: Float64Array | None = None,
        closer: npt.NDArray[np.bool_] | None = None,
    ) -> CountArray:
        """For each query, the avatars ``j != own[i]`` within ``thresholds[i]``.

        With ``closer_than`` (one squared distance per query, at most its threshold), the
        same walk also sets ``closer[i]``: whether one of those avatars lies within
        ``closer_than[i]`` (a walk capped at ``cap`` goes on until it knows).

        ``own[i]`` is -1 when query ``i`` has no avatar in the tree; ``own=None``
        says query ``i``'s own avatar is avatar ``i`` (one query per avatar).
        Queries run in tree order (by their own avatar's place, or by a leaf near
        them), so that consecutive queries walk nodes already in cache. With
        ``cap``, each count is ``min(count, cap)`` and a walk stops at its
        ``cap``-th rival.
        """
        queries, thresholds, own = linked_queries(queries, thresholds, own, self.points.shape)
        if own is None:  # in tree order: the tree's own arrays, no per-query copies
            own_position, rows = self.own_positions(None), self.order
        else:
            # A query without its avatar here whose ball misses the root box counts 0 (the
            # walk's own first test): it is not walked, nor placed.
            own_position = self.own_positions(own)
            walked = np.flatnonzero((own >= 0) | self.reaches(queries, thresholds))
            place = own_position[walked]
            orphans = np.flatnonzero(place < 0)
            place[orphans] = self.begin[_leaf_of(self.lower, self.upper, queries[walked[orphans]])]
            rows = walked[np.argsort(place, kind="stable")]
        counts = np.zeros(len(queries), dtype=np.int64)
        size = min(max(len(rows) // (4 * threads), MIN_QUERIES_PER_TASK), QUERIES_PER_TASK)
        strict: Float64Array | None = None
        found: npt.NDArray[np.bool_] | None = None
        if closer_than is not None:
            strict = np.ascontiguousarray(closer_than, dtype=np.float64)
            assert closer is not None
            assert strict.shape == (len(queries),) == closer.shape
            found = np.zeros(len(queries), dtype=np.bool_)

        def run(task: int) -> int:
            chosen = rows[task * size : (task + 1) * size]
            _count(self.points, self.begin, self.end, self.lower, self.upper, queries,
                   thresholds, own_position, chosen, limit, counts, no_work, no_costs,
                   strict, found)  # fmt: skip
            return len(chosen)

        limit, no_work = _NO_CAP if cap is None else cap, np.zeros((0, 2), dtype=np.int64)
        no_costs = np.zeros(3)
        for done in parallel_map(threads, run, -(-len(rows) // size)):
            advance(done)
        if closer is not None:
            closer[:] = found
        return counts

    def reaches(self, queries: Float64Array, thresholds: Float64Array) -> npt.NDArray[np.bool_]:
        """Whether each query's ball may reach the tree's box: the walk's test at the root,
        the same operations in the same order (a query it rejects counts 0 here).

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
        """Where each own avatar sits in :attr:`points` (-1 for none); for ``own=None``
        (query ``i`` owns avatar ``i``), :attr:`position` itself."""
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
        ``own=None`` as in :meth:`count_within`. Only the sampled rows are copied."""
        rows = np.asarray(rows, dtype=np.int64)
        mine = self.own_positions(rows if own is None else own[rows])
        work = np.zeros((len(rows), 2), dtype=np.int64)
        found = np.zeros(len(rows), dtype=np.int64)
        _count(self.points, self.begin, self.end, self.lower, self.upper, queries[rows],
               thresholds[rows], mine, np.arange(len(rows)), _NO_CAP if cap is None else cap,
               found, work, np.array([box_cost, point_cost, budget]), None, None)  # fmt: skip
        return work, found


@_kernel
def _split(
    points: Float64Array,
    order: IndexArray,
    begin: IndexArray,
    end: IndexArray,
    first_level: int,
    last_level: int,
    part: int,
) -> None:
    """Split the nodes of levels ``first_level:last_level`` below node ``part`` of
    ``first_level``, level by level, reordering ``order`` and setting each child's range."""
    dim = points.shape[1]
    for level in range(first_level, last_level):
        width = 1 << (level - first_level)
        first = (1 << level) - 1 + part * width
        for node in range(first, first + width):
            lo, hi = begin[node], end[node]
            widest, spread = 0, -1.0
            for k in range(dim):
                smallest, largest = np.inf, -np.inf
                for p in range(lo, hi):
                    value = points[order[p], k]
                    smallest = min(smallest, value)
                    largest = max(largest, value)
                if largest - smallest > spread:
                    widest, spread = k, largest - smallest
            mid = lo + (hi - lo) // 2
            _select(points, order, lo, hi, mid, widest)
            begin[2 * node + 1], end[2 * node + 1] = lo, mid
            begin[2 * node + 2], end[2 * node + 2] = mid, hi


@_kernel
def _select(points: Float64Array, order: IndexArray, lo: int, hi: int, nth: int, k: int) -> None:
    """Partially sort ``order[lo:hi]`` by coordinate ``k`` so that position ``nth`` is in place."""
    hi -= 1
    while lo < hi:
        a, b, c = points[order[lo], k], points[order[(lo + hi) // 2], k], points[order[hi], k]
        pivot = max(min(a, b), min(max(a, b), c))  # median of three
        i, j = lo, hi
        while i <= j:
            while points[order[i], k] < pivot:
                i += 1
            while points[order[j], k] > pivot:
                j -= 1
            if i <= j:
                order[i], order[j] = order[j], order[i]
                i += 1
                j -= 1
        if nth <= j:
            hi = j
        elif nth >= i:
            lo = i
        else:
            return


@_kernel
def _boxes(
    points: Float64Array, begin: IndexArray, end: IndexArray, depth: int
) -> tuple[Float64Array, Float64Array]:
    """The bounding box of every node: leaves from their points, the others from their children."""
    nodes, dim = len(begin), points.shape[1]
    lower = np.empty((nodes, dim))
    upper = np.empty((nodes, dim))
    for node in range(nodes - 1, -1, -1):
        if node >= (1 << depth) - 1:
            for k in range(dim):
                lower[node, k], upper[node, k] = np.inf, -np.inf
            for p in range(begin[node], end[node]):
                for k in range(dim):
                    lower[node, k] = min(lower[node, k], points[p, k])
                    upper[node, k] = max(upper[node, k], points[p, k])
        else:
            for k in range(dim):
                lower[node, k] = min(lower[2 * node + 1, k], lower[2 * node + 2, k])
                upper[node, k] = max(upper[2 * node + 1, k], upper[2 * node + 2, k])
    return lower, upper


@_kernel
def _permute_rows(values: Float64Array, order: IndexArray) -> None:
    """``values[p] = values[order[p]]`` for every ``p`` at once, in place, cycle by cycle."""
    n = len(values)
    done = np.zeros(n, dtype=np.bool_)
    saved = np.empty(values.shape[1])
    for start in range(n):
        if done[start]:
            continue
        saved[:] = values[start]
        j = start
        while True:
            done[j] = True
            k = order[j]
            if k == start:
                values[j] = saved
                break
            values[j] = values[k]
            j = k


@_kernel
def _leaf_of(lower: Float64Array, upper: Float64Array, queries: Float64Array) -> IndexArray:
    """A leaf near each query (descending towards the nearer child box): orders the queries."""
    first_leaf = (len(lower) - 1) // 2
    leaves = np.empty(len(queries), dtype=np.int64)
    for i in range(len(queries)):
        node = 0
        while node < first_leaf:
            left, right = 2 * node + 1, 2 * node + 2
            gap_left, gap_right = 0.0, 0.0
            for k in range(queries.shape[1]):
                q = queries[i, k]
                gap_left += max(lower[left, k] - q, q - upper[left, k], 0.0)
                gap_right += max(lower[right, k] - q, q - upper[right, k], 0.0)
            node = left if gap_left <= gap_right else right
        leaves[i] = node
    return leaves


@_kernel
def _count(
    points: Float64Array,
    begin: IndexArray,
    end: IndexArray,
    lower: Float64Array,
    upper: Float64Array,
    queries: Float64Array,
    thresholds: Float64Array,
    own_position: IndexArray,
    rows: IndexArray,
    cap: int,
    counts: CountArray,
    work: IndexArray,
    costs: Float64Array,
    strict: Float64Array | None,
    closer: npt.NDArray[np.bool_] | None,
) -> None:
    """``min(c_i, cap)`` into ``counts[i]`` for each ``i`` in ``rows``: a depth-first walk of
    the tree per query, which stops once ``cap`` rivals are found.

    With ``strict`` (None: not asked, and numba compiles the walk without it), ``closer[i]``
    also receives whether a rival lies within
    ``strict[i]`` (below the threshold): a box wholly within the threshold is then counted
    whole only where it settles that too (wholly within ``strict[i]``, or wholly beyond it),
    and a walk stops at ``cap`` rivals only once it is known.

    With a non-empty ``work`` (the probe of :meth:`KdTree.walk_work`), ``work[r]`` receives
    the boxes tested and the points compared for query ``rows[r]``, and a walk stops (its
    count then unfinished) once ``boxes * costs[0] + points * costs[1]`` passes ``costs[2]``.
    """
    dim = points.shape[1]
    first_leaf = (len(begin) - 1) // 2
    stack = np.empty(128, dtype=np.int64)
    probing = len(work) > 0
    for r in range(len(rows)):
        i = rows[r]
        threshold = thresholds[i]
        strictly, found = -1.0, True
        if strict is not None:
            strictly, found = strict[i], False
        mine = own_position[i]
        count = 0
        boxes, compared = 0, 0
        stack[0] = 0
        top = 1
        while top > 0 and (count < cap or not found):
            if probing:
                if boxes * costs[0] + compared * costs[1] > costs[2]:
                    break
                boxes += 1
            top -= 1
            node = stack[top]
            near, far = 0.0, 0.0
            for k in range(dim):
                q = queries[i, k]
                below, above = lower[node, k] - q, q - upper[node, k]
                gap = max(below, above, 0.0)
                span = max(q - lower[node, k], upper[node, k] - q)
                near += gap * gap
                far += span * span
            # For a point p in the box, |q_k - p_k| lies in [gap, span] exactly, and
            # rounding is monotone: each fl(q_k - p_k), its square and each partial sum
            # (same order, from 0.0) lie between those of the bounds, so near <= d2(p) <= far.
            if near > threshold:
                continue
            lo, hi = begin[node], end[node]
            if far <= threshold and (found or far <= strictly or near > strictly):
                rivals = hi - lo - (1 if lo <= mine < hi else 0)
                count += rivals
                if far <= strictly and rivals > 0:
                    found = True
            elif node >= first_leaf:
                compared += hi - lo
                for p in range(lo, hi):
                    total = 0.0
                    for k in range(dim):
                        diff = queries[i, k] - points[p, k]
                        total += diff * diff
                    if total <= threshold and p != mine:
                        count += 1
                        if not found and total <= strictly:
                            found = True
                        if count >= cap and found:
                            break
            else:
                stack[top] = 2 * node + 1
                stack[top + 1] = 2 * node + 2
                top += 2
        counts[i] = min(count, cap)
        if closer is not None:
            closer[i] = found
        if probing:
            work[r, 0], work[r, 1] = boxes, compared
