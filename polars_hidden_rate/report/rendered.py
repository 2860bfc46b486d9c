"""The report as a user holds it: [`PrivacyReport`][polars_hidden_rate.PrivacyReport], the
report's value (`model.ReportModel`) with its renderings
([`PrivacyReport.to_dict`][polars_hidden_rate.PrivacyReport.to_dict],
[`PrivacyReport.to_html`][polars_hidden_rate.PrivacyReport.to_html],
[`PrivacyReport.to_text`][polars_hidden_rate.PrivacyReport.to_text]): each renders the
sections (`sections.SECTIONS`) and nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from polars_hidden_rate.report import sections as registry
from polars_hidden_rate.report.model import ReportModel
from polars_hidden_rate.report.page import page_of
from polars_hidden_rate.report.section import Section
from polars_hidden_rate.report.text import text_of

# The JSON's keys in the order of the first releases (`PrivacyReport.to_dict`).
_KEYS = (
    "n",
    "n_hidden",
    "space",
    "confidence",
    "hidden_rate_interval",
    "metrics",
    "evidence",
    "holdout",
    "passed",
    "provenance",
    "correlation_protection_rate",
    "column_direct_match_protection",
    "categorical_hidden_rate",
)


@dataclass(frozen=True)
class PrivacyReport(ReportModel):
    """The metrics of an anonymization, its targets, and the per-record values behind them.

    Attributes
    ----------
    n
        Number of original records (and of avatars, where linked).
    n_hidden
        Number of originals with ``local_cloaking > 0``.
    hidden_rate
        ``100 * n_hidden / n``.
    hidden_rate_low, hidden_rate_high
        The Wilson score interval of the hidden rate at ``confidence``, in percent.
    confidence
        The confidence level of that interval.
    local_cloaking_median
        Median local cloaking of the originals.
    distance_to_closest_median
        Median distance from an avatar to its closest original (DCR).
    closest_distances_ratio_median
        Median nearest neighbour distance ratio of the avatars (NNDR).
    row_direct_match_protection
        Percentage of avatars that copy no original on the raw features.
    targets
        The target of each metric of [`METRICS`][polars_hidden_rate.report.METRICS], of the
        correlation protection rate (passed when strictly above) and of each measure against
        a holdout (`HOLDOUT_METRICS`, in its direction); None where turned off.
    space
        The space the local cloaking and the distances were measured in: the
        projection, its components kept of those available (``"FAMD, 5 of 28
        components"``), or the coordinate columns given (``"coords 'Dim1', 'Dim2'
        (2 columns)"``); empty when unknown.
    local_cloaking, distance_to_closest, closest_distances_ratio
        The per-record values (not compared, not in the dict): row ``i`` is the
        ``i``-th original as read, and the avatar linked to it.
    correlation_protection
        The correlation protection rate and its counts, when the report was given the
        variables an attacker knows (``known``); None otherwise.
    linkability
        The linkability attack against the holdout, when asked (``aux_cols``); None
        otherwise.
    singling_out
        The singling-out attack against the holdout, when asked (``singling_out``); None
        otherwise.
    dcr_baseline
        The DCR baseline protection, when asked (``dcr_baseline``); None otherwise.
    space_comparison
        The DCR measures in the package's space and in SDMetrics', when asked
        (``compare_spaces``); None otherwise.
    max_own_copies
        The largest percentage of avatars identical to their own original that passes (the
        gate's ``max_own_copies``); None: the own copies are shown, not judged.
    link_use
        Whether the measures that need the link are judged (`LinkUse`). Where ``"absent"``
        for a synthetic set of another height, ``hidden_rate``, ``local_cloaking_median``
        and the interval are NaN, ``n_hidden`` 0 and ``local_cloaking`` empty; on a refused
        link of equal heights they hold the figures of that link. Neither shows anywhere.
    n_synthetic
        Number of synthetic records (avatars): ``n`` where linked; None where not known.
    overrides
        The verdict options that relax the link's checks, as given: ``allow_unlinked``,
        ``allow_sorted_link``, ``by_row_order``.
    reference_row_direct_match_protection
        With a holdout, the holdout's own row direct match protection against the originals
        (`references`); None otherwise.
    warnings
        The warnings raised while it was measured, as the command line caught them
        (`with_warnings`); empty from the Python API, which raises them as Python warnings.
    """

    def to_dict(self) -> dict[str, Any]:
        """The report as plain Python values, ready for `json.dumps`.

        The keys, stable across releases: ``n``, ``n_hidden``, ``space`` (the
        space of the local cloaking and the distances), ``confidence``,
        ``hidden_rate_interval`` (``[low, high]`` in percent), ``metrics`` (for
        each name of [`METRICS`][polars_hidden_rate.report.METRICS], in that order, ``{"value",
        "target", "passed"}``), ``evidence``, ``holdout`` (the figures against a holdout,
        `to_dict`, or None without one),
        ``passed`` and ``provenance``; then, for the service's metrics of
        [`release_table`][polars_hidden_rate.PrivacyReport.release_table],
        ``correlation_protection_rate``, ``column_direct_match_protection`` and
        ``categorical_hidden_rate`` (value None, with the reason, where not computed); then
        ``linkability`` (the linkability attack, `LinkabilityRisk.to_dict`), ``singling_out``
        (the singling-out attack, `SinglingOutRisk.to_dict`) and
        ``dcr_baseline_protection`` (`DcrBaseline.to_dict`), each None unless asked. Each
        is the entry of one of the report's `sections`.
        """
        merged: dict[str, Any] = {}
        for section in self.sections():
            merged.update(section.entry)
        # The keys of the first releases in their places; a newer section's keys after them.
        return {**{key: merged.pop(key) for key in _KEYS if key in merged}, **merged}

    def sections(self) -> tuple[Section, ...]:
        """What the report shows, measure by measure (`polars_hidden_rate.report.sections`):
        each section's rows (label, value, target, verdict), its JSON entry and its figures,
        in the order the page and the text show them. `to_dict`, `to_html` and `to_text`
        render these and nothing else."""
        found = tuple(section_of(self) for section_of in registry.SECTIONS)
        return registry.with_warnings(found, self.warnings)

    def to_text(self) -> str:
        """The report in the terminal, as ``hidden-rate report`` prints it: a line per row of
        each section (a metric with the digits that decide its verdict, its target and PASS
        or FAIL), then the evidence and what was measured."""
        return text_of(self.sections())

    def to_html(self, title: str = "Privacy report") -> str:
        """One self-contained HTML page: the metrics against their targets, and histograms
        of the local cloaking, the DCR and the NNDR as inline SVG (nothing is fetched).

        Each value shows the digits that decide its verdict (a hidden rate of 89.995
        is not shown as 90 beside a target of 90), each target as given. The
        histograms give 0 a bar of its own (the originals not hidden, the avatars on
        an original) and the values past the 99th percentile one more, each labelled
        with its count; their titles name the space of `space`.

        Parameters
        ----------
        title
            The page's title and heading (escaped).
        """
        return page_of(self, self.sections(), title)
