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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn, TypeVar

import polars as pl

from polars_hidden_rate.api import local_cloaking
from polars_hidden_rate.gate import CloakingSummary, check_min_rate, summarize

PROG = "hidden-rate"
T = TypeVar("T")

# File formats by extension: how to scan them, and how to sink a LazyFrame into them.
_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".ipc": "ipc",
    ".arrow": "ipc",
    ".feather": "ipc",
}
CSV_INFER_ROWS = 10_000

BadInput = (pl.exceptions.PolarsError, ValueError, TypeError, OSError, ImportError)
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
                print(f"{PROG}: error: {_one_line(error)}", file=sys.stderr)
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
    check.add_argument("originals", metavar="ORIGINALS", help="parquet, csv or ipc/feather file")
    check.add_argument("avatars", metavar="AVATARS", help="parquet, csv or ipc/feather file")
    space = check.add_mutually_exclusive_group()
    space.add_argument(
        "--coords", type=_names, metavar="C1,C2,...", help="projected coordinate columns"
    )
    space.add_argument(
        "--features",
        type=_names,
        metavar="F1,F2,...",
        help="raw columns to project (default: the columns the two files share)",
    )
    check.add_argument("--ncp", type=int, metavar="N", help="number of components to use")
    check.add_argument("--on", type=_names, metavar="KEY", help="key column(s) in both files")
    check.add_argument("--left-on", type=_names, metavar="K1", help="key column(s) of ORIGINALS")
    check.add_argument("--right-on", type=_names, metavar="K2", help="key column(s) of AVATARS")
    check.add_argument(
        "--min-rate", type=float, metavar="PCT", help="fail (exit 1) below this hidden rate"
    )
    check.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="write the originals with local_cloaking and hidden (parquet, csv or ipc)",
    )
    check.add_argument("--format", choices=("text", "json"), default="text", help="summary format")
    check.add_argument("--tie-tol", type=float, default=1e-9, help="relative tie tolerance")
    check.add_argument("--threads", type=int, help="engine threads (default: all cores)")
    check.add_argument(
        "--quiet", action="store_true", help="print nothing and show no progress; use exit code"
    )
    check.set_defaults(command=run_check)

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


def run_check(args: argparse.Namespace) -> int:
    """``hidden-rate check``: count once, summarise, optionally write, report."""
    min_rate = check_min_rate(args.min_rate)
    if args.output is not None:
        for role, given in (("ORIGINALS", args.originals), ("AVATARS", args.avatars)):
            if same_file(args.output, Path(given)):
                msg = f"--output {str(args.output)!r} is the {role} file; write it elsewhere"
                raise ValueError(msg)
    originals = scan(args.originals, "ORIGINALS")
    avatars = scan(args.avatars, "AVATARS")
    per_record = local_cloaking(
        originals,
        avatars,
        coords=args.coords,
        features=args.features,
        ncp=args.ncp,
        on=args.on,
        left_on=args.left_on,
        right_on=args.right_on,
        tie_tol=args.tie_tol,
        threads=args.threads,
        progress=False if args.quiet else None,
    )
    if args.output is None:
        summary = _in_background(lambda: summarize(per_record, min_rate=min_rate))
    else:
        summary = write_atomically(per_record, args.output, min_rate=min_rate)
    if not args.quiet:
        print(format_json(summary) if args.format == "json" else format_text(summary))
    return 0 if summary.passed else 1


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


def scan(path: str | Path, role: str) -> pl.LazyFrame:
    """A lazy scan of ``path``, its format chosen by extension, its schema already read.

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a file.
    ValueError
        When it cannot be read; the message names ``role`` and ``path``.
    """
    path = Path(path)
    kind = file_format(path, role)
    if not path.is_file():
        msg = f"{role} file not found: {path}"
        raise FileNotFoundError(msg)
    try:
        frame = scan_literal(path, kind)
        frame.collect_schema()  # a damaged or unreadable file fails here, not mid-count
    except BadInput as error:
        msg = f"cannot read {role} {str(path)!r}: {_one_line(error)}"
        raise ValueError(msg) from error
    return frame


def scan_literal(path: Path, kind: str) -> pl.LazyFrame:
    """A lazy scan of the one file ``path``: ``[``, ``*`` or ``?`` in it are no glob pattern."""
    if kind == "parquet":
        return pl.scan_parquet(path, glob=False)
    if kind == "csv":
        return pl.scan_csv(path, glob=False, infer_schema_length=CSV_INFER_ROWS)
    return pl.scan_ipc(path, glob=False)


def same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file: one path once symlinks are resolved, or one inode."""
    if first.resolve() == second.resolve():
        return True
    try:
        return os.path.samefile(first, second)  # hard links
    except OSError:  # one of them does not exist, so they are not one file
        return False


def file_format(path: Path, role: str) -> str:
    """``parquet``, ``csv`` or ``ipc`` from the extension of ``path``; ValueError otherwise."""
    kind = _FORMATS.get(path.suffix.lower())
    if kind is None:
        known = ", ".join(_FORMATS)
        msg = f"{role} {str(path)!r} has an unknown extension {path.suffix!r}; use one of {known}"
        raise ValueError(msg)
    return kind


def write_atomically(
    per_record: pl.LazyFrame, path: Path, *, min_rate: float | None
) -> CloakingSummary:
    """Sink ``per_record`` into ``path`` through a temporary file; summarise what was written.

    The temporary file sits beside ``path`` and replaces it only once complete,
    so a failure leaves no partial output (and any previous file untouched). It is
    readable by its owner only while written; the output then gets the mode of the
    file it replaces, or, when new, the mode an ordinary open gives (umask applied).
    """
    kind = file_format(path, "--output")
    if not path.parent.is_dir():
        msg = f"--output folder not found: {path.parent}"
        raise FileNotFoundError(msg)
    temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        mode = _create_private(temporary, replaces=path)
        # The sinks write into the existing file, keeping its mode.
        sinks: dict[str, Callable[[Path], object]] = {
            "parquet": per_record.sink_parquet,
            "csv": per_record.sink_csv,
            "ipc": per_record.sink_ipc,
        }
        _in_background(lambda: sinks[kind](temporary))
        summary = summarize(scan_literal(temporary, kind), min_rate=min_rate)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return summary


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


def _create_private(temporary: Path, *, replaces: Path) -> int:
    """Create the empty file ``temporary``, mode 0o600; return the mode for the final file.

    That is the mode of the file it ``replaces``; for a new file, the mode an ordinary
    open gives, read off ``temporary`` itself, created with it (0o666 less the umask,
    never wider than the final file) and narrowed before anything is written into it.
    """
    existing = replaces.stat() if replaces.is_file() else None
    descriptor = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if existing else 0o666
    )
    try:
        mode = stat.S_IMODE((existing or os.fstat(descriptor)).st_mode)
    finally:
        os.close(descriptor)
    os.chmod(temporary, 0o600)
    return mode


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


def format_json(summary: CloakingSummary) -> str:
    """The summary as one JSON object."""
    return json.dumps(summary.to_dict())


def _names(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",")]
    if not all(names):
        msg = f"empty column name in {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return names


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
