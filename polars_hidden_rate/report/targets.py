"""The metrics a report checks and their targets: the names, the defaults, the labels, and
the check of targets given."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from polars_hidden_rate.checks import check_real, refuse_fraction
from polars_hidden_rate.measures.section import Direction

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

HOLDOUT_METRICS: Mapping[str, Direction] = MappingProxyType(
    {
        "membership_auc": "<=",
        "dcr_overfitting_protection": ">=",
        "inference_risk": "<=",
        "linkability_risk": "<=",
    }
)
"""The measures against a holdout that a target can judge, and how each meets it. They have
no default: without a target each is evidence (shown with what it means, never judged); with
one (``--target membership_auc=0.55``) it decides
[`PrivacyReport.passed`][polars_hidden_rate.PrivacyReport.passed] too. A target needs its
measure: a holdout, and for the inference risk the attack (``known`` and ``secret``)."""

DIRECTIONS: Mapping[str, Direction] = MappingProxyType(
    {**dict.fromkeys(DEFAULT_TARGETS, ">"), **HOLDOUT_METRICS, "own_copies_percent": "<="}
)
"""How each metric with a target meets it; the own copies against ``max_own_copies``."""


def meets(name: str, value: float, target: float) -> bool:
    """Whether ``value`` of the metric ``name`` meets ``target`` in its direction
    (`DIRECTIONS`)."""
    direction = DIRECTIONS[name]
    if direction == "<=":
        return value <= target
    if direction == ">=":
        return value >= target
    return value > target


LINKED_METRICS = frozenset({"hidden_rate", "local_cloaking_median", "correlation_protection_rate"})
"""The metrics that need a one-avatar-per-original link (the correlation protection rate
through the hidden rate it is given); the own copies need it too. The others (the DCR, the
NNDR, the row direct match protection, the measures against a holdout) judge any synthetic
set."""

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
        "own_copies_percent": MetricLabels("own copies (%)", "Own copies (%)"),
        "membership_auc": MetricLabels("membership AUC", "Membership AUC"),
        "dcr_overfitting_protection": MetricLabels(
            "DCR overfitting protection", "DCR overfitting protection"
        ),
        "inference_risk": MetricLabels("inference risk", "Inference risk"),
        "linkability_risk": MetricLabels("linkability risk", "Linkability risk"),
    }
)
"""The name of each metric of [`METRICS`][polars_hidden_rate.report.METRICS], written once for both
renderings."""

# The metrics given in percent: a target in (0, 1] is a fraction given for a percentage.
_PERCENTAGES = ("hidden_rate", "row_direct_match_protection", "correlation_protection_rate")


def check_targets(
    targets: Mapping[str, float] | None,
    *,
    known: object = ...,
    holdout: object = ...,
    secret: object = ...,
) -> Mapping[str, float]:
    """The default targets, with ``targets`` overriding some and adding those of
    `HOLDOUT_METRICS`; unknown names are refused, and so is a target for a measure the report
    would not take (given as None: a report that does not measure it would judge nothing
    against it): the correlation protection rate without ``known``, a holdout's measure
    without ``holdout``, the inference risk without ``secret``."""
    if targets is None:
        return DEFAULT_TARGETS
    if not isinstance(targets, Mapping):
        msg = f"`targets` must map metric names to numbers, got {type(targets).__name__}"
        raise TypeError(msg)
    names = (*DEFAULT_TARGETS, *HOLDOUT_METRICS)
    unknown = sorted(str(name) for name in targets if name not in names)
    if unknown:
        msg = f"unknown target {unknown[0]!r}; the metrics are {', '.join(names)}"
        raise ValueError(msg)
    if known is None and "correlation_protection_rate" in targets:
        msg = (
            "a target for 'correlation_protection_rate' needs `known`, the variables an "
            "attacker knows: without them the rate is not measured"
        )
        raise ValueError(msg)
    against = sorted(name for name in targets if name in HOLDOUT_METRICS)
    if holdout is None and against:
        msg = (
            f"a target for {against[0]!r} needs a holdout (--holdout FILE, holdout=): "
            "without one it is not measured"
        )
        raise ValueError(msg)
    if secret is None and "inference_risk" in targets:
        msg = (
            "a target for 'inference_risk' needs the attribute inference attack: give "
            "`known` and `secret` (--known, --secret) with the holdout"
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
