"""The privacy report of a release: every metric once, against its target, as JSON or HTML.

[`privacy_report`][polars_hidden_rate.privacy_report] reads the coordinates once, counts the local
cloaking, finds each avatar's two nearest originals on one kd-tree, checks direct
copies on the raw features and, given the variables an attacker knows, measures the
correlation protection rate; [`PrivacyReport`][polars_hidden_rate.PrivacyReport] holds the values,
compares them with the targets, and renders them
([`PrivacyReport.to_dict`][polars_hidden_rate.PrivacyReport.to_dict],
[`PrivacyReport.to_html`][polars_hidden_rate.PrivacyReport.to_html]).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, NamedTuple, Unpack

import numpy as np
import numpy.typing as npt
import polars as pl

from polars_hidden_rate._types import CountArray, Float64Array
from polars_hidden_rate.checks import check_confidence, check_real, known, refuse_fraction
from polars_hidden_rate.frames import ColumnSpec, as_lazy
from polars_hidden_rate.measures.correlation import (
    CorrelationProtection,
    check_known,
    correlation_protection,
)
from polars_hidden_rate.measures.digits import decisive, exact
from polars_hidden_rate.measures.holdout import check_holdout
from polars_hidden_rate.measures.holdout_figures import HoldoutFigures, counts_and_figures
from polars_hidden_rate.measures.inference import DEFAULT_TOLERANCE, InferenceAttack, InferenceRisk
from polars_hidden_rate.measures.row_match import row_direct_match_protection
from polars_hidden_rate.measures.secrets import SecretKind
from polars_hidden_rate.measures.stats import percent
from polars_hidden_rate.measures.summary import hidden_rate_interval
from polars_hidden_rate.measures.verdict import (
    Evidence,
    Inspector,
    Verdict,
)
from polars_hidden_rate.plan import CountOptions, CountPlan, plan
from polars_hidden_rate.provenance import components_words

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
        "correlation_protection_rate": 95.0,
    }
)
"""A metric passes when its value is strictly above its target. The targets are those of the
method's service (Octopize's client, docs/metrics.md); ``correlation_protection_rate``'s
applies only when the report measures it (``known`` given)."""

NO_PUBLIC_DEFINITION = "not applicable: no public definition"
"""Why a metric of the service's table has no value here (docs/metrics.md)."""

UNDEFINED_METRICS: Mapping[str, float] = MappingProxyType(
    {"column_direct_match_protection": 50.0, "categorical_hidden_rate": 90.0}
)
"""The metrics of the service's release table whose definition is not public, and the
service's target of each: shown, never computed, never deciding
[`PrivacyReport.passed`][polars_hidden_rate.PrivacyReport.passed]."""

NOT_MEASURED = "not computed: give `known`, the variables an attacker knows (--known)"
"""Why a report has no correlation protection rate."""


class MetricLabels(NamedTuple):
    """How a metric is named: in the terminal (``hidden-rate report``) and on the page."""

    text: str
    page: str


LABELS: Mapping[str, MetricLabels] = MappingProxyType(
    {
        "hidden_rate": MetricLabels("hidden rate (%)", "Hidden rate (%)"),
        "local_cloaking_median": MetricLabels("median local cloaking", "Local cloaking, median"),
        "distance_to_closest_median": MetricLabels(
            "median DCR", "Distance to closest record (DCR), median"
        ),
        "closest_distances_ratio_median": MetricLabels(
            "median NNDR", "Nearest neighbour distance ratio (NNDR), median"
        ),
        "row_direct_match_protection": MetricLabels(
            "direct match protection (%)", "Row direct match protection (%)"
        ),
        "correlation_protection_rate": MetricLabels(
            "correlation protection (%)", "Correlation protection rate (%)"
        ),
        "column_direct_match_protection": MetricLabels(
            "column direct match prot. (%)", "Column direct match protection (%)"
        ),
        "categorical_hidden_rate": MetricLabels(
            "categorical hidden rate (%)", "Categorical hidden rate (%)"
        ),
    }
)
"""The name of each metric of [`METRICS`][polars_hidden_rate.report.METRICS], written once for both
renderings."""

