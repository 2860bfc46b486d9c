"""The ``hidden-rate`` command line: a gate for ETL pipelines, and the demonstration.

``hidden-rate check ORIGINALS AVATARS`` exits 0 when the hidden rate passes
``--min-rate`` (or no threshold is given), 1 when it is below, and 2 on bad
input, with a one-line message on stderr. It only reads files, calls the
public API and prints; the metric lives in :mod:`polars_hidden_rate.api`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, TypeVar, get_args

import polars as pl

from polars_hidden_rate import __version__
from polars_hidden_rate.api import CountOptions, CountPlan, plan
from polars_hidden_rate.dataset import plan_dataset, staged_directory
from polars_hidden_rate.digits import decisive, exact
from polars_hidden_rate.files import (
    CSV_NULL_VALUES,
    file_format,
    one_line,
    scan,
    scan_literal,
)
from polars_hidden_rate.frames import check_output_free
from polars_hidden_rate.gate import (
    CloakingSummary,
    check_min_rate,
    summarize,
    summarize_inspected,
)
from polars_hidden_rate.outputs import (
    Access,
    check_output,
    describe,
    existing,
    grant,
    ordinary_file_access,
    publish,
)
from polars_hidden_rate.projection.types import Impute
from polars_hidden_rate.provenance import (
    describe_input,
    describe_settings,
    frame_rows,
    parquet_metadata,
    provenance,
    with_fit,
)
from polars_hidden_rate.report import METRICS, PrivacyReport, check_targets, report_of_plan
from polars_hidden_rate.tasks import EXTRA_HINT
from polars_hidden_rate.verdict import DEFAULT_MAX_OWN_COPIES, Evidence, Inspector, Verdict

PROG = "hidden-rate"
T = TypeVar("T")

BadInput = (pl.exceptions.PolarsError, ValueError, TypeError, OSError, ImportError)
# How long `--cluster` waits for the scheduler to answer.
CONNECT_TIMEOUT = "10s"
# How long `--cluster-file` waits, in seconds, for a scheduler file still being written (empty,
# or not yet a JSON object with an address), as while `dask scheduler` starts.
CLUSTER_FILE_WAIT = 5.0
# Signals that stop a command cleanly: one line on stderr, exit 128 + the signal number.
_STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


class _UsageError(Exception):
    """An argparse usage error, reported like any other bad input."""


class _Interrupted(BaseException):
    """A stop signal, raised in the main thread so that ``finally`` blocks clean up."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    SIGINT, SIGTERM and SIGHUP stop the command as an exception, so that a partial
    output is removed; the exit code is then 128 plus the signal number.
    """
    parser = build_parser()
    with _stop_signals_raised() as received:
        try:
            args = parser.parse_args(argv)
            command: Callable[[argparse.Namespace], int] = args.command
            return command(args)
        except SystemExit as stop:  # --help, --version
            return stop.code if isinstance(stop.code, int) else 0
        except (_UsageError, *BadInput) as error:
            if not received:
                print(f"{PROG}: error: {one_line(error)}", file=sys.stderr)
                return 2
        except BaseException:
            if not received:
                raise
    # A signal came: whatever error it surfaced as (a library may wrap it), report the signal.
    print(f"{PROG}: interrupted ({signal.Signals(received[0]).name})", file=sys.stderr)
    return 128 + received[0]


def entry() -> NoReturn:
    """The ``hidden-rate`` script: :func:`main`, then exit with its code.

    After a stop signal, once the partial output is removed and the line printed, the
    process ends at once, without waiting for counting threads still at work.
    """
    code = main()
    if code > 128:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


@contextlib.contextmanager
def _stop_signals_raised() -> Iterator[list[int]]:
    """Within the block, the stop signals raise :class:`_Interrupted`; yield those received.

    Only in the main thread (where Python runs signal handlers), and never for a signal
    that is ignored (as SIGHUP under ``nohup``). The previous handlers come back after.
    """
    received: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise _Interrupted(signum)

    previous: dict[int, signal.Handlers | Callable[[int, FrameType | None], object] | int] = {}
    if threading.current_thread() is threading.main_thread():
        for name in _STOP_SIGNALS:
            signum = getattr(signal, name, None)
            if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
                old = signal.signal(signum, stop)
                previous[signum] = signal.SIG_DFL if old is None else old
    try:
        yield received
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``hidden-rate`` and its subcommands."""
    parser = _Parser(
        prog=PROG,
        description="Exact hidden rate and local cloaking of an avatar anonymization.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND", parser_class=_Parser)

    check = commands.add_parser(
        "check",
        help="measure an anonymization; exit 1 when below --min-rate",
        description=(
            "Measure the local cloaking of each original against the avatars and print the "
            "hidden rate. Exit codes: 0 pass (or no --min-rate), 1 below --min-rate, 2 bad input."
        ),
    )
    _add_measure_options(check)
    check.add_argument(
        "--min-rate", type=float, metavar="PCT", help="fail (exit 1) below this hidden rate"
    )
    check.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="write the originals with local_cloaking and hidden (parquet, csv or ipc); with "
        "--cluster or directory inputs, a directory of parquet parts",
    )
    where = check.add_mutually_exclusive_group()
    where.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="a Dask scheduler (tcp://host:8786): its workers read, count and write the parts "
        "(needs --output DIR)",
    )
    where.add_argument(
        "--cluster-file",
        type=Path,
        metavar="FILE",
        help="the scheduler's file (dask scheduler --scheduler-file FILE), instead of --cluster",
    )
    check.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing --output directory (once the new one is complete)",
    )
    check.set_defaults(command=run_check)

    report = commands.add_parser(
        "report",
        help="every release metric against its target; exit 1 when one misses",
        description=(
            "Measure the hidden rate (with its 95 % Wilson interval), the median local "
            "cloaking, the median distance to the closest original (DCR), the median nearest "
            "neighbour distance ratio (NNDR) and the row direct match protection, each against "
            "its target. Exit codes: 0 all pass, 1 one fails, 2 bad input."
        ),
    )
    _add_measure_options(report)
    report.add_argument(
        "--target",
        type=_target,
        action="append",
        metavar="NAME=VALUE",
        help=f"override a target (names: {', '.join(METRICS)}); may repeat",
    )
    report.add_argument(
        "--html", type=Path, metavar="FILE", help="write the report as one self-contained page"
    )
    report.add_argument(
        "--title", default="Privacy report", help="the HTML page's title and heading"
    )
    report.set_defaults(command=run_report)

    demo = commands.add_parser(
        "demo",
        help="avatarize a synthetic cohort for several k and print the hidden rates",
        description=(
            "Generate a seeded synthetic cohort, avatarize it for k in 2, 5, 10, 20, 50 and "
            "print how the hidden rate grows with k."
        ),
    )
    demo.add_argument("--plot", type=Path, metavar="DIR", help="write PNG plots into DIR")
    demo.add_argument("--rows", type=_at_least(1), default=3000, help="cohort size (default 3000)")
    demo.add_argument(
        "--ncp", type=_at_least(1), default=5, help="projected components (default 5)"
    )
    demo.add_argument("--seed", type=_at_least(0), default=0, help="random seed (default 0)")
    demo.set_defaults(command=run_demo)
    return parser


