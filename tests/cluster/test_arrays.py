"""Counting and the nearest two originals on a Dask cluster (`cluster=`): exact, also when a
worker dies mid-run."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from polars.testing import assert_frame_equal

import polars_hidden_rate as phr
from polars_hidden_rate import engine
from polars_hidden_rate.cluster import arrays as phd
from polars_hidden_rate.cluster import shards
from polars_hidden_rate.engine.nearest import NearestTwo, nearest_two
from polars_hidden_rate.tasks import TASK_MEMORY_FRACTION, WorkerSpec
from tests.helpers import (
    OFFSETS,
    adversarial,
    brute_force_counts,
    brute_force_two,
    examples,
    local_cluster,
    nearest_two_case,
    slow_down,
    tasks_done,
    without_provenance,
)

COORDS = ["Dim1", "Dim2", "Dim3"]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with local_cluster(processes=True) as client:
        yield client


def linked_frames(
    originals: np.ndarray, avatars: np.ndarray, seed: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals with an `id`, and their avatars shuffled, linked back by `id`."""
    ids = np.random.default_rng(seed).permutation(len(originals)) * 7 + 3
    left = pl.DataFrame({"id": ids, **dict(zip(COORDS, originals.T, strict=True))})
    right = pl.DataFrame({"id": ids, **dict(zip(COORDS, avatars.T, strict=True))})
    return left, right.sample(fraction=1.0, shuffle=True, seed=seed)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gaussian", "grid", "duplicates", "offset", "dyadic"])
def test_cluster_counts_equal_local_on_shuffled_linked_avatars(client: Any, kind: str) -> None:
    originals, avatars = adversarial(kind, 400, seed=1)
    left, right = linked_frames(originals, avatars, seed=2)

    local = phr.local_cloaking(left, right, coords=COORDS, on="id")
    sharded = phr.local_cloaking(left, right, coords=COORDS, on="id", cluster=client)

    assert_frame_equal(sharded, local)
    expected = brute_force_counts(originals, avatars, 1e-9)
    assert sharded["local_cloaking"].to_numpy().tolist() == expected.tolist()


@pytest.mark.slow
def test_lazy_hidden_rate_and_tie_tol_on_cluster(client: Any) -> None:
    originals, avatars = adversarial("grid", 300, seed=3)
    left, right = linked_frames(originals, avatars, seed=4)
    for tie_tol in (0.0, 1e-9):
        lazy = phr.local_cloaking(
            left.lazy(), right.lazy(), coords=COORDS, on="id", tie_tol=tie_tol, cluster=client
        )
        assert isinstance(lazy, pl.LazyFrame)
        expected = brute_force_counts(originals, avatars, tie_tol)
        assert lazy.collect()["local_cloaking"].to_list() == expected.tolist()
    assert phr.hidden_rate(left, right, coords=COORDS, on="id", cluster=client) == (
        phr.hidden_rate(left, right, coords=COORDS, on="id")
    )


@pytest.mark.parametrize(
    ("kind", "block_rows", "shard_rows"),
    [("grid", 7, 5), ("offset", 64, 9), ("duplicates", 1, 400), ("dyadic", 400, 1)],
)
@pytest.mark.slow
def test_any_sharding_sums_to_the_brute_force(
    client: Any, kind: str, block_rows: int, shard_rows: int
) -> None:
    originals, avatars = adversarial(kind, 120, seed=5)
    counts = phd.count_cloaking_distributed(
        originals,
        avatars,
        client=client,
        sizing=shards.Sizing(block_rows=block_rows, shard_rows=shard_rows),
    )
    assert counts.tolist() == brute_force_counts(originals, avatars, 1e-9).tolist()


def _cloaking(left: pl.DataFrame, right: pl.DataFrame, cluster: Any) -> pl.DataFrame:
    return phr.local_cloaking(left, right, coords=COORDS, on="id", cluster=cluster)


def _nndr(left: pl.DataFrame, right: pl.DataFrame, cluster: Any) -> pl.DataFrame:
    return phr.closest_distances_ratio(left, right, coords=COORDS, on="id", cluster=cluster)


# Per kind of run: the metric, the walk its tasks call, its task and shard key prefixes.
KILLABLE = {
    "counts": (
        _cloaking,
        ("polars_hidden_rate.engine", "within_result"),
        ("phr-count-within", "phr-avatar-shard"),
    ),
    "nearest-two": (
        _nndr,
        ("polars_hidden_rate.engine.nearest", "squared_nearest_two"),
        ("phr-nearest-two", "phr-original-shard"),
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KILLABLE))
def test_results_stay_exact_when_a_worker_is_killed_mid_run(kind: str) -> None:
    # A cluster of its own: the killed worker, and the nanny's restart of it on a loaded
    # machine, can never leave the module's cluster empty for the tests after this one.
    with local_cluster(processes=True) as client:
        _kill_a_worker_mid_run(client, kind)


