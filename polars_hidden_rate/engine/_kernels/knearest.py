"""The k-nearest walks, in the engine's squared distance or in anonymeter's Gower distance:
each query's ``k``-th smallest distance (`kth_walk`), then the points within a bound of it
(`within_walk`), counted or gathered; the rows two searches share (`segment_overlaps`).

A metric is chosen by ``numeric``: below 0, the engine's ``d2`` (`point_d2`); else the
Gower distance of anonymeter's loop, the first ``numeric`` columns' absolute differences
summed in order, then 1 added per differing column after them (category codes). Each
box's lower bound (`box_lower`) sums, in the same order, what every point in the box adds
at least: the gap to the box (squared for ``d2``), 1 for a code outside the box's range.
Rounding is monotone, so the bound never exceeds a point's float64 distance (see
`box_bounds`), and a walk that skips a box only when its bound is beyond the distance
that matters loses no point that ties with it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine._kernels.common import (
    TreeArrays,
    box_near,
    climb,
    kernel,
    leaf_below,
    point_d2,
)


@kernel
def pair_distance(
    points: Float64Array, p: int, queries: Float64Array, i: int, numeric: int
) -> float:
    """The distance of point ``p`` and query ``i``: ``d2`` when ``numeric < 0``, else the
    Gower distance (the ``numeric`` first columns' ``|q - p|`` summed in order, then 1 per
    differing column after them), each float64 step as anonymeter's loop takes it."""
    if numeric < 0:
        return point_d2(points, p, queries, i)
    total = 0.0
    for k in range(numeric):
        total += abs(queries[i, k] - points[p, k])
    for k in range(numeric, points.shape[1]):
        if queries[i, k] != points[p, k]:
            total += 1.0
    return total


@kernel
def box_lower(
    lower: Float64Array, upper: Float64Array, queries: Float64Array, i: int, node: int, numeric: int
) -> float:
    """At most `pair_distance` of query ``i`` to every point in ``node``'s box, exactly: the
    gaps to the box in the metric's order (a code outside the box's range differs from every
    code in it)."""
    if numeric < 0:
        return box_near(lower, upper, queries, i, node)
    near = 0.0
    for k in range(numeric):
        q = queries[i, k]
        near += max(lower[node, k] - q, q - upper[node, k], 0.0)
    for k in range(numeric, lower.shape[1]):
        q = queries[i, k]
        if q < lower[node, k] or q > upper[node, k]:
            near += 1.0
    return near


@kernel
def heap_push(heap: Float64Array, value: float) -> None:
    """Put ``value`` in place of the largest of the max-heap ``heap`` (``value`` smaller)."""
    j, n = 0, len(heap)
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and heap[c + 1] > heap[c]:
            c += 1
        if heap[c] <= value:
            break
        heap[j] = heap[c]
        j = c
    heap[j] = value


@kernel
def scan_k(
    points: Float64Array,
    lo: int,
    hi: int,
    queries: Float64Array,
    i: int,
    numeric: int,
    copies: IndexArray,
    heap: Float64Array,
) -> None:
    """Points ``lo:hi`` into the max-heap of the ``k`` smallest distances, duplicates kept:
    point ``p`` stands for ``copies[p]`` records at its distance."""
    for p in range(lo, hi):
        d = pair_distance(points, p, queries, i, numeric)
        left = copies[p]
        while left > 0 and d < heap[0]:
            heap_push(heap, d)
            left -= 1


