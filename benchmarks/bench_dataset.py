"""`local_cloaking_to_parquet` on a command-line Dask cluster against the local engine.

Writes ``--n`` originals and their shuffled avatars (5 coordinates, an ``id`` key and payload
columns, the ``bench_parquet`` data) as ``--files`` parquet files per side, then runs, each
in its own process:

- ``local``: ``phr.local_cloaking_to_parquet(originals/, avatars/, out-local/, on="id")``;
- ``cluster``: the same call with ``cluster=Client(scheduler_file=...)``, on a ``dask
  scheduler`` and ``--workers`` ``dask worker`` processes (``--nthreads`` of ``--threads``,
  default 1) started from the command line, as on a real cluster.

Reports the wall time of each (from the call to the written output, imports and the
client's connection left out), the driver's peak RSS (its own ``VmHWM``), each worker's
``VmHWM``, and whether the two outputs are equal, part by part and column by column.
The cluster run also reports the tasks the scheduler ran (a scheduler plugin counting each
finished task, by key prefix), against the number `TaskPlan.tasks` modelled before the run,
and the CPU seconds of the scheduler and of each worker process during the call.
With ``--stages``, it also records Dask's task stream and reports, stage by
stage, its tasks, the workers' compute and transfer seconds, and when it ran.
With ``--repeat R``, it runs R pairs in alternation (the local run, then the cluster run
on a cluster of its own), compares the outputs of each, and reports every pair's ratio and
their median: a shared VM moves a single run by 10 to 20 %, so the goal is read on the
median; the last pair is reported in full.
Writes ``<out>/dataset.json`` and ``<out>/dataset.md``. Run heavy sizes under
``flock /tmp/phr-heavy.lock``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_parquet import COORDS, DIMS, own_peak_rss_mib
from benchmarks.common import RESULTS, header, parse_sizes, write_results
from benchmarks.data import PROFILES, make_case

ROOT = Path(__file__).resolve().parents[1]
DRIVER_GOAL_MIB = 768
WALL_GOAL_RATIO = 1.2  # issue 34, at 2e7 on 2 workers


def write_inputs(
    directory: Path, case: tuple[np.ndarray, np.ndarray], files: int, *, seed: int
) -> None:
    """``originals/`` and ``avatars/`` (shuffled) of ``case``, ``files`` parquet files each."""
    import polars as pl

    originals, avatars = case
    n = len(originals)
    rng = np.random.default_rng([seed, n])
    ids = rng.permutation(n).astype(np.int64) * 7 + 1_000_003
    order = rng.permutation(n)
    groups = np.array(["A", "B", "C", "D", "E"])
    for role, values, keys in (
        ("originals", originals, ids),
        ("avatars", avatars[order], ids[order]),
    ):
        folder = directory / role
        folder.mkdir(parents=True, exist_ok=True)
        for k, rows in enumerate(np.array_split(np.arange(n), files)):
            part = pl.DataFrame(values[rows], schema=COORDS).insert_column(
                0, pl.Series("id", keys[rows])
            )
            part.with_columns(
                age=pl.Series(rng.integers(18, 91, len(rows)), dtype=pl.Int16),
                group=pl.Series(groups[rng.integers(0, len(groups), len(rows))]),
            ).write_parquet(folder / f"{role}-{k:03d}.parquet")
        del values


def work(mode: str, directory: Path, scheduler_file: Path | None, stages: bool) -> dict[str, Any]:
    """One run, inside the child process: its seconds and the summary (and its stages)."""
    import contextlib

    import polars_hidden_rate as phr
    from polars_hidden_rate.tasks import tasks_run

    cluster = None
    recording: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    counting: contextlib.AbstractContextManager[dict[str, int] | None] = contextlib.nullcontext()
    if mode == "cluster":
        from distributed import Client, get_task_stream

        cluster = Client(scheduler_file=str(scheduler_file))
        counting = tasks_run(cluster)
        if stages:
            recording = get_task_stream(cluster)
        before = cpu_seconds(cluster)
    own_before = os.times()
    started = time.perf_counter()
    with counting as ran, recording as stream:
        summary = phr.local_cloaking_to_parquet(
            directory / "originals",
            directory / "avatars",
            directory / f"out-{mode}",
            coords=COORDS,
            on="id",
            overwrite=True,
            cluster=cluster,
        )
    seconds = time.perf_counter() - started
    report: dict[str, Any] = {"seconds": round(seconds, 2), "summary": summary.to_dict()}
    if cluster is None:  # the local engine: this process's CPU during the call
        own = os.times()
        report["cpu_s"] = {"local": round(sum(own[:2]) - sum(own_before[:2]), 2)}
        report["system_s"] = {"local": round(own.system - own_before.system, 2)}
    if stream is not None:
        report["stages"] = stage_profile(stream.data)
    if cluster is not None:
        after = cpu_seconds(cluster)
        report["cpu_s"] = {name: round(sum(after[name]) - sum(before[name]), 2) for name in after}
        report["system_s"] = {name: round(after[name][1] - before[name][1], 2) for name in after}
        report["tasks_run"] = dict(sorted(ran.items())) if ran is not None else {}
        report["tasks_modelled"] = modelled_tasks(cluster, directory)
        cluster.close()
    return report


def own_cpu_seconds() -> tuple[float, float]:
    """This process's user and system CPU seconds (system: mostly the kernel's page faults
    on memory the process had not touched yet)."""
    times = os.times()
    return times.user, times.system


def cpu_seconds(client: Any) -> dict[str, tuple[float, float]]:
    """The user and system CPU seconds of the scheduler (``scheduler``) and of each worker
    process so far."""
    workers = client.run(own_cpu_seconds)
    return {
        "scheduler": client.run_on_scheduler(own_cpu_seconds),
        **{f"worker {k}": workers[address] for k, address in enumerate(sorted(workers))},
    }


def modelled_tasks(client: Any, directory: Path) -> dict[str, Any]:
    """`TaskPlan.tasks` of the run, stage by stage, as the driver plans it."""
    import dataclasses

    from polars_hidden_rate.cluster.shards import plan_tasks
    from polars_hidden_rate.frames import open_dataset
    from polars_hidden_rate.tasks import worker_specs

    left = open_dataset(directory / "originals", "originals")
    right = open_dataset(directory / "avatars", "avatars")
    plan = plan_tasks(left.rows, right.rows, DIMS, worker_specs(client))
    stages = plan.tasks(len(left.partitions), len(right.partitions))
    return {
        "plan": dataclasses.asdict(plan),
        "stages": dataclasses.asdict(stages),
        "total": stages.total,
    }


def stage_of(key: str) -> str:
    """The stage of a task key ``phr-<stage>-<indices>-<token>``: its words before the first
    index.

    Examples
    --------
    >>> stage_of("phr-count-within-3-17-0123456789ab"), stage_of("phr-at-most-9-1a2b-0123")
    ('count-within', 'at-most')
    >>> stage_of("phr-link-pieces-0123456789ab"), stage_of("rechunk-transfer-" + "0a" * 16)
    ('link-pieces', 'rechunk-transfer')
    """
    if not key.startswith("phr-"):  # Dask's own: rechunk-transfer, shuffle-barrier, ...
        from dask.utils import key_split

        return str(key_split(key))
    parts = key.split("-")[1:-1]
    return "-".join(itertools.takewhile(lambda part: not part.isdigit(), parts)) or key


def stage_profile(tasks: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per stage, in the order the stages started: tasks, compute and transfer seconds summed
    over the workers, and the first start and last stop (seconds after the first task)."""
    spans = [span for task in tasks for span in task["startstops"]]
    origin = min((span["start"] for span in spans), default=0.0)
    stages: dict[str, dict[str, float]] = {}
    for task in tasks:
        key = task["key"][0] if isinstance(task["key"], tuple) else str(task["key"])
        entry = stages.setdefault(
            stage_of(key),
            {"tasks": 0, "compute_s": 0.0, "transfer_s": 0.0, "first_s": math.inf, "last_s": 0.0},
        )
        entry["tasks"] += 1
        for span in task["startstops"]:
            action = "compute_s" if span["action"] == "compute" else "transfer_s"
            entry[action] += span["stop"] - span["start"]
            entry["first_s"] = min(entry["first_s"], span["start"] - origin)
            entry["last_s"] = max(entry["last_s"], span["stop"] - origin)
    ordered = sorted(stages.items(), key=lambda item: item[1]["first_s"])
    return {name: {k: round(v, 2) for k, v in entry.items()} for name, entry in ordered}