def _kill_a_worker_mid_run(client: Any, kind: str) -> None:
    metric, (module, walk), (task_prefix, shard_prefix) = KILLABLE[kind]
    originals, avatars = adversarial("gaussian", 600, seed=6)
    left, right = linked_frames(originals, avatars, seed=7)
    expected = metric(left, right, None)
    client.run(slow_down(module, walk, 0.25))
    outcome: dict[str, Any] = {}

    def measure() -> None:
        try:
            outcome["frame"] = metric(left, right, client)
        except BaseException as exc:
            outcome["error"] = exc

    runner = threading.Thread(target=measure)
    runner.start()
    deadline = time.monotonic() + 180  # generous: a loaded machine starts tasks late
    while client.run_on_scheduler(tasks_done, prefix=task_prefix) == 0:
        assert runner.is_alive(), f"the run ended early: {outcome.get('error')!r}"
        assert time.monotonic() < deadline, "no task finished within 180 s"
        time.sleep(0.02)
    # Kill a worker that holds a shard: its scattered data is lost with it.
    victim = next(
        address
        for address, held in client.has_what().items()
        if any(str(key).startswith(shard_prefix) for key in held)
    )
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    assert runner.is_alive(), "the run ended before the worker was killed"
    runner.join(timeout=120)
    assert not runner.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert_frame_equal(outcome["frame"], expected)


def assert_same_nearest_two(found: NearestTwo, expected: NearestTwo) -> None:
    """Bit for bit: the same exponent and the same scaled floats."""
    assert found.exponent == expected.exponent
    np.testing.assert_array_equal(found.scaled_nearest, expected.scaled_nearest)
    np.testing.assert_array_equal(found.scaled_second, expected.scaled_second)


def assert_exact_nearest_two(found: NearestTwo, originals: Any, avatars: Any) -> None:
    """``found`` is this machine's walk bit for bit, and the float64 brute force's."""
    assert_same_nearest_two(found, nearest_two(originals, avatars))
    first, second = brute_force_two(originals, avatars)
    np.testing.assert_array_equal(found.nearest, np.sqrt(first))
    np.testing.assert_array_equal(found.second, np.sqrt(second))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gaussian", "grid", "duplicates", "offset", "dyadic"])
@pytest.mark.parametrize(
    "sizing", [None, shards.Sizing(7, 5), shards.Sizing(1, 400), shards.Sizing(400, 1)]
)
def test_nearest_two_on_cluster_is_bit_identical_to_local(
    client: Any, kind: str, sizing: shards.Sizing | None
) -> None:
    originals, avatars = adversarial(kind, 160, seed=9)
    avatars = avatars[:97]  # as many avatars as originals is not required
    found = phd.nearest_two_distributed(originals, avatars, client=client, sizing=sizing)
    assert_exact_nearest_two(found, originals, avatars)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_nearest_two_on_cluster_equals_the_brute_force(client: Any, seed: int) -> None:
    # Seeded, not Hypothesis: the client's threads use `random`, which Hypothesis flags.
    rng = np.random.default_rng(seed)
    n, m, d, block_rows, shard_rows = (int(v) for v in rng.integers(1, [120, 120, 7, 50, 50]))
    step, offset = [1.0, 0.5, 0.25][seed % 3], OFFSETS[seed % 4]
    originals, avatars = nearest_two_case(rng, n, m, d, step, offset)
    sizing = shards.Sizing(block_rows=block_rows, shard_rows=shard_rows)
    found = phd.nearest_two_distributed(originals, avatars, client=client, sizing=sizing)
    assert_exact_nearest_two(found, originals, avatars)


@pytest.mark.slow
def test_nearest_two_on_cluster_edge_cases(client: Any) -> None:
    found = phd.nearest_two_distributed(np.ones((3, 2)), np.zeros((0, 2)), client=client)
    assert found.nearest.shape == found.second.shape == (0,)
    single = phd.nearest_two_distributed(np.ones((1, 2)), np.ones((2, 2)), client=client)
    assert single.nearest.tolist() == [0.0, 0.0]
    assert single.second.tolist() == [np.inf, np.inf]
    with pytest.raises(ValueError, match="no originals"):
        phd.nearest_two_distributed(np.zeros((0, 2)), np.ones((2, 2)), client=client)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["grid", "duplicates", "offset"])