# The metrics given in percent: a target in (0, 1] is a fraction given for a percentage.
_PERCENTAGES = ("hidden_rate", "row_direct_match_protection", "correlation_protection_rate")

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
        The target of each metric of [`METRICS`][polars_hidden_rate.report.METRICS], and of the
        correlation protection rate; it passes when strictly above.
    space
        The space the local cloaking and the distances were measured in: the
        projection, its components kept of those available (``"FAMD, 5 of 28
        components"``), or the coordinate columns given (``"coords Dim1, Dim2
        (2 columns)"``); empty when unknown.
    local_cloaking, distance_to_closest, closest_distances_ratio
        The per-record values (not compared, not in the dict): row ``i`` is the
        ``i``-th original as read, and the avatar linked to it.
    correlation_protection
        The correlation protection rate and its counts, when the report was given the
        variables an attacker knows (``known``); None otherwise.
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
    space: str = ""
    local_cloaking: CountArray = field(default_factory=_no_counts, repr=False, compare=False)
    distance_to_closest: Float64Array = field(default_factory=_no_values, repr=False, compare=False)
    closest_distances_ratio: Float64Array = field(
        default_factory=_no_values, repr=False, compare=False
    )
    evidence: Evidence | None = field(default=None, compare=False)
    provenance: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({}), compare=False
    )
    holdout: HoldoutFigures | None = field(default=None, compare=False)
    correlation_protection: CorrelationProtection | None = None

    def with_provenance(self, provenance: Mapping[str, Any]) -> PrivacyReport:
        """This report, stating what it measured (`polars_hidden_rate.provenance`)."""
        return replace(self, provenance=MappingProxyType(dict(provenance)))

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", check_targets(self.targets))

    @property
    def values(self) -> dict[str, float]:
        """The value of each metric of [`METRICS`][polars_hidden_rate.report.METRICS]."""
        return {name: float(getattr(self, name)) for name in METRICS}

    @property
    def checks(self) -> dict[str, bool]:
        """Whether each metric is strictly above its target."""
        return {name: value > self.targets[name] for name, value in self.values.items()}

    @property
    def release_checks(self) -> dict[str, bool]:
        """Whether each metric measured beside [`METRICS`][polars_hidden_rate.report.METRICS] is
        strictly above its target: the correlation protection rate, when measured."""
        if self.correlation_protection is None:
            return {}
        target = self.targets["correlation_protection_rate"]
        return {"correlation_protection_rate": self.correlation_protection.rate > target}

    @property
    def passed(self) -> bool:
        """Every metric measured is above its target: those of
        [`METRICS`][polars_hidden_rate.report.METRICS] and, when measured, the correlation
        protection rate. The metrics without a public definition never decide it."""
        return all(self.checks.values()) and all(self.release_checks.values())

    def release_table(self) -> dict[str, dict[str, Any]]:
        """The service's metrics beside [`METRICS`][polars_hidden_rate.report.METRICS]: for each,
        ``{"value", "target", "passed", "reason"}``, the value and verdict None (and the
        reason a sentence) where it is not computed; the correlation protection rate adds
        its counts (``known``, ``n``, ``unique``, ``singled_out``, ``hidden_rate``,
        ``tolerance``)."""
        target = self.targets["correlation_protection_rate"]
        measured = self.correlation_protection
        if measured is None:
            protection: dict[str, Any] = {
                "value": None,
                "target": target,
                "passed": None,
                "reason": NOT_MEASURED,
            }
        else:
            protection = {
                **measured.to_dict(),
                "target": target,
                "passed": self.release_checks["correlation_protection_rate"],
                "reason": None,
            }
        undefined = {
            name: {"value": None, "target": value, "passed": None, "reason": NO_PUBLIC_DEFINITION}
            for name, value in UNDEFINED_METRICS.items()
        }
        return {"correlation_protection_rate": protection, **undefined}

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
        ``categorical_hidden_rate`` (value None, with the reason, where not computed).
        """
        checks = self.checks
        return {
            "n": self.n,
            "n_hidden": self.n_hidden,
            "space": self.space,
            "confidence": self.confidence,
            "hidden_rate_interval": [self.hidden_rate_low, self.hidden_rate_high],
            "metrics": {
                name: {"value": value, "target": self.targets[name], "passed": checks[name]}
                for name, value in self.values.items()
            },
            "evidence": None if self.evidence is None else self.evidence.to_dict(),
            "holdout": None if self.holdout is None else self.holdout.to_dict(),
            "passed": self.passed,
            "provenance": dict(self.provenance),
            **self.release_table(),
        }

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
        checks = self.checks
        rows = "\n".join(
            f"<tr><td>{LABELS[name].page}</td>"
            f"<td>{html.escape(decisive(value, self.targets[name], 4))}</td>"
            f"<td>&gt; {html.escape(exact(self.targets[name]))}</td>"
            f'<td class="{"pass" if checks[name] else "fail"}">'
            f"{'pass' if checks[name] else 'FAIL'}</td></tr>"
            for name, value in self.values.items()
        )
        rows += "".join(
            f"\n{_release_row(name, entry)}" for name, entry in self.release_table().items()
        )
        figures = "\n".join(
            _svg_histogram(
                getattr(self, name),
                *texts,
                target=self.targets[f"{name}_median"],
                limits=limits,
                discrete=name == "local_cloaking",
                zero_bar=zero_bar,
                space=self.space,
            )
            for name, texts, limits, zero_bar in _FIGURES
        )
        space = f"\nMeasured in {html.escape(self.space)}." if self.space else ""
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
.na {{ color: #6e7781; }}
figure {{ display: inline-block; margin: 0 1em 1em 0; }}
</style>
</head>
<body>
<h1>{heading}</h1>
<p>{self.n:,} records; {self.n_hidden:,} hidden; hidden rate {interval}.{space}
Overall: <span class="{"pass" if self.passed else "fail"}">{verdict}</span>.</p>
<table>
<thead><tr><th>Metric</th><th>Value</th><th>Target</th><th>Result</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
{figures}
{"" if self.holdout is None else _table("Against the holdout", self.holdout.rows())}
{_audit_html(self.evidence, self.provenance)}
</body>
</html>
"""