def run_child(
    mode: str, directory: Path, scheduler_file: Path | None, stages: bool = False
) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.bench_dataset", "--child", mode]
    command += ["--dir", str(directory), *(["--stages"] if stages else [])]
    if scheduler_file is not None:
        command += ["--scheduler-file", str(scheduler_file)]
    started = time.perf_counter()
    child = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    entry: dict[str, Any] = {"process_seconds": round(time.perf_counter() - started, 2)}
    if child.returncode != 0:
        entry["status"] = f"failed: {child.stderr.strip().splitlines()[-1:]}"
        sys.stderr.write(child.stderr)
        return entry
    entry.update(json.loads(child.stdout.strip().splitlines()[-1]), status="ok")
    return entry


MALLOC_MODES = ("glibc", "dask")
"""The workers' allocator: ``glibc``'s defaults, as in the local run's process (the Dask
nanny's ``MALLOC_TRIM_THRESHOLD_`` unset, as docs/scale.md recommends for this package), or
``dask``'s (the nanny sets it to 64 KiB, which turns off glibc's dynamic mmap threshold:
every array above 128 KiB is then mapped afresh and faulted in page by page)."""


def worker_environment(directory: Path, malloc: str) -> dict[str, str]:
    """The environment of the ``dask`` processes: with ``glibc``, a Dask config file (in
    ``directory``) that unsets the nanny's ``MALLOC_TRIM_THRESHOLD_`` for its worker, and
    none inherited (a Nanny started in this process, as a ``LocalCluster`` does, sets it in
    this process's own environment)."""
    environment = dict(os.environ)
    if malloc == "glibc":
        environment.pop("MALLOC_TRIM_THRESHOLD_", None)
        config = directory / "dask-config"
        config.mkdir(exist_ok=True)
        (config / "workers.yaml").write_text(
            "distributed:\n  nanny:\n    pre-spawn-environ:\n      MALLOC_TRIM_THRESHOLD_: null\n"
        )
        environment["DASK_CONFIG"] = str(config)
    return environment


