"""The human forms of the command line's results: the gate's summary, the privacy report."""

from __future__ import annotations

import json
from typing import Any

from polars_hidden_rate.measures.digits import decisive, exact
from polars_hidden_rate.measures.summary import CloakingSummary
from polars_hidden_rate.measures.verdict import Evidence
from polars_hidden_rate.provenance import components_words
from polars_hidden_rate.report import LABELS, PrivacyReport


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
            f"space                 {space['projection']}, "
            + components_words(
                space["ncp"], space["components_available"], space["components_spanned"]
            ),
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
    checks = report.checks
    lines = [f"{'records':<30}{report.n}"]
    if report.space:
        lines.append(f"{'space':<30}{report.space}")
    for name, value in report.values.items():
        verdict = "PASS" if checks[name] else "FAIL"
        target = report.targets[name]
        shown = decisive(value, target, 4)  # the digits that decide the verdict
        lines.append(f"{LABELS[name].text:<30}{shown:<12}target > {exact(target):<8}{verdict}")
    confidence = f"{100 * report.confidence:g} %"
    lines.append(
        f"{'hidden rate interval':<30}{report.hidden_rate_low:.2f} to "
        f"{report.hidden_rate_high:.2f} % (Wilson, {confidence})"
    )
    for name, entry in report.release_table().items():
        bound = f"target > {exact(entry['target']):<8}"
        if entry["value"] is None:
            lines.append(f"{LABELS[name].text:<30}{entry['reason']} ({bound.rstrip()})")
        else:
            shown = decisive(entry["value"], entry["target"], 4)
            verdict = "PASS" if entry["passed"] else "FAIL"
            lines.append(f"{LABELS[name].text:<30}{shown:<12}{bound}{verdict}")
    gates = {**checks, **report.release_checks}
    met = sum(gates.values())
    lines.append(f"{'report':<30}{'PASS' if report.passed else 'FAIL'}: {met} of {len(gates)}")
    if report.holdout is not None:
        lines.extend(f"{label:<30}{value}" for label, value in report.holdout.rows())
    lines.extend(_evidence_lines(report.evidence))
    lines.extend(_provenance_lines(report.provenance))
    return "\n".join(lines)


def format_json(summary: CloakingSummary) -> str:
    """The summary as one JSON object."""
    return json.dumps(summary.to_dict())
