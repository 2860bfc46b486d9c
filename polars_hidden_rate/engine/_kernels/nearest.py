"""The walks that measure rather than count: the nearest two points (`nearest_two_walk`),
whether a point is within reach (`reach_walk`), the points tied nearest and those of them
whose value matches (`tied_match_walk`)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine._kernels.common import (
    TreeArrays,
    box_bounds,
    box_near,
    climb,
    kernel,
    leaf_below,
    point_d2,
    split_term,
)


@kernel
def nearest_two_walk(
    tree: TreeArrays,
    queries: Float64Array,
    rows: IndexArray,
    best: Float64Array,
    seeded: bool,
) -> None:
    """``best[i] = (d2 of the nearest, d2 of the second)`` for each ``i`` in ``rows``: from
    the leaf whose cell holds the query (`leaf_below`) up to the root, each ancestor's other
    child walked depth first, nearer child first, unless its box lies at the second or
    beyond.

    The leaf and the other children of its ancestors hold every point once, so a point
    not compared lies in a box whose bound was at least the second then, which only falls;
    and a point at the second's ``d2`` changes neither value (copies tied with the second
    are never walked down to: on 64 distinct values among 200,000 points, 26 times faster
    than walking to each).
    Starting at the query's own leaf, the second is small before the first box is tested,
    and the descent costs one comparison per level, not two boxes (1.11 to 1.28 times
    faster than a walk from the root, measured at 1e6 x 5).

    With one column in ``best``, ``best[i, 0]`` alone: the walk then prunes at the
    nearest's ``d2`` rather than the second's (a quarter less work, measured at d = 5),
    and finds the same value, the smallest ``d2``. With ``seeded`` (one column only), the
    walk starts from the ``d2`` already in ``best[i, 0]``, that of a point of the tree: it
    prunes at it from the start and ends with the smallest ``d2`` all the same."""
    points, begin, end, lower, upper, split_dim, split_value = tree
    dim = points.shape[1]
    first_leaf = (len(begin) - 1) // 2
    stack = np.empty(128, dtype=np.int64)
    bounds = np.empty(128, dtype=np.float64)
    only_nearest = best.shape[1] == 1
    for i in rows:
        first, second = np.inf, np.inf
        if seeded:
            first = second = best[i, 0]
        node = leaf_below(split_dim, split_value, queries, i)
        first, second = scan_two(points, begin[node], end[node], queries, i, first, second)
        if only_nearest:  # prune at the nearest: no point beyond it can matter
            second = first
        while node > 0:
            other, node = climb(node)
            if split_term(lower, upper, queries, i, other, split_dim[node]) >= second:
                continue
            stack[0], bounds[0] = other, box_near(lower, upper, queries, i, other)
            top = 1
            while top > 0:
                top -= 1
                # near <= d2(p) for every point p of the node, exactly (see `box_bounds`),
                # so a node with near >= second holds no point that changes the two.
                if bounds[top] >= second:
                    continue
                below = stack[top]
                if below >= first_leaf:
                    first, second = scan_two(
                        points, begin[below], end[below], queries, i, first, second
                    )
                    if only_nearest:
                        second = first
                    continue
                left, right = 2 * below + 1, 2 * below + 2
                near_left, near_right = 0.0, 0.0
                for k in range(dim):
                    q = queries[i, k]
                    gap = max(lower[left, k] - q, q - upper[left, k], 0.0)
                    near_left += gap * gap
                    gap = max(lower[right, k] - q, q - upper[right, k], 0.0)
                    near_right += gap * gap
                # The nearer child goes on top, to be walked first; one out of reach stays off.
                near, far = (left, right) if near_left <= near_right else (right, left)
                near_bound, far_bound = min(near_left, near_right), max(near_left, near_right)
                if far_bound < second:
                    stack[top], bounds[top] = far, far_bound
                    top += 1
                if near_bound < second:
                    stack[top], bounds[top] = near, near_bound
                    top += 1
        best[i, 0] = first
        if not only_nearest:
            best[i, 1] = second


@kernel
def scan_two(
    points: Float64Array,
    lo: int,
    hi: int,
    queries: Float64Array,
    i: int,
    first: float,
    second: float,
) -> tuple[float, float]:
    """``(first, second)`` with points ``lo:hi`` compared to query ``i``: the two smallest
    ``d2`` of both, duplicates kept."""
    for p in range(lo, hi):
        total = point_d2(points, p, queries, i)
        if total < first:
            first, second = total, first
        elif total < second:
            second = total
    return first, second


@kernel
def reach_walk(
    tree: TreeArrays,
    queries: Float64Array,
    thresholds: Float64Array,
    rows: IndexArray,
    reached: npt.NDArray[np.bool_],
) -> None:
    """``reached[i]``: whether a point lies within ``thresholds[i]`` of query ``i``
    (``d2 <= thresholds[i]``), for each ``i`` in ``rows``; the walk of `nearest_two_walk`
    with a fixed bound, stopped at the first such point."""
    points, begin, end, lower, upper, split_dim, split_value = tree
    first_leaf = (len(begin) - 1) // 2
    stack = np.empty(128, dtype=np.int64)
    for i in rows:
        threshold = thresholds[i]
        node = leaf_below(split_dim, split_value, queries, i)
        found = any_within(points, begin[node], end[node], queries, i, threshold)
        while node > 0 and not found:
            other, node = climb(node)
            if split_term(lower, upper, queries, i, other, split_dim[node]) > threshold:
                continue
            stack[0] = other
            top = 1
            while top > 0 and not found:
                top -= 1
                below = stack[top]
                near = 0.0  # `box_near` written out: called here, the walk took 1.25x as long
                for k in range(points.shape[1]):
                    q = queries[i, k]
                    gap = max(lower[below, k] - q, q - upper[below, k], 0.0)
                    near += gap * gap
                if near > threshold:
                    continue
                if below >= first_leaf:
                    found = any_within(points, begin[below], end[below], queries, i, threshold)
                else:
                    stack[top], stack[top + 1] = 2 * below + 1, 2 * below + 2
                    top += 2
        reached[i] = found


@kernel
def any_within(
    points: Float64Array, lo: int, hi: int, queries: Float64Array, i: int, threshold: float
) -> bool:
    """Whether one of points ``lo:hi`` lies within ``threshold`` of query ``i``."""
    for p in range(lo, hi):  # noqa: SIM110  (numba compiles no generator into any())
        if point_d2(points, p, queries, i) <= threshold:
            return True
    return False


@kernel
def tied_match_walk(
    tree: TreeArrays,
    queries: Float64Array,
    thresholds: Float64Array,
    values: Float64Array,
    secrets: Float64Array,
    tolerance: float,
    rows: IndexArray,
    tied: CountArray,
    matching: CountArray,
) -> None:
    """For each ``i`` in ``rows``: ``tied[i]``, the points within ``thresholds[i]`` (the
    query's nearest ``d2`` and the tie tolerance: the points tied nearest), and
    ``matching[i]``, those among them whose value matches ``secrets[i]`` (`values_match`).
    ``values`` are in tree order. The walk of `count_walk`: from the query's own leaf up,
    a box wholly within the threshold taken whole."""
    points, begin, end, lower, upper, split_dim, split_value = tree
    first_leaf = (len(begin) - 1) // 2
    stack = np.empty(128, dtype=np.int64)
    for i in rows:
        threshold, secret = thresholds[i], secrets[i]
        total, found = 0, 0
        node = leaf_below(split_dim, split_value, queries, i)
        stack[0] = node
        top = 1
        while True:
            while top > 0:
                top -= 1
                below = stack[top]
                near, far = box_bounds(lower, upper, queries, i, below)
                if near > threshold:
                    continue
                lo, hi = begin[below], end[below]
                if far <= threshold:
                    total += hi - lo
                    for p in range(lo, hi):
                        if values_match(values[p], secret, tolerance):
                            found += 1
                elif below >= first_leaf:
                    for p in range(lo, hi):
                        if point_d2(points, p, queries, i) <= threshold:
                            total += 1
                            if values_match(values[p], secret, tolerance):
                                found += 1
                else:
                    stack[top] = 2 * below + 1
                    stack[top + 1] = 2 * below + 2
                    top += 2
            if node == 0:
                break
            other, node = climb(node)
            if split_term(lower, upper, queries, i, other, split_dim[node]) > threshold:
                continue
            stack[0] = other
            top = 1
        tied[i], matching[i] = total, found


@kernel
def values_match(guess: float, secret: float, tolerance: float) -> bool:
    """Whether ``guess`` infers ``secret``: equal (NaN, a missing value, matches NaN only), or
    within ``tolerance * |secret|`` of a finite ``secret``."""
    if guess == secret or (guess != guess and secret != secret):
        return True
    if not np.isfinite(secret):
        return False  # an infinite secret is matched only by its equal
    return abs(guess - secret) <= tolerance * abs(secret)
