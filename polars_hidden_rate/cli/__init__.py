"""The ``hidden-rate`` command line: a gate for ETL pipelines, and the demonstration.

``hidden-rate check ORIGINALS AVATARS`` exits 0 when the hidden rate passes
``--min-rate`` (or no threshold is given), 1 when it is below, and 2 on bad
input, with a one-line message on stderr. It only reads files, calls the
public API and prints; the metric lives in `polars_hidden_rate.api`.

Here are the subcommands and `main`; beside them, the parser (`parser`), the stop
signals (`signals`) and the human forms of the results (`formatting`). The files
are written by `polars_hidden_rate.outputs`. ``python -m polars_hidden_rate.cli`` runs
`entry`, as the ``hidden-rate`` script does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import stat
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

import polars as pl

from polars_hidden_rate.checks import quoted
from polars_hidden_rate.cli.formatting import format_json, format_report, format_text
from polars_hidden_rate.cli.parser import PROG, UsageError, build_parser, flags_of, in_flags
from polars_hidden_rate.cli.signals import in_background, stop_signals_raised
from polars_hidden_rate.frames import check_output_free
from polars_hidden_rate.frames.files import (
    file_format,
    one_line,
    refuse_same_inputs,
    scan,
    scan_literal,
)
from polars_hidden_rate.gate import summarize_judged
from polars_hidden_rate.link.verdict import Evidence, Verdict, check_link
from polars_hidden_rate.measures.gower import Space
from polars_hidden_rate.measures.inference import DEFAULT_TOLERANCE, InferenceAttack
from polars_hidden_rate.measures.linkability import LinkabilityAttack
from polars_hidden_rate.measures.sdmetrics_space import DcrSpace
from polars_hidden_rate.measures.summary import CloakingSummary, check_min_rate, summarize
from polars_hidden_rate.outputs import (
    check_output,
    describe,
    replace_atomically,
    staged_directory,
)
from polars_hidden_rate.plan import CountOptions, CountPlan, plan
from polars_hidden_rate.progress import Stages, reporting, stage
from polars_hidden_rate.provenance import (
    describe_input,
    describe_settings,
    frame_rows,
    parquet_metadata,
    provenance,
    with_fit,
)
from polars_hidden_rate.report import (
    baseline_of,
    check_holdout_and_attack,
    check_targets,
    inference_attack,
    linkability_attack,
    report_of_plan,
    singling_out_attack,
)
from polars_hidden_rate.tasks import EXTRA_HINT
from polars_hidden_rate.to_parquet import plan_dataset

__all__ = [
    "PROG",
    "BadInput",
    "build_parser",
    "entry",
    "format_json",
    "format_report",
    "format_text",
    "main",
    "run_check",
    "run_demo",
    "run_report",
    "write_atomically",
]

BadInput = (pl.exceptions.PolarsError, ValueError, TypeError, OSError, ImportError)
# How long `--cluster` waits for the scheduler to answer.
CONNECT_TIMEOUT = "10s"
# How long `--cluster-file` waits, in seconds, for a scheduler file still being written (empty,
# or not yet a JSON object with an address), as while `dask scheduler` starts.
CLUSTER_FILE_WAIT = 5.0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    SIGINT, SIGTERM and SIGHUP stop the command as an exception, so that a partial
    output is removed; the exit code is then 128 plus the signal number.
    """
    parser = build_parser({"check": run_check, "report": run_report, "demo": run_demo})
    # Python's warnings never reach stderr in Python's format: the output says them (`_warned`).
    with stop_signals_raised() as received, warnings.catch_warnings(record=True) as caught:
        # Each time it is raised, not once per place in a process (the filters the user set
        # and Python's own come first).
        warnings.simplefilter("always", append=True)
        try:
            args = parser.parse_args(argv)
            command: Callable[[argparse.Namespace], int] = args.command
            args.warned = caught
            if command is run_demo:
                return command(args)
            with reporting(Stages(False if args.quiet else True if args.progress else None)):
                return command(args)
        except SystemExit as stop:  # --help, --version
            return stop.code if isinstance(stop.code, int) else 0
        except (UsageError, *BadInput) as error:
            if not received:
                words = one_line(error)
                if isinstance(error, BadInput):  # the Python API's words, as flags
                    words = in_flags(words, flags_of(parser, _command_of(argv)))
                print(f"{PROG}: error: {words}", file=sys.stderr)
                return 2
        except BaseException:
            if not received:
                raise
    # A signal came: whatever error it surfaced as (a library may wrap it), report the signal.
    print(f"{PROG}: interrupted ({signal.Signals(received[0]).name})", file=sys.stderr)
    return 128 + received[0]