def _add_measure_options(command: argparse.ArgumentParser) -> None:
    """The inputs and options ``check`` and ``report`` share: files, space, link, engine."""
    where = "parquet, csv or ipc/feather file (check: or a directory of parquet files)"
    command.add_argument("originals", metavar="ORIGINALS", help=where)
    command.add_argument("avatars", metavar="AVATARS", help=where)
    space = command.add_mutually_exclusive_group()
    space.add_argument(
        "--coords", type=_names, metavar="C1,C2,...", help="projected coordinate columns"
    )
    space.add_argument(
        "--features",
        type=_names,
        metavar="F1,F2,...",
        help="raw columns to project (default: the columns the two files share)",
    )
    command.add_argument("--ncp", type=int, metavar="N", help="number of components to use")
    command.add_argument(
        "--categorical",
        type=_names,
        metavar="C1,C2,...",
        help="features to project as categorical whatever their type (codes 0/1/2, ...); "
        "'auto': integer columns with at most 10 distinct values in the originals",
    )
    command.add_argument(
        "--impute",
        choices=get_args(Impute),
        default="none",
        help="fill missing feature values with the originals' median, mean or mode "
        "(default none: an error)",
    )
    command.add_argument("--on", type=_names, metavar="KEY", help="key column(s) in both files")
    command.add_argument("--left-on", type=_names, metavar="K1", help="key column(s) of ORIGINALS")
    command.add_argument("--right-on", type=_names, metavar="K2", help="key column(s) of AVATARS")
    command.add_argument(
        "--separator",
        type=_separator,
        metavar="CHAR",
        help="csv field separator (default: sniffed from each file's header: , ; or tab)",
    )
    command.add_argument(
        "--decimal-comma",
        action="store_true",
        help="csv numbers have a decimal comma (-0,80); default: sniffed from the data when "
        "the separator is not a comma",
    )
    command.add_argument(
        "--null-values",
        type=lambda value: value.split(","),
        default=list(CSV_NULL_VALUES),
        metavar="S1,S2",
        help="csv fields that mean a missing value (default: NA and the empty field)",
    )
    command.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    command.add_argument("--tie-tol", type=float, default=1e-9, help="relative tie tolerance")
    command.add_argument("--threads", type=int, help="engine threads (default: all cores)")
    command.add_argument(
        "--quiet", action="store_true", help="print nothing and show no progress; use exit code"
    )
    command.add_argument(
        "--max-own-copies",
        type=float,
        default=DEFAULT_MAX_OWN_COPIES,
        metavar="PCT",
        help="fail (exit 1) when more than PCT %% of the avatars are identical to their own "
        "original on the raw features (default 10; 100 disables it)",
    )
    command.add_argument(
        "--allow-unlinked",
        action="store_true",
        help="measure even when the avatars do not look linked to the originals (research)",
    )
    command.add_argument(
        "--by-row-order",
        action="store_true",
        help="link by row order even though both files hold a key column",
    )


