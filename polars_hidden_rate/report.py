"""The privacy report of a release: every metric once, against its target, as JSON or HTML.

:func:`privacy_report` reads the coordinates once, counts the local cloaking,
finds each avatar's two nearest originals on one kd-tree, and checks direct
copies on the raw features; :class:`PrivacyReport` holds the values, compares
them with the targets, and renders them (:meth:`PrivacyReport.to_dict`,
:meth:`PrivacyReport.to_html`).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt
import polars as pl

from polars_hidden_rate._types import CountArray, Float64Array
from polars_hidden_rate.api import CountOptions, plan
from polars_hidden_rate.checks import check_real
from polars_hidden_rate.metrics import (
    check_confidence,
    hidden_rate_interval,
    nearest_originals,
    row_direct_match_protection,
)
from polars_hidden_rate.verdict import (
    Evidence,
    Inspector,
    Verdict,
)

METRICS = (
    "hidden_rate",
    "local_cloaking_median",
    "distance_to_closest_median",
    "closest_distances_ratio_median",
    "row_direct_match_protection",
)
"""The metrics a report checks, in the order it shows them; also the names of the targets."""

DEFAULT_TARGETS: Mapping[str, float] = MappingProxyType(
    {
        "hidden_rate": 90.0,
        "local_cloaking_median": 5.0,
        "distance_to_closest_median": 0.2,
        "closest_distances_ratio_median": 0.3,
        "row_direct_match_protection": 90.0,
    }
)
"""A metric passes when its value is strictly above its target."""

_LABELS = {
    "hidden_rate": "Hidden rate (%)",
    "local_cloaking_median": "Local cloaking, median",
    "distance_to_closest_median": "Distance to closest record (DCR), median",
    "closest_distances_ratio_median": "Nearest neighbour distance ratio (NNDR), median",
    "row_direct_match_protection": "Row direct match protection (%)",
}

# Per histogram: the per-record values (their median has the target), the texts, the x range.
_FIGURES = (
    ("local_cloaking", ("Local cloaking of the originals", "local cloaking", "originals"), None),
    (
        "distance_to_closest",
        ("Distance to closest record (DCR)", "distance to the closest original", "avatars"),
        None,
    ),
    (
        "closest_distances_ratio",
        ("Nearest neighbour distance ratio (NNDR)", "nearest / second distance", "avatars"),
        (0.0, 1.0),
    ),
)


def _no_counts() -> CountArray:
    return np.zeros(0, dtype=np.int64)


def _no_values() -> Float64Array:
    return np.zeros(0, dtype=np.float64)


@dataclass(frozen=True)
class PrivacyReport:
    """The metrics of an anonymization, its targets, and the per-record values behind them.

    Attributes
    ----------
    n
        Number of original records (and of avatars).
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
        The target of each metric of :data:`METRICS`; it passes when strictly above.
    local_cloaking, distance_to_closest, closest_distances_ratio
        The per-record values (not compared, not in the dict): row ``i`` is the
        ``i``-th original as read, and the avatar linked to it.
    """

    n: int
    n_hidden: int
    hidden_rate: float
    hidden_rate_low: float
    hidden_rate_high: float
    confidence: float
    local_cloaking_median: float
    distance_to_closest_median: float
    closest_distances_ratio_median: float
    row_direct_match_protection: float
    targets: Mapping[str, float] = field(default_factory=lambda: DEFAULT_TARGETS)
    local_cloaking: CountArray = field(default_factory=_no_counts, repr=False, compare=False)
    distance_to_closest: Float64Array = field(default_factory=_no_values, repr=False, compare=False)
    closest_distances_ratio: Float64Array = field(
        default_factory=_no_values, repr=False, compare=False
    )
    evidence: Evidence | None = field(default=None, compare=False)
    provenance: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({}), compare=False
    )

    def with_provenance(self, provenance: Mapping[str, Any]) -> PrivacyReport:
        """This report, stating what it measured (:mod:`polars_hidden_rate.provenance`)."""
        return replace(self, provenance=MappingProxyType(dict(provenance)))

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", check_targets(self.targets))

    @property
    def values(self) -> dict[str, float]:
        """The value of each metric of :data:`METRICS`."""
        return {name: float(getattr(self, name)) for name in METRICS}

    @property
    def checks(self) -> dict[str, bool]:
        """Whether each metric is strictly above its target."""
        return {name: value > self.targets[name] for name, value in self.values.items()}

    @property
    def passed(self) -> bool:
        """Every metric is above its target."""
        return all(self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        """The report as plain Python values, ready for :func:`json.dumps`.

        The keys, stable across releases: ``n``, ``n_hidden``, ``confidence``,
        ``hidden_rate_interval`` (``[low, high]`` in percent), ``metrics`` (for
        each name of :data:`METRICS`, in that order, ``{"value", "target",
        "passed"}``) and ``passed``.
        """
        checks = self.checks
        return {
            "n": self.n,
            "n_hidden": self.n_hidden,
            "confidence": self.confidence,
            "hidden_rate_interval": [self.hidden_rate_low, self.hidden_rate_high],
            "metrics": {
                name: {"value": value, "target": self.targets[name], "passed": checks[name]}
                for name, value in self.values.items()
            },
            "evidence": None if self.evidence is None else self.evidence.to_dict(),
            "passed": self.passed,
            "provenance": dict(self.provenance),
        }

    def to_html(self, title: str = "Privacy report") -> str:
        """One self-contained HTML page: the metrics against their targets, and histograms
        of the local cloaking, the DCR and the NNDR as inline SVG (nothing is fetched).

        Parameters
        ----------
        title
            The page's title and heading (escaped).
        """
        checks = self.checks
        rows = "\n".join(
            f"<tr><td>{_LABELS[name]}</td><td>{_number(value)}</td>"
            f"<td>&gt; {_number(self.targets[name])}</td>"
            f'<td class="{"pass" if checks[name] else "fail"}">'
            f"{'pass' if checks[name] else 'FAIL'}</td></tr>"
            for name, value in self.values.items()
        )
        figures = "\n".join(
            _svg_histogram(
                getattr(self, name),
                *texts,
                target=self.targets[f"{name}_median"],
                limits=limits,
                discrete=name == "local_cloaking",
            )
            for name, texts, limits in _FIGURES
        )
        verdict = "passed" if self.passed else "failed"
        interval = (
            f"{_number(self.hidden_rate_low)} – {_number(self.hidden_rate_high)} % "
            f"({_number(100 * self.confidence)} % Wilson interval)"
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
figure {{ display: inline-block; margin: 0 1em 1em 0; }}
</style>
</head>
<body>
<h1>{heading}</h1>
<p>{self.n} records; {self.n_hidden} hidden; hidden rate {interval}.
Overall: <span class="{"pass" if self.passed else "fail"}">{verdict}</span>.</p>
<table>
<thead><tr><th>Metric</th><th>Value</th><th>Target</th><th>Result</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
{figures}
{_audit_html(self.evidence, self.provenance)}
</body>
</html>
"""


