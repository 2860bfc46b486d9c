"""The inference, linkability and singling-out attacks from 1e4 to 1e6 records against
anonymeter, in one run, the rows written as they come.

    timeout 1200 python -m benchmarks.bench_attacks --sizes 1e4,2.5e4,1e5,2.5e5,1e6 \\
        --peers-python .venv-peers/bin/python > benchmarks/results/attacks_scale.md
    timeout 1500 python -m benchmarks.bench_attacks --attacks singling_out ... \\
        > benchmarks/results/attacks_singling_out.md

The data: ``n`` records of the demo's cohort (`polars_hidden_rate.demo.cohort`) as the
originals, another draw as the holdout and a third as the synthetic set (avatars would take
longer to make than the attacks take to run at 1e6; the search costs what the records'
neighbourhoods cost, whatever made them). Ours, timed in this process: each attack in
anonymeter's space (``space="gower"``, the figures compared with anonymeter's to 1e-9) and
in the projected space, with every record attacked. anonymeter's ``InferenceEvaluator`` and
``LinkabilityEvaluator`` (``n_attacks`` every record) in a subprocess of their venv
(`benchmarks.peer_worker`, its evaluation alone timed): not run where its time predicted
from the previous size's by its ``n^2`` cost passes ``--limit`` seconds, and stopped past
it. The singling-out attack (``--attacks singling_out`` runs it alone), ours in both modes
on every column, against anonymeter's ``SinglingOutEvaluator`` (seed 0): univariate with
``n_attacks`` the queries ours counts, so that anonymeter attacks every query its generator
keeps (the sides are of equal size: its risk is then deterministic, and compared to 1e-9);
multivariate (3 columns a query) with ``n_attacks`` `MULTIVARIATE_ATTACKS` of its random
draws, not compared. Its time at the next size is predicted from its growth between the
last two sizes (exponent as measured, at least 1; `EXPONENT` from one size). Printed per
row: the seconds, anonymeter's over ours, and ours over ours at the previous size (the
growth). ``--ties``: the inference and linkability attacks' columns all categories of a few
values (a target ties with thousands of records at its nearest), ours alone. Before the first size,
every attack runs once untimed on ``--warm-up`` records (default 2,000), so that no row holds
the compilation of its kernels; ``--repeat``: each of ours timed that many times, the least
kept (a shared machine's other jobs only ever add). Markdown on stdout; ``--out`` also
writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

from benchmarks.bench_peers import (
    AUX_COLS,
    KNOWN,
    PAIRS,
    SECRET,
    Pair,
    agreement,
    figures,
    peer_versions,
    peers_python,
    run_peer,
    write_sets,
)
from benchmarks.common import header, parse_sizes, seconds

ATTACKS = ("inference", "linkability", "singling_out")
SPACES = ("gower", "projected")
MODES = ("univariate", "multivariate")
# Each attack's variants: the space it searches, or the singling-out attack's mode.
VARIANTS = {"inference": SPACES, "linkability": SPACES, "singling_out": MODES}
# The variants anonymeter computes too: only these run against it.
PEER_VARIANTS = {"inference": ("gower",), "linkability": ("gower",), "singling_out": MODES}
# anonymeter's searches cost n^2: its time at the next size is predicted from the last.
EXPONENT = 2.0
# anonymeter's multivariate singling out draws its queries at random: this many (its
# default is 500), the same at every size.
MULTIVARIATE_ATTACKS = 2000
N_COLS = 3
SINGLING_OUT = Pair(
    "anonymeter_singling_out", "anonymeter", "SinglingOutEvaluator", "singling_out", True
)


def make_sets(n: int) -> dict[str, pl.DataFrame]:
    """The originals, the synthetic set and the holdout: three draws of the cohort."""
    from polars_hidden_rate.demo.cohort import cohort

    return {
        "originals": cohort(n, seed=0),
        "synthetic": cohort(n, seed=2),
        "holdout": cohort(n, seed=1),
    }


# The tie-heavy case (``--ties``): every column the attacker holds is a category of two to
# four values, so a target ties with thousands of synthetic records at its nearest.
TIES_KNOWN = ["sex", "smoker", "diabetes", "region"]
TIES_SECRET = "visits_per_year"
TIES_AUX_COLS = (["sex", "smoker"], ["diabetes", "region"])


def attack(
    name: str, space: str, sets: dict[str, pl.DataFrame], threads: int | None, *, ties: bool = False
) -> Any:
    """Run one of ours: ``name`` in ``space`` (the singling-out attack: its mode, on every
    column; ``ties``: the others on the tie-heavy columns)."""
    import polars_hidden_rate as phr

    o, s, h = sets["originals"], sets["synthetic"], sets["holdout"]
    if name == "singling_out":
        return phr.singling_out_risk(o, s, h, mode=space, n_cols=N_COLS, threads=threads)  # type: ignore[arg-type]
    if name == "inference":
        return phr.inference_risk(
            o,
            s,
            h,
            known=TIES_KNOWN if ties else KNOWN,
            secret=TIES_SECRET if ties else SECRET,
            secret_kind="categorical",
            space=space,  # type: ignore[arg-type]
            threads=threads,
        )
    aux_cols = TIES_AUX_COLS if ties else AUX_COLS
    return phr.linkability_risk(o, s, h, aux_cols=aux_cols, space=space, threads=threads)  # type: ignore[arg-type]


def predicted_seconds(history: list[tuple[int, float]], n: int, measured: bool) -> float | None:
    """A peer's seconds at ``n`` from its ``history`` of (size, seconds): by `EXPONENT`, or
    (``measured``) by the growth between its last two sizes, at least linear."""
    if not history:
        return None
    size, took = history[-1]
    exponent = EXPONENT
    if measured and len(history) > 1:
        (first, was), _ = history[-2:]
        if first != size and was > 0 and took > 0:
            exponent = max(1.0, math.log(took / was) / math.log(size / first))
    return float(took * (n / size) ** exponent)


def peer_options(name: str, variant: str, found: Any) -> dict[str, Any]:
    """The peer's settings beyond the sets: the singling-out attack's mode and queries."""
    if name != "singling_out":
        return {}
    attacks = found.queries if variant == "univariate" else MULTIVARIATE_ATTACKS
    # anonymeter refuses no query to ask; ours then asks none either.
    return {"mode": variant, "n_attacks": max(attacks, 1), "n_cols": N_COLS, "seed": 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1e4,2.5e4,1e5,2.5e5,1e6"])
    parser.add_argument(
        "--attacks",
        default=",".join(ATTACKS),
        help=f"the attacks to run, comma-separated (of {', '.join(ATTACKS)})",
    )
    parser.add_argument("--peers-python", default=None)
    parser.add_argument("--limit", type=float, default=300.0, help="anonymeter's seconds at most")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help="a JSON file of every figure")
    parser.add_argument(
        "--ties",
        action="store_true",
        help="the tie-heavy case: the attacker's columns all categories of a few values",
    )
    parser.add_argument("--warm-up", type=int, default=2000, help="records of the untimed run")
    parser.add_argument("--repeat", type=int, default=1, help="timings of ours, the least kept")
    args = parser.parse_args(argv)
    attacks = [name.strip() for name in args.attacks.split(",") if name.strip()]
    unknown = sorted(set(attacks) - set(ATTACKS))
    if unknown or not attacks:
        parser.error(
            f"--attacks: unknown {', '.join(unknown) or '(none)'}; of {', '.join(ATTACKS)}"
        )

    given = sys.argv[1:] if argv is None else argv
    payload = header(["python", "-m", "benchmarks.bench_attacks", *given])
    python = peers_python(args.peers_python)
    jobs = args.threads or payload["machine"]["cpus_usable"]
    payload.update(
        {"peers_python": python, "peers_versions": peer_versions(python) if python else None}
    )
    machine = payload["machine"]
    anonymeter = (payload["peers_versions"] or {}).get("anonymeter", "absent")
    print(
        f"Measured {payload['date']} on {machine['cpus_usable']} of {machine['cpus']} CPUs "
        f"({machine['cpu_model']}), load average before {machine.get('load_average')}; "
        f"anonymeter {anonymeter}. The machine is shared with other jobs: the times are "
        "noisy.\n\nCommand: `" + payload["command"] + "`\n"
    )
    print("| n | attack | space or mode | ours s | growth | anonymeter s | ratio | agree |")
    print("|---:|---|---|---:|---:|---:|---:|---|", flush=True)
    pairs = {pair.ours: pair for pair in (*PAIRS, SINGLING_OUT)}
    last_peer: dict[tuple[str, str], list[tuple[int, float]]] = {}
    last_ours: dict[tuple[str, str], float] = {}
    stopped: set[tuple[str, str]] = set()
    rows = []
    if args.warm_up > 0:
        warm = make_sets(args.warm_up)
        for name in attacks:
            for space in VARIANTS[name]:
                attack(name, space, warm, args.threads, ties=args.ties)
    for n in parse_sizes(args.sizes):
        sets = make_sets(n)
        with tempfile.TemporaryDirectory() as folder:
            files = write_sets(sets, Path(folder), n) if python else {}
            for name in attacks:
                pair = pairs[name]
                for space in VARIANTS[name]:
                    took = float("inf")
                    for _ in range(max(args.repeat, 1)):
                        start = time.perf_counter()
                        found = attack(name, space, sets, args.threads, ties=args.ties)
                        took = min(took, time.perf_counter() - start)
                    mine = {"status": "ok", "seconds": took, "figures": figures(name, found)}
                    before = last_ours.get((name, space))
                    last_ours[(name, space)] = took
                    if name == "singling_out":
                        mine["queries"] = found.queries
                    compared = space in PEER_VARIANTS[name]
                    key = (pair.peer, space)
                    peer: dict[str, Any] = {"status": "absent", "seconds": None}
                    if compared and python and not args.ties:
                        predicted = predicted_seconds(
                            last_peer.get(key, []), n, measured=name == "singling_out"
                        )
                        if key in stopped or (predicted or 0.0) > args.limit:
                            stopped.add(key)
                            peer = {"status": "skipped", "seconds": None, "predicted": predicted}
                        else:
                            options = peer_options(name, space, found)
                            peer = run_peer(
                                python, pair, files, jobs, timeout=args.limit + 60, **options
                            )
                            peer.update(options)
                            if peer["status"] == "ok" and peer["seconds"] <= args.limit:
                                last_peer.setdefault(key, []).append((n, peer["seconds"]))
                            else:
                                stopped.add(key)
                    # anonymeter's multivariate queries are random draws: not ours to compare.
                    random_queries = space == "multivariate"
                    agree = agreement(pair, mine, peer) if compared and not random_queries else None
                    ratio = peer["seconds"] / took if peer.get("seconds") else None
                    growth = took / before if before else None
                    rows.append(
                        {
                            "n": n,
                            "attack": name,
                            "space": space,
                            "ours": mine,
                            "peer": peer,
                            "ratio": ratio,
                            "growth": growth,
                            "agree": agree,
                            **({"agree_note": "random queries"} if random_queries else {}),
                        }
                    )
                    if peer["status"] == "ok":
                        theirs = seconds(peer["seconds"])
                    elif peer["status"] == "skipped" and peer.get("predicted"):
                        theirs = f"skipped (~{seconds(peer['predicted'])})"
                    else:
                        theirs = peer["status"] if compared else ""
                    if random_queries and peer["status"] == "ok":
                        agreed = "n/a (random queries)"
                    else:
                        agreed = "" if agree is None else ("yes" if agree else "NO")
                    print(
                        f"| {n:,} | {name} | {space} | {seconds(took)} | "
                        f"{'' if growth is None else f'{growth:.1f}'} | {theirs} | "
                        f"{'' if ratio is None else f'{ratio:.1f}'} | "
                        f"{agreed} |",
                        flush=True,
                    )
    print(
        "\nSeconds: ours from in-memory frames to the result, every record attacked, on "
        f"{jobs} threads; anonymeter's evaluation alone in its venv (n_jobs={jobs}), "
        f"`skipped (~s)` where predicted (n^2) past {args.limit:.0f} s, `timeout` where "
        f"stopped past it. Growth: ours over ours at the previous size. Ratio: anonymeter "
        "over ours. Agree: the risk to 1e-9 and both successes; ours share the records tied "
        "at an edge where anonymeter takes the first its sort gives, so `NO` where records "
        "tie (the cohort's integer and categorical columns make some)."
    )
    if "singling_out" in attacks:
        print(
            "\nSingling out: ours on every column, every query counted (multivariate: "
            f"{N_COLS} columns a query, every (record, column set) pair up to 1e6 of them, "
            "then the deterministic design); anonymeter's `SinglingOutEvaluator` (seed 0) "
            "univariate with `n_attacks` ours' queries (it then attacks every query its "
            "generator keeps; the sides are of equal size), agreement as above; multivariate "
            f"with `n_attacks` {MULTIVARIATE_ATTACKS} random draws, not compared (`n/a`). Its "
            "predictions: by its growth between the last two sizes (exponent as measured, at "
            "least 1; n^2 from one size)."
        )
    if args.out is not None:
        payload["rows"] = rows
        args.out.write_text(json.dumps(payload, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
