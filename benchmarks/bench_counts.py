"""Exact local cloaking counts: this project against its peers, on the same data, in one process.

Run ``python -m benchmarks.bench_counts --help``. For each ``(n, d)`` of the grid
the harness builds avatar-like data (`benchmarks.data`), times every
engine on it, checks that they all agree with the float64 brute force, and
writes ``<out>/<name>.json`` and ``<out>/<name>.md``. ``--scaling`` runs
``n`` from 1e3 to 1e7 at ``d = 5``. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

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
from benchmarks.data import PROFILES, Profile, make_case

if TYPE_CHECKING:
    import polars as pl

GRID_SIZES = (10_000, 100_000, 1_000_000)
# The engine's strategies, timed side by side by --strategies.
STRATEGIES = ("tree", "flat", "auto")
GRID_DIMS = (2, 5, 10, 20)
SCALING_SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
SCALING_DIM = 5
# Records checked against the brute force when it did not run on all of them.
SAMPLE = 256
# Work (records x avatars x dims) allowed for settling disagreements exactly.
SETTLE_WORK = 5e9


@dataclass
class Case:
    """One cell's data: row ``i`` of ``avatars`` is the avatar of row ``i`` of ``originals``."""

    originals: Float64Array
    avatars: Float64Array
    tie_tol: float
    threads: int
    _frames: tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame] | None = field(
        default=None, repr=False
    )

    @property
    def coords(self) -> list[str]:
        return [f"Dim{k + 1}" for k in range(self.originals.shape[1])]

    def frames(self) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """``(originals, avatars in row order, avatars shuffled)``, each with an ``id`` key."""
        if self._frames is None:
            import polars as pl

            n = len(self.originals)
            ids = pl.Series("id", np.arange(n, dtype=np.int64))
            originals = pl.DataFrame(self.originals, schema=self.coords).insert_column(0, ids)
            avatars = pl.DataFrame(self.avatars, schema=self.coords).insert_column(0, ids)
            order = np.random.default_rng(n).permutation(n)
            self._frames = (originals, avatars, avatars[order])
        return self._frames


@dataclass(frozen=True)
class Engine:
    """A way to compute the counts; ``growth`` is the exponent of ``n`` used to predict its time."""

    name: str
    role: Literal["ours", "peer"]
    exact: bool
    run: Callable[[Case], CountArray]
    needs: str | None
    growth: float
    describe: str
    frames: bool = False
    # For an engine that compares every pair: pair-coordinates per second and thread, a
    # first guess of its time before any measurement at a smaller n.
    pair_rate: float | None = None


def run_ours(case: Case, strategy: str | None = None) -> CountArray:
    import polars_hidden_rate as phr

    options: dict[str, Any] = {"tie_tol": case.tie_tol, "threads": case.threads}
    if "progress" in inspect.signature(phr.count_cloaking).parameters:
        options["progress"] = False
    if strategy is not None:
        options["strategy"] = strategy
    return phr.count_cloaking(case.originals, case.avatars, **options)


def strategy_runner(strategy: str) -> Callable[[Case], CountArray]:
    """``run_ours`` with one ``strategy`` of the engine."""
    return lambda case: run_ours(case, strategy)


# Probes timed per case: single times of a few milliseconds are noise on a shared machine.
PROBE_REPEAT = 9


def probe_cost(case: Case) -> dict[str, Any]:
    """What ``strategy="auto"`` chooses on ``case``, and the seconds its probe takes: the
    median of `PROBE_REPEAT` probes, as the count calls it (``own=None``); the tree
    it walks is built first, untimed: the tree strategy needs it anyway."""
    from polars_hidden_rate import engine
    from polars_hidden_rate.engine.kdtree import KdTree

    x, y, limits = engine.linked_arrays(case.originals, case.avatars, case.tie_tol)
    tree = KdTree.build(y, threads=case.threads)
    times = []
    for _ in range(PROBE_REPEAT):
        begin = time.perf_counter()
        estimate = engine.probe(tree, x, limits, None, threads=case.threads)
        times.append(time.perf_counter() - begin)
    return {
        "chose": "flat" if estimate.flat_seconds < estimate.tree_seconds else "tree",
        "seconds": round(float(np.median(times)), 5),
        "predicted_tree_seconds": round(estimate.tree_seconds, 4),
        "predicted_flat_seconds": round(estimate.flat_seconds, 4),
        "sampled": estimate.sampled,
        "stopped": estimate.stopped,
    }


