"""The runs of the entry points: ``check`` of two files, ``check`` of parquet datasets (on
a cluster, or into a directory of parts), the ``report`` and the demonstration, each a
function from files and options to its summary with its provenance (what it measured).

One layer under the command line: it parses, calls one of these, formats and exits. Below
them are the steps the Python API runs too (`gate.summarize_judged`, `report.report_of_plan`,
`to_parquet.plan_dataset`): a run plans once, checks the link before reading, counts from
the judged read and states its inputs and settings. The options arrive as the command line
names them, and the errors a run raises itself name its flags.

Work that a stop signal must be able to interrupt (a count Polars holds its thread for) is
run by ``background``, which the command line gives (its `cli.signals.in_background`); a
staged output is written in the calling thread, so that a stop removes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import polars as pl

from polars_hidden_rate.checks import quoted
from polars_hidden_rate.cluster.client import connected
from polars_hidden_rate.frames import check_output_free
from polars_hidden_rate.frames.files import (
    CSV_NULL_VALUES,
    file_format,
    refuse_same_inputs,
    scan,
    scan_literal,
)
from polars_hidden_rate.gate import checked_request, summary_run
from polars_hidden_rate.link.verdict import Evidence, Verdict, VerdictOptions
from polars_hidden_rate.measures.correlation import check_known
from polars_hidden_rate.measures.gower import Space
from polars_hidden_rate.measures.inference import DEFAULT_TOLERANCE
from polars_hidden_rate.measures.linkability import LinkabilityAttack
from polars_hidden_rate.measures.sdmetrics_space import DcrSpace
from polars_hidden_rate.measures.secrets import SecretKind
from polars_hidden_rate.measures.summary import CloakingSummary, check_min_rate, summarize
from polars_hidden_rate.outputs import check_output, replace_atomically
from polars_hidden_rate.plan import CountOptions, CountPlan
from polars_hidden_rate.progress import Stages, reporting, stage
from polars_hidden_rate.provenance import (
    Describing,
    InputsOf,
    describe_input,
    frame_rows,
    parquet_metadata,
    stated,
)
from polars_hidden_rate.report import (
    PrivacyReport,
    baseline_of,
    check_targets,
    inference_attack,
    linkability_attack,
    singling_out_attack,
)
from polars_hidden_rate.report.run import ReportMeasures, report_run
from polars_hidden_rate.to_parquet import dataset_run

__all__ = [
    "Background",
    "BadInput",
    "CountOptions",
    "DemoTable",
    "InputFiles",
    "ReportOptions",
    "VerdictOptions",
    "demo_plots",
    "demo_table",
    "here",
    "run_check",
    "run_report",
    "showing_progress",
    "write_atomically",
    "writes_parts",
]

T = TypeVar("T")

BadInput = (pl.exceptions.PolarsError, ValueError, TypeError, OSError, ImportError)
"""The errors of bad input: one line on stderr and exit code 2 at the command line."""


class Background(Protocol):
    """Runs ``work`` and returns what it returns (where a stop signal can still be handled)."""

    def __call__(self, work: Callable[[], T]) -> T: ...


def here(work: Callable[[], T]) -> T:
    """``work()``, in this thread."""
    return work()


def showing_progress(progress: bool | None) -> Any:
    """The block within which the stages of a run are shown (``progress`` as
    `CountOptions` takes it: None shows them on a terminal)."""
    return reporting(Stages(progress))


@dataclass(frozen=True)
class InputFiles:
    """The files a run reads, and how a csv one is read."""

    originals: Path
    avatars: Path
    holdout: Path | None = None
    separator: str | None = None
    null_values: Sequence[str] = CSV_NULL_VALUES
    decimal_comma: bool = False

    def scan(self, path: Path, role: str) -> pl.LazyFrame:
        """One input file as a lazy frame (`scan`)."""
        return scan(
            path,
            role,
            separator=self.separator,
            null_values=self.null_values,
            decimal_comma=self.decimal_comma,
        )

    def refuse_as_output(self, path: Path | None, option: str) -> None:
        """An output file may not be an input (the input would be lost), nor anything but a
        regular file (`polars_hidden_rate.outputs.check_output`, the rule of every output)."""
        if path is None:
            return
        inputs = {"ORIGINALS": [Path(self.originals)], "AVATARS": [Path(self.avatars)]}
        if self.holdout is not None:
            inputs["HOLDOUT"] = [Path(self.holdout)]
        check_output(path, inputs, kind="file", name=option)

    def described(self) -> Describing:
        """How a run states these files (`Describing`): once its plan is checked, their rows
        counted and their hashes started in a thread of their own, beside the count (the
        rows the read counts are not needed)."""

        def describing(
            request: CountPlan, holdout: pl.LazyFrame | None
        ) -> Callable[[Mapping[str, int]], dict[str, dict[str, Any]]]:
            rows = {
                "originals": frame_rows(request.originals),
                "avatars": frame_rows(request.avatars),
            }
            paths: dict[str, Path] = {"originals": self.originals, "avatars": self.avatars}
            if holdout is not None and self.holdout is not None:
                rows["holdout"], paths["holdout"] = frame_rows(holdout), self.holdout
            hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hidden-rate-sha256")
            inputs = hashing.submit(
                lambda: {role: describe_input(paths[role], rows[role]) for role in rows}
            )
            hashing.shutdown(wait=False)
            return lambda _counted: inputs.result()

        return describing


def writes_parts(files: InputFiles, cluster: str | None, cluster_file: Path | None) -> bool:
    """Whether ``check`` writes a directory of parts: on a cluster, or from directories."""
    on_cluster = cluster is not None or cluster_file is not None
    return on_cluster or Path(files.originals).is_dir() or Path(files.avatars).is_dir()


def run_check(
    files: InputFiles,
    options: CountOptions,
    verdict: VerdictOptions,
    *,
    min_rate: float | None,
    output: Path | None,
    overwrite: bool = False,
    cluster: str | None = None,
    cluster_file: Path | None = None,
    background: Background = here,
) -> CloakingSummary:
    """``hidden-rate check``: count once, summarise, optionally write; the summary with its
    provenance. From directories or on a cluster, `_run_dataset`."""
    threshold = check_min_rate(min_rate, "--min-rate")
    judge = Verdict.of(verdict)
    if writes_parts(files, cluster, cluster_file):
        return _run_dataset(
            files,
            options,
            judge,
            min_rate=threshold,
            output=output,
            overwrite=overwrite,
            cluster=cluster,
            cluster_file=cluster_file,
            background=background,
        )
    if overwrite:
        raise ValueError(
            "--overwrite replaces an --output directory: it needs --cluster or directory inputs"
        )
    files.refuse_as_output(output, "--output")
    if output is not None:
        file_format(output, "--output")
    if output is None:  # no per-record output: counts capped where exact (docs/cli.md)
        return background(
            lambda: summary_run(
                files.scan(files.originals, "ORIGINALS"),
                files.scan(files.avatars, "AVATARS"),
                options,
                judge,
                min_rate=threshold,
                caller="check",
                inputs=files.described(),
            )
        )

    def planned() -> tuple[CountPlan, InputsOf]:
        with stage("planning"):  # the schemas, the fit, the link's keys
            originals = files.scan(files.originals, "ORIGINALS")
            avatars = files.scan(files.avatars, "AVATARS")
            request = checked_request(originals, avatars, options, judge, caller="check")
            return request, files.described()(request, None)

    request, inputs = background(planned)
    check_output_free(request.originals.collect_schema())
    per_record, evidence, strategy = background(lambda: request.per_record_judged(judge))

    def block() -> dict[str, Any]:
        return stated(
            request,
            inputs({}),
            strategy=strategy,
            verdict=judge,
            evidence=evidence,
            min_rate=threshold,
        )

    summary = write_atomically(
        per_record,
        output,
        min_rate=threshold,
        # The file's footer states the count and its link test.
        metadata=lambda: parquet_metadata(block()),
        evidence=evidence,
        max_own_copies=judge.max_own_copies,
        background=background,
    )
    return summary.with_provenance(block())


def _run_dataset(
    files: InputFiles,
    options: CountOptions,
    verdict: Verdict,
    *,
    min_rate: float | None,
    output: Path | None,
    overwrite: bool,
    cluster: str | None,
    cluster_file: Path | None,
    background: Background,
) -> CloakingSummary:
    """``check`` from parquet files or directories into a directory of parts
    ([`local_cloaking_to_parquet`][polars_hidden_rate.local_cloaking_to_parquet]), on the
    cluster ``cluster`` or ``cluster_file`` names, if given.

    The parts are staged in this thread, so that a stop signal removes them."""
    if output is None:
        msg = "--cluster and directory inputs write one part per originals file: give --output DIR"
        raise ValueError(msg)
    if output.is_dir() and not overwrite:
        msg = f"--output {str(output)!r} exists; give --overwrite to replace it"
        raise FileExistsError(msg)
    options = CountOptions(**options)
    with connected(cluster, cluster_file) as client:
        if client is not None:
            options["cluster"] = client
        return dataset_run(
            files.originals,
            files.avatars,
            output,
            options,
            verdict,
            overwrite=overwrite,
            min_rate=min_rate,
            caller="check",
            # The very files the job reads, described before anything is written.
            inputs=lambda job: {
                "originals": describe_input(
                    files.originals, job.originals.rows, job.originals.paths
                ),
                "avatars": describe_input(files.avatars, job.avatars.rows, job.avatars.paths),
            },
            background=background,
        )


@dataclass(frozen=True)
class ReportOptions:
    """The report's attacks and extra measures, as the command line gives them (None where
    a flag is not given)."""

    known: list[str] | None = None
    secret: str | None = None
    secret_kind: SecretKind = "auto"
    secret_tolerance: float = DEFAULT_TOLERANCE
    space: str | None = None
    aux_a: list[str] | None = None
    aux_b: list[str] | None = None
    neighbors: int | None = None
    singling_out: str | None = None
    n_cols: int | None = None
    dcr_baseline: bool = False
    baseline_seed: int | None = None
    compare_spaces: bool = False


def run_report(
    files: InputFiles,
    options: CountOptions,
    verdict: VerdictOptions,
    *,
    targets: Mapping[str, float | None],
    report: ReportOptions,
    html: Path | None = None,
    title: str = "Privacy report",
    warned: Callable[[], Sequence[str]] = tuple,
    note: Callable[[str], None] | None = None,
    background: Background = here,
) -> PrivacyReport:
    """``hidden-rate report``: every metric once, against its target, with its provenance
    and the warnings raised (``warned()``, after the holdout's own); the page written to
    ``html``. ``note`` says, before the report is written, why the measures that need the
    link are absent (`PrivacyReport.override_notes`). Every option is checked before
    anything is read."""
    with_holdout = files.holdout is not None
    aux_cols = None
    if report.aux_a is not None or report.aux_b is not None:
        aux_cols = (report.aux_a, report.aux_b)
    checked_targets = check_targets(
        targets,
        known=report.known,
        holdout=files.holdout,
        secret=report.secret,
        aux_cols=aux_cols,
        singling_out=report.singling_out,
    )
    files.refuse_as_output(html, "--html")  # its folder too
    _check_attack_options(report, with_holdout)
    space = _attack_space(report)
    attack = inference_attack(
        report.known,
        report.secret,
        report.secret_kind,
        report.secret_tolerance,
        with_holdout,
        space,
    )
    linking = _linkability(report, space, with_holdout)
    if report.n_cols is not None and report.singling_out != "multivariate":
        raise ValueError(
            "--singling-out-cols sets the multivariate singling-out attack: add "
            "--singling-out multivariate"
        )
    singling = singling_out_attack(report.singling_out, report.n_cols or 3, with_holdout)
    if report.baseline_seed is not None and not report.dcr_baseline:
        raise ValueError("--baseline-seed seeds the DCR baseline protection: add --dcr-baseline")
    seed = baseline_of(report.dcr_baseline, report.baseline_seed or 0)
    dcr_space = _dcr_space(report, with_holdout)
    judge = Verdict.of(verdict)
    said: list[str] = []

    def measures(request: CountPlan) -> ReportMeasures:
        return ReportMeasures(
            _known(request, report.known),
            attack,
            linking,
            singling,
            seed,
            dcr_space,
            report.compare_spaces,
        )

    def measured() -> PrivacyReport:
        originals = files.scan(files.originals, "ORIGINALS")
        avatars = files.scan(files.avatars, "AVATARS")
        held_out = None
        if files.holdout is not None:
            named = {
                "HOLDOUT": files.holdout,
                "ORIGINALS": files.originals,
                "AVATARS": files.avatars,
            }
            refuse_same_inputs({role: Path(path) for role, path in named.items()}, "HOLDOUT")
            held_out = files.scan(files.holdout, "HOLDOUT")
        return report_run(
            originals,
            avatars,
            options,
            judge,
            targets=checked_targets,
            confidence=0.95,
            holdout=held_out,
            measures=measures,
            caller="report",
            warn=said.append,
            inputs=files.described(),
            note=note,
        )

    made = background(measured)
    made = made.with_warnings((*said, *warned()))
    if html is not None:
        page = made.to_html(title)
        replace_atomically(
            html, lambda temporary: temporary.write_text(page, "utf-8"), name="--html"
        )
    return made


def _known(request: CountPlan, known: list[str] | None) -> list[str] | None:
    """The ``--known`` columns, checked in both inputs (`check_known`); None without them."""
    if known is None:
        return None
    schemas = (request.originals, request.avatars)
    return check_known(known, *(frame.collect_schema() for frame in schemas))


def _check_attack_options(report: ReportOptions, with_holdout: bool) -> None:
    """The options of the attribute inference attack, named as the command line gives them
    (`inference_attack` checks them again, in the Python API's words)."""
    if report.secret is None:
        given = [
            option
            for option, value, default in (
                ("--secret-kind", report.secret_kind, "auto"),
                ("--secret-tolerance", report.secret_tolerance, DEFAULT_TOLERANCE),
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
        for words, absent in (
            ("the variables the attacker knows (--known A,B)", report.known is None),
            (
                "a holdout to control it, real records the generator never saw (--holdout FILE)",
                not with_holdout,
            ),
        )
        if absent
    ]
    if missing:
        msg = (
            f"--secret {quoted(report.secret)} runs the attribute inference attack, which needs "
            f"{' and '.join(missing)}"
        )
        raise ValueError(msg)


def _attack_space(report: ReportOptions) -> Space:
    """``--space``, which only the attacks take (``sdmetrics`` the DCR measures: `_dcr_space`):
    refused without one."""
    if report.space in (None, "sdmetrics"):
        return "projected"
    if report.secret is None and report.aux_a is None and report.aux_b is None:
        raise ValueError(
            "--space sets the space of the attacks: give --secret (with --known and --holdout) "
            "or --aux-a and --aux-b (with --holdout) too"
        )
    return cast(Space, report.space)  # one of the parser's choices


def _dcr_space(report: ReportOptions, with_holdout: bool) -> DcrSpace:
    """``--space sdmetrics`` and ``--compare-spaces``, which the DCR overfitting (with
    --holdout) and baseline (--dcr-baseline) protections take: refused without either."""
    space: DcrSpace = "sdmetrics" if report.space == "sdmetrics" else "projected"
    if (space == "sdmetrics" or report.compare_spaces) and not (
        with_holdout or report.dcr_baseline
    ):
        flag = "--compare-spaces" if report.compare_spaces else "--space sdmetrics"
        raise ValueError(
            f"{flag} sets the space of the DCR overfitting and baseline protections: give "
            "--holdout or --dcr-baseline too"
        )
    return space


def _linkability(
    report: ReportOptions, space: Space, with_holdout: bool
) -> LinkabilityAttack | None:
    """The linkability attack of ``--aux-a`` and ``--aux-b``, checked, its errors naming
    the flags; None without them."""
    if report.aux_a is None and report.aux_b is None:
        if report.neighbors is not None:
            raise ValueError(
                "--neighbors sets the linkability attack: give --aux-a and --aux-b (and "
                "--holdout) too"
            )
        return None
    if report.aux_a is None or report.aux_b is None:
        given, missing = ("--aux-a", "--aux-b") if report.aux_b is None else ("--aux-b", "--aux-a")
        raise ValueError(
            f"{given} needs {missing}: the linkability attack takes the columns of the "
            "attacker's two tables"
        )
    if not with_holdout:
        raise ValueError(
            "the linkability attack (--aux-a, --aux-b) needs a holdout to control it: "
            "give --holdout"
        )
    return linkability_attack(
        (report.aux_a, report.aux_b),
        report.neighbors or 1,
        space,
        with_holdout=True,
        names=("--aux-a", "--aux-b"),
    )


def write_atomically(
    per_record: pl.LazyFrame,
    path: Path,
    *,
    min_rate: float | None,
    metadata: Callable[[], dict[str, str]] | None = None,
    evidence: Evidence | None = None,
    max_own_copies: float | None = None,
    background: Background = here,
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
            background(lambda: sinks[kind](temporary))
        summary = summarize(
            scan_literal(temporary, kind),
            min_rate=min_rate,
            evidence=evidence,
            max_own_copies=max_own_copies,
        )
        summaries.append(summary)

    replace_atomically(path, sink, name="--output")
    return summaries[0]


@dataclass(frozen=True)
class DemoTable:
    """The demonstration's k table on its synthetic cohort."""

    originals: pl.DataFrame
    per_record: pl.DataFrame
    table: pl.DataFrame
    ks: list[int]
    left_out: list[int]


def demo_table(rows: int, ncp: int, seed: int) -> DemoTable:
    """``hidden-rate demo``: the cohort of ``rows`` records, its avatars at each k of
    `DEFAULT_KS` below ``rows`` on ``ncp`` components, and the k table."""
    from polars_hidden_rate.demo.cohort import DEFAULT_KS, cohort, k_table, sweep_k

    # k neighbours need k + 1 records; ncp components need ncp + 1 (the cohort's n records
    # span n - 1 dimensions).
    smallest_k = min(DEFAULT_KS)
    fewest = max(smallest_k, ncp) + 1
    if rows < fewest:
        msg = (
            f"--rows must be at least {fewest}: k = {smallest_k} needs {smallest_k + 1} records "
            f"and --ncp {ncp} needs {ncp + 1}; got {rows}"
        )
        raise ValueError(msg)
    ks = [k for k in DEFAULT_KS if k < rows]
    originals = cohort(rows, seed=seed)
    per_record = sweep_k(originals, ks, ncp=ncp, seed=seed)
    left_out = [k for k in DEFAULT_KS if k not in ks]
    return DemoTable(originals, per_record, k_table(per_record), ks, left_out)


def demo_plots(demo: DemoTable, folder: Path) -> list[Path]:
    """The demonstration's plots, written into ``folder``: the paths written."""
    from polars_hidden_rate.demo.plots import cloaking_histogram, k_curve

    folder.mkdir(parents=True, exist_ok=True)
    return [
        cloaking_histogram(demo.per_record, folder / "local_cloaking.png"),
        k_curve(demo.table, folder / "hidden_rate_by_k.png"),
    ]