def check_targets(
    targets: Mapping[str, float] | None, *, known: object = ...
) -> Mapping[str, float]:
    """The default targets, with ``targets`` overriding some; unknown names are refused, and
    so is a target for the correlation protection rate where ``known`` is None (given as
    None: a report that does not measure it would judge nothing against it)."""
    if targets is None:
        return DEFAULT_TARGETS
    if not isinstance(targets, Mapping):
        msg = f"`targets` must map metric names to numbers, got {type(targets).__name__}"
        raise TypeError(msg)
    unknown = sorted(str(name) for name in targets if name not in DEFAULT_TARGETS)
    if unknown:
        msg = f"unknown target {unknown[0]!r}; the metrics are {', '.join(DEFAULT_TARGETS)}"
        raise ValueError(msg)
    if known is None and "correlation_protection_rate" in targets:
        msg = (
            "a target for 'correlation_protection_rate' needs `known`, the variables an "
            "attacker knows (--known): without them the rate is not measured"
        )
        raise ValueError(msg)
    checked = {
        name: check_real(value, f"targets[{name!r}]", low=-np.inf)
        for name, value in targets.items()
    }
    for name in _PERCENTAGES:
        if name in checked:
            refuse_fraction(checked[name], f"targets[{name!r}]")
    return MappingProxyType({**DEFAULT_TARGETS, **checked})


