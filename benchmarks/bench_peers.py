"""The report and its measures against SDMetrics and anonymeter, on the same data in one run.

    python -m benchmarks.bench_peers --sizes 1e4,1e5,1e6 --peers-python .venv-peers/bin/python

The data: ``n`` records of the demo's mixed-type cohort (`polars_hidden_rate.demo.cohort`),
their avatars (`polars_hidden_rate.avatarize`) and a holdout of ``n`` records, another draw
of the cohort. Ours, timed in this process (best of ``--repeat``): the whole
`privacy_report` with the holdout, the inference attack and the linkability attack in
anonymeter's space (``attack_space="gower"``) and the DCR baseline protection, and each
measure's own function. The peers, each in a subprocess of their venv (their pins conflict
with the package's), on the same sets read from parquet files: SDMetrics'
``DCROverfittingProtection`` and ``DCRBaselineProtection``, anonymeter's
``InferenceEvaluator`` and ``LinkabilityEvaluator`` with ``n_attacks`` every record; only the
peer's evaluation is timed (`benchmarks.peer_worker`). Each ratio is the peer's seconds over
ours. A peer whose time, predicted from the previous size's by its ``n^2`` cost, passes
``--limit`` seconds is not run (``skipped``), nor at any larger size (at the first size, the
prediction is from a probe run on the first `PROBE` records); a run past twice the limit is
stopped (``timeout``). Ours, whose exact attacks in anonymeter's space cost ``n^2`` too, are
skipped by the same rule (with no backstop). Where the spaces meet (anonymeter's Gower
distance), whether the risks agree to 1e-9. Writes ``<out>/<name>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from benchmarks.common import header, parse_sizes, seconds, write_results

KNOWN = ["age", "sex", "height_cm", "weight_kg", "region"]
SECRET = "diabetes"
AUX_COLS = (
    ["age", "sex", "height_cm", "weight_kg", "smoker"],
    ["systolic_bp", "cholesterol", "diabetes", "region", "visits_per_year"],
)
AVATAR_K = 20
BASELINE_SEED = 0
AGREE_TOL = 1e-9
# The peers cost n^2: each one's time at the next size is predicted from the last.
EXPONENT = 2.0
# With no previous size, a peer is first timed on this many records to predict it.
PROBE = 1000
PEERS_ENV = "PEERS_PYTHON"
DEFAULT_PEERS_PYTHON = ".venv-peers/bin/python"
WORKER = Path(__file__).resolve().parent / "peer_worker.py"


@dataclass(frozen=True)
class Pair:
    """A peer and the measure of ours it is timed against."""

    peer: str
    library: str
    evaluator: str
    ours: str
    # Whether both measure in the same space, so that their figures can be compared.
    same_space: bool


PAIRS = (
    Pair("sdmetrics_overfitting", "SDMetrics", "DCROverfittingProtection", "overfitting", False),
    Pair("sdmetrics_baseline", "SDMetrics", "DCRBaselineProtection", "baseline", False),
    Pair("anonymeter_inference", "anonymeter", "InferenceEvaluator", "inference", True),
    Pair("anonymeter_linkability", "anonymeter", "LinkabilityEvaluator", "linkability", True),
)
OURS = ("report", "overfitting", "baseline", "inference", "linkability")


def make_sets(n: int) -> dict[str, pl.DataFrame]:
    """The originals, their avatars and a holdout (another draw of the cohort), ``n`` each."""
    import polars_hidden_rate as phr
    from polars_hidden_rate.demo.cohort import cohort

    originals = cohort(n, seed=0)
    return {
        "originals": originals,
        "synthetic": phr.avatarize(originals, AVATAR_K, seed=0),
        "holdout": cohort(n, seed=1),
    }


def our_runs(sets: dict[str, pl.DataFrame], threads: int | None) -> dict[str, Callable[[], Any]]:
    """Each of ours by name: the whole report, then each measure's own function."""
    import polars_hidden_rate as phr

    o, s, h = sets["originals"], sets["synthetic"], sets["holdout"]
    options: phr.CountOptions = {"threads": threads}
    return {
        "report": lambda: phr.privacy_report(
            o,
            s,
            holdout=h,
            known=KNOWN,
            secret=SECRET,
            secret_kind="categorical",
            aux_cols=AUX_COLS,
            attack_space="gower",
            dcr_baseline=True,
            baseline_seed=BASELINE_SEED,
            **options,
        ),
        "overfitting": lambda: phr.dcr_overfitting_protection(o, s, h, **options),
        "baseline": lambda: phr.dcr_baseline_protection(o, s, seed=BASELINE_SEED, **options),
        "inference": lambda: phr.inference_risk(
            o,
            s,
            h,
            known=KNOWN,
            secret=SECRET,
            secret_kind="categorical",
            space="gower",
            **options,
        ),
        "linkability": lambda: phr.linkability_risk(
            o, s, h, aux_cols=AUX_COLS, space="gower", **options
        ),
    }


