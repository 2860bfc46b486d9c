"""The privacy report against local cloaking alone, on avatar-like data.

    python -m benchmarks.bench_report --sizes 1e5,1e6 --dims 5

Both read the same in-memory frames with ``coords``; the report adds one kd-tree
of the originals (DCR, NNDR), the direct-match join and the summaries. With a holdout of as
many records of the same population (another draw of the profile), the report also runs the
membership attack, the DCR overfitting protection and the holdout's DCR/NNDR (issue 23: the
target is within 3x of local cloaking alone); ``with_attack`` adds the attribute inference
attack on a categorical secret (4 classes drawn at random) from the first three coordinates as
the known columns, and with them the correlation protection rate. The runs are taken in turn,
``--repeat`` times, so that a change in the machine's load reaches all of them; prints and
writes
(``<out>/<name>.json`` and ``.md``) the best seconds of each and their ratios.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from benchmarks.common import header, parse_sizes, seconds, write_results
from benchmarks.data import make_case, make_originals

RUNS = ("local_cloaking", "privacy_report", "with_holdout", "with_attack")


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def measure(n: int, dims: int, repeat: int, threads: int | None) -> dict[str, Any]:
    """The best of ``repeat`` turns of the runs at ``n`` records, and every time."""
    import polars_hidden_rate as phr

    x, y = make_case(n, dims, threads=threads)
    names = [f"Dim{k + 1}" for k in range(dims)]
    originals, avatars = pl.DataFrame(x, schema=names), pl.DataFrame(y, schema=names)
    holdout = pl.DataFrame(make_originals(n, dims, seed=1), schema=names)
    options: phr.CountOptions = {"coords": names, "threads": threads}
    phr.privacy_report(  # compile
        originals.head(1000), avatars.head(1000), holdout=holdout.head(1000), **options
    )
    rng = np.random.default_rng(2)

    def with_secret(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(s=pl.Series(rng.choice(["a", "b", "c", "d"], frame.height)))

    attacked = [with_secret(frame) for frame in (originals, avatars, holdout)]
    attack: dict[str, Any] = {"known": names[:3], "secret": "s"}
    runs: dict[str, Callable[[], object]] = {
        "local_cloaking": partial(phr.local_cloaking, originals, avatars, **options),
        "privacy_report": partial(phr.privacy_report, originals, avatars, **options),
        "with_holdout": partial(phr.privacy_report, originals, avatars, holdout=holdout, **options),
        "with_attack": partial(
            phr.privacy_report, attacked[0], attacked[1], holdout=attacked[2], **attack, **options
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in RUNS}
    for _ in range(repeat):
        for name in RUNS:
            times[name].append(timed(runs[name]))
    best = {name: min(values) for name, values in times.items()}
    return {
        "n": n,
        "dims": dims,
        "seconds": best,
        "all_seconds": times,
        "ratio": {name: best[name] / best["local_cloaking"] for name in RUNS[1:]},
    }


def markdown(payload: dict[str, Any]) -> str:
    load = ", ".join(f"{v:.2f}" for v in payload["machine"]["load_average"])
    after = ", ".join(f"{v:.2f}" for v in payload["machine"]["load_average_after"])
    lines = [
        f"Measured {payload['date']} on {payload['machine']['cpus_usable']} of "
        f"{payload['machine']['cpus']} CPUs ({payload['machine']['cpu_model']}), load average "
        f"before {load}, after {after}.",
        "",
        f"Command: `{payload['command']}`",
        "",
        "| n | d | local_cloaking | privacy_report | ratio | with a holdout of n | ratio "
        "| and the inference attack | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in payload["cells"]:
        s, r = cell["seconds"], cell["ratio"]
        lines.append(
            f"| {cell['n']:,} | {cell['dims']} | {seconds(s['local_cloaking'])} | "
            f"{seconds(s['privacy_report'])} | {r['privacy_report']:.2f} | "
            f"{seconds(s['with_holdout'])} | {r['with_holdout']:.2f} | "
            f"{seconds(s['with_attack'])} | {r['with_attack']:.2f} |"
        )
    lines += [
        "",
        f"Seconds, the best of {payload['repeat']} turns of the runs taken in turn, "
        "from in-memory frames (`coords`) to the result.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1e5"])
    parser.add_argument("--dims", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--name", default="report")
    args = parser.parse_args(argv)

    given = sys.argv[1:] if argv is None else argv
    payload = header(["python", "-m", "benchmarks.bench_report", *given])
    payload["repeat"] = args.repeat
    cells = []
    for n in parse_sizes(args.sizes):
        cell = measure(n, args.dims, args.repeat, args.threads)
        cells.append(cell)
        s, r = cell["seconds"], cell["ratio"]
        print(
            f"n={n} d={args.dims}: local_cloaking {s['local_cloaking']:.2f} s, privacy_report "
            f"{s['privacy_report']:.2f} s (ratio {r['privacy_report']:.2f}), with a holdout "
            f"of {n:,} {s['with_holdout']:.2f} s (ratio {r['with_holdout']:.2f}), and the "
            f"inference attack {s['with_attack']:.2f} s (ratio {r['with_attack']:.2f})",
            flush=True,
        )
    payload["cells"] = cells
    payload["machine"]["load_average_after"] = header()["machine"]["load_average"]
    paths = write_results(args.out, args.name, payload, markdown(payload))
    print("wrote " + ", ".join(str(path) for path in paths))


if __name__ == "__main__":
    main()
