"""Nearest two originals of each avatar: exact against a float64 brute force, scale-free."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.data import make_case
from polars_hidden_rate.engine import count_cloaking
from polars_hidden_rate.engine._kernels import sorted_by_key
from polars_hidden_rate.engine.arrays import squared_distances
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import (
    KNearest,
    k_nearest,
    merge_nearest_two,
    nearest_two,
    scaled_pair,
    squared_nearest,
    squared_nearest_two,
    tied_matches,
    walk_order,
    within_reach,
)
from polars_hidden_rate.engine.scale import canonical_scale
from tests.helpers import (
    OFFSETS,
    brute_force_two,
    brute_k_nearest,
    examples,
    nearest_two_case,
    nearest_two_cases,
)


@settings(max_examples=examples(150), deadline=None)
@given(case=nearest_two_cases(), threads=st.sampled_from([1, 3]))
def test_nearest_two_equals_brute_force(case: tuple[np.ndarray, np.ndarray], threads: int) -> None:
    originals, avatars = case
    first, second = brute_force_two(originals, avatars)
    found = nearest_two(originals, avatars, threads=threads)
    np.testing.assert_array_equal(found.nearest, np.sqrt(first))
    np.testing.assert_array_equal(found.second, np.sqrt(second))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(second == 0, 1.0, np.sqrt(first) / np.sqrt(second))
    np.testing.assert_array_equal(found.ratio, ratio)


@settings(max_examples=examples(150), deadline=None)
@given(case=nearest_two_cases(), threads=st.sampled_from([1, 3]))
def test_the_nearest_alone_is_the_first_of_the_two(
    case: tuple[np.ndarray, np.ndarray], threads: int
) -> None:
    # The walk that prunes at the nearest finds the same float as the brute force's smallest.
    originals, avatars = case
    points, queries, _ = scaled_pair(originals, avatars)
    tree = KdTree.build(points)
    first, _ = brute_force_two(points, queries)
    np.testing.assert_array_equal(squared_nearest(tree, queries, threads=threads), first)


@settings(max_examples=examples(150), deadline=None)
@given(case=nearest_two_cases(), threads=st.sampled_from([1, 3]), seed=st.integers(0, 2**32 - 1))
def test_any_walk_order_gives_the_brute_force(
    case: tuple[np.ndarray, np.ndarray], threads: int, seed: int
) -> None:
    """The queries' order is the walk's choice, never the result's: a random order, and
    ``linked`` (the avatars in their originals' order in the tree), give the brute force."""
    originals, avatars = case
    points, queries, _ = scaled_pair(originals, avatars)
    tree = KdTree.build(points)
    first, second = brute_force_two(points, queries)
    rows = np.random.default_rng(seed).permutation(len(queries))
    found = squared_nearest_two(tree, queries, threads=threads, rows=rows)
    np.testing.assert_array_equal(found, np.column_stack([first, second]))
    np.testing.assert_array_equal(squared_nearest(tree, queries, threads=threads, rows=rows), first)
    linked = avatars[: len(originals)]
    if len(linked) < len(originals):  # as many avatars as originals: repeat the last ones
        linked = np.concatenate([linked, originals[len(linked) :] + 0.5])
    expected = nearest_two(originals, linked, threads=threads)
    got = nearest_two(originals.copy(), linked.copy(), threads=threads, linked=True)
    np.testing.assert_array_equal(got.nearest, expected.nearest)
    np.testing.assert_array_equal(got.second, expected.second)


@settings(max_examples=examples(150), deadline=None)
@given(case=nearest_two_cases(), threads=st.sampled_from([1, 3]), seed=st.integers(0, 2**32 - 1))
def test_a_seeded_walk_of_some_queries_gives_the_brute_force(
    case: tuple[np.ndarray, np.ndarray], threads: int, seed: int
) -> None:
    # Each query seeded with the d2 of one point of the tree (as an own avatar's), some
    # queries walked from it, the others left at it where it is their nearest already.
    originals, avatars = case
    points, queries, _ = scaled_pair(originals, avatars)
    tree = KdTree.build(points)
    first, _ = brute_force_two(points, queries)
    rng = np.random.default_rng(seed)
    chosen = rng.integers(0, len(points), len(queries))
    seeds = squared_distances(queries, points, slice(None), chosen)
    walked = rng.permutation(np.flatnonzero(rng.random(len(queries)) < 0.6))
    found = squared_nearest(tree, queries, threads=threads, rows=walked, seed=seeds)
    np.testing.assert_array_equal(found[walked], first[walked])
    # A query not walked keeps its seed, beyond its nearest or not: the caller decides.
    unwalked = np.setdiff1d(np.arange(len(queries)), walked)
    np.testing.assert_array_equal(found[unwalked], seeds[unwalked])


@settings(max_examples=examples(150), deadline=None)
@given(
    case=nearest_two_cases(),
    threads=st.sampled_from([1, 3]),
    shift=st.sampled_from([-1, 0, 1]),
)
def test_within_reach_is_the_brute_force_s_any_within(
    case: tuple[np.ndarray, np.ndarray], threads: int, shift: int
) -> None:
    # Thresholds at the nearest d2 exactly (a tie reaches), one float below or above it.
    originals, avatars = case
    points, queries, _ = scaled_pair(originals, avatars)
    tree = KdTree.build(points)
    first, _ = brute_force_two(points, queries)
    thresholds = first.copy()
    if shift:  # (none below 0: a threshold is a squared distance)
        thresholds = np.maximum(np.nextafter(first, shift * np.inf), 0.0)
    expected = first <= thresholds
    np.testing.assert_array_equal(
        within_reach(tree, queries, thresholds, threads=threads), expected
    )


def test_nothing_is_within_reach_of_an_empty_tree() -> None:
    tree = KdTree.build(np.empty((0, 2)))
    queries = np.zeros((3, 2))
    found = within_reach(tree, queries, np.array([0.0, 1.0, np.inf]), threads=1)
    assert found.tolist() == [False, False, False]


def test_tied_runs_down_to_empty_leaves_keep_every_walk_exact() -> None:
    # Runs of ties of sizes 3072, 768, ..., 3, 1 on one coordinate: the splits between them
    # leave nodes of one row, and empty leaves, deep in the tree.
    sizes = [3072, 768, 192, 48, 12, 3, 1]
    points = np.repeat(np.arange(len(sizes), dtype=np.float64), sizes)[:, None]
    tree = KdTree.build(points)
    first_leaf = (len(tree.begin) - 1) // 2
    assert (tree.end[first_leaf:] == tree.begin[first_leaf:]).any()  # an empty leaf
    queries = np.linspace(-1.0, 7.5, 35)[:, None]
    first, second = brute_force_two(points, queries)
    best = squared_nearest_two(tree, queries, threads=2)
    np.testing.assert_array_equal(best, np.column_stack([first, second]))
    np.testing.assert_array_equal(squared_nearest(tree, queries, threads=2), first)
    reach = within_reach(tree, queries, np.full(len(queries), 0.25), threads=2)
    np.testing.assert_array_equal(reach, first <= 0.25)
    thresholds = np.full(len(queries), 1.0)
    none = np.full(len(queries), -1, dtype=np.int64)
    d2 = (queries - points.T) ** 2
    np.testing.assert_array_equal(
        tree.count_rivals(queries, thresholds, none, threads=2), (d2 <= 1.0).sum(axis=1)
    )


def test_linked_avatars_are_one_per_original() -> None:
    with pytest.raises(ValueError, match="linked avatars need one per original, got 2 for 3"):
        nearest_two(np.zeros((3, 2)), np.zeros((2, 2)), linked=True)


def test_near_positions_on_threads_are_those_of_one_thread() -> None:
    originals, avatars = make_case(20_000, 3)
    tree = KdTree.build(originals)
    one = tree.near_positions(avatars)
    np.testing.assert_array_equal(tree.near_positions(avatars, threads=3), one)
    assert len(np.unique(one)) > 100  # the queries reach many leaves


@pytest.mark.parametrize("scale", [1.0, 2.0**1023])
def test_each_point_s_cell_is_its_own_leaf(scale: float) -> None:
    # Distinct continuous points: the cell the splits send a point to is the leaf holding it,
    # near the largest float too (a split's value must not overflow to inf).
    points = np.random.default_rng(3).uniform(1.0, 1.9, size=(5_000, 4)) * scale
    tree = KdTree.build(points)
    leaves = tree.leaves_of(tree.points, threads=2)
    assert leaves.min() >= (len(tree.begin) - 1) // 2  # leaves, not inner nodes
    positions = np.arange(len(points))
    assert np.all((tree.begin[leaves] <= positions) & (positions < tree.end[leaves]))
    np.testing.assert_array_equal(tree.near_positions(points), tree.begin[tree.leaves_of(points)])


@settings(max_examples=examples(150), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 400),
    d=st.integers(1, 3),
    offset=st.sampled_from(OFFSETS),
    tie_tol=st.sampled_from([0.0, 0.25]),
)
def test_tied_matches_equal_the_brute_force_in_deep_trees(
    seed: int, n: int, d: int, offset: float, tie_tol: float
) -> None:
    # A coarse grid in trees of many leaves: records tied nearest on both sides of a split,
    # some exactly on a sibling box's edge (a tie_tol of 1/4 puts a d2 of 5 on that of 4).
    rng = np.random.default_rng(seed)
    points, queries = nearest_two_case(rng, n=n, m=60, d=d, step=1.0, offset=offset)
    (points, queries), _ = canonical_scale(points, queries)
    values = rng.integers(0, 3, n).astype(np.float64)
    secrets = rng.integers(0, 3, len(queries)).astype(np.float64)
    tree = KdTree.build(points, 2)
    tied, matching = tied_matches(tree, values, queries, secrets, 0.0, tie_tol=tie_tol, threads=2)
    for i, query in enumerate(queries):
        d2 = np.zeros(n)
        for k in range(d):
            diff = query[k] - points[:, k]
            d2 += diff * diff
        near = d2 <= d2.min() * (1.0 + tie_tol)
        assert tied[i] == np.count_nonzero(near)
        assert matching[i] == np.count_nonzero(values[near] == secrets[i])