def _read_inputs(args: argparse.Namespace) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """The two files as lazy frames, csv read with ``--separator``, ``--null-values`` and
    ``--decimal-comma``."""
    return tuple(  # type: ignore[return-value]
        scan(
            path,
            role,
            separator=args.separator,
            null_values=args.null_values,
            decimal_comma=args.decimal_comma,
        )
        for path, role in ((args.originals, "ORIGINALS"), (args.avatars, "AVATARS"))
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
        "progress": False if args.quiet else None,
    }


def _refuse_inputs(path: Path | None, option: str, args: argparse.Namespace) -> None:
    """An output file may not be an input (the input would be lost), nor anything but a
    regular file (:func:`polars_hidden_rate.outputs.check_output`, the rule of every output)."""
    if path is None:
        return
    inputs = {"ORIGINALS": [Path(args.originals)], "AVATARS": [Path(args.avatars)]}
    check_output(path, inputs, kind="file", name=option)


def _verdict(args: argparse.Namespace) -> Verdict:
    return Verdict.of(
        {
            "allow_unlinked": args.allow_unlinked,
            "by_row_order": args.by_row_order,
            "max_own_copies": args.max_own_copies,
        }
    )


def _planned(
    args: argparse.Namespace, caller: str
) -> tuple[CountPlan, Inspector, Future[dict[str, dict[str, Any]]]]:
    """The inputs read, the request planned and fitted, its inspector, and the inputs as
    the provenance states them: hashed in a thread of their own, beside the counting."""
    originals, avatars = _read_inputs(args)
    verdict = _verdict(args)
    request = with_fit(plan(originals, avatars, _count_options(args), caller=caller))
    inspector = Inspector.start(request, verdict)
    rows = {"originals": frame_rows(originals), "avatars": frame_rows(avatars)}
    paths = {"originals": args.originals, "avatars": args.avatars}
    hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hidden-rate-sha256")
    inputs = hashing.submit(
        lambda: {role: describe_input(paths[role], rows[role]) for role in rows}
    )
    hashing.shutdown(wait=False)
    return request, inspector, inputs


def run_check(args: argparse.Namespace) -> int:
    """``hidden-rate check``: count once, summarise, optionally write, report."""
    min_rate = check_min_rate(args.min_rate, "--min-rate")
    if _writes_parts(args):
        summary = _check_dataset(args, min_rate)
        if not args.quiet:
            print(format_json(summary) if args.format == "json" else format_text(summary))
        return 0 if summary.passed else 1
    if args.overwrite:
        raise ValueError(
            "--overwrite replaces an --output directory: it needs --cluster or directory inputs"
        )
    _refuse_inputs(args.output, "--output", args)
    if args.output is not None:
        file_format(args.output, "--output")
    request, inspector, inputs = _in_background(lambda: _planned(args, "check"))
    settings = describe_settings(
        request, min_rate=min_rate, max_own_copies=inspector.verdict.max_own_copies
    )
    if args.output is None:  # no per-record output: counts capped where exact (docs/cli.md)
        summary = _in_background(lambda: summarize_inspected(inspector, min_rate=min_rate))
        block = provenance(inputs.result(), settings)
    else:
        block = provenance(inputs.result(), settings)
        check_output_free(request.originals.collect_schema())
        per_record = replace(request, inspector=inspector).per_record()
        summary = write_atomically(
            per_record,
            args.output,
            min_rate=min_rate,
            metadata=parquet_metadata(block),
            inspector=inspector,
        )
    summary = summary.with_provenance(block)
    if not args.quiet:
        print(format_json(summary) if args.format == "json" else format_text(summary))
    return 0 if summary.passed else 1