def own_trim_threshold() -> str | None:
    """This process's ``MALLOC_TRIM_THRESHOLD_`` (None: glibc's default)."""
    return os.environ.get("MALLOC_TRIM_THRESHOLD_")


def start_cluster(
    directory: Path, workers: int, memory: str, threads: int = 1, malloc: str = "glibc"
) -> tuple[list[Any], Path]:
    """``dask scheduler`` and ``workers`` x ``dask worker``, as processes of their own, the
    workers with the allocator ``malloc`` (`MALLOC_MODES`)."""
    dask = str(Path(sys.executable).with_name("dask"))
    scheduler_file = directory / "scheduler.json"
    scheduler_file.unlink(missing_ok=True)
    logs = directory / "logs"
    logs.mkdir(exist_ok=True)
    environment = worker_environment(directory, malloc)
    processes = [
        subprocess.Popen(
            [dask, "scheduler", "--scheduler-file", str(scheduler_file), "--port", "0",
             "--dashboard-address", ":0"],
            stdout=(logs / "scheduler.log").open("w"), stderr=subprocess.STDOUT, cwd=ROOT,
        )
    ]  # fmt: skip
    deadline = time.monotonic() + 60
    while not scheduler_file.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the scheduler did not start within 60 s")
        time.sleep(0.2)
    for k in range(workers):
        processes.append(
            subprocess.Popen(
                [dask, "worker", "--scheduler-file", str(scheduler_file), "--nworkers", "1",
                 "--nthreads", str(threads), "--memory-limit", memory, "--no-dashboard"],
                stdout=(logs / f"worker-{k}.log").open("w"), stderr=subprocess.STDOUT, cwd=ROOT,
                env=environment,
            )
        )  # fmt: skip
    return processes, scheduler_file


def stop_cluster(processes: Sequence[Any]) -> None:
    """Stop what `start_cluster` started, the workers before the scheduler."""
    for process in reversed(processes):
        process.terminate()
    for process in processes:
        process.wait(timeout=60)


