"""Exact hidden rate and local cloaking of avatar anonymizations, for Polars.

Importing the package registers the ``avatar`` namespace on DataFrame and LazyFrame.
"""

from polars_hidden_rate import namespace as _namespace  # noqa: F401  (registers `avatar`)
from polars_hidden_rate.api import hidden_rate, local_cloaking
from polars_hidden_rate.avatarize import avatarize
from polars_hidden_rate.engine import count_cloaking
from polars_hidden_rate.gate import HiddenRateTooLowError, OwnCopiesError, assert_hidden_rate
from polars_hidden_rate.link.errors import (
    AmbiguousLinkError,
    SortedLinkError,
    UnlinkedAvatarsError,
)
from polars_hidden_rate.measures.baseline import DcrBaseline, dcr_baseline_protection
from polars_hidden_rate.measures.correlation import correlation_protection_rate
from polars_hidden_rate.measures.distances import closest_distances_ratio, distance_to_closest
from polars_hidden_rate.measures.inference import InferenceRisk, inference_risk
from polars_hidden_rate.measures.linkability import LinkabilityRisk, linkability_risk
from polars_hidden_rate.measures.membership import MembershipRisk, membership_risk
from polars_hidden_rate.measures.overfitting import dcr_overfitting_protection
from polars_hidden_rate.measures.row_match import row_direct_match_protection
from polars_hidden_rate.measures.singling_out import SinglingOutRisk, singling_out_risk
from polars_hidden_rate.measures.summary import hidden_rate_interval
from polars_hidden_rate.plan import CountOptions
from polars_hidden_rate.projection import Projection
from polars_hidden_rate.report import PrivacyReport, UnmeasuredTargetError, privacy_report
from polars_hidden_rate.to_parquet import local_cloaking_to_parquet

__all__ = [
    "AmbiguousLinkError",
    "CountOptions",
    "DcrBaseline",
    "HiddenRateTooLowError",
    "InferenceRisk",
    "LinkabilityRisk",
    "MembershipRisk",
    "OwnCopiesError",
    "PrivacyReport",
    "Projection",
    "SinglingOutRisk",
    "SortedLinkError",
    "UnlinkedAvatarsError",
    "UnmeasuredTargetError",
    "assert_hidden_rate",
    "avatarize",
    "closest_distances_ratio",
    "correlation_protection_rate",
    "count_cloaking",
    "dcr_baseline_protection",
    "dcr_overfitting_protection",
    "distance_to_closest",
    "hidden_rate",
    "hidden_rate_interval",
    "inference_risk",
    "linkability_risk",
    "local_cloaking",
    "local_cloaking_to_parquet",
    "membership_risk",
    "privacy_report",
    "row_direct_match_protection",
    "singling_out_risk",
]
__version__ = "0.1.0"
