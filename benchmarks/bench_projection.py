"""The projection path against saiph + cKDTree on the AIDS layout (issue 22, item 1).

The data has the layout of the AIDS release (ACTG 175, ``../shared/datasets/aids``): 9
numeric columns (``cd496`` 37 % missing, filled with the originals' median) and 17 integer
codes taken as categorical, a FAMD of 46 scaled columns. It is generated, never read from
the release: each column is drawn on its own with a plausible range, and each avatar is its
original with noise on the numbers and 10 % of its codes redrawn.

Ours: ``Projection.fit``, ``Projection.transform`` of both frames (eager and lazy) and the
whole ``hidden_rate`` call (fit, transform, counts). The peer: saiph ``fit_transform`` and
``transform`` (pandas), then scipy ``cKDTree.query_ball_point(..., return_length=True)`` for
the radius counts. Each at every component and at ``ncp = 5``, the best of ``--repeat`` runs
after an untimed warm-up; a run predicted (quadratically in the records, from the size before)
to exceed ``--budget`` seconds is skipped.

    .venv/bin/python -m benchmarks.bench_projection --sizes 2e3,1e5
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.common import (
    RESULTS,
    default_threads,
    header,
    limit_threads,
    parse_sizes,
    write_results,
)

if TYPE_CHECKING:  # imported once the threads are set (limit_threads)
    import polars as pl

NUMERIC = ("age", "wtkg", "preanti", "cd40", "cd420", "cd496", "cd80", "cd820", "days")
CATEGORICAL: dict[str, tuple[int, ...]] = {
    **{name: (0, 1) for name in ("hemo", "homo", "drugs", "oprior", "z30", "zprior", "race")},
    **{name: (0, 1) for name in ("gender", "str2", "symptom", "treat", "offtrt", "r", "cens")},
    "karnof": (70, 80, 90, 100),
    "strat": (1, 2, 3),
    "arms": (0, 1, 2, 3),
}
FEATURES = [*NUMERIC, *CATEGORICAL]
# Where each numeric column lies in the release: (low, high), as integers but wtkg.
RANGES = {
    "age": (12, 70),
    "wtkg": (31, 160),
    "preanti": (0, 2851),
    "cd40": (0, 1199),
    "cd420": (49, 1119),
    "cd496": (0, 1190),
    "cd80": (40, 5011),
    "cd820": (124, 6035),
    "days": (14, 1231),
}
MISSING_SHARE = 0.37  # cd496
REDRAWN_SHARE = 0.10  # an avatar's codes drawn again
TIE_TOL = 1e-9


def aids_layout(n: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``n`` originals and their avatars (row ``i`` of one another) in the AIDS release's
    layout."""
    import polars as pl

    rng = np.random.default_rng([seed, n])
    originals: dict[str, Any] = {}
    avatars: dict[str, Any] = {}
    for name, (low, high) in RANGES.items():
        values = low + (high - low) * rng.beta(2.0, 5.0, n)
        noisy = np.clip(values + rng.normal(0.0, 0.1 * (high - low), n), low, high)
        if name != "wtkg":
            values, noisy = np.rint(values).astype(np.int64), np.rint(noisy).astype(np.int64)
        originals[name], avatars[name] = values, noisy
    for name, levels in CATEGORICAL.items():
        codes = np.asarray(levels)[rng.integers(0, len(levels), n)]
        redrawn = rng.random(n) < REDRAWN_SHARE
        originals[name] = codes
        avatars[name] = np.where(
            redrawn, np.asarray(levels)[rng.integers(0, len(levels), n)], codes
        )
    gaps = pl.Series(rng.random(n) < MISSING_SHARE)
    frames = []
    for columns in (originals, avatars):
        frame = pl.DataFrame(columns)
        frame = frame.with_columns(
            pl.when(gaps).then(None).otherwise(pl.col("cd496")).alias("cd496")
        )
        frames.append(frame)
    return frames[0], frames[1]