def on_workers(scheduler_file: Path, workers: int, function: Any) -> dict[str, Any]:
    """``function()`` on each of ``workers`` workers, once they are all up, by address."""
    from distributed import Client

    with Client(scheduler_file=str(scheduler_file)) as client:
        client.wait_for_workers(workers, timeout=120)
        found: dict[str, Any] = client.run(function)
    return found


def worker_peaks(scheduler_file: Path, workers: int) -> dict[str, float | None]:
    return on_workers(scheduler_file, workers, own_peak_rss_mib)


def ready_worker() -> str | None:
    """On a worker before the clock starts: import the pipeline's tasks (the local run's
    process imported the package before its clock too) and return the worker's
    ``MALLOC_TRIM_THRESHOLD_``."""
    import polars_hidden_rate.cluster.pipeline_tasks  # noqa: F401

    return own_trim_threshold()


def ready_workers(scheduler_file: Path, workers: int) -> list[str | None]:
    """Every worker up with the package imported, and its ``MALLOC_TRIM_THRESHOLD_`` as it
    runs (by address): what the allocator really was."""
    found = on_workers(scheduler_file, workers, ready_worker)
    return [found[address] for address in sorted(found)]


def compare(directory: Path) -> dict[str, Any]:
    """Part by part: the same files, the same columns, the same values."""
    import polars as pl

    local = sorted((directory / "out-local").iterdir())
    cluster = sorted((directory / "out-cluster").iterdir())
    if [p.name for p in local] != [p.name for p in cluster]:
        return {"same_parts": False}
    rows = mismatches = 0
    equal = True
    for left, right in zip(local, cluster, strict=True):
        a, b = pl.read_parquet(left), pl.read_parquet(right)
        rows += a.height
        equal &= a.equals(b)
        mismatches += int((a["local_cloaking"] != b["local_cloaking"]).sum())
    return {"same_parts": True, "rows": rows, "frames_equal": equal, "mismatches": mismatches}


def allocator(payload: dict[str, Any]) -> str:
    """The workers' allocator as the header says it (older results name none)."""
    if "worker_malloc" not in payload:
        return ""
    found = ", ".join(str(value) for value in payload.get("worker_trim_threshold", []))
    named = {
        "glibc": "glibc's defaults, the nanny's `MALLOC_TRIM_THRESHOLD_` unset",
        "dask": "Dask's, the nanny's `MALLOC_TRIM_THRESHOLD_` kept",
    }[payload["worker_malloc"]]
    return f", their allocator {named} (the workers': {found or '-'})"


