"""Avatar-like data for the benchmarks: originals in a projected space, and their avatars.

The originals resemble the coordinates of a projection (PCA, FAMD): Gaussian
components with decreasing variance, discrete components (categorical
variables project onto a few levels) and a share of duplicated records. Each
avatar is built as the Avatar method builds it: a random weighted mean of the
``k`` nearest originals of its record. Only the character of the data matters
here, so for large ``n`` the neighbours come from an approximate FAISS IVF index.

The ``isotropic`` profile is the opposite case, full-rank data where no tree
prunes: originals ``N(0, I_d)`` and each avatar its original plus ``N(0, 0.9^2 I_d)``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

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
    originals: Float64Array, *, k: int = 20, seed: int = 0, threads: int | None = None
) -> Float64Array:
    """One avatar per original: a random weighted mean of its ``k`` nearest originals.

    The weights are inverse distances times exponential draws, shuffled among
    the neighbours (the record itself is one of them) and normalised, as in the
    Avatar method.
    """
    import faiss

    n, d = originals.shape
    k = min(k, n)
    rng = np.random.default_rng([seed, n, d, k])
    points = np.ascontiguousarray(originals, dtype=np.float32)
    previous_threads = faiss.omp_get_max_threads()
    if threads is not None:
        faiss.omp_set_num_threads(threads)
    try:
        index = _neighbour_index(points, rng)
        avatars = np.empty_like(originals)
        for start in range(0, n, BATCH):
            stop = min(start + BATCH, n)
            squared, neighbours = index.search(points[start:stop], k)
            # The IVF search may find fewer than k: those slots repeat the record itself.
            missing = neighbours < 0
            neighbours[missing] = np.broadcast_to(np.arange(start, stop)[:, None], missing.shape)[
                missing
            ]
            distance = np.sqrt(np.maximum(squared, 0).astype(np.float64))
            distance[missing] = 0.0
            floor = np.median(distance[:, 1:]) if k > 1 else 1.0
            weights = rng.exponential(size=distance.shape) / (distance + floor + 1e-12)
            weights = rng.permuted(weights, axis=1)
            weights /= weights.sum(axis=1, keepdims=True)
            avatars[start:stop] = np.einsum("ik,ikd->id", weights, originals[neighbours])
    finally:
        faiss.omp_set_num_threads(previous_threads)
    return avatars


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
) -> tuple[Float64Array, Float64Array]:
    """Originals and their avatars, row ``i`` linked to row ``i``.

    For the ``isotropic`` profile each avatar is its original plus Gaussian noise
    (:data:`ISOTROPIC_NOISE`), and ``k`` is not used.
    """
    originals = make_originals(n, d, profile=profile, seed=seed)
    if profile == "isotropic":
        rng = np.random.default_rng([seed, n, d, 1])
        return originals, originals + rng.normal(scale=ISOTROPIC_NOISE, size=originals.shape)
    return originals, make_avatars(originals, k=k, seed=seed, threads=threads)
