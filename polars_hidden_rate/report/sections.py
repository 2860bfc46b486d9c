"""What a report shows, measure by measure: the sections of a
[`PrivacyReport`][polars_hidden_rate.PrivacyReport], and `SECTIONS`, the one list that registers
them. The JSON (`PrivacyReport.to_dict`), the page (`PrivacyReport.to_html`) and the terminal
(`PrivacyReport.to_text`) loop over that list: a measure shown in one shows in all three.

Each section is plain data (`polars_hidden_rate.measures.section`): a measure with a value of
its own makes its section there (`HoldoutFigures.section`); those held as the report's own
fields are laid out here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from polars_hidden_rate.measures.baseline import baseline_section
from polars_hidden_rate.measures.holdout_figures import holdout_section
from polars_hidden_rate.measures.linkability import linkability_section
from polars_hidden_rate.measures.section import Histogram, Row, Section
from polars_hidden_rate.report.audit import evidence_section, provenance_section
from polars_hidden_rate.report.targets import LABELS

if TYPE_CHECKING:
    from polars_hidden_rate.report.model import PrivacyReport

SectionOf = Callable[["PrivacyReport"], Section]
"""A report's section of one measure, from the report."""

# Per histogram: the per-record values (their median has the target), the texts, the x range,
# and whether 0 has a bar of its own (a record not hidden, an avatar on an original).
_FIGURES = (
    (
        "local_cloaking",
        ("Local cloaking of the originals", "local cloaking", "originals"),
        None,
        True,
    ),
    (
        "distance_to_closest",
        ("Distance to closest record (DCR)", "distance to the closest original", "avatars"),
        None,
        True,
    ),
    (
        "closest_distances_ratio",
        ("Nearest neighbour distance ratio (NNDR)", "nearest / second distance", "avatars"),
        (0.0, 1.0),
        False,
    ),
)


def records_section(report: PrivacyReport) -> Section:
    """The records and the space measured in (the page says them in its lead paragraph); the
    JSON's ``n``, ``n_hidden``, ``space``, ``confidence`` and ``hidden_rate_interval``."""
    rows = [Row("records", str(report.n), only="text")]
    if report.space:
        rows.append(Row("space", report.space, only="text"))
    entry = {
        "n": report.n,
        "n_hidden": report.n_hidden,
        "space": report.space,
        "confidence": report.confidence,
        "hidden_rate_interval": [report.hidden_rate_low, report.hidden_rate_high],
    }
    return Section("records", "Records", tuple(rows), entry)


def metrics_section(report: PrivacyReport) -> Section:
    """The metrics of [`METRICS`][polars_hidden_rate.report.METRICS] against their targets, the
    hidden rate's interval (in the terminal; the page's lead paragraph says it), the histograms
    of the per-record values; the JSON's ``metrics``."""
    checks, targets = report.checks, report.targets
    rows = [
        Row(
            LABELS[name].text,
            value,
            targets[name],
            checks[name],
            page_label=LABELS[name].page,
        )
        for name, value in report.values.items()
    ]
    rows.append(
        Row(
            "hidden rate interval",
            f"{report.hidden_rate_low:.2f} to {report.hidden_rate_high:.2f} % "
            f"(Wilson, {100 * report.confidence:g} %)",
            only="text",
        )
    )
    figures = tuple(
        Histogram(
            getattr(report, name),
            *texts,
            target=targets[f"{name}_median"],
            limits=limits,
            discrete=name == "local_cloaking",
            zero_bar=zero_bar,
        )
        for name, texts, limits, zero_bar in _FIGURES
    )
    entry = {
        "metrics": {
            name: {"value": value, "target": targets[name], "passed": checks[name]}
            for name, value in report.values.items()
        }
    }
    return Section("metrics", "Metrics", tuple(rows), entry, figures)


def release_section(report: PrivacyReport) -> Section:
    """The service's metrics beside [`METRICS`][polars_hidden_rate.report.METRICS]
    (`PrivacyReport.release_table`): the correlation protection rate, measured or why not,
    and those without a public definition; their JSON keys."""
    table = report.release_table()
    rows = tuple(
        Row(
            LABELS[name].text,
            entry["value"],
            entry["target"],
            entry["passed"],
            reason=entry["reason"] or "",
            page_label=LABELS[name].page,
        )
        for name, entry in table.items()
    )
    return Section("release", "The service's metrics", rows, table)


def verdict_section(report: PrivacyReport) -> Section:
    """Whether every metric measured passed, and how many did (the page's lead paragraph says
    it); the JSON's ``passed``."""
    gates = {**report.checks, **report.release_checks}
    verdict = f"{'PASS' if report.passed else 'FAIL'}: {sum(gates.values())} of {len(gates)}"
    return Section(
        "verdict", "Verdict", (Row("report", verdict, only="text"),), {"passed": report.passed}
    )


SECTIONS: tuple[SectionOf, ...] = (
    records_section,
    metrics_section,
    release_section,
    verdict_section,
    lambda report: holdout_section(report.holdout),
    lambda report: linkability_section(report.linkability),
    lambda report: baseline_section(report.dcr_baseline),
    lambda report: evidence_section(report.evidence),
    lambda report: provenance_section(report.provenance),
)
"""Every section of a report, in the order the page and the terminal show them: adding a
measure to the report is adding its section here."""
