"""The kernels of `engine.boxes`: the points strictly inside each query's box, by group, and
the points of a tree in each query's closed box."""

from __future__ import annotations

import numpy as np

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine._kernels.common import TreeArrays, kernel


@kernel
def open_box_counts(
    points: Float64Array,
    starts: IndexArray,
    ends: IndexArray,
    groups: IndexArray,
    lower: Float64Array,
    upper: Float64Array,
    cap: int,
) -> CountArray:
    """For each query ``q``, how many of the points of its group lie strictly inside its
    box (``lower[q, c] < p[c] < upper[q, c]`` in every column ``c``), stopping at ``cap``.

    The points of group ``g`` are rows ``starts[g]`` to ``ends[g]`` (excluded), sorted by
    their first column; a binary search finds the run strictly inside the first column's
    bounds, and only that run is scanned.
    """
    n_queries, d = lower.shape
    counts = np.zeros(n_queries, dtype=np.int64)
    for q in range(n_queries):
        g = groups[q]
        low, high = lower[q, 0], upper[q, 0]
        # first point above `low`
        a, b = starts[g], ends[g]
        while a < b:
            mid = (a + b) // 2
            if points[mid, 0] > low:
                b = mid
            else:
                a = mid + 1
        first = a
        # first point at or above `high`
        a, b = first, ends[g]
        while a < b:
            mid = (a + b) // 2
            if points[mid, 0] < high:
                a = mid + 1
            else:
                b = mid
        found = 0
        for j in range(first, a):
            inside = True
            for c in range(1, d):
                value = points[j, c]
                if not (lower[q, c] < value and value < upper[q, c]):
                    inside = False
                    break
            if inside:
                found += 1
                if found >= cap:
                    break
        counts[q] = min(found, cap)
    return counts


@kernel
def closed_box_counts(
    tree: TreeArrays, weights: IndexArray, lower: Float64Array, upper: Float64Array, cap: int
) -> CountArray:
    """For each query ``q``, how many of the tree's points lie in its closed box
    (``lower[q, c] <= p[c] <= upper[q, c]`` in every column ``c``; infinite bounds leave a
    side open), stopping at ``cap``, point ``p`` standing for ``weights[p + 1] - weights[p]``
    records (cumulative counts in tree order): a node inside the box counts whole, a node
    apart from it is skipped, a leaf across its edge is scanned. Every test is one float64
    comparison, so the count is the scan's (``min(count, cap)``)."""
    n_queries, d = lower.shape
    nodes = len(tree.begin)
    counts = np.zeros(n_queries, dtype=np.int64)
    stack = np.empty(64, dtype=np.int64)
    for q in range(n_queries):
        found = 0
        stack[0] = 0
        top = 1
        while top > 0 and found < cap:
            top -= 1
            node = stack[top]
            if tree.end[node] == tree.begin[node]:
                continue
            apart = False
            inside = True
            for c in range(d):
                if tree.upper[node, c] < lower[q, c] or tree.lower[node, c] > upper[q, c]:
                    apart = True
                    break
                if tree.lower[node, c] < lower[q, c] or tree.upper[node, c] > upper[q, c]:
                    inside = False
            if apart:
                continue
            if inside:
                found += weights[tree.end[node]] - weights[tree.begin[node]]
            elif 2 * node + 1 >= nodes:
                for p in range(tree.begin[node], tree.end[node]):
                    held = True
                    for c in range(d):
                        value = tree.points[p, c]
                        if value < lower[q, c] or value > upper[q, c]:
                            held = False
                            break
                    if held:
                        found += weights[p + 1] - weights[p]
                        if found >= cap:
                            break
            else:
                stack[top] = 2 * node + 1
                stack[top + 1] = 2 * node + 2
                top += 2
        counts[q] = min(found, cap)
    return counts