def check_targets(targets: Mapping[str, float] | None) -> Mapping[str, float]:
    """The default targets, with ``targets`` overriding some; unknown names are refused."""
    if targets is None:
        return DEFAULT_TARGETS
    if not isinstance(targets, Mapping):
        msg = f"`targets` must map metric names to numbers, got {type(targets).__name__}"
        raise TypeError(msg)
    unknown = sorted(str(name) for name in targets if name not in DEFAULT_TARGETS)
    if unknown:
        msg = f"unknown target {unknown[0]!r}; the metrics are {', '.join(METRICS)}"
        raise ValueError(msg)
    checked = {
        name: check_real(value, f"targets[{name!r}]", low=-np.inf)
        for name, value in targets.items()
    }
    return MappingProxyType({**DEFAULT_TARGETS, **checked})


def privacy_report(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    *,
    targets: Mapping[str, float] | None = None,
    confidence: float = 0.95,
    allow_unlinked: bool = False,
    by_row_order: bool = False,
    **options: Unpack[CountOptions],
) -> PrivacyReport:
    """Measure an anonymization with every metric of :data:`METRICS`, against targets.

    The coordinates are read once (the projection fitted once) for the local
    cloaking, the DCR and the NNDR; the direct matches read the raw features.

    Parameters
    ----------
    originals, avatars
        As for :func:`~polars_hidden_rate.local_cloaking`; LazyFrames are collected.
    targets
        Targets overriding :data:`DEFAULT_TARGETS`, by metric name; a metric
        passes when its value is strictly above its target.
    confidence
        The confidence level of the hidden rate's interval.
    allow_unlinked, by_row_order
        The verdict options of :func:`~polars_hidden_rate.gate.cloaking_summary`: a link
        that looks random, or a row-order link while both frames hold a key column, is
        refused unless they say otherwise.
    **options
        The keyword options of :class:`~polars_hidden_rate.CountOptions`. The
        raw features of the direct matches are ``features`` (default the columns
        both frames share, less the keys), also when ``coords`` are given. With
        ``cluster``, the counts and the distances both run on the Dask cluster;
        with ``device="gpu"``, the counts run on the GPU and the distances on
        this machine's CPU (they have no GPU path), with the same results.

    Returns
    -------
    PrivacyReport

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 1.0, 3.0, 4.0]})
    >>> avatars = pl.DataFrame({"Dim1": [0.5, 1.5, 3.0, 4.0]})
    >>> report = phr.privacy_report(originals, avatars, coords="Dim1")
    >>> report.hidden_rate, report.row_direct_match_protection, report.passed
    (25.0, 50.0, False)
    >>> report.to_dict()["metrics"]["distance_to_closest_median"]
    {'value': 0.25, 'target': 0.2, 'passed': True}
    """
    check_targets(targets)
    check_confidence(confidence)
    request = plan(originals, avatars, options, caller="privacy_report")
    verdict = Verdict.of({"allow_unlinked": allow_unlinked, "by_row_order": by_row_order})
    return report_of_plan(Inspector.start(request, verdict), targets=targets, confidence=confidence)


