"""Two checkouts of the package on the same data, in alternated pairs.

    python -m benchmarks.bench_trees --before /path/to/old/checkout --after . --n 1e6 --repeat 3

A refactoring must not cost speed: each pair runs the old tree and the new one on the same
arrays, one after the other, the order swapped from pair to pair so that a change in the
machine's load reaches both, after an untimed first turn of each. Each run is a fresh process
(``PYTHONPATH`` set to the tree), which compiles on a thousand rows before its clock starts.
The runs: ``local_cloaking`` on avatar-like data, and ``privacy_report`` with a holdout of as
many records. Prints and writes (``<out>/<name>.json`` and ``.md``) every pair's seconds, each
pair's ratio (after / before) and their median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import header, parse_sizes, write_results
from benchmarks.data import make_case, make_originals

RUNS = ("local_cloaking", "with_holdout")

# Run in the child: read the arrays, compile on a thousand rows, time one call.
CHILD = """
import json, sys, time
import numpy as np, polars as pl
import polars_hidden_rate as phr
folder, run, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
frames = [np.load(f"{folder}/{name}.npy") for name in ("originals", "avatars", "holdout")]
names = [f"Dim{k + 1}" for k in range(frames[0].shape[1])]
o, a, h = (pl.DataFrame(x, schema=names) for x in frames)
options = {"coords": names, "threads": threads}
def call(o, a, h):
    if run == "local_cloaking":
        return phr.local_cloaking(o, a, **options)
    return phr.privacy_report(o, a, holdout=h, **options)
call(o.head(1000), a.head(1000), h.head(1000))
start = time.perf_counter()
call(o, a, h)
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def run_tree(tree: Path, folder: Path, run: str, threads: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(folder), run, str(threads)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


def measure(
    before: Path, after: Path, n: int, dims: int, repeat: int, threads: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        originals, avatars = make_case(n, dims, threads=threads)
        np.save(folder / "originals.npy", originals)
        np.save(folder / "avatars.npy", avatars)
        np.save(folder / "holdout.npy", make_originals(n, dims, seed=1))
        for run in RUNS:  # a first, untimed turn: each tree's numba cache and page cache
            for tree in (before, after):
                run_tree(tree, folder, run, threads)
        pairs: dict[str, list[dict[str, float]]] = {run: [] for run in RUNS}
        for turn in range(repeat):
            for run in RUNS:
                order = ("before", "after") if turn % 2 == 0 else ("after", "before")
                trees = {"before": before, "after": after}
                pair = {side: run_tree(trees[side], folder, run, threads) for side in order}
                pairs[run].append(pair)
                print(f"{run} pair {turn + 1}: {pair}", flush=True)
    return {
        "n": n,
        "dims": dims,
        "threads": threads,
        "pairs": pairs,
        "median_ratio": {
            run: statistics.median(p["after"] / p["before"] for p in pairs[run]) for run in RUNS
        },
    }


def markdown(result: dict[str, Any], before: Path, after: Path) -> str:
    lines = [
        f"Two trees on the same data: before = `{before}`, after = `{after}`; "
        f"{result['n']:,} records x {result['dims']}, {result['threads']} threads.",
        "",
        "| run | pairs: before / after (s) | after / before, each | median |",
        "| --- | --- | --- | ---: |",
    ]
    for run in RUNS:
        pairs = result["pairs"][run]
        seconds = ", ".join(f"{p['before']:.2f} / {p['after']:.2f}" for p in pairs)
        ratios = ", ".join(f"{p['after'] / p['before']:.2f}" for p in pairs)
        lines.append(f"| {run} | {seconds} | {ratios} | {result['median_ratio'][run]:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the old checkout")
    parser.add_argument("--after", type=Path, default=Path("."), help="the new checkout")
    parser.add_argument("--n", default="1e6", help="records per set")
    parser.add_argument("--dims", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3, help="pairs per run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--name", default="trees")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    (n,) = parse_sizes([args.n])
    result = measure(args.before, args.after, n, args.dims, args.repeat, args.threads)
    text = markdown(result, args.before, args.after)
    print(text)
    write_results(args.out, args.name, {**header(), **result}, text)


if __name__ == "__main__":
    main()
