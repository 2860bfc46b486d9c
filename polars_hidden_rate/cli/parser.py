"""The argument parser of ``hidden-rate``: its subcommands, options and argument types."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal, NoReturn, get_args

from polars_hidden_rate import __version__
from polars_hidden_rate.checks import MAX_TIE_TOL, AllComponents, check_tie_tol
from polars_hidden_rate.frames.files import CSV_NULL_VALUES, one_line
from polars_hidden_rate.link.verdict import DEFAULT_MAX_OWN_COPIES
from polars_hidden_rate.measures.inference import DEFAULT_TOLERANCE
from polars_hidden_rate.projection.types import Impute
from polars_hidden_rate.report import DEFAULT_HOLDOUT_TARGETS, DEFAULT_TARGETS, HOLDOUT_METRICS

PROG = "hidden-rate"
Command = Literal["check", "report", "demo"]
Runner = Callable[[argparse.Namespace], int]
"""A subcommand: its parsed arguments in, its exit code out."""


class UsageError(Exception):
    """An argparse usage error, reported like any other bad input."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser(runners: Mapping[Command, Runner]) -> argparse.ArgumentParser:
    """The argument parser of ``hidden-rate`` and its subcommands; each subcommand's
    ``command`` is its runner in ``runners``."""
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
    check.set_defaults(command=runners["check"])

    report = commands.add_parser(
        "report",
        help="every release metric against its target; exit 1 when one misses",
        description=(
            "Measure the hidden rate (with its 95 % Wilson interval), the median local "
            "cloaking, the median distance to the closest original (DCR), the median nearest "
            "neighbour distance ratio (NNDR) and the row direct match protection, and with "
            "--known the correlation protection rate, each against its target (the column "
            "direct match protection and the categorical hidden rate are shown as not "
            "applicable: no public definition). Exit codes: 0 all pass, 1 one fails, 2 bad "
            "input."
        ),
    )
    _add_measure_options(report)
    report.add_argument(
        "--target",
        type=_target,
        action="append",
        metavar="NAME=VALUE",
        help=f"override a target (names: {', '.join(DEFAULT_TARGETS)}, and with --holdout "
        + ", ".join(f"{k} {v} {DEFAULT_HOLDOUT_TARGETS[k]:g}" for k, v in HOLDOUT_METRICS.items())
        + "); NAME=none turns it off (the figure is then evidence, not judged); may repeat",
    )
    report.add_argument(
        "--known",
        type=_names,
        metavar="A,B",
        help=(
            "the variables an attacker knows, comma-separated: adds the correlation protection "
            "rate (target > 95), which then decides the verdict too, and with --holdout and "
            "--secret the attribute inference attack"
        ),
    )
    report.add_argument(
        "--html", type=Path, metavar="FILE", help="write the report as one self-contained page"
    )
    report.add_argument(
        "--title", default="Privacy report", help="the HTML page's title and heading"
    )
    report.add_argument(
        "--holdout",
        type=Path,
        metavar="FILE",
        help=(
            "real records the generator never saw, with the originals' columns: adds the "
            "membership attack, the DCR overfitting protection and the holdout's DCR and NNDR"
        ),
    )
    report.add_argument(
        "--secret",
        metavar="COLUMN",
        help=(
            "with --holdout and --known: adds the attribute inference attack, guessing this "
            "column from the synthetic record nearest on the known ones"
        ),
    )
    report.add_argument(
        "--secret-kind",
        choices=["auto", "categorical", "numeric"],
        default="auto",
        help="right when equal (categorical) or within --secret-tolerance (numeric); by type",
    )
    report.add_argument(
        "--secret-tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help=(
            "a numeric guess is right within this share of the secret's magnitude "
            f"(default {DEFAULT_TOLERANCE:g})"
        ),
    )
    report.add_argument(
        "--aux-a",
        type=_names,
        metavar="A1,A2",
        help=(
            "with --holdout and --aux-b: adds the linkability attack; the columns of the "
            "attacker's first table"
        ),
    )
    report.add_argument(
        "--aux-b",
        type=_names,
        metavar="B1,B2",
        help="the columns of the attacker's second table (none of --aux-a's)",
    )
    report.add_argument(
        "--neighbors",
        type=_at_least(1),
        metavar="K",
        help="the linkability attack's nearest synthetic records on each side (default 1)",
    )
    report.add_argument(
        "--space",
        choices=["projected", "gower", "sdmetrics"],
        help=(
            "the space of the inference and linkability attacks: each attack's columns "
            "projected (default), or anonymeter's Gower distance; sdmetrics: the DCR "
            "overfitting and baseline protections in SDMetrics' distance"
        ),
    )
    report.add_argument(
        "--compare-spaces",
        action="store_true",
        help=(
            "with --holdout or --dcr-baseline: the DCR overfitting and baseline protections "
            "in both the package's space and SDMetrics', flagging a verdict that differs"
        ),
    )
    report.add_argument(
        "--singling-out",
        choices=["univariate", "multivariate"],
        help=(
            "with --holdout: adds anonymeter's singling-out attack, every query counted: "
            "one column a query (univariate) or --singling-out-cols (multivariate)"
        ),
    )
    report.add_argument(
        "--singling-out-cols",
        dest="n_cols",
        type=_at_least(1),
        metavar="N",
        help="the columns of a multivariate singling-out query (default 3)",
    )
    report.add_argument(
        "--dcr-baseline",
        action="store_true",
        help="adds the DCR baseline protection: the synthetic records' DCR against random ones",
    )
    report.add_argument(
        "--baseline-seed",
        type=_at_least(0),
        metavar="S",
        help="with --dcr-baseline: the seed of its random records (default 0)",
    )
    report.set_defaults(command=runners["report"])

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
    demo.set_defaults(command=runners["demo"])
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
    command.add_argument(
        "--ncp",
        type=_ncp,
        metavar="N|all",
        help="number of components to use (default 5); 'all': every component of the scaled "
        "space, also the directions the originals do not span (saiph's nf=None)",
    )
    command.add_argument(
        "--categorical",
        type=_names,
        metavar="C1,C2,...",
        help="features to project as categorical whatever their type (codes 0/1/2, ...); "
        "'auto': number columns (any type) with at most 10 distinct values in the originals",
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
    command.add_argument(
        "--tie-tol",
        type=_tie_tol,
        default=1e-9,
        help=f"relative tie tolerance, >= 0 and below {MAX_TIE_TOL:g} (default 1e-9)",
    )
    command.add_argument("--threads", type=int, help="engine threads (default: all cores)")
    command.add_argument(
        "--quiet", action="store_true", help="print nothing and show no progress; use exit code"
    )
    command.add_argument(
        "--progress",
        action="store_true",
        help=(
            "report each stage on stderr also off a terminal, as plain log lines (start, "
            "each tenth of the count, end); on a terminal it is shown anyway"
        ),
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
        help="measure even when the avatars do not look linked to the originals (research; "
        "never passes)",
    )
    command.add_argument(
        "--allow-sorted-link",
        action="store_true",
        help="judge a row-order link even when both files are sorted on one feature that "
        "could have made the pairing",
    )
    command.add_argument(
        "--by-row-order",
        action="store_true",
        help="link by row order even though both files hold a key column",
    )


def _separator(value: str) -> str:
    value = "\t" if value in ("\\t", "tab") else value
    if len(value) != 1:
        msg = f"a separator is one character (or 'tab'), got {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _target(value: str) -> tuple[str, float | None]:
    name, equals, number = value.partition("=")
    if equals and number.strip().lower() == "none":  # the target turned off
        return name.strip(), None
    try:
        if not equals:
            raise ValueError
        target = float(number)
    except ValueError:
        msg = f"a target is NAME=VALUE or NAME=none, got {value!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if not math.isfinite(target):
        msg = f"a target's VALUE is a finite number, got {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return name.strip(), target


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


def _ncp(value: str) -> int | AllComponents:
    """``--ncp``: ``all``, or an integer (the library checks its range against the space)."""
    if value == "all":
        return "all"
    try:
        return int(value)
    except ValueError:
        msg = f"must be an integer or 'all', got {value!r}"
        raise argparse.ArgumentTypeError(msg) from None


def _tie_tol(value: str) -> float:
    """``--tie-tol``: a number `check_tie_tol` accepts (argparse names the option)."""
    try:
        number = float(value)
    except ValueError:
        msg = f"must be a number, got {value!r}"
        raise argparse.ArgumentTypeError(msg) from None
    try:
        return check_tie_tol(number, "--tie-tol")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--tie-tol ")) from None


def _names(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",")]
    if not all(names):
        msg = f"empty column name in {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return names