def figures(name: str, found: Any) -> dict[str, Any]:
    """The figures of one of ours, as the peers report theirs; the report's by section."""
    if name == "report":
        holdout = found.holdout
        return {
            "overfitting": figures("overfitting", holdout.overfitting),
            "baseline": figures("baseline", found.dcr_baseline),
            "inference": figures("inference", holdout.inference),
            "linkability": figures("linkability", found.linkability),
        }
    if name == "overfitting":
        return {
            "score": found.score,
            "sdmetrics_score": found.sdmetrics_score,
            "closer_to_training": found.closer_to_training,
        }
    if name == "baseline":
        return {
            "score": found.score,
            "synthetic_median": found.synthetic_median,
            "random_median": found.random_median,
        }
    return {
        "risk": found.risk,
        "n_success": found.members.successes,
        "n_control": found.control.successes,
    }


def measure_ours(
    sets: dict[str, pl.DataFrame],
    repeat: int,
    threads: int | None,
    limit: float,
    last: dict[str, tuple[int, float]],
) -> dict[str, dict[str, Any]]:
    """Ours, in turn, ``repeat`` times, after one untimed run on a few records (compiling).
    The exact attacks in anonymeter's space cost ``n^2`` too: one of ours whose time,
    predicted from ``last`` (its previous size's) as the peers' is, passes ``limit`` is
    ``skipped``."""
    n = next(iter(sets.values())).height
    found: dict[str, dict[str, Any]] = {}
    for name in OURS:
        predicted = None
        if name in last:
            size, took = last[name]
            predicted = took * (n / size) ** EXPONENT
        skip = predicted is not None and predicted > limit
        found[name] = {
            "status": "skipped" if skip else "ok",
            "seconds": None,
            "predicted_seconds": predicted,
            "all_seconds": [],
        }
    small = {role: frame.head(500) for role, frame in sets.items()}
    for run in our_runs(small, threads).values():
        run()
    runs = our_runs(sets, threads)
    for _ in range(repeat):
        for name in OURS:
            if found[name]["status"] != "ok":
                continue
            start = time.perf_counter()
            result = runs[name]()
            found[name]["all_seconds"].append(time.perf_counter() - start)
            found[name]["figures"] = figures(name, result)
    for name, entry in found.items():
        if entry["status"] == "ok":
            entry["seconds"] = min(entry["all_seconds"])
            last[name] = (n, entry["seconds"])
    return found


