"""The kernels of the tree's build: the splits that move the rows (`split_nodes`), the boxes
and splits of the nodes, the rows put back, the exact hash of duplicated rows, the counting
sort by leaf and the descent to each query's leaf."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.engine._kernels.common import SplitDims, TreeArrays, kernel, leaf_below


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
                    mid = split_between_ties(points, order, companions, lo, hi, mid, widest, spread)
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
def leaves_below(tree: TreeArrays, queries: Float64Array) -> IndexArray:
    """The leaf whose cell holds each query (`leaf_below`): the node the walks start at."""
    leaves = np.empty(len(queries), dtype=np.int64)
    for i in range(len(queries)):
        leaves[i] = leaf_below(tree.split_dim, tree.split_value, queries, i)
    return leaves