def _command_of(argv: Sequence[str] | None) -> str:
    """The subcommand ``argv`` names (its first word that is one)."""
    words = sys.argv[1:] if argv is None else argv
    return next((word for word in words if word in ("check", "report", "demo")), "check")


def entry() -> NoReturn:
    """The ``hidden-rate`` script: `main`, then exit with its code.

    After a stop signal, once the partial output is removed and the line printed, the
    process ends at once, without waiting for counting threads still at work.
    """
    code = main()
    if code > 128:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _warned(args: argparse.Namespace) -> tuple[str, ...]:
    """The messages of the Python warnings raised while the command ran (`main` catches
    them; a measure that the report runs may say the holdout's copies again), once each, in
    the order raised, each on one line: the output's ``warning`` lines and its JSON's
    ``warnings``."""
    caught: list[warnings.WarningMessage] = getattr(args, "warned", [])
    return tuple(dict.fromkeys(" ".join(str(each.message).split()) for each in caught))


def _read_inputs(args: argparse.Namespace) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """The two files as lazy frames (`_scan`)."""
    return _scan(args, args.originals, "ORIGINALS"), _scan(args, args.avatars, "AVATARS")


def _scan(args: argparse.Namespace, path: Path, role: str) -> pl.LazyFrame:
    """One input file as a lazy frame, csv read with ``--separator``, ``--null-values`` and
    ``--decimal-comma``."""
    return scan(
        path,
        role,
        separator=args.separator,
        null_values=args.null_values,
        decimal_comma=args.decimal_comma,
    )


def _count_options(args: argparse.Namespace) -> CountOptions:
    """The options of the metric, as the command line gives them."""
    return {
        "coords": args.coords,
        "features": args.features,
        "categorical": "auto" if args.categorical == ["auto"] else args.categorical,
        "impute": args.impute,
        "ncp": args.ncp,
        "on": args.on,
        "left_on": args.left_on,
        "right_on": args.right_on,
        "tie_tol": args.tie_tol,
        "threads": args.threads,
        "progress": False if args.quiet else True if args.progress else None,
    }


def _refuse_inputs(path: Path | None, option: str, args: argparse.Namespace) -> None:
    """An output file may not be an input (the input would be lost), nor anything but a
    regular file (`polars_hidden_rate.outputs.check_output`, the rule of every output)."""
    if path is None:
        return
    inputs = {"ORIGINALS": [Path(args.originals)], "AVATARS": [Path(args.avatars)]}
    if getattr(args, "holdout", None) is not None:
        inputs["HOLDOUT"] = [Path(args.holdout)]
    check_output(path, inputs, kind="file", name=option)


def _verdict(args: argparse.Namespace) -> Verdict:
    return Verdict.of(
        {
            "allow_unlinked": args.allow_unlinked,
            "allow_sorted_link": args.allow_sorted_link,
            "by_row_order": args.by_row_order,
            "max_own_copies": args.max_own_copies,
        }
    )


def _planned(
    args: argparse.Namespace,
    caller: str,
    holdout: Path | None = None,
    attack: InferenceAttack | None = None,
    linking: LinkabilityAttack | None = None,
) -> tuple[CountPlan, Verdict, Future[dict[str, dict[str, Any]]], pl.LazyFrame | None, list[str]]:
    """The inputs read, the request planned and fitted, its verdict (the link checked), the
    inputs as the provenance states them (hashed in a thread of their own, beside the counting), the
    ``holdout`` file, if any, checked against the originals (and the columns of the
    inference ``attack`` and of the ``linking`` attack) before anything is counted, and the
    warning of a holdout that copies originals (a line of the report, `_warned`)."""
    with stage("planning"):  # the schemas, the fit, the link's keys, the holdout
        originals, avatars = _read_inputs(args)
        verdict = _verdict(args)
        request = with_fit(plan(originals, avatars, _count_options(args), caller=caller))
        check_link(request, verdict)
        rows = {"originals": frame_rows(originals), "avatars": frame_rows(avatars)}
        paths = {"originals": args.originals, "avatars": args.avatars}
        held_out, said = None, []
        if holdout is not None:
            named = {"HOLDOUT": holdout, "ORIGINALS": args.originals, "AVATARS": args.avatars}
            refuse_same_inputs({role: Path(path) for role, path in named.items()}, "HOLDOUT")
            held_out = _scan(args, holdout, "HOLDOUT")
            overlap = check_holdout_and_attack(request, held_out, attack, linking)
            said = [] if overlap is None else [overlap]  # a line of the report
            rows["holdout"], paths["holdout"] = frame_rows(held_out), holdout
    hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hidden-rate-sha256")
    inputs = hashing.submit(
        lambda: {role: describe_input(paths[role], rows[role]) for role in rows}
    )
    hashing.shutdown(wait=False)
    return request, verdict, inputs, held_out, said