def report_of_plan(
    inspector: Inspector,
    *,
    targets: Mapping[str, float] | None = None,
    confidence: float = 0.95,
) -> PrivacyReport:
    """:func:`privacy_report` of a planned request, its evidence taken by ``inspector``."""
    checked_targets = check_targets(targets)
    level = check_confidence(confidence)
    request = inspector.request
    aligned = inspector.read()
    counts = request.counts(aligned)
    inspector.after(aligned, counts)
    found = nearest_originals(request, aligned)
    dcr, nndr = found.nearest, found.ratio
    link = request.link
    protection = row_direct_match_protection(
        request.originals,
        request.avatars,
        features=list(request.projection.features) if request.projection else None,
        left_on=list(link.left) or None,
        right_on=list(link.right) or None,
    )
    n, n_hidden = len(counts), int(np.count_nonzero(counts))
    low, high = hidden_rate_interval(n_hidden, n, level)
    return PrivacyReport(
        n=n,
        n_hidden=n_hidden,
        hidden_rate=100.0 * n_hidden / n,
        hidden_rate_low=low,
        hidden_rate_high=high,
        confidence=level,
        local_cloaking_median=float(np.median(counts)),
        distance_to_closest_median=float(np.median(dcr)),
        closest_distances_ratio_median=float(np.median(nndr)),
        row_direct_match_protection=protection,
        targets=checked_targets,
        local_cloaking=counts,
        distance_to_closest=dcr,
        closest_distances_ratio=nndr,
        evidence=inspector.evidence(),
    )


# The histograms' geometry, in SVG user units.
_WIDTH, _HEIGHT = 480, 280
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 32, 52
_BINS = 30


