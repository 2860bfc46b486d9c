"""Throughput of one sharded task: ``engine.within_result`` for a query block x a shard's tree.

The driver builds each shard's kd-tree once and scatters it; a task on a Dask worker then
runs ``engine.within_result(block, ..., tree, threads=1).counts``. This prints both costs: the
build per shard, and the queries per second of a task, which times the worker threads is
what a cluster can count. ``docs/scale.md`` extrapolates its cost model from these figures.

    .venv/bin/python benchmarks/bench_shard_throughput.py [--dim 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from polars_hidden_rate import engine
from polars_hidden_rate.engine.kdtree import KdTree


def synthetic(n: int, dim: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard normal originals, and avatars ``noise`` away from them."""
    rng = np.random.default_rng(seed)
    originals = rng.normal(size=(n, dim))
    return originals, originals + rng.normal(scale=noise, size=(n, dim))


def time_task(
    block_rows: int, shard_rows: int, dim: int, noise: float, repeat: int
) -> tuple[float, float, float]:
    """Best seconds to build the shard's tree and to run one task, and the mean count."""
    n = max(block_rows, shard_rows)
    originals, avatars = synthetic(n, dim, noise, seed=0)
    thresholds = engine.own_thresholds(originals, avatars, 1e-9)
    queries, query_thresholds = originals[:block_rows], thresholds[:block_rows]
    shard = avatars[:shard_rows]
    own = np.where(np.arange(block_rows) < shard_rows, np.arange(block_rows), -1)
    build = task = float("inf")
    counts = np.zeros(0, dtype=np.int64)
    for _ in range(repeat):
        start = time.perf_counter()
        tree = KdTree.build(shard)
        built = time.perf_counter()
        counts = engine.within_result(queries, query_thresholds, own, tree, threads=1).counts
        build = min(build, built - start)
        task = min(task, time.perf_counter() - built)
    return build, task, float(counts.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--noise", type=float, nargs="+", default=[0.1, 0.5])
    args = parser.parse_args()
    print(
        f"{'noise':>6} {'block':>7} {'shard':>7} {'build s':>8} {'task s':>8}"
        f" {'queries/s':>10} {'mean c_i':>9}"
    )
    for noise in args.noise:
        for block_rows, shard_rows in [(4096, 65536), (16384, 65536), (8192, 524288)]:
            build, task, mean_count = time_task(
                block_rows, shard_rows, args.dim, noise, args.repeat
            )
            print(
                f"{noise:>6} {block_rows:>7} {shard_rows:>7} {build:>8.3f} {task:>8.3f}"
                f" {block_rows / task:>10.3g} {mean_count:>9.1f}"
            )


if __name__ == "__main__":
    main()