@pytest.mark.parametrize("n", [1, 40, 1_000])
def test_records_without_coordinates_are_one_point(n: int) -> None:
    # No column to split on: every record is at d2 = 0 from every other, in a tree of depth > 0.
    empty = np.zeros((n, 0))
    np.testing.assert_array_equal(count_cloaking(empty, empty), np.full(n, n - 1))
    found = nearest_two(empty, empty)
    np.testing.assert_array_equal(found.nearest, np.zeros(n))
    np.testing.assert_array_equal(found.second, np.zeros(n) if n > 1 else np.full(n, np.inf))


@settings(max_examples=examples(100), deadline=None)
@given(keys=st.lists(st.integers(0, 9), max_size=200))
def test_sorted_by_key_is_a_stable_sort(keys: list[int]) -> None:
    found = sorted_by_key(np.array(keys, dtype=np.int64), 10)
    np.testing.assert_array_equal(found, np.argsort(np.array(keys, dtype=np.int64), kind="stable"))


def test_walk_order_groups_the_queries_of_each_leaf() -> None:
    originals, avatars = make_case(20_000, 3)
    tree = KdTree.build(originals)
    order = walk_order(tree, avatars, threads=2)
    np.testing.assert_array_equal(np.sort(order), np.arange(len(avatars)))
    leaves = tree.leaves_of(avatars)[order]
    assert np.all(np.diff(leaves) >= 0)