@kernel
def kth_walk(
    tree: TreeArrays,
    queries: Float64Array,
    rows: IndexArray,
    k: int,
    numeric: int,
    copies: IndexArray,
    edges: Float64Array,
) -> None:
    """``edges[i]``, the ``k``-th smallest distance of query ``i`` to the points (duplicates
    counted, point ``p`` as ``copies[p]`` records; ``inf`` with fewer), for each ``i`` in
    ``rows``: the walk of
    `nearest_two_walk`, from the query's own leaf up, a box skipped when its bound is at the
    ``k``-th so far or beyond (a point there cannot lower it)."""
    points, begin, end, lower, upper, split_dim, split_value = tree
    first_leaf = (len(begin) - 1) // 2
    stack = np.empty(128, dtype=np.int64)
    bounds = np.empty(128, dtype=np.float64)
    heap = np.empty(k, dtype=np.float64)
    for i in rows:
        heap[:] = np.inf
        node = leaf_below(split_dim, split_value, queries, i)
        scan_k(points, begin[node], end[node], queries, i, numeric, copies, heap)
        while node > 0:
            other, node = climb(node)
            bound = box_lower(lower, upper, queries, i, other, numeric)
            if bound >= heap[0]:
                continue
            stack[0], bounds[0] = other, bound
            top = 1
            while top > 0:
                top -= 1
                if bounds[top] >= heap[0]:
                    continue
                below = stack[top]
                if below >= first_leaf:
                    scan_k(points, begin[below], end[below], queries, i, numeric, copies, heap)
                    continue
                left, right = 2 * below + 1, 2 * below + 2
                near_left = box_lower(lower, upper, queries, i, left, numeric)
                near_right = box_lower(lower, upper, queries, i, right, numeric)
                # The nearer child goes on top, to be walked first.
                near, far = (left, right) if near_left <= near_right else (right, left)
                near_bound, far_bound = min(near_left, near_right), max(near_left, near_right)
                if far_bound < heap[0]:
                    stack[top], bounds[top] = far, far_bound
                    top += 1
                if near_bound < heap[0]:
                    stack[top], bounds[top] = near, near_bound
                    top += 1
        edges[i] = heap[0]


@kernel
def within_walk(
    tree: TreeArrays,
    queries: Float64Array,
    thresholds: Float64Array,
    rows: IndexArray,
    numeric: int,
    counts: CountArray,
    offsets: IndexArray,
    found: IndexArray,
    distances: Float64Array,
) -> None:
    """For each ``i`` in ``rows``, the points at a distance of at most ``thresholds[i]``:
    their number in ``counts[i]`` and, where ``found`` is not empty, their positions and
    distances from ``offsets[i]`` on (in walk order). The walk of `tied_match_walk`, from
    the query's own leaf up, a box skipped when its bound is beyond the threshold."""
    points, begin, end, lower, upper, split_dim, split_value = tree
    first_leaf = (len(begin) - 1) // 2
    fill = len(found) > 0
    stack = np.empty(128, dtype=np.int64)
    for i in rows:
        threshold = thresholds[i]
        at = offsets[i] if fill else 0
        total = 0
        node = leaf_below(split_dim, split_value, queries, i)
        stack[0] = node
        top = 1
        while True:
            while top > 0:
                top -= 1
                below = stack[top]
                if box_lower(lower, upper, queries, i, below, numeric) > threshold:
                    continue
                if below >= first_leaf:
                    for p in range(begin[below], end[below]):
                        d = pair_distance(points, p, queries, i, numeric)
                        if d <= threshold:
                            if fill:
                                found[at + total] = p
                                distances[at + total] = d
                            total += 1
                else:
                    stack[top] = 2 * below + 1
                    stack[top + 1] = 2 * below + 2
                    top += 2
            if node == 0:
                break
            other, node = climb(node)
            stack[0] = other
            top = 1
        counts[i] = total


@kernel
def held_column(certain_a: bool, certain_b: bool) -> int:
    """The column of a row both segments hold, by how each holds it (`segment_overlaps`)."""
    if certain_a:
        return 0 if certain_b else 3
    return 1 if certain_b else 2


@kernel
def mark_segment(
    mark: npt.NDArray[np.int8],
    offsets: IndexArray,
    rows: IndexArray,
    certain: npt.NDArray[np.bool_],
    i: int,
    on: bool,
) -> None:
    """Query ``i``'s found rows marked in ``mark`` (1 certain, 2 tied), or unmarked."""
    for p in range(offsets[i], offsets[i + 1]):
        mark[rows[p]] = (1 if certain[p] else 2) if on else 0


