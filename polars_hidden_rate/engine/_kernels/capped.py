"""The nearest walk in a capped mixed distance, SDMetrics' (`capped_nearest_walk`): per
column ``min(|p - q| / range, 1)`` for a number (where the range is 0, 1 when the two
differ), 0 or 1 for a category code, 1 when exactly one of the two is missing and 0 when
both are; the columns' terms summed in order.

A column with missing values carries an indicator column (1: missing), further on in the
points: the box of a node then says whether it holds missing values, present ones, or
both. Each box's lower bound (`capped_box`) sums, in the same order, what every point in
the box adds at least; rounding is monotone (``|p - q| >= gap`` in float64 for ``p`` in the
box, and so its quotient, its cap and the partial sums), so the bound never exceeds a
point's float64 distance, and a box is skipped only when no point in it can be nearer.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.engine._kernels.common import TreeArrays, climb, kernel, leaf_below

CATEGORICAL = 0
"""A column of category codes in `capped_pair`'s ``kinds``; any other value: a number."""


@kernel
def capped_pair(
    points: Float64Array,
    p: int,
    queries: Float64Array,
    i: int,
    kinds: npt.NDArray[np.int64],
    ranges: Float64Array,
    missing: npt.NDArray[np.int64],
) -> float:
    """The distance of point ``p`` and query ``i`` over the ``len(kinds)`` first columns:
    column ``k``'s indicator is column ``missing[k]`` (below 0: none), its range
    ``ranges[k]`` (0 or NaN: 1 when the two differ)."""
    total = 0.0
    for k in range(len(kinds)):
        m = missing[k]
        if m >= 0:
            q_missing, p_missing = queries[i, m] != 0.0, points[p, m] != 0.0
            if q_missing or p_missing:
                total += 0.0 if q_missing and p_missing else 1.0
                continue
        diff = abs(points[p, k] - queries[i, k])
        r = ranges[k]
        if kinds[k] == CATEGORICAL or not r > 0.0:
            total += 1.0 if diff > 0.0 else 0.0
        else:
            total += min(diff / r, 1.0)
    return total


@kernel
def capped_box(
    lower: Float64Array,
    upper: Float64Array,
    queries: Float64Array,
    i: int,
    node: int,
    kinds: npt.NDArray[np.int64],
    ranges: Float64Array,
    missing: npt.NDArray[np.int64],
) -> float:
    """At most `capped_pair` of query ``i`` to every point in ``node``'s box, exactly: a
    missing query adds 0 where the box holds a missing value, else 1; a present one adds 1
    where the box holds only missing values, else its gap to the present ones' box (which
    a missing value, at most 1 and counting 1, never undercuts)."""
    near = 0.0
    for k in range(len(kinds)):
        m = missing[k]
        if m >= 0:
            if queries[i, m] != 0.0:
                near += 1.0 if upper[node, m] == 0.0 else 0.0
                continue
            if lower[node, m] != 0.0:
                near += 1.0
                continue
        q = queries[i, k]
        gap = max(lower[node, k] - q, q - upper[node, k], 0.0)
        r = ranges[k]
        if kinds[k] == CATEGORICAL or not r > 0.0:
            near += 1.0 if gap > 0.0 else 0.0
        else:
            near += min(gap / r, 1.0)
    return near


@kernel
def capped_nearest_walk(
    tree: TreeArrays,
    queries: Float64Array,
    rows: IndexArray,
    kinds: npt.NDArray[np.int64],
    ranges: Float64Array,
    missing: npt.NDArray[np.int64],
    nearest: Float64Array,
) -> None:
    """``nearest[i]``, the smallest `capped_pair` of query ``i`` to the points, for each
    ``i`` in ``rows``: from the query's own leaf up, a box skipped when its bound is at the
    best so far or beyond, the nearer child walked first."""
    points, begin, end, lower, upper, split_dim, split_value = tree
    first_leaf = (len(begin) - 1) // 2
    stack = np.empty(128, dtype=np.int64)
    bounds = np.empty(128, dtype=np.float64)
    for i in rows:
        best = np.inf
        node = leaf_below(split_dim, split_value, queries, i)
        for p in range(begin[node], end[node]):
            best = min(best, capped_pair(points, p, queries, i, kinds, ranges, missing))
        while node > 0:
            other, node = climb(node)
            bound = capped_box(lower, upper, queries, i, other, kinds, ranges, missing)
            if bound >= best:
                continue
            stack[0], bounds[0] = other, bound
            top = 1
            while top > 0:
                top -= 1
                if bounds[top] >= best:
                    continue
                below = stack[top]
                if below >= first_leaf:
                    for p in range(begin[below], end[below]):
                        d = capped_pair(points, p, queries, i, kinds, ranges, missing)
                        best = min(best, d)
                    continue
                left, right = 2 * below + 1, 2 * below + 2
                near_left = capped_box(lower, upper, queries, i, left, kinds, ranges, missing)
                near_right = capped_box(lower, upper, queries, i, right, kinds, ranges, missing)
                near, far = (left, right) if near_left <= near_right else (right, left)
                near_bound, far_bound = min(near_left, near_right), max(near_left, near_right)
                if far_bound < best:
                    stack[top], bounds[top] = far, far_bound
                    top += 1
                if near_bound < best:
                    stack[top], bounds[top] = near, near_bound
                    top += 1
        nearest[i] = best