def run_ours_polars(case: Case) -> CountArray:
    import polars_hidden_rate as phr

    originals, _, shuffled = case.frames()
    result = phr.local_cloaking(
        originals,
        shuffled,
        coords=case.coords,
        on="id",
        tie_tol=case.tie_tol,
        threads=case.threads,
        progress=False,
    )
    counts: CountArray = result["local_cloaking"].to_numpy().astype(np.int64)
    return counts


def run_ckdtree(case: Case) -> CountArray:
    from scipy.spatial import cKDTree

    # Inclusive radius sqrt(T_i); the own avatar is within it and is taken off.
    radius = np.sqrt(thresholds(case.originals, case.avatars, case.tie_tol))
    tree = cKDTree(case.avatars)
    found = tree.query_ball_point(
        case.originals, r=radius, return_length=True, workers=case.threads
    )
    counts: CountArray = np.asarray(found, dtype=np.int64) - 1
    return counts


def run_sklearn(case: Case) -> CountArray:
    from sklearn.neighbors import KDTree

    radius = np.sqrt(thresholds(case.originals, case.avatars, case.tie_tol))
    tree = KDTree(case.avatars)
    n = len(case.originals)
    # query_radius is single-threaded: split the queries over threads, as sklearn's own
    # NearestNeighbors.radius_neighbors(n_jobs=...) does.
    chunk = max(1_000, math.ceil(n / (8 * case.threads)))

    def part(start: int) -> CountArray:
        rows = slice(start, start + chunk)
        found = tree.query_radius(case.originals[rows], radius[rows], count_only=True)
        return np.asarray(found, dtype=np.int64)

    with ThreadPoolExecutor(case.threads) as pool:
        counts: CountArray = np.concatenate(list(pool.map(part, range(0, n, chunk)))) - 1
    return counts


def run_polars_ds(case: Case) -> CountArray:
    """polars-ds counts neighbours within one frame, so the two sets are stacked.

    ``query_nb_cnt`` on originals stacked over avatars counts, for original ``i``,
    the originals and the avatars within ``T_i`` (squared radius, ``<=``). A
    second call on the originals alone counts the originals, itself included;
    the difference, less the own avatar, is ``c_i``. Avatar rows get radius 0
    (polars-ds skips them: it answers null for a radius below float64 epsilon).
    """
    import polars as pl
    import polars_ds as pds

    originals, avatars, _ = case.frames()
    coords = case.coords
    limits = thresholds(case.originals, case.avatars, case.tie_tol)
    zeros = np.zeros(len(limits))
    stacked = pl.concat(
        [
            originals.select(coords).with_columns(r=pl.Series(limits)),
            avatars.select(coords).with_columns(r=pl.Series(zeros)),
        ]
    )
    both = stacked.select(pds.query_nb_cnt(*coords, r="r", dist="sql2", parallel=True))
    alone = originals.select(coords).select(
        pds.query_nb_cnt(*coords, r=pl.Series(limits), dist="sql2", parallel=True)
    )
    # polars-ds answers null where the radius is below float64 epsilon (an avatar within
    # 1.5e-8 of its original, or equal to it): such records are reported as -1.
    n = len(limits)
    found = both.to_series()[:n].cast(pl.Int64) - alone.to_series().cast(pl.Int64) - 1
    counts: CountArray = found.fill_null(-1).to_numpy()
    return counts


