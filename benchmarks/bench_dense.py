"""Dense full counts: ours against scipy's cKDTree on the ``discrete`` profile (issue 22 item 4).

Run ``python -m benchmarks.bench_dense --help``. For each ``n`` the harness builds the
``discrete`` profile (`benchmarks.data.make_case`: every coordinate discrete, many exact
duplicates, counts in the thousands) and times, back to back in one process and
``--repeat`` times in turn, three full counts (no cap):

- ``ours``: ``count_cloaking(X, Y)``, what ``local_cloaking`` runs;
- ``ours-flags``: the same with the ``closer`` flags, what ``hidden-rate check --output``
  and the report run;
- ``ckdtree``: ``cKDTree(Y).query_ball_point(X, r=sqrt(T), return_length=True) - 1``,
  the per-record counts (``count_neighbors`` gives pairwise totals only).

It checks that the three give the same count for every record, and that they equal the
float64 brute force on a sample, then writes ``<out>/<name>.json`` and ``.md`` with
the medians and the ratios ours / cKDTree. Exit status 1 when a count differs.
See docs/performance.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (
    RESULTS,
    CountArray,
    Float64Array,
    default_threads,
    exact_counts,
    header,
    limit_threads,
    parse_sizes,
    seconds,
    thresholds,
    write_results,
)
from benchmarks.data import Neighbours, make_case

SIZES = (200_000, 2_000_000)
DIM = 3
# Records checked against the float64 brute force.
SAMPLE = 256
ENGINES = ("ours", "ours-flags", "ckdtree")
Runner = Callable[[Float64Array, Float64Array, float, int], CountArray]


def run_ours(
    originals: Float64Array, avatars: Float64Array, tie_tol: float, threads: int
) -> CountArray:
    import polars_hidden_rate as phr

    return phr.count_cloaking(originals, avatars, tie_tol=tie_tol, threads=threads)


def run_ours_flags(
    originals: Float64Array, avatars: Float64Array, tie_tol: float, threads: int
) -> CountArray:

    from polars_hidden_rate import engine

    return engine.cloaking_result(
        originals, avatars, tie_tol=tie_tol, threads=threads, closer=True
    ).counts


def run_ckdtree(
    originals: Float64Array, avatars: Float64Array, tie_tol: float, threads: int
) -> CountArray:
    from scipy.spatial import cKDTree

    # Inclusive radius sqrt(T_i); the own avatar lies within it and is taken off.
    radius = np.sqrt(thresholds(originals, avatars, tie_tol))
    found = cKDTree(avatars).query_ball_point(
        originals, r=radius, return_length=True, workers=threads
    )
    counts: CountArray = np.asarray(found, dtype=np.int64) - 1
    return counts


RUNNERS: dict[str, Runner] = {
    "ours": run_ours,
    "ours-flags": run_ours_flags,
    "ckdtree": run_ckdtree,
}


def case(
    n: int, *, seed: int, threads: int, neighbours: Neighbours, cache: Path | None
) -> tuple[Float64Array, Float64Array]:
    """The ``discrete`` case of ``make_case``, kept in ``cache`` when given (at 2e6 the
    IVF neighbour search takes minutes; the cache holds its result, not other data)."""
    path = None
    if cache is not None:
        path = cache / f"discrete_n{n}_d{DIM}_seed{seed}_{neighbours}.npz"
        if path.exists():
            with np.load(path) as stored:
                return stored["originals"], stored["avatars"]
    originals, avatars = make_case(
        n, DIM, profile="discrete", seed=seed, threads=threads, neighbours=neighbours
    )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, originals=originals, avatars=avatars)
    return originals, avatars


def run_cell(
    n: int,
    *,
    repeat: int,
    threads: int,
    tie_tol: float,
    seed: int,
    neighbours: Neighbours,
    cache: Path | None,
) -> dict[str, Any]:
    """Time every engine ``repeat`` times in turn on one ``n``; check their counts."""
    started = time.perf_counter()
    originals, avatars = case(n, seed=seed, threads=threads, neighbours=neighbours, cache=cache)
    data_seconds = time.perf_counter() - started
    times: dict[str, list[float]] = {name: [] for name in ENGINES}
    counts: dict[str, CountArray] = {}
    for _ in range(repeat):
        for name in ENGINES:  # interleaved: a load change hits every engine alike
            begin = time.perf_counter()
            counts[name] = RUNNERS[name](originals, avatars, tie_tol, threads)
            times[name].append(time.perf_counter() - begin)
    rows = np.random.default_rng(n).choice(n, size=min(n, SAMPLE), replace=False)
    limits = thresholds(originals, avatars, tie_tol)
    reference = exact_counts(originals, avatars, limits, rows, threads=threads)
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {
        "n": n,
        "d": DIM,
        "data_seconds": round(data_seconds, 2),
        "median_count": float(np.median(counts["ours"])),
        "p99_count": float(np.percentile(counts["ours"], 99)),
        "distinct_avatars": len(np.unique(avatars, axis=0)),
        "seconds": {name: round(value, 4) for name, value in medians.items()},
        "runs": {name: [round(t, 4) for t in values] for name, values in times.items()},
        "ratio": {
            name: round(medians[name] / medians["ckdtree"], 3) for name in ("ours", "ours-flags")
        },
        # Records where an engine's count differs from ours (cKDTree included: its
        # sqrt radius must give the same per-record numbers for the ratio to mean anything).
        "differ_from_ours": {
            name: int(np.count_nonzero(counts[name] != counts["ours"])) for name in ENGINES
        },
        "brute_force_mismatches": {
            name: int(np.count_nonzero(counts[name][rows] != reference)) for name in ENGINES
        },
    }


def warm_up(threads: int, tie_tol: float) -> None:
    """Run each engine once on a tiny case, untimed: imports, compiled kernels and thread
    pools load here."""
    rng = np.random.default_rng(0)
    originals = rng.integers(-2, 3, size=(200, DIM)).astype(np.float64)
    avatars = originals + 0.25 * rng.integers(-1, 2, size=originals.shape)
    for runner in RUNNERS.values():
        runner(originals, avatars, tie_tol, threads)


def exact(cell: dict[str, Any]) -> bool:
    return not any(cell["differ_from_ours"].values()) and not any(
        cell["brute_force_mismatches"].values()
    )


def markdown(payload: dict[str, Any]) -> str:
    machine = payload["machine"]
    lines = [
        f"Measured {payload['date']} on {machine['cpus_usable']} of {machine['cpus']} CPUs "
        f"({machine['cpu_model']}, {machine['memory_gib']} GiB), "
        f"threads={payload['options']['threads']}, data profile `discrete` (neighbours "
        f"`{payload['options']['neighbours']}`), d = {DIM}, load average before "
        f"{', '.join(f'{x:.2f}' for x in machine['load_average'] or [])}.",
        "",
        f"Command: `{payload['command']}`",
        "",
        "| n | distinct avatars | median c | p99 c | ours | ours-flags | ckdtree "
        "| ours / ckdtree | ours-flags / ckdtree | same counts |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for cell in payload["cells"]:
        times = cell["seconds"]
        lines.append(
            f"| {cell['n']:,} | {cell['distinct_avatars']:,} | {cell['median_count']:g} | "
            f"{cell['p99_count']:g} | "
            + " | ".join(seconds(times[name]) for name in ENGINES)
            + f" | {cell['ratio']['ours']:.3f} | {cell['ratio']['ours-flags']:.3f} | "
            + ("yes" if exact(cell) else "no")
            + " |"
        )
    lines += [
        "",
        f"Times in seconds, the median of {payload['options']['repeat']} runs of each engine "
        "taken in turn, from numpy arrays to counts, index building included. `ours-flags` "
        "also finds the closer flags (`hidden-rate check --output`). `same counts`: the "
        "three agree on every record, and with the float64 brute force on "
        f"{SAMPLE} sampled records.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit status 1 when a count differs."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_dense",
        description="Time dense full counts (discrete profile, d = 3) against scipy cKDTree.",
    )
    parser.add_argument("--sizes", nargs="+", help="record counts n (default 2e5 2e6)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per engine; medians count")
    parser.add_argument("--threads", type=int, default=default_threads(), help="threads per engine")
    parser.add_argument("--tie-tol", type=float, default=1e-9, help="relative tie tolerance")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--neighbours",
        choices=("ivf", "tree"),
        default="ivf",
        help="how make_case finds each avatar's neighbours (default ivf, as bench_counts)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        help="folder keeping each generated case (.npz), reused by later runs",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for JSON and Markdown")
    parser.add_argument("--name", default="dense", help="file name stem")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.threads < 1:
        parser.error("--repeat and --threads must be at least 1")
    try:
        sizes = parse_sizes(args.sizes) if args.sizes else list(SIZES)
    except ValueError as error:
        parser.error(str(error))
    limit_threads(args.threads)
    arguments = sys.argv[1:] if argv is None else list(argv)
    payload = header(["python", "-m", "benchmarks.bench_dense", *arguments])
    payload["options"] = {
        "sizes": sizes,
        "repeat": args.repeat,
        "threads": args.threads,
        "tie_tol": args.tie_tol,
        "seed": args.seed,
        "neighbours": args.neighbours,
        "cache": None if args.cache is None else str(args.cache),
    }
    warm_up(args.threads, args.tie_tol)
    cells = []
    for n in sizes:
        cell = run_cell(
            n,
            repeat=args.repeat,
            threads=args.threads,
            tie_tol=args.tie_tol,
            seed=args.seed,
            neighbours=args.neighbours,
            cache=args.cache,
        )
        cells.append(cell)
        print(
            f"n={n:,}: "
            + ", ".join(f"{name} {seconds(cell['seconds'][name])}" for name in ENGINES)
            + f"; ours / ckdtree {cell['ratio']['ours']:.3f}, "
            f"ours-flags / ckdtree {cell['ratio']['ours-flags']:.3f}; "
            f"{'same counts' if exact(cell) else 'COUNTS DIFFER'}",
            file=sys.stderr,
            flush=True,
        )
    payload["cells"] = cells
    payload["exact"] = all(exact(cell) for cell in cells)
    payload["machine"]["load_average_after"] = header()["machine"]["load_average"]
    text = markdown(payload)
    paths = write_results(args.out, args.name, payload, text)
    print(text)
    print("wrote " + ", ".join(str(path) for path in paths), file=sys.stderr)
    return 0 if payload["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
