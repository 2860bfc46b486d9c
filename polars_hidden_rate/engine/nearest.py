"""Exact nearest and second-nearest original of every avatar, in float64.

Distances follow the engine's definition: direct differences, squared and summed
in column order, no fused multiply-add. Both arrays are first brought, exactly, to
one canonical scale by a power of two
([`canonical_scale`][polars_hidden_rate.engine.scale.canonical_scale]), so no square overflows and
the results are invariant under power-of-two rescaling. A kd-tree of the
originals (`KdTree`) is built once and walked
with the box bounds of its counting walk: a node is skipped only when its lower
bound exceeds the current second-best, which can never drop a point that would
change the two smallest ``d2`` (ties included).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import BoolArray, CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine._kernels import (
    capped_nearest_walk,
    joint_overlaps,
    kth_walk,
    nearest_two_walk,
    reach_walk,
    segment_overlaps,
    sorted_by_key,
    tied_match_walk,
    within_walk,
)
from polars_hidden_rate.engine.arrays import check_rows
from polars_hidden_rate.engine.kdtree import KdTree, queries_per_task
from polars_hidden_rate.engine.parallel import parallel_map, usable_cores
from polars_hidden_rate.engine.scale import canonical_scale
from polars_hidden_rate.progress import Progress

K_NEAREST_WALKS = 3
"""The walks of a `k_nearest` search: its bar advances by each query once a walk."""
TIED_MATCHES_WALKS = 2
"""The walks of a `tied_matches` search (the nearest, then its ties): its bar advances by
each query once a walk."""
FOUND_PER_BLOCK = 1 << 22
"""The records a block of `query_blocks` aims to find: about 100 MB with their sort."""
FIRST_BLOCK = 1024
"""The queries of the first block, before the records found per query are known."""


@dataclass(frozen=True)
class NearestTwo:
    """Per avatar, the distances to its nearest and second-nearest original.

    The distances are kept at the canonical scale
    ([`canonical_scale`][polars_hidden_rate.engine.scale.canonical_scale]); the properties give
    them in the input units.

    Attributes
    ----------
    scaled_nearest, scaled_second
        ``sqrt(d2)`` of the nearest and second-nearest original at the canonical
        scale; ``scaled_second`` is ``inf`` when there is a single original.
    exponent
        The power of two the inputs were multiplied by.
    """

    scaled_nearest: Float64Array
    scaled_second: Float64Array
    exponent: int

    @classmethod
    def from_squared(cls, best: Float64Array, exponent: int) -> NearestTwo:
        """From ``best[j] = (d2 of the nearest, d2 of the second)`` at the canonical scale."""
        return cls(np.sqrt(best[:, 0]), np.sqrt(best[:, 1]), exponent)

    @property
    def nearest(self) -> Float64Array:
        """Euclidean distance from each avatar to its nearest original (the DCR)."""
        return np.ldexp(self.scaled_nearest, -self.exponent)

    @property
    def second(self) -> Float64Array:
        """Euclidean distance from each avatar to its second-nearest original."""
        return np.ldexp(self.scaled_second, -self.exponent)

    @property
    def ratio(self) -> Float64Array:
        """``nearest / second`` (the NNDR), in ``[0, 1]``: 1 when both are 0, 0 with a
        single original. Taken at the canonical scale, where it is the same ratio."""
        second = self.scaled_second
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = self.scaled_nearest / second
        ratio[second == 0.0] = 1.0
        return ratio


def nearest_two(
    originals: Float64Array,
    avatars: Float64Array,
    *,
    threads: int | None = None,
    overwrite_input: bool = False,
    linked: bool = False,
) -> NearestTwo:
    """The nearest and second-nearest original of every avatar, exactly in float64.

    Parameters
    ----------
    originals
        Float64 array of shape ``(n, d)``, ``n >= 1``: the kd-tree is built on it.
    avatars
        Float64 array of shape ``(m, d)``: the queries.
    threads
        Threads to search with; None uses all cores.
    overwrite_input
        Scale both arrays in place and reorder the originals into the kd-tree, when they
        are writable contiguous float64: no copy of them, for callers that own them and do
        not use them afterwards (their contents are then unspecified).
    linked
        Row ``j`` of ``avatars`` is the avatar of row ``j`` of ``originals`` (as many rows):
        the walk takes the avatars in their originals' order in the tree, which puts
        neighbours together as well as sorting them by leaf does, at no cost (that sort
        takes a descent per avatar and 16 bytes each). The results do not depend on the
        order.

    Returns
    -------
    NearestTwo
        Its ``scaled_nearest[j]`` and ``scaled_second[j]`` are the two smallest
        values of ``sqrt(d2(y_j, x_i))`` over the originals (equal when two originals
        tie, or duplicate each other), at the canonical scale.

    Examples
    --------
    >>> import numpy as np
    >>> originals = np.array([[0.0], [1.0], [3.0]])
    >>> found = nearest_two(originals, np.array([[0.5], [3.0], [-2.0]]))
    >>> found.nearest.tolist(), found.second.tolist(), found.ratio.tolist()
    ([0.5, 0.0, 2.0], [0.5, 2.0, 3.0], [1.0, 0.0, 0.6666666666666666])
    """
    points, queries, exponent = scaled_pair(originals, avatars, overwrite_input=overwrite_input)
    if linked and len(queries) != len(points):
        msg = f"linked avatars need one per original, got {len(queries)} for {len(points)}"
        raise ValueError(msg)
    threads = threads or usable_cores()
    tree = KdTree.build(points, threads=threads, overwrite_input=overwrite_input)
    rows = tree.order if linked else None
    found = squared_nearest_two(tree, queries, threads=threads, rows=rows)
    del tree, rows  # before the distances: at 1e8 records, 29 bytes each
    np.sqrt(found, out=found)  # in place: the two columns are the distances
    return NearestTwo(found[:, 0], found[:, 1], exponent)


def scaled_pair(
    originals: Float64Array, avatars: Float64Array, *, overwrite_input: bool = False
) -> tuple[Float64Array, Float64Array, int]:
    """Both arrays at the canonical scale, and its exponent; at least one original is needed.

    Every path (local, Dask) scales here, once, so their distances are the same floats.
    """
    (points, queries), exponent = canonical_scale(
        originals, avatars, overwrite_input=overwrite_input
    )
    if len(points) == 0:
        msg = "there are no originals to measure the avatars' distances to"
        raise ValueError(msg)
    return points, queries, exponent


def squared_nearest_two(
    tree: KdTree, queries: Float64Array, *, threads: int, rows: IndexArray | None = None
) -> Float64Array:
    """``best[j] = (d2 of the nearest, d2 of the second)`` of each query over the points of
    ``tree`` (``inf`` where it has fewer than two), on ``threads`` threads, walking the
    queries in the order ``rows`` (a permutation of them; None: `walk_order`).

    ``d2`` is the exact float64 sum of squared differences in column order, so the two
    smallest over a union of trees are the two smallest of their results
    (`merge_nearest_two`).
    """
    return _walk(tree, queries, threads, 2, rows)


def squared_nearest(
    tree: KdTree,
    queries: Float64Array,
    *,
    threads: int,
    rows: IndexArray | None = None,
    seed: Float64Array | None = None,
    bar: Progress | None = None,
) -> Float64Array:
    """The ``d2`` of each query's nearest point of ``tree`` (``inf`` where it has none): the
    first column of `squared_nearest_two`, the same floats, by a walk that prunes at the
    nearest rather than the second (a quarter faster at d = 5); ``rows`` as there.

    With ``seed``, the ``d2`` of one point of ``tree`` to each query (as
    `squared_distances` takes it), the walks start from it, and ``rows`` may name some of
    the queries only: those are walked, the others' nearest is their seed. For callers
    that know a query's nearest point already (an own avatar no rival hides), or a point
    near it. ``bar`` advances by each query walked."""
    nearest: Float64Array = _walk(tree, queries, threads, 1, rows, seed, bar)[:, 0]
    return nearest


def _walk(
    tree: KdTree,
    queries: Float64Array,
    threads: int,
    columns: int,
    rows: IndexArray | None = None,
    seed: Float64Array | None = None,
    bar: Progress | None = None,
) -> Float64Array:
    """``best`` of ``columns`` (1 or 2) smallest ``d2`` per query, on ``threads`` threads,
    the queries walked in the order ``rows``, from ``seed`` where given (one column)."""
    if rows is None:
        rows = walk_order(tree, queries, threads=threads)
    # Each seeded query at most once; the others, every one.
    _check_walk(tree, queries, rows, every=seed is None)
    best = np.empty((len(queries), columns), dtype=np.float64)
    if seed is not None:
        if columns != 1:
            raise ValueError("a seed is the nearest's d2: it seeds one column")
        if seed.shape != (len(queries),):
            msg = f"`seed` must hold one d2 per query ({len(queries)}), got shape {seed.shape}"
            raise ValueError(msg)
        best[:, 0] = seed
    seeded = seed is not None
    arrays = tree.arrays  # its splits made here, before the threads

    def walk(chosen: IndexArray) -> None:
        nearest_two_walk(arrays, queries, chosen, best, seeded)

    _in_tasks(rows, threads, walk, bar)
    return best


def _check_walk(tree: KdTree, queries: Float64Array, rows: IndexArray, *, every: bool) -> None:
    """The kernels check no index: the queries have the tree's columns, and ``rows`` names
    queries only, each at most once (``every``: each exactly once)."""
    if queries.shape[1:] != tree.points.shape[1:]:
        msg = (
            f"the queries must have the tree's {tree.points.shape[1]} columns, got {queries.shape}"
        )
        raise ValueError(msg)
    check_rows(rows, len(queries), every=every)


def _in_tasks(
    rows: IndexArray,
    threads: int,
    walk: Callable[[IndexArray], None],
    bar: Progress | None = None,
) -> None:
    """``walk`` of the queries ``rows``, cut into tasks (`queries_per_task`) taken in turn by
    ``threads`` threads; the kernels release the GIL. ``bar`` advances by each task's
    queries as it ends."""
    size = queries_per_task(len(rows), threads)

    def task(number: int) -> int:
        chosen = rows[number * size : (number + 1) * size]
        walk(chosen)
        return len(chosen)

    for done in parallel_map(threads, task, -(-len(rows) // size)):
        if bar is not None:
            bar.advance(done)


def capped_nearest(
    tree: KdTree,
    queries: Float64Array,
    *,
    kinds: npt.NDArray[np.int64],
    ranges: Float64Array,
    missing: npt.NDArray[np.int64],
    threads: int,
    bar: Progress | None = None,
) -> Float64Array:
    """Each query's smallest distance to the points of ``tree`` in the capped mixed distance
    of SDMetrics (`capped_pair`), exactly: over the ``len(kinds)`` first columns, a category
    code's 0 or 1 (``kinds`` 0) or a number's ``min(|p - q| / ranges[k], 1)`` (1 when they
    differ where the range is 0 or NaN), 1 when exactly one of the two is missing by the
    indicator column ``missing[k]`` (1: missing; below 0: no indicator) and 0 when both are;
    summed in column order. The tree may be collapsed (copies change no nearest distance).
    ``bar`` advances by each query walked.

    Examples
    --------
    >>> import numpy as np
    >>> tree = KdTree.build(np.array([[0.0], [4.0]]))
    >>> capped_nearest(tree, np.array([[1.0], [9.0]]), kinds=np.array([1]),
    ...     ranges=np.array([4.0]), missing=np.array([-1]), threads=1).tolist()
    [0.25, 1.0]
    """
    width = tree.points.shape[1]
    columns = len(kinds)
    if np.shape(ranges) != (columns,) or np.shape(missing) != (columns,):
        raise ValueError("`kinds`, `ranges` and `missing` must hold one per column")
    if columns > width or any(not (m < 0 or columns <= m < width) for m in missing):
        msg = f"the columns and their indicators must be among the tree's {width} columns"
        raise ValueError(msg)
    nearest = np.full(len(queries), np.inf, dtype=np.float64)
    if tree.avatars == 0:
        return nearest
    queries = np.ascontiguousarray(queries, dtype=np.float64)
    rows = walk_order(tree, queries, threads=threads)
    _check_walk(tree, queries, rows, every=True)
    kinds = np.ascontiguousarray(kinds, dtype=np.int64)
    ranges = np.ascontiguousarray(ranges, dtype=np.float64)
    missing = np.ascontiguousarray(missing, dtype=np.int64)
    arrays = tree.arrays

    def walk(chosen: IndexArray) -> None:
        capped_nearest_walk(arrays, queries, chosen, kinds, ranges, missing, nearest)

    _in_tasks(rows, threads, walk, bar)
    return nearest


def walk_order(tree: KdTree, queries: Float64Array, *, threads: int) -> IndexArray:
    """The queries' rows sorted by the leaf of ``tree`` whose cell holds each, where its
    walk starts (`KdTree.leaves_of`): walked in that order, neighbours follow each other and
    find the nodes they share in the cache (at 1e6 x 5, 0.08 s against 0.39 s for a stable
    argsort of a descent towards the nearer child box, and the walk then 1.1 times faster)."""
    order: IndexArray = sorted_by_key(tree.leaves_of(queries, threads=threads), len(tree.begin))
    return order


def within_reach(
    tree: KdTree,
    queries: Float64Array,
    thresholds: Float64Array,
    *,
    threads: int,
    rows: IndexArray | None = None,
) -> npt.NDArray[np.bool_]:
    """Whether some point of ``tree`` lies within ``thresholds[i]`` of query ``i``
    (``d2 <= thresholds[i]``, exactly), the queries walked in the order ``rows`` (every
    query once; None: `walk_order`, as `squared_nearest_two` does; the points
    of a tree of their own come in order).

    The walk of `squared_nearest`, from the query's own leaf up, with the threshold for
    bound, stopped at the first point within it: cheaper than the nearest point's ``d2``
    to compare with, since a query with a point within reach stops there, and one without
    walks only its ball, not the larger one of its nearest point (and 1.7 times faster
    than the counting walk stopped at one point, measured at 1e6 x 5).

    Examples
    --------
    >>> import numpy as np
    >>> tree = KdTree.build(np.array([[0.0], [2.0]]))
    >>> within_reach(tree, np.array([[1.0], [5.0]]), np.array([1.0, 8.0]), threads=1).tolist()
    [True, False]
    """
    reached = np.zeros(len(queries), dtype=np.bool_)
    if tree.avatars == 0:  # nothing is within reach of anything
        return reached
    if rows is None:
        rows = walk_order(tree, queries, threads=threads)
    queries = np.ascontiguousarray(queries, dtype=np.float64)
    thresholds = np.ascontiguousarray(thresholds, dtype=np.float64)
    _check_walk(tree, queries, rows, every=True)
    if thresholds.shape != (len(queries),):
        msg = f"`thresholds` must hold one per query ({len(queries)}), got {thresholds.shape}"
        raise ValueError(msg)
    if np.isnan(thresholds).any():
        raise ValueError("`thresholds` hold NaN; a squared distance is a number")
    arrays = tree.arrays

    def walk(chosen: IndexArray) -> None:
        reach_walk(arrays, queries, thresholds, chosen, reached)

    _in_tasks(rows, threads, walk)
    return reached


def merge_nearest_two(best: Float64Array, other: Float64Array) -> None:
    """Merge ``other`` into ``best`` in place: per row, the two smallest of the four values.

    Both hold per row ``(smallest, second smallest)`` of a multiset of ``d2``; the result is
    that of their union, duplicates kept (two equal ``d2`` fill both places), exactly.
    """
    first = np.minimum(best[:, 0], other[:, 0])
    # The second is the larger first or the smaller second, whichever is smaller.
    best[:, 1] = np.minimum(
        np.maximum(best[:, 0], other[:, 0]), np.minimum(best[:, 1], other[:, 1])
    )
    best[:, 0] = first


def tied_matches(
    tree: KdTree,
    values: Float64Array,
    queries: Float64Array,
    secrets: Float64Array,
    tolerance: float,
    *,
    tie_tol: float,
    threads: int,
    bar: Progress | None = None,
) -> tuple[CountArray, CountArray]:
    """For each query, how many points of ``tree`` are tied nearest to it, and how many of
    those hold a value that matches its secret: the nearest-record guess of an attribute,
    with ties shared (a guess drawn among the tied records is right with probability
    ``matching / tied``, whatever their order).

    A point is tied nearest when its ``d2`` is at most the nearest's times ``1 + tie_tol``,
    as a rival ties with one's own avatar in a count (`own_thresholds`): two records at the
    same distance in exact arithmetic can differ by a rounding in the coordinates of a
    projection, and ``tie_tol`` keeps them tied.

    Parameters
    ----------
    tree
        The kd-tree of the guessing records (not collapsed: each point one record).
    values
        The guessing records' values, float64 of shape ``(s,)``, in their row order.
    queries
        The targets, at the tree's scale, float64 of shape ``(m, d)``.
    secrets
        Each target's value, float64 of shape ``(m,)``.
    tolerance
        A value matches a finite secret within ``tolerance * |secret|`` (0: equal only);
        NaN matches NaN.
    tie_tol
        The relative tie tolerance on ``d2``, at least 0.
    bar
        Advanced by each query once a walk (`TIED_MATCHES_WALKS`).

    Returns
    -------
    tied, matching
        int64 arrays of shape ``(m,)``; ``tied >= 1`` when the tree holds a point.

    Examples
    --------
    >>> import numpy as np
    >>> tree = KdTree.build(np.array([[0.0], [2.0], [2.0], [-2.0]]))
    >>> tied, matching = tied_matches(
    ...     tree, np.array([1.0, 1.0, 3.0, 1.0]), np.array([[1.9], [0.0]]),
    ...     np.array([1.0, 2.0]), 0.0, tie_tol=0.0, threads=1)
    >>> tied.tolist(), matching.tolist()
    ([2, 1], [1, 0])
    """
    if tree.weights is not None:
        raise ValueError("`tree` must not be collapsed: each point must stand for one record")
    if np.shape(values) != (tree.avatars,):
        msg = (
            f"`values` must hold one per point of the tree ({tree.avatars}), got {np.shape(values)}"
        )
        raise ValueError(msg)
    if np.shape(secrets) != (len(queries),):
        msg = f"`secrets` must hold one per query ({len(queries)}), got {np.shape(secrets)}"
        raise ValueError(msg)
    tolerance = float(tolerance)
    in_tree = np.ascontiguousarray(np.asarray(values, dtype=np.float64)[tree.order])
    secrets = np.ascontiguousarray(secrets, dtype=np.float64)
    rows = walk_order(tree, queries, threads=threads)  # one order for both walks
    thresholds = squared_nearest(tree, queries, threads=threads, rows=rows, bar=bar) * (
        1.0 + tie_tol
    )
    tied = np.zeros(len(queries), dtype=np.int64)
    matching = np.zeros(len(queries), dtype=np.int64)

    arrays = tree.arrays

    def walk(chosen: IndexArray) -> None:
        tied_match_walk(
            arrays, queries, thresholds, in_tree, secrets, tolerance, chosen, tied, matching
        )

    _in_tasks(rows, threads, walk, bar)
    return tied, matching


@dataclass(frozen=True)
class KNearest:
    """Each query's ``k`` nearest points of a tree and those tied with the ``k``-th, as
    segments: query ``i``'s are ``rows[offsets[i]:offsets[i + 1]]`` (the points' rows in the
    tree's input, each once), in the order the walk met them: what is found does not depend
    on it, and sorting the segments costs more than their users' counts.

    Attributes
    ----------
    offsets
        int64 of shape ``(m + 1,)``.
    rows, distances
        Each found point's row and its distance to the query (`k_nearest`'s metric).
    certain
        Whether the point is certainly among the ``k`` nearest: ``distance * (1 + tie_tol)
        < edge``; the others found are tied at the edge, ``distance <= edge * (1 +
        tie_tol)``.
    edge
        Each query's ``k``-th smallest distance, duplicates counted.
    copies
        Each found point's records (`k_nearest`'s ``copies``), None where each is one.
    """

    offsets: IndexArray
    rows: IndexArray
    distances: Float64Array
    certain: BoolArray
    edge: Float64Array
    copies: CountArray | None = None

    @property
    def queries(self) -> IndexArray:
        """The query of each found point."""
        found: IndexArray = np.repeat(
            np.arange(len(self.edge), dtype=np.int64), np.diff(self.offsets)
        )
        return found

    def overlaps(self, other: KNearest, points: int) -> CountArray:
        """Per query, the rows this search and ``other`` (of the same queries, among the same
        ``points``) share, by how each holds them: columns (certain in both, tied here and
        certain there, tied in both, certain here and tied there)."""
        if len(other.edge) != len(self.edge):
            raise ValueError("both searches must be of the same queries")
        shared = np.zeros((len(self.edge), 4), dtype=np.int64)
        segment_overlaps(
            self.offsets,
            self.rows,
            self.certain,
            other.offsets,
            other.rows,
            other.certain,
            int(points),
            shared,
        )
        return shared

    def joint_overlaps(self, other: KNearest, joint: Joint) -> CountArray:
        """`overlaps` where this search's points are the groups ``joint.a`` of the records
        and ``other``'s the groups ``joint.b`` (`Joint`): the records both hold."""
        if len(other.edge) != len(self.edge):
            raise ValueError("both searches must be of the same queries")
        shared = np.zeros((len(self.edge), 4), dtype=np.int64)
        joint_overlaps(
            self.offsets,
            self.rows,
            self.certain,
            other.offsets,
            other.rows,
            other.certain,
            *joint.a,
            *joint.b,
            shared,
        )
        return shared

    def counts(self, mask: BoolArray | None = None) -> CountArray:
        """Per query, how many records the found points ``mask`` (None: every one) holds
        stand for (each one, or its ``copies``)."""
        queries = self.queries if mask is None else self.queries[mask]
        if self.copies is None:
            counted: CountArray = np.bincount(queries, minlength=len(self.edge)).astype(np.int64)
            return counted
        copies = self.copies if mask is None else self.copies[mask]
        weighted = np.bincount(queries, weights=copies, minlength=len(self.edge))
        return weighted.astype(np.int64)


