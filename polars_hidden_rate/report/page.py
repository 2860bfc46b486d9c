"""The report as one self-contained HTML page: a lead paragraph, the table of every section's
metrics against their targets, the sections' histograms (`svg`), then a table for each
section's other rows (the figures against the holdout, the evidence, what was measured)."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from polars_hidden_rate.checks import InvariantError, known
from polars_hidden_rate.measures.digits import decisive, exact
from polars_hidden_rate.report.model import ReportModel
from polars_hidden_rate.report.section import Row, Section
from polars_hidden_rate.report.svg import svg_histogram


def page_of(report: ReportModel, sections: Sequence[Section], title: str) -> str:
    """`PrivacyReport.to_html` of ``report``'s ``sections``."""
    shown = [(section, section.rows_in("page")) for section in sections]
    rows = "\n".join(
        _metric_row(row) for _, rows in shown for row in rows if row.target is not None
    )
    figures = "\n".join(
        svg_histogram(
            figure.values,
            figure.title,
            figure.x_label,
            figure.y_label,
            target=figure.target,
            limits=figure.limits,
            discrete=figure.discrete,
            zero_bar=figure.zero_bar,
            space=report.space,
        )
        for section in sections
        for figure in section.figures
    )
    tables = "\n".join(
        _table(section.title, facts)
        for section, rows in shown
        if (facts := [row for row in rows if row.target is None])
    )
    space = f"\nMeasured in {html.escape(report.space)}." if report.space else ""
    verdict = "passed" if report.passed else "failed"
    interval = (
        f"{_number(report.hidden_rate_low)} – {_number(report.hidden_rate_high)} % "
        f"({_number(100 * report.confidence)} % Wilson interval)"
    )
    lead = f"{report.n:,} records; {report.n_hidden:,} hidden; hidden rate {interval}."
    if report.link_use == "absent":
        size = f", {report.n_synthetic:,} synthetic records" if report.other_size else ""
        lead = f"{report.n:,} records{size}; no one-avatar-per-original link: hidden rate n/a."
        verdict += " on the measures that need no link"
    heading = html.escape(title)
    banner = "".join(
        f'<p class="banner"><strong>Read with care:</strong> {_escape(note)}</p>\n'
        for note in report.override_notes
    )
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
.banner {{ background: #fff8c5; border: 1px solid #d4a72c; padding: 0.6em 1em; }}
figure {{ display: inline-block; margin: 0 1em 1em 0; }}
</style>
</head>
<body>
<h1>{heading}</h1>
{banner}<p>{lead}{space}
Overall: <span class="{"pass" if report.passed else "fail"}">{verdict}</span>.</p>
<table>
<thead><tr><th>Metric</th><th>Value</th><th>Target</th><th>Result</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
{figures}
{tables}
</body>
</html>
"""


def _metric_row(row: Row) -> str:
    """A row of the table of metrics: its value and verdict against its target, or why it
    has none."""
    target = known(row.target, "a metric row's target")
    if row.value is None:
        shown = "n/a" if row.reason.startswith("n/a") else "not computed"
        value, result = _escape(row.reason), f'<td class="na">{shown}</td>'
    else:
        if isinstance(row.value, str):
            raise InvariantError("a metric's value is a number (a bug in polars_hidden_rate)")
        value = html.escape(decisive(row.value, target, 4))
        if row.passed is None:  # measured, not judged
            value = f"{value} ({_escape(row.reason)})"
            result = '<td class="na">not judged</td>'
        else:
            result = '<td class="pass">pass</td>' if row.passed else '<td class="fail">FAIL</td>'
            if row.reason:  # what the verdict is read with
                value = f"{value} ({_escape(row.reason)})"
    return (
        f"<tr><td>{_escape(row.label_in('page'))}</td><td>{value}</td>"
        f"<td>{_BOUNDS[row.direction]} {html.escape(row.target_text or exact(target))}</td>"
        f"{result}</tr>"
    )


# How the page writes a target's direction.
_BOUNDS = {">": "&gt;", ">=": "&ge;", "<=": "&le;"}


def _escape(text: str) -> str:
    """A text for the page: escaped, without the backticks that mark code in the terminal's
    and the docstrings' words (the page shows no Markdown), and without command-line syntax
    (`_without_flags`)."""
    return html.escape(_without_flags(text.replace("`", "")))


def _without_flags(text: str) -> str:
    """``text`` as a reader of the page, who runs no command, reads it: a flag in brackets
    after the words that say it dropped with its brackets ("a holdout (--holdout FILE)"),
    another named in words ("--allow-unlinked": "the allow unlinked option")."""
    text = _FLAG_ASIDE.sub("", text)
    return _FLAG.sub(lambda found: f"the {found[1].replace('-', ' ')} option", text)


_FLAG_ASIDE = re.compile(r" ?\([^()]*(?<![\w-])--[a-z][^()]*\)")
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z-]*)")


def _number(value: float) -> str:
    """A value for people: at most 4 significant digits, no exponent below 10^6."""
    return html.escape(f"{value:.4g}")


def _table(heading: str, rows: Sequence[Row]) -> str:
    """A section's rows without a target under its heading: a table, each ``heading`` row
    starting a part under a heading of its own with its sentence, the rows of each ``fold``
    in a table of their own inside a ``<details>``."""
    parts: list[tuple[str, str, list[Row]]] = [(heading, "", [])]
    for row in rows:
        if row.heading:
            parts.append((row.label, str(row.value), []))
        else:
            parts[-1][2].append(row)
    return "\n".join(
        f"<h2>{_escape(title)}</h2>\n"
        + (f"<p>{_escape(said)}</p>\n" if said else "")
        + _folded(part)
        for title, said, part in parts
        if part or said
    )


def _folded(rows: Sequence[Row]) -> str:
    """``rows`` as tables, those of each ``fold`` inside a ``<details>`` under its summary."""
    tables, run = [], list[Row]()
    for row, after in zip(rows, [*rows[1:], None], strict=True):
        run.append(row)
        if after is not None and after.fold == row.fold:
            continue
        table = _rows_table(run)
        tables.append(
            f"<details>\n<summary>{_escape(row.fold)}</summary>\n{table}\n</details>"
            if row.fold
            else table
        )
        run = []
    return "\n".join(tables)


def _rows_table(rows: Sequence[Row]) -> str:
    body = "\n".join(
        f"<tr><th>{_escape(row.label_in('page'))}</th><td>{_escape(str(row.value))}</td></tr>"
        for row in rows
    )
    return f"<table>\n<tbody>\n{body}\n</tbody>\n</table>"
