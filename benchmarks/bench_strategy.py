"""``strategy="auto"`` against the two strategies it chooses between, on every profile.

Run ``python -m benchmarks.bench_strategy --help``. For each case (avatar-like ``gaussian``,
``isotropic`` in 16 to 128 dimensions, dense ``discrete``) the harness times
``count_cloaking`` with ``strategy="auto"``, ``"flat"`` and ``"tree"`` in alternated rounds
(the order rotates each round, so a loaded machine weighs on all three alike), and reports
each median and the ratio of auto's median to the faster strategy's: the target is at most 1.2.
"paired" is the median over rounds of auto's time over the faster strategy's in the same
round, steadier where the machine's load drifts between rounds.
``--skip-tree-above DIM`` leaves the tree strategy out above ``DIM`` dimensions, where it
takes minutes a round and loses to the flat pass by far: auto is then set against the flat
pass alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS, header, limit_threads, seconds, write_results
from benchmarks.data import Profile
from polars_hidden_rate.engine import Strategy

STRATEGIES: tuple[Strategy, ...] = ("auto", "flat", "tree")
CASES: tuple[tuple[Profile, int], ...] = (
    ("gaussian", 5),
    ("gaussian", 10),
    ("isotropic", 16),
    ("isotropic", 32),
    ("isotropic", 64),
    ("isotropic", 128),
    ("discrete", 3),
    ("discrete", 10),
)


def measure(
    profile: Profile,
    d: int,
    n: int,
    rounds: int,
    threads: int,
    strategies: tuple[Strategy, ...] = STRATEGIES,
) -> dict[str, Any]:
    """The medians of ``rounds`` alternated timings of each of ``strategies`` on one case."""
    import numpy as np

    from benchmarks.data import make_case
    from polars_hidden_rate import engine

    originals, avatars = make_case(n, d, profile=profile, threads=threads)
    times: dict[str, list[float]] = {name: [] for name in strategies}
    chosen = None
    counts = None
    for round_ in range(rounds):
        shift = round_ % len(strategies)
        for name in strategies[shift:] + strategies[:shift]:
            begin = time.perf_counter()
            result = engine.cloaking_result(originals, avatars, threads=threads, strategy=name)
            times[name].append(time.perf_counter() - begin)
            if counts is None:
                counts = result.counts
            elif not np.array_equal(counts, result.counts):
                msg = f"{name} changed a count on {profile} d={d}"
                raise AssertionError(msg)
            if name == "auto":
                chosen = result.strategy
    medians = {name: statistics.median(values) for name, values in times.items()}
    fastest = min(medians[name] for name in strategies if name != "auto")
    # Each round's auto against that round's faster strategy, timed next to it: a load that
    # drifts between rounds weighs on both sides of each ratio alike.
    paired = [
        times["auto"][k] / min(times[name][k] for name in strategies if name != "auto")
        for k in range(rounds)
    ]
    return {
        "profile": profile,
        "d": d,
        "n": n,
        "chosen": chosen,
        "times": times,
        "medians": medians,
        "auto_over_fastest": medians["auto"] / fastest,
        "auto_over_fastest_paired": statistics.median(paired),
    }


def markdown(payload: dict[str, Any]) -> str:
    options = payload["options"]
    lines = [
        '# strategy="auto" against the faster strategy',
        "",
        f"`{payload['command']}`: {options['n']} records, threads={options['threads']}, "
        f"median of {options['rounds']} alternated rounds (the order rotates each round).",
        "",
        "| profile | d | auto chose | auto (s) | flat (s) | tree (s) | auto / faster | paired |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in payload["rows"]:
        m = row["medians"]
        lines.append(
            f"| {row['profile']} | {row['d']} | {row['chosen']} | {seconds(m['auto'])} | "
            f"{seconds(m['flat'])} | {seconds(m['tree']) if 'tree' in m else 'skipped'} | "
            f"{row['auto_over_fastest']:.2f} | {row['auto_over_fastest_paired']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_strategy",
        description="Time strategy='auto' against 'flat' and 'tree' on every profile.",
    )
    parser.add_argument("--n", type=int, default=20_000, help="records per case")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds per case")
    parser.add_argument("--threads", type=int, default=2, help="threads per count")
    parser.add_argument(
        "--case", action="append", default=None, help="profile:d (repeatable; default all)"
    )
    parser.add_argument(
        "--skip-tree-above",
        type=int,
        default=None,
        metavar="DIM",
        help="leave the tree strategy out above DIM dimensions (auto against flat alone)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="output directory")
    parser.add_argument("--name", default="strategy", help="file name stem")
    args = parser.parse_args(argv)
    limit_threads(args.threads)
    cases = CASES
    if args.case:
        cases = tuple((c.split(":")[0], int(c.split(":")[1])) for c in args.case)
    rows = []
    for profile, d in cases:
        skip = args.skip_tree_above is not None and d > args.skip_tree_above
        strategies = ("auto", "flat") if skip else STRATEGIES
        row = measure(profile, d, args.n, args.rounds, args.threads, strategies)
        m = row["medians"]
        tree = f"{m['tree']:.3f} s" if "tree" in m else "skipped"
        print(
            f"{profile} d={d}: auto ({row['chosen']}) {m['auto']:.3f} s, flat {m['flat']:.3f} s,"
            f" tree {tree}, auto/faster {row['auto_over_fastest']:.2f}"
            f" (paired {row['auto_over_fastest_paired']:.2f})",
            flush=True,
        )
        rows.append(row)
    payload = header(["python", "-m", "benchmarks.bench_strategy", *(argv or sys.argv[1:])])
    payload["options"] = {
        "n": args.n,
        "rounds": args.rounds,
        "threads": args.threads,
        "skip_tree_above": args.skip_tree_above,
    }
    payload["rows"] = rows
    for path in write_results(args.out, args.name, payload, markdown(payload)):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