@kernel
def segment_overlaps(
    offsets_a: IndexArray,
    rows_a: IndexArray,
    certain_a: npt.NDArray[np.bool_],
    offsets_b: IndexArray,
    rows_b: IndexArray,
    certain_b: npt.NDArray[np.bool_],
    points: int,
    overlaps: CountArray,
) -> None:
    """``overlaps[i]``: the rows query ``i``'s segments of ``a`` and ``b`` share, counted by
    how each holds them: (certain on both, tied on ``a`` and certain on ``b``, tied on both,
    certain on ``a`` and tied on ``b``). Each row is marked in a table of ``points`` and
    unmarked after: linear in the segments, no sort."""
    mark = np.zeros(points, dtype=np.int8)
    for i in range(len(offsets_a) - 1):
        mark_segment(mark, offsets_a, rows_a, certain_a, i, True)
        for p in range(offsets_b[i], offsets_b[i + 1]):
            held = mark[rows_b[p]]
            if held != 0:
                overlaps[i, held_column(held == 1, certain_b[p])] += 1
        mark_segment(mark, offsets_a, rows_a, certain_a, i, False)


@kernel
def count_through_partners(
    overlaps: CountArray,
    i: int,
    offsets: IndexArray,
    rows: IndexArray,
    certain: npt.NDArray[np.bool_],
    starts: IndexArray,
    partners: IndexArray,
    counts: CountArray,
    mark: npt.NDArray[np.int8],
    walked_is_a: bool,
) -> None:
    """`joint_overlaps` for query ``i`` from one side: each found group's partners on the
    other side, where marked, add the records they share."""
    for p in range(offsets[i], offsets[i + 1]):
        g = rows[p]
        for j in range(starts[g], starts[g + 1]):
            held = mark[partners[j]]
            if held == 0:
                continue
            if walked_is_a:
                overlaps[i, held_column(certain[p], held == 1)] += counts[j]
            else:
                overlaps[i, held_column(held == 1, certain[p])] += counts[j]


@kernel
def joint_overlaps(
    offsets_a: IndexArray,
    rows_a: IndexArray,
    certain_a: npt.NDArray[np.bool_],
    offsets_b: IndexArray,
    rows_b: IndexArray,
    certain_b: npt.NDArray[np.bool_],
    starts_a: IndexArray,
    partners_a: IndexArray,
    counts_a: CountArray,
    starts_b: IndexArray,
    partners_b: IndexArray,
    counts_b: CountArray,
    overlaps: CountArray,
) -> None:
    """`segment_overlaps` where each found row is a group of records (records identical on
    its side): the records both segments hold are those whose group on ``a`` and whose
    group on ``b`` were found, counted through the joint table (group ``g`` of ``a`` holds
    ``counts_a[j]`` records of group ``partners_a[j]`` of ``b``, ``j`` in
    ``starts_a[g]:starts_a[g + 1]``; the same from ``b``). Per query, from the side whose
    found groups have fewer partners, the other's marked: linear in those partners."""
    mark_a = np.zeros(len(starts_a) - 1, dtype=np.int8)
    mark_b = np.zeros(len(starts_b) - 1, dtype=np.int8)
    for i in range(len(offsets_a) - 1):
        cost_a, cost_b = 0, 0
        for p in range(offsets_a[i], offsets_a[i + 1]):
            cost_a += starts_a[rows_a[p] + 1] - starts_a[rows_a[p]]
        for p in range(offsets_b[i], offsets_b[i + 1]):
            cost_b += starts_b[rows_b[p] + 1] - starts_b[rows_b[p]]
        if cost_a <= cost_b:
            mark_segment(mark_b, offsets_b, rows_b, certain_b, i, True)
            count_through_partners(
                overlaps, i, offsets_a, rows_a, certain_a, starts_a, partners_a, counts_a,
                mark_b, True,
            )  # fmt: skip
            mark_segment(mark_b, offsets_b, rows_b, certain_b, i, False)
        else:
            mark_segment(mark_a, offsets_a, rows_a, certain_a, i, True)
            count_through_partners(
                overlaps, i, offsets_b, rows_b, certain_b, starts_b, partners_b, counts_b,
                mark_a, False,
            )  # fmt: skip
            mark_segment(mark_a, offsets_a, rows_a, certain_a, i, False)
