"""One import path per job: the modules that moved left no shim behind, and the package's
own names are the very objects of the modules that define them."""

from __future__ import annotations

import importlib

import pytest

# Paths of 0.1.0's first drafts: each job has its one module now (docs/api.md).
REMOVED = [
    "polars_hidden_rate.neighbours",
    "polars_hidden_rate.distributed",
    "polars_hidden_rate.linkage",
    "polars_hidden_rate.metrics",
    "polars_hidden_rate.holdout",
    "polars_hidden_rate.membership",
    "polars_hidden_rate.inference",
    "polars_hidden_rate.verdict",
    "polars_hidden_rate.summary",
    "polars_hidden_rate.digits",
    "polars_hidden_rate.measures.stats",
    "polars_hidden_rate.measures.section",
    "polars_hidden_rate.cluster_data",
    "polars_hidden_rate.dataset",
    "polars_hidden_rate.cluster.dataset",
    "polars_hidden_rate.cohort",
    "polars_hidden_rate.plots",
    "polars_hidden_rate.measures.verdict",
    "polars_hidden_rate.measures.link_test",
]


@pytest.mark.parametrize("old", REMOVED)
def test_a_moved_module_leaves_no_second_path(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_package_exports_the_defining_modules_objects() -> None:
    import polars_hidden_rate as phr
    from polars_hidden_rate import engine
    from polars_hidden_rate.measures import correlation, inference, membership, overfitting

    assert phr.count_cloaking is engine.count_cloaking
    assert phr.membership_risk is membership.membership_risk
    assert phr.inference_risk is inference.inference_risk
    assert phr.dcr_overfitting_protection is overfitting.dcr_overfitting_protection
    assert phr.correlation_protection_rate is correlation.correlation_protection_rate