Partners = tuple[IndexArray, IndexArray, CountArray]
"""One side's joint table: group ``g``'s partners on the other side are ``partners[j]``,
holding ``counts[j]`` records, for ``j`` in ``starts[g]:starts[g + 1]``."""


@dataclass(frozen=True)
class Joint:
    """Records grouped two ways (their identical rows on ``A`` and on ``B``), and how many
    records each pair of groups shares, from each side (`Partners`)."""

    a: Partners
    b: Partners

    @classmethod
    def of(cls, group_a: IndexArray, group_b: IndexArray) -> Joint:
        """From each record's group on ``A`` and on ``B`` (from 0, every group used)."""
        groups_a, groups_b = int(group_a.max()) + 1, int(group_b.max()) + 1
        pairs, counts = np.unique(group_a * groups_b + group_b, return_counts=True)
        first, second = pairs // groups_b, pairs % groups_b
        order = np.lexsort((first, second))
        return cls(
            _partners(first, second, counts, groups_a),
            _partners(second[order], first[order], counts[order], groups_b),
        )


def _partners(groups: IndexArray, partners: IndexArray, counts: CountArray, n: int) -> Partners:
    """`Partners` of pairs sorted by ``groups``."""
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(groups, minlength=n), out=starts[1:])
    return starts, partners.astype(np.int64), counts.astype(np.int64)


