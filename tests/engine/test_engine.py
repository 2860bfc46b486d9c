"""The engine against a float64 brute force, on data built to break float32."""

from __future__ import annotations

import math
import multiprocessing
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.spatial import cKDTree

from polars_hidden_rate import engine
from polars_hidden_rate.engine import count_cloaking, flat, kdtree
from polars_hidden_rate.engine.scale import canonical_scale
from tests.helpers import brute_force_counts, brute_force_within, examples

OFFSETS = [0.0, 1e3, 1e6, 2.0**30, -7.5e8]
STRATEGIES = ["auto", "flat", "tree"]


@pytest.fixture(autouse=True, params=[1, 3], ids=["leaf1", "leaf3"])
def tiny_leaves(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Leaves of a few points (of one, some empty), so that small data builds deep trees
    and prunes for real, and tasks of a few queries and parallel builds, so that the
    threads share the work."""
    monkeypatch.setattr(kdtree, "LEAF_SIZE", request.param)
    monkeypatch.setattr(kdtree, "QUERIES_PER_TASK", 8)
    monkeypatch.setattr(kdtree, "PARALLEL_BUILD_MIN", 0)
    # "auto" probes even tiny data (its walks stop at their budget, and either side wins).
    monkeypatch.setattr("polars_hidden_rate.engine.strategy.PROBE_FLOOR_SECONDS", -1.0)


@st.composite
def integer_grids(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Originals on a small integer grid, avatars a step or two away: full of exact ties."""
    n = draw(st.integers(2, 60))
    d = draw(st.sampled_from([2, 5, 12]))
    originals = draw(hnp.arrays(np.int64, (n, d), elements=st.integers(-3, 3)))
    steps = draw(hnp.arrays(np.int64, (n, d), elements=st.integers(-1, 1)))
    scale = 2.0 ** draw(st.integers(-30, 30))  # dyadic: keeps every tie exact
    offset = draw(st.sampled_from(OFFSETS))
    x = originals * scale + offset
    return x, (originals + steps) * scale + offset


@settings(max_examples=examples(150), deadline=None)
@given(data=integer_grids(), tie_tol=st.sampled_from([0.0, 1e-9]))
def test_integer_grids_match_brute_force(
    data: tuple[np.ndarray, np.ndarray], tie_tol: float
) -> None:
    originals, avatars = data
    np.testing.assert_array_equal(
        count_cloaking(originals, avatars, tie_tol=tie_tol),
        brute_force_counts(originals, avatars, tie_tol),
    )


@settings(max_examples=examples(100), deadline=None)
@given(
    data=hnp.arrays(
        np.float64,
        st.tuples(st.integers(2, 40), st.sampled_from([2, 5, 12])),
        elements=st.floats(-1e3, 1e3, allow_nan=False, width=32),
    ),
    noise=st.floats(1e-6, 10.0),
    offset=st.sampled_from(OFFSETS),
    seed=st.integers(0, 2**32 - 1),
    strategy=st.sampled_from(STRATEGIES),
)
def test_continuous_data_match_brute_force(
    data: np.ndarray, noise: float, offset: float, seed: int, strategy: engine.Strategy
) -> None:
    rng = np.random.default_rng(seed)
    originals = data + offset
    avatars = originals + rng.normal(scale=noise, size=data.shape)
    np.testing.assert_array_equal(
        count_cloaking(originals, avatars, strategy=strategy),
        brute_force_counts(originals, avatars, 1e-9),
    )


@pytest.mark.parametrize("d", [2, 5, 12])
@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_duplicates_and_identical_avatars(d: int, offset: float, strategy: engine.Strategy) -> None:
    rng = np.random.default_rng(d)
    base = rng.integers(-2, 3, (40, d)).astype(float)
    originals = np.concatenate([base, base, base[:10]]) + offset  # exact duplicate rows
    avatars = originals.copy()
    avatars[::3] += rng.integers(-1, 2, avatars[::3].shape)  # the rest are their own originals
    for tie_tol in (0.0, 1e-9):
        np.testing.assert_array_equal(
            count_cloaking(originals, avatars, tie_tol=tie_tol, strategy=strategy),
            brute_force_counts(originals, avatars, tie_tol),
        )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_all_points_identical_count_everyone(strategy: engine.Strategy) -> None:
    points = np.full((50, 5), 123456.789)
    np.testing.assert_array_equal(
        count_cloaking(points, points, tie_tol=0.0, strategy=strategy), np.full(50, 49)
    )


@pytest.mark.parametrize("offset", [1.0, 1e4, 1e8])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_below_float32_resolution(offset: float, strategy: engine.Strategy) -> None:
    """Differences far below a float32 ulp of the offset: float32 sees only one point."""
    rng = np.random.default_rng(7)
    steps = rng.integers(-4, 5, (200, 3)).astype(float)
    ulp64 = np.spacing(offset)
    originals = offset + steps * ulp64 * 4
    avatars = originals + rng.integers(-1, 2, steps.shape) * ulp64 * 4
    for tie_tol in (0.0, 1e-9):
        np.testing.assert_array_equal(
            count_cloaking(originals, avatars, tie_tol=tie_tol, strategy=strategy),
            brute_force_counts(originals, avatars, tie_tol),
        )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_tiny_magnitudes_do_not_underflow(strategy: engine.Strategy) -> None:
    rng = np.random.default_rng(3)
    originals = rng.integers(-3, 4, (100, 4)) * 1e-160
    avatars = originals + rng.integers(-1, 2, originals.shape) * 1e-160
    np.testing.assert_array_equal(
        count_cloaking(originals, avatars, tie_tol=0.0, strategy=strategy),
        brute_force_counts(originals, avatars, 0.0),
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_reversing_columns_changes_no_count(strategy: engine.Strategy) -> None:
    """Standardized integer data: symmetric rivals tie exactly; float64 splits them by an ulp."""
    rng = np.random.default_rng(11)
    raw = rng.integers(0, 10, (3000, 7)).astype(float)
    mean, std = raw.mean(axis=0), raw.std(axis=0)
    originals = (raw - mean) / std
    avatars = (raw + rng.integers(-1, 2, raw.shape) - mean) / std
    forward = count_cloaking(originals, avatars, strategy=strategy)
    reverse = count_cloaking(originals[:, ::-1], avatars[:, ::-1], strategy=strategy)
    np.testing.assert_array_equal(forward, reverse)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_far_avatars_give_large_counts_over_many_chunks(
    monkeypatch: pytest.MonkeyPatch, strategy: engine.Strategy
) -> None:
    monkeypatch.setattr(flat, "MAX_RESULTS_PER_CHUNK", 64)
    rng = np.random.default_rng(5)
    originals = rng.integers(-2, 3, (300, 2)).astype(float)
    avatars = originals.copy()
    avatars[::2] = -avatars[::2] * 3 + 1  # many avatars far from their originals
    np.testing.assert_array_equal(
        count_cloaking(originals, avatars, strategy=strategy),
        brute_force_counts(originals, avatars, 1e-9),
    )


@pytest.mark.parametrize("d", [2, 5, 12])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_agrees_with_scipy_kdtree(d: int, strategy: engine.Strategy) -> None:
    rng = np.random.default_rng(d)
    originals = rng.normal(size=(2000, d))
    avatars = originals + rng.normal(scale=0.3, size=originals.shape)
    # Widen the radius a little so that the own avatar is always inside for scipy too.
    radius = np.sqrt(((originals - avatars) ** 2).sum(axis=1)) * (1 + 1e-9)
    scipy_counts = cKDTree(avatars).query_ball_point(originals, r=radius, return_length=True) - 1
    ours = count_cloaking(originals, avatars, tie_tol=(1 + 1e-9) ** 2 - 1, strategy=strategy)
    np.testing.assert_array_equal(ours, scipy_counts)


def test_threads_do_not_change_counts() -> None:
    rng = np.random.default_rng(2)
    originals = rng.integers(-3, 4, (500, 5)).astype(float)
    avatars = originals + rng.integers(-1, 2, originals.shape)
    np.testing.assert_array_equal(
        count_cloaking(originals, avatars, threads=1), count_cloaking(originals, avatars, threads=2)
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_within_result_honours_own_and_missing_own(strategy: engine.Strategy) -> None:
    originals = np.array([[0.0], [10.0]])
    avatars = np.array([[1.0], [0.5], [9.0]])
    thresholds = np.array([1.0, 1.0])
    # Query 0 owns avatar 0; query 1's own avatar is not in this shard.
    counts = engine.within_result(
        originals, thresholds, np.array([0, -1]), avatars, strategy=strategy
    ).counts
    np.testing.assert_array_equal(counts, [1, 1])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_shards_add_up_to_the_whole(strategy: engine.Strategy) -> None:
    """Counting against disjoint shards of the avatars and summing gives the whole count."""
    rng = np.random.default_rng(12)
    originals = rng.integers(-3, 4, (400, 3)).astype(float) + 1e6
    avatars = originals + rng.integers(-1, 2, originals.shape)
    thresholds = engine.own_thresholds(originals, avatars, 1e-9)
    rows = np.arange(len(originals))
    total = np.zeros(len(originals), dtype=np.int64)
    for shard in np.array_split(rng.permutation(len(avatars)), 3):
        position = np.full(len(avatars), -1)
        position[shard] = np.arange(len(shard))
        total += engine.within_result(
            originals, thresholds, position[rows], avatars[shard], strategy=strategy
        ).counts
    np.testing.assert_array_equal(total, brute_force_counts(originals, avatars, 1e-9))


@settings(max_examples=examples(150), deadline=None)
@given(
    data=hnp.arrays(
        np.float64,
        st.tuples(st.integers(2, 40), st.sampled_from([1, 3, 7])),
        elements=st.floats(-1e3, 1e3, allow_nan=False),
    ),
    offset=st.sampled_from(OFFSETS),
    seed=st.integers(0, 2**32 - 1),
    strategy=st.sampled_from(STRATEGIES),
    below=st.booleans(),
)
def test_rivals_at_the_threshold_count_and_one_ulp_beyond_do_not(
    data: np.ndarray, offset: float, seed: int, strategy: engine.Strategy, below: bool
) -> None:
    """Each threshold is the float64 d2 of some rival, or the float just below it: the
    rival counts in the first case and not in the second, to the last bit (a fused
    multiply-add, a reordered sum or a loose box test would move it by an ulp)."""
    rng = np.random.default_rng(seed)
    half = len(data) // 2
    queries, avatars = data[:half] + offset, data[half:] + offset
    if len(queries) == 0:
        return
    rival = rng.integers(0, len(avatars), len(queries))
    thresholds = engine.squared_distances(queries, avatars, np.arange(len(queries)), rival)
    if below:
        thresholds = np.nextafter(thresholds, 0.0)
    own = np.where(rng.random(len(queries)) < 0.5, rng.integers(0, len(avatars), len(queries)), -1)
    np.testing.assert_array_equal(
        engine.within_result(queries, thresholds, own, avatars, strategy=strategy).counts,
        brute_force_within(queries, thresholds, own, avatars),
    )


@settings(max_examples=examples(100), deadline=None)
@given(
    avatars=hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 30), st.sampled_from([1, 2, 5])),
        elements=st.floats(-1e3, 1e3, allow_nan=False),
    ),
    offset=st.sampled_from(OFFSETS),
    seed=st.integers(0, 2**32 - 1),
    below=st.booleans(),
)
def test_queries_outside_a_shard_reach_it_to_the_last_bit(
    avatars: np.ndarray, offset: float, seed: int, below: bool
) -> None:
    """Queries whose own avatar is elsewhere, just outside the shard's box: each threshold
    is the float64 d2 of the avatar that holds the box's bound (it counts), or the float
    just below it (it does not), so a root test looser or tighter by an ulp shows."""
    rng = np.random.default_rng(seed)
    avatars = avatars + offset
    m = 2 * len(avatars)
    axis = rng.integers(0, avatars.shape[1], m)
    side = rng.choice([-1.0, 1.0], m)
    rival = np.where(side > 0, avatars[:, axis].argmax(axis=0), avatars[:, axis].argmin(axis=0))
    queries = avatars[rival].copy()
    queries[np.arange(m), axis] += side * rng.choice([0.0, 0.25, 3.0, 1e3], m)
    thresholds = engine.squared_distances(queries, avatars, np.arange(m), rival)
    if below:
        thresholds = np.nextafter(thresholds, 0.0)
    own = np.full(m, -1)
    tree = kdtree.KdTree.build(avatars)
    expected = brute_force_within(queries, thresholds, own, avatars)
    np.testing.assert_array_equal(
        engine.within_result(queries, thresholds, own, tree).counts, expected
    )
    np.testing.assert_array_equal(tree.reaches(queries, thresholds) | (expected == 0), True)