def privacy_report(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    *,
    targets: Mapping[str, float] | None = None,
    confidence: float = 0.95,
    allow_unlinked: bool = False,
    by_row_order: bool = False,
    holdout: pl.DataFrame | pl.LazyFrame | None = None,
    known: ColumnSpec | None = None,
    secret: str | None = None,
    secret_kind: SecretKind = "auto",
    secret_tolerance: float = DEFAULT_TOLERANCE,
    **options: Unpack[CountOptions],
) -> PrivacyReport:
    """Measure an anonymization with every metric of [`METRICS`][polars_hidden_rate.report.METRICS],
    against targets.

    The coordinates are read once (the projection fitted once) for the local
    cloaking, the DCR and the NNDR; the direct matches read the raw features.

    Parameters
    ----------
    originals, avatars
        As for [`local_cloaking`][polars_hidden_rate.local_cloaking]; LazyFrames are collected.
    targets
        Targets overriding [`DEFAULT_TARGETS`][polars_hidden_rate.report.DEFAULT_TARGETS], by metric
        name; a metric passes when its value is strictly above its target.
    confidence
        The confidence level of the hidden rate's interval.
    allow_unlinked, by_row_order
        The verdict options of `cloaking_summary`: a link
        that looks random, or a row-order link while both frames hold a key column, is
        refused unless they say otherwise.
    holdout
        Real records of the same population that the generator never saw, with the
        originals' columns and types (refused otherwise, before anything is read): the
        report then adds the membership attack, the DCR overfitting protection and the
        holdout's own DCR and NNDR (`HoldoutFigures`),
        in the same space. They have no target and do not decide
        [`PrivacyReport.passed`][polars_hidden_rate.PrivacyReport.passed].
    known
        The variables an attacker knows (names or a selector, in both frames; checked
        before anything is counted): the report then measures the
        [`correlation_protection_rate`][polars_hidden_rate.correlation_protection_rate] with
        its hidden rate, and that rate's target decides
        [`PrivacyReport.passed`][polars_hidden_rate.PrivacyReport.passed] too.
    secret, secret_kind, secret_tolerance
        With a holdout and ``known``: the attribute inference attack of
        [`inference_risk`][polars_hidden_rate.inference_risk] on the column ``secret``
        (``secret_kind`` and ``secret_tolerance`` are its ``secret_kind`` and ``tolerance``),
        added to the holdout's figures (no target either). Its space is the known columns'
        own.
    **options
        The keyword options of [`CountOptions`][polars_hidden_rate.CountOptions]. The
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
    check_targets(targets, known=known)
    check_confidence(confidence)
    request = plan(originals, avatars, options, caller="privacy_report")
    known_names = None
    if known is not None:
        known_names = check_known(
            known, request.originals.collect_schema(), request.avatars.collect_schema()
        )
    attack = inference_attack(
        known_names, secret, secret_kind, secret_tolerance, holdout is not None
    )
    held_out = None
    if holdout is not None:
        held_out = as_lazy(holdout, "holdout")
        check_holdout(request.originals.collect_schema(), held_out.collect_schema())
        if attack is not None:
            attack.check(
                {
                    "originals": request.originals.collect_schema(),
                    "synthetic": request.avatars.collect_schema(),
                    "holdout": held_out.collect_schema(),
                }
            )
    verdict = Verdict.of({"allow_unlinked": allow_unlinked, "by_row_order": by_row_order})
    return report_of_plan(
        Inspector.start(request, verdict),
        targets=targets,
        confidence=confidence,
        holdout=held_out,
        known=known,
        inference=attack,
    )


def inference_attack(
    known: Sequence[str] | None,
    secret: str | None,
    secret_kind: SecretKind,
    tolerance: float,
    with_holdout: bool,
) -> InferenceAttack | None:
    """The report's attribute inference attack, checked (None without a ``secret``): it
    needs the ``known`` columns (resolved to names) and a holdout to control it."""
    if secret is None:
        if secret_kind != "auto" or tolerance != DEFAULT_TOLERANCE:
            msg = (
                "`secret_kind` and `secret_tolerance` set the attribute inference attack: give "
                "its `secret` (and `known`, and a holdout)"
            )
            raise ValueError(msg)
        return None
    if known is None:
        msg = "the attribute inference attack on `secret` needs the `known` columns too"
        raise ValueError(msg)
    if not with_holdout:
        msg = (
            "the attribute inference attack (`known`, `secret`) needs a holdout to control it: "
            "pass `holdout`"
        )
        raise ValueError(msg)
    return InferenceAttack.of(known, secret, secret_kind, tolerance)


def report_of_plan(
    inspector: Inspector,
    *,
    targets: Mapping[str, float] | None = None,
    confidence: float = 0.95,
    holdout: pl.LazyFrame | None = None,
    known: ColumnSpec | None = None,
    inference: InferenceAttack | None = None,
) -> PrivacyReport:
    """[`privacy_report`][polars_hidden_rate.privacy_report] of a planned request, its evidence
    taken by ``inspector``; ``holdout`` checked beforehand (`check_holdout`), and the
    ``inference`` attack (`inference_attack`) run on it."""
    checked_targets = check_targets(targets, known=known)
    level = check_confidence(confidence)
    known_names = None
    if known is not None:
        schemas = (inspector.request.originals, inspector.request.avatars)
        known_names = check_known(known, *(frame.collect_schema() for frame in schemas))
    request, space = _with_space(inspector.request)
    if request is not inspector.request:  # fitted here: the caller's inspector learns nothing
        inspector = replace(inspector, request=request)
    # The attack first: its reads can refuse values (a secret of text that holds numbers)
    # before the longer count runs.
    attacked = None
    if holdout is not None and inference is not None:
        attacked = _attack(inference, request, holdout, level)
    aligned = inspector.read()
    figures = None
    if holdout is None:  # the read's arrays are needed by nothing else: taken in place
        counts, found = request.counts_and_nearest_two(inspector, aligned)
    else:
        held_out = request.coordinates_of(holdout, "holdout")
        if request.cluster is None:
            # The avatars' walk through the originals' tree also gives the DCR overfitting's
            # distances to the training records: walked once, in one scale for all three,
            # the count's tree of the avatars walked again.
            counts, found, figures = counts_and_figures(
                request, inspector, aligned, held_out, confidence=level
            )
        else:
            counts = request.counts_for(inspector, aligned)
            found = request.nearest_two(aligned)
            figures = HoldoutFigures.of_arrays(
                aligned.originals,
                aligned.avatars,
                held_out,
                threads=request.threads,
                confidence=level,
            )
    # The read's arrays (taken in place) and the scaled distances are let go before the
    # direct-match pass reads the frames again: at 1e8 records they are 100 bytes each.
    del aligned
    dcr, nndr = found.nearest, found.ratio
    del found
    if figures is not None:
        figures = replace(figures, inference=attacked)
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
    linkable = None
    if known_names is not None:
        linkable = correlation_protection(
            request.originals, request.avatars, known_names, hidden_rate=percent(n_hidden, n)
        )
    return PrivacyReport(
        n=n,
        n_hidden=n_hidden,
        hidden_rate=percent(n_hidden, n),
        hidden_rate_low=low,
        hidden_rate_high=high,
        confidence=level,
        local_cloaking_median=float(np.median(counts)),
        distance_to_closest_median=float(np.median(dcr)),
        closest_distances_ratio_median=float(np.median(nndr)),
        row_direct_match_protection=protection,
        targets=checked_targets,
        space=space,
        local_cloaking=counts,
        distance_to_closest=dcr,
        closest_distances_ratio=nndr,
        evidence=inspector.evidence(),
        holdout=figures,
        correlation_protection=linkable,
    )


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


def _attack(
    attack: InferenceAttack, request: CountPlan, holdout: pl.LazyFrame, confidence: float
) -> InferenceRisk:
    """The attack on the report's sets, the known columns taken as the report's projection
    takes them (categorical or not, gaps filled or not)."""
    options: CountOptions = {"threads": request.threads, "tie_tol": request.tie_tol}
    projection = request.projection
    if projection is not None:
        fit = known(projection.fitted, "the fit of the report's projection (fitted first)")
        # The fit's categories, whichever rule chose them (by type, named, or "auto").
        chosen = {f.name for f in fit.scaling.categorical}
        forced = [name for name in attack.known if name in chosen]
        if forced:
            options["categorical"] = forced
        options["impute"] = projection.spec.impute
    return attack.run(request.originals, request.avatars, holdout, confidence=confidence, **options)


def _with_space(request: CountPlan) -> tuple[CountPlan, str]:
    """The request, its projection fitted (once: the read uses that fit), and the words for
    its space: ``"FAMD, 5 of 47 components (the originals span 28)"``, ``"PCA, 3 of 3
    components"``, or ``"coords Dim1, Dim2 (2 columns)"``."""
    if request.projection is None:
        columns = len(request.coords)
        return request, f"coords {', '.join(request.coords)} ({_plural(columns, 'column')})"
    request = request.fitted()
    fitted = known(known(request.projection, "a projection").fitted, "the projection's fit")
    words = components_words(fitted.ncp, fitted.max_ncp, fitted.n_components)
    return request, f"{fitted.model}, {words}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


