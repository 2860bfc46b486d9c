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
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, TypeVar, get_args

import polars as pl

from polars_hidden_rate.api import CountOptions, local_cloaking
from polars_hidden_rate.dataset import plan_dataset, staged_directory
from polars_hidden_rate.distributed import EXTRA_HINT
from polars_hidden_rate.files import (
    CSV_NULL_VALUES,
    file_format,
    one_line,
    scan,
    scan_literal,
)
from polars_hidden_rate.gate import CloakingSummary, check_min_rate, cloaking_summary, summarize
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
from polars_hidden_rate.report import METRICS, PrivacyReport, check_targets, privacy_report

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
    demo.add_argument("--rows", type=int, default=3000, help="cohort size (default 3000)")
    demo.add_argument("--ncp", type=int, default=5, help="projected components (default 5)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
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
        help="features to project as categorical whatever their type (codes 0/1/2, ...)",
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
        help="csv field separator (default: sniffed from the header: , ; or tab)",
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


def _read_inputs(args: argparse.Namespace) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """The two files as lazy frames, csv read with ``--separator`` and ``--null-values``."""
    return tuple(  # type: ignore[return-value]
        scan(path, role, separator=args.separator, null_values=args.null_values)
        for path, role in ((args.originals, "ORIGINALS"), (args.avatars, "AVATARS"))
    )


def _count_options(args: argparse.Namespace) -> CountOptions:
    """The options of the metric, as the command line gives them."""
    return {
        "coords": args.coords,
        "features": args.features,
        "categorical": args.categorical,
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


def run_check(args: argparse.Namespace) -> int:
    """``hidden-rate check``: count once, summarise, optionally write, report."""
    min_rate = check_min_rate(args.min_rate)
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
    originals, avatars = _read_inputs(args)
    options = _count_options(args)
    if args.output is None:  # no per-record output: counts capped where exact (docs/cli.md)
        summary = _in_background(
            lambda: cloaking_summary(originals, avatars, min_rate=min_rate, **options)
        )
    else:
        per_record = local_cloaking(originals, avatars, **options)
        summary = write_atomically(per_record, args.output, min_rate=min_rate)
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
            **options,
        )
        with staged_directory(job.output, job.replaces) as staging:
            return _in_background(lambda: job.write(staging))


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
    originals, avatars = _read_inputs(args)
    options = _count_options(args)
    report = _in_background(lambda: privacy_report(originals, avatars, targets=targets, **options))
    if args.html is not None:
        page = report.to_html()
        replace_atomically(args.html, lambda temporary: temporary.write_text(page, "utf-8"))
    if not args.quiet:
        text = json.dumps(report.to_dict()) if args.format == "json" else format_report(report)
        print(text)
    return 0 if report.passed else 1


def run_demo(args: argparse.Namespace) -> int:
    """``hidden-rate demo``: the k table on a synthetic cohort, and the plots."""
    from polars_hidden_rate.cohort import DEFAULT_KS, cohort, k_table, sweep_k

    originals = cohort(args.rows, seed=args.seed)
    per_record = sweep_k(originals, DEFAULT_KS, ncp=args.ncp, seed=args.seed)
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
    per_record: pl.LazyFrame, path: Path, *, min_rate: float | None
) -> CloakingSummary:
    """Sink ``per_record`` into ``path`` (:func:`replace_atomically`); summarise what was
    written."""
    kind = file_format(path, "--output")
    summaries: list[CloakingSummary] = []

    def sink(temporary: Path) -> None:
        sinks: dict[str, Callable[[Path], object]] = {
            "parquet": per_record.sink_parquet,
            "csv": per_record.sink_csv,
            "ipc": per_record.sink_ipc,
        }
        _in_background(lambda: sinks[kind](temporary))
        summaries.append(summarize(scan_literal(temporary, kind), min_rate=min_rate))

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
        msg = f"{option} folder not found: {path.parent}"
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
    """The human summary of ``hidden-rate check``."""
    if summary.min_rate is None:
        verdict = "no threshold (give --min-rate to gate)"
    else:
        comparison = ">=" if summary.passed else "<"
        verdict = (
            f"{'PASS' if summary.passed else 'FAIL'}: "
            f"{summary.hidden_rate:.2f} % {comparison} {summary.min_rate:g} %"
        )
    return "\n".join(
        [
            f"records               {summary.n}",
            f"hidden rate           {summary.hidden_rate:.2f} %",
            f"local cloaking        median {summary.local_cloaking_median:g}, "
            f"quartiles {summary.local_cloaking_q1:g} to {summary.local_cloaking_q3:g}",
            f"not hidden (c_i = 0)  {summary.not_hidden} ({summary.not_hidden_share:.2f} %)",
            f"gate                  {verdict}",
        ]
    )


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
    for name, value in report.values.items():
        verdict = "PASS" if checks[name] else "FAIL"
        lines.append(
            f"{labels[name]:<30}{value:<12.4g}target > {report.targets[name]:<8g}{verdict}"
        )
    confidence = f"{100 * report.confidence:g} %"
    lines.append(
        f"{'hidden rate interval':<30}{report.hidden_rate_low:.2f} to "
        f"{report.hidden_rate_high:.2f} % (Wilson, {confidence})"
    )
    met = sum(checks.values())
    lines.append(f"{'report':<30}{'PASS' if report.passed else 'FAIL'}: {met} of {len(checks)}")
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


def _names(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",")]
    if not all(names):
        msg = f"empty column name in {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return names