def _writes_parts(args: argparse.Namespace) -> bool:
    """Whether ``check`` writes a directory of parts: on a cluster, or from directories."""
    cluster = args.cluster is not None or args.cluster_file is not None
    return cluster or Path(args.originals).is_dir() or Path(args.avatars).is_dir()


def _check_dataset(args: argparse.Namespace, min_rate: float | None) -> CloakingSummary:
    """``check`` from parquet files or directories into a directory of parts
    (:func:`~polars_hidden_rate.dataset.local_cloaking_to_parquet`), on the cluster if given.

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
        with staged_directory(job.output, job.replaces) as staging:
            summary = _in_background(lambda: job.write(staging))
        inputs = {
            "originals": describe_input(args.originals, job.originals.rows),
            "avatars": describe_input(args.avatars, job.avatars.rows),
        }
        settings = describe_settings(
            job.request, min_rate=min_rate, max_own_copies=args.max_own_copies
        )
        return summary.with_provenance(provenance(inputs, settings))


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
    for up to :data:`CLUSTER_FILE_WAIT` seconds; then it is bad input, as a missing file is.
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
    targets = check_targets(dict(args.target or []))
    _refuse_inputs(args.html, "--html", args)
    if args.html is not None:
        _output_folder(args.html, "--html")
    request, inspector, inputs = _in_background(lambda: _planned(args, "report"))
    report = _in_background(lambda: report_of_plan(inspector, targets=targets))
    block = provenance(
        inputs.result(),
        describe_settings(request, max_own_copies=inspector.verdict.max_own_copies),
    )
    report = report.with_provenance(block)
    if args.html is not None:
        page = report.to_html(args.title)
        replace_atomically(args.html, lambda temporary: temporary.write_text(page, "utf-8"))
    if not args.quiet:
        text = json.dumps(report.to_dict()) if args.format == "json" else format_report(report)
        print(text)
    return 0 if report.passed else 1


def run_demo(args: argparse.Namespace) -> int:
    """``hidden-rate demo``: the k table on a synthetic cohort, and the plots."""
    from polars_hidden_rate.cohort import DEFAULT_KS, cohort, k_table, sweep_k

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
        from polars_hidden_rate.plots import cloaking_histogram, k_curve

        args.plot.mkdir(parents=True, exist_ok=True)
        written = [
            cloaking_histogram(per_record, args.plot / "local_cloaking.png"),
            k_curve(table, args.plot / "hidden_rate_by_k.png"),
        ]
        print("\nPlots: " + ", ".join(str(path) for path in written))
    return 0


def write_atomically(
    per_record: pl.LazyFrame,
    path: Path,
    *,
    min_rate: float | None,
    metadata: dict[str, str] | None = None,
    inspector: Inspector | None = None,
) -> CloakingSummary:
    """Sink ``per_record`` into ``path`` (:func:`replace_atomically`), parquet with
    ``metadata``; summarise what was written, with the evidence ``inspector`` took from
    the read it was counted from."""
    kind = file_format(path, "--output")
    summaries: list[CloakingSummary] = []

    def sink(temporary: Path) -> None:
        sinks: dict[str, Callable[[Path], object]] = {
            "parquet": lambda target: per_record.sink_parquet(target, metadata=metadata),
            "csv": per_record.sink_csv,
            "ipc": per_record.sink_ipc,
        }
        _in_background(lambda: sinks[kind](temporary))
        evidence = None if inspector is None else inspector.evidence()
        limit = None if inspector is None else inspector.verdict.max_own_copies
        summary = summarize(
            scan_literal(temporary, kind),
            min_rate=min_rate,
            evidence=evidence,
            max_own_copies=limit,
        )
        summaries.append(summary)

    replace_atomically(path, sink, option="--output")
    return summaries[0]


def replace_atomically(
    path: Path, write: Callable[[Path], object], *, option: str = "--html"
) -> None:
    """``write`` a temporary file beside ``path``, then rename it to ``path``.

    A failure or a stop leaves no partial file (and any previous one untouched). The
    temporary file is readable by its owner only while written (``write`` must write
    into it, not replace it); the result then gets the mode and group of the file it
    replaces, or, when new, the mode an ordinary open gives (umask applied).

    Only the file found at ``path`` now is replaced: a file created or replaced there
    meanwhile (by another run) is left as it is, and FileExistsError raised
    (:func:`polars_hidden_rate.outputs.publish`). ``path`` must be absent or a regular file.
    """
    _output_folder(path, option)
    found = existing(path, kind="file", name=option)
    temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        access = _create_private(temporary, replaces=path if path.is_file() else None)
        write(temporary)
        grant(temporary, access)
        publish(temporary, path, found, name=option)
    finally:
        temporary.unlink(missing_ok=True)


def _output_folder(path: Path, option: str) -> None:
    if not path.parent.is_dir():
        msg = f"{option} folder not found: {str(path.parent)!r}"
        raise FileNotFoundError(msg)


def _in_background(work: Callable[[], T]) -> T:
    """``work()``, run in a daemon thread while this one waits, so that a stop signal is handled
    at once: Polars holds the thread that calls it until the count is done."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as error:  # handed to the waiting thread
            failure.append(error)

    worker = threading.Thread(target=run, name="hidden-rate-count", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.05)
    if failure:
        raise failure[0]
    return outcome[0]


