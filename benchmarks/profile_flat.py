"""Where the flat strategy's time goes: FAISS's search against the handling around it.

Run ``python -m benchmarks.profile_flat``. On isotropic data (few rivals per query) and on
a dense case (isotropic originals, avatars at ``--spread`` times the noise: thousands of
rivals per query) it times ``flat.count_flat`` (best of ``--repeat``), then profiles one
more run and splits it into

- ``search``: ``IndexFlatL2.range_search`` itself (FAISS, OpenMP);
- ``handling``: the numpy work on the range results in ``count_in_flat`` and its settling
  (cutoffs, masks, counts per query, gathers), the float64 settlement aside;
- ``float64``: `squared_distances` on the unsure band
  (and, since the cutoff path, on each query's own avatar);
- ``setup``: everything else (``Search.prepare``, the index, the radius of each chunk).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import Float64Array, limit_threads
from benchmarks.data import make_case, make_originals

CASES = ("isotropic,1e4,32", "isotropic,1e4,64", "isotropic,2e4,32", "isotropic,2e4,64")
DENSE_CASES = ("dense,1e4,8", "dense,2e4,16")


def case(kind: str, n: int, d: int, spread: float) -> tuple[Float64Array, Float64Array]:
    """Originals and avatars: ``isotropic`` as in ``benchmarks/data.py``, or ``dense``."""
    if kind == "dense":
        originals = make_originals(n, d, profile="isotropic")
        noise = np.random.default_rng([5, n, d]).normal(scale=spread, size=originals.shape)
        return originals, originals + noise
    return make_case(n, d, profile="isotropic")


def split(stats: pstats.Stats) -> dict[str, float]:
    """Seconds of search, handling, float64 settlement and setup in one profiled run."""
    table = stats.stats  # type: ignore[attr-defined]
    total = search = inner = settle = 0.0
    for (path, _, name), (_, _, _, cumulative, callers) in table.items():
        called_by = {caller[2] for caller in callers}
        if name == "count_flat" and path.endswith("flat.py"):
            total = max(total, cumulative)
        elif name == "count_in_flat":
            inner += cumulative
        elif "range_search" in name and "count_in_flat" in called_by:
            search += cumulative
        elif name == "squared_distances" and called_by & {"settle", "settle_found"}:
            settle += cumulative
    return {
        "search": search,
        "handling": inner - search - settle,
        "float64": settle,
        "setup": total - inner,
        "total": total,
    }


def count_flat(
    x: Float64Array,
    limits: Float64Array,
    own: npt.NDArray[np.int64],
    y: Float64Array,
    threads: int,
    rows: int | None = None,
) -> npt.NDArray[np.int64]:
    """``flat.count_flat`` on the first ``rows`` queries (all when None)."""
    from polars_hidden_rate.engine import flat
    from polars_hidden_rate.progress import Progress

    rows = len(x) if rows is None else rows
    bar = Progress(rows, enabled=False)
    return flat.count_flat(x[:rows], limits[:rows], own[:rows], y, threads=threads, bar=bar)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=[*CASES, *DENSE_CASES])
    parser.add_argument("--spread", type=float, default=2.0, help="noise of the dense case")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    limit_threads(args.threads)
    from polars_hidden_rate import engine

    print("| case | mean count | best s | search | handling | float64 | setup |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for spec in args.cases:
        kind, size, dim = spec.split(",")
        n, d = int(float(size)), int(dim)
        x, y, limits = engine.linked_arrays(*case(kind, n, d, args.spread), 1e-9)
        own = np.arange(n, dtype=np.int64)

        run = functools.partial(count_flat, x, limits, own, y, args.threads)
        run(64)  # warm-up: FAISS's threads
        best = float("inf")
        for _ in range(args.repeat):
            begin = time.perf_counter()
            counts = run()
            best = min(best, time.perf_counter() - begin)
        profiler = cProfile.Profile()
        profiler.runcall(run)
        parts = split(pstats.Stats(profiler))
        share = {key: f"{parts[key]:.3f} ({parts[key] / parts['total']:.0%})" for key in parts}
        print(
            f"| {kind} n={n:.0e} d={d} | {counts.mean():.1f} | {best:.3f} | {share['search']} "
            f"| {share['handling']} | {share['float64']} | {share['setup']} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