def best(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The best wall time of ``repeat`` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def ours(
    originals: pl.DataFrame, avatars: pl.DataFrame, ncp: int | None, repeat: int, count: bool
) -> dict[str, Any]:
    """Our stages and the whole ``hidden_rate`` call (unless ``count`` is False); ``ncp``
    None: every component."""
    from polars_hidden_rate import Projection, hidden_rate

    options: dict[str, Any] = {
        "features": FEATURES,
        "categorical": list(CATEGORICAL),
        "impute": "median",
    }
    if ncp is None:
        ncp = Projection.fit(originals, **options).n_components
    fit, projection = best(lambda: Projection.fit(originals, ncp=ncp, **options), repeat)

    def transform(lazy: bool) -> None:
        for frame in (originals, avatars):
            if lazy:
                projection.transform(frame.lazy()).collect()
            else:
                projection.transform(frame)

    eager, _ = best(lambda: transform(False), repeat)
    lazy, _ = best(lambda: transform(True), repeat)
    result = {"ncp": ncp, "fit": fit, "transform": eager, "transform_lazy": lazy}
    if not count:
        return result
    total, rate = best(
        lambda: hidden_rate(originals, avatars, ncp=ncp, tie_tol=TIE_TOL, **options), repeat
    )
    return result | {"total": total, "rate": rate}


def peer(
    originals: pl.DataFrame, avatars: pl.DataFrame, ncp: int, repeat: int, count: bool
) -> dict[str, Any]:
    """saiph's fit and transform, and cKDTree's radius counts (unless ``count`` is False)."""
    import pandas as pd
    import polars as pl
    import saiph
    from scipy.spatial import cKDTree

    median = originals["cd496"].median()
    frames = []
    for frame in (originals, avatars):
        filled = frame.with_columns(pl.col("cd496").fill_null(median))
        # Codes as text, so that saiph takes them as categorical (no pyarrow needed).
        frames.append(
            pd.DataFrame(
                {
                    name: filled[name].cast(pl.String).to_list()
                    if name in CATEGORICAL
                    else filled[name].to_numpy()
                    for name in FEATURES
                }
            )
        )

    def project() -> tuple[np.ndarray, np.ndarray]:
        x, model = saiph.fit_transform(frames[0], nf=ncp, seed=0)
        y = saiph.transform(frames[1], model)
        return x.to_numpy()[:, :ncp], y.to_numpy()[:, :ncp]

    projected, (x, y) = best(project, repeat)
    result: dict[str, Any] = {"projection": projected}
    if not count:
        return result

    def counts() -> np.ndarray:
        limits = ((x - y) ** 2).sum(axis=1) * (1.0 + TIE_TOL)
        found = cKDTree(y).query_ball_point(x, np.sqrt(limits), return_length=True, workers=-1)
        return np.asarray(found) - 1

    counted, found = best(counts, repeat)
    result |= {"counts": counted, "total": projected + counted}
    result["rate"] = 100.0 * (1.0 - float(np.mean(found == 0)))
    return result


def run_grid(
    sizes: Sequence[int], components: Sequence[int | None], repeat: int, budget: float
) -> list[dict[str, Any]]:
    """Every cell: a size and ``ncp`` (None: every component)."""
    warm_o, warm_a = aids_layout(300)
    ours(warm_o, warm_a, 5, 1, True)
    peer(warm_o, warm_a, 5, 1, True)
    cells: list[dict[str, Any]] = []
    previous: dict[tuple[str, int | None], tuple[int, float]] = {}

    def affordable(side: str, ncp: int | None, n: int) -> bool:
        last = previous.get((side, ncp))
        return last is None or last[1] * (n / last[0]) ** 2 <= budget

    for n in sizes:
        originals, avatars = aids_layout(n)
        for ncp in components:
            cell: dict[str, Any] = {"n": n}
            cell["ours"] = ours(originals, avatars, ncp, repeat, affordable("ours", ncp, n))
            cell["peer"] = peer(
                originals, avatars, cell["ours"]["ncp"], repeat, affordable("peer", ncp, n)
            )
            for side, key in (("ours", "total"), ("peer", "counts")):
                if key in cell[side]:
                    previous[side, ncp] = (n, cell[side][key])
            print(row(cell), flush=True)
            cells.append(cell)
    return cells


def ratio(ours_s: float | None, peer_s: float | None) -> str:
    return "" if ours_s is None or peer_s is None or peer_s <= 0 else f"{ours_s / peer_s:.2f}"


def percent(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def seconds(value: float | None) -> str:
    return "skipped" if value is None else f"{value:.3f}"


def row(cell: dict[str, Any]) -> str:
    o, p = cell["ours"], cell["peer"]
    return (
        f"| {cell['n']:,} | {o['ncp']} | {seconds(o['fit'])} | {seconds(o['transform'])} | "
        f"{seconds(o['transform_lazy'])} | {seconds(p['projection'])} | "
        f"{ratio(o['fit'] + o['transform'], p['projection'])} | {seconds(o.get('total'))} | "
        f"{seconds(p.get('total'))} | {ratio(o.get('total'), p.get('total'))} | "
        f"{percent(o.get('rate'))} | {percent(p.get('rate'))} |"
    )


HEAD = (
    "| n | ncp | our fit (s) | our transform, eager (s) | lazy (s) | saiph fit + transform (s) "
    "| ratio | our hidden_rate (s) | saiph + cKDTree (s) | ratio | our rate | peer rate |\n"
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
)


def markdown(payload: dict[str, Any]) -> str:
    lines = [
        "# The projection path against saiph + cKDTree (AIDS layout)",
        "",
        f"`{payload['command']}`, {payload['date']}, threads {payload['threads']}.",
        "Transforms are of both frames; ratios are ours / the peer's (below 1: ours faster).",
        "",
        HEAD,
        *(row(cell) for cell in payload["cells"]),
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["2e3,1e5,1e6"], help="records per side")
    parser.add_argument(
        "--ncp", default="all,5", help="components: numbers, or all (every component)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per stage; the best is kept")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument(
        "--budget", type=float, default=300.0, help="seconds a count (ours or cKDTree) may take"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for JSON and Markdown")
    parser.add_argument("--name", default="projection", help="stem of the result files")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    limit_threads(args.threads)
    payload = header() | {"threads": args.threads}
    print(HEAD, flush=True)
    components = [None if part == "all" else int(part) for part in args.ncp.split(",")]
    payload["cells"] = run_grid(parse_sizes(args.sizes), components, args.repeat, args.budget)
    write_results(args.out, args.name, payload, markdown(payload))
    rates = [cell["ours"].get("rate", 0.0) for cell in payload["cells"]]
    return 0 if all(math.isfinite(rate) for rate in rates) else 1


if __name__ == "__main__":
    sys.exit(main())
