"""The sections beside the figures, for the report and the gate alike: the evidence (own copies,
ties, the link test) and what was measured (the provenance block). The terminal and the page
word them differently (the terminal says more of the space and the link, the page gives the
settings whole): each row names the format that shows it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from polars_hidden_rate.checks import quoted
from polars_hidden_rate.link.sorted import SortCheck
from polars_hidden_rate.link.verdict import LINK_OVERRIDES, Evidence
from polars_hidden_rate.measures.digits import exact, p_text
from polars_hidden_rate.projection.coordinates import AUTO_CATEGORIES, CATEGORICAL_REASONS
from polars_hidden_rate.provenance import components_words
from polars_hidden_rate.report.section import Row, Section

# The label column of these sections in the terminal, as in `hidden-rate check`.
WIDTH = 22


def evidence_section(evidence: Evidence | None, absent: str = "") -> Section:
    """Own copies, ties and the link test, a row each (the page adds the unseen categories);
    the JSON entry ``evidence`` (None where not gathered: a summary of counts already written).

    ``absent``: why a report has no one-avatar-per-original link (`PrivacyReport.link_reason`),
    where it has none: the own copies and the ties are then that reason, in every format
    (the JSON's None, with its ``reason``), and so is a link test that could not run (a set of
    another size, ``evidence`` None)."""
    if absent:
        return _absent_evidence(evidence, absent)
    if evidence is None:
        gathered = Row(
            "link test",
            "not gathered (a summary of counts already written: see docs/guarantees.md)",
            only="text",
        )
        return Section("evidence", "Evidence", (gathered,), {"evidence": None}, width=WIDTH)
    copies = (
        "not compared (a cluster run on projected features: see docs/guarantees.md)"
        if evidence.own_copies is None or evidence.own_copies_percent is None
        else f"{evidence.own_copies:,} ({evidence.own_copies_percent:.2f} %) identical to "
        "their own original"
    )
    text = [Row("own copies", copies, only="text")]
    if evidence.hidden_by_ties_only is not None:
        text.append(Row("hidden by ties only", f"{evidence.hidden_by_ties_only:,}", only="text"))
    text.append(Row("link test", _link_words(evidence, "records"), only="text"))
    sort = _sort_words(evidence.sorted_link)
    if sort:
        text.append(Row("sorted-link check", sort, only="text"))
    page = [
        Row(
            "Own copies",
            "not compared"
            if evidence.own_copies is None
            else f"{evidence.own_copies:,} ({evidence.own_copies_percent or 0.0:.2f} %)",
            only="page",
        ),
        Row("Hidden by ties only", f"{evidence.hidden_by_ties_only or 0:,}", only="page"),
        Row("Link test", _link_words(evidence, "n ="), only="page"),
        Row("Unseen categories", _unseen_words(evidence), only="page"),
        *([Row("Sorted-link check", sort, only="page")] if sort else []),
    ]
    return Section(
        "evidence", "Evidence", (*text, *page), {"evidence": _entry(evidence)}, width=WIDTH
    )


def _absent_evidence(evidence: Evidence | None, reason: str) -> Section:
    """`evidence_section` of a report without a one-avatar-per-original link (``reason``):
    the link test where it ran (it is what refuses the link), nothing counted on the link."""
    text, page = (
        (reason, reason)
        if evidence is None
        else (_link_words(evidence, r) for r in ("records", "n ="))
    )
    rows = [
        *(Row(label, reason, only="text") for label in ("own copies", "hidden by ties only")),
        Row("link test", text, only="text"),
        *(Row(label, reason, only="page") for label in ("Own copies", "Hidden by ties only")),
        Row("Link test", page, only="page"),
    ]
    entry: dict[str, Any] = {
        "own_copies": None,
        "own_copies_percent": None,
        "hidden_by_ties_only": None,
        "copy_features": [],
        "unseen_modalities": {},
        "link_test": None,
        "sorted_link": None,
    }
    if evidence is not None:
        rows.append(Row("Unseen categories", _unseen_words(evidence), only="page"))
        entry = {**_entry(evidence), **{key: None for key in list(entry)[:3]}}
    entry["reason"] = reason
    return Section("evidence", "Evidence", tuple(rows), {"evidence": entry}, width=WIDTH)


def _link_words(evidence: Evidence, records: str) -> str:
    """The link test in words: the share of wins and its p-value, or why it did not run."""
    test = evidence.link
    if not test.tested:
        return "not run (fewer than 50 records)"
    count = f"{test.n:,} records" if records == "records" else f"n = {test.n:,}"
    return (
        f"own avatar closer than a random one for {test.closer_share:.1f} % "
        f"({p_text(test.p_value)}, {count})"
    )


def _unseen_words(evidence: Evidence) -> str:
    unseen = ", ".join(f"{k}: {v:,}" for k, v in evidence.unseen_modalities.items())
    return unseen or "none"


def with_p_text(link_test: Mapping[str, Any]) -> dict[str, Any]:
    """A link test's JSON (`LinkTest.to_dict`) with its p-value also as the text and the page
    say it, ``p_value_text``: below the smallest float a bound, never 0."""
    return {**link_test, "p_value_text": p_text(link_test["p_value"])}


def _entry(evidence: Evidence) -> dict[str, Any]:
    """The JSON of ``evidence``, its link test's p-value also as the text and the page say
    it (`with_p_text`)."""
    entry = evidence.to_dict()
    entry["link_test"] = with_p_text(entry["link_test"])
    return entry


def _sort_words(sort: SortCheck | None) -> str:
    """What the sorted-link rule saw of a row-order link, and what it cannot see; empty for
    a link by key (or one the link test refuses)."""
    if sort is None:
        return ""
    unseen = "a sort on a column not compared, or files nearly sorted, is not seen"
    if not sort.checked:
        return "not checked (--allow-sorted-link)"
    if sort.column is None or sort.within is None:
        return f"no compared feature is sorted in both files ({unseen})"
    within = sort.within
    return (
        f"both sorted on {sort.column!r}, each avatar keeping its row's value; within it the "
        f"own avatar is closer for {within.closer_share:.1f} % ({p_text(within.p_value)}): "
        f"a link ({unseen})"
    )


def provenance_section(block: Mapping[str, Any], unlinked: str = "") -> Section:
    """What was measured (`polars_hidden_rate.provenance`): the inputs, the settings, the
    versions, the time; no rows for an empty block. The JSON entry ``provenance``.
    ``unlinked``: why the released set is not one avatar per original, where it is not
    (`PrivacyReport.link_reason`): its file is then "synthetic records", and the link that
    reason."""
    released = "synthetic records" if unlinked else "avatars"
    rows = [*_text_rows(block, released, unlinked), *_page_rows(block, released)] if block else []
    entry = dict(block)
    test = entry.get("settings", {}).get("link_test")
    if isinstance(test, Mapping):  # its p-value as the text and the page say it, too
        entry["settings"] = {**entry["settings"], "link_test": with_p_text(test)}
    return Section(
        "provenance", "What was measured", tuple(rows), {"provenance": entry}, width=WIDTH
    )


def _text_rows(block: Mapping[str, Any], released: str, unlinked: str) -> list[Row]:
    """The terminal's lines: inputs, the space, the link, the tie tolerance, versions, time.
    Every name from a data file is `quoted`: a header never adds a line."""
    lines = []
    for role, described in block["inputs"].items():
        lines.append((released if role == "avatars" else role, _input_words(described, ", ")))
    settings = block["settings"]
    space = settings["space"]
    if "projection" in space:
        fills = ", ".join(f"{quoted(k)}={v!r}" for k, v in space["fills"].items()) or "none"
        words = components_words(
            space["ncp"], space["components_available"], space["components_spanned"]
        )
        lines += [
            ("space", f"{space['projection']}, {words}"),
            ("features", quoted(space["features"])),
            ("categorical", _categorical(space)),
            ("imputation", f"{space['impute']} (fills: {fills})"),
        ]
        if space.get("few_valued_numbers"):
            lines.append(("numbers as numbers", few_valued_words(space)))
    else:
        lines.append(("space", f"coordinates {quoted(space['coords'])}"))
    link = settings["link"]
    by = (
        "row order"
        if link["by"] == "row order"
        else f"key {quoted(link['left_on'])} = {quoted(link['right_on'])}"
    )
    lines += [
        ("link", unlinked or by),
        ("overrides", _overrides(settings)),
        ("tie tolerance", f"{settings['tie_tol']:g}"),
        ("versions", ", ".join(f"{k} {v}" for k, v in block["versions"].items() if v is not None)),
        ("measured at", block["measured_at"]),
    ]
    return [Row(label, value, only="text") for label, value in lines]


def few_valued_words(space: Mapping[str, Any]) -> str:
    """The one line on number columns with few distinct values (codes such as 0/1) that the
    projection reads as numbers, and the option that reads them as categories."""
    names = space["few_valued_numbers"]
    return (
        f"{len(names)} number column{'s' if len(names) > 1 else ''} with at most "
        f"{AUTO_CATEGORIES} distinct values projected as numbers ({quoted(names)}); "
        'categorical="auto" (--categorical auto) treats them as categories'
    )


def _categorical(space: Mapping[str, Any]) -> str:
    """The categorical features by why each is (`CATEGORICAL_REASONS`): a text column taken
    by its type is never listed under the auto rule's words; the rule where none is."""
    by = space["categorical_by"]
    parts = [f"{quoted(names)} {CATEGORICAL_REASONS[why]}" for why, names in by.items() if names]
    return "; ".join(parts) or f"none ({space['categorical_rule']})"