@pytest.mark.parametrize("leaf_size", [1, 2, 5, 16])
@pytest.mark.usefixtures("tiny_leaves")
@pytest.mark.parametrize("threads", [1, 2])
def test_tree_holds_every_avatar_once_in_its_boxes(leaf_size: int, threads: int) -> None:
    rng = np.random.default_rng(leaf_size)
    avatars = np.concatenate([rng.normal(size=(300, 4)), np.zeros((50, 4))])
    tree = kdtree.KdTree.build(avatars, leaf_size, threads=threads)
    np.testing.assert_array_equal(np.sort(tree.order), np.arange(len(avatars)))
    np.testing.assert_array_equal(tree.points, avatars[tree.order])
    np.testing.assert_array_equal(tree.order[tree.position], np.arange(len(avatars)))
    first_leaf = (len(tree.begin) - 1) // 2
    off_median = np.zeros(len(tree.begin), dtype=bool)  # a split off the median above
    for node in range(len(tree.begin)):
        if node < first_leaf:  # children split the range at the median of the widest side,
            # or at the end of a run of ties
            left, right = 2 * node + 1, 2 * node + 2
            assert tree.begin[left] == tree.begin[node]
            assert tree.end[left] == tree.begin[right]
            assert tree.end[right] == tree.end[node]
            sizes = tree.end[[left, right]] - tree.begin[[left, right]]
            below = tree.points[tree.begin[left] : tree.end[left]]
            above = tree.points[tree.begin[right] : tree.end[right]]
            off = abs(sizes[0] - sizes[1]) > 1
            off_median[[left, right]] = off_median[node] or off
            if off:  # off the median only at the end of a run of ties: the sides lie apart
                assert sizes.min() >= sizes.sum() // 4
                assert (below.max(axis=0) < above.min(axis=0)).any()
            elif len(below) and len(above):
                assert (below.max(axis=0) <= above.min(axis=0)).any()
        inside = tree.points[tree.begin[node] : tree.end[node]]
        assert (inside >= tree.lower[node]).all()
        assert (inside <= tree.upper[node]).all()
    sizes = tree.end[first_leaf:] - tree.begin[first_leaf:]
    # The 50 zeros tie: a split keeps them together, and a leaf below it may hold more.
    assert (sizes[~off_median[first_leaf:]] <= leaf_size).all()
    untied = kdtree.KdTree.build(avatars[:300], leaf_size, threads=threads)
    first_leaf = (len(untied.begin) - 1) // 2
    assert (untied.end[first_leaf:] - untied.begin[first_leaf:]).max() <= leaf_size