def test_distance_metrics_on_cluster_equal_local(client: Any, kind: str) -> None:
    originals, avatars = adversarial(kind, 300, seed=10)
    left, right = linked_frames(originals, avatars, seed=11)
    for metric in (phr.distance_to_closest, phr.closest_distances_ratio):
        local = metric(left, right, coords=COORDS, on="id")
        assert_frame_equal(metric(left, right, coords=COORDS, on="id", cluster=client), local)
        lazy = metric(left.lazy(), right.lazy(), coords=COORDS, on="id", cluster=client)
        assert isinstance(lazy, pl.LazyFrame)
        assert_frame_equal(lazy.collect(), local)
    # By row order too, and with the projection fitted on the originals.
    by_rows = phr.distance_to_closest(left, right.sort("id"), features=COORDS, cluster=client)
    assert_frame_equal(by_rows, phr.distance_to_closest(left, right.sort("id"), features=COORDS))


@pytest.mark.slow
def test_report_on_cluster_equals_local(client: Any) -> None:
    originals, avatars = adversarial("duplicates", 300, seed=12)
    left, right = linked_frames(originals, avatars, seed=13)
    local = phr.privacy_report(left, right, coords=COORDS, on="id")
    sharded = phr.privacy_report(left, right, coords=COORDS, on="id", cluster=client)
    assert without_provenance(sharded.to_dict()) == without_provenance(local.to_dict())
    # Each states where it counted.
    assert sharded.provenance["settings"]["engine"]["strategy"] == "cluster"
    assert local.provenance["settings"]["engine"]["strategy"] in ("tree", "flat")
    for name in ("local_cloaking", "distance_to_closest", "closest_distances_ratio"):
        np.testing.assert_array_equal(getattr(sharded, name), getattr(local, name))


@pytest.mark.parametrize("metric", [phr.distance_to_closest, phr.closest_distances_ratio])
def test_distance_metrics_refuse_the_gpu_before_reading(metric: Callable[..., Any]) -> None:
    def unreadable() -> pl.DataFrame:
        raise AssertionError("the originals were read")

    lazy = pl.defer(unreadable, schema={"Dim1": pl.Float64})
    frame = pl.DataFrame({"Dim1": [0.0]})
    with pytest.raises(NotImplementedError, match="no GPU path"):
        metric(lazy, frame, coords="Dim1", device="gpu")


coordinates = arrays(
    np.float64,
    st.tuples(st.integers(2, 40), st.integers(1, 3)),
    elements=st.sampled_from([-2.0, -0.5, 0.0, 0.25, 1.0, 3.0, 1e9, 1e9 + 1.0]),
)


def _pairs_to_count(blocks: list[Any], shard_points: list[np.ndarray]) -> list[tuple[int, int]]:
    """The pairs the scatter path submits: those its blocks' and shards' boxes may hold."""
    return shards.pairs_in_reach(
        [shards.Box.around(block.queries, block.thresholds) for block in blocks],
        [shards.Box.around(points) for points in shard_points],
    )


@settings(max_examples=examples(60), deadline=None)
@given(coordinates, st.integers(1, 7), st.integers(1, 7), st.integers(0, 2**16))
def test_pruned_pairs_hold_no_rival(
    originals: np.ndarray, block_rows: int, shard_rows: int, seed: int
) -> None:
    avatars = originals[np.random.default_rng(seed).permutation(len(originals))]
    thresholds = engine.own_thresholds(originals, avatars, 0.0)
    blocks = [
        phd._QueryBlock(
            originals[i : i + block_rows],
            thresholds[i : i + block_rows],
            np.zeros(0, dtype=np.int64),
        )
        for i in range(0, len(originals), block_rows)
    ]
    shard_points = [avatars[j : j + shard_rows] for j in range(0, len(avatars), shard_rows)]
    kept = set(_pairs_to_count(blocks, shard_points))
    for b, block in enumerate(blocks):
        for s, shard in enumerate(shard_points):
            if (b, s) in kept:
                continue
            rows = np.repeat(np.arange(len(block.queries)), len(shard))
            cols = np.tile(np.arange(len(shard)), len(block.queries))
            d2 = engine.squared_distances(block.queries, shard, rows, cols)
            assert not (d2 <= block.thresholds[rows]).any()


