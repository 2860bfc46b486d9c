"""The privacy report of a release (moved into a package: `model` for now)."""

from polars_hidden_rate.report.model import (
    DEFAULT_TARGETS,
    LABELS,
    METRICS,
    NO_PUBLIC_DEFINITION,
    NOT_MEASURED,
    UNDEFINED_METRICS,
    MetricLabels,
    PrivacyReport,
    _svg_histogram,
    check_targets,
    inference_attack,
    privacy_report,
    report_of_plan,
)

__all__ = [
    "DEFAULT_TARGETS",
    "LABELS",
    "METRICS",
    "NO_PUBLIC_DEFINITION",
    "NOT_MEASURED",
    "UNDEFINED_METRICS",
    "MetricLabels",
    "PrivacyReport",
    "_svg_histogram",
    "check_targets",
    "inference_attack",
    "privacy_report",
    "report_of_plan",
]
