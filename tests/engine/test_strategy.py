"""`strategy="auto"`'s early choice: a tree on a sample of the avatars settles the flat pass
before the tree on every avatar is built, where it loses on every probed walk, and nowhere
else."""

from __future__ import annotations

import numpy as np
import pytest

from polars_hidden_rate import engine
from polars_hidden_rate.engine import strategy
from polars_hidden_rate.engine.arrays import linked_arrays
from polars_hidden_rate.engine.kdtree import KdTree

ROWS = 10_000


def _case(dim: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(dim)
    originals = rng.normal(size=(ROWS, dim))
    return originals, originals + rng.normal(scale=noise, size=originals.shape)


@pytest.mark.parametrize(("dim", "noise", "early"), [(64, 1.0, True), (3, 0.1, False)])
def test_the_flat_pass_is_settled_early_only_in_many_dimensions(
    dim: int, noise: float, early: bool
) -> None:
    originals, avatars = _case(dim, noise)
    queries, points, thresholds = linked_arrays(originals, avatars, 1e-9)
    assert strategy.flat_settled_early(points, queries, thresholds, threads=2) is early


def test_an_early_flat_choice_builds_no_full_tree_and_counts_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    originals, avatars = _case(64, 1.0)
    flat = engine.cloaking_result(originals, avatars, strategy="flat", threads=2, cap=1)
    built: list[int] = []
    build = KdTree.build

    def counted(points: np.ndarray, **kwargs: object) -> KdTree:
        built.append(len(points))
        return build(points, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(KdTree, "build", staticmethod(counted))
    auto = engine.cloaking_result(originals, avatars, strategy="auto", threads=2, cap=1)
    assert auto.strategy == "flat"
    assert np.array_equal(auto.counts, flat.counts)
    assert built
    assert max(built) < ROWS  # the sample's tree only