@settings(max_examples=examples(80), deadline=None)
@given(case=nearest_two_cases(), k=st.integers(-1000, 1000))
def test_power_of_two_rescaling_scales_distances_exactly(
    case: tuple[np.ndarray, np.ndarray], k: int
) -> None:
    originals, avatars = case
    # Keep every scaled coordinate finite (the offsets reach 2^45).
    largest = max(np.abs(originals).max(), np.abs(avatars).max())
    k = min(k, 1023 - math.frexp(largest)[1])
    base = nearest_two(originals, avatars)
    scaled = nearest_two(np.ldexp(originals, k), np.ldexp(avatars, k))
    np.testing.assert_array_equal(scaled.nearest, np.ldexp(base.nearest, k))
    np.testing.assert_array_equal(scaled.second, np.ldexp(base.second, k))
    np.testing.assert_array_equal(scaled.ratio, base.ratio)
    np.testing.assert_array_equal(scaled.scaled_nearest, base.scaled_nearest)


@pytest.mark.parametrize("factor", [1e155, 1e-170, 2.0**600, 2.0**-600])
def test_no_square_overflows_or_underflows(factor: float) -> None:
    originals = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]]) * factor
    avatars = np.array([[0.0, 1.0], [3.0, 4.0]]) * factor
    found = nearest_two(originals, avatars)
    # Squared in the input units, these distances overflow to inf or vanish into 0.
    np.testing.assert_allclose(found.nearest, [1.0 * factor, 0.0], rtol=1e-15)
    np.testing.assert_allclose(found.second, [math.hypot(3, 3) * factor, 5.0 * factor], rtol=1e-15)
    np.testing.assert_allclose(found.ratio, [1 / math.hypot(3, 3), 0.0], rtol=1e-15)


