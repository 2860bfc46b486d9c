"""The human forms of the command line's results: the gate's summary (its evidence and what was
measured as the report's sections render them), the privacy report (`PrivacyReport.to_text`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from polars_hidden_rate.measures.digits import decisive, exact
from polars_hidden_rate.measures.summary import CloakingSummary
from polars_hidden_rate.report import PrivacyReport
from polars_hidden_rate.report.audit import evidence_section, provenance_section
from polars_hidden_rate.report.text import section_lines


def format_text(summary: CloakingSummary, warned: Sequence[str] = ()) -> str:
    """The human summary of ``hidden-rate check``: the figures, the verdict with its
    reasons (the rate with the digits that decide the gate: 89.995 % is not printed 90.00 %
    beside a threshold of 90), a line per warning raised (``warned``), then what was
    measured."""
    rate = decisive(summary.hidden_rate, summary.min_rate, 2, "f")
    gates = ["hidden rate: no threshold (give --min-rate to gate)"]
    if summary.min_rate is not None:
        gates.clear()
        comparison = ">=" if summary.hidden_rate >= summary.min_rate else "<"
        gates.append(f"hidden rate {rate} % {comparison} {exact(summary.min_rate)} %")
    percent = None if summary.evidence is None else summary.evidence.own_copies_percent
    if percent is not None and summary.max_own_copies is not None:
        comparison = "<=" if not summary.copies_fail else ">"
        shown = decisive(percent, summary.max_own_copies, 2, "f")
        gates.append(f"own copies {shown} % {comparison} {exact(summary.max_own_copies)} %")
    if summary.link_refused:  # measured with --allow-unlinked: never a pass
        gates.insert(0, "the link test refuses the link (measured with --allow-unlinked)")
    verdict = f"{'PASS' if summary.passed else 'FAIL'}: {'; '.join(gates)}"
    lines = [
        f"records               {summary.n:,}",
        f"hidden rate           {rate} %",
        f"local cloaking        median {summary.local_cloaking_median:g}, "
        f"quartiles {summary.local_cloaking_q1:g} to {summary.local_cloaking_q3:g}",
        f"not hidden (c_i = 0)  {summary.not_hidden:,} ({summary.not_hidden_share:.2f} %)",
    ]
    lines.extend(section_lines(evidence_section(summary.evidence)))
    lines.append(f"gate                  {verdict}")
    lines.extend(f"warning               {message}" for message in warned)
    lines.extend(section_lines(provenance_section(summary.provenance)))
    return "\n".join(lines)


def format_report(report: PrivacyReport) -> str:
    """The human form of ``hidden-rate report`` (`PrivacyReport.to_text`): a line per row of
    each of the report's sections."""
    return report.to_text()


def format_json(summary: CloakingSummary, warned: Sequence[str] = ()) -> str:
    """The summary as one JSON object, with ``warnings``, the messages of those raised."""
    return json.dumps({**summary.to_dict(), "warnings": list(warned)})