def _svg_histogram(
    values: npt.ArrayLike,
    title: str,
    x_label: str,
    y_label: str,
    *,
    target: float | None = None,
    limits: tuple[float, float] | None = None,
    discrete: bool = False,
) -> str:
    """A histogram as an inline ``<figure>`` holding one ``<svg>``, with title and axis labels.

    The x axis runs over ``limits`` (default from 0, or the smallest value when
    negative, to the 99th percentile or the target; values beyond count in the last bar), in
    bars of whole units when ``discrete``; a dashed line marks ``target`` when
    it falls in range. Every text is escaped.
    """
    data = np.asarray(values, dtype=np.float64)
    if limits is None:
        low = min(0.0, float(data.min(initial=0.0)))
        high = float(np.quantile(data, 0.99)) if data.size else low
        if high <= low:
            high = float(data.max(initial=low))
        if target is not None:
            high = max(high, target)  # the target line stays in view
    else:
        low, high = limits
    if discrete:
        width = max(1, math.ceil((high - low + 1) / _BINS))
        bins = math.ceil((high - low + 1) / width)
        edges = low - 0.5 + width * np.arange(bins + 1, dtype=np.float64)
        tick_values = np.unique(np.round(np.linspace(low, high, 5)))
    else:
        high = max(high, low + 1e-300)
        edges = np.linspace(low, high, _BINS + 1)
        tick_values = np.linspace(low, high, 5)
    start, stop = float(edges[0]), float(edges[-1])
    heights, _ = np.histogram(np.clip(data, start, stop), bins=edges)
    tallest = int(heights.max(initial=0)) or 1
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def x_at(value: float) -> float:
        return _LEFT + plot_w * (value - start) / (stop - start)

    def y_at(count: float) -> float:
        return _TOP + plot_h * (1.0 - count / tallest)

    bars = "".join(
        f'<rect x="{x_at(edges[b]):.1f}" y="{y_at(h):.1f}" '
        f'width="{max(x_at(edges[b + 1]) - x_at(edges[b]) - 1, 0.5):.1f}" '
        f'height="{_TOP + plot_h - y_at(h):.1f}" fill="#4c72b0"/>'
        for b, h in enumerate(heights.tolist())
    )
    ticks = "".join(
        f'<text x="{x_at(v):.1f}" y="{_TOP + plot_h + 16}" text-anchor="middle" '
        f'font-size="11">{_number(v)}</text>'
        for v in tick_values.tolist()
    ) + "".join(
        f'<text x="{_LEFT - 6}" y="{y_at(c) + 4:.1f}" text-anchor="end" font-size="11">{c}</text>'
        for c in (0, tallest)
    )
    marker = ""
    if target is not None and start <= target <= stop:
        x = x_at(target)
        marker = (
            f'<line x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_TOP + plot_h}" stroke="#cf222e" '
            f'stroke-dasharray="4 3"/><text x="{x + 4:.1f}" y="{_TOP + 12}" font-size="11" '
            f'fill="#cf222e">target {_number(target)}</text>'
        )
    title_text, x_text, y_text = (html.escape(t) for t in (title, x_label, y_label))
    axes = (
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_LEFT + plot_w}" y2="{_TOP + plot_h}" '
        f'stroke="#222"/><line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_h}" '
        'stroke="#222"/>'
    )
    return (
        f'<figure><svg width="{_WIDTH}" height="{_HEIGHT}" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img"><title>{title_text}</title>'
        f'<text x="{_WIDTH / 2}" y="18" text-anchor="middle" font-size="14" '
        f'font-weight="bold">{title_text}</text>{bars}{axes}{ticks}{marker}'
        f'<text x="{_LEFT + plot_w / 2}" y="{_HEIGHT - 10}" text-anchor="middle" '
        f'font-size="12">{x_text}</text>'
        f'<text x="14" y="{_TOP + plot_h / 2}" text-anchor="middle" font-size="12" '
        f'transform="rotate(-90 14 {_TOP + plot_h / 2})">{y_text}</text></svg></figure>'
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
            ("Own copies", f"{evidence.own_copies:,} ({evidence.own_copies_percent:.2f} %)"),
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
