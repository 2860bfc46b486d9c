"""Exact counting with FAISS's GPU flat index (``device="gpu"``).

FAISS has no range search on the GPU, so candidates come from k-NN searches, as
in FAISS's ``contrib/exhaustive_search.py``: a query whose k-th float32 distance
lies beyond its reach (its threshold plus the engine's float32 error bound,
`flat.float32_error_bound`) has all its candidates among those k. A query
that still has more after the largest k the GPU allows (2048) is counted on the
CPU by `engine.within_result`. The data come through
`engine.linked_arrays`, at the CPU engine's canonical scale. The candidates
are settled as the flat band settles them (`flat.Search.settle`): a pair is
decided in float32 only when its error bound keeps it on one side of the threshold,
and every other is settled in float64 by `engine.squared_distances`, so the
counts are those of the CPU path.

This needs a FAISS build with GPU support (e.g. the ``faiss-gpu-cu12`` wheels in
place of ``faiss-cpu``) and a CUDA GPU; without them `require_gpu` raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import faiss
import numpy as np

from polars_hidden_rate import engine
from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine import flat

# The largest k FAISS's GPU k-selection supports.
GPU_MAX_K = 2048
# The k of the first pass: most records have few rivals.
FIRST_K = 32
# k-NN results held per batch of queries (distances and labels: 12 bytes each).
MAX_RESULTS_PER_BATCH = 1 << 24

IndexFactory = Callable[[int], Any]
"""Makes an empty flat L2 index of the given dimension, with ``add`` and ``search``."""


def require_gpu() -> None:
    """Raise a RuntimeError unless FAISS has GPU support and sees a GPU."""
    if not hasattr(faiss, "StandardGpuResources"):
        msg = (
            "device='gpu' needs a FAISS build with GPU support, and the installed faiss "
            f"{getattr(faiss, '__version__', '?')} is CPU-only: install a GPU build "
            "(e.g. `pip install faiss-gpu-cu12` in place of faiss-cpu), or use device='cpu'"
        )
        raise RuntimeError(msg)
    if faiss.get_num_gpus() < 1:
        msg = (
            "device='gpu' found no CUDA GPU visible to FAISS (faiss.get_num_gpus() == 0); "
            "check the driver and CUDA_VISIBLE_DEVICES, or use device='cpu'"
        )
        raise RuntimeError(msg)


def count_cloaking_gpu(
    originals: Float64Array,
    avatars: Float64Array,
    *,
    tie_tol: float = 1e-9,
    gpu_id: int = 0,
) -> CountArray:
    """Exact local cloaking with FAISS's GPU flat index; equal to
    [`engine.count_cloaking`][polars_hidden_rate.count_cloaking].

    Parameters
    ----------
    originals, avatars
        Float64 arrays of shape ``(n, d)``; row ``i`` of ``avatars`` is the
        avatar of row ``i`` of ``originals``.
    tie_tol
        Relative tie tolerance, as in [`engine.count_cloaking`][polars_hidden_rate.count_cloaking].
    gpu_id
        The CUDA device FAISS runs on.

    Raises
    ------
    RuntimeError
        When FAISS has no GPU support or sees no GPU, or the GPU cannot run it.
    """
    require_gpu()
    originals, avatars, thresholds = engine.linked_arrays(originals, avatars, tie_tol)
    own = np.arange(len(originals), dtype=np.int64)
    resources = faiss.StandardGpuResources()
    config = faiss.GpuIndexFlatConfig()
    config.device = gpu_id
    # The error bound assumes float32 storage and arithmetic: no float16.
    config.useFloat16 = False

    def make_index(dim: int) -> Any:
        return faiss.GpuIndexFlatL2(resources, dim, config)

    try:
        return count_within_knn(originals, thresholds, own, avatars, make_index=make_index)
    except RuntimeError as exc:
        if "no kernel image" in str(exc):
            msg = (
                "this FAISS GPU build has no code for this GPU's compute capability "
                "(the faiss-gpu-cu12 wheels target 7.0 to 8.9); use device='cpu'"
            )
            raise RuntimeError(msg) from exc
        raise


def count_within_knn(
    queries: Float64Array,
    thresholds: Float64Array,
    own: IndexArray,
    avatars: Float64Array,
    *,
    make_index: IndexFactory,
    max_k: int = GPU_MAX_K,
    first_k: int = FIRST_K,
) -> CountArray:
    """`engine.within_result` with candidates from k-NN searches on ``make_index``'s index.

    Queries whose candidates outnumber ``max_k`` are counted by
    `engine.within_result` on the CPU.

    Examples
    --------
    >>> import faiss
    >>> import numpy as np
    >>> queries = np.array([[0.0], [1.0], [3.0]])
    >>> avatars = np.array([[1.0], [0.0], [3.0]])
    >>> thresholds = engine.own_thresholds(queries, avatars, 0.0)
    >>> own = np.arange(3)
    >>> count_within_knn(queries, thresholds, own, avatars, make_index=faiss.IndexFlatL2).tolist()
    [1, 1, 0]
    """
    counts = np.zeros(len(queries), dtype=np.int64)
    if len(queries) == 0 or len(avatars) == 0:
        return counts
    # Centred, scaled and rounded to float32 exactly as the CPU engine does.
    search = flat.Search.prepare(queries, thresholds, own, avatars)
    dim = search.query_f32.shape[1]
    index = make_index(dim)
    index.add(search.avatar_f32)
    query_f32 = search.query_f32

    # A pair can count only when its float32 estimate is within its query's reach.
    bound = flat.float32_error_bound(
        flat.row_norms(query_f32) ** 2,
        search.avatar_radius,
        dim,
        reference_floor=search.reference_floor,
    )
    reach = search.scaled_thresholds + bound
    todo = np.arange(len(queries), dtype=np.int64)
    for k in sorted({min(first_k, max_k, len(avatars)), min(max_k, len(avatars))}):
        unfinished = []
        batch_rows = max(1, MAX_RESULTS_PER_BATCH // k)
        for start in range(0, len(todo), batch_rows):
            rows = todo[start : start + batch_rows]
            found_dist, found = index.search(query_f32[rows], k)
            # Avatars not found are at least as far as the k-th: complete when it is out of reach.
            complete = (found_dist[:, -1].astype(np.float64) > reach[rows]) | (k == len(avatars))
            counts[rows[complete]] = _settle(
                search, rows[complete], found_dist[complete], found[complete], bound
            )
            unfinished.append(rows[~complete])
        todo = np.concatenate(unfinished)
        if len(todo) == 0:
            return counts
    # More candidates than the largest k: count these queries on the CPU.
    counts[todo] = engine.within_result(queries[todo], thresholds[todo], own[todo], avatars).counts
    return counts


def _settle(
    search: flat.Search,
    rows: IndexArray,
    found_dist: np.ndarray[Any, np.dtype[np.float32]],
    found: IndexArray,
    bound: Float64Array,
) -> CountArray:
    """Count the candidates of ``rows``, their own avatars aside, by the flat band's
    settling (`flat.Search.settle`): a float32 distance ``e`` of query ``i`` puts its
    ``d2`` in ``[e - E_i, e + E_i]`` (rounded outwards), and only the pairs whose interval
    holds the threshold are settled in float64."""
    owner, slot = np.nonzero(found >= 0)  # FAISS marks a missing neighbour with -1
    estimate = found_dist[owner, slot].astype(np.float64)
    margin = bound[rows[owner]]
    at_least = np.nextafter(estimate - margin, -np.inf)
    at_most = np.nextafter(estimate + margin, np.inf)
    return search.settle(rows, owner, found[owner, slot], at_least, at_most)
