"""Which boxes each query's ball may reach: the routing of queries to shards
(`cluster.shards.queries_in_reach`).

A box is reached when ``reach``, the float64 gaps between the query and the box squared and
summed in column order from 0.0, is not above the query's threshold. Rounding is monotone,
so every point of the box is at least ``reach`` from the query: a box left out holds no
point within the threshold, exactly.
"""

from __future__ import annotations

import numpy as np

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.engine._kernels.common import kernel


@kernel
def _first_in_reach(q0: float, threshold: float, high_so_far: Float64Array) -> int:
    """The first position, in the boxes ordered by their lower first coordinate, whose box or
    an earlier one may be in reach: before it, the highest first coordinate of every box so
    far lies so far below ``q0`` that its gap alone passes ``threshold``."""
    begin, end = 0, len(high_so_far)
    while begin < end:
        middle = (begin + end) // 2
        gap = q0 - high_so_far[middle]
        if gap > 0.0 and gap * gap > threshold:
            begin = middle + 1
        else:
            end = middle
    return begin


@kernel
def _reach(queries: Float64Array, i: int, low: Float64Array, high: Float64Array, b: int) -> float:
    """``reach`` of query ``i`` to box ``b``: ``max(low - q, q - high, 0)`` per column,
    squared and summed in column order (as `cluster.shards.reach_mask`)."""
    total = 0.0
    for k in range(low.shape[1]):
        q = queries[i, k]
        gap = max(max(low[b, k] - q, q - high[b, k]), 0.0)
        total += gap * gap
    return total


@kernel
def boxes_in_reach(
    queries: Float64Array,
    thresholds: Float64Array,
    low: Float64Array,
    high: Float64Array,
    fill: bool,
    counts: IndexArray,
    starts: IndexArray,
    rows: IndexArray,
) -> None:
    """For each box ``b`` (``low[b]``, ``high[b]``), the queries whose ball may reach it. The
    boxes must be ordered by ``low[:, 0]``.

    Without ``fill``, counts them in ``counts``; with it, writes box ``b``'s queries, in
    ascending order, into ``rows[starts[b]:starts[b] + counts[b]]``, and ``counts`` (zeroed
    by the caller) counts them again. The scan of a query starts at the first box in reach
    of its first coordinate alone, and stops at the first box whose lower first coordinate
    is out of reach (all later ones are further), so it costs the boxes near it only.
    """
    boxes = len(low)
    high_so_far = np.empty(boxes)
    top = -np.inf
    for b in range(boxes):
        top = max(top, high[b, 0])
        high_so_far[b] = top
    for i in range(len(queries)):
        q0, threshold = queries[i, 0], thresholds[i]
        for b in range(_first_in_reach(q0, threshold, high_so_far), boxes):
            ahead = low[b, 0] - q0
            if ahead > 0.0 and ahead * ahead > threshold:
                break
            if _reach(queries, i, low, high, b) > threshold:
                continue
            if fill:
                rows[starts[b] + counts[b]] = i
            counts[b] += 1
