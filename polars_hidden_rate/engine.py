"""The exact counting engine: coordinate arrays in, local cloaking counts out.

Row ``i`` of ``originals`` is linked to row ``i`` of ``avatars``. For each ``i``
the engine counts the rivals ``j != i`` with ``d2(x_i, y_j) <= T_i``, where
``T_i = d2(x_i, y_i) * (1 + tie_tol)`` and every ``d2`` is the float64 sum of
squared direct differences, taken in column order (:func:`squared_distances`).

Two exact strategies share that definition. The default walks a compiled
kd-tree in float64 (:mod:`polars_hidden_rate.kdtree`). ``"flat"`` finds
candidates in a FAISS flat index in float32: each float32 distance carries an
error bound, a pair is decided in float32 only when it lies outside that bound,
and every pair inside it is settled again in float64 by
:func:`squared_distances`. The GPU path (:mod:`polars_hidden_rate.gpu`) uses
the same float32 preparation and bound.

:func:`count_cloaking` first brings both arrays, exactly, to one canonical scale
(:func:`linked_arrays`): the counts do not change when every coordinate is
multiplied by a power of two, and no square overflows or underflows on the way.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import faiss
import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.checks import check_threads, check_tie_tol
from polars_hidden_rate.kdtree import KdTree, coordinates, linked_queries
from polars_hidden_rate.progress import Progress
from polars_hidden_rate.scale import canonical_scale

Strategy = Literal["auto", "flat", "tree"]
STRATEGIES: tuple[Strategy, ...] = ("auto", "flat", "tree")

FLOAT32_UNIT_ROUNDOFF = 2.0**-24
# An absolute term for float32 results that underflow into subnormals.
FLOAT32_UNDERFLOW_FLOOR = 2.0**-120
FLOAT64_SMALLEST = 2.0**-1074
# Results FAISS may hold for one query chunk: bounds memory when radii are huge.
MAX_RESULTS_PER_CHUNK = 1 << 23


def squared_distances(
    originals: Float64Array,
    avatars: Float64Array,
    rows: IndexArray | slice,
    cols: IndexArray | slice,
) -> Float64Array:
    """Squared Euclidean distances ``d2(originals[rows], avatars[cols])`` in float64.

    This is the definition every count is settled against: direct differences,
    squared and summed in column order. ``rows`` and ``cols`` may be slices (no
    gather: :func:`own_thresholds` pairs row ``i`` with row ``i``).
    """
    pairs = len(range(len(originals))[rows]) if isinstance(rows, slice) else len(rows)
    total = np.zeros(pairs, dtype=np.float64)
    with np.errstate(over="ignore"):  # a square beyond float64's range is inf, as defined
        for k in range(originals.shape[1]):
            diff = originals[rows, k] - avatars[cols, k]
            total += diff * diff
    return total


def own_thresholds(originals: Float64Array, avatars: Float64Array, tie_tol: float) -> Float64Array:
    """``T_i = d2(x_i, y_i) * (1 + tie_tol)``: a rival within ``T_i`` hides record ``i``."""
    every = slice(None)
    thresholds: Float64Array = squared_distances(originals, avatars, every, every) * (1.0 + tie_tol)
    return thresholds


def linked_arrays(
    originals: npt.ArrayLike, avatars: npt.ArrayLike, tie_tol: float
) -> tuple[Float64Array, Float64Array, Float64Array]:
    """Linked coordinates at the canonical scale, as contiguous float64, with each ``T_i``.

    Both arrays are multiplied by one power of two
    (:func:`~polars_hidden_rate.scale.canonical_scale`), exactly unless a
    coordinate falls below the normal range, before any ``d2`` is taken: data
    and the same data times ``2^k`` give bit-identical arrays, hence identical
    counts, and no square can overflow.

    Raises
    ------
    TypeError, ValueError
        When the arrays are not 2-D arrays of numbers of the same shape, hold NaN
        or infinite coordinates, or ``tie_tol`` is not a finite number >= 0.
    """
    tie_tol = check_tie_tol(tie_tol)
    originals, avatars = coordinates("originals", originals), coordinates("avatars", avatars)
    if originals.shape != avatars.shape:
        msg = (
            "`originals` and `avatars` must have the same shape (row i of one is linked to "
            f"row i of the other), got {originals.shape} and {avatars.shape}"
        )
        raise ValueError(msg)
    (originals, avatars), _ = canonical_scale(
        originals, avatars, tie_tol=tie_tol, names=("originals", "avatars")
    )
    return originals, avatars, own_thresholds(originals, avatars, tie_tol)


def check_strategy(strategy: object) -> Strategy:
    """``strategy``, one of :data:`STRATEGIES`."""
    if not (isinstance(strategy, str) and strategy in STRATEGIES):
        msg = f"`strategy` must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}"
        raise ValueError(msg)
    return strategy


@contextlib.contextmanager
def faiss_threads(threads: int | None) -> Iterator[None]:
    """Run FAISS with ``threads`` OpenMP threads (all cores when None), then restore."""
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads or usable_cores())
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as containers set it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def count_cloaking(
    originals: npt.ArrayLike,
    avatars: npt.ArrayLike,
    *,
    tie_tol: float = 1e-9,
    threads: int | None = None,
    strategy: Strategy = "auto",
    progress: bool | None = False,
) -> CountArray:
    """Exact local cloaking of every original against the avatars.

    The arrays are first brought exactly to one canonical scale (:func:`linked_arrays`),
    so the counts do not change when every coordinate is multiplied by a power of two.

    Parameters
    ----------
    originals, avatars
        Arrays of numbers of shape ``(n, d)``, taken as float64; row ``i`` of
        ``avatars`` is the avatar of row ``i`` of ``originals``.
    tie_tol
        Relative tolerance, a finite number >= 0: a rival counts when its squared
        distance is at most ``d2(x_i, y_i) * (1 + tie_tol)``.
    threads
        Threads to count with, at least 1; None uses all cores.
    strategy
        How to find candidates; see :func:`count_within`. Counts never depend on it.
    progress
        Show a progress bar on stderr; None shows it only on a terminal.

    Returns
    -------
    numpy.ndarray
        The counts ``c_i`` as int64, one per original.

    Raises
    ------
    TypeError, ValueError
        On arrays that are not 2-D arrays of finite numbers of one shape, or an
        argument of the wrong type or value; the message names it.

    Examples
    --------
    >>> import numpy as np
    >>> originals = np.array([[0.0], [1.0], [3.0]])
    >>> avatars = np.array([[1.0], [0.0], [3.0]])
    >>> count_cloaking(originals, avatars).tolist()
    [1, 1, 0]
    """
    threads, strategy = check_threads(threads), check_strategy(strategy)
    originals, avatars, thresholds = linked_arrays(originals, avatars, tie_tol)
    own = np.arange(len(originals), dtype=np.int64)
    return count_within(
        originals, thresholds, own, avatars, threads=threads, strategy=strategy, progress=progress
    )


def count_within(
    queries: npt.ArrayLike,
    thresholds: npt.ArrayLike,
    own: npt.ArrayLike,
    avatars: npt.ArrayLike | KdTree,
    *,
    threads: int | None = None,
    strategy: Strategy = "auto",
    progress: bool | None = False,
) -> CountArray:
    """For each query, count the avatars within its threshold, its own avatar aside.

    This is the engine's building block: whole data sets, blocks and shards all
    go through it. It rescales nothing: ``thresholds`` are squared distances in
    the units of the coordinates as given, and a square beyond float64's range
    is inf (below it, 0) there. Bring the data to a sane scale first, as
    :func:`count_cloaking` does with :func:`linked_arrays`.

    Parameters
    ----------
    queries
        Originals, float64 of shape ``(m, d)``.
    thresholds
        ``T_i`` for each query (see :func:`own_thresholds`), in the squared units
        of ``queries``.
    own
        For each query, the row of ``avatars`` holding its own avatar, or -1
        when that avatar is not among them.
    avatars
        The avatars to count, float64 of shape ``(s, d)``, or a
        :class:`~polars_hidden_rate.kdtree.KdTree` already built on them (the
        ``"tree"`` strategy then reuses it; ``own`` still indexes the avatars).
    threads
        Threads to count with, at least 1 (no more than the machine's cores run);
        None uses all cores.
    strategy
        ``"tree"`` (and ``"auto"``) walks a compiled kd-tree of the avatars in
        float64 per query (:mod:`polars_hidden_rate.kdtree`). ``"flat"``
        compares every query with every avatar in a FAISS flat index and
        settles the float32 band in float64; it was measured slower at every
        size and dimension tried (``docs/engine.md``), and stays as the CPU
        twin of the GPU path and an independent check.
    progress
        Show a progress bar on stderr; None shows it only on a terminal.

    Returns
    -------
    numpy.ndarray
        Counts as int64, one per query.

    Raises
    ------
    TypeError, ValueError
        On inconsistent arrays, or an argument of the wrong type or value.
    """
    threads, strategy = check_threads(threads) or usable_cores(), check_strategy(strategy)
    if isinstance(avatars, KdTree):
        tree, points = avatars, avatars.points
    else:
        tree, points = None, coordinates("avatars", avatars)
    queries, thresholds, own = linked_queries(queries, thresholds, own, points.shape)
    if len(queries) == 0 or len(points) == 0:
        return np.zeros(len(queries), dtype=np.int64)
    for name, values in (("queries", queries), ("avatars", points)):
        if not np.isfinite(values).all():
            msg = f"`{name}` hold NaN or infinite coordinates; the counts need finite ones"
            raise ValueError(msg)
    with Progress(len(queries), enabled=progress) as bar:
        if strategy == "flat":
            if tree is not None:
                raise ValueError("the flat strategy takes the avatars, not a kd-tree")
            with faiss_threads(threads):
                return Search.prepare(queries, thresholds, own, points).count_flat(bar)
        if tree is None:
            tree = KdTree.build(points, threads=threads)
        return tree.count_within(queries, thresholds, own, threads=threads, advance=bar.advance)


@dataclass(frozen=True)
class Search:
    """Queries and avatars centred, scaled by a power of two to norms <= 1 and rounded
    to float32 for FAISS, with the float64 originals kept to settle on."""

    queries: Float64Array
    thresholds: Float64Array
    own: IndexArray
    avatars: Float64Array
    query_f32: npt.NDArray[np.float32]
    avatar_f32: npt.NDArray[np.float32]
    scaled_thresholds: Float64Array
    avatar_radius: float
    reference_floor: float

    @classmethod
    def prepare(
        cls,
        queries: Float64Array,
        thresholds: Float64Array,
        own: IndexArray,
        avatars: Float64Array,
    ) -> Search:
        centre = (queries.sum(axis=0) + avatars.sum(axis=0)) / (len(queries) + len(avatars))
        query_coords = queries - centre
        avatar_coords = avatars - centre
        # Scale by a power of two (exact) so that every norm is at most 1.
        largest = max(row_norms(query_coords).max(), row_norms(avatar_coords).max())
        exponent = -math.ceil(math.log2(largest)) if largest > 0 else 0
        avatar_f32 = np.ldexp(avatar_coords, exponent).astype(np.float32)
        # The float64 reference itself rounds absolutely below the normal range.
        floor = np.ldexp((queries.shape[1] + 2) * FLOAT64_SMALLEST, 2 * exponent)
        return cls(
            queries=queries,
            thresholds=thresholds,
            own=own,
            avatars=avatars,
            query_f32=np.ldexp(query_coords, exponent).astype(np.float32),
            avatar_f32=avatar_f32,
            scaled_thresholds=np.ldexp(thresholds, 2 * exponent),
            avatar_radius=float(row_norms(avatar_f32).max()),
            reference_floor=float(min(floor, 16.0)),
        )

    def lifted_avatars(self) -> npt.NDArray[np.float32]:
        """Avatars with the extra coordinate 0 (see :meth:`count_in_flat`)."""
        return np.hstack([self.avatar_f32, np.zeros((len(self.avatar_f32), 1), np.float32)])

    def count_flat(self, bar: Progress) -> CountArray:
        """Every query against every avatar, through one FAISS flat index."""
        index = faiss.IndexFlatL2(self.avatar_f32.shape[1] + 1)
        index.add(self.lifted_avatars())
        chunk = int(np.clip(MAX_RESULTS_PER_CHUNK // len(self.avatars), 16, 4096))
        # A threshold that overflowed to inf holds every avatar: no search needed.
        unbounded = np.isinf(self.thresholds)
        counts = np.where(unbounded, len(self.avatars) - (self.own >= 0), 0).astype(np.int64)
        bounded = np.flatnonzero(~unbounded)
        for start in range(0, len(bounded), chunk):
            rows = bounded[start : start + chunk]
            counts[rows] = self.count_in_flat(index, rows)
            bar.advance(len(rows))
        bar.advance(int(unbounded.sum()))
        return counts

    def count_in_flat(self, index: faiss.IndexFlatL2, rows: IndexArray) -> CountArray:
        """One flat range search over the queries ``rows``, each with its own radius.

        FAISS takes one radius ``R``; query ``i`` gets its own through an extra
        coordinate ``s_i`` (zero for avatars): ``d2 + s_i^2 < R`` iff ``d2 < R - s_i^2``.
        A flat index may use the expanded form ``|x|^2 + |y|^2 - 2x.y``, hence the
        bound of :func:`float32_error_bound`.
        """
        query_f32 = self.query_f32[rows]
        scaled_thresholds = self.scaled_thresholds[rows]
        dim = query_f32.shape[1]
        query_norm2 = row_norms(query_f32) ** 2

        def error_bound(radius: float) -> Float64Array:
            return float32_error_bound(
                query_norm2,
                self.avatar_radius,
                dim,
                lift2=radius,
                reference_floor=self.reference_floor,
            )

        # Find R >= T_i + 2 E_i(R) for all i (a fixed point; E grows slowly with R).
        radius = float(scaled_thresholds.max())
        for _ in range(4):
            radius = float(np.max(scaled_thresholds + 2.0 * error_bound(radius))) * (1 + 2.0**-10)
        radius32 = _float32_at_least(radius)
        bound = error_bound(radius32)
        slack = radius32 - scaled_thresholds - 2.0 * bound
        assert (slack >= 0).all()
        # Round s_i down so that s_i^2 <= R - T_i - 2 E_i: no true rival is pushed out.
        lift = _float32_at_most(slack)

        lims, found_dist, rival = index.range_search(
            np.hstack([query_f32, lift[:, None]]), radius32
        )
        owner = np.repeat(np.arange(len(rows)), np.diff(lims.astype(np.int64)))
        estimate = found_dist.astype(np.float64) - lift[owner].astype(np.float64) ** 2
        return self.settle(rows, owner, rival, estimate - bound[owner], estimate + bound[owner])

    def settle(
        self,
        rows: IndexArray,
        owner: IndexArray,
        rival: IndexArray,
        at_least: Float64Array,
        at_most: Float64Array,
    ) -> CountArray:
        """Count the rivals of each query in ``rows``, its own avatar aside.

        Pair ``p`` joins query ``rows[owner[p]]`` to avatar ``rival[p]``, and its
        scaled squared distance lies in ``[at_least[p], at_most[p]]``. A pair whose
        interval lies on one side of the threshold is decided; the others are
        settled in float64 by :func:`squared_distances`.
        """
        not_own = rival != self.own[rows][owner]
        owner, rival = owner[not_own], rival[not_own]
        at_least, at_most = at_least[not_own], at_most[not_own]
        scaled_thresholds = self.scaled_thresholds[rows][owner]
        sure_in = at_most <= scaled_thresholds
        unsure = ~sure_in & (at_least <= scaled_thresholds)
        queries = rows[owner[unsure]]
        settled = squared_distances(self.queries, self.avatars, queries, rival[unsure])
        inside = settled <= self.thresholds[queries]
        return np.bincount(owner[sure_in], minlength=len(rows)) + np.bincount(
            owner[unsure][inside], minlength=len(rows)
        )


def _float32_at_most(values: Float64Array) -> npt.NDArray[np.float32]:
    """Square roots of ``values``, rounded down to float32: their squares stay within."""
    roots = np.sqrt(values).astype(np.float32)
    too_far = roots.astype(np.float64) ** 2 > values
    roots[too_far] = np.nextafter(roots[too_far], np.float32(0))
    return roots


def _float32_at_least(value: float) -> float:
    """The smallest float32 at least ``value`` (FAISS takes its radius as float32)."""
    rounded = np.float32(value)
    if float(rounded) < value:
        rounded = np.nextafter(rounded, np.float32(np.inf))
    return float(rounded)


def float32_error_bound(
    query_norm2: Float64Array,
    avatar_radius: float,
    dim: int,
    *,
    lift2: float = 0.0,
    reference_floor: float = 0.0,
) -> Float64Array:
    """A bound on ``|float32 FAISS estimate - float64 d2|`` for every pair of a query.

    ``query_norm2`` holds the squared norms of the scaled float32 queries,
    ``avatar_radius`` the largest scaled float32 avatar norm, ``dim`` the
    coordinates before any lift, ``lift2`` a bound on the square of an extra
    query coordinate (0 without one), and ``reference_floor`` the absolute
    rounding of the float64 reference below the normal range.
    """
    # Why it holds: rounding the inputs to float32 costs (2u + u^2)(|x|+|y|)^2, and
    # FAISS's expanded form |x|^2 + |y|^2 - 2x.y over dim + 1 coordinates costs
    # (dim + 3)u(|x'|+|y|)^2 (the standard dot-product bound; direct differences do
    # better); the factor 2 covers second-order terms and the float64 reference.
    augmented_norm = np.sqrt(query_norm2 + lift2)
    bound: Float64Array = (
        2.0 * (dim + 8) * FLOAT32_UNIT_ROUNDOFF * (augmented_norm + avatar_radius) ** 2
        + (dim + 8) * FLOAT32_UNDERFLOW_FLOOR
        + reference_floor
    )
    return bound


def row_norms(coords: npt.NDArray[np.floating]) -> Float64Array:
    """Euclidean norms of the rows, scaled first so that no square overflows."""
    values = coords.astype(np.float64)
    scale = float(np.abs(values).max(initial=0.0))
    if scale == 0.0 or not math.isfinite(scale):
        scale = 1.0
    norms: Float64Array = np.sqrt(((values / scale) ** 2).sum(axis=1)) * scale
    return norms
