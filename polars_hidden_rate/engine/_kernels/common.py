"""What every kernel shares: the compilation (`kernel`), the tree as one value (`TreeArrays`),
and the steps of every walk: a query's own leaf, the step up, a point's ``d2`` and a box's
bounds.

Each kernel is compiled without fastmath (it would fuse and reorder the sums), so every
distance a kernel compares is the engine's definition (`squared_distances`): direct
differences, squared and summed in column order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeVar

import numba
import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import Float64Array, IndexArray

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


class TreeArrays(NamedTuple):
    """A kd-tree as the walks take it, one value (`KdTree.arrays`): numba passes a named
    tuple of arrays to a kernel as the arrays themselves, unboxed once per call.

    Heap layout (node ``k`` has children ``2k + 1`` and ``2k + 2``): node ``k`` holds the
    points ``begin[k]:end[k]`` of ``points`` and is bounded by ``lower[k]``, ``upper[k]``;
    inner node ``k`` is split on coordinate ``split_dim[k]`` at ``split_value[k]``
    (`node_splits`)."""

    points: Float64Array
    begin: IndexArray
    end: IndexArray
    lower: Float64Array
    upper: Float64Array
    split_dim: SplitDims
    split_value: Float64Array


# numba's on-disk cache index pickles a signature's types by name: an index written when
# this tuple was named FlatTree must still unpickle (it is then stale and recompiled), not
# fail the first count after an upgrade.
FlatTree = TreeArrays


@kernel
def leaf_below(
    split_dim: SplitDims, split_value: Float64Array, queries: Float64Array, i: int
) -> int:
    """The leaf whose cell holds query ``i`` (`node_splits`): one comparison per level (the
    root where there are no splits)."""
    node = 0
    while node < len(split_dim):
        node = 2 * node + 1 if queries[i, split_dim[node]] <= split_value[node] else 2 * node + 2
    return node


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
def box_bounds(
    lower: Float64Array, upper: Float64Array, queries: Float64Array, i: int, node: int
) -> tuple[float, float]:
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
def box_near(
    lower: Float64Array, upper: Float64Array, queries: Float64Array, i: int, node: int
) -> float:
    """The ``near`` bound of query ``i`` to ``node``'s box: at most the ``d2`` of every point
    in it, exactly (see `box_bounds`)."""
    near = 0.0
    for k in range(lower.shape[1]):
        q = queries[i, k]
        gap = max(lower[node, k] - q, q - upper[node, k], 0.0)
        near += gap * gap
    return near


@kernel
def split_term(
    lower: Float64Array, upper: Float64Array, queries: Float64Array, i: int, node: int, k: int
) -> float:
    """Coordinate ``k``'s term of `box_near`: at most the whole bound (its terms are >= 0
    and summed in order), and on the coordinate that splits ``node`` from its sibling it
    mostly settles the test alone."""
    q = queries[i, k]
    gap: float = max(lower[node, k] - q, q - upper[node, k], 0.0)
    return gap * gap