def run_check(args: argparse.Namespace) -> int:
    """``hidden-rate check``: count once, summarise, optionally write, report."""
    min_rate = check_min_rate(args.min_rate, "--min-rate")
    if _writes_parts(args):
        summary = _check_dataset(args, min_rate)
        _print_summary(args, summary)
        return 0 if summary.passed else 1
    if args.overwrite:
        raise ValueError(
            "--overwrite replaces an --output directory: it needs --cluster or directory inputs"
        )
    _refuse_inputs(args.output, "--output", args)
    if args.output is not None:
        file_format(args.output, "--output")
    request, verdict, inputs, _, _ = in_background(lambda: _planned(args, "check"))

    def settings(strategy: str | None, evidence: Evidence | None) -> dict[str, Any]:
        return describe_settings(
            request,
            strategy=strategy,
            verdict=verdict.to_dict(),
            link_test=None if evidence is None else evidence.link.to_dict(),
            min_rate=min_rate,
        )

    if args.output is None:  # no per-record output: counts capped where exact (docs/cli.md)
        summary, strategy = in_background(
            lambda: summarize_judged(request, verdict, min_rate=min_rate)
        )
        described = settings(strategy, summary.evidence)
    else:
        check_output_free(request.originals.collect_schema())
        per_record, evidence, strategy = in_background(lambda: request.per_record_judged(verdict))
        described = settings(strategy, evidence)
        summary = write_atomically(
            per_record,
            args.output,
            min_rate=min_rate,
            # The file's footer states the count and its link test.
            metadata=lambda: parquet_metadata(provenance(inputs.result(), described)),
            evidence=evidence,
            max_own_copies=verdict.max_own_copies,
        )
    summary = summary.with_provenance(provenance(inputs.result(), described))
    _print_summary(args, summary)
    return 0 if summary.passed else 1


def _print_summary(args: argparse.Namespace, summary: CloakingSummary) -> None:
    """``check``'s summary on stdout, with the warnings raised meanwhile; nothing with
    ``--quiet``."""
    if args.quiet:
        return
    warned = _warned(args)
    print(format_json(summary, warned) if args.format == "json" else format_text(summary, warned))


def _writes_parts(args: argparse.Namespace) -> bool:
    """Whether ``check`` writes a directory of parts: on a cluster, or from directories."""
    cluster = args.cluster is not None or args.cluster_file is not None
    return cluster or Path(args.originals).is_dir() or Path(args.avatars).is_dir()


def _check_dataset(args: argparse.Namespace, min_rate: float | None) -> CloakingSummary:
    """``check`` from parquet files or directories into a directory of parts
    ([`local_cloaking_to_parquet`][polars_hidden_rate.local_cloaking_to_parquet]), on the cluster if
    given.

    The parts are staged in this thread, so that a stop signal removes them."""
    if args.output is None:
        msg = "--cluster and directory inputs write one part per originals file: give --output DIR"
        raise ValueError(msg)
    if args.output.is_dir() and not args.overwrite:
        msg = f"--output {str(args.output)!r} exists; give --overwrite to replace it"
        raise FileExistsError(msg)
    options = _count_options(args)
    with _connected(args) as client:
        if client is not None:
            options["cluster"] = client
        job = plan_dataset(
            args.originals,
            args.avatars,
            args.output,
            overwrite=args.overwrite,
            min_rate=min_rate,
            caller="check",
            verdict=_verdict(args),
            **options,
        )
        # The inputs it measures, described before anything is written: the very files the
        # job reads; the settings once the link test has run.
        inputs = {
            "originals": describe_input(args.originals, job.originals.rows, job.originals.paths),
            "avatars": describe_input(args.avatars, job.avatars.rows, job.avatars.paths),
        }

        def described(evidence: Evidence | None) -> dict[str, Any]:
            """The block of the summary and of every part: the settings once the link test
            has run, before any part is written."""
            settings = describe_settings(
                job.request,
                strategy="cluster" if client is not None else None,
                verdict=_verdict(args).to_dict(),
                link_test=None if evidence is None else evidence.link.to_dict(),
                min_rate=min_rate,
            )
            return provenance(inputs, settings)

        with staged_directory(job.output, job.replaces) as staging:
            return in_background(lambda: job.write(staging, described))


