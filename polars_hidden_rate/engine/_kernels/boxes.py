"""The kernel of `engine.boxes`: the points strictly inside each query's box."""

from __future__ import annotations

import numpy as np

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine._kernels.common import kernel


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
        counts[q] = found
    return counts
