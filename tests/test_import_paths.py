"""The import paths the docs give keep working after the engine and cluster moved into
packages: each old module re-exports the very objects of their new homes."""

from __future__ import annotations

import importlib

import pytest

MOVED = {
    "polars_hidden_rate.neighbours": {
        "nearest_two": "polars_hidden_rate.engine.nearest",
        "NearestTwo": "polars_hidden_rate.engine.nearest",
        "canonical_scale": "polars_hidden_rate.engine.scale",
    },
    "polars_hidden_rate.distributed": {
        "count_cloaking_distributed": "polars_hidden_rate.cluster.arrays",
        "nearest_two_distributed": "polars_hidden_rate.cluster.arrays",
        "Sizing": "polars_hidden_rate.cluster.shards",
        "size_tasks": "polars_hidden_rate.cluster.shards",
        "pairs_within_reach": "polars_hidden_rate.cluster.shards",
        "require_client": "polars_hidden_rate.tasks",
        "worker_specs": "polars_hidden_rate.tasks",
        "WorkerSpec": "polars_hidden_rate.tasks",
        "EXTRA_HINT": "polars_hidden_rate.tasks",
    },
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_re_exports_its_new_home(old: str) -> None:
    module = importlib.import_module(old)
    assert sorted(module.__all__) == sorted(MOVED[old])
    for name, home in MOVED[old].items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name


def test_the_package_still_exports_count_cloaking() -> None:
    import polars_hidden_rate as phr
    from polars_hidden_rate import engine

    assert phr.count_cloaking is engine.count_cloaking
