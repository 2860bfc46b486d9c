"""The privacy report of a release: every metric once, against its target, as JSON or HTML.

[`privacy_report`][polars_hidden_rate.privacy_report] reads the coordinates once, counts the local
cloaking, finds each avatar's two nearest originals on one kd-tree, checks direct
copies on the raw features and, given the variables an attacker knows, measures the
correlation protection rate; [`PrivacyReport`][polars_hidden_rate.PrivacyReport] holds the values,
compares them with the targets, and renders them
([`PrivacyReport.to_dict`][polars_hidden_rate.PrivacyReport.to_dict],
[`PrivacyReport.to_html`][polars_hidden_rate.PrivacyReport.to_html]).

The package, one job a module, from the top: `run` (`privacy_report`, `report_of_plan`: the
pre-checks and the measures, each once); `rendered` (`PrivacyReport`: the value with its
JSON, page and text); `page` (the HTML page) and `text` (the terminal's lines); `sections`
(every section of a report, built there and only there, and `SECTIONS`, the one list that
registers them); `audit` (the sections of the evidence and of what was measured, which
`hidden-rate check` prints too) and `model` (`ReportModel`: the values and their verdicts,
data only); `targets` (the metrics, their targets and labels) and `svg` (the page's
histograms); `section` (`Section`, `Row`, `Histogram`: a section as plain data). The JSON,
the page and the text render the sections and nothing else.
"""

from polars_hidden_rate.report.rendered import PrivacyReport
from polars_hidden_rate.report.run import (
    baseline_of,
    check_holdout_and_attack,
    inference_attack,
    linkability_attack,
    privacy_report,
    report_of_plan,
    singling_out_attack,
)
from polars_hidden_rate.report.targets import (
    DEFAULT_HOLDOUT_TARGETS,
    DEFAULT_TARGETS,
    DIRECTIONS,
    HOLDOUT_METRICS,
    LABELS,
    LINKED_METRICS,
    METRICS,
    NO_HOLDOUT,
    NO_PUBLIC_DEFINITION,
    NOT_MEASURED,
    REFERENCE_METRICS,
    UNDEFINED_METRICS,
    MetricLabels,
    UnmeasuredTargetError,
    check_targets,
    meets,
)

__all__ = [
    "DEFAULT_HOLDOUT_TARGETS",
    "DEFAULT_TARGETS",
    "DIRECTIONS",
    "HOLDOUT_METRICS",
    "LABELS",
    "LINKED_METRICS",
    "METRICS",
    "NOT_MEASURED",
    "NO_HOLDOUT",
    "NO_PUBLIC_DEFINITION",
    "REFERENCE_METRICS",
    "UNDEFINED_METRICS",
    "MetricLabels",
    "PrivacyReport",
    "UnmeasuredTargetError",
    "baseline_of",
    "check_holdout_and_attack",
    "check_targets",
    "inference_attack",
    "linkability_attack",
    "meets",
    "privacy_report",
    "report_of_plan",
    "singling_out_attack",
]