def _create_private(temporary: Path, *, replaces: Path | None) -> Access:
    """Create the empty file ``temporary``, mode 0o600; return the access of the final file.

    That is the mode and group of the file it ``replaces``; for a new file, the mode an
    ordinary open gives in that folder (umask applied), read off an empty probe file, so
    that ``temporary`` is never readable by others, not even for an instant.
    """
    previous = replaces.stat() if replaces is not None else None
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    os.chmod(temporary, 0o600)  # a umask such as 0o200 would leave the owner unable to write
    if previous is None:
        return ordinary_file_access(temporary.parent)
    return Access(stat.S_IMODE(previous.st_mode), previous.st_gid)


def format_text(summary: CloakingSummary) -> str:
    """The human summary of ``hidden-rate check``: the figures, the verdict with its
    reasons (the rate with the digits that decide the gate: 89.995 % is not printed 90.00 %
    beside a threshold of 90), then what was measured."""
    rate = decisive(summary.hidden_rate, summary.min_rate, 2, "f")
    gates = ["hidden rate: no threshold (give --min-rate to gate)"]
    if summary.min_rate is not None:
        gates.clear()
        comparison = ">=" if summary.hidden_rate >= summary.min_rate else "<"
        gates.append(f"hidden rate {rate} % {comparison} {exact(summary.min_rate)} %")
    percent = None if summary.evidence is None else summary.evidence.own_copies_percent
    if percent is not None and summary.max_own_copies is not None:
        comparison = "<=" if not summary.copies_fail else ">"
        gates.append(f"own copies {percent:.2f} % {comparison} {summary.max_own_copies:g} %")
    verdict = f"{'PASS' if summary.passed else 'FAIL'}: {'; '.join(gates)}"
    lines = [
        f"records               {summary.n:,}",
        f"hidden rate           {rate} %",
        f"local cloaking        median {summary.local_cloaking_median:g}, "
        f"quartiles {summary.local_cloaking_q1:g} to {summary.local_cloaking_q3:g}",
        f"not hidden (c_i = 0)  {summary.not_hidden:,} ({summary.not_hidden_share:.2f} %)",
    ]
    lines.extend(_evidence_lines(summary.evidence))
    lines.append(f"gate                  {verdict}")
    lines.extend(_provenance_lines(summary.provenance))
    return "\n".join(lines)


