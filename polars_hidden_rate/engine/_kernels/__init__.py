"""Every numba kernel of the engine: the kd-tree's build, its counting walk, its
nearest-two walk.

Each is compiled without fastmath (it would fuse and reorder the sums), so every
distance a kernel compares is the engine's definition
(`squared_distances`): direct differences,
squared and summed in column order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numba
import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray

# A coordinate per inner node (`node_splits`).
SplitDims = npt.NDArray[np.int32]

F = TypeVar("F", bound=Callable[..., object])


def kernel(function: F) -> F:
    """Compile without fastmath (it would fuse and reorder the sums), releasing the GIL,
    cached on disk where numba finds a writable place (else compiled per process)."""
    try:
        compiled = numba.njit(nogil=True, cache=True, error_model="numpy")(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        compiled = numba.njit(nogil=True, error_model="numpy")(function)
    return compiled  # type: ignore[return-value]


@kernel
def split_nodes(
    points: Float64Array,
    order: IndexArray,
    companions: tuple[Float64Array, ...],
    begin: IndexArray,
    end: IndexArray,
    first_level: int,
    last_level: int,
    part: int,
) -> None:
    """Split the nodes of levels ``first_level:last_level`` below node ``part`` of
    ``first_level``, level by level, moving the rows of ``points`` (and ``order`` with them)
    and setting each child's range: each node's rows are then contiguous, so the splits read
    memory in sequence (a permutation through ``order`` missed the cache at every read).
    The rows of each of ``companions`` (2-D float64 arrays) move with them."""
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
                    value = points[p, k]
                    smallest = min(smallest, value)
                    largest = max(largest, value)
                if largest - smallest > spread:
                    widest, spread = k, largest - smallest
            mid = lo + (hi - lo) // 2
            if dim > 0:  # without coordinates every row is the same point: none to read
                select_nth(points, order, companions, lo, hi, mid, widest)
                if hi - lo >= 2:
                    mid = split_between_ties(points, order, companions, lo, hi, mid, widest,
                                             spread)  # fmt: skip
            begin[2 * node + 1], end[2 * node + 1] = lo, mid
            begin[2 * node + 2], end[2 * node + 2] = mid, hi


# Values within this share of a node's spread of its median's count as tied with it when
# the node is split (`split_between_ties`): the levels of a categorical variable, and an
# avatar's mean of equal values off by a rounding.
TIED_SHARE = 2.0**-24


@kernel
def split_between_ties(
    points: Float64Array,
    order: IndexArray,
    companions: tuple[Float64Array, ...],
    lo: int,
    hi: int,
    mid: int,
    k: int,
    spread: float,
) -> int:
    """Where to split rows ``lo:hi``, partitioned at ``mid`` by coordinate ``k`` (`select_nth`):
    the rows tied with the median (within ``TIED_SHARE * spread`` of it) are gathered
    around it, and the split moves to whichever end of them is nearer ``mid``, where that
    leaves each side at least a quarter of the rows (else it stays at ``mid``).

    A median inside a run of equal values (a category's level) put some on either side:
    both children's boxes then touched that value, every query at it walked both, and the
    child that kept two levels was split on them again and again. Split at the end of the
    run, the two boxes lie a level apart. On data without ties the run is the median
    alone and the split stays at ``mid``. Leaves may then hold more than the leaf size."""
    value = points[mid, k]
    reach = spread * TIED_SHARE
    start = mid  # rows lo:mid hold values <= value: the tied ones go to their end
    p = lo
    while p < start:
        if points[p, k] >= value - reach:
            start -= 1
            swap_rows(points, order, companions, p, start)
        else:
            p += 1
    stop = mid  # rows mid:hi hold values >= value: the tied ones go to their start
    p = hi - 1
    while p >= stop:
        if points[p, k] <= value + reach:
            swap_rows(points, order, companions, p, stop)
            stop += 1
        else:
            p -= 1
    least = (hi - lo) // 4
    fits_start = start > lo and start - lo >= least
    fits_stop = stop < hi and hi - stop >= least
    if fits_start and (not fits_stop or mid - start <= stop - mid):
        return start
    if fits_stop:
        return stop
    return mid


@kernel
def swap_rows(
    points: Float64Array, order: IndexArray, companions: tuple[Float64Array, ...], i: int, j: int
) -> None:
    """Swap rows ``i`` and ``j`` of ``points``, ``order`` and each of ``companions``."""
    order[i], order[j] = order[j], order[i]
    for m in range(points.shape[1]):
        points[i, m], points[j, m] = points[j, m], points[i, m]
    for rows in companions:
        for m in range(rows.shape[1]):
            rows[i, m], rows[j, m] = rows[j, m], rows[i, m]


@kernel
def select_nth(
    points: Float64Array,
    order: IndexArray,
    companions: tuple[Float64Array, ...],
    lo: int,
    hi: int,
    nth: int,
    k: int,
) -> None:
    """Partially sort rows ``lo:hi`` of ``points`` (and ``order`` and ``companions`` with
    them) by coordinate ``k`` so that row ``nth`` is in place."""
    hi -= 1
    while lo < hi:
        a, b, c = points[lo, k], points[(lo + hi) // 2, k], points[hi, k]
        pivot = max(min(a, b), min(max(a, b), c))  # median of three
        i, j = lo, hi
        while i <= j:
            while points[i, k] < pivot:
                i += 1
            while points[j, k] > pivot:
                j -= 1
            if i <= j:
                swap_rows(points, order, companions, i, j)
                i += 1
                j -= 1
        if nth <= j:
            hi = j
        elif nth >= i:
            lo = i
        else:
            return


@kernel
def pair_squared_distances(
    originals: Float64Array, avatars: Float64Array, rows: IndexArray, cols: IndexArray
) -> Float64Array:
    """``d2(originals[rows[i]], avatars[cols[i]])`` for each ``i``: the engine's definition
    (`squared_distances`), a pair at a time rather than a column at a time, the same floats."""
    total = np.empty(len(rows))
    for i in range(len(rows)):
        # The difference's sign does not change its square (rounding is symmetric).
        total[i] = point_d2(avatars, cols[i], originals, rows[i])
    return total


@kernel
def gather_column(
    out: Float64Array, column: int, values: Float64Array, rows: IndexArray, start: int, stop: int
) -> None:
    """``out[i, column] = values[rows[i]]`` for ``i`` in ``start:stop``."""
    for i in range(start, stop):
        out[i, column] = values[rows[i]]


@kernel
def node_boxes(
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


@kernel
def permute_rows(values: Float64Array, order: IndexArray) -> None:
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


@kernel
def repeated_rows(points: Float64Array) -> int:
    """How many rows equal the row before them (``==`` on every coordinate)."""
    repeats = 0
    for p in range(1, len(points)):
        same = True
        for k in range(points.shape[1]):
            if points[p, k] != points[p - 1, k]:
                same = False
                break
        if same:
            repeats += 1
    return repeats


@kernel
def distinct_rows(points: Float64Array, bits: npt.NDArray[np.uint64]) -> tuple[IndexArray, int]:
    """``(group, m)``: rows ``p`` and ``q`` share ``group[p] == group[q]`` (in ``0:m``, numbered
    in order of first appearance) exactly when they are equal on every coordinate (``==``:
    -0.0 and 0.0 are one value, which gives every squared difference the same). ``bits`` is
    ``points`` viewed as uint64, hashed by an open-addressing table."""
    n, dim = points.shape
    size = 1
    while size < 2 * n:
        size <<= 1
    mask = np.uint64(size - 1)
    table = np.full(size, -1, dtype=np.int64)  # the first row of each group seen
    group = np.empty(n, dtype=np.int64)
    groups = 0
    for p in range(n):
        h = np.uint64(14695981039346656037)
        for k in range(dim):
            word = np.uint64(0) if points[p, k] == 0.0 else bits[p, k]
            h = (h ^ word) * np.uint64(1099511628211)
            h ^= h >> np.uint64(29)
        slot = h & mask
        while True:
            first = table[slot]
            if first < 0:
                table[slot] = p
                group[p] = groups
                groups += 1
                break
            same = True
            for k in range(dim):
                if points[first, k] != points[p, k]:
                    same = False
                    break
            if same:
                group[p] = group[first]
                break
            slot = (slot + np.uint64(1)) & mask
    return group, groups


@kernel
def leaves_below(
    split_dim: SplitDims, split_value: Float64Array, queries: Float64Array
) -> IndexArray:
    """The leaf whose cell holds each query (`leaf_below`): the node the walks start at."""
    leaves = np.empty(len(queries), dtype=np.int64)
    for i in range(len(queries)):
        leaves[i] = leaf_below(split_dim, split_value, queries, i)
    return leaves


@kernel
def sorted_by_key(keys: IndexArray, count: int) -> IndexArray:
    """The rows of ``keys`` (each in ``0 <= key < count``) sorted by key, rows of one key in
    their order: a counting sort, one pass to count and one to place (a fifth of a stable
    argsort's time for 1e6 rows and 65,536 leaves)."""
    starts = np.zeros(count + 1, dtype=np.int64)
    for key in keys:
        starts[key + 1] += 1
    for key in range(count):
        starts[key + 1] += starts[key]
    order = np.empty(len(keys), dtype=np.int64)
    for row in range(len(keys)):
        key = keys[row]
        order[starts[key]] = row
        starts[key] += 1
    return order


@kernel
def count_walk(
    points: Float64Array,
    begin: IndexArray,
    end: IndexArray,
    lower: Float64Array,
    upper: Float64Array,
    split_dim: SplitDims,
    split_value: Float64Array,
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
    weights: IndexArray | None,
) -> None:
    """``min(c_i, cap)`` into ``counts[i]`` for each ``i`` in ``rows``: from the leaf whose
    cell holds the query (`leaf_below`) up to the root, that leaf and each ancestor's other
    child walked depth first, a box counted whole where it lies wholly within the threshold;
    each walk stops once ``cap`` rivals are found.

    The leaf and the other children of its ancestors hold every point once, and a box is
    counted whole, skipped or opened only on bounds that are exact, so the count is the
    brute force's whatever the start; starting at the query's own leaf, the descent costs
    one comparison per level, not two boxes (1.2 times faster than a walk from the root,
    measured at 1e6 x 5).

    With ``weights`` (None: every point is one avatar, and numba compiles the walk without
    it), point ``p`` stands for ``weights[p + 1] - weights[p]`` identical avatars (a
    collapsed tree, `KdTree.collapsed`): a box holds ``weights[end] - weights[begin]``.

    With ``strict`` (None: not asked, and numba compiles the walk without it), ``closer[i]``
    also receives whether a rival lies within
    ``strict[i]`` (below the threshold): a box wholly within the threshold is then counted
    whole only where it settles that too (wholly within ``strict[i]``, or wholly beyond it),
    and a walk stops at ``cap`` rivals only once it is known.

    With a non-empty ``work`` (the probe of `KdTree.walk_work`), ``work[r]`` receives
    the boxes tested and the points compared for query ``rows[r]``, and a walk stops (its
    count then unfinished) once ``boxes * costs[0] + points * costs[1]`` passes ``costs[2]``.
    """
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
        node = leaf_below(split_dim, split_value, queries, i)
        stack[0] = node  # the query's own leaf (the root where there are no splits)
        top = 1
        while True:
            while top > 0 and (count < cap or not found):
                if probing:
                    if boxes * costs[0] + compared * costs[1] > costs[2]:
                        break
                    boxes += 1
                top -= 1
                below = stack[top]
                near, far = box_bounds(lower, upper, queries, i, below)
                if near > threshold:
                    continue
                lo, hi = begin[below], end[below]
                if far <= threshold and (found or far <= strictly or near > strictly):
                    inside = hi - lo if weights is None else weights[hi] - weights[lo]
                    rivals = inside - (1 if lo <= mine < hi else 0)
                    count += rivals
                    if far <= strictly and rivals > 0:
                        found = True
                elif below >= first_leaf:
                    compared += hi - lo
                    for p in range(lo, hi):
                        total = point_d2(points, p, queries, i)
                        if total <= threshold:
                            here = 1 if weights is None else weights[p + 1] - weights[p]
                            if p == mine:
                                here -= 1
                            if here > 0:
                                count += here
                                if not found and total <= strictly:
                                    found = True
                                if count >= cap and found:
                                    break
                else:
                    stack[top] = 2 * below + 1
                    stack[top + 1] = 2 * below + 2
                    top += 2
            # Stopped (a cap reached, a probe's budget spent) or walked up to the root.
            if top > 0 or node == 0 or (count >= cap and found):
                break
            other, node = climb(node)
            # One coordinate's term of the bound: at most the whole `near` (split_term).
            if split_term(lower, upper, queries, i, other, split_dim[node]) > threshold:
                continue
            stack[0] = other
            top = 1
        counts[i] = min(count, cap)
        if closer is not None:
            closer[i] = found
        if probing:
            work[r, 0], work[r, 1] = boxes, compared


@kernel
def node_splits(lower: Float64Array, upper: Float64Array) -> tuple[SplitDims, Float64Array]:
    """For each inner node, a coordinate and a value that separate its children's boxes:
    the coordinate where the right box starts furthest beyond the left one's end (the
    build's split keeps ``upper[left, k] <= lower[right, k]`` on its coordinate ``k``), and
    the midpoint of that gap. A query descends left when its coordinate is at most the
    value (`leaf_below`): to the cell the build put it in, a leaf near it. An empty child
    (box ``inf`` to ``-inf``) sends every query to the other side. Without coordinates,
    none: the walks then start at the root, whose range holds every point."""
    inner = (len(lower) - 1) // 2 if lower.shape[1] > 0 else 0
    dims = np.zeros(inner, dtype=np.int32)
    values = np.zeros(inner, dtype=np.float64)
    for node in range(inner):
        left, right = 2 * node + 1, 2 * node + 2
        widest, chosen = -np.inf, 0
        for k in range(lower.shape[1]):
            gap = lower[right, k] - upper[left, k]
            if gap > widest:
                widest, chosen = gap, k
        dims[node] = chosen
        # Halved first: the sum of two coordinates near the largest float would overflow.
        values[node] = 0.5 * upper[left, chosen] + 0.5 * lower[right, chosen]
    return dims, values


@kernel
def leaf_below(split_dim: SplitDims, split_value: Float64Array, queries: Float64Array,
               i: int) -> int:  # fmt: skip
    """The leaf whose cell holds query ``i`` (`node_splits`): one comparison per level (the
    root where there are no splits)."""
    node = 0
    while node < len(split_dim):
        node = 2 * node + 1 if queries[i, split_dim[node]] <= split_value[node] else 2 * node + 2
    return node


@kernel
def nearest_two_walk(
    points: Float64Array,
    begin: IndexArray,
    end: IndexArray,
    lower: Float64Array,
    upper: Float64Array,
    split_dim: SplitDims,
    split_value: Float64Array,
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
                    first, second = scan_two(points, begin[below], end[below], queries, i,
                                             first, second)  # fmt: skip
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
def scan_two(points: Float64Array, lo: int, hi: int, queries: Float64Array, i: int,
             first: float, second: float) -> tuple[float, float]:  # fmt: skip
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
    points: Float64Array,
    begin: IndexArray,
    end: IndexArray,
    lower: Float64Array,
    upper: Float64Array,
    split_dim: SplitDims,
    split_value: Float64Array,
    queries: Float64Array,
    thresholds: Float64Array,
    rows: IndexArray,
    reached: npt.NDArray[np.bool_],
) -> None:
    """``reached[i]``: whether a point lies within ``thresholds[i]`` of query ``i``
    (``d2 <= thresholds[i]``), for each ``i`` in ``rows``; the walk of `nearest_two_walk`
    with a fixed bound, stopped at the first such point."""
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
def any_within(points: Float64Array, lo: int, hi: int, queries: Float64Array, i: int,
               threshold: float) -> bool:  # fmt: skip
    """Whether one of points ``lo:hi`` lies within ``threshold`` of query ``i``."""
    for p in range(lo, hi):  # noqa: SIM110  (numba compiles no generator into any())
        if point_d2(points, p, queries, i) <= threshold:
            return True
    return False


@kernel
def climb(node: int) -> tuple[int, int]:
    """``(its sibling, its parent)`` of a node below the root, in heap layout: a walk from a
    query's own leaf takes the sibling's subtree at each step up."""
    return (node + 1 if node % 2 == 1 else node - 1), (node - 1) // 2


@kernel
def point_d2(points: Float64Array, p: int, queries: Float64Array, i: int) -> float:
    """``d2`` of point ``p`` and query ``i``: the engine's definition, direct differences
    squared and summed in column order."""
    total = 0.0
    for k in range(points.shape[1]):
        diff = queries[i, k] - points[p, k]
        total += diff * diff
    return total


@kernel
def box_bounds(lower: Float64Array, upper: Float64Array, queries: Float64Array, i: int,
               node: int) -> tuple[float, float]:  # fmt: skip
    """``(near, far)`` of query ``i`` to ``node``'s box: ``near <= d2(p) <= far`` for every
    point ``p`` in it, exactly.

    For a point p in the box, ``|q_k - p_k|`` lies in ``[gap, span]`` exactly, and rounding
    is monotone: each ``fl(q_k - p_k)``, its square and each partial sum (same order, from
    0.0) lie between those of the bounds, so the float64 ``d2(p)`` itself lies between."""
    near, far = 0.0, 0.0
    for k in range(lower.shape[1]):
        q = queries[i, k]
        gap = max(lower[node, k] - q, q - upper[node, k], 0.0)
        span = max(q - lower[node, k], upper[node, k] - q)
        near += gap * gap
        far += span * span
    return near, far


@kernel
def box_near(lower: Float64Array, upper: Float64Array, queries: Float64Array, i: int,
             node: int) -> float:  # fmt: skip
    """The ``near`` bound of query ``i`` to ``node``'s box: at most the ``d2`` of every point
    in it, exactly (see `box_bounds`)."""
    near = 0.0
    for k in range(lower.shape[1]):
        q = queries[i, k]
        gap = max(lower[node, k] - q, q - upper[node, k], 0.0)
        near += gap * gap
    return near


@kernel
def split_term(lower: Float64Array, upper: Float64Array, queries: Float64Array, i: int,
               node: int, k: int) -> float:  # fmt: skip
    """Coordinate ``k``'s term of `box_near`: at most the whole bound (its terms are >= 0
    and summed in order), and on the coordinate that splits ``node`` from its sibling it
    mostly settles the test alone."""
    q = queries[i, k]
    gap: float = max(lower[node, k] - q, q - upper[node, k], 0.0)
    return gap * gap


@kernel
def tied_match_walk(
    points: Float64Array,
    begin: IndexArray,
    end: IndexArray,
    lower: Float64Array,
    upper: Float64Array,
    split_dim: SplitDims,
    split_value: Float64Array,
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