# The histograms' geometry, in SVG user units.
_WIDTH, _HEIGHT = 480, 290
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 28, 48, 52
_BINS = 30
_TICKS = 6  # x ticks at most, about
_GAP = 0.6  # between a bar of its own and the ranged bars, in bar widths
_SUBTITLE_CHARS = 76
_TICK_ROOM = 30  # no tick closer than this to the label of a bar of its own


@dataclass(frozen=True)
class _Bar:
    """One bar: the values in ``[low, high]`` (a bar of its own: 0, or past the range)."""

    low: float
    high: float
    count: int
    left: float  # where it starts, in bar widths from the plot's left edge
    label: str | None = None  # below the axis, for a bar of its own


def _svg_histogram(
    values: npt.ArrayLike,
    title: str,
    x_label: str,
    y_label: str,
    *,
    target: float | None = None,
    limits: tuple[float, float] | None = None,
    discrete: bool = False,
    zero_bar: bool = False,
    space: str = "",
) -> str:
    """A histogram as an inline ``<figure>`` holding one ``<svg>``, with title and axis labels.

    The ranged bars run over ``limits`` (default from 0, or the smallest value when
    negative, to the 99th percentile or the target), in bins of 1, 2 or 5 times a power of
    ten (whole units when ``discrete``); the values past them have a bar of their own,
    labelled ``> edge`` and with its count. With ``zero_bar``, so do the values equal to 0
    (left of the range). The ticks are round numbers and every count has thousands
    separators; a dashed line marks ``target``; ``space`` is the subtitle. Every text is
    escaped, and each bar carries ``data-low``, ``data-high`` and ``data-count``.
    """
    data = np.asarray(values, dtype=np.float64)
    zeros = int(np.count_nonzero(data == 0.0)) if zero_bar else 0
    ranged = data[data != 0.0] if zero_bar else data
    if limits is None:
        low = min(0.0, float(data.min(initial=0.0)))
        high = float(np.quantile(data, 0.99)) if data.size else low
        if high <= low:
            high = float(data.max(initial=low))
        if target is not None:
            high = max(high, target)  # the target line stays in view
    else:
        low, high = limits
    if high <= low:  # every value at the lowest: one unit, to draw something
        high = low + 1.0
    if discrete:
        first = 1.0 if zero_bar else float(math.floor(low))
        values_wanted = math.ceil(high) - first + 1
        width = max(1.0, _round_step(values_wanted / _BINS)[0])
        bins = max(1, math.ceil(values_wanted / width))
        edges = first - 0.5 + width * np.arange(bins + 1, dtype=np.float64)
        shown = (first, float(edges[-1] - 0.5))  # the first and last values the bars hold
    else:
        step, _ = _round_step((high - low) / _BINS)
        k_low, k_high = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
        edges = step * np.arange(k_low, max(k_high, k_low + 1) + 1, dtype=np.float64)
        shown = (float(edges[0]), float(edges[-1]))
    start, stop = float(edges[0]), float(edges[-1])
    beyond = int(np.count_nonzero(ranged > stop))
    heights, _ = np.histogram(np.clip(ranged[ranged <= stop], start, None), bins=edges)

    spacing = (shown[1] - shown[0]) / _TICKS
    tick_step, exponent = _round_step(max(spacing, 1.0) if discrete else spacing)
    decimals = max(0, -exponent)
    bars = []
    left = 0.0
    if zero_bar:
        bars.append(_Bar(0.0, 0.0, zeros, left, "0"))
        left += 1.0 + _GAP
    region = left
    bars.extend(
        _Bar(float(edges[b]), float(edges[b + 1]), int(h), region + b)
        for b, h in enumerate(heights.tolist())
    )
    if beyond:
        last = _tick_text(shown[1], 0 if discrete else decimals)
        bars.append(_Bar(stop, math.inf, beyond, region + len(heights) + _GAP, f"> {last}"))
    units = bars[-1].left + 1.0
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    unit = plot_w / units
    tallest = max([bar.count for bar in bars] + [1])
    y_step = max(1, int(_round_step(tallest / 4)[0]))
    y_top = math.ceil(tallest / y_step) * y_step

    def x_at(value: float) -> float:
        """Where a value of the ranged bars lies."""
        return _LEFT + unit * (region + len(heights) * (value - start) / (stop - start))

    def y_at(count: float) -> float:
        return _TOP + plot_h * (1.0 - count / y_top)

    rects = "".join(
        f'<rect class="bar" x="{_LEFT + unit * bar.left:.1f}" y="{y_at(bar.count):.1f}" '
        f'width="{max(unit - 1, 0.5):.1f}" height="{_TOP + plot_h - y_at(bar.count):.1f}" '
        f'fill="{"#4c72b0" if bar.label is None else "#8172b3"}" data-low="{bar.low!r}" '
        f'data-high="{bar.high!r}" data-count="{bar.count}"/>'
        for bar in bars
    )
    own = "".join(
        f'<text x="{_LEFT + unit * (bar.left + 0.5):.1f}" y="{y_at(bar.count) - 4:.1f}" '
        f'text-anchor="middle" font-size="10">{bar.count:,}</text>'
        f'<text x="{_LEFT + unit * (bar.left + 0.5):.1f}" y="{_TOP + plot_h + 16}" '
        f'text-anchor="middle" font-size="11">{html.escape(bar.label)}</text>'
        for bar in bars
        if bar.label is not None
    )
    first_tick = math.ceil(shown[0] / tick_step - 1e-9)
    last_tick = math.floor(shown[1] / tick_step + 1e-9)
    tick_values = [k * tick_step + 0.0 for k in range(first_tick, last_tick + 1)]
    labelled = [_LEFT + unit * (bar.left + 0.5) for bar in bars if bar.label is not None]
    ticks = "".join(
        f'<text x="{x_at(v):.1f}" y="{_TOP + plot_h + 16}" text-anchor="middle" '
        f'font-size="11">{_tick_text(v, decimals)}</text>'
        for v in tick_values
        # 0 and the rest have their bars, labelled there
        if all(abs(x_at(v) - x) > _TICK_ROOM for x in labelled)
    ) + "".join(
        f'<text x="{_LEFT - 6}" y="{y_at(c) + 4:.1f}" text-anchor="end" font-size="11">{c:,}</text>'
        for c in range(0, y_top + 1, y_step)
    )
    marker = ""
    at = None
    if target is not None and start <= target <= stop:
        at = x_at(target)
    elif target is not None and zero_bar and 0.0 <= target < start:
        at = _LEFT + unit * (region - _GAP / 2)  # between the bar of 0 and the others
    if target is not None and at is not None:
        right = at > _LEFT + 0.75 * plot_w  # the label left of the line, to stay in view
        marker = (
            f'<line class="target" x1="{at:.1f}" y1="{_TOP}" x2="{at:.1f}" y2="{_TOP + plot_h}" '
            f'stroke="#cf222e" stroke-dasharray="4 3"/><text x="{at - 4 if right else at + 4:.1f}" '
            f'y="{_TOP + 12}" text-anchor="{"end" if right else "start"}" font-size="11" '
            f'fill="#cf222e">target {html.escape(exact(target))}</text>'
        )
    name = f"{title} — {space}" if space else title
    title_text, name_text, x_text, y_text = (
        html.escape(t) for t in (title, name, x_label, y_label)
    )
    subtitle = ""
    if space:
        shortened = space if len(space) <= _SUBTITLE_CHARS else space[: _SUBTITLE_CHARS - 1] + "…"
        subtitle = (
            f'<text x="{_WIDTH / 2}" y="34" text-anchor="middle" font-size="11">'
            f"{html.escape(shortened)}</text>"
        )
    axes = (
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_LEFT + plot_w}" y2="{_TOP + plot_h}" '
        f'stroke="#222"/><line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_h}" '
        'stroke="#222"/>'
    )
    return (
        f'<figure><svg width="{_WIDTH}" height="{_HEIGHT}" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img"><title>{name_text}</title>'
        f'<text x="{_WIDTH / 2}" y="18" text-anchor="middle" font-size="14" '
        f'font-weight="bold">{title_text}</text>{subtitle}{rects}{axes}{ticks}{own}{marker}'
        f'<text x="{_LEFT + plot_w / 2}" y="{_HEIGHT - 10}" text-anchor="middle" '
        f'font-size="12">{x_text}</text>'
        f'<text x="14" y="{_TOP + plot_h / 2}" text-anchor="middle" font-size="12" '
        f'transform="rotate(-90 14 {_TOP + plot_h / 2})">{y_text}</text></svg></figure>'
    )


def _round_step(at_least: float) -> tuple[float, int]:
    """The smallest of 1, 2 or 5 times ``10^e`` at or above ``at_least`` (> 0), and ``e``."""
    exponent = math.floor(math.log10(at_least))
    for mantissa in (1, 2, 5):
        step = mantissa * 10.0**exponent
        if step >= at_least * (1 - 1e-12):
            return step, exponent
    return 10.0 ** (exponent + 1), exponent + 1


def _tick_text(value: float, decimals: int) -> str:
    """A round value with thousands separators: ``10,000``, ``0.25``."""
    return f"{value:,.{decimals}f}"


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