@pytest.mark.parametrize("profile", ["gaussian", "discrete"])
def test_avatar_like_data_on_several_threads(profile: str) -> None:
    originals, avatars = make_case(3000, 4, profile=profile)  # type: ignore[arg-type]
    first, second = brute_force_two(originals, avatars)
    found = nearest_two(originals, avatars, threads=4)
    np.testing.assert_array_equal(found.nearest, np.sqrt(first))
    np.testing.assert_array_equal(found.second, np.sqrt(second))


def test_single_original_has_no_second() -> None:
    found = nearest_two(np.array([[1.0, 1.0]]), np.array([[1.0, 2.0], [1.0, 1.0]]))
    assert found.nearest.tolist() == [1.0, 0.0]
    assert found.second.tolist() == [np.inf, np.inf]
    assert found.ratio.tolist() == [0.0, 0.0]


def test_no_originals_is_refused() -> None:
    with pytest.raises(ValueError, match="no originals"):
        nearest_two(np.zeros((0, 2)), np.zeros((3, 2)))


def test_canonical_scale_is_one_exact_power_of_two() -> None:
    originals = np.array([[3.0, -4.0], [0.5, 0.25]])
    avatars = np.array([[1.0, 2.0]])
    (scaled_o, scaled_a), exponent = canonical_scale(originals, avatars)
    # The largest |coordinate|, 4 = 2^2, lands in [2^(t-1), 2^t) with t = (1019 - 1) // 2.
    assert exponent == 509 - 3
    np.testing.assert_array_equal(scaled_o, np.ldexp(originals, exponent))
    np.testing.assert_array_equal(np.ldexp(scaled_a, -exponent), avatars)
    for k in (-1000, -1, 7, 900):
        (again_o, again_a), again = canonical_scale(np.ldexp(originals, k), np.ldexp(avatars, k))
        assert again == exponent - k
        np.testing.assert_array_equal(again_o, scaled_o)
        np.testing.assert_array_equal(again_a, scaled_a)


@pytest.mark.parametrize("d", [1, 2, 3, 8, 9, 1000])
def test_canonical_scale_leaves_every_d2_finite(d: int) -> None:
    largest = np.finfo(np.float64).max
    originals = np.full((1, d), largest)
    avatars = np.full((1, d), -largest)
    (x, y), _ = canonical_scale(originals, avatars)
    diff = x - y
    assert np.isfinite((diff * diff).sum())
    # The largest coordinate lands in [2^(t-1), 2^t), t = (1019 - ceil(log2 d)) // 2.
    top = (1019 - (d - 1).bit_length()) // 2
    assert 2.0 ** (top - 1) <= np.abs(x).max() < 2.0**top


def test_canonical_scale_of_zeros_and_bad_input() -> None:
    (zeros,), exponent = canonical_scale(np.zeros((2, 3)))
    assert exponent == 0
    assert not zeros.any()
    with pytest.raises(ValueError, match="finite"):
        canonical_scale(np.array([[np.nan]]))
    with pytest.raises(ValueError, match="finite"):
        canonical_scale(np.array([[1.0]]), np.array([[np.inf]]))
    with pytest.raises(ValueError, match="same number of columns"):
        canonical_scale(np.zeros((2, 3)), np.zeros((2, 2)))


@settings(max_examples=examples(100), deadline=None)
@given(case=nearest_two_cases(), cuts=st.lists(st.integers(1, 119), max_size=6))
def test_shards_merged_equal_the_brute_force(
    case: tuple[np.ndarray, np.ndarray], cuts: list[int]
) -> None:
    # The decomposition the Dask path relies on: any split of the originals, merged.
    originals, avatars = case
    points, queries, _ = scaled_pair(originals, avatars)
    best = np.full((len(queries), 2), np.inf)
    for shard in np.split(points, sorted({c for c in cuts if c < len(points)})):
        tree = KdTree.build(shard, threads=1)
        merge_nearest_two(best, squared_nearest_two(tree, queries, threads=1))
    first, second = brute_force_two(points, queries)
    np.testing.assert_array_equal(best[:, 0], first)
    np.testing.assert_array_equal(best[:, 1], second)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(*[st.sampled_from([0.0, 1.0, 2.0, np.inf])] * 4).map(sorted), min_size=1))
def test_merge_keeps_the_two_smallest_with_duplicates(rows: list[list[float]]) -> None:
    values = np.array(rows)
    best, other = values[:, [0, 2]].copy(), values[:, [1, 3]].copy()
    best.sort(axis=1)
    other.sort(axis=1)
    merge_nearest_two(best, other)
    np.testing.assert_array_equal(best, values[:, :2])