@pytest.mark.parametrize("threads", [1, 2])
def test_a_median_inside_a_run_of_ties_splits_at_the_run_s_end(threads: int) -> None:
    # A categorical column (60 % at level 0, 40 % at level 1) and a narrow continuous one:
    # the root splits the levels apart, not the run of 0s, so no box of one level
    # touches the other and a query at a level walks one side.
    rng = np.random.default_rng(4)
    n = 1 << 17  # large enough for the parallel build
    level = (rng.random(n) < 0.4).astype(np.float64)
    avatars = np.column_stack([level, 0.1 * rng.random(n)])
    level[: n // 5] += 2.0**-40  # and a rounding off the level is tied with it too
    avatars[:, 0] = level
    tree = kdtree.KdTree.build(avatars, threads=threads)
    left, right = (tree.points[tree.begin[c] : tree.end[c], 0] for c in (1, 2))
    assert left.max() < 0.5 < right.min()
    assert tree.end[1] == np.count_nonzero(level < 0.5)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_squares_that_would_overflow_count_as_at_a_sane_scale(strategy: engine.Strategy) -> None:
    """Coordinates near 1e200: finite, but their squared distances, as given, overflow to
    inf. The engine rescales exactly first: the reference is the brute force on the same
    data times 2^-664 (about 1e-200), where no square overflows."""
    rng = np.random.default_rng(9)
    originals = rng.integers(-3, 4, (60, 3)) * 1e200
    avatars = originals + rng.integers(-1, 2, originals.shape) * 1e200
    np.testing.assert_array_equal(
        count_cloaking(originals, avatars, tie_tol=0.0, strategy=strategy),
        brute_force_counts(np.ldexp(originals, -664), np.ldexp(avatars, -664), 0.0),
    )


@pytest.mark.parametrize(
    ("queries", "thresholds", "own", "message"),
    [
        (np.zeros((2, 3)), np.ones(2), np.zeros(2, dtype=np.int64), "shape"),
        (np.zeros((2, 2)), np.ones(3), np.zeros(2, dtype=np.int64), "thresholds"),
        (np.zeros((2, 2)), np.ones(2), np.array([0, 5]), "own rows"),
        (np.array([[0.0, np.inf], [0, 0]]), np.ones(2), np.zeros(2, dtype=np.int64), "finite"),
        (np.zeros((2, 2)), np.array([1.0, np.nan]), np.zeros(2, dtype=np.int64), "thresholds"),
    ],
)
def test_within_result_rejects_inconsistent_inputs(
    queries: np.ndarray, thresholds: np.ndarray, own: np.ndarray, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        engine.within_result(queries, thresholds, own, np.zeros((3, 2)))


def test_concurrent_callers_share_the_threads_safely() -> None:
    rng = np.random.default_rng(4)
    originals = rng.integers(-3, 4, (400, 4)).astype(float)
    avatars = originals + rng.integers(-1, 2, originals.shape)
    expected = brute_force_counts(originals, avatars, 1e-9)
    with ThreadPoolExecutor(4) as callers:
        results = list(
            callers.map(lambda _: count_cloaking(originals, avatars, threads=2), range(8))
        )
    for counts in results:
        np.testing.assert_array_equal(counts, expected)


def _count_in_child(arrays: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return count_cloaking(*arrays, threads=2)


def test_a_forked_child_counts_after_its_parent() -> None:
    """The child inherits the parent's thread pools but not their threads."""
    rng = np.random.default_rng(8)
    originals = rng.normal(size=(300, 3))
    avatars = originals + rng.normal(scale=0.2, size=originals.shape)
    expected = count_cloaking(originals, avatars, threads=2)  # the parent's pool exists now
    with multiprocessing.get_context("fork").Pool(1) as child:
        counts = child.apply_async(_count_in_child, ((originals, avatars),)).get(timeout=60)
    np.testing.assert_array_equal(counts, expected)


def test_within_result_reuses_a_prebuilt_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dask tasks get a shard's tree built once; `own` still indexes the avatar rows, and
    "auto" walks it without a probe."""

    def no_probe(*args: object, **kwargs: object) -> None:
        raise AssertionError("a prebuilt tree was probed")

    monkeypatch.setattr("polars_hidden_rate.engine.count.choose_strategy", no_probe)
    rng = np.random.default_rng(13)
    originals = rng.integers(-3, 4, (200, 3)).astype(float)
    avatars = originals + rng.integers(-1, 2, originals.shape).astype(np.float64)
    thresholds = engine.own_thresholds(originals, avatars, 1e-9)
    own = np.where(rng.random(200) < 0.7, np.arange(200), -1)
    tree = kdtree.KdTree.build(avatars)
    np.testing.assert_array_equal(
        engine.within_result(originals, thresholds, own, tree).counts,
        brute_force_within(originals, thresholds, own, avatars),
    )
    with pytest.raises(ValueError, match="flat"):
        engine.within_result(originals, thresholds, own, tree, strategy="flat")


@st.composite
def isotropic(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Full-rank Gaussian originals and avatars one noise away: no tree prunes, and "auto"
    may choose the flat pass."""
    n = draw(st.integers(2, 150))
    d = draw(st.sampled_from([8, 16, 33]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    originals = rng.standard_normal((n, d)) + draw(st.sampled_from(OFFSETS))
    return originals, originals + rng.normal(scale=0.9, size=(n, d))


@settings(max_examples=examples(100), deadline=None)
@given(data=isotropic(), strategy=st.sampled_from(STRATEGIES), cap=st.sampled_from([None, 1, 3]))
def test_isotropic_data_match_brute_force(
    data: tuple[np.ndarray, np.ndarray], strategy: engine.Strategy, cap: int | None
) -> None:
    originals, avatars = data
    expected = brute_force_counts(originals, avatars, 1e-9)
    if cap is not None:
        expected = np.minimum(expected, cap)
    np.testing.assert_array_equal(
        count_cloaking(originals, avatars, strategy=strategy, cap=cap), expected
    )


@settings(max_examples=examples(150), deadline=None)
@given(
    data=integer_grids(),
    tie_tol=st.sampled_from([0.0, 1e-9]),
    strategy=st.sampled_from(STRATEGIES),
    cap=st.integers(1, 5),
)
def test_capped_counts_are_the_counts_capped(
    data: tuple[np.ndarray, np.ndarray], tie_tol: float, strategy: engine.Strategy, cap: int
) -> None:
    """Integer grids are full of ties and whole boxes at the threshold: a walk that stops
    early, or a box counted whole past the cap, still gives min(c_i, cap)."""
    originals, avatars = data
    expected = brute_force_counts(originals, avatars, tie_tol)
    capped = count_cloaking(originals, avatars, tie_tol=tie_tol, strategy=strategy, cap=cap)
    np.testing.assert_array_equal(capped, np.minimum(expected, cap))
    flags = engine.hidden_flags(originals, avatars, tie_tol=tie_tol, strategy=strategy)
    np.testing.assert_array_equal(flags, expected > 0)


@pytest.mark.parametrize("cap", [0, -1, 1.5, True])
def test_cap_must_be_a_positive_integer(cap: object) -> None:
    with pytest.raises((TypeError, ValueError), match="cap"):
        count_cloaking(np.zeros((3, 2)), np.ones((3, 2)), cap=cap)  # type: ignore[arg-type]


@pytest.mark.parametrize(("d", "noise", "expected"), [(32, 0.9, "flat"), (3, 0.05, "tree")])
def test_auto_chooses_flat_on_isotropic_data_and_the_tree_on_low_dimensions(
    monkeypatch: pytest.MonkeyPatch, d: int, noise: float, expected: str
) -> None:
    """The probe's prediction (its work counts under the fixed cost model): on full-rank
    data every walk visits most avatars, and on low-dimensional data a few."""
    monkeypatch.setattr(kdtree, "LEAF_SIZE", 16)
    monkeypatch.setattr("polars_hidden_rate.engine.strategy.PROBE_FLOOR_SECONDS", 0.0)
    rng = np.random.default_rng(d)
    originals = rng.standard_normal((4000, d))
    avatars = originals + rng.normal(scale=noise, size=originals.shape)
    x, y, thresholds = engine.linked_arrays(originals, avatars, 1e-9)
    tree = kdtree.KdTree.build(y)
    own = np.arange(len(x))
    assert engine.choose_strategy(tree, x, thresholds, own, threads=2) == expected
    estimate = engine.probe(tree, x, thresholds, own, threads=2)
    assert estimate.sampled == engine.strategy.PROBE_MIN
    assert (estimate.stopped > 0) == (expected == "flat")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_tie_tol_widens_the_threshold_by_exactly_its_factor(strategy: str) -> None:
    # Record 0: own avatar at d2 = 1, a rival at d2 = 1 + 1.5 * 2^-11 (rounded). tie_tol =
    # 2^-11 gives T = 1 + 2^-11, so the rival is out; a tolerance applied twice
    # (T = 1 + 2^-10) would take it in. (tie_tol stays below 1e-3, checks.MAX_TIE_TOL.)
    rival = math.sqrt(1.0 + 1.5 * 2.0**-11)
    assert 1.0 + 2.0**-11 < rival * rival < 1.0 + 2.0**-10
    originals = np.array([[0.0], [10.0]])
    avatars = np.array([[1.0], [-rival]])
    counts = count_cloaking(originals, avatars, tie_tol=2.0**-11, strategy=strategy)  # type: ignore[arg-type]
    assert counts.tolist() == [0, 1]
    wider = count_cloaking(originals, avatars, tie_tol=2.0**-10, strategy=strategy)  # type: ignore[arg-type]
    assert wider.tolist() == [1, 1]


@settings(max_examples=examples(150), deadline=None)
@given(
    data=integer_grids(),
    strategy=st.sampled_from(STRATEGIES),
    cap=st.sampled_from([None, 1, 3]),
    layout=st.sampled_from(["owned", "same array", "read-only", "fortran"]),
)
def test_counting_in_place_matches_brute_force(
    data: tuple[np.ndarray, np.ndarray], strategy: engine.Strategy, cap: int | None, layout: str
) -> None:
    """``overwrite_input`` changes no count: on arrays the engine may take over, on one
    array passed as both sides, on read-only arrays, and on arrays it must copy anyway."""
    originals, avatars = data
    if layout == "same array":
        avatars = originals
    expected = brute_force_counts(originals, avatars, 1e-9)
    if cap is not None:
        expected = np.minimum(expected, cap)
    x, y = originals.copy(), avatars if layout == "same array" else avatars.copy()
    if layout == "same array":
        y = x
    elif layout == "read-only":
        x.flags.writeable = y.flags.writeable = False
    elif layout == "fortran":
        x, y = np.asfortranarray(x), np.asfortranarray(y)
    counts = count_cloaking(x, y, strategy=strategy, cap=cap, overwrite_input=True)
    np.testing.assert_array_equal(counts, expected)
    if layout in ("read-only", "fortran"):  # not the engine's to change
        np.testing.assert_array_equal(x, originals)
        np.testing.assert_array_equal(y, avatars)


@settings(max_examples=examples(150), deadline=None)
@given(
    data=integer_grids(),
    strategy=st.sampled_from(STRATEGIES),
    cap=st.sampled_from([None, 1, 3]),
    tie_tol=st.sampled_from([0.0, 1e-9, 9.99e-4]),
    big=st.booleans(),
)
def test_counting_in_place_then_again_gives_the_same_counts(
    data: tuple[np.ndarray, np.ndarray],
    strategy: engine.Strategy,
    cap: int | None,
    tie_tol: float,
    big: bool,
) -> None:
    """``restore_order`` leaves the arrays at the canonical scale in row order: a second
    count of them, in place too, gives the counts of the inputs (the gate's capped count,
    then its count in full, on one read)."""
    originals, avatars = data
    if big:  # every avatar four times: the plain tree, built in place, is then collapsed
        originals, avatars = np.tile(originals, (4, 1)), np.tile(avatars, (4, 1))
    expected = brute_force_counts(originals, avatars, tie_tol)
    x, y = originals.copy(), avatars.copy()
    first = count_cloaking(
        x, y, tie_tol=tie_tol, strategy=strategy, cap=cap, overwrite_input=True,
        restore_order=True,
    )  # fmt: skip
    np.testing.assert_array_equal(first, expected if cap is None else np.minimum(expected, cap))
    (scaled_x, scaled_y), _ = canonical_scale(originals, avatars, tie_tol=tie_tol)
    np.testing.assert_array_equal(x, scaled_x)  # in row order, at the canonical scale
    np.testing.assert_array_equal(y, scaled_y)
    again = count_cloaking(x, y, tie_tol=tie_tol, strategy=strategy, overwrite_input=True)
    np.testing.assert_array_equal(again, expected)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("cap", [None, 2])
def test_own_none_is_each_query_with_its_own_row(
    strategy: engine.Strategy, cap: int | None
) -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(-3, 4, size=(300, 3)).astype(np.float64)
    y = x + rng.integers(-1, 2, size=x.shape)
    thresholds = engine.own_thresholds(x, y, 1e-9)
    expected = brute_force_within(x, thresholds, np.arange(len(x)), y)
    if cap is not None:
        expected = np.minimum(expected, cap)
    counts = engine.within_result(x, thresholds, None, y, strategy=strategy, cap=cap).counts
    np.testing.assert_array_equal(counts, expected)


@pytest.mark.parametrize("threads", [1, 2])
def test_tree_built_in_place_holds_the_copy_it_would_make(threads: int) -> None:
    rng = np.random.default_rng(3)
    avatars = rng.integers(-5, 6, size=(2_000, 4)).astype(np.float64)
    copied = kdtree.KdTree.build(avatars, threads=threads)
    taken = avatars.copy()
    in_place = kdtree.KdTree.build(taken, threads=threads, overwrite_input=True)
    assert np.shares_memory(in_place.points, taken)
    np.testing.assert_array_equal(in_place.points, copied.points)
    np.testing.assert_array_equal(in_place.points, avatars[in_place.order])
    np.testing.assert_array_equal(in_place.order, copied.order)


@st.composite
def duplicated(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Avatars with many exact copies (a few values, some of them -0.0 beside 0.0), and
    queries on the same grid: full of ties, zero thresholds and runs of identical avatars."""
    n = draw(st.integers(2, 80))
    d = draw(st.sampled_from([1, 2, 3, 5]))
    values = st.sampled_from([-1.0, -0.5, -0.0, 0.0, 0.0, 0.5, 1.0])
    avatars = draw(hnp.arrays(np.float64, (n, d), elements=values))
    queries = draw(hnp.arrays(np.float64, (n, d), elements=values))
    scale, offset = 2.0 ** draw(st.integers(-20, 20)), draw(st.sampled_from(OFFSETS))
    return queries * scale + offset, avatars * scale + offset


def brute_force_closer(
    queries: np.ndarray, below: np.ndarray, own: np.ndarray, avatars: np.ndarray
) -> np.ndarray:
    """Whether an avatar ``j != own[i]`` lies within ``below[i]``, in float64."""
    found: np.ndarray = brute_force_within(queries, below, own, avatars) > 0
    return found


@settings(max_examples=examples(150), deadline=None)
@given(
    data=duplicated(),
    seed=st.integers(0, 2**32 - 1),
    cap=st.sampled_from([None, 1, 3]),
    threads=st.sampled_from([1, 2]),
)
def test_a_collapsed_tree_counts_what_the_plain_tree_counts(
    data: tuple[np.ndarray, np.ndarray], seed: int, cap: int | None, threads: int
) -> None:
    """Each distinct avatar once, weighted by its copies: the counts, the capped counts and
    the closer flags are the brute force's, with the own avatar given, absent (-1) or
    implied (own=None), thresholds at the own avatar's d2 or at an arbitrary rival's."""
    queries, avatars = data
    rng = np.random.default_rng(seed)
    n = len(avatars)
    own = np.where(rng.random(n) < 0.7, rng.permutation(n), -1)
    tree = kdtree.KdTree.build(avatars)
    collapsed = tree.collapsed(threads=threads) or tree
    # Built straight from the avatars (a sample of 2 told the duplicates), or None.
    direct = kdtree.KdTree.build_collapsed(avatars, threads=threads, sample=2) or tree
    for rows, links in ((own, own), (None, np.arange(n))):
        rivals = np.where(links >= 0, links, rng.integers(0, n, n))
        thresholds = engine.own_thresholds(queries, avatars[rivals], 0.0)
        below = engine.strictly_below(thresholds)
        expected = brute_force_within(queries, thresholds, links, avatars)
        counts, closer = collapsed.count_and_closer(
            queries, thresholds, rows, below, threads=threads, cap=cap
        )
        capped = expected if cap is None else np.minimum(expected, cap)
        np.testing.assert_array_equal(counts, capped)
        np.testing.assert_array_equal(closer, brute_force_closer(queries, below, links, avatars))
        plain = tree.count_rivals(queries, thresholds, rows, threads=threads, cap=cap)
        np.testing.assert_array_equal(counts, plain)
        found, flags = direct.count_and_closer(
            queries, thresholds, rows, below, threads=threads, cap=cap
        )
        np.testing.assert_array_equal(found, counts)
        np.testing.assert_array_equal(flags, closer)


def test_a_collapsed_tree_holds_each_distinct_avatar_once_with_its_copies() -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(-2, 3, size=(40, 3)).astype(np.float64)
    avatars = values[rng.integers(0, len(values), 1_000)]
    avatars[rng.random(avatars.shape) < 0.1] *= -1.0  # -0.0 beside 0.0: one value
    tree = kdtree.KdTree.build(avatars)
    collapsed = tree.collapsed()
    assert collapsed is not None
    assert collapsed.weights is not None
    distinct = np.unique(avatars + 0.0, axis=0)
    assert len(collapsed.points) == len(distinct)
    assert collapsed.avatars == len(avatars)
    np.testing.assert_array_equal(collapsed.points[collapsed.position], avatars)
    np.testing.assert_array_equal(collapsed.points, avatars[collapsed.order])
    copies = np.diff(collapsed.weights)
    np.testing.assert_array_equal(copies, np.bincount(collapsed.position))
    for node in range(len(collapsed.begin)):
        inside = collapsed.points[collapsed.begin[node] : collapsed.end[node]]
        assert (inside >= collapsed.lower[node]).all()
        assert (inside <= collapsed.upper[node]).all()
    assert collapsed.collapsed() is None  # once is enough


def test_a_tree_collapsed_from_the_avatars_holds_each_once_with_its_copies() -> None:
    rng = np.random.default_rng(4)
    values = rng.integers(-2, 3, size=(30, 2)).astype(np.float64)
    avatars = values[rng.integers(0, len(values), 20_000)]
    avatars[: len(avatars) // 2] = rng.normal(size=(len(avatars) // 2, 2))  # half distinct
    collapsed = kdtree.KdTree.build_collapsed(avatars)
    assert collapsed is not None
    assert collapsed.weights is not None
    assert len(collapsed.points) == len(np.unique(avatars, axis=0))
    np.testing.assert_array_equal(collapsed.points[collapsed.position], avatars)
    np.testing.assert_array_equal(collapsed.points, avatars[collapsed.order])
    np.testing.assert_array_equal(np.diff(collapsed.weights), np.bincount(collapsed.position))
    # Below 4 samples of avatars, or with a sample mostly distinct, the plain tree decides.
    assert kdtree.KdTree.build_collapsed(avatars[:16_384]) is None
    avatars[:-100] = rng.normal(size=(len(avatars) - 100, 2))  # 1 in 200 repeats
    assert kdtree.KdTree.build_collapsed(avatars) is None


def test_distinct_avatars_keep_their_tree() -> None:
    avatars = np.random.default_rng(6).normal(size=(1_000, 3))
    assert kdtree.KdTree.build(avatars).collapsed() is None
    assert kdtree.KdTree.build_collapsed(avatars, sample=8) is None


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("told_by", ["sample", "tree"])
def test_heavy_duplicates_count_and_flag_as_the_brute_force(
    monkeypatch: pytest.MonkeyPatch, strategy: engine.Strategy, told_by: str
) -> None:
    """Told by a sample before any tree is built, or by the plain tree: every strategy
    gives the brute force's counts and closer flags, in place or not."""
    monkeypatch.setattr(kdtree, "COLLAPSE_SAMPLE", 8 if told_by == "sample" else 10**9)
    told: list[bool] = []
    build_collapsed = kdtree.KdTree.build_collapsed

    def spy(avatars: np.ndarray, **options: int) -> kdtree.KdTree | None:
        found = build_collapsed(avatars, **options)
        told.append(found is not None)
        return found

    monkeypatch.setattr(kdtree.KdTree, "build_collapsed", spy)
    rng = np.random.default_rng(9)
    originals = rng.integers(-1, 2, size=(600, 3)).astype(np.float64)
    avatars = originals[rng.permutation(len(originals))]
    avatars[rng.random(len(avatars)) < 0.1] += 0.5  # a few more values, ties with them
    expected = brute_force_counts(originals, avatars, 1e-9)
    d2 = ((originals[:, None, :] - avatars[None, :, :]) ** 2).sum(axis=2)
    closer_expected = (d2 < np.diag(d2)[:, None]).any(axis=1)
    for overwrite in (False, True):
        x, y = originals.copy(), avatars.copy()
        result = engine.cloaking_result(
            x, y, strategy=strategy, closer=True, overwrite_input=overwrite
        )
        np.testing.assert_array_equal(result.counts, expected)
        np.testing.assert_array_equal(result.closer, closer_expected & (expected > 0))
    if strategy != "flat":
        assert told == [told_by == "sample"] * 2


@pytest.mark.parametrize("strategy", ["auto", "tree"])
def test_duplicated_avatars_are_counted_on_the_collapsed_tree(
    monkeypatch: pytest.MonkeyPatch, strategy: engine.Strategy
) -> None:
    """The walk runs on each distinct avatar once (counts unchanged), and the probe predicts
    a flat pass over every avatar, not over the distinct ones."""
    walked: list[kdtree.KdTree] = []
    walk_counts = kdtree.KdTree.walk_counts

    def spy(tree: kdtree.KdTree, *args: object, **kwargs: object) -> object:
        walked.append(tree)
        return walk_counts(tree, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kdtree.KdTree, "walk_counts", spy)
    rng = np.random.default_rng(8)
    originals = rng.integers(-2, 3, size=(3_000, 2)).astype(np.float64)
    avatars = originals[rng.permutation(len(originals))]
    counts = count_cloaking(originals, avatars, tie_tol=0.0, strategy=strategy)
    np.testing.assert_array_equal(counts, brute_force_counts(originals, avatars, 0.0))
    assert [len(tree.points) for tree in walked] == [25]
    tree = kdtree.KdTree.build(avatars).collapsed()
    assert tree is not None
    x, limits = originals, engine.own_thresholds(originals, avatars, 0.0)
    full = engine.probe(kdtree.KdTree.build(avatars), x, limits, None, threads=1)
    assert engine.probe(tree, x, limits, None, threads=1).flat_seconds == full.flat_seconds


@pytest.mark.parametrize("strategy", ["auto", "tree", "flat"])
def test_a_count_keeps_the_tree_it_built_on_the_avatars_array(strategy: engine.Strategy) -> None:
    """``keep_tree`` with ``overwrite_input``: the plain tree's points are the avatars'
    array reordered in place (whichever walk counted), the originals stay in their rows,
    and the counts are the brute force's. Nothing is kept where no tree was built."""
    rng = np.random.default_rng(4)
    originals = rng.integers(-3, 4, size=(2_000, 3)).astype(np.float64)
    avatars = originals + rng.integers(-1, 2, size=originals.shape)
    expected = brute_force_counts(originals, avatars, 0.0)
    (x, y), _ = canonical_scale(originals, avatars)  # the count then scales by 1, in place
    given_x, given_y = x.copy(), y.copy()
    result = engine.cloaking_result(
        x, y, tie_tol=0.0, strategy=strategy, overwrite_input=True, keep_tree=True
    )
    np.testing.assert_array_equal(result.counts, expected)
    np.testing.assert_array_equal(x, given_x)  # the queries were not taken along
    if strategy == "flat":
        assert result.tree is None
        np.testing.assert_array_equal(y, given_y)
        return
    tree = result.tree
    assert tree is not None
    assert tree.weights is None
    assert tree.points is y  # the avatars' array, reordered
    np.testing.assert_array_equal(tree.points[tree.position], given_y)
    np.testing.assert_array_equal(tree.order, np.argsort(tree.position))
    restored = engine.cloaking_result(
        x, given_y.copy(), overwrite_input=True, restore_order=True, keep_tree=True
    )
    assert restored.tree is None  # put back in row order: no tree of them is left


def test_a_count_on_heavy_duplicates_keeps_no_tree() -> None:
    # Told from a sample before any plain tree is built: the collapsed tree is no avatar's.
    rng = np.random.default_rng(2)
    avatars = rng.integers(0, 3, size=(20_000, 2)).astype(np.float64)
    assert engine.cloaking_result(avatars, avatars[::-1].copy(), keep_tree=True).tree is None


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_trees_built_side_by_side_are_those_built_alone(threads: int) -> None:
    rng = np.random.default_rng(6)
    arrays = [rng.integers(-3, 4, size=(n, 3)).astype(np.float64) for n in (70_000, 5, 0)]
    trees = kdtree.build_side_by_side([a.copy() for a in arrays], threads=threads)
    assert len(trees) == 3
    for array, tree in zip(arrays, trees, strict=True):
        alone = kdtree.KdTree.build(array)
        np.testing.assert_array_equal(tree.points, alone.points)
        np.testing.assert_array_equal(tree.order, alone.order)
        np.testing.assert_array_equal(tree.lower, alone.lower)


@settings(max_examples=examples(60), deadline=None)
@given(
    hnp.arrays(
        np.float64,
        st.tuples(st.integers(0, 30), st.integers(1, 4)),
        elements=st.sampled_from([0.0, -0.5, 0.25, 3.0, 2.0**40, -(2.0**45) + 0.25, 1e200]),
    ),
    st.integers(0, 2**16),
    st.booleans(),
)
def test_paired_rows_give_the_definition_in_either_layout(
    originals: np.ndarray, seed: int, fortran: bool
) -> None:
    # Rows in C order take the row-at-a-time kernel, others the column loop: both must give
    # the definition's floats (differences squared, summed in column order from 0.0), a
    # square beyond float64's range included (inf), and `own_thresholds` its product.
    avatars = originals[np.random.default_rng(seed).permutation(len(originals))]
    layout = np.asfortranarray if fortran else np.ascontiguousarray
    x, y = layout(originals), layout(avatars)
    expected = []
    for a, b in zip(originals.tolist(), avatars.tolist(), strict=True):
        total = 0.0
        for p, q in zip(a, b, strict=True):
            total += (p - q) * (p - q)
        expected.append(total)
    every = slice(None)
    assert engine.squared_distances(x, y, every, every).tolist() == expected
    assert engine.own_thresholds(x, y, 0.5).tolist() == [t * 1.5 for t in expected]