def run_peer(
    python: str,
    pair: Pair,
    files: dict[str, str],
    jobs: int,
    timeout: float,
    **options: Any,
) -> dict[str, Any]:
    """One peer in a subprocess of its venv; its own timing of its evaluation. ``options``:
    more of the job's settings (the singling-out attack's ``mode`` and ``n_attacks``)."""
    job = {
        "peer": pair.peer,
        "files": files,
        "known": KNOWN,
        "secret": SECRET,
        "aux_cols": AUX_COLS,
        "seed": BASELINE_SEED,
        "jobs": jobs,
        **options,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(job, file)
    try:
        done = subprocess.run(
            [python, str(WORKER), file.name],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": None}
    finally:
        os.unlink(file.name)
    if done.returncode != 0:
        return {"status": "failed", "seconds": None, "error": done.stderr.strip()[-2000:]}
    answer: dict[str, Any] = json.loads(done.stdout)
    return {"status": "ok", "seconds": answer["seconds"], "figures": answer["figures"]}


def agreement(pair: Pair, ours: dict[str, Any], peer: dict[str, Any]) -> bool | None:
    """Whether the risks agree to `AGREE_TOL` (and the successes are the same), where the
    spaces meet; None elsewhere, or where ours or the peer did not run. ``ours``: our
    measure's entry."""
    if not pair.same_space or peer.get("status") != "ok" or ours["status"] != "ok":
        return None
    theirs, ours = peer["figures"], ours["figures"]
    return bool(
        abs(ours["risk"] - theirs["risk"]) <= AGREE_TOL
        and ours["n_success"] == theirs["n_success"]
        and ours["n_control"] == theirs["n_control"]
    )


def peers_python(given: str | None) -> str | None:
    """``--peers-python``, else ``PEERS_PYTHON``, else the default venv; None when absent."""
    for candidate in (given, os.environ.get(PEERS_ENV), DEFAULT_PEERS_PYTHON):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1e4,1e5,1e6"])
    parser.add_argument("--peers-python", default=None)
    parser.add_argument("--no-peers", action="store_true", help="time ours only")
    parser.add_argument("--limit", type=float, default=300.0, help="a peer's seconds at most")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--name", default="peers")
    args = parser.parse_args(argv)

    given = sys.argv[1:] if argv is None else argv
    payload = header(["python", "-m", "benchmarks.bench_peers", *given])
    python = None if args.no_peers else peers_python(args.peers_python)
    jobs = args.threads or payload["machine"]["cpus_usable"]
    payload.update(
        {
            "peers_python": python,
            "peers_versions": None if python is None else peer_versions(python),
            "limit_s": args.limit,
            "repeat": args.repeat,
            "jobs": jobs,
        }
    )
    if python is None:
        print("no peers' venv (--peers-python, PEERS_PYTHON, `make peers`): the peers are absent")
    last: dict[str, tuple[int, float]] = {}  # each peer's last size and seconds
    last_ours: dict[str, tuple[int, float]] = {}
    stopped: set[str] = set()
    cells = []
    for n in parse_sizes(args.sizes):
        sets = make_sets(n)
        ours = measure_ours(sets, args.repeat, args.threads, args.limit, last_ours)
        cell: dict[str, Any] = {"n": n, "ours": ours, "peers": {}}
        print(
            f"n={n:,}: ours " + ", ".join(f"{name} {describe_ours(ours[name])}" for name in OURS),
            flush=True,
        )
        with tempfile.TemporaryDirectory() as folder:
            files = write_sets(sets, Path(folder), n)
            probe = write_sets(sets, Path(folder), PROBE) if n > PROBE else None
            for pair in PAIRS:
                entry = peer_entry(pair, n, python, (files, probe), jobs, args.limit, last, stopped)
                mine = ours[pair.ours]
                entry["ours_seconds"] = mine["seconds"]
                entry["ratio"] = (
                    entry["seconds"] / mine["seconds"]
                    if entry.get("seconds") and mine["seconds"]
                    else None
                )
                entry["agree"] = agreement(pair, mine, entry)
                cell["peers"][pair.peer] = entry
                print(f"  {pair.library} {pair.evaluator}: {describe(entry)}", flush=True)
        ran = [entry["seconds"] for entry in cell["peers"].values() if entry["status"] == "ok"]
        report = ours["report"]["seconds"]
        cell["peers_total_over_report"] = (
            sum(ran) / report if len(ran) == len(PAIRS) and report else None
        )
        cells.append(cell)
    payload["cells"] = cells
    payload["machine"]["load_average_after"] = header()["machine"]["load_average"]
    paths = write_results(args.out, args.name, payload, markdown(payload))
    print("wrote " + ", ".join(str(path) for path in paths))
    return 0


def write_sets(sets: dict[str, pl.DataFrame], folder: Path, n: int) -> dict[str, str]:
    """The first ``n`` records of each set as a parquet file in ``folder``; their paths."""
    files = {}
    for role, frame in sets.items():
        files[role] = str(folder / f"{role}-{n}.parquet")
        frame.head(n).write_parquet(files[role])
    return files


def peer_entry(
    pair: Pair,
    n: int,
    python: str | None,
    files: tuple[dict[str, str], dict[str, str] | None],
    jobs: int,
    limit: float,
    last: dict[str, tuple[int, float]],
    stopped: set[str],
) -> dict[str, Any]:
    """Run the peer at ``n``, or say why not: absent, skipped (predicted past the limit, or
    stopped at a smaller size). ``files``: the sets', and the probe's where ``n`` is larger."""
    if python is None:
        return {"status": "absent", "seconds": None}
    found, probe = files
    probed = None
    if pair.peer not in last and pair.peer not in stopped and probe is not None:
        probed = run_peer(python, pair, probe, jobs, timeout=2 * limit + 60)
        probed["n"] = PROBE
        if probed["status"] != "ok":
            stopped.add(pair.peer)
            return {"status": probed["status"], "seconds": None, "probe": probed}
        last[pair.peer] = (PROBE, probed["seconds"])
    predicted = None
    if pair.peer in last:
        size, took = last[pair.peer]
        predicted = took * (n / size) ** EXPONENT
    if pair.peer in stopped or (predicted is not None and predicted > limit):
        stopped.add(pair.peer)
        return {
            "status": "skipped",
            "seconds": None,
            "predicted_seconds": predicted,
            "probe": probed,
        }
    # The backstop: twice the limit, and a minute for the imports and the reads.
    entry = run_peer(python, pair, found, jobs, timeout=2 * limit + 60)
    entry["predicted_seconds"] = predicted
    entry["probe"] = probed
    if entry["status"] == "ok":
        last[pair.peer] = (n, entry["seconds"])
    else:
        stopped.add(pair.peer)
    return entry


def peer_versions(python: str) -> dict[str, str] | None:
    code = (
        "import json, importlib.metadata as m; "
        "print(json.dumps({p: m.version(p) for p in ('anonymeter', 'sdmetrics', 'numpy', "
        "'pandas')}))"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None
    found: dict[str, str] = json.loads(done.stdout)
    return found


def describe_ours(entry: dict[str, Any]) -> str:
    if entry["status"] == "ok":
        return f"{entry['seconds']:.2f} s"
    return f"skipped (predicted {entry['predicted_seconds']:.0f} s)"


def describe(entry: dict[str, Any]) -> str:
    if entry["status"] != "ok":
        status: str = entry["status"]
        predicted = entry.get("predicted_seconds")
        return status + (f" (predicted {predicted:.0f} s)" if predicted else "")
    agree = {None: "", True: ", agree", False: ", DISAGREE"}[entry["agree"]]
    return (
        f"{entry['seconds']:.2f} s against ours {seconds(entry['ours_seconds']) or '-'} s"
        + (f" (ratio {entry['ratio']:.1f})" if entry["ratio"] else "")
        + agree
    )


def ours_cell(entry: dict[str, Any]) -> str:
    if entry["status"] == "ok":
        return seconds(entry["seconds"])
    return f"skipped (~{seconds(entry['predicted_seconds'])})"


def markdown(payload: dict[str, Any]) -> str:
    load = ", ".join(f"{v:.2f}" for v in payload["machine"]["load_average"])
    after = ", ".join(f"{v:.2f}" for v in payload["machine"]["load_average_after"])
    versions = payload["peers_versions"] or {}
    lines = [
        f"Measured {payload['date']} on {payload['machine']['cpus_usable']} of "
        f"{payload['machine']['cpus']} CPUs ({payload['machine']['cpu_model']}), load average "
        f"before {load}, after {after}; anonymeter {versions.get('anonymeter', '-')}, "
        f"SDMetrics {versions.get('sdmetrics', '-')}.",
        "",
        f"Command: `{payload['command']}`",
        "",
        "| n | peer | peer s | ours | ours s | ratio | agree |",
        "|---:|---|---:|---|---:|---:|---|",
    ]
    for cell in payload["cells"]:
        for pair in PAIRS:
            entry = cell["peers"][pair.peer]
            took = seconds(entry["seconds"]) if entry["status"] == "ok" else entry["status"]
            if entry.get("predicted_seconds") and entry["status"] == "skipped":
                took += f" (~{seconds(entry['predicted_seconds'])})"
            ratio = f"{entry['ratio']:.1f}" if entry["ratio"] else ""
            agree = {None: "", True: "yes", False: "no"}[entry["agree"]]
            lines.append(
                f"| {cell['n']:,} | {pair.library} {pair.evaluator} | {took} | {pair.ours} | "
                f"{ours_cell(cell['ours'][pair.ours])} | {ratio} | {agree} |"
            )
        total = cell["peers_total_over_report"]
        lines.append(
            f"| {cell['n']:,} | all four | | the whole report | "
            f"{ours_cell(cell['ours']['report'])} | "
            f"{'' if total is None else f'{total:.1f}'} | |"
        )
    lines += [
        "",
        "Seconds: ours from in-memory frames to the result (best of "
        f"{payload['repeat']}), the peers' evaluation alone in their own venv "
        f"(n_jobs={payload['jobs']}); ratio = peer / ours. Agree: the risk to 1e-9 and the "
        "successes, where the spaces meet (anonymeter's Gower distance); SDMetrics' "
        "distance differs from the report's space. `skipped (~s)`: predicted (n^2, from the "
        f"previous size or a probe on {PROBE:,} records) past {payload['limit_s']:.0f} s; "
        "ours too (the exact Gower attacks are n^2 as well).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
