"""The privacy report against local cloaking alone, on avatar-like data.

    python -m benchmarks.bench_report --sizes 1e5,1e6 --dims 5

Both read the same in-memory frames with ``coords``; the report adds one kd-tree
of the originals (DCR, NNDR), the direct-match join and the summaries. With a holdout of as
many records of the same population (another draw of the profile), the report also runs the
membership attack, the DCR overfitting protection and the holdout's DCR/NNDR (issue 23: the
target is within 3x of local cloaking alone). Prints the seconds of each (best of
``--repeat``) and their ratios.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

import polars as pl

from benchmarks.common import parse_sizes
from benchmarks.data import make_case, make_originals


def best_of(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1e5"])
    parser.add_argument("--dims", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)

    import polars_hidden_rate as phr

    for n in parse_sizes(args.sizes):
        x, y = make_case(n, args.dims, threads=args.threads)
        names = [f"Dim{k + 1}" for k in range(args.dims)]
        originals, avatars = pl.DataFrame(x, schema=names), pl.DataFrame(y, schema=names)
        options = {"coords": names, "threads": args.threads}
        phr.privacy_report(originals.head(1000), avatars.head(1000), **options)  # compile
        alone = best_of(args.repeat, partial(phr.local_cloaking, originals, avatars, **options))
        report = best_of(args.repeat, partial(phr.privacy_report, originals, avatars, **options))
        holdout = pl.DataFrame(make_originals(n, args.dims, seed=1), schema=names)
        with_holdout = best_of(
            args.repeat,
            partial(phr.privacy_report, originals, avatars, holdout=holdout, **options),
        )
        print(
            f"n={n} d={args.dims}: local_cloaking {alone:.2f} s, privacy_report {report:.2f} s "
            f"(ratio {report / alone:.2f}), with a holdout of {n:,} {with_holdout:.2f} s "
            f"(ratio {with_holdout / alone:.2f})"
        )


if __name__ == "__main__":
    main()