def markdown(payload: dict[str, Any]) -> str:
    runs, check, machine = payload["runs"], payload["check"], payload["machine"]
    local, cluster = runs.get("local", {}), runs.get("cluster", {})
    pairs = payload.get("pairs", [])
    lines = [
        f"Measured {payload['date']} on {machine['cpus_usable']} of {machine['cpus']} CPUs "
        f"({machine['cpu_model']}, {machine['memory_gib']} GiB): "
        f"n={payload['n']:,} originals and avatars, {DIMS} coordinates, "
        f"{payload['files']} parquet files per side; {payload['workers']} `dask worker` "
        f"processes (`--nthreads {payload.get('threads', 1)} --memory-limit "
        f"{payload['memory_limit']}`){allocator(payload)}.",
        "",
        "| run | status | seconds | driver peak RSS MiB | workers' peak RSS MiB |",
        "|---|---|---:|---:|---|",
    ]
    for name, run in runs.items():
        workers = ", ".join(f"{v:,.0f}" for v in run.get("worker_peak_rss_mib", {}).values())
        lines.append(
            f"| {name} | {run['status']} | {run.get('seconds', '-')} | "
            f"{run.get('peak_rss_mib', 0):,.0f} | {workers or '-'} |"
        )
    if cluster.get("tasks_run"):
        ran, modelled = cluster["tasks_run"], cluster["tasks_modelled"]
        cpu = ", ".join(
            f"{name} {s:.1f} ({cluster['system_s'][name]:.1f} system)"
            for name, s in cluster["cpu_s"].items()
        )
        lines += [
            "",
            f"Tasks the scheduler ran: **{sum(ran.values()):,}** (modelled before the run: "
            f"{modelled['total']:,}; {modelled['plan']['buckets']} buckets, "
            f"{modelled['plan']['shards']} shards); CPU seconds during the call: {cpu}.",
            "",
            "| task prefix | tasks |",
            "|---|---:|",
            *(f"| {prefix} | {count:,} |" for prefix, count in ran.items()),
        ]
    if "seconds" in local and "seconds" in cluster:
        ratio = cluster["seconds"] / local["seconds"]
        lines += [
            "",
            f"Cluster / local wall time{' of the last pair' if len(pairs) > 1 else ''}: "
            f"{ratio:.2f} (goal <= {WALL_GOAL_RATIO}); driver peak "
            f"{cluster['peak_rss_mib']:,.0f} MiB (goal < {DRIVER_GOAL_MIB}).",
        ]
        if "cpu_s" in local:
            lines[-1] += (
                f" The local engine's CPU seconds during the call: {local['cpu_s']['local']:.1f}"
                f" ({local['system_s']['local']:.1f} system)."
            )
        if len(pairs) > 1:
            lines[-1] += (
                f" **Median over {len(pairs)} pairs: {median_ratio(pairs)}** (the runs "
                "alternated: local, then cluster on a cluster of its own)."
            )
    if cluster.get("stages"):
        lines += [
            "",
            "Cluster run by stage (Dask's task stream; seconds summed over the workers):",
            "",
            "| stage | tasks | compute s | transfer s | from s | to s |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {name} | {entry['tasks']:.0f} | {entry['compute_s']:.1f} | "
            f"{entry['transfer_s']:.1f} | {entry['first_s']:.1f} | {entry['last_s']:.1f} |"
            for name, entry in cluster["stages"].items()
        ]
        lines.append("")
    if len(pairs) > 1:
        lines += [
            *([""] if lines[-1] else []),
            "| pair | local s | cluster s | cluster / local | outputs equal |",
            "|---:|---:|---:|---:|---|",
            *(
                f"| {k} | {pair['local_s']} | {pair['cluster_s']} | {pair['ratio']} | "
                f"{pair['outputs_equal']} |"
                for k, pair in enumerate(pairs, 1)
            ),
            "",
        ]
    if check.get("same_parts"):
        lines.append(
            f"Outputs equal part by part: **{check['frames_equal']}** ({check['rows']:,} rows, "
            f"{check['mismatches']} counts differ); summaries equal: "
            f"**{_figures(local.get('summary')) == _figures(cluster.get('summary'))}**."
        )
    return "\n".join([*lines, ""])


