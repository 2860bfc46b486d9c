"""The ``hidden-rate`` command line: a gate for ETL pipelines, and the demonstration.

``hidden-rate check ORIGINALS AVATARS`` exits 0 when the hidden rate passes
``--min-rate`` (or no threshold is given), 1 when it is below, and 2 on bad
input, with a one-line message on stderr.

Here are the subcommands and `main`: each parses, calls its run in `polars_hidden_rate.runs`
(which reads, measures and writes, and returns its summary with its provenance), formats
and exits. Beside them, the parser (`parser`), the stop signals (`signals`) and the human
forms of the results (`formatting`). ``python -m polars_hidden_rate.cli`` runs `entry`, as
the ``hidden-rate`` script does.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import NoReturn

from polars_hidden_rate import runs
from polars_hidden_rate.cli.formatting import format_json, format_report, format_text
from polars_hidden_rate.cli.parser import PROG, UsageError, build_parser, error_line
from polars_hidden_rate.cli.signals import in_background, stop_signals_raised

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
]

BadInput = runs.BadInput


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
            with runs.showing_progress(_progress(args)):
                return command(args)
        except SystemExit as stop:  # --help, --version
            return stop.code if isinstance(stop.code, int) else 0
        except (UsageError, *BadInput) as error:
            if not received:
                # The Python API's words, as flags.
                words = error_line(
                    error, parser, _command_of(argv), of_the_api=isinstance(error, BadInput)
                )
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


def _progress(args: argparse.Namespace) -> bool | None:
    """Whether the stages are shown: never with ``--quiet``, always with ``--progress``,
    else on a terminal."""
    return False if args.quiet else True if args.progress else None


def _input_files(args: argparse.Namespace) -> runs.InputFiles:
    """The files of the command, and how a csv one is read (``--separator``,
    ``--null-values``, ``--decimal-comma``)."""
    return runs.InputFiles(
        args.originals,
        args.avatars,
        getattr(args, "holdout", None),
        separator=args.separator,
        null_values=args.null_values,
        decimal_comma=args.decimal_comma,
    )


def _count_options(args: argparse.Namespace) -> runs.CountOptions:
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
        "progress": _progress(args),
    }


def _verdict_options(args: argparse.Namespace) -> runs.VerdictOptions:
    return {
        "allow_unlinked": args.allow_unlinked,
        "allow_sorted_link": args.allow_sorted_link,
        "by_row_order": args.by_row_order,
        "max_own_copies": args.max_own_copies,
    }


def run_check(args: argparse.Namespace) -> int:
    """``hidden-rate check``: count once, summarise, optionally write, report."""
    summary = runs.run_check(
        _input_files(args),
        _count_options(args),
        _verdict_options(args),
        min_rate=args.min_rate,
        output=args.output,
        overwrite=args.overwrite,
        cluster=args.cluster,
        cluster_file=args.cluster_file,
        background=in_background,
    )
    if not args.quiet:
        warned = _warned(args)
        shown = format_json if args.format == "json" else format_text
        print(shown(summary, warned))
    return 0 if summary.passed else 1


def run_report(args: argparse.Namespace) -> int:
    """``hidden-rate report``: every metric once, against its target; optionally as a page."""
    report = runs.run_report(
        _input_files(args),
        _count_options(args),
        _verdict_options(args),
        targets=dict(args.target or []),
        report=runs.ReportOptions(
            known=args.known,
            secret=args.secret,
            secret_kind=args.secret_kind,
            secret_tolerance=args.secret_tolerance,
            space=args.space,
            aux_a=args.aux_a,
            aux_b=args.aux_b,
            neighbors=args.neighbors,
            singling_out=args.singling_out,
            n_cols=args.n_cols,
            dcr_baseline=args.dcr_baseline,
            baseline_seed=args.baseline_seed,
            compare_spaces=args.compare_spaces,
        ),
        html=args.html,
        title=args.title,
        warned=lambda: _warned(args),
        note=None if args.quiet else lambda words: print(f"{PROG}: note: {words}", file=sys.stderr),
        background=in_background,
    )
    if not args.quiet:
        print(json.dumps(report.to_dict()) if args.format == "json" else format_report(report))
    return 0 if report.passed else 1


def run_demo(args: argparse.Namespace) -> int:
    """``hidden-rate demo``: the k table on a synthetic cohort, and the plots."""
    demo = runs.demo_table(args.rows, args.ncp, args.seed)
    originals = demo.originals
    print(
        f"Synthetic cohort: {originals.height} records, {originals.width} columns "
        f"({', '.join(originals.columns)}).\n"
        f"Avatars: avatarize(cohort, k, ncp={args.ncp}, seed={args.seed}); "
        f"metric on the same {args.ncp} components.\n"
    )
    print(f"{'k':>4}  {'hidden rate':>12}  {'median local cloaking':>22}")
    for k, rate, median in demo.table.iter_rows():
        print(f"{k:>4}  {rate:>10.2f} %  {median:>22g}")
    if demo.left_out:
        shown = ", ".join(str(k) for k in demo.left_out)
        print(f"\nk = {shown} left out: k must be below --rows ({args.rows}).")
    print("\nAt very small k the hidden rate can dip before it rises with k (docs/avatarize.md).")
    if args.plot is not None:
        written = runs.demo_plots(demo, args.plot)
        print("\nPlots: " + ", ".join(str(path) for path in written))
    for message in _warned(args):
        print(f"warning: {message}")
    return 0