@contextlib.contextmanager
def _connected(args: argparse.Namespace) -> Iterator[Any]:
    """A client of the scheduler ``--cluster`` or ``--cluster-file`` names (None without one),
    closed at the end."""
    if args.cluster is None and args.cluster_file is None:
        yield None
        return
    try:
        from distributed import Client
    except ImportError as error:
        raise ImportError(f"--cluster needs dask.distributed: {EXTRA_HINT}") from error
    where = args.cluster if args.cluster is not None else _scheduler_address(args.cluster_file)
    try:
        client = Client(where, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as error:
        msg = f"cannot reach the Dask scheduler {where!r}: {one_line(error)}"
        raise OSError(msg) from error
    try:
        yield client
    finally:
        client.close()


def _scheduler_address(path: Path) -> str:
    """The address in the scheduler file ``path`` (``dask scheduler --scheduler-file``).

    A file being written (empty, or not yet a JSON object with an address) is read again
    for up to `CLUSTER_FILE_WAIT` seconds; then it is bad input, as a missing file is.
    """
    deadline = time.monotonic() + CLUSTER_FILE_WAIT
    while True:
        try:
            found = os.stat(path)
        except FileNotFoundError:
            msg = f"--cluster-file not found: {str(path)!r}"
            raise FileNotFoundError(msg) from None
        if not stat.S_ISREG(found.st_mode):  # a FIFO would block the read
            msg = f"--cluster-file {str(path)!r} is {describe(found.st_mode)}, not a regular file"
            raise ValueError(msg)
        text = path.read_text("utf-8", errors="replace")
        try:
            content = json.loads(text)
        except ValueError:
            content = None
        address = content.get("address") if isinstance(content, dict) else None
        if isinstance(address, str) and address:
            return address
        if time.monotonic() >= deadline:
            what = "is empty" if not text.strip() else "holds no scheduler address"
            msg = (
                f"--cluster-file {str(path)!r} {what} after {CLUSTER_FILE_WAIT:g} s of waiting "
                "(a file of `dask scheduler --scheduler-file`: is the scheduler still starting?)"
            )
            raise ValueError(msg)
        time.sleep(0.1)


def run_report(args: argparse.Namespace) -> int:
    """``hidden-rate report``: every metric once, against its target; optionally as a page."""
    targets = dict(args.target or [])
    # Before anything is read.
    aux_cols = None if args.aux_a is None and args.aux_b is None else (args.aux_a, args.aux_b)
    check_targets(
        targets,
        known=args.known,
        holdout=args.holdout,
        secret=args.secret,
        aux_cols=aux_cols,
        singling_out=args.singling_out,
    )
    _refuse_inputs(args.html, "--html", args)  # its folder too
    _check_attack_options(args)
    space = _attack_space(args)
    attack = inference_attack(
        args.known,
        args.secret,
        args.secret_kind,
        args.secret_tolerance,
        args.holdout is not None,
        space,
    )
    linking = _linkability(args, space)
    if args.n_cols is not None and args.singling_out != "multivariate":
        raise ValueError(
            "--singling-out-cols sets the multivariate singling-out attack: add "
            "--singling-out multivariate"
        )
    singling = singling_out_attack(args.singling_out, args.n_cols or 3, args.holdout is not None)
    if args.baseline_seed is not None and not args.dcr_baseline:
        raise ValueError("--baseline-seed seeds the DCR baseline protection: add --dcr-baseline")
    seed = baseline_of(args.dcr_baseline, args.baseline_seed or 0)
    dcr_space = _dcr_space(args)
    request, verdict, inputs, holdout, said = in_background(
        lambda: _planned(args, "report", args.holdout, attack, linking)
    )
    report, strategy = in_background(
        lambda: report_of_plan(
            request,
            verdict,
            targets=targets,
            holdout=holdout,
            known=args.known,
            inference=attack,
            linkability=linking,
            singling_out=singling,
            dcr_baseline=seed,
            dcr_space=dcr_space,
            compare_spaces=args.compare_spaces,
        )
    )
    if report.link_use == "absent" and not args.quiet:
        print(f"{PROG}: note: {report.override_notes[0]}", file=sys.stderr)
    more: dict[str, Any] = {}
    if attack is not None:
        more["inference"] = {
            "known": list(attack.known),
            "secret": attack.secret,
            "secret_kind": attack.secret_kind,
            "tolerance": attack.tolerance,
            "space": attack.space,
        }
    if linking is not None:
        more["linkability"] = {
            "aux_cols": [list(side) for side in linking.aux_cols],
            "n_neighbors": linking.n_neighbors,
            "space": linking.space,
        }
    if singling is not None:
        more["singling_out"] = {"mode": singling.mode, "n_cols": singling.n_cols}
    if seed is not None:
        more["dcr_baseline"] = {"seed": seed}
    if dcr_space != "projected" or args.compare_spaces:
        more["dcr_space"] = {"space": dcr_space, "compare_spaces": args.compare_spaces}
    settings = describe_settings(
        request,
        strategy=strategy,
        verdict=verdict.to_dict(),
        link_test=None if report.evidence is None else report.evidence.link.to_dict(),
        **more,
    )
    text = None
    with stage("writing the report"):  # the inputs' hashes awaited, each output rendered
        report = report.with_provenance(provenance(inputs.result(), settings))
        report = report.with_warnings((*said, *_warned(args)))
        if args.html is not None:
            page = report.to_html(args.title)
            replace_atomically(
                args.html, lambda temporary: temporary.write_text(page, "utf-8"), name="--html"
            )
        if not args.quiet:
            text = json.dumps(report.to_dict()) if args.format == "json" else format_report(report)
    if text is not None:  # once the stage's line is closed
        print(text)
    return 0 if report.passed else 1


def _check_attack_options(args: argparse.Namespace) -> None:
    """The options of the attribute inference attack, named as the command line gives them
    (`inference_attack` checks them again, in the Python API's words)."""
    if args.secret is None:
        given = [
            option
            for option, value, default in (
                ("--secret-kind", args.secret_kind, "auto"),
                ("--secret-tolerance", args.secret_tolerance, DEFAULT_TOLERANCE),
            )
            if value != default
        ]
        if given:
            msg = (
                f"{' and '.join(given)} set the attribute inference attack: give its --secret "
                "COLUMN too (with --known and --holdout)"
            )
            raise ValueError(msg)
        return
    missing = [
        words
        for words, value in (
            ("the variables the attacker knows (--known A,B)", args.known),
            (
                "a holdout to control it, real records the generator never saw (--holdout FILE)",
                args.holdout,
            ),
        )
        if value is None
    ]
    if missing:
        msg = (
            f"--secret {quoted(args.secret)} runs the attribute inference attack, which needs "
            f"{' and '.join(missing)}"
        )
        raise ValueError(msg)


def _attack_space(args: argparse.Namespace) -> Space:
    """``--space``, which only the attacks take (``sdmetrics`` the DCR measures: `_dcr_space`):
    refused without one."""
    if args.space in (None, "sdmetrics"):
        return "projected"
    if args.secret is None and args.aux_a is None and args.aux_b is None:
        raise ValueError(
            "--space sets the space of the attacks: give --secret (with --known and --holdout) "
            "or --aux-a and --aux-b (with --holdout) too"
        )
    space: Space = args.space
    return space


def _dcr_space(args: argparse.Namespace) -> DcrSpace:
    """``--space sdmetrics`` and ``--compare-spaces``, which the DCR overfitting (with
    --holdout) and baseline (--dcr-baseline) protections take: refused without either."""
    space: DcrSpace = "sdmetrics" if args.space == "sdmetrics" else "projected"
    if (space == "sdmetrics" or args.compare_spaces) and not (args.holdout or args.dcr_baseline):
        flag = "--compare-spaces" if args.compare_spaces else "--space sdmetrics"
        raise ValueError(
            f"{flag} sets the space of the DCR overfitting and baseline protections: give "
            "--holdout or --dcr-baseline too"
        )
    return space


def _linkability(args: argparse.Namespace, space: Space) -> LinkabilityAttack | None:
    """The linkability attack of ``--aux-a`` and ``--aux-b``, checked, its errors naming
    the flags; None without them."""
    if args.aux_a is None and args.aux_b is None:
        if args.neighbors is not None:
            raise ValueError(
                "--neighbors sets the linkability attack: give --aux-a and --aux-b (and "
                "--holdout) too"
            )
        return None
    if args.aux_a is None or args.aux_b is None:
        given, missing = ("--aux-a", "--aux-b") if args.aux_b is None else ("--aux-b", "--aux-a")
        raise ValueError(
            f"{given} needs {missing}: the linkability attack takes the columns of the "
            "attacker's two tables"
        )
    if args.holdout is None:
        raise ValueError(
            "the linkability attack (--aux-a, --aux-b) needs a holdout to control it: "
            "give --holdout"
        )
    return linkability_attack(
        (args.aux_a, args.aux_b),
        args.neighbors or 1,
        space,
        with_holdout=True,
        names=("--aux-a", "--aux-b"),
    )


def run_demo(args: argparse.Namespace) -> int:
    """``hidden-rate demo``: the k table on a synthetic cohort, and the plots."""
    from polars_hidden_rate.demo.cohort import DEFAULT_KS, cohort, k_table, sweep_k

    # k neighbours need k + 1 records; ncp components need ncp + 1 (the cohort's n records
    # span n - 1 dimensions).
    smallest_k = min(DEFAULT_KS)
    fewest = max(smallest_k, args.ncp) + 1
    if args.rows < fewest:
        msg = (
            f"--rows must be at least {fewest}: k = {smallest_k} needs {smallest_k + 1} records "
            f"and --ncp {args.ncp} needs {args.ncp + 1}; got {args.rows}"
        )
        raise ValueError(msg)
    ks = [k for k in DEFAULT_KS if k < args.rows]
    originals = cohort(args.rows, seed=args.seed)
    per_record = sweep_k(originals, ks, ncp=args.ncp, seed=args.seed)
    table = k_table(per_record)
    print(
        f"Synthetic cohort: {originals.height} records, {originals.width} columns "
        f"({', '.join(originals.columns)}).\n"
        f"Avatars: avatarize(cohort, k, ncp={args.ncp}, seed={args.seed}); "
        f"metric on the same {args.ncp} components.\n"
    )
    print(f"{'k':>4}  {'hidden rate':>12}  {'median local cloaking':>22}")
    for k, rate, median in table.iter_rows():
        print(f"{k:>4}  {rate:>10.2f} %  {median:>22g}")
    left_out = [k for k in DEFAULT_KS if k not in ks]
    if left_out:
        shown = ", ".join(str(k) for k in left_out)
        print(f"\nk = {shown} left out: k must be below --rows ({args.rows}).")
    print("\nAt very small k the hidden rate can dip before it rises with k (docs/avatarize.md).")
    if args.plot is not None:
        from polars_hidden_rate.demo.plots import cloaking_histogram, k_curve

        args.plot.mkdir(parents=True, exist_ok=True)
        written = [
            cloaking_histogram(per_record, args.plot / "local_cloaking.png"),
            k_curve(table, args.plot / "hidden_rate_by_k.png"),
        ]
        print("\nPlots: " + ", ".join(str(path) for path in written))
    for message in _warned(args):
        print(f"warning: {message}")
    return 0


def write_atomically(
    per_record: pl.LazyFrame,
    path: Path,
    *,
    min_rate: float | None,
    metadata: Callable[[], dict[str, str]] | None = None,
    evidence: Evidence | None = None,
    max_own_copies: float | None = None,
) -> CloakingSummary:
    """Sink ``per_record`` into ``path``
    (`replace_atomically`), parquet with the ``metadata`` it gives once the records are
    counted (polars asks for it when it writes the footer); summarise what was written,
    with the ``evidence`` of the read it was counted from and its ``max_own_copies``."""
    kind = file_format(path, "--output")
    summaries: list[CloakingSummary] = []

    def sink(temporary: Path) -> None:
        sinks: dict[str, Callable[[Path], object]] = {
            "parquet": lambda target: per_record.sink_parquet(
                target, metadata=None if metadata is None else lambda _context: metadata()
            ),
            "csv": per_record.sink_csv,
            "ipc": per_record.sink_ipc,
        }
        with stage("writing"):
            in_background(lambda: sinks[kind](temporary))
        summary = summarize(
            scan_literal(temporary, kind),
            min_rate=min_rate,
            evidence=evidence,
            max_own_copies=max_own_copies,
        )
        summaries.append(summary)

    replace_atomically(path, sink, name="--output")
    return summaries[0]