def distinct_groups(values: Float64Array) -> tuple[Float64Array, IndexArray, CountArray]:
    """The distinct rows of ``values``, each record's group (its row among them) and each
    group's records: identical records are at the same distance from any query, so a
    search among the groups, each standing for its copies, finds the same records."""
    distinct, group, copies = np.unique(
        np.ascontiguousarray(values, dtype=np.float64),
        axis=0,
        return_inverse=True,
        return_counts=True,
    )
    return distinct, group.reshape(-1).astype(np.int64), copies.astype(np.int64)


def k_nearest(
    tree: KdTree,
    queries: Float64Array,
    k: int,
    *,
    tie_tol: float,
    threads: int,
    numeric: int | None = None,
    bar: Progress | None = None,
    copies: CountArray | None = None,
) -> KNearest:
    """The ``k`` nearest points of ``tree`` to each query, exactly, with the points tied at
    the ``k``-th: the records certainly among the nearest and those that may fill its last
    places, whatever the order (`KNearest`). ``copies``: how many records each point (in
    the tree's input order) stands for (None: one each); the ``k`` nearest are counted in
    records, the points found each once with its copies (`distinct_groups`).

    The metric is the engine's ``d2`` (``numeric`` None: the tree and the queries at one
    scale, `canonical_scale`; ties within a factor ``1 + tie_tol``, local cloaking's rule),
    or anonymeter's Gower distance (``numeric`` the count of numeric columns, first, already
    divided by their ranges; the rest category codes): ``sum |q - p|`` over the numeric
    columns in order, then 1 per differing code, the float64 steps of anonymeter's loop.

    Two walks of the tree from each query's own leaf (`kth_walk`, `within_walk`): the first
    finds the ``k``-th smallest distance, the second gathers every point within ``1 +
    tie_tol`` of it. A box is skipped only when its lower bound, which never exceeds a
    point's float64 distance (`box_lower`), is beyond what can matter: no point that ties is
    lost. Linear in the points found, which is ``k`` per query but for ties. ``bar``
    advances by `K_NEAREST_WALKS` units a query.

    Examples
    --------
    >>> import numpy as np
    >>> tree = KdTree.build(np.array([[0.0], [2.0], [2.0], [5.0]]))
    >>> found = k_nearest(tree, np.array([[1.0]]), 2, tie_tol=0.0, threads=1)
    >>> sorted(found.rows.tolist()), found.distances.tolist(), found.certain.tolist()
    ([0, 1, 2], [1.0, 1.0, 1.0], [False, False, False])
    """
    if tree.weights is not None:
        raise ValueError("`tree` must not be collapsed: each point must stand for one record")
    records = tree.avatars if copies is None else int(np.sum(copies))
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= records:
        msg = f"`k` must be an integer from 1 to the tree's {records} records, got {k!r}"
        raise ValueError(msg)
    width = tree.points.shape[1]
    metric = -1 if numeric is None else int(numeric)
    if numeric is not None and not 0 <= metric <= width:
        msg = f"`numeric` must be from 0 to the tree's {width} columns, got {numeric!r}"
        raise ValueError(msg)
    queries = np.ascontiguousarray(queries, dtype=np.float64)
    rows = walk_order(tree, queries, threads=threads)
    _check_walk(tree, queries, rows, every=True)
    m = len(queries)
    edge = np.empty(m, dtype=np.float64)
    arrays = tree.arrays
    if copies is None:
        in_tree = np.ones(len(tree.points), dtype=np.int64)
    else:
        if np.shape(copies) != (tree.avatars,) or np.min(copies, initial=1) < 1:
            msg = f"`copies` must hold a count of at least 1 per point ({tree.avatars})"
            raise ValueError(msg)
        in_tree = np.ascontiguousarray(np.asarray(copies, dtype=np.int64)[tree.order])

    def kth(chosen: IndexArray) -> None:
        kth_walk(arrays, queries, chosen, int(k), metric, in_tree, edge)

    _in_tasks(rows, threads, kth, bar)
    thresholds = edge * (1.0 + tie_tol)
    counts = np.zeros(m, dtype=np.int64)
    offsets = np.zeros(m + 1, dtype=np.int64)
    none_i, none_f = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)

    def count(chosen: IndexArray) -> None:
        within_walk(arrays, queries, thresholds, chosen, metric, counts, offsets, none_i, none_f)

    _in_tasks(rows, threads, count, bar)
    np.cumsum(counts, out=offsets[1:])
    found = np.empty(offsets[-1], dtype=np.int64)
    distances = np.empty(offsets[-1], dtype=np.float64)

    def fill(chosen: IndexArray) -> None:
        within_walk(arrays, queries, thresholds, chosen, metric, counts, offsets, found, distances)

    _in_tasks(rows, threads, fill, bar)
    found = tree.order[found]
    owner = np.repeat(np.arange(m, dtype=np.int64), counts)
    certain = distances * (1.0 + tie_tol) < edge[owner]
    return KNearest(
        offsets, found, distances, certain, edge, None if copies is None else copies[found]
    )