def run_faiss_flat(case: Case) -> CountArray:
    """FAISS flat range search in float32, one radius per query, no float64 settlement.

    FAISS takes one radius per search: query ``i`` gets ``T_i`` through an extra
    coordinate ``sqrt(R - T_i)`` (zero for the avatars). Inexact at the ulp.
    """
    import faiss

    limits = thresholds(case.originals, case.avatars, case.tie_tol)
    centre = np.concatenate([case.originals, case.avatars]).mean(axis=0)
    queries = (case.originals - centre).astype(np.float32)
    avatars = (case.avatars - centre).astype(np.float32)
    n, d = queries.shape
    index = faiss.IndexFlatL2(d + 1)
    index.add(np.hstack([avatars, np.zeros((n, 1), np.float32)]))
    counts = np.zeros(n, dtype=np.int64)
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(case.threads)
    try:
        for start in range(0, n, 1024):
            rows = np.arange(start, min(start + 1024, n))
            radius = np.float32(limits[rows].max())
            radius = np.nextafter(radius, np.float32(np.inf))
            lift = np.sqrt(np.maximum(float(radius) - limits[rows], 0)).astype(np.float32)
            lims, _, found = index.range_search(np.hstack([queries[rows], lift[:, None]]), radius)
            owner = np.repeat(np.arange(len(rows)), np.diff(lims.astype(np.int64)))
            own = found == rows[owner]
            counts[rows] = np.bincount(owner[~own], minlength=len(rows))
    finally:
        faiss.omp_set_num_threads(previous)
    return counts


def run_brute(case: Case) -> CountArray:
    limits = thresholds(case.originals, case.avatars, case.tie_tol)
    return exact_counts(case.originals, case.avatars, limits, threads=case.threads)


ENGINES: dict[str, Engine] = {
    engine.name: engine
    for engine in (
        Engine(
            "ours",
            "ours",
            True,
            run_ours,
            "polars_hidden_rate",
            1.3,
            "polars_hidden_rate.count_cloaking(X, Y): numpy arrays in, counts out",
        ),
        *(
            Engine(
                f"ours-{strategy}",
                "ours",
                True,
                strategy_runner(strategy),
                "polars_hidden_rate",
                2.0 if strategy == "flat" else 1.3,
                f"polars_hidden_rate.count_cloaking(X, Y, strategy={strategy!r})",
            )
            for strategy in STRATEGIES
        ),
        Engine(
            "ours-polars",
            "ours",
            True,
            run_ours_polars,
            "polars_hidden_rate",
            1.3,
            "local_cloaking on DataFrames, avatars shuffled and linked by an `id` key",
            frames=True,
        ),
        Engine(
            "ckdtree",
            "peer",
            True,
            run_ckdtree,
            "scipy",
            1.3,
            "scipy cKDTree(Y).query_ball_point(X, r=sqrt(T), return_length=True) - 1",
        ),
        Engine(
            "sklearn",
            "peer",
            True,
            run_sklearn,
            "sklearn",
            1.3,
            "scikit-learn KDTree(Y).query_radius(X, sqrt(T), count_only=True) - 1, "
            "query chunks over threads",
        ),
        Engine(
            "polars-ds",
            "peer",
            True,
            run_polars_ds,
            "polars_ds",
            1.3,
            "polars-ds query_nb_cnt(r=T, dist='sql2') on originals stacked over avatars, "
            "minus the same on the originals alone",
            frames=True,
        ),
        Engine(
            "faiss-flat",
            "peer",
            False,
            run_faiss_flat,
            "faiss",
            2.0,
            "faiss IndexFlatL2 range search, float32, per-query radius by an extra coordinate",
            pair_rate=3e9,
        ),
        Engine(
            "brute",
            "peer",
            True,
            run_brute,
            None,
            2.0,
            "numpy float64 brute force in blocks (the definition; the arbiter)",
            pair_rate=1.5e8,
        ),
    )
}


def available(engine: Engine) -> bool:
    if engine.needs is None:
        return True
    import importlib.util

    return importlib.util.find_spec(engine.needs) is not None