@settings(max_examples=examples(40), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    leaf_size=st.sampled_from([1, 2, 16]),
    offset=st.sampled_from([0.0, 2.0**40, -(2.0**60)]),
    reach=st.sampled_from([1.0, 64.0]),
)
def test_walks_from_the_query_s_leaf_are_the_brute_force_s_in_deep_trees(
    seed: int, leaf_size: int, offset: float, reach: float
) -> None:
    # Deep trees of a grid (copies, ties at every split), queries inside it, in the gaps
    # between boxes and far outside it (`reach` 64): each walk starts at the leaf whose
    # cell holds the query and climbs; every answer is the brute force's.
    rng = np.random.default_rng(seed)
    points = rng.integers(-4, 5, size=(700, 3)).astype(np.float64) + offset
    queries = rng.integers(-4, 5, size=(150, 3)) * reach * rng.choice([0.5, 1.0], size=(150, 3))
    tree = KdTree.build(points, leaf_size)
    first, second = brute_force_two(points, queries + offset)
    queries = queries + offset
    np.testing.assert_array_equal(
        squared_nearest_two(tree, queries, threads=2), np.column_stack([first, second])
    )
    np.testing.assert_array_equal(squared_nearest(tree, queries, threads=1), first)
    for thresholds in (first, np.nextafter(first, -np.inf)):
        np.testing.assert_array_equal(
            within_reach(tree, queries, np.maximum(thresholds, 0.0), threads=2),
            first <= np.maximum(thresholds, 0.0),
        )


def test_every_split_separates_its_children_s_boxes() -> None:
    # The descent's coordinate and value per inner node lie between the two boxes, so a
    # query goes to the cell the build put it in; an empty child sends it the other way.
    points = np.repeat(np.arange(6, dtype=np.float64), [40, 10, 3, 1, 1, 30])[:, None]
    points = np.column_stack([points, np.random.default_rng(0).normal(size=len(points))])
    tree = KdTree.build(points, 2)
    dims, values = tree.splits
    for node, (k, value) in enumerate(zip(dims, values, strict=True)):
        left, right = 2 * node + 1, 2 * node + 2
        if tree.begin[left] < tree.end[left]:
            assert tree.upper[left, k] <= value
        else:
            assert value == -np.inf
        if tree.begin[right] < tree.end[right]:
            assert value <= tree.lower[right, k]


def test_gathered_distances_take_indices_as_numpy_does() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(6, 3)), rng.normal(size=(4, 3))
    rows, cols = np.array([0, 5, -1, -6]), np.array([3, -4, 0, 2])
    expected = ((a[rows] - b[cols]) ** 2).sum(axis=1)  # d = 3: the same order of sums
    np.testing.assert_array_equal(squared_distances(a, b, rows, cols), expected)
    np.testing.assert_array_equal(
        squared_distances(a[:4], b, slice(None), cols), ((a[:4] - b[cols]) ** 2).sum(axis=1)
    )
    with pytest.raises(IndexError, match="out of range for 4 rows"):
        squared_distances(a, b, rows, np.array([0, 1, 2, 4]))


def test_a_nan_threshold_is_refused_by_within_reach() -> None:
    tree = KdTree.build(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="`thresholds` hold NaN"):
        within_reach(tree, np.zeros((2, 2)), np.array([1.0, np.nan]), threads=1)


def _segments(found: KNearest) -> list[tuple[list[int], list[float], list[bool], float]]:
    """Each query's segment sorted by (distance, row), as the brute force lists them."""
    out = []
    for i, (lo, hi) in enumerate(zip(found.offsets[:-1], found.offsets[1:], strict=True)):
        order = np.lexsort((found.rows[lo:hi], found.distances[lo:hi]))
        out.append(
            (
                found.rows[lo:hi][order].tolist(),
                found.distances[lo:hi][order].tolist(),
                found.certain[lo:hi][order].tolist(),
                float(found.edge[i]),
            )
        )
    return out


knn_grid = st.lists(
    st.tuples(st.integers(-2, 2), st.integers(-1, 1), st.integers(0, 2)), min_size=1, max_size=40
)