def _figures(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """A run's summary less its provenance (its time and where it counted differ)."""
    if summary is None:
        return None
    return {key: value for key, value in summary.items() if key != "provenance"}


def header_payload(args: argparse.Namespace, n: int, files: int) -> dict[str, Any]:
    return {
        **header(),
        "n": n,
        "files": files,
        "workers": args.workers,
        "threads": args.threads,
        "memory_limit": args.memory_limit,
        "worker_malloc": args.worker_malloc,
        "repeat": args.repeat,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_dataset",
        description="local_cloaking_to_parquet on a command-line Dask cluster vs the local engine",
    )
    parser.add_argument("--n", default="2e7", help="originals (and avatars), default 2e7")
    parser.add_argument(
        "--files",
        type=lambda text: [int(part) for part in text.split(",")],
        default=[8],
        help="parquet files per side; several (8,32,128) run one after the other on the same data",
    )
    parser.add_argument(
        "--neighbours",
        choices=("ivf", "tree"),
        default="ivf",
        help="the avatars' neighbours: FAISS IVF (approximate) or a kd-tree (exact, faster)",
    )
    parser.add_argument("--name", default="dataset", help="results' file stem (+ _files<F>)")
    parser.add_argument("--workers", type=int, default=2, help="`dask worker` processes")
    parser.add_argument("--threads", type=int, default=1, help="each worker's --nthreads")
    parser.add_argument("--memory-limit", default="10GiB", help="each worker's --memory-limit")
    parser.add_argument(
        "--worker-malloc",
        choices=MALLOC_MODES,
        default="glibc",
        help="the workers' allocator: glibc's defaults (as docs/scale.md recommends) or Dask's",
    )
    parser.add_argument("--dir", type=Path, help="folder for the data (default: temporary)")
    parser.add_argument("--reuse", action="store_true", help="reuse the inputs in --dir")
    parser.add_argument("--profile", choices=PROFILES, default="gaussian")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for JSON and Markdown")
    parser.add_argument(
        "--stages", action="store_true", help="record the cluster run's task stream by stage"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="pairs of runs (local, then cluster) in alternation; the goal is read on the median",
    )
    parser.add_argument("--child", choices=("local", "cluster"), help=argparse.SUPPRESS)
    parser.add_argument("--scheduler-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        report = work(args.child, args.dir, args.scheduler_file, args.stages)
        report["peak_rss_mib"] = own_peak_rss_mib()
        print(json.dumps(report))
        return 0
    (n,) = parse_sizes([args.n])
    root = args.dir or Path(tempfile.mkdtemp(prefix="phr-dataset-"))
    case = None  # made once, split into each number of files
    ok = True
    for files in args.files:
        # One file count keeps the folder as it was; several get a folder each.
        directory = root if len(args.files) == 1 else root / f"files{files}"
        if not (args.reuse and (directory / "originals").is_dir()):
            if case is None:
                case = make_case(
                    n, DIMS, profile=args.profile, seed=args.seed, neighbours=args.neighbours
                )
            write_inputs(directory, case, files, seed=args.seed)
        name = args.name if len(args.files) == 1 else f"{args.name}_files{files}"
        ok = run_files(args, n, files, directory, name) and ok
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


def run_files(args: argparse.Namespace, n: int, files: int, directory: Path, name: str) -> bool:
    """``--repeat`` pairs of the local run and the cluster run on ``files`` files per side,
    in alternation; True when every pair's outputs agree."""
    payload = {**header_payload(args, n, files), "pairs": []}
    for _ in range(args.repeat):
        runs, payload["worker_trim_threshold"] = run_pair(args, directory)
        check = compare(directory) if all(r["status"] == "ok" for r in runs.values()) else {}
        payload["pairs"].append(pair_entry(runs, check))
    payload["runs"], payload["check"] = runs, check  # the last pair, in full
    write_results(args.out, name, payload, markdown(payload))
    print(markdown(payload))
    return all(pair["outputs_equal"] for pair in payload["pairs"])


def run_pair(
    args: argparse.Namespace, directory: Path
) -> tuple[dict[str, dict[str, Any]], list[str | None]]:
    """The local run, then the cluster run on a cluster of its own; and the workers'
    ``MALLOC_TRIM_THRESHOLD_``."""
    runs: dict[str, dict[str, Any]] = {"local": run_child("local", directory, None)}
    processes, scheduler_file = start_cluster(
        directory, args.workers, args.memory_limit, args.threads, args.worker_malloc
    )
    try:
        # Every worker up, and the package imported, before the clock starts.
        thresholds = ready_workers(scheduler_file, args.workers)
        runs["cluster"] = run_child("cluster", directory, scheduler_file, args.stages)
        runs["cluster"]["worker_peak_rss_mib"] = worker_peaks(scheduler_file, args.workers)
    finally:
        stop_cluster(processes)
    return runs, thresholds


def pair_entry(runs: dict[str, dict[str, Any]], check: dict[str, Any]) -> dict[str, Any]:
    """One pair's seconds, their ratio, and whether its outputs were equal."""
    local, cluster = runs["local"].get("seconds"), runs["cluster"].get("seconds")
    return {
        "local_s": local,
        "cluster_s": cluster,
        "ratio": round(cluster / local, 3) if local and cluster else None,
        "outputs_equal": bool(check.get("frames_equal") and check.get("mismatches") == 0),
    }


def median_ratio(pairs: Sequence[dict[str, Any]]) -> float | None:
    """The median of the pairs' cluster / local ratios (None when a run failed).

    Examples
    --------
    >>> median_ratio([{"ratio": 1.3}, {"ratio": 1.1}, {"ratio": 1.15}])
    1.15
    >>> median_ratio([{"ratio": 1.3}, {"ratio": None}]) is None
    True
    """
    ratios = [pair["ratio"] for pair in pairs]
    if not ratios or None in ratios:
        return None
    return round(float(statistics.median(ratios)), 3)


if __name__ == "__main__":
    sys.exit(main())
