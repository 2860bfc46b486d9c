"""Measure the per-coordinate costs behind ``strategy="auto"`` (``strategy.choose_strategy``).

Run ``python -m benchmarks.calibrate_auto``. On a few cases of every profile it
times the tree walk and the flat pass, counts the tree's work (boxes tested,
points compared) and the flat pass's pairs and rivals, and fits, weighting each
case by its time (least squares on relative errors)::

    tree seconds * threads = d * (box cost * boxes + point cost * points)
    flat seconds = d * pair cost * pairs / threads + result cost * rivals + call cost

The fitted values are what ``engine.strategy.TREE_BOX_COST`` and its siblings hold.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import default_threads, limit_threads
from benchmarks.data import Profile, make_case

CASES: tuple[tuple[Profile, int, int], ...] = (
    ("isotropic", 10_000, 16),
    ("isotropic", 10_000, 32),
    ("isotropic", 10_000, 64),
    ("isotropic", 5_000, 128),
    ("gaussian", 20_000, 5),
    ("gaussian", 20_000, 10),
    ("gaussian", 20_000, 20),
    ("discrete", 10_000, 10),
    ("discrete", 10_000, 20),
)
# Queries whose walks are counted, per case (scaled to all of them).
WORK_SAMPLE = 2_000


def measure(profile: Profile, n: int, d: int, threads: int) -> dict[str, Any]:
    """Times and work of both strategies on one case."""
    from polars_hidden_rate import engine
    from polars_hidden_rate.engine import flat
    from polars_hidden_rate.engine.kdtree import KdTree
    from polars_hidden_rate.progress import Progress

    originals, avatars = make_case(n, d, profile=profile, threads=threads)
    x, y, limits = engine.linked_arrays(originals, avatars, 1e-9)
    own = np.arange(n, dtype=np.int64)
    tree = KdTree.build(y, threads=threads)
    begin = time.perf_counter()
    counts = tree.count_rivals(x, limits, own, threads=threads)
    tree_seconds = time.perf_counter() - begin
    rows = np.sort(np.random.default_rng(1).choice(n, size=min(n, WORK_SAMPLE), replace=False))
    work, _ = tree.walk_work(x, limits, own, rows)
    begin = time.perf_counter()
    with Progress(n, enabled=False) as bar:
        flat.count_flat(x, limits, own, y, threads=threads, bar=bar)
    flat_seconds = time.perf_counter() - begin
    return {
        "profile": profile,
        "n": n,
        "d": d,
        "threads": threads,
        "tree_seconds": tree_seconds,
        "flat_seconds": flat_seconds,
        "boxes": float(work[:, 0].sum()) * n / len(rows),
        "points": float(work[:, 1].sum()) * n / len(rows),
        "pairs": float(n) * n,
        "rivals": float(counts.sum()),
    }


def fit(cells: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The costs, by least squares on relative errors."""
    tree = np.array([[c["d"] * c["boxes"], c["d"] * c["points"]] for c in cells])
    tree_time = np.array([c["tree_seconds"] * c["threads"] for c in cells])
    box, point = np.linalg.lstsq(tree / tree_time[:, None], np.ones(len(cells)), rcond=None)[0]
    flat = np.array([[c["d"] * c["pairs"] / c["threads"], c["rivals"], 1.0] for c in cells])
    flat_time = np.array([c["flat_seconds"] for c in cells])
    pair, result, call = np.linalg.lstsq(
        flat / flat_time[:, None], np.ones(len(cells)), rcond=None
    )[0]
    return {
        "TREE_BOX_COST": float(box),
        "TREE_POINT_COST": float(point),
        "FLAT_PAIR_COST": float(pair),
        "FLAT_RESULT_COST": float(result),
        "FLAT_CALL_COST": float(call),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every case, print one line each, then the fitted costs as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibrate_auto")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--out", type=Path, help="write the cases and the fit as JSON here")
    args = parser.parse_args(argv)
    limit_threads(args.threads)
    measure("gaussian", 2_000, 3, args.threads)  # compile and warm up, untimed
    cells = []
    for profile, n, d in CASES:
        cell = measure(profile, n, d, args.threads)
        cells.append(cell)
        print(json.dumps(cell), file=sys.stderr, flush=True)
    costs = fit(cells)
    print(json.dumps(costs, indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps({"cells": cells, "costs": costs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