@settings(max_examples=examples(200), deadline=None)
@given(
    candidates=knn_grid,
    queries=knn_grid,
    k=st.integers(1, 5),
    tie_tol=st.sampled_from([0.0, 1e-9, 0.5]),
    numeric=st.sampled_from([None, 0, 1, 2, 3]),
    unit=st.sampled_from([1.0, 0.1, 2.0**-600, 2.0**600]),
    threads=st.sampled_from([1, 3]),
    leaf=st.sampled_from([1, 2, 16]),
)
def test_k_nearest_equals_the_brute_force_with_ties_and_duplicates(
    candidates: list[tuple[int, int, int]],
    queries: list[tuple[int, int, int]],
    k: int,
    tie_tol: float,
    numeric: int | None,
    unit: float,
    threads: int,
    leaf: int,
) -> None:
    """Integer grids (ties and duplicates abound), scaled by ``unit`` in the numeric
    columns (inexact at 0.1; in d2, canonically scaled as the callers do): every record
    certain or tied at the edge, its distance and the edge, the floats of the brute force."""
    points, targets = np.array(candidates, dtype=float), np.array(queries, dtype=float)
    if numeric is None:
        (points, targets), _ = canonical_scale(points * unit, targets * unit)
    else:
        points[:, :numeric] *= unit
        targets[:, :numeric] *= unit
    k = min(k, len(points))
    tree = KdTree.build(points, leaf, threads=threads)
    found = k_nearest(tree, targets, k, tie_tol=tie_tol, threads=threads, numeric=numeric)
    assert _segments(found) == brute_k_nearest(points, targets, k, tie_tol, numeric)


@settings(max_examples=examples(50), deadline=None)
@given(seed=st.integers(0, 2**16), numeric=st.sampled_from([None, 2]), k=st.sampled_from([1, 3]))
def test_k_nearest_is_invariant_to_row_order_and_power_of_two_scales(
    seed: int, numeric: int | None, k: int
) -> None:
    rng = np.random.default_rng(seed)
    points = np.column_stack([rng.integers(0, 4, (300, 2)) * 0.25, rng.integers(0, 3, 300)])
    targets = np.column_stack([rng.integers(0, 4, (50, 2)) * 0.25, rng.integers(0, 3, 50)])
    raw = points, targets
    if numeric is None:
        (points, targets), _ = canonical_scale(points, targets)
    found = _segments(
        k_nearest(KdTree.build(points), targets, k, tie_tol=1e-9, threads=2, numeric=numeric)
    )
    order, turn = rng.permutation(300), rng.permutation(50)
    shuffled = k_nearest(
        KdTree.build(points[order]), targets[turn], k, tie_tol=1e-9, threads=1, numeric=numeric
    )
    back = [(sorted(order[r].tolist()), d, c, e) for r, d, c, e in _segments(shuffled)]
    expected = [found[t] for t in turn]
    assert [(sorted(r), d, c, e) for r, d, c, e in expected] == back
    if numeric is None:  # the engine's space: one canonical scale whatever the power of two
        for unit in (2.0**-600, 2.0**600):
            (p, q), _ = canonical_scale(raw[0] * unit, raw[1] * unit)
            assert _segments(k_nearest(KdTree.build(p), q, k, tie_tol=1e-9, threads=2)) == found


def test_k_nearest_refuses_a_k_it_cannot_fill() -> None:
    tree = KdTree.build(np.zeros((3, 1)))
    for k in (0, 4, True):
        with pytest.raises(ValueError, match="`k` must be an integer from 1"):
            k_nearest(tree, np.zeros((1, 1)), k, tie_tol=0.0, threads=1)


@pytest.mark.parametrize("numeric", [None, 1])
def test_k_nearest_among_groups_with_copies_counts_as_among_the_copies(
    numeric: int | None,
) -> None:
    """Identical records walked once with their copies (`distinct_groups`): the edge, and per
    query the certain and tied records, are those of the search among every copy."""
    from polars_hidden_rate.engine.nearest import distinct_groups

    rng = np.random.default_rng(5)
    points = rng.integers(0, 3, (600, 2)).astype(float)
    targets = rng.integers(-1, 4, (80, 2)).astype(float)
    distinct, _, copies = distinct_groups(points)
    for k in (1, 3, 50):
        every = k_nearest(KdTree.build(points), targets, k, tie_tol=0.0, threads=2, numeric=numeric)
        grouped = k_nearest(
            KdTree.build(distinct),
            targets,
            k,
            tie_tol=0.0,
            threads=2,
            numeric=numeric,
            copies=copies,
        )
        assert grouped.edge.tolist() == every.edge.tolist()
        assert grouped.counts().tolist() == every.counts().tolist()
        assert grouped.counts(grouped.certain).tolist() == every.counts(every.certain).tolist()
