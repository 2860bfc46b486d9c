"""The report as one self-contained HTML page: the metrics table, the histograms (`svg`),
the figures against the holdout, the evidence and what was measured."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from polars_hidden_rate.measures.digits import decisive, exact
from polars_hidden_rate.measures.verdict import (
    Evidence,
)
from polars_hidden_rate.report.svg import svg_histogram
from polars_hidden_rate.report.targets import LABELS

if TYPE_CHECKING:
    from polars_hidden_rate.report.model import PrivacyReport

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


def page_of(report: PrivacyReport, title: str) -> str:
    """`PrivacyReport.to_html`."""
    checks = report.checks
    rows = "\n".join(
        f"<tr><td>{LABELS[name].page}</td>"
        f"<td>{html.escape(decisive(value, report.targets[name], 4))}</td>"
        f"<td>&gt; {html.escape(exact(report.targets[name]))}</td>"
        f'<td class="{"pass" if checks[name] else "fail"}">'
        f"{'pass' if checks[name] else 'FAIL'}</td></tr>"
        for name, value in report.values.items()
    )
    rows += "".join(
        f"\n{_release_row(name, entry)}" for name, entry in report.release_table().items()
    )
    figures = "\n".join(
        svg_histogram(
            getattr(report, name),
            *texts,
            target=report.targets[f"{name}_median"],
            limits=limits,
            discrete=name == "local_cloaking",
            zero_bar=zero_bar,
            space=report.space,
        )
        for name, texts, limits, zero_bar in _FIGURES
    )
    space = f"\nMeasured in {html.escape(report.space)}." if report.space else ""
    verdict = "passed" if report.passed else "failed"
    interval = (
        f"{_number(report.hidden_rate_low)} – {_number(report.hidden_rate_high)} % "
        f"({_number(100 * report.confidence)} % Wilson interval)"
    )
    heading = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{heading}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: 1.5em; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.8em; text-align: left; }}
.pass {{ color: #1a7f37; font-weight: bold; }}
.fail {{ color: #cf222e; font-weight: bold; }}
.na {{ color: #6e7781; }}
figure {{ display: inline-block; margin: 0 1em 1em 0; }}
</style>
</head>
<body>
<h1>{heading}</h1>
<p>{report.n:,} records; {report.n_hidden:,} hidden; hidden rate {interval}.{space}
Overall: <span class="{"pass" if report.passed else "fail"}">{verdict}</span>.</p>
<table>
<thead><tr><th>Metric</th><th>Value</th><th>Target</th><th>Result</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
{figures}
{"" if report.holdout is None else _table("Against the holdout", report.holdout.rows())}
{_audit_html(report.evidence, report.provenance)}
</body>
</html>
"""


def _release_row(name: str, entry: Mapping[str, Any]) -> str:
    """One row of the metrics table for a metric of `PrivacyReport.release_table`: its value
    and verdict, or why it has none."""
    target = entry["target"]
    if entry["value"] is None:
        value, result = html.escape(entry["reason"]), '<td class="na">not computed</td>'
    else:
        value = html.escape(decisive(entry["value"], target, 4))
        result = '<td class="pass">pass</td>' if entry["passed"] else '<td class="fail">FAIL</td>'
    return (
        f"<tr><td>{LABELS[name].page}</td><td>{value}</td>"
        f"<td>&gt; {html.escape(exact(target))}</td>{result}</tr>"
    )


def _number(value: float) -> str:
    """A value for people: at most 4 significant digits, no exponent below 10^6."""
    return html.escape(f"{value:.4g}")


def _audit_html(evidence: Evidence | None, provenance: Mapping[str, Any]) -> str:
    """The evidence beside the metrics and what was measured, every text escaped."""
    parts = []
    if evidence is not None:
        test = evidence.link
        link = (
            f"own avatar closer than a random one for {test.closer_share:.1f} % "
            f"(p = {test.p_value:.2g}, n = {test.n:,})"
            if test.tested
            else "not run (fewer than 50 records)"
        )
        unseen = ", ".join(f"{k}: {v:,}" for k, v in evidence.unseen_modalities.items())
        rows = [
            (
                "Own copies",
                "not compared"
                if evidence.own_copies is None
                else f"{evidence.own_copies:,} ({evidence.own_copies_percent or 0.0:.2f} %)",
            ),
            ("Hidden by ties only", f"{evidence.hidden_by_ties_only or 0:,}"),
            ("Link test", link),
            ("Unseen categories", unseen or "none"),
        ]
        parts.append(_table("Evidence", rows))
    if provenance:
        inputs = [
            (
                role,
                f"{described['path']} — {described['rows']:,} rows, {described['size']:,} "
                f"bytes, sha256 {described.get('sha256', 'per file')}",
            )
            for role, described in provenance["inputs"].items()
        ]
        versions = ", ".join(f"{k} {v}" for k, v in provenance["versions"].items() if v)
        rows = [
            *inputs,
            ("Settings", json.dumps(provenance["settings"], sort_keys=True)),
            ("Versions", versions),
            ("Measured at (UTC)", provenance["measured_at"]),
        ]
        parts.append(_table("What was measured", rows))
    return "\n".join(parts)


def _table(heading: str, rows: list[tuple[str, str]]) -> str:
    body = "\n".join(
        f"<tr><th>{html.escape(name)}</th><td>{html.escape(value)}</td></tr>"
        for name, value in rows
    )
    return f"<h2>{html.escape(heading)}</h2>\n<table>\n<tbody>\n{body}\n</tbody>\n</table>"