def _overrides(settings: Mapping[str, Any]) -> str:
    """The verdict options that relax the link's checks, as the settings record them."""
    given = [f"--{name.replace('_', '-')}" for name in LINK_OVERRIDES if settings.get(name)]
    words = ", ".join(given) or "none"
    test = settings.get("link_test")
    if isinstance(test, Mapping) and test.get("tested"):
        words += (
            f" (link test: own avatar closer for {test['own_closer_percent']:.1f} %, "
            f"{p_text(test['p_value'])}, {'linked' if test['linked'] else 'refused'})"
        )
    return words


def settings_rows(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """The settings as (name, value) rows of a table: a nested setting's name is its path
    (``space.ncp``), a list its items joined, every value in words rather than JSON."""
    if isinstance(value, Mapping):
        if not value:
            return [(prefix, "none")] if prefix else []
        rows = []
        for name in sorted(value):
            rows += settings_rows(value[name], f"{prefix}.{name}" if prefix else str(name))
        return rows
    if isinstance(value, list | tuple):
        return [(prefix, ", ".join(map(str, value)) or "none")]
    if value is None:
        return [(prefix, "none")]
    if isinstance(value, bool):
        return [(prefix, "yes" if value else "no")]
    if isinstance(value, float) and prefix.endswith("p_value"):
        return [(prefix, p_text(value))]  # never "0" where the text says "p < 1e-300"
    if isinstance(value, float):
        return [(prefix, exact(value))]
    return [(prefix, str(value))]


def _page_rows(block: Mapping[str, Any], released: str) -> list[Row]:
    """The page's rows: inputs (the released file named ``released``), the note on numbers
    with few values, versions, time; the settings folded, each a row, the fills summarised
    in one and folded apart."""
    inputs = [
        (released if role == "avatars" else role, _input_words(described, " — "))
        for role, described in block["inputs"].items()
    ]
    settings = dict(block["settings"])
    space = dict(settings.get("space", {}))
    fills = space.pop("fills", {})
    if fills:
        space["fills"] = f"{len(fills)} columns filled ({space.get('impute')})"
    note = (
        [("Numbers as numbers", few_valued_words(space))] if space.get("few_valued_numbers") else []
    )
    rows = [
        Row(label, value, only="page")
        for label, value in [*inputs, *note, ("Versions", _versions(block))]
    ]
    rows.append(Row("Measured at (UTC)", block["measured_at"], only="page"))
    settings["space"] = space
    folded = settings_rows(settings)
    rows += [
        Row(f"Setting: {name}", text, only="page", fold=f"Settings ({len(folded)})")
        for name, text in folded
    ]
    rows += [
        Row(
            quoted(name),
            str(fill),
            only="page",
            fold=f"{len(fills)} columns filled ({space.get('impute')})",
        )
        for name, fill in fills.items()
    ]
    return rows


def _input_words(described: Mapping[str, Any], between: str) -> str:
    """An input as the text (``between`` ", ") and the page (" — ") say it: a file's path,
    rows, size and hash; a frame given from Python, its rows alone."""
    if "path" not in described:
        return f"a frame of {described['rows']:,} rows"
    digest = described.get(
        "sha256", f"{len(described.get('files', []))} files" if between == ", " else "per file"
    )
    return (
        f"{described['path']!r}{between}{described['rows']:,} rows, {described['size']:,} "
        f"bytes, sha256 {digest}"
    )


def _versions(block: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in block["versions"].items() if v)