def predicted_seconds(
    engine: Engine, n: int, d: int, threads: int, history: Sequence[tuple[int, float]]
) -> float | None:
    """Time predicted from the runs at smaller ``n`` (same ``d``), or from the pair rate."""
    smaller = sorted((m, t) for m, t in history if m < n)
    if smaller:
        growth = engine.growth
        if len(smaller) >= 2:
            (m0, t0), (m1, t1) = smaller[-2:]
            if t0 > 0.05 and m1 > m0:
                growth = min(max(math.log(t1 / t0) / math.log(m1 / m0), 1.0), 2.2)
        m, t = smaller[-1]
        return float(t * (n / m) ** growth)
    if engine.pair_rate is not None:
        return float(n) * n * d / (engine.pair_rate * threads)
    return None


@dataclass
class Options:
    sizes: list[int]
    dims: list[int]
    engines: list[str]
    repeat: int
    out: Path
    name: str
    threads: int
    budget: float
    profile: Profile
    neighbours: int
    tie_tol: float
    seed: int
    frame_sizes: list[int]


def run_cell(
    n: int, d: int, options: Options, history: dict[tuple[str, int], list[tuple[int, float]]]
) -> dict[str, Any]:
    started = time.perf_counter()
    originals, avatars = make_case(
        n,
        d,
        profile=options.profile,
        k=options.neighbours,
        seed=options.seed,
        threads=options.threads,
    )
    cell: dict[str, Any] = {
        "n": n,
        "d": d,
        "data_seconds": round(time.perf_counter() - started, 3),
        "engines": {},
    }
    case = Case(originals, avatars, options.tie_tol, options.threads)
    counts: dict[str, CountArray] = {}
    for name in options.engines:
        engine = ENGINES[name]
        entry: dict[str, Any] = {}
        cell["engines"][name] = entry
        predicted = predicted_seconds(engine, n, d, options.threads, history[(name, d)])
        if not available(engine):
            entry.update(status="unavailable", reason=f"{engine.needs} is not installed")
            continue
        if name == "ours-polars" and n not in options.frame_sizes:
            entry.update(status="not run", reason="only at --frame-sizes")
            continue
        if predicted is not None and predicted > options.budget:
            entry.update(
                status="skipped",
                reason=f"predicted {predicted:.0f} s > budget {options.budget:g} s",
                predicted_seconds=round(predicted, 1),
            )
            continue
        if engine.frames:
            case.frames()
        times = []
        try:
            for _ in range(options.repeat):
                begin = time.perf_counter()
                result = engine.run(case)
                times.append(time.perf_counter() - begin)
        except Exception as error:  # a peer that fails (memory, API) is reported, not fatal
            entry.update(status="error", reason=f"{type(error).__name__}: {error}"[:300])
            continue
        counts[name] = np.asarray(result, dtype=np.int64)
        entry.update(status="ok", seconds=round(min(times), 4), runs=[round(t, 4) for t in times])
        history[(name, d)].append((n, min(times)))
    if "ours-auto" in options.engines and available(ENGINES["ours-auto"]):
        cell["probe"] = probe_cost(case)
    cell.update(check_agreement(case, counts, options))
    cell.update(compare(cell["engines"]))
    return cell


