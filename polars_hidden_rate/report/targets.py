"""The metrics a report checks and their targets: the names, the defaults, the labels, and
the check of targets given."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from polars_hidden_rate.checks import check_real, refuse_fraction
from polars_hidden_rate.report.section import Direction

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
        "singling_out_risk": "<=",
    }
)
"""The measures against a holdout, and how each meets its target. Each that the report runs
is judged by default (`DEFAULT_HOLDOUT_TARGETS`) on its point estimate, and decides
[`PrivacyReport.passed`][polars_hidden_rate.PrivacyReport.passed] too, unless its holdout is
too small to judge it (`PrivacyReport.not_judged`) or its target is turned off (``None``:
the figure is then evidence). A target given explicitly needs its measure: a holdout, and
for the inference risk the attack (``known`` and ``secret``)."""

DEFAULT_HOLDOUT_TARGETS: Mapping[str, float] = MappingProxyType(
    {
        "membership_auc": 0.55,
        "dcr_overfitting_protection": 0.95,
        "inference_risk": 0.09,
        "linkability_risk": 0.09,
        "singling_out_risk": 0.09,
    }
)
"""The default target of each measure of `HOLDOUT_METRICS`, judged wherever the measure
runs (docs/metrics.md gives the source or the reasoning of each)."""

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

REFERENCE_METRICS = (
    "distance_to_closest_median",
    "closest_distances_ratio_median",
    "row_direct_match_protection",
)
"""The metrics a holdout has a figure of its own for, against the originals (the Avatar
paper's "Reference": what real records the generator never saw score). Where that figure
fails the target, the release is judged against it instead: at least as protective as those
records (``>=``)."""

TARGET_OFF = "not judged: its target is off (evidence)"
"""Why a metric whose target was turned off (``None``) has no verdict."""

NO_HOLDOUT = (
    "none: distances alone do not show that a release is safe; add real records the "
    "generator never saw as a holdout (--holdout FILE; holdout= in Python) to judge the "
    "membership attack and the DCR overfitting protection"
)
"""The verdict's line without a holdout (text, page and JSON's ``holdout_note``)."""

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
        "singling_out_risk": MetricLabels("singling-out risk", "Singling-out risk"),
    }
)
"""The name of each metric of [`METRICS`][polars_hidden_rate.report.METRICS], written once for both
renderings."""

# The metrics given in percent: a target in (0, 1] is a fraction given for a percentage.
_PERCENTAGES = ("hidden_rate", "row_direct_match_protection", "correlation_protection_rate")


class UnmeasuredTargetError(ValueError):
    """A target for a measure the report would not run, so that nothing would be judged
    against it: ``target`` names the metric, ``needs`` the keywords its measure lacks."""

    def __init__(self, target: str, needs: tuple[str, ...]) -> None:
        self.target, self.needs = target, needs
        named = [f"`{keyword}`" for keyword in needs]
        missing = " and ".join(filter(None, (", ".join(named[:-1]), named[-1])))
        # Backquoted, as the keywords: the command line says `--target NAME` (`in_flags`).
        super().__init__(
            f"`targets[{target!r}]` needs {missing}, or {_NEEDS[target][0]} is not run and "
            "nothing would be judged against the target"
        )


# What each measure with a target needs beyond the two frames, in the order the keywords
# are named: a target whose measure would not run is refused.
_NEEDS: Mapping[str, tuple[str, tuple[str, ...]]] = MappingProxyType(
    {
        "correlation_protection_rate": ("the correlation protection rate", ("known",)),
        "membership_auc": ("the membership attack", ("holdout",)),
        "dcr_overfitting_protection": ("the DCR overfitting protection", ("holdout",)),
        "inference_risk": ("the attribute inference attack", ("holdout", "known", "secret")),
        "linkability_risk": ("the linkability attack", ("holdout", "aux_cols")),
        "singling_out_risk": ("the singling-out attack", ("holdout", "singling_out")),
    }
)


Targets = Mapping[str, float | None]
"""A report's targets by metric name; None: the metric's target is off (shown, not judged)."""


def check_targets(
    targets: Mapping[str, float | None] | None,
    *,
    known: object = ...,
    holdout: object = ...,
    secret: object = ...,
    aux_cols: object = ...,
    singling_out: object = ...,
) -> Targets:
    """The default targets (`DEFAULT_TARGETS`, `DEFAULT_HOLDOUT_TARGETS`), with ``targets``
    overriding some, or turning them off (``None``); unknown names are refused, and so is a
    target for a measure the report would not run (`UnmeasuredTargetError`): the
    correlation protection rate without ``known``, a holdout's measure without ``holdout``,
    the inference risk without ``known`` and ``secret``, the linkability risk without
    ``aux_cols``, the singling-out risk without ``singling_out``. A keyword given as None is
    missing; one left out (``...``) is not checked. A default target whose measure does not
    run judges nothing."""
    defaults = {**DEFAULT_TARGETS, **DEFAULT_HOLDOUT_TARGETS}
    if targets is None:
        return MappingProxyType(defaults)
    if not isinstance(targets, Mapping):
        msg = f"`targets` must map metric names to numbers, got {type(targets).__name__}"
        raise TypeError(msg)
    names = (*DEFAULT_TARGETS, *HOLDOUT_METRICS)
    unknown = sorted(str(name) for name in targets if name not in names)
    if unknown:
        msg = f"unknown target {unknown[0]!r}; the metrics are {', '.join(names)}"
        raise ValueError(msg)
    given = {
        "known": known,
        "holdout": holdout,
        "secret": secret,
        "aux_cols": aux_cols,
        "singling_out": singling_out,
    }
    for name in names:  # in the metrics' order, whatever the mapping's
        # A target turned off judges nothing: it needs no measure.
        if targets.get(name) is not None and name in _NEEDS:
            missing = tuple(keyword for keyword in _NEEDS[name][1] if given[keyword] is None)
            if missing:
                raise UnmeasuredTargetError(name, missing)
    checked = {
        name: None if value is None else check_real(value, f"targets[{name!r}]", low=-np.inf)
        for name, value in targets.items()
    }
    for name in _PERCENTAGES:
        value = checked.get(name)
        if value is not None:
            refuse_fraction(value, f"targets[{name!r}]")
    return MappingProxyType({**defaults, **checked})
