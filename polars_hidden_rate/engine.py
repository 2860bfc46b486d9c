"""The exact counting engine: coordinate arrays in, local cloaking counts out.

Row ``i`` of ``originals`` is linked to row ``i`` of ``avatars``. For each ``i``
the engine counts the rivals ``j != i`` with ``d2(x_i, y_j) <= T_i``, where
``T_i = d2(x_i, y_i) * (1 + tie_tol)`` and every ``d2`` is the float64 sum of
squared direct differences, taken in column order (:func:`squared_distances`).

FAISS finds the candidates in float32. Each float32 distance carries an error
bound; a pair is decided in float32 only when it lies outside that bound, and
every pair inside it is settled again in float64 by :func:`squared_distances`.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass

import faiss
import numpy as np
import numpy.typing as npt

Float64Array = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.int64]
CountArray = npt.NDArray[np.int64]

FLOAT32_UNIT_ROUNDOFF = 2.0**-24
# An absolute term for float32 results that underflow into subnormals.
FLOAT32_UNDERFLOW_FLOOR = 2.0**-120
# Results FAISS may hold for one query chunk: bounds memory when radii are huge.
MAX_RESULTS_PER_CHUNK = 1 << 23


def squared_distances(
    originals: Float64Array, avatars: Float64Array, rows: IndexArray, cols: IndexArray
) -> Float64Array:
    """Squared Euclidean distances ``d2(originals[rows], avatars[cols])`` in float64.

    This is the definition every count is settled against: direct differences,
    squared and summed in column order.
    """
    total = np.zeros(len(rows), dtype=np.float64)
    for k in range(originals.shape[1]):
        diff = originals[rows, k] - avatars[cols, k]
        total += diff * diff
    return total


def own_thresholds(originals: Float64Array, avatars: Float64Array, tie_tol: float) -> Float64Array:
    """``T_i = d2(x_i, y_i) * (1 + tie_tol)``: a rival within ``T_i`` hides record ``i``."""
    rows = np.arange(len(originals), dtype=np.int64)
    thresholds: Float64Array = squared_distances(originals, avatars, rows, rows) * (1.0 + tie_tol)
    return thresholds


@contextlib.contextmanager
def faiss_threads(threads: int | None) -> Iterator[None]:
    """Run FAISS with ``threads`` OpenMP threads (all cores when None), then restore."""
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads or os.cpu_count() or 1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


def count_cloaking(
    originals: Float64Array,
    avatars: Float64Array,
    *,
    tie_tol: float = 1e-9,
    threads: int | None = None,
) -> CountArray:
    """Exact local cloaking of every original against the avatars.

    Parameters
    ----------
    originals, avatars
        Float64 arrays of shape ``(n, d)``; row ``i`` of ``avatars`` is the
        avatar of row ``i`` of ``originals``.
    tie_tol
        Relative tolerance: a rival counts when its squared distance is at most
        ``d2(x_i, y_i) * (1 + tie_tol)``.
    threads
        FAISS threads; None uses all cores.

    Returns
    -------
    numpy.ndarray
        The counts ``c_i`` as int64, one per original.

    Examples
    --------
    >>> import numpy as np
    >>> originals = np.array([[0.0], [1.0], [3.0]])
    >>> avatars = np.array([[1.0], [0.0], [3.0]])
    >>> count_cloaking(originals, avatars).tolist()
    [1, 1, 0]
    """
    originals = np.ascontiguousarray(originals, dtype=np.float64)
    avatars = np.ascontiguousarray(avatars, dtype=np.float64)
    thresholds = own_thresholds(originals, avatars, tie_tol)
    own = np.arange(len(originals), dtype=np.int64)
    with faiss_threads(threads):
        return count_within(originals, thresholds, own, avatars)


def count_within(
    queries: Float64Array,
    thresholds: Float64Array,
    own: IndexArray,
    avatars: Float64Array,
) -> CountArray:
    """For each query, count the avatars within its threshold, its own avatar aside.

    Parameters
    ----------
    queries
        Originals, float64 of shape ``(m, d)``.
    thresholds
        ``T_i`` for each query (see :func:`own_thresholds`).
    own
        For each query, the row of ``avatars`` holding its own avatar, or -1
        when that avatar is not among them.
    avatars
        The avatars to count, float64 of shape ``(s, d)``: a caller that prunes
        must pass every avatar that can lie within a query's threshold.

    Returns
    -------
    numpy.ndarray
        Counts as int64, one per query.
    """
    counts = np.zeros(len(queries), dtype=np.int64)
    if len(queries) == 0 or len(avatars) == 0:
        return counts
    centre = np.concatenate([queries, avatars]).mean(axis=0)
    query_coords = queries - centre
    avatar_coords = avatars - centre
    # Scale by a power of two (exact) so that every norm is at most 1.
    largest = max(_norms(query_coords).max(), _norms(avatar_coords).max())
    scale = 2.0 ** -math.ceil(math.log2(largest)) if largest > 0 else 1.0
    query_f32 = (query_coords * scale).astype(np.float32)
    avatar_f32 = (avatar_coords * scale).astype(np.float32)

    index = faiss.IndexFlatL2(avatar_f32.shape[1] + 1)
    index.add(np.hstack([avatar_f32, np.zeros((len(avatar_f32), 1), np.float32)]))
    search = _RangeSearch(index, float(_norms(avatar_f32).max()), queries, avatars)
    chunk = int(np.clip(MAX_RESULTS_PER_CHUNK // len(avatars), 16, 4096))
    for start in range(0, len(queries), chunk):
        part = slice(start, start + chunk)
        counts[part] = search.count(
            np.arange(start, min(start + chunk, len(queries))),
            query_f32[part],
            thresholds[part] * scale**2,
            thresholds[part],
            own[part],
        )
    return counts


@dataclass(frozen=True)
class _RangeSearch:
    """A FAISS flat index over scaled float32 avatars, with the float64 data to settle on."""

    index: faiss.IndexFlatL2
    avatar_radius: float
    queries: Float64Array
    avatars: Float64Array

    def count(
        self,
        rows: IndexArray,
        query_f32: npt.NDArray[np.float32],
        scaled_thresholds: Float64Array,
        thresholds: Float64Array,
        own: IndexArray,
    ) -> CountArray:
        """One range search over a chunk of queries, each with its own radius.

        FAISS takes one radius ``R``; query ``i`` gets its own through an extra
        coordinate ``s_i`` (zero for avatars): ``d2 + s_i^2 < R`` iff ``d2 < R - s_i^2``.
        """
        dim = query_f32.shape[1]
        query_norm2 = _norms(query_f32) ** 2

        def error_bound(radius: float) -> Float64Array:
            return float32_error_bound(query_norm2, self.avatar_radius, dim, lift2=radius)

        # Find R >= T_i + 2 E_i(R) for all i (a fixed point; E grows slowly with R).
        radius = float(scaled_thresholds.max())
        for _ in range(4):
            radius = float(np.max(scaled_thresholds + 2.0 * error_bound(radius))) * (1 + 2.0**-10)
        radius32 = np.float32(radius)
        if float(radius32) < radius:
            radius32 = np.nextafter(radius32, np.float32(np.inf))
        bound = error_bound(float(radius32))
        slack = float(radius32) - scaled_thresholds - 2.0 * bound
        assert (slack >= 0).all()
        # Round s_i down so that s_i^2 <= R - T_i - 2 E_i: no true rival is pushed out.
        lift = np.sqrt(slack).astype(np.float32)
        too_far = lift.astype(np.float64) ** 2 > slack
        lift[too_far] = np.nextafter(lift[too_far], np.float32(0))

        lims, found_dist, rival = self.index.range_search(
            np.hstack([query_f32, lift[:, None]]), float(radius32)
        )
        owner = np.repeat(np.arange(len(rows)), np.diff(lims.astype(np.int64)))
        not_own = rival != own[owner]
        owner, rival = owner[not_own], rival[not_own]
        estimate = found_dist[not_own].astype(np.float64) - lift[owner].astype(np.float64) ** 2
        sure_in = estimate + bound[owner] <= scaled_thresholds[owner]
        unsure = ~sure_in & (estimate - bound[owner] <= scaled_thresholds[owner])
        settled = squared_distances(self.queries, self.avatars, rows[owner[unsure]], rival[unsure])
        inside = settled <= thresholds[owner[unsure]]
        return np.bincount(owner[sure_in], minlength=len(rows)) + np.bincount(
            owner[unsure][inside], minlength=len(rows)
        )


def float32_error_bound(
    query_norm2: Float64Array, avatar_radius: float, dim: int, *, lift2: float = 0.0
) -> Float64Array:
    """A bound on ``|float32 FAISS estimate - float64 d2|`` for every pair of a query.

    ``query_norm2`` holds the squared norms of the float32 queries, ``avatar_radius``
    the largest float32 avatar norm, ``dim`` the coordinates before any lift and
    ``lift2`` a bound on the square of an extra query coordinate (0 without one).
    """
    # Rounding the inputs to float32 costs (2u + u^2)(|x|+|y|)^2, and FAISS's expanded
    # form |x|^2 + |y|^2 - 2x.y over dim + 1 coordinates costs (dim + 3)u(|x'|+|y|)^2
    # (the standard dot-product bound); the factor 2 covers second-order terms.
    augmented_norm = np.sqrt(query_norm2 + lift2)
    bound: Float64Array = (
        2.0 * (dim + 8) * FLOAT32_UNIT_ROUNDOFF * (augmented_norm + avatar_radius) ** 2
        + (dim + 8) * FLOAT32_UNDERFLOW_FLOOR
    )
    return bound


def _norms(coords: npt.NDArray[np.floating]) -> Float64Array:
    norms: Float64Array = np.sqrt((coords.astype(np.float64) ** 2).sum(axis=1))
    return norms
