"""`strategy="auto"`'s choice: a tree on a sample of the avatars settles the flat pass
before the tree on every avatar is built, where it loses on most probed walks, and nowhere
else; the probe stops once its first walks settle the flat pass, and walks nothing where
the tree's bound is below the flat pass's time."""

from __future__ import annotations

import numpy as np
import pytest

from polars_hidden_rate import engine
from polars_hidden_rate.engine import count, strategy
from polars_hidden_rate.engine.arrays import linked_arrays
from polars_hidden_rate.engine.kdtree import KdTree

ROWS = 10_000


def _case(dim: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(dim)
    originals = rng.normal(size=(ROWS, dim))
    return originals, originals + rng.normal(scale=noise, size=originals.shape)


@pytest.mark.parametrize(
    ("dim", "noise", "early"),
    # At 12 dimensions a few sampled walks stay within budget (the flat pass is still twice
    # as fast); at 16 with little noise the tree is three times as fast.
    [(64, 1.0, True), (12, 1.0, True), (3, 0.1, False), (16, 0.3, False)],
)
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


def test_the_probe_stops_after_its_first_walks_where_they_settle_the_flat_pass() -> None:
    originals, avatars = _case(12, 1.0)
    queries, points, thresholds = linked_arrays(originals, avatars, 1e-9)
    estimate = strategy.probe(KdTree.build(points, threads=2), queries, thresholds, None, threads=2)
    assert estimate.sampled == strategy.PROBE_MIN
    assert estimate.stopped < strategy.PROBE_MIN  # not every walk ran past its budget
    assert estimate.flat_seconds < estimate.tree_seconds


def test_a_few_distinct_values_are_counted_by_the_tree_without_a_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(3)
    originals = rng.integers(0, 5, size=(ROWS, 3)).astype(np.float64)
    avatars = rng.integers(0, 5, size=(ROWS, 3)).astype(np.float64)
    flat = engine.cloaking_result(originals, avatars, strategy="flat", threads=2)

    def no_walk(*args: object, **kwargs: object) -> None:
        raise AssertionError("the probe walked")

    monkeypatch.setattr(KdTree, "walk_work", no_walk)
    auto = engine.cloaking_result(originals, avatars, strategy="auto", threads=2)
    assert auto.strategy == "tree"
    assert np.array_equal(auto.counts, flat.counts)


@pytest.mark.parametrize(
    ("rows", "dim", "unbeaten"),
    # Both fast; the tree's bound below the flat pass (few dimensions); neither.
    [(500, 10, True), (ROWS, 3, True), (ROWS, 5, True), (ROWS, 16, False), (ROWS, 64, False)],
)
def test_the_tree_that_cannot_lose_is_what_the_probes_would_choose(
    rows: int, dim: int, unbeaten: bool
) -> None:
    rng = np.random.default_rng(rows + dim)
    originals = rng.normal(size=(rows, dim))
    avatars = originals + rng.normal(scale=0.5, size=originals.shape)
    queries, points, thresholds = linked_arrays(originals, avatars, 1e-9)
    assert strategy.tree_unbeaten(rows, rows, dim, 2) is unbeaten
    if unbeaten:
        assert not strategy.flat_settled_early(points, queries, thresholds, threads=2)
        tree = KdTree.build(points, threads=2)
        assert strategy.choose_strategy(tree, queries, thresholds, None, threads=2) == "tree"


def test_auto_runs_a_tree_that_cannot_lose_without_asking_the_probes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    originals, avatars = _case(3, 0.1)
    tree = engine.cloaking_result(originals, avatars, strategy="tree", threads=2)

    def asked(*args: object, **kwargs: object) -> None:
        raise AssertionError("a probe was asked")

    monkeypatch.setattr(count, "flat_settled_early", asked)
    monkeypatch.setattr(count, "choose_strategy", asked)
    auto = engine.cloaking_result(originals, avatars, strategy="auto", threads=2)
    assert auto.strategy == "tree"
    assert np.array_equal(auto.counts, tree.counts)
