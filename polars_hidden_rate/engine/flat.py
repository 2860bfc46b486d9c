"""The FAISS band: candidates from a flat index in float32, settled in float64.

Queries and avatars are centred and scaled by a power of two for float32; each
float32 distance FAISS returns carries an error bound (`float32_error_bound`),
a pair is decided in float32 only when it lies outside that bound, and every pair
inside it is settled again in float64 by `engine.squared_distances`. The flat strategy of the engine
(`count_flat`) and the GPU path (`polars_hidden_rate.engine.gpu`) share it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass

import faiss
import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import BoolArray, CountArray, Float64Array, IndexArray
from polars_hidden_rate.checks import invariant
from polars_hidden_rate.engine.arrays import squared_distances
from polars_hidden_rate.engine.parallel import usable_cores
from polars_hidden_rate.progress import Progress

FLOAT32_UNIT_ROUNDOFF = 2.0**-24
# An absolute term for float32 results that underflow into subnormals.
FLOAT32_UNDERFLOW_FLOOR = 2.0**-120
FLOAT64_SMALLEST = 2.0**-1074
# Results FAISS may hold for one query chunk: bounds memory when radii are huge.
MAX_RESULTS_PER_CHUNK = 1 << 23


def count_flat(
    queries: Float64Array,
    thresholds: Float64Array,
    own: IndexArray,
    avatars: Float64Array,
    *,
    threads: int,
    bar: Progress,
    cap: int | None = None,
) -> CountArray:
    """Every query against every avatar in one FAISS flat index, on ``threads`` threads;
    with ``cap``, each count is ``min(count, cap)``."""
    with faiss_threads(threads):
        return Search.prepare(queries, thresholds, own, avatars).count_flat(bar, cap)


@contextlib.contextmanager
def faiss_threads(threads: int | None) -> Iterator[None]:
    """Run FAISS with ``threads`` OpenMP threads (all cores when None), then restore."""
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads or usable_cores())
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


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
        """Avatars with the extra coordinate 0 (see `count_in_flat`)."""
        return np.hstack([self.avatar_f32, np.zeros((len(self.avatar_f32), 1), np.float32)])

    def count_flat(self, bar: Progress, cap: int | None = None) -> CountArray:
        """Every query against every avatar, through one FAISS flat index (counts capped at
        ``cap``, when given)."""
        index = faiss.IndexFlatL2(self.avatar_f32.shape[1] + 1)
        index.add(self.lifted_avatars())
        chunk = int(np.clip(MAX_RESULTS_PER_CHUNK // len(self.avatars), 16, 4096))
        # A threshold that overflowed to inf holds every avatar: no search needed.
        unbounded = np.isinf(self.thresholds)
        counts = np.where(unbounded, len(self.avatars) - (self.own >= 0), 0).astype(np.int64)
        bounded = np.flatnonzero(~unbounded)
        for start in range(0, len(bounded), chunk):
            rows = bounded[start : start + chunk]
            counts[rows] = self.count_in_flat(index, rows, cap)
            bar.advance(len(rows))
        bar.advance(int(unbounded.sum()))
        return counts if cap is None else np.minimum(counts, cap)

    def count_in_flat(
        self, index: faiss.IndexFlatL2, rows: IndexArray, cap: int | None = None
    ) -> CountArray:
        """One flat range search over the queries ``rows``, each with its own radius.

        FAISS takes one radius ``R``; query ``i`` gets its own through an extra
        coordinate ``s_i`` (zero for avatars): ``d2 + s_i^2 < R`` iff ``d2 < R - s_i^2``.
        A flat index may use the expanded form ``|x|^2 + |y|^2 - 2x.y``, hence the
        bound of `float32_error_bound`.
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
        invariant(bool((slack >= 0).all()), "the flat band's radius leaves every slack >= 0")
        # Round s_i down so that s_i^2 <= R - T_i - 2 E_i: no true rival is pushed out.
        lift = _float32_at_most(slack)

        lims, found, rival = index.range_search(np.hstack([query_f32, lift[:, None]]), radius32)
        return self.settle_found(rows, lims, found, rival, lift, bound, cap)

    def settle_found(
        self,
        rows: IndexArray,
        lims: IndexArray,
        found: npt.NDArray[np.float32],
        rival: IndexArray,
        lift: npt.NDArray[np.float32],
        bound: Float64Array,
        cap: int | None = None,
    ) -> CountArray:
        """Count the rivals of each query in ``rows`` from a range search's results, its own
        avatar aside (at most ``cap``): `settle` on FAISS's float32 values as they are.

        Query ``k`` holds the pairs ``lims[k]:lims[k + 1]`` of ``found`` (FAISS's lifted
        distances) and ``rival``. Its interval ``[found - s_k^2 - E_k, found - s_k^2 + E_k]``
        lies below ``T_k`` when ``found`` is at most a cutoff ``T_k + s_k^2 - E_k`` and above
        it past ``T_k + s_k^2 + E_k``, each computed once per query, in float64, and moved by
        more than its rounding the safe way (toward settling): no pair needs a float64 copy,
        and only the band between the cutoffs is gathered and settled by
        `squared_distances`. The own avatar is counted like any other, then taken off
        where it lies within ``T_k`` in float64, as the settled count would say.
        """
        lims = lims.astype(np.int64)  # FAISS gives size_t
        sizes = lims[1:] - lims[:-1]
        thresholds = self.scaled_thresholds[rows]
        lift2 = lift.astype(np.float64) ** 2  # exact: a float32 squared fits in float64
        base = thresholds + lift2
        margin = 8.0 * 2.0**-53 * (base + bound)  # exceeds the roundings of both cutoffs
        sure_cut = (base - bound) - margin
        maybe_cut = (base + bound) + margin
        sure = found <= np.repeat(sure_cut, sizes)
        counts = _segment_sums(sure, lims)  # the own avatar included
        band = np.flatnonzero(~sure)  # few where rivals are many: the rest is one pass
        owner = np.searchsorted(lims, band, side="right") - 1
        inside = found[band] <= maybe_cut[owner]
        band, owner = band[inside], owner[inside]
        if cap is not None:
            # One more than cap sure (the own among them, perhaps) needs no settling.
            keep = counts[owner] <= cap
            band, owner = band[keep], owner[keep]
        queries = rows[owner]
        settled = squared_distances(self.queries, self.avatars, queries, rival[band])
        counts += np.bincount(owner[settled <= self.thresholds[queries]], minlength=len(rows))
        own = self.own[rows]
        has_own = np.flatnonzero(own >= 0)
        own_rows = rows[has_own]
        # Rows gathered once, then the same column-order sum (strided columns, no gathers).
        own_query, own_avatar = self.queries[own_rows], self.avatars[own[has_own]]
        own_d2 = squared_distances(own_query, own_avatar, slice(None), slice(None))
        counts[has_own[own_d2 <= self.thresholds[own_rows]]] -= 1
        return counts if cap is None else np.minimum(counts, cap)

    def settle(
        self,
        rows: IndexArray,
        owner: IndexArray,
        rival: IndexArray,
        at_least: Float64Array,
        at_most: Float64Array,
        cap: int | None = None,
    ) -> CountArray:
        """Count the rivals of each query in ``rows``, its own avatar aside (at most ``cap``).

        Pair ``p`` joins query ``rows[owner[p]]`` to avatar ``rival[p]``, and its
        scaled squared distance lies in ``[at_least[p], at_most[p]]``. A pair whose
        interval lies on one side of the threshold is decided; the others are
        settled in float64 by `squared_distances`, but only for queries that
        the decided pairs leave below ``cap``.
        """
        not_own = rival != self.own[rows][owner]
        owner, rival = owner[not_own], rival[not_own]
        at_least, at_most = at_least[not_own], at_most[not_own]
        scaled_thresholds = self.scaled_thresholds[rows][owner]
        sure_in = at_most <= scaled_thresholds
        unsure = ~sure_in & (at_least <= scaled_thresholds)
        sure = np.bincount(owner[sure_in], minlength=len(rows))
        if cap is not None:
            unsure &= sure[owner] < cap  # a query with cap sure rivals needs no more
        queries = rows[owner[unsure]]
        settled = squared_distances(self.queries, self.avatars, queries, rival[unsure])
        inside = settled <= self.thresholds[queries]
        counts: CountArray = sure + np.bincount(owner[unsure][inside], minlength=len(rows))
        return counts if cap is None else np.minimum(counts, cap)


def _segment_sums(mask: BoolArray, lims: IndexArray) -> CountArray:
    """How many of ``mask[lims[k]:lims[k + 1]]`` are true, for each ``k``."""
    running = np.zeros(len(mask) + 1, dtype=np.int64)
    np.cumsum(mask, out=running[1:])
    sums: CountArray = running[lims[1:]] - running[lims[:-1]]
    return sums


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