# Python keywords whose command-line form is not their flag of the same name.
_KEYWORD_FLAGS = {"aux_cols": "--aux-a and --aux-b"}


def flags_of(parser: argparse.ArgumentParser, command: str) -> dict[str, str]:
    """Each Python keyword of ``command``'s options, with the flag that gives it (``impute``:
    ``--impute``), read from the parser itself."""
    flags = dict(_KEYWORD_FLAGS)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            for option in action.choices[command]._actions:
                long = [name for name in option.option_strings if name.startswith("--")]
                if long and option.dest != "help":
                    flags.setdefault(option.dest, long[0])
    return flags


def in_flags(message: str, flags: Mapping[str, str]) -> str:
    """A message of the Python API in the command line's words: `` `known` `` as ``--known``,
    `` `targets['membership_auc']` `` as ``--target membership_auc``,
    ``impute='median'`` as ``--impute median``, `` `dcr_baseline=True` `` as
    ``--dcr-baseline``; keywords the command has no flag for stay as written."""

    def flag(match: re.Match[str]) -> str:
        name, value = match.group("name"), match.group("value")
        if name not in flags:
            return match.group(0)
        return flags[name] if value in (None, "True") else f"{flags[name]} {value}"

    message = re.sub(r"`targets\['(?P<name>\w+)'\]`", r"--target \g<name>", message)
    message = re.sub(r"`(?P<name>\w+)(?:=(?P<value>True))?`", flag, message)
    return re.sub(r"\b(?P<name>[a-z_]+)='(?P<value>[^']*)'", flag, message)


def error_line(
    error: BaseException, parser: argparse.ArgumentParser, command: str, *, of_the_api: bool
) -> str:
    """The line ``hidden-rate: error: ...`` says of ``error``: its first line, where it is
    the Python API's (``of_the_api``) in ``command``'s flags (`in_flags`)."""
    words = one_line(error)
    return in_flags(words, flags_of(parser, command)) if of_the_api else words
