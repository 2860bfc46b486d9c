"""The whole privacy report with every attack, through the CLI, its stages and peak memory.

    timeout 1500 python -m benchmarks.bench_full_report --sizes 1e4,1e5,1e6 --threads 2

The data: ``n`` records of the demo's mixed-type cohort (`polars_hidden_rate.demo.cohort`,
numeric and categorical columns) as the originals; as the synthetic set, row by row, each
original perturbed (``--synthetic perturbed``, the default: its numbers moved by a normal draw
of `NOISE` times the column's deviation times ``(NOISE_AT / n) ** (1 / NOISE_DIMENSIONS)``,
rounded as the column is, and a category drawn from another record with the chance `SWAP`
times ``NOISE_AT / n``), which stands in for avatars (each near its own original, so that the
hidden rate's counts are those of a release, not of unrelated sets: avatars themselves take
longer to make at 1e5 than the report takes to run at 1e6). The noise shrinks with ``n`` as
avatars' distances do: an avatar is drawn among its original's ``k`` nearest, whose distance
falls as ``n ** (-1 / d)`` in ``d`` continuous dimensions (the cohort's six numeric columns;
its categories split the records into cells without adding one). A noise of a fixed share of
each column's deviation would keep each record's own distance while the records around it
grow in number with ``n``, so every local cloaking count, and the hidden rate's walk, would
grow with ``n``: a quadratic cost that no release has. A category moved is a step of fixed
size, so the records that take one are kept at ``SWAP * NOISE_AT`` whatever ``n``
(avatars' categories come from their neighbours, who share more of them as ``n`` grows).
``--synthetic fixed`` keeps the noise and the swaps of ``n = NOISE_AT`` at every size (that
quadratic stand-in); ``--synthetic avatars``: their avatars
(`polars_hidden_rate.avatarize`, k = 20); or another draw of the cohort
(``--synthetic draw``: no link, each hidden-rate count then reaches a share of the set, a
quadratic cost no release has); and a holdout of ``n`` records (a third draw), written to
parquet files. Then ``hidden-rate report`` as a user runs it, in a child process, with every
attack on: the holdout (membership attack, DCR overfitting protection, the holdout's DCR and
NNDR), the DCR baseline protection, the inference attack (``--known``/``--secret``), the
linkability attack (``--aux-a``/``--aux-b``) and the singling-out attack (``--singling-out``),
with ``--progress`` so that each stage logs its start and end. Recorded per stage: its seconds
and the child's resident memory at its end and at its peak (``/proc/<pid>/status`` sampled
every `SAMPLE_SECONDS`), and for the whole run the child's high-water mark (``ru_maxrss`` from
``wait4``). The results are written as the run goes (after each stage): ``<out>/<name>.json``
and ``.md``, and the child's stderr to ``<out>/<name>.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from benchmarks.bench_peers import AUX_COLS, KNOWN, SECRET
from benchmarks.common import header, parse_sizes, seconds

AVATAR_K = 20
NOISE = 0.3
SWAP = 0.1
# The size at which the perturbation is `NOISE` and `SWAP`, and how fast it shrinks past it.
NOISE_AT = 10_000
NOISE_DIMENSIONS = 6
SAMPLE_SECONDS = 0.05
PREFIX = "hidden-rate: "
STARTED = re.compile(r"^(?P<name>.+): started$")
DONE = re.compile(r"^(?P<name>.+): done in (?P<seconds>[0-9.]+) s$")
MIB = 2**20


def perturbed(originals: pl.DataFrame, seed: int = 2, *, shrink: bool = True) -> pl.DataFrame:
    """Each original moved a little (see the module's docstring), in the same row: by less as
    ``n`` grows past `NOISE_AT` where ``shrink``, as avatars are."""
    rng = np.random.default_rng(seed)
    n = originals.height
    ratio = min(NOISE_AT / n, 1.0) if shrink else 1.0
    noise = NOISE * ratio ** (1.0 / NOISE_DIMENSIONS)
    swap = SWAP * ratio
    columns = []
    for column in originals.iter_columns():
        if column.dtype.is_numeric():
            values = column.cast(pl.Float64).to_numpy()
            moved = values + rng.normal(0.0, noise * float(np.std(values)), n)
            if column.dtype.is_integer():
                columns.append(pl.Series(column.name, np.rint(moved)).cast(column.dtype))
            else:
                decimals = 2 if column.name == "cholesterol" else 1
                columns.append(pl.Series(column.name, moved.round(decimals)))
        else:
            swapped = rng.random(n) < swap
            drawn = column.gather(rng.integers(0, n, n))
            columns.append(pl.Series(column.name, np.where(swapped, drawn, column)))
    return pl.DataFrame(columns)


def make_sets(n: int, synthetic: str, directory: Path) -> dict[str, Path]:
    """The originals, the synthetic set and the holdout, ``n`` each, as parquet files."""
    from polars_hidden_rate.demo.cohort import cohort

    originals = cohort(n, seed=0)
    if synthetic in ("perturbed", "fixed"):
        made = perturbed(originals, shrink=synthetic == "perturbed")
    elif synthetic == "avatars":
        import polars_hidden_rate as phr

        made = phr.avatarize(originals, AVATAR_K, seed=0)
    else:
        made = cohort(n, seed=2)
    paths = {}
    for name, frame in (
        ("originals", originals),
        ("synthetic", made),
        ("holdout", cohort(n, seed=1)),
    ):
        paths[name] = directory / f"{name}.parquet"
        frame.write_parquet(paths[name])
    return paths


def report_command(paths: dict[str, Path], threads: int, singling_out: str) -> list[str]:
    """``hidden-rate report`` with every attack on, as a user types it."""
    return [
        sys.executable,
        "-c",
        "from polars_hidden_rate.cli import entry; entry()",
        "report",
        str(paths["originals"]),
        str(paths["synthetic"]),
        "--holdout",
        str(paths["holdout"]),
        "--known",
        ",".join(KNOWN),
        "--secret",
        SECRET,
        "--aux-a",
        ",".join(AUX_COLS[0]),
        "--aux-b",
        ",".join(AUX_COLS[1]),
        "--singling-out",
        singling_out,
        "--dcr-baseline",
        "--threads",
        str(threads),
        "--progress",
        "--format",
        "json",
    ]


def resident(pid: int) -> int | None:
    """The resident bytes of process ``pid``, or None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class Run:
    """One child run: its stages (from its progress log) and its memory, as they come."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.command = command
        self.env = env
        self.log = log
        self.stages: list[dict[str, Any]] = []
        self.open: dict[str, dict[str, Any]] = {}
        self.samples: list[tuple[float, int]] = []
        self.begun = 0.0
        self.lock = threading.Lock()

    def peak_between(self, start: float, stop: float) -> int:
        with self.lock:
            before = [rss for at, rss in self.samples if at < start][-1:]
            inside = [rss for at, rss in self.samples if start <= at <= stop]
        return max([*before, *inside], default=0)

    def current(self) -> int:
        with self.lock:
            return self.samples[-1][1] if self.samples else 0

    def line(self, text: str, on_stage: Any) -> None:
        now = time.perf_counter() - self.begun
        if not text.startswith(PREFIX):
            return
        body = text[len(PREFIX) :]
        if (match := STARTED.match(body)) is not None:
            self.open[match["name"]] = {"stage": match["name"], "start_s": now}
        elif (match := DONE.match(body)) is not None:
            stage = self.open.pop(match["name"], {"stage": match["name"], "start_s": now})
            stage["logged_seconds"] = float(match["seconds"])
            stage["seconds"] = now - stage["start_s"]
            stage["end_s"] = now
            stage["rss_end_mib"] = self.current() / MIB
            stage["rss_peak_mib"] = self.peak_between(stage["start_s"], now) / MIB
            self.stages.append(stage)
            on_stage()

    def run(self, timeout: float, on_stage: Any) -> dict[str, Any]:
        """Run the command; its exit code, seconds, high-water mark and stdout."""
        self.begun = time.perf_counter()
        child = subprocess.Popen(
            self.command,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                rss = resident(child.pid)
                if rss is not None:
                    with self.lock:
                        self.samples.append((time.perf_counter() - self.begun, rss))
                stop.wait(SAMPLE_SECONDS)

        output: list[str] = []

        def read_stdout() -> None:
            assert child.stdout is not None
            output.append(child.stdout.read())

        def read_stderr() -> None:
            assert child.stderr is not None
            with self.log.open("a") as log:
                for text in child.stderr:
                    log.write(f"[{time.perf_counter() - self.begun:8.1f}] {text}")
                    log.flush()
                    self.line(text.rstrip("\n"), on_stage)

        threads = [
            threading.Thread(target=work, daemon=True)
            for work in (sample, read_stdout, read_stderr)
        ]
        for thread in threads:
            thread.start()
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        _, status, usage = os.wait4(child.pid, 0)
        timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - self.begun
        stop.set()
        for thread in threads:
            thread.join()
        return {
            "exit_code": child.returncode,
            "timed_out": child.returncode < 0,
            "seconds": elapsed,
            "max_rss_mib": usage.ru_maxrss / 1024,
            "stdout": "".join(output),
        }


def figures(stdout: str) -> dict[str, Any]:
    """The report's headline figures from its JSON (empty where it wrote none)."""
    try:
        payload = json.loads(stdout)
    except json.JSONDecodeError:
        return {}
    metrics = payload.get("metrics", {})
    keep = {}
    for name, entry in metrics.items():
        value = entry.get("value") if isinstance(entry, dict) else entry
        if isinstance(value, (int, float)) or value is None:
            keep[name] = value
    return keep


def markdown(payload: dict[str, Any]) -> str:
    machine = payload["machine"]
    load = ", ".join(f"{v:.2f}" for v in machine["load_average"] or [])
    lines = [
        f"Measured {payload['date']} on {machine['cpus_usable']} of {machine['cpus']} CPUs "
        f"({machine['cpu_model']}), {payload['threads']} threads, load average before {load}; "
        "the machine was shared with other jobs, so the times are inflated.",
        "",
        f"Command: `{payload['command']}`",
        "",
        f"Report: `hidden-rate report ORIGINALS SYNTHETIC {' '.join(payload['flags'])}`",
        "",
    ]
    for cell in payload["cells"]:
        done = cell.get("result")
        state = (
            "running"
            if done is None
            else ("timed out" if done["timed_out"] else f"exit {done['exit_code']}")
        )
        lines += [
            f"### n = {cell['n']:,} ({state})",
            "",
            f"Data made and written in {seconds(cell['data_seconds'])} s.",
            "",
            "| stage | start (s) | seconds | RSS at end (MiB) | peak RSS (MiB) |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for stage in cell["stages"]:
            lines.append(
                f"| {stage['stage']} | {stage['start_s']:.1f} | {seconds(stage['seconds'])} | "
                f"{stage['rss_end_mib']:.0f} | {stage['rss_peak_mib']:.0f} |"
            )
        if done is not None:
            lines += [
                "",
                f"Whole command: {seconds(done['seconds'])} s, peak RSS (high-water mark) "
                f"{done['max_rss_mib']:.0f} MiB.",
            ]
        lines.append("")
    return "\n".join(lines)


def write(out: Path, name: str, payload: dict[str, Any]) -> None:
    """The results so far (the plots of `benchmarks.common.write_results` are not drawn)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    (out / f"{name}.md").write_text(markdown(payload))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1e4,1e5"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--synthetic", choices=["perturbed", "fixed", "avatars", "draw"], default="perturbed"
    )
    parser.add_argument(
        "--singling-out", choices=["univariate", "multivariate"], default="univariate"
    )
    parser.add_argument("--timeout", type=float, default=1500.0, help="seconds per size")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--name", default="full_report")
    args = parser.parse_args(argv)

    given = sys.argv[1:] if argv is None else argv
    payload = header(["python", "-m", "benchmarks.bench_full_report", *given])
    payload.update(threads=args.threads, synthetic=args.synthetic, cells=[])
    env = dict(os.environ)
    for variable in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "RAYON_NUM_THREADS"):
        env[variable] = str(args.threads)
    env["NUMBA_NUM_THREADS"] = str(args.threads)
    log = args.out / f"{args.name}.log"
    args.out.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    for n in parse_sizes(args.sizes):
        with tempfile.TemporaryDirectory() as scratch:
            start = time.perf_counter()
            paths = make_sets(n, args.synthetic, Path(scratch))
            command = report_command(paths, args.threads, args.singling_out)
            shown = {str(path): name.upper() for name, path in paths.items()}
            payload["flags"] = [shown.get(part, part) for part in command[6:]]
            cell: dict[str, Any] = {
                "n": n,
                "data_seconds": time.perf_counter() - start,
                "stages": [],
            }
            payload["cells"].append(cell)
            with log.open("a") as stream:
                stream.write(f"# n = {n}\n")
            run = Run(command, env, log)
            cell["stages"] = run.stages
            write(args.out, args.name, payload)
            result = run.run(args.timeout, lambda: write(args.out, args.name, payload))
            stdout = result.pop("stdout")
            cell["result"] = result
            cell["figures"] = figures(stdout)
            write(args.out, args.name, payload)
            print(
                f"n={n}: exit {result['exit_code']}, {result['seconds']:.1f} s, peak RSS "
                f"{result['max_rss_mib']:.0f} MiB",
                flush=True,
            )
            for stage in run.stages:
                print(
                    f"  {stage['stage']}: {stage['seconds']:.2f} s "
                    f"(peak {stage['rss_peak_mib']:.0f} MiB)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