def check_agreement(case: Case, counts: dict[str, CountArray], options: Options) -> dict[str, Any]:
    """Compare every engine with the float64 brute force.

    Where the brute force ran, it decides every record. Elsewhere a brute force
    over all avatars settles the records on which the exact engines differ among
    themselves, and a random sample; on the other records their common answer
    stands. ``unsettled`` counts the disputed records left over for lack of time;
    they are compared for nobody.
    """
    n, d = case.originals.shape
    exact_names = [name for name in counts if ENGINES[name].exact]
    reference = np.full(n, -1, dtype=np.int64)
    known = np.zeros(n, dtype=bool)
    unsettled = 0
    if "brute" in counts:
        reference[:] = counts["brute"]
        known[:] = True
        method = "brute force on every record"
    else:
        differ = np.zeros(n, dtype=bool)
        for name in exact_names[1:]:
            differ |= counts[name] != counts[exact_names[0]]
        disputed = np.flatnonzero(differ)
        room = max(SAMPLE, int(SETTLE_WORK // (n * d)))
        sample = np.random.default_rng(n * 31 + d).choice(n, size=min(n, SAMPLE), replace=False)
        rows = np.union1d(disputed[:room], sample)
        if exact_names:
            reference[:] = counts[exact_names[0]]
            known[:] = True
            known[disputed[room:]] = False
            unsettled = len(disputed[room:])
        limits = thresholds(case.originals, case.avatars, case.tie_tol)
        reference[rows] = exact_counts(
            case.originals, case.avatars, limits, rows, threads=case.threads
        )
        known[rows] = True
        method = (
            f"brute force on the {min(len(disputed), room)} records where exact engines differ "
            f"and {len(sample)} sampled ones; elsewhere their common answer"
        )
    mismatches = {
        name: int(np.count_nonzero(found[known] != reference[known]))
        for name, found in counts.items()
    }
    disagreeing = [name for name in exact_names if mismatches[name]]
    data: dict[str, Any] = {}
    if known.all():
        data = {
            "hidden_rate": round(100.0 * float(np.mean(reference > 0)), 2),
            "median_count": float(np.median(reference)),
            "p99_count": float(np.percentile(reference, 99)),
            "max_count": int(reference.max()),
        }
    return {
        "arbiter": method,
        "checked_records": int(known.sum()),
        "mismatches": mismatches,
        "unsettled": unsettled,
        "agree": not disagreeing and unsettled == 0,
        "disagreeing": disagreeing,
        "data": data,
    }


def compare(entries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``ours / best peer``, the best among all peers and among the exact ones that agreed."""
    peers = {
        name: entry["seconds"]
        for name, entry in entries.items()
        if ENGINES[name].role == "peer" and entry.get("status") == "ok"
    }
    ours = entries.get("ours", {}).get("seconds")
    summary: dict[str, Any] = {"best_peer": None, "ratio": None}
    if peers:
        best = min(peers, key=lambda name: peers[name])
        summary.update(best_peer=best, best_peer_seconds=peers[best])
        if ours is not None:
            summary["ratio"] = round(ours / peers[best], 3)
    return summary


def warm_up(options: Options) -> None:
    """Run each engine once on a tiny case, untimed: imports and thread pools start here."""
    originals, avatars = make_case(200, 2, k=5, threads=options.threads)
    case = Case(originals, avatars, options.tie_tol, options.threads)
    for name in options.engines:
        if available(ENGINES[name]):
            with contextlib.suppress(Exception):
                ENGINES[name].run(case)


def benchmark(options: Options, command: Sequence[str] | None = None) -> dict[str, Any]:
    payload = header(command)
    payload["options"] = {
        key: str(value) if isinstance(value, Path) else value
        for key, value in vars(options).items()
    }
    payload["engines"] = {name: ENGINES[name].describe for name in options.engines}
    warm_up(options)
    history: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)
    cells = []
    # d outer, n inner and rising: each prediction uses the smaller n at the same d.
    for d in options.dims:
        for n in sorted(options.sizes):
            cell = run_cell(n, d, options, history)
            cells.append(cell)
            print(cell_line(cell, options.engines), file=sys.stderr, flush=True)
    cells.sort(key=lambda cell: (cell["n"], cell["d"]))
    payload["cells"] = cells
    payload["agree"] = all(cell["agree"] for cell in cells)
    ours = [name for name in options.engines if ENGINES[name].role == "ours"]
    payload["ours_exact"] = not any(name in cell["disagreeing"] for cell in cells for name in ours)
    payload["ours_failed"] = any(
        cell["engines"].get(name, {}).get("status") == "error" for cell in cells for name in ours
    )
    payload["machine"]["load_average_after"] = header()["machine"]["load_average"]
    return payload


def cell_line(cell: dict[str, Any], engines: Sequence[str]) -> str:
    parts = [f"n={cell['n']:>9,} d={cell['d']:>2}"]
    for name in engines:
        parts.append(f"{name} {time_cell(cell, name)}")
    ratio = cell.get("ratio")
    parts.append(f"ours/best {ratio if ratio is not None else '-'}")
    parts.append(agreement(cell))
    return " | ".join(parts)


def agreement(cell: dict[str, Any]) -> str:
    if cell["agree"]:
        return "yes"
    unsettled = f", {cell['unsettled']} unsettled" if cell["unsettled"] else ""
    return f"no: {', '.join(cell['disagreeing'])}{unsettled}"


def time_cell(cell: dict[str, Any], name: str) -> str:
    entry = cell["engines"].get(name, {})
    status = entry.get("status")
    if status == "ok":
        text = seconds(entry["seconds"])
        wrong = cell["mismatches"].get(name, 0)
        return f"{text} ≠{wrong}" if wrong else text
    return {"skipped": "skip", "unavailable": "n/a", "error": "error", "not run": "-"}.get(
        str(status), "-"
    )


def markdown(payload: dict[str, Any]) -> str:
    engines = list(payload["engines"])
    machine = payload["machine"]
    lines = [
        f"Measured {payload['date']} on {machine['cpus_usable']} of {machine['cpus']} CPUs "
        f"({machine['cpu_model']}, {machine['memory_gib']} GiB), "
        f"threads={payload['options']['threads']}, data profile "
        f"`{payload['options']['profile']}`, load average before "
        f"{', '.join(f'{x:.2f}' for x in machine['load_average'] or [])}.",
        "",
        f"Command: `{payload['command']}`",
        "",
        "| n | d | hidden rate % | median c | "
        + " | ".join(engines)
        + " | ours / best peer | best peer | agree |",
        "|---:|---:|---:|---:|" + "---:|" * len(engines) + "---:|---|---|",
    ]
    for cell in payload["cells"]:
        data = cell.get("data", {})
        ratio = cell.get("ratio")
        best = cell.get("best_peer") or ""
        if best and not ENGINES[best].exact:
            best += " (inexact)"
        lines.append(
            f"| {cell['n']:,} | {cell['d']} | {data.get('hidden_rate', '')} | "
            f"{data.get('median_count', '')} | "
            + " | ".join(time_cell(cell, name) for name in engines)
            + f" | {'' if ratio is None else f'{ratio:.2f}'} | {best} | "
            + agreement(cell)
            + " |"
        )
    lines += strategy_table(payload["cells"])
    lines += [
        "",
        "Times in seconds, the best of `--repeat` runs, from numpy arrays (or DataFrames for "
        "`ours-polars` and `polars-ds`) to counts, index building included. `skip`: the time "
        "predicted from the smaller n exceeds the budget; `-`: not run; `n/a`: not installed; "
        "`≠k`: k records disagree with the float64 brute force "
        "(every record where `brute` ran; elsewhere the brute force settles the records on "
        "which the exact engines differ and 256 sampled ones, and their common answer stands "
        "for the rest).",
        "",
    ]
    return "\n".join(lines)


def strategy_table(cells: Sequence[dict[str, Any]]) -> list[str]:
    """With ``--strategies``: what auto chose, its probe's share, and auto against the faster
    of tree and flat."""
    rows = [cell for cell in cells if "probe" in cell]
    if not rows:
        return []
    lines = [
        "",
        "| n | d | tree | flat | auto | auto chose | probe s | probe / auto | auto / best |",
        "|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for cell in rows:
        times = {
            name: cell["engines"].get(f"ours-{name}", {}).get("seconds") for name in STRATEGIES
        }
        best = min((t for name, t in times.items() if name != "auto" and t), default=None)
        auto, probe = times["auto"], cell["probe"]
        share = f"{100 * probe['seconds'] / auto:.1f} %" if auto else ""
        ratio = f"{auto / best:.2f}" if auto and best else ""
        lines.append(
            f"| {cell['n']:,} | {cell['d']} | "
            + " | ".join(time_cell(cell, f"ours-{name}") for name in STRATEGIES)
            + f" | {probe['chose']} | {probe['seconds']:.4f} | {share} | {ratio} |"
        )
    return lines


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_counts",
        description="Time exact local cloaking counts against scipy, scikit-learn, "
        "polars-ds, faiss and a numpy brute force on avatar-like data.",
    )
    parser.add_argument("--sizes", nargs="+", help="record counts n, e.g. 1e4,1e5")
    parser.add_argument("--dims", nargs="+", help="dimensions d, e.g. 2,5,10,20")
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["all"],
        help=f"engines to run (default all): {', '.join(ENGINES)}",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per engine; the best counts")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for JSON and Markdown")
    parser.add_argument("--name", help="file name stem (default: counts, or scaling)")
    parser.add_argument("--threads", type=int, default=default_threads(), help="threads per engine")
    parser.add_argument(
        "--budget",
        type=float,
        help="skip an engine whose predicted time exceeds this many seconds "
        "(default 120; 900 with --scaling)",
    )
    parser.add_argument(
        "--scaling",
        action="store_true",
        help=f"n from 1e3 to 1e7 at d = {SCALING_DIM}, ours and cKDTree by default",
    )
    parser.add_argument("--profile", choices=PROFILES, default="gaussian", help="data profile")
    parser.add_argument("--k", type=int, default=20, help="neighbours behind each avatar")
    parser.add_argument("--tie-tol", type=float, default=1e-9, help="relative tie tolerance")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--strategies",
        action="store_true",
        help="also time the engine's strategies side by side: "
        + ", ".join(f"ours-{strategy}" for strategy in STRATEGIES),
    )
    parser.add_argument(
        "--frame-sizes",
        nargs="+",
        default=["1e5"],
        help="n at which ours-polars (local_cloaking on DataFrames) runs (default 1e5)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.threads < 1:
        parser.error("--repeat and --threads must be at least 1")
    try:
        sizes = parse_sizes(args.sizes) if args.sizes else None
        dims = parse_sizes(args.dims) if args.dims else None
        frame_sizes = parse_sizes(args.frame_sizes)
    except ValueError as error:
        parser.error(str(error))
    engines = [name for value in args.engines for name in value.split(",") if name]
    by_strategy = [f"ours-{strategy}" for strategy in STRATEGIES]
    if engines == ["all"]:
        engines = ["ours", "ckdtree"] if args.scaling else list(ENGINES)
        engines = [name for name in engines if name not in by_strategy]
    if args.strategies:
        engines = [*by_strategy, *(name for name in engines if name not in by_strategy)]
    unknown = [name for name in engines if name not in ENGINES]
    if unknown:
        parser.error(f"unknown engine {unknown[0]!r}; choose from {', '.join(ENGINES)}")
    if args.scaling:
        sizes = sizes or list(SCALING_SIZES)
        dims = dims or [SCALING_DIM]
    return Options(
        sizes=sizes or list(GRID_SIZES),
        dims=dims or list(GRID_DIMS),
        engines=engines,
        repeat=args.repeat,
        out=args.out,
        name=args.name or ("scaling" if args.scaling else "counts"),
        threads=args.threads,
        budget=args.budget if args.budget is not None else (900.0 if args.scaling else 120.0),
        profile=args.profile,
        neighbours=args.k,
        tie_tol=args.tie_tol,
        seed=args.seed,
        frame_sizes=frame_sizes,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit status 1 when our counts differ from the brute force or fail."""
    options = parse_args(argv)
    limit_threads(options.threads)
    arguments = sys.argv[1:] if argv is None else list(argv)
    payload = benchmark(options, ["python", "-m", "benchmarks.bench_counts", *arguments])
    text = markdown(payload)
    paths = write_results(options.out, options.name, payload, text)
    print(text)
    print("wrote " + ", ".join(str(path) for path in paths), file=sys.stderr)
    return 0 if payload["ours_exact"] and not payload["ours_failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
