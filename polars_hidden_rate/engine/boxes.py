"""Counts of points strictly inside open boxes, by group: the matching step of
[`correlation_protection_rate`][polars_hidden_rate.correlation_protection_rate]; counts of
points in closed boxes: the matching step of
[`singling_out_risk`][polars_hidden_rate.singling_out_risk].

A point matches a query when it belongs to the query's group and lies strictly between the
query's bounds in every column. The bounds are given, already rounded as the caller defines
them; nothing here adds or rounds, so each comparison is one float64 comparison.
"""

from __future__ import annotations

import numpy as np

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine._kernels import boxes_in_reach, closed_box_counts, open_box_counts
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.parallel import parallel_map

# Queries per task handed to a thread by `count_in_closed_boxes`.
BOX_QUERIES_PER_TASK = 4096


def count_in_boxes(
    points: Float64Array,
    point_groups: IndexArray,
    lower: Float64Array,
    upper: Float64Array,
    query_groups: IndexArray,
    n_groups: int,
    cap: int = 2,
) -> CountArray:
    """How many points of each query's group lie strictly inside its box, capped at ``cap``.

    Parameters
    ----------
    points
        ``(m, d)`` float64 values, ``d >= 1``, no NaN.
    point_groups
        ``(m,)`` group of each point, in ``[0, n_groups)``.
    lower, upper
        ``(q, d)`` bounds of each query's box: a point ``p`` is inside when
        ``lower[c] < p[c] < upper[c]`` for every ``c`` (a NaN bound holds nothing).
    query_groups
        ``(q,)`` group of each query, in ``[0, n_groups)``.
    n_groups
        Number of groups.
    cap
        Counting stops there (at least 1).

    Returns
    -------
    numpy.ndarray
        ``(q,)`` int64 counts in ``[0, cap]``.
    """
    points = np.ascontiguousarray(points, dtype=np.float64)
    point_groups = np.asarray(point_groups, dtype=np.int64)
    order = np.lexsort((points[:, 0], point_groups))
    sorted_points = np.ascontiguousarray(points[order])
    sorted_groups = point_groups[order]
    group_ids = np.arange(n_groups, dtype=np.int64)
    starts = np.searchsorted(sorted_groups, group_ids, side="left").astype(np.int64)
    ends = np.searchsorted(sorted_groups, group_ids, side="right").astype(np.int64)
    return open_box_counts(
        sorted_points,
        starts,
        ends,
        np.asarray(query_groups, dtype=np.int64),
        np.ascontiguousarray(lower, dtype=np.float64),
        np.ascontiguousarray(upper, dtype=np.float64),
        int(cap),
    )


def count_in_closed_boxes(
    points: Float64Array,
    lower: Float64Array,
    upper: Float64Array,
    *,
    cap: int | None = None,
    threads: int = 1,
) -> CountArray:
    """How many ``points`` lie in each query's closed box, ``lower[q, c] <= p[c] <=
    upper[q, c]`` in every column ``c`` (an infinite bound leaves that side open), stopping
    at ``cap`` (None: none): exact counts from a kd-tree of the points
    (`closed_box_counts`), whole nodes counted at once.

    ``points`` is ``(m, d)`` float64 without NaN, ``lower`` and ``upper`` ``(q, d)``.
    """
    limit = int(np.iinfo(np.int64).max) if cap is None else int(cap)
    lower = np.ascontiguousarray(lower, dtype=np.float64)
    upper = np.ascontiguousarray(upper, dtype=np.float64)
    counts = np.zeros(len(lower), dtype=np.int64)
    if len(points) == 0 or len(lower) == 0:
        return counts
    # Where points repeat heavily (columns of few values), each distinct one once, weighted
    # by its copies (`KdTree.build_collapsed`): built and walked in a fraction of the time.
    built = KdTree.build_collapsed(points, threads=threads) or KdTree.build(points, threads=threads)
    weights = (
        np.arange(len(built.points) + 1, dtype=np.int64) if built.weights is None else built.weights
    )
    tree = built.arrays
    tasks = -(-len(lower) // BOX_QUERIES_PER_TASK)

    def run(task: int) -> None:
        rows = slice(task * BOX_QUERIES_PER_TASK, (task + 1) * BOX_QUERIES_PER_TASK)
        counts[rows] = closed_box_counts(tree, weights, lower[rows], upper[rows], limit)

    for _ in parallel_map(threads, run, tasks):
        pass
    return counts


def queries_reaching(
    queries: Float64Array,
    thresholds: Float64Array,
    low: Float64Array,
    high: Float64Array,
) -> list[IndexArray]:
    """For each box ``b`` (``low[b]`` to ``high[b]``), the rows, ascending, of the queries
    whose ball may reach it (``reach``, the gaps squared and summed in column order from 0.0,
    not above the threshold: exact, as rounding is monotone). The kernel (`boxes_in_reach`)
    runs twice, to count, then to fill."""
    by_low = np.argsort(low[:, 0], kind="stable")
    position = np.empty(len(low), dtype=np.int64)
    position[by_low] = np.arange(len(low))
    arguments = (
        np.ascontiguousarray(queries, dtype=np.float64),
        np.ascontiguousarray(thresholds, dtype=np.float64),
        np.ascontiguousarray(low[by_low], dtype=np.float64),
        np.ascontiguousarray(high[by_low], dtype=np.float64),
    )
    counts, none = np.zeros(len(low), dtype=np.int64), np.empty(0, dtype=np.int64)
    boxes_in_reach(*arguments, False, counts, none, none)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    rows = np.empty(int(counts.sum()), dtype=np.int64)
    boxes_in_reach(*arguments, True, np.zeros_like(counts), starts, rows)
    return [rows[starts[j] : starts[j] + counts[j]] for j in position]