def _evidence_lines(evidence: Evidence | None) -> list[str]:
    """Own copies, ties and the link test, a line each."""
    if evidence is None:
        return [
            "link test             not gathered (a summary of counts already written: "
            "see docs/guarantees.md)"
        ]
    test = evidence.link
    link = (
        f"own avatar closer than a random one for {test.closer_share:.1f} % "
        f"(p = {test.p_value:.2g}, {test.n:,} records)"
        if test.tested
        else "not run (fewer than 50 records)"
    )
    copies = (
        "not compared (a cluster run on projected features: see docs/guarantees.md)"
        if evidence.own_copies is None or evidence.own_copies_percent is None
        else f"{evidence.own_copies:,} ({evidence.own_copies_percent:.2f} %) identical to "
        "their own original"
    )
    lines = [f"{'own copies':<22}{copies}"]
    if evidence.hidden_by_ties_only is not None:
        lines.append(f"{'hidden by ties only':<22}{evidence.hidden_by_ties_only:,}")
    lines.append(f"{'link test':<22}{link}")
    return lines


def _provenance_lines(block: Any) -> list[str]:
    """What was measured, in a few lines: inputs, settings, versions, time."""
    if not block:
        return []
    lines = []
    for role, described in block["inputs"].items():
        digest = described.get("sha256", f"{len(described.get('files', []))} files")
        lines.append(
            f"{role:<22}{described['path']!r}, {described['rows']:,} rows, "
            f"{described['size']:,} bytes, sha256 {digest}"
        )
    settings = block["settings"]
    space = settings["space"]
    if "projection" in space:
        fills = ", ".join(f"{k}={v!r}" for k, v in space["fills"].items()) or "none"
        lines += [
            f"space                 {space['projection']}, {space['ncp']} of "
            f"{space['components_available']} components",
            f"features              {', '.join(space['features'])}",
            f"categorical           {', '.join(space['categorical']) or 'none'} "
            f"({space['categorical_rule']})",
            f"imputation            {space['impute']} (fills: {fills})",
        ]
    else:
        lines.append(f"space                 coordinates {', '.join(space['coords'])}")
    link = settings["link"]
    by = (
        "row order"
        if link["by"] == "row order"
        else (f"key {link['left_on']} = {link['right_on']}")
    )
    lines += [
        f"link                  {by}",
        f"tie tolerance         {settings['tie_tol']:g}",
        "versions              "
        + ", ".join(f"{k} {v}" for k, v in block["versions"].items() if v is not None),
        f"measured at           {block['measured_at']}",
    ]
    return lines


def format_report(report: PrivacyReport) -> str:
    """The human form of ``hidden-rate report``: one line per metric, then the verdict."""
    labels = {
        "hidden_rate": "hidden rate (%)",
        "local_cloaking_median": "median local cloaking",
        "distance_to_closest_median": "median DCR",
        "closest_distances_ratio_median": "median NNDR",
        "row_direct_match_protection": "direct match protection (%)",
    }
    checks = report.checks
    lines = [f"{'records':<30}{report.n}"]
    if report.space:
        lines.append(f"{'space':<30}{report.space}")
    for name, value in report.values.items():
        verdict = "PASS" if checks[name] else "FAIL"
        target = report.targets[name]
        shown = decisive(value, target, 4)  # the digits that decide the verdict
        lines.append(f"{labels[name]:<30}{shown:<12}target > {exact(target):<8}{verdict}")
    confidence = f"{100 * report.confidence:g} %"
    lines.append(
        f"{'hidden rate interval':<30}{report.hidden_rate_low:.2f} to "
        f"{report.hidden_rate_high:.2f} % (Wilson, {confidence})"
    )
    met = sum(checks.values())
    lines.append(f"{'report':<30}{'PASS' if report.passed else 'FAIL'}: {met} of {len(checks)}")
    lines.extend(_evidence_lines(report.evidence))
    lines.extend(_provenance_lines(report.provenance))
    return "\n".join(lines)


def format_json(summary: CloakingSummary) -> str:
    """The summary as one JSON object."""
    return json.dumps(summary.to_dict())


def _separator(value: str) -> str:
    value = "\t" if value in ("\\t", "tab") else value
    if len(value) != 1:
        msg = f"a separator is one character (or 'tab'), got {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _target(value: str) -> tuple[str, float]:
    name, equals, number = value.partition("=")
    try:
        if not equals:
            raise ValueError
        return name.strip(), float(number)
    except ValueError:
        msg = f"a target is NAME=VALUE, got {value!r}"
        raise argparse.ArgumentTypeError(msg) from None


def _at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``low`` (argparse names the option)."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = low - 1
        if number < low:
            msg = f"must be an integer of at least {low}, got {value!r}"
            raise argparse.ArgumentTypeError(msg)
        return number

    return parse


def _names(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",")]
    if not all(names):
        msg = f"empty column name in {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return names
