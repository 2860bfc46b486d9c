"""Avatar-like data for the benchmarks: originals in a projected space, and their avatars.

The originals resemble the coordinates of a projection (PCA, FAMD): Gaussian
components with decreasing variance, discrete components (categorical
variables project onto a few levels) and a share of duplicated records. Each
avatar is built as the Avatar method builds it: a random weighted mean of the
``k`` nearest originals of its record. Only the character of the data matters
here, so for large ``n`` the neighbours come from an approximate FAISS IVF index by
default; ``neighbours="tree"`` finds them exactly with the package's compiled
kd-tree, which is far faster at 1e7 records and beyond (the IVF search grows as
``n^1.5``: 434 s at 1e7).

The ``isotropic`` profile is the opposite case, full-rank data where no tree
prunes: originals ``N(0, I_d)`` and each avatar its original plus ``N(0, 0.9^2 I_d)``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any, Literal

import numba
import numpy as np
import numpy.typing as npt

Float64Array = npt.NDArray[np.float64]

# Below this many originals the k nearest neighbours are found exactly.
EXACT_NEIGHBOURS_UP_TO = 50_000
# Avatars built per batch: bounds the memory of the neighbour gathers.
BATCH = 250_000
DUPLICATE_SHARE = 0.05
# The standard deviation of the noise that makes an isotropic avatar.
ISOTROPIC_NOISE = 0.9


Profile = Literal["gaussian", "discrete", "isotropic"]
Neighbours = Literal["ivf", "tree"]
PROFILES: tuple[Profile, ...] = ("gaussian", "discrete", "isotropic")


def make_originals(n: int, d: int, *, profile: Profile = "gaussian", seed: int = 0) -> Float64Array:
    """``n`` originals in ``d`` projected coordinates, deterministic for a seed.

    Component ``k`` has standard deviation ``0.8 ** k``, as the leading axes of
    a projection do. ``"gaussian"``: every second component is discrete (steps
    of one deviation, about 7 levels, as a categorical variable projects), and
    5% of the records duplicate another. ``"discrete"``: every component is
    discrete, as with the integer-coded WBCD data: many exact duplicates and
    ties, and large counts. ``"isotropic"``: ``N(0, I_d)``, nothing else.
    """
    rng = np.random.default_rng([seed, n, d])
    if profile == "isotropic":
        return rng.standard_normal((n, d))
    spread = 0.8 ** np.arange(d)
    originals = rng.standard_normal((n, d)) * spread
    discrete = range(d) if profile == "discrete" else range(1, d, 2)
    for k in discrete:
        originals[:, k] = np.round(originals[:, k] / spread[k]) * spread[k]
    copies = rng.choice(n, size=int(n * DUPLICATE_SHARE), replace=False)
    originals[copies] = originals[rng.integers(0, n, size=len(copies))]
    return originals


def make_avatars(
    originals: Float64Array,
    *,
    k: int = 20,
    seed: int = 0,
    threads: int | None = None,
    neighbours: Neighbours = "ivf",
) -> Float64Array:
    """One avatar per original: a random weighted mean of its ``k`` nearest originals.

    The weights are inverse distances times exponential draws, shuffled among
    the neighbours (the record itself is one of them) and normalised, as in the
    Avatar method. ``neighbours`` picks the search: FAISS (exact up to
    `EXACT_NEIGHBOURS_UP_TO` records, IVF beyond) or the exact kd-tree.
    """
    import faiss

    n, d = originals.shape
    k = min(k, n)
    rng = np.random.default_rng([seed, n, d, k])
    previous_threads = faiss.omp_get_max_threads()
    if threads is not None:
        faiss.omp_set_num_threads(threads)
    try:
        if neighbours == "tree":
            search = _tree_search(originals, k, threads or os.cpu_count() or 1)
        else:
            search = _faiss_search(originals, rng)
        avatars = np.empty_like(originals)
        for start in range(0, n, BATCH):
            stop = min(start + BATCH, n)
            squared, neighbours_found, targets = search(start, stop, k)
            neighbours_found = neighbours_found.astype(np.int64, copy=False)
            # The IVF search may find fewer than k: those slots repeat the record itself.
            missing = neighbours_found < 0
            neighbours_found[missing] = np.broadcast_to(targets[:, None], missing.shape)[missing]
            distance = np.sqrt(np.maximum(squared, 0).astype(np.float64))
            distance[missing] = 0.0
            floor = np.median(distance[:, 1:]) if k > 1 else 1.0
            weights = rng.exponential(size=distance.shape) / (distance + floor + 1e-12)
            weights = rng.permuted(weights, axis=1)
            weights /= weights.sum(axis=1, keepdims=True)
            avatars[targets] = np.einsum("ik,ikd->id", weights, originals[neighbours_found])
    finally:
        faiss.omp_set_num_threads(previous_threads)
    return avatars


Search = Callable[[int, int, int], tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]]]
"""``search(start, stop, k)``: for the originals of batch ``start:stop`` (``targets``, their
rows), the squared distances and rows of their ``k`` nearest originals, nearest first."""


def _faiss_search(originals: Float64Array, rng: np.random.Generator) -> Search:
    points = np.ascontiguousarray(originals, dtype=np.float32)
    index = _neighbour_index(points, rng)

    def search(start: int, stop: int, k: int) -> tuple[Any, Any, npt.NDArray[np.int64]]:
        squared, rows = index.search(points[start:stop], k)
        return squared, rows, np.arange(start, stop)

    return search


def _tree_search(originals: Float64Array, k: int, threads: int) -> Search:
    """Exact k nearest neighbours in float64 from a kd-tree of the originals; the batches
    follow the tree's order, so that consecutive queries walk the same nodes (in the
    originals' order, cache misses make the search several times slower)."""
    from polars_hidden_rate.engine.kdtree import KdTree
    from polars_hidden_rate.engine.parallel import parallel_map

    tree = KdTree.build(originals, threads=threads)

    def search(
        start: int, stop: int, k: int
    ) -> tuple[Float64Array, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        squared = np.empty((stop - start, k))
        rows = np.empty((stop - start, k), dtype=np.int64)
        bounds = np.linspace(0, stop - start, 4 * threads + 1).astype(np.int64)

        def run(part: int) -> None:
            a, b = bounds[part], bounds[part + 1]
            _nearest_k(tree.points, tree.order, tree.begin, tree.end, tree.lower, tree.upper,
                       tree.points[start + a : start + b], squared[a:b], rows[a:b])  # fmt: skip

        for _ in parallel_map(threads, run, len(bounds) - 1):
            pass
        return squared, rows, tree.order[start:stop]

    return search


@numba.njit(nogil=True, cache=True)
def _nearest_k(
    points: Float64Array,
    order: npt.NDArray[np.int64],
    begin: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    lower: Float64Array,
    upper: Float64Array,
    queries: Float64Array,
    squared: Float64Array,
    rows: npt.NDArray[np.int64],
) -> None:
    """The ``k`` nearest points of each query, by a depth-first walk, nearer child first,
    that skips boxes farther than the current ``k``-th nearest (kept sorted)."""
    k, dim = squared.shape[1], points.shape[1]
    first_leaf = (len(begin) - 1) // 2
    stack = np.empty(128, dtype=np.int64)
    for i in range(len(queries)):
        best = np.full(k, np.inf)
        found = np.full(k, -1, dtype=np.int64)
        stack[0], top = 0, 1
        while top > 0:
            top -= 1
            node = stack[top]
            near = 0.0
            for c in range(dim):
                gap = max(lower[node, c] - queries[i, c], queries[i, c] - upper[node, c], 0.0)
                near += gap * gap
            if near > best[k - 1]:
                continue
            if node >= first_leaf:
                for p in range(begin[node], end[node]):
                    total = 0.0
                    for c in range(dim):
                        diff = queries[i, c] - points[p, c]
                        total += diff * diff
                    if total < best[k - 1]:
                        slot = k - 1
                        while slot > 0 and best[slot - 1] > total:
                            best[slot], found[slot] = best[slot - 1], found[slot - 1]
                            slot -= 1
                        best[slot], found[slot] = total, order[p]
                continue
            left, right = 2 * node + 1, 2 * node + 2
            near_left, near_right = 0.0, 0.0
            for c in range(dim):
                q = queries[i, c]
                gap = max(lower[left, c] - q, q - upper[left, c], 0.0)
                near_left += gap * gap
                gap = max(lower[right, c] - q, q - upper[right, c], 0.0)
                near_right += gap * gap
            nearer, farther = (left, right) if near_left <= near_right else (right, left)
            stack[top], stack[top + 1] = farther, nearer  # the nearer child is walked first
            top += 2
        squared[i], rows[i] = best, found


def _neighbour_index(points: npt.NDArray[np.float32], rng: np.random.Generator) -> Any:
    import faiss

    n, d = points.shape
    if n <= EXACT_NEIGHBOURS_UP_TO:
        flat = faiss.IndexFlatL2(d)
        flat.add(points)
        return flat
    lists = int(2 * math.sqrt(n))
    quantizer = faiss.IndexFlatL2(d)
    index = faiss.IndexIVFFlat(quantizer, d, lists)
    index.cp.niter = 10
    sample = points[rng.choice(n, size=min(n, 40 * lists), replace=False)]
    index.train(sample)
    index.add(points)
    index.nprobe = 4
    return index


def make_case(
    n: int,
    d: int,
    *,
    profile: Profile = "gaussian",
    k: int = 20,
    seed: int = 0,
    threads: int | None = None,
    neighbours: Neighbours = "ivf",
) -> tuple[Float64Array, Float64Array]:
    """Originals and their avatars, row ``i`` linked to row ``i``.

    For the ``isotropic`` profile each avatar is its original plus Gaussian noise
    (`ISOTROPIC_NOISE`), and ``k`` is not used.
    """
    originals = make_originals(n, d, profile=profile, seed=seed)
    if profile == "isotropic":
        rng = np.random.default_rng([seed, n, d, 1])
        return originals, originals + rng.normal(scale=ISOTROPIC_NOISE, size=originals.shape)
    return originals, make_avatars(
        originals, k=k, seed=seed, threads=threads, neighbours=neighbours
    )
