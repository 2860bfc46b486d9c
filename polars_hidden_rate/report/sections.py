"""What a report shows, measure by measure: the sections of a
[`PrivacyReport`][polars_hidden_rate.PrivacyReport], and `SECTIONS`, the one list that registers
them. The JSON (`PrivacyReport.to_dict`), the page (`PrivacyReport.to_html`) and the terminal
(`PrivacyReport.to_text`) loop over that list: a measure shown in one shows in all three.

Every section of a report is built here, and only here, as plain data
(`polars_hidden_rate.report.section`). A measure returns its value and no section: where the
report holds that value (the holdout's figures, an attack, the DCR baseline, the two spaces),
`measure_section` is the one rule that lays it out (its lines as rows, its `to_dict` as the
JSON entry); the report's own figures (the records, the metrics against their targets, the
verdict) have a function each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from polars_hidden_rate.checks import known, quoted
from polars_hidden_rate.measures.digits import decisive
from polars_hidden_rate.report.audit import evidence_section, provenance_section
from polars_hidden_rate.report.model import ReportModel
from polars_hidden_rate.report.section import Format, Histogram, Row, Section
from polars_hidden_rate.report.targets import (
    DIRECTIONS,
    HOLDOUT_METRICS,
    LABELS,
    LINKED_METRICS,
    NO_HOLDOUT,
    TARGET_OFF,
)
from polars_hidden_rate.stats import percent

SectionOf = Callable[[ReportModel], Section]
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


def records_section(report: ReportModel) -> Section:
    """The records and the space measured in (the page says them in its lead paragraph); the
    JSON's ``n``, ``n_hidden``, ``space``, ``confidence``, ``hidden_rate_interval`` (those
    two None where the link is absent) and ``n_synthetic``."""
    rows = [Row("records", str(report.n), only="text")]
    if report.other_size:
        rows.append(Row("synthetic records", str(report.n_synthetic), only="text"))
    if report.space:
        rows.append(Row("space", report.space, only="text"))
    absent = report.link_use == "absent"
    entry = {
        "n": report.n,
        "n_hidden": None if absent else report.n_hidden,
        "space": report.space,
        "confidence": report.confidence,
        "hidden_rate_interval": None
        if absent
        else [report.hidden_rate_low, report.hidden_rate_high],
        "n_synthetic": report.n if report.n_synthetic is None else report.n_synthetic,
    }
    return Section("records", "Records", tuple(rows), entry)


def metrics_section(report: ReportModel) -> Section:
    """The metrics of [`METRICS`][polars_hidden_rate.report.METRICS] against their targets, the
    own copies against ``max_own_copies`` (where judged by a limit), the hidden rate's
    interval (in the terminal; the page's lead paragraph says it), the histograms of the
    per-record values; the JSON's ``metrics`` and ``own_copies``. Where the link is not
    judged (`PrivacyReport.link_use`), the metrics that need it have no verdict, and where it
    is absent no value either, with the reason."""
    checks, targets = report.checks, report.targets
    references, met = report.references, report.reference_checks
    absent, judged = report.link_use == "absent", report.link_use == "judged"
    entries: dict[str, dict[str, Any]] = {}
    rows = []
    for name, value in report.values.items():
        entry: dict[str, Any] = {
            "value": value,
            "target": targets[name],
            "passed": checks.get(name),
        }
        if targets[name] is None:
            entry["reason"] = TARGET_OFF
        if name in LINKED_METRICS and not judged:
            entry = {**entry, "value": None if absent else value, "passed": None}
            entry["reason"] = report.link_reason
        if name in references:
            entry["reference"] = references[name]
            entry["reference_passed"] = met.get(name)
            entry["judged_against"] = "reference" if met.get(name) is False else "target"
        entries[name] = entry
        rows += _metric_rows(report, name, entry)
    copies = _own_copies(report)
    if copies is not None:
        rows.append(
            Row(
                LABELS["own_copies_percent"].text,
                copies["value"],
                copies["target"],
                copies["passed"],
                reason=copies["reason"] or "",
                page_label=LABELS["own_copies_percent"].page,
                direction="<=",
            )
        )
    if not absent:
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
            title,
            x_label,
            "synthetic records" if absent and y_label == "avatars" else y_label,
            target=report.judged_against(f"{name}_median"),
            limits=limits,
            discrete=name == "local_cloaking",
            zero_bar=zero_bar,
        )
        for name, (title, x_label, y_label), limits, zero_bar in _FIGURES
        if not (absent and name == "local_cloaking")
    )
    return Section(
        "metrics",
        "Metrics",
        tuple(rows),
        {"metrics": entries, "own_copies": copies},
        figures,
    )


def _metric_rows(report: ReportModel, name: str, entry: dict[str, Any]) -> list[Row]:
    """The rows of one metric of [`METRICS`][polars_hidden_rate.report.METRICS]: against its
    target (or, where the holdout's own figure fails it, against that figure), or its value
    as evidence where its target is off; then, with a holdout, that figure and what it
    says."""
    label, target, value = LABELS[name], entry["target"], entry["value"]
    if target is None:
        shown = entry.get("reason", "") if value is None else decisive(value, None, 4)
        return [Row(label.text, f"{shown}, {TARGET_OFF}", page_label=label.page)]
    against_reference = entry.get("judged_against") == "reference"
    rows = [
        Row(
            label.text,
            value,
            entry["reference"] if against_reference else target,
            entry["passed"],
            reason=entry.get("reason", ""),
            page_label=label.page,
            direction=">=" if against_reference else DIRECTIONS[name],
            # The holdout's own figure in the digits that place it beside the value (as its
            # line says it, unless the value is that close), not in seventeen.
            target_text=decisive(entry["reference"], target if value is None else value, 4)
            if against_reference
            else "",
        )
    ]
    if "reference" in entry:
        reference = decisive(entry["reference"], target, 4)
        bound = f"{DIRECTIONS[name]} {target:g}"
        said = (
            f"{reference}: real records the generator never saw fail the target ({bound}), "
            "so the release is judged against this figure (at least as protective)"
            if against_reference
            else f"{reference}: real records the generator never saw meet the target ({bound})"
        )
        rows.append(Row("  the holdout's own", said, page_label=f"{label.page}: the holdout's own"))
    return rows


def _own_copies(report: ReportModel) -> dict[str, Any] | None:
    """The own copies against ``max_own_copies``: ``{"value", "target", "direction",
    "passed", "reason"}`` (the percentage, the limit, ``"<="``, the verdict, why none), or
    None where not judged by a limit or not compared; where the link is absent, no value and
    the reason, compared or not."""
    evidence, absent = report.evidence, report.link_use == "absent"
    if report.max_own_copies is None:
        return None
    if not absent and (evidence is None or evidence.own_copies_percent is None):
        return None
    check = report.own_copies_check
    return {
        "value": None if absent or evidence is None else evidence.own_copies_percent,
        "target": report.max_own_copies,
        "direction": DIRECTIONS["own_copies_percent"],
        "passed": check.get("own_copies_percent"),
        "reason": None if check else report.link_reason,
    }


def release_section(report: ReportModel) -> Section:
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


def verdict_section(report: ReportModel) -> Section:
    """Whether every check of `PrivacyReport.verdicts` passed, and how many did (the page's
    lead paragraph says it), after a note per override the verdict rests on
    (`PrivacyReport.override_notes`); the JSON's ``passed`` and ``link_use`` (the overrides
    themselves are in its provenance's settings)."""
    gates = report.verdicts
    verdict = f"{'PASS' if report.passed else 'FAIL'}: {sum(gates.values())} of {len(gates)}"
    if report.link_use == "absent":
        verdict += " (the measures that need no link)"
    # What the verdict rests on beyond its checks (the page opens with it as a banner).
    notes = tuple(Row("note", note, only="text") for note in report.override_notes)
    # Without a holdout nothing attacks the release: the verdict says so, in every format.
    alone = () if report.holdout is not None else (Row("holdout", NO_HOLDOUT),)
    return Section(
        "verdict",
        "Verdict",
        (*notes, Row("report", verdict, only="text"), *alone),
        {
            "passed": report.passed,
            "link_use": report.link_use,
            "holdout_note": None if report.holdout is not None else NO_HOLDOUT,
        },
    )


def holdout_metrics_section(report: ReportModel) -> Section:
    """The measures against the holdout (`HOLDOUT_METRICS`): each a metric row against its
    target in its direction (not judged where the holdout is too small, with the reason),
    or its value as evidence where its target is off, every one with a sentence of what it
    means; the JSON's ``holdout_metrics`` (None without a holdout): per measure ``{"value",
    "target", "direction", "passed", "reason", "meaning"}``, ``passed`` None where not
    judged (``reason`` says why) and ``target`` None where off."""
    values = report.holdout_values
    if report.holdout is None:
        return Section("holdout_metrics", _HOLDOUT_METRICS_TITLE, entry={"holdout_metrics": None})
    checks, why, rows = report.holdout_checks, report.not_judged, []
    entries: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        meaning = _meaning(report, name)
        target = report.targets.get(name)
        label = LABELS[name]
        note = _beside(report, name)
        entries[name] = {
            "value": value,
            "target": target,
            "direction": HOLDOUT_METRICS[name],
            "passed": checks.get(name),
            "reason": why.get(name),
            "meaning": meaning,
        }  # the JSON's copies: `holdout.dcr_overfitting_protection`
        if target is None:
            shown = decisive(value, None, 4)
            rows.append(Row(label.text, f"{shown}, {TARGET_OFF}: {meaning}", page_label=label.page))
            continue
        rows += [
            Row(
                label.text,
                value,
                target,
                checks.get(name),
                reason="; ".join(filter(None, (why.get(name), note))),
                page_label=label.page,
                direction=HOLDOUT_METRICS[name],
            ),
            Row(f"  {label.text}: meaning", meaning, page_label=f"{label.page}: what it means"),
        ]
    return Section(
        "holdout_metrics", _HOLDOUT_METRICS_TITLE, tuple(rows), {"holdout_metrics": entries}
    )


_HOLDOUT_METRICS_TITLE = "The holdout's measures and their targets"


def _beside(report: ReportModel, name: str) -> str | None:
    """What a measure of `HOLDOUT_METRICS` must be read with, beside its figure wherever it
    shows: the copies of training records behind a DCR overfitting protection (a score of 1
    with copies the holdout holds too reads as safe without it); None where nothing."""
    figures = known(report.holdout, "the holdout's figures of a holdout measure")
    overfit = figures.overfitting
    if name != "dcr_overfitting_protection" or not overfit.copies_of_training:
        return None
    shared = overfit.copies_also_in_holdout
    return f"{overfit.copies_of_training:,} synthetic records copy a training record" + (
        f", {shared:,} of them a holdout record too, read as no closer" if shared else ""
    )


def _meaning(report: ReportModel, name: str) -> str:
    """One sentence of what a measure of `HOLDOUT_METRICS` says of this release."""
    figures = known(report.holdout, "the holdout's figures of a holdout measure")
    if name == "membership_auc":
        risk = figures.membership
        tpr = risk.tpr_at_fpr(0.1)
        return (
            f"a training record lies closer to the synthetic set than a holdout record "
            f"{100 * risk.auc:.1f} % of the time (chance: 50 %); at 10 % false alarms an "
            f"attacker finds {_against_chance(tpr / 0.1)}"
        )
    if name == "dcr_overfitting_protection":
        overfit = figures.overfitting
        copies = overfit.copies_message()
        return (
            f"{100 * overfit.closer_to_training:.1f} % of the synthetic records lie closer to a "
            f"training record than to any holdout record, where chance at this split puts "
            f"{100 * overfit.null_share:.1f} %; 1 is no more than chance, 0 all of them"
        ) + ("" if copies is None else f"; copies of training records: {copies}")
    if name == "inference_risk":
        attack = known(figures.inference, "the inference attack of its risk")
        members, control = attack.members, attack.control
        return (
            f"guessing {quoted(attack.secret)} from the nearest synthetic record is right for "
            f"{percent(members.successes, members.records):.1f} % of the training records "
            f"and {percent(control.successes, control.records):.1f} % of the holdout; 0: no "
            "better on the records the generator saw"
        )
    if name == "singling_out_risk":
        found = known(report.singling_out, "the singling-out attack of its risk")
        members, control = found.members, found.control
        if not found.queries:
            return f"no {found.mode} query singles out one synthetic record: nothing to ask"
        return (
            f"of the {found.queries} {found.mode} queries that single out one synthetic record, "
            f"{percent(members.successes, members.records):.1f} % single out one training "
            f"record and {percent(control.successes, control.records):.1f} % one holdout "
            "record; 0: no more often on the records the generator saw"
        )
    return (
        "0: linking an original's known attributes to its other ones through the synthetic "
        "set works no better than for holdout records"
    )


def _against_chance(ratio: float) -> str:
    """How many members an attacker finds, ``ratio`` times chance, in words that read right
    near 1 ("1 times as many" reads as a finding)."""
    if ratio >= 2:
        return f"{ratio:.3g} times as many members as chance"
    more = round(100 * (ratio - 1))
    if more >= 1:
        return f"{more} % more members than chance"
    return "no more members than chance" if more > -1 else "fewer members than chance"


class Measured(Protocol):
    """A measure's value as the report holds it: its lines and its JSON entry."""

    def rows(self) -> list[tuple[str, str]]:
        """Its lines: a label and the text beside it."""
        ...

    def to_dict(self) -> Mapping[str, Any]:
        """Its JSON entry."""
        ...


def measure_section(
    key: str,
    title: str,
    entry: str,
    found: Measured | None,
    lead: str = "",
    parts: Mapping[str, tuple[str, str]] | None = None,
) -> Section:
    """The section of a measure the report holds as a value (``found``), by one rule: when not
    asked no rows and the JSON entry ``entry`` None; otherwise a row per line of `rows` (no
    target: the measures against the holdout are judged in `holdout_metrics_section`) and
    ``entry`` its `to_dict`. On the page, ``lead`` is one sentence of what the measure does
    under the section's heading, and each line whose label starts with a key of ``parts``
    starts a part: that heading and its sentence."""
    if found is None:
        return Section(key, title, entry={entry: None})
    rows = []
    for label, value in found.rows():
        part = next((start for start in parts or {} if label.startswith(start)), None)
        if part is not None:
            rows.append(Row(*(parts or {})[part], only="page", heading=True))
        rows.append(Row(label, value))
    if lead and rows:
        rows.insert(0, Row(title, lead, only="page", heading=True))
    return Section(key, title, tuple(rows), {entry: found.to_dict()})


# The page's heading and sentence of each attack in the holdout's section, by the label of
# the line it starts at.
_HOLDOUT_PARTS = {
    "membership AUC": (
        "Membership attack",
        "An attacker ranks real records by how close each lies to the synthetic set, to tell "
        "the records the generator was trained on from the holdout's: an AUC of 0.5 is chance.",
    ),
    "DCR overfitting protection": (
        "DCR overfitting",
        "The share of synthetic records closer to a training record than to any holdout "
        "record, against the share chance puts there: 1 is no more than chance.",
    ),
    "holdout DCR median": (
        "The holdout's own distances",
        "How far real records the generator never saw lie from the originals: the reference "
        "for the distance targets.",
    ),
    "inference risk on": (
        "Attribute inference attack",
        "An attacker who knows some attributes of a record guesses its secret from the "
        "nearest synthetic record; the risk is how much better that works on the training "
        "records than on the holdout's (0: no better).",
    ),
}


SECTIONS: tuple[SectionOf, ...] = (
    records_section,
    metrics_section,
    holdout_metrics_section,
    release_section,
    verdict_section,
    lambda report: measure_section(
        "holdout", "Against the holdout", "holdout", report.holdout, parts=_HOLDOUT_PARTS
    ),
    lambda report: measure_section(
        "linkability",
        "Linkability attack",
        "linkability",
        report.linkability,
        "An attacker who holds two parts of a record's attributes links them through the "
        "synthetic set; the risk is how much better that works on the training records than "
        "on the holdout's (0: no better).",
    ),
    lambda report: measure_section(
        "singling_out",
        "Singling-out attack",
        "singling_out",
        report.singling_out,
        "An attacker writes queries that single out one synthetic record and counts how often "
        "they single out one real record; the risk is how much more often on the training "
        "records than on the holdout's (0: no more often).",
    ),
    lambda report: measure_section(
        "dcr_baseline",
        "DCR baseline protection",
        "dcr_baseline_protection",
        report.dcr_baseline,
        "The synthetic records' median distance to the closest original against that of "
        "random records: 1 is as far from the originals as random records.",
    ),
    lambda report: measure_section(
        "spaces",
        "The DCR measures in the package's space and in SDMetrics'",
        "space_comparison",
        report.space_comparison,
    ),
    lambda report: evidence_section(
        report.evidence, report.link_reason if report.link_use == "absent" else ""
    ),
    lambda report: provenance_section(
        report.provenance, report.link_reason if report.link_use == "absent" else ""
    ),
)
"""Every section of a report, in the order the page and the terminal show them: adding a
measure to the report is adding its section here (`measure_section` where the report holds
its value)."""


def with_warnings(found: tuple[Section, ...], messages: tuple[str, ...]) -> tuple[Section, ...]:
    """The sections ``found`` and, after the verdict, that of the warnings raised while the
    report was measured (``messages``, `PrivacyReport.with_warnings`): a ``warning`` row for
    each that no row of the text or of the page says already, and the JSON's ``warnings`` (a
    list, empty without any) of each that no other entry holds. A measure that carries its
    warnings shows them itself: the membership's interval warnings (its rows and its
    ``interval_warnings``), the small holdout (the DCR overfitting protection's rows; its
    entry says only ``small_holdout``)."""
    shown = {
        form: {_words(text) for section in found for text in _texts(section, form)}
        for form in _FORMATS
    }
    held = {_words(text) for section in found for text in _strings(section.entry)}
    rows = []
    for message in messages:
        missing = [form for form in _FORMATS if _words(message) not in shown[form]]
        if missing:
            rows.append(Row("warning", message, only=None if len(missing) == 2 else missing[0]))
    entry = {"warnings": [each for each in messages if _words(each) not in held]}
    section = Section("warnings", "Warnings", tuple(rows), entry)
    at = next((i + 1 for i, each in enumerate(found) if each.key == "verdict"), len(found))
    return (*found[:at], section, *found[at:])


_FORMATS: tuple[Format, ...] = ("text", "page")


def _words(text: str) -> str:
    return " ".join(text.split())


def _texts(section: Section, form: Format) -> list[str]:
    """The words ``form`` shows of the rows of ``section``: their values and reasons."""
    return [text for row in section.rows_in(form) for text in (str(row.value), row.reason)]


def _strings(value: object) -> list[str]:
    """Every string a JSON entry holds, however deep."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for each in value.values() for text in _strings(each)]
    if isinstance(value, list | tuple):
        return [text for each in value for text in _strings(each)]
    return []
