"""The metrics a report checks and their targets: the names, the defaults, the labels, and
the check of targets given."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from polars_hidden_rate.checks import check_real, refuse_fraction

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