@settings(max_examples=examples(80), deadline=None)
@given(coordinates, st.integers(1, 7), st.booleans(), st.integers(0, 2**16))
def test_queries_are_routed_to_exactly_the_shards_their_balls_reach(
    originals: np.ndarray, shard_rows: int, slabs: bool, seed: int
) -> None:
    # Against the box test query by query, on boxes in any order (slabs of the first
    # coordinate as the pipeline cuts them, or overlapping), empty shards, thresholds that
    # tie a box's gap exactly (the coordinates are dyadic): a query whose ball misses a
    # shard has no avatar there within its threshold, and no other is left out.
    rng = np.random.default_rng(seed)
    avatars = originals[rng.permutation(len(originals))]
    if slabs:
        avatars = avatars[np.lexsort((np.arange(len(avatars)), avatars[:, 0]))]
    thresholds = engine.own_thresholds(originals, avatars, 0.0)
    pieces = [avatars[j : j + shard_rows] for j in range(0, len(avatars), shard_rows)]
    pieces.insert(int(rng.integers(len(pieces) + 1)), avatars[:0])
    boxes = [shards.Box.around(piece) for piece in pieces]
    routed = shards.queries_in_reach(originals, thresholds, boxes)
    for s, (box, piece) in enumerate(zip(boxes, pieces, strict=True)):
        if box is None:
            assert routed[s].tolist() == []
            continue
        reach = shards.reach_mask(originals, originals, thresholds, box.low[None], box.high[None])
        expected = np.flatnonzero(reach[:, 0])
        assert routed[s].tolist() == expected.tolist()
        missed = np.setdiff1d(np.arange(len(originals)), expected)
        rows, cols = np.repeat(missed, len(piece)), np.tile(np.arange(len(piece)), len(missed))
        d2 = engine.squared_distances(originals, piece, rows, cols)
        assert not (d2 <= thresholds[rows]).any()


def test_far_apart_pairs_are_not_submitted() -> None:
    rng = np.random.default_rng(8)
    originals = np.concatenate([rng.normal(size=(50, 2)), rng.normal(size=(50, 2)) + 100])
    avatars = originals + rng.normal(scale=0.01, size=originals.shape)
    thresholds = engine.own_thresholds(originals, avatars, 1e-9)
    blocks = [
        phd._QueryBlock(originals[i : i + 50], thresholds[i : i + 50], np.zeros(0, dtype=np.int64))
        for i in (0, 50)
    ]
    shard_points = [avatars[:50], avatars[50:]]
    assert sorted(_pairs_to_count(blocks, shard_points)) == [(0, 0), (1, 1)]


def test_sizing_respects_memory_and_task_caps() -> None:
    small = [WorkerSpec(nthreads=4, memory_limit=64 << 20)] * 3
    sizing = shards.size_tasks(10**6, 10**6, 5, small)
    per_task = sizing.shard_rows * shards.TASK_BYTES_PER_AVATAR_COORD * 5
    assert per_task <= TASK_MEMORY_FRACTION * (64 << 20) / 4
    big = [WorkerSpec(nthreads=32, memory_limit=256 << 30)] * 10
    sizing = shards.size_tasks(10**8, 10**8, 5, big)
    assert sizing.shard_rows == shards.MAX_SHARD_ROWS
    tasks = -(-(10**8) // sizing.block_rows) * -(-(10**8) // sizing.shard_rows)
    assert tasks <= shards.MAX_TASKS
    unlimited = shards.size_tasks(1000, 1000, 3, [WorkerSpec(nthreads=2, memory_limit=0)] * 2)
    assert unlimited.shard_rows == 500


@pytest.mark.slow
def test_non_client_cluster_is_a_type_error(client: Any) -> None:
    frame = pl.DataFrame({"Dim1": [0.0, 1.0]})
    with pytest.raises(TypeError, match=r"dask\.distributed\.Client, got str"):
        phr.local_cloaking(frame, frame, coords="Dim1", cluster="tcp://127.0.0.1:8786")
    with pytest.raises(TypeError, match=r"Client\(cluster\)"):
        phr.hidden_rate(frame, frame, coords="Dim1", cluster=client.cluster)


def test_cluster_is_checked_before_anything_is_read() -> None:
    pytest.importorskip("distributed")

    def unreadable() -> pl.DataFrame:
        raise AssertionError("the originals were read")

    lazy = pl.defer(unreadable, schema={"Dim1": pl.Float64})
    with pytest.raises(TypeError, match="got object"):  # at the call, not at collect
        phr.local_cloaking(lazy, pl.DataFrame({"Dim1": [0.0]}), coords="Dim1", cluster=object())


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    frame = pl.DataFrame({"Dim1": [0.0, 1.0]})
    with pytest.raises(ImportError, match=r"pip install polars-hidden-rate\[dask\]"):
        phr.local_cloaking(frame, frame, coords="Dim1", cluster=object())


@pytest.mark.slow
def test_cluster_with_gpu_is_refused(client: Any) -> None:
    frame = pl.DataFrame({"Dim1": [0.0, 1.0]})
    with pytest.raises(NotImplementedError, match="cluster"):
        phr.local_cloaking(frame, frame, coords="Dim1", cluster=client, device="gpu")