def query_blocks(queries: int, search: Callable[[slice], int]) -> None:
    """``search(rows)`` on consecutive blocks of ``range(queries)``, each sized from the
    records the last found per query so that a block finds about `FOUND_PER_BLOCK`:
    `k_nearest` finds ``k`` records a query but for ties, and where records tie by the
    thousand (categories only) its memory stays bounded. ``search`` returns the records it
    found."""
    start, size = 0, FIRST_BLOCK
    while start < queries:
        rows = slice(start, min(queries, start + size))
        found = search(rows)
        per_query = max(found / (rows.stop - rows.start), 1.0)
        size = max(1, int(FOUND_PER_BLOCK / per_query))
        start = rows.stop


@dataclass(frozen=True)
class TreeSearch:
    """A kd-tree and the queries to search it for, by blocks of queries (`query_blocks`),
    in `k_nearest`'s metric (``numeric`` as there)."""

    tree: KdTree
    queries: Float64Array
    threads: int
    numeric: int | None = None
    copies: CountArray | None = None

    def k_nearest(
        self, rows: slice, k: int, *, tie_tol: float, bar: Progress | None = None
    ) -> KNearest:
        """`k_nearest` of the queries ``rows``."""
        return k_nearest(
            self.tree,
            self.queries[rows],
            k,
            tie_tol=tie_tol,
            threads=self.threads,
            numeric=self.numeric,
            bar=bar,
            copies=self.copies,
        )
