"""The membership attack's figures against a brute force over every (member, holdout) pair
(issue 23): ties counting half, the ROC curve of the threshold attack, DeLong's interval."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.exceptions import NoDataError, SchemaError

import polars_hidden_rate as phr
import polars_hidden_rate.engine.kdtree as kdtree_module
import polars_hidden_rate.measures.walks as walks_module
from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.engine import count_cloaking
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import nearest_two, squared_nearest
from polars_hidden_rate.engine.scale import canonical_scale, exponent_for
from polars_hidden_rate.measures.holdout_figures import HoldoutFigures
from polars_hidden_rate.measures.membership import (
    MembershipRisk,
    SmallSampleWarning,
    auc,
    auc_interval,
    tpr_at_fpr,
)
from polars_hidden_rate.measures.overfitting import DcrOverfitting, SmallHoldoutWarning
from polars_hidden_rate.measures.walks import LinkedCloaking
from tests.helpers import examples, release_with_holdout

# Few distinct values, so that ties within and across the two sides are frequent.
scores = st.lists(
    st.sampled_from([0.0, 0.5, 1.0, 1.0 + 2.0**-52, 2.0, 3.0, 1e300, math.inf]),
    min_size=1,
    max_size=30,
)


def brute_auc(members: list[float], holdout: list[float], tie_tol: float = 0.0) -> float:
    """Every pair: a member wins below a holdout score beyond the tolerance, loses above
    it, ties (half) within it."""
    grow = 1.0 + tie_tol

    def psi(a: float, b: float) -> float:
        return 1.0 if a * grow < b else 0.0 if b * grow < a else 0.5

    wins = sum(psi(a, b) for a in members for b in holdout)
    return wins / (len(members) * len(holdout))


def tie_groups(members: list[float], holdout: list[float], tie_tol: float) -> dict[float, float]:
    """Each score's threshold: the sorted scores in runs, each within the tolerance of the
    one before it; a run's scores all map to its first."""
    group: dict[float, float] = {}
    previous = first = -math.inf
    for value in sorted({*members, *holdout}):
        if previous == -math.inf or value > previous * (1.0 + tie_tol):
            first = value
        group[value] = first
        previous = value
    return group


def brute_tpr(
    members: list[float], holdout: list[float], fpr: float, tie_tol: float = 0.0
) -> float:
    """The highest TPR of the randomised threshold attacks with FPR at most ``fpr``: a
    threshold ``t`` taken whole below, and with probability ``q`` at ``t`` itself; with
    ``tie_tol``, each run of scores within the tolerance of the one before is one score."""
    if tie_tol:
        group = tie_groups(members, holdout, tie_tol)
        members, holdout = [group[a] for a in members], [group[b] for b in holdout]
    best = 0.0
    for t in sorted({*members, *holdout, -math.inf}):
        below_h = sum(b < t for b in holdout) / len(holdout)
        at_h = sum(b == t for b in holdout) / len(holdout)
        below_m = sum(a < t for a in members) / len(members)
        at_m = sum(a == t for a in members) / len(members)
        if below_h > fpr:
            continue
        q = 1.0 if at_h == 0 or below_h + at_h <= fpr else (fpr - below_h) / at_h
        best = max(best, below_m + q * at_m)
    return best


@given(members=scores, holdout=scores)
@settings(max_examples=examples(300))
def test_auc_equals_the_pairwise_count_with_ties_half(
    members: list[float], holdout: list[float]
) -> None:
    assert auc(members, holdout) == brute_auc(members, holdout)
    assert auc(members, holdout, tie_tol=1e-9) == brute_auc(members, holdout, 1e-9)


@given(members=scores, holdout=scores, fpr=st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.5, 1.0]))
@settings(max_examples=examples(300))
def test_tpr_at_fpr_is_the_best_randomised_threshold(
    members: list[float], holdout: list[float], fpr: float
) -> None:
    assert tpr_at_fpr(members, holdout, fpr) == pytest.approx(
        brute_tpr(members, holdout, fpr), abs=1e-12
    )
    assert tpr_at_fpr(members, holdout, fpr, tie_tol=1e-9) == pytest.approx(
        brute_tpr(members, holdout, fpr, 1e-9), abs=1e-12
    )


@given(members=scores, holdout=scores)
@settings(max_examples=examples(100))
def test_the_roc_curve_s_area_is_the_auc(members: list[float], holdout: list[float]) -> None:
    # The curve is straight between the FPRs k / h the holdout reaches (it may jump at
    # them), so the midpoint rule on those intervals is its area.
    # With a tolerance too: the scores' runs (1 and 1 + 2^-52) span less than it.
    h = len(holdout)
    for tol in (0.0, 1e-9):
        midpoints = [tpr_at_fpr(members, holdout, (k + 0.5) / h, tie_tol=tol) for k in range(h)]
        assert sum(midpoints) / h == pytest.approx(auc(members, holdout, tie_tol=tol), abs=1e-12)


def test_random_guessing_gives_a_half_and_fpr() -> None:
    rng = np.random.default_rng(0)
    members, holdout = rng.normal(size=20_000), rng.normal(size=20_000)
    assert auc(members, holdout) == pytest.approx(0.5, abs=0.01)
    assert tpr_at_fpr(members, holdout, 0.1) == pytest.approx(0.1, abs=0.01)
    low, high = auc_interval(members, holdout)
    assert low < 0.5 < high


def test_delong_interval_covers_the_true_auc_at_its_level() -> None:
    # Members N(-0.5, 1) against holdout N(0, 1): true AUC = Phi(0.5 / sqrt(2)).
    truth = 0.5 * (1.0 + math.erf(0.5 / 2.0))
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(400):
        low, high = auc_interval(rng.normal(-0.5, 1.0, 60), rng.normal(0.0, 1.0, 80))
        covered += low <= truth <= high
    # 95 % nominal; 400 draws put 2.2 standard deviations at about +-2.4 %.
    assert 0.92 <= covered / 400 <= 0.98


def test_interval_matches_delong_by_hand() -> None:
    members, holdout = [0.0, 1.0, 1.0, 3.0], [1.0, 2.0, 4.0]
    v_m = np.array([3, 2.5, 2.5, 1]) / 3
    v_h = np.array([0.5 * 2 + 1, 3, 4]) / 4
    centre = 9.0 / 12.0
    spread = 1.959963984540054 * math.sqrt(np.var(v_m, ddof=1) / 4 + np.var(v_h, ddof=1) / 3)
    low, high = auc_interval(members, holdout)
    assert (low, high) == pytest.approx((centre - spread, min(1.0, centre + spread)))
    assert auc(members, holdout) == centre


def test_one_record_a_side_gives_the_whole_interval() -> None:
    assert auc_interval([1.0], [2.0, 3.0]) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: auc([], [1.0]), "`members` holds no record"),
        (lambda: auc([1.0], [[1.0]]), "`holdout` must be one score per record"),
        (lambda: auc([math.nan], [1.0]), "`members` holds NaN"),
        (lambda: tpr_at_fpr([1.0], [1.0], 1.5), r"`fpr` must lie in \[0, 1\]"),
        (lambda: auc_interval([1.0], [1.0], 1.0), "`confidence` must lie strictly between 0 and 1"),
    ],
)
def test_bad_scores_are_refused(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def brute_nearest_d2(queries: Float64Array, points: Float64Array) -> Float64Array:
    diff = queries[:, None, :] - points[None, :, :]
    nearest: Float64Array = (diff * diff).sum(axis=2).min(axis=1)
    return nearest


grids = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=n, max_size=n),
        st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=1, max_size=40),
        st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=1, max_size=40),
        st.sampled_from([0.0, 2.0**40, -(2.0**60)]),
        st.sampled_from([1.0, 2.0**-30, 2.0**300]),
    )
)


@given(case=grids)
@settings(max_examples=examples(200))
def test_membership_scores_rank_as_float64_brute_force_distances(
    case: tuple[list[tuple[int, int]], ...],
) -> None:
    # Integer grids: copies, exact ties across members and holdout, zero distances; an
    # offset and a power-of-two scale that the shared scale must not let change a rank.
    originals, synthetic, holdout, offset, unit = case
    arrays = [
        np.array(a, dtype=np.float64) * unit + offset for a in (originals, synthetic, holdout)
    ]
    risk = MembershipRisk.of_arrays(arrays[0], arrays[1], arrays[2], threads=1)
    members_d2 = brute_nearest_d2(arrays[0], arrays[1])
    holdout_d2 = brute_nearest_d2(arrays[2], arrays[1])
    assert risk.auc == brute_auc(list(members_d2), list(holdout_d2), 1e-9)
    assert risk.tpr_at_fpr(0.1) == pytest.approx(
        brute_tpr(list(members_d2), list(holdout_d2), 0.1, 1e-9), abs=1e-12
    )
    assert (risk.members == 0.0).tolist() == (members_d2 == 0.0).tolist()
    assert risk.to_dict()["members"] == len(originals)
    assert risk.to_dict()["synthetic"] == len(synthetic)


@given(
    case=grids, holdout_unit=st.sampled_from([1.0, 4.0, 2.0**-20]), threads=st.sampled_from([1, 3])
)
@settings(max_examples=examples(200))
def test_the_report_s_shared_walks_give_the_separate_figures_bit_for_bit(
    case: tuple[list[tuple[int, int]], ...], holdout_unit: float, threads: int
) -> None:
    # A holdout scaled by 4 (or shrunk) puts the three sets' scale off the pairs' scales
    # now and then: those walks then run on their own, and every figure stays the same.
    originals, synthetic, holdout, offset, unit = case
    o, s = (np.array(a, dtype=np.float64) * unit + offset for a in (originals, synthetic))
    h = np.array(holdout, dtype=np.float64) * unit * holdout_unit + offset
    given_arrays = [a.copy() for a in (o, s, h)]
    found, figures = HoldoutFigures.with_nearest(o, s, h, threads=threads, confidence=0.9)
    for before, after in zip(given_arrays, (o, s, h), strict=True):
        np.testing.assert_array_equal(before, after)  # the caller's arrays, untouched
    alone = nearest_two(o, s)
    np.testing.assert_array_equal(found.nearest, alone.nearest)
    np.testing.assert_array_equal(found.ratio, alone.ratio)
    risk = MembershipRisk.of_arrays(o, s, h, confidence=0.9)
    np.testing.assert_array_equal(figures.membership.members, risk.members)
    np.testing.assert_array_equal(figures.membership.holdout, risk.holdout)
    assert figures.membership.to_dict() == risk.to_dict()
    assert figures.overfitting == DcrOverfitting.of_arrays(o, s, h)
    reference = nearest_two(o, h)
    assert figures.reference_distance_to_closest_median == float(np.median(reference.nearest))
    assert figures.reference_closest_distances_ratio_median == float(np.median(reference.ratio))
    without_dcr = HoldoutFigures.of_arrays(o, s, h, threads=threads, confidence=0.9)
    assert without_dcr.to_dict() == figures.to_dict()
    taken = [a.copy() for a in (o, s, h)]  # arrays the walks may take over: the same figures
    found_in_place, in_place = HoldoutFigures.with_nearest(
        *taken, threads=threads, confidence=0.9, overwrite_input=True
    )
    assert in_place.to_dict() == figures.to_dict()
    np.testing.assert_array_equal(in_place.membership.members, risk.members)
    np.testing.assert_array_equal(found_in_place.nearest, alone.nearest)
    np.testing.assert_array_equal(found_in_place.ratio, alone.ratio)
    # And the brute force: the members' scores at the shared scale rank as its d2 do.
    members_d2, holdout_d2 = brute_nearest_d2(o, s), brute_nearest_d2(h, s)
    assert figures.membership.auc == brute_auc(list(members_d2), list(holdout_d2), 1e-9)


linked_grids = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=n, max_size=n),
        st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=n, max_size=n),
        st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=1, max_size=40),
        st.sampled_from([0.0, 2.0**40, -(2.0**60)]),
        st.sampled_from([1.0, 2.0**-30, 2.0**300]),
    )
)


@given(
    case=linked_grids,
    holdout_unit=st.sampled_from([1.0, 4.0]),
    tie_tol=st.sampled_from([0.0, 1e-9, 9.99e-4]),
)
@settings(max_examples=examples(200))
def test_the_counts_spare_walks_and_change_no_score(
    case: tuple[list[tuple[int, int]], ...], holdout_unit: float, tie_tol: float
) -> None:
    # Linked sets on a grid: own avatars tied with rivals, copies, zero distances. An
    # original no rival hides scores its own avatar's d2 unwalked; the others walk from it.
    # A holdout 4 times larger puts the count's scale off the three sets': every original is
    # then walked (a tie_tol, below 1e-3, never moves the count's power of two).
    originals, synthetic, holdout, offset, unit = case
    o, s = (np.array(a, dtype=np.float64) * unit + offset for a in (originals, synthetic))
    h = np.array(holdout, dtype=np.float64) * unit * holdout_unit + offset
    counts = count_cloaking(o, s, tie_tol=tie_tol)
    cloaking = LinkedCloaking(counts, tie_tol)
    walked: list[int] = []

    def counting_walk(*args: Any, **kwargs: Any) -> Float64Array:
        if kwargs.get("seed") is not None:
            walked.append(len(kwargs["rows"]))
        return squared_nearest(*args, **kwargs)  # the walk the module calls

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walks_module, "squared_nearest", counting_walk)
        found, figures = HoldoutFigures.with_nearest(o, s, h, cloaking=cloaking)
    largest = [float(np.abs(a).max()) for a in (o, s, h)]
    count_scale = exponent_for(max(largest[:2]), 2, tie_tol)
    if count_scale == exponent_for(max(largest), 2):
        # The count's scale is the three sets': only the hidden originals are walked.
        assert walked == [int(np.count_nonzero(counts))]
    else:
        assert walked == []
    alone_found, alone = HoldoutFigures.with_nearest(o, s, h, tie_tol=tie_tol)
    np.testing.assert_array_equal(figures.membership.members, alone.membership.members)
    np.testing.assert_array_equal(found.nearest, alone_found.nearest)
    assert figures.to_dict() == alone.to_dict()
    members_d2 = brute_nearest_d2(o, s)
    assert figures.membership.auc == brute_auc(
        list(members_d2), list(brute_nearest_d2(h, s)), tie_tol
    )
    assert ((figures.membership.members == 0.0) == (members_d2 == 0.0)).all()


@given(
    case=linked_grids,
    holdout_unit=st.sampled_from([1.0, 4.0]),
    tie_tol=st.sampled_from([0.0, 1e-9, 9.99e-4]),
)
@settings(max_examples=examples(150))
def test_the_report_s_count_lends_its_tree_and_changes_no_figure(
    case: tuple[list[tuple[int, int]], ...], holdout_unit: float, tie_tol: float
) -> None:
    # The report's count builds its tree of the avatars on their array, scaled in place
    # with the others; the holdout's walks take it. Where a scale differs (a holdout 4 times
    # larger), the count copies and every tree is built: the same figures.
    originals, synthetic, holdout, offset, unit = case
    o, s = (np.array(a, dtype=np.float64) * unit + offset for a in (originals, synthetic))
    h = np.array(holdout, dtype=np.float64) * unit * holdout_unit + offset
    frames = [pl.DataFrame(a, schema=["a", "b"]) for a in (o, s, h)]
    built: list[int] = []  # the trees the holdout's walks build
    build_side_by_side = kdtree_module.build_side_by_side

    def counted_builds(arrays: list[Float64Array], **options: Any) -> list[KdTree]:
        built.extend(len(array) for array in arrays)
        return build_side_by_side(arrays, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walks_module, "build_side_by_side", counted_builds)
        report = phr.privacy_report(
            frames[0], frames[1], holdout=frames[2], coords=["a", "b"], tie_tol=tie_tol
        )
    largest = [float(np.abs(a).max()) for a in (o, s, h)]
    three = exponent_for(max(largest), 2)
    shared = {
        exponent_for(max(largest[:2]), 2, tie_tol),
        exponent_for(max(largest[:2]), 2),
        exponent_for(max(largest[0], largest[2]), 2),
    } == {three}
    # The originals' tree and the holdout's, and the synthetic records' unless the count
    # lends its own.
    assert built == ([len(o), len(h)] if shared else [len(o), len(h), len(s)])
    np.testing.assert_array_equal(report.local_cloaking, count_cloaking(o, s, tie_tol=tie_tol))
    alone_found, alone = HoldoutFigures.with_nearest(o, s, h, tie_tol=tie_tol)
    np.testing.assert_array_equal(report.distance_to_closest, alone_found.nearest)
    np.testing.assert_array_equal(report.closest_distances_ratio, alone_found.ratio)
    assert report.holdout is not None
    np.testing.assert_array_equal(report.holdout.membership.members, alone.membership.members)
    assert report.holdout.to_dict() == alone.to_dict()
    assert report.holdout.reference_distance_to_closest_median == float(
        np.median(nearest_two(o, h).nearest)
    )


@pytest.mark.parametrize("holdout_unit", [1.0, 8.0])
def test_arrays_at_the_canonical_scale_already_are_copied_not_reordered(
    holdout_unit: float,
) -> None:
    # Data times a power of two that puts it at the canonical magnitude scales by 2^0: the
    # walks must still take copies (their trees reorder them), or the caller's arrays and,
    # where a pair walks on its own (a holdout 8 times larger), the rows of its DCR, move.
    rng = np.random.default_rng(0)
    o = rng.normal(size=(300, 2))
    s = o + 0.1 * rng.normal(size=(300, 2))
    h = rng.normal(size=(300, 2)) * holdout_unit
    e = exponent_for(max(float(np.abs(a).max()) for a in (o, s, h)), 2)
    o, s, h = (np.ldexp(a, e) for a in (o, s, h))
    assert exponent_for(max(float(np.abs(a).max()) for a in (o, s, h)), 2) == 0
    given_arrays = [a.copy() for a in (o, s, h)]
    found, figures = HoldoutFigures.with_nearest(o, s, h, threads=2)
    HoldoutFigures.of_arrays(o, s, h, threads=2)
    for before, after in zip(given_arrays, (o, s, h), strict=True):
        np.testing.assert_array_equal(before, after)
    alone = nearest_two(o, s)
    np.testing.assert_array_equal(found.nearest, alone.nearest)
    frames = [pl.DataFrame(a, schema=["a", "b"]) for a in (o, s, h)]
    report = phr.privacy_report(frames[0], frames[1], holdout=frames[2], coords=["a", "b"])
    np.testing.assert_array_equal(report.distance_to_closest, alone.nearest)
    np.testing.assert_array_equal(report.closest_distances_ratio, alone.ratio)
    assert report.holdout is not None
    assert report.holdout.to_dict() == figures.to_dict()


def test_a_count_s_tree_at_another_scale_is_refused() -> None:
    # Its points are the synthetic records at the count's scale: at another, the walks
    # would read the records' array, which the tree reordered.
    o, s = np.array([[0.0, 0.0], [1.0, 3.0]]), np.array([[1.0, 0.0], [0.0, 2.0]])
    h = s * 64.0  # another power of two for the three sets
    counts = count_cloaking(o, s, tie_tol=0.0)
    tree = KdTree.build(s * 2.0**507)
    cloaking = LinkedCloaking(counts, 0.0, tree)
    with pytest.raises(ValueError, match="not at the three sets' scale"):
        HoldoutFigures.with_nearest(o, s, h, cloaking=cloaking)
    # The three sets at one scale, but the tree's points in the units given, not at it.
    raw = LinkedCloaking(counts, 0.0, KdTree.build(s))
    with pytest.raises(ValueError, match="not at the three sets' scale"):
        HoldoutFigures.with_nearest(o, s, s, cloaking=raw)
    (scaled,), _ = canonical_scale(s)
    HoldoutFigures.with_nearest(o, s, s, cloaking=LinkedCloaking(counts, 0.0, KdTree.build(scaled)))


def test_counts_of_another_link_are_refused() -> None:
    o, h = np.zeros((3, 2)), np.ones((2, 2))
    wrong = LinkedCloaking(np.zeros(2, dtype=np.int64), 0.0)
    with pytest.raises(ValueError, match="linked counts need one per original"):
        HoldoutFigures.with_nearest(o, o + 1.0, h, cloaking=wrong)


@pytest.mark.parametrize("huge", ["holdout", "synthetic"])
def test_a_set_far_larger_than_the_others_keeps_the_pairs_scales(huge: str) -> None:
    # At the scale of all three, the distances among the two tiny sets would underflow to
    # 0: the report's DCR (or the holdout's reference DCR) then walks at its pair's scale.
    rng = np.random.default_rng(5)
    o, s, h = (rng.integers(-3, 4, (30, 2)).astype(np.float64) * 2.0**-450 for _ in range(3))
    if huge == "holdout":
        h = np.ldexp(h, 1450).astype(np.float64) + 2.0**1000
    else:
        s = np.ldexp(s, 1450).astype(np.float64) + 2.0**1000
    found, figures = HoldoutFigures.with_nearest(o, s, h, overwrite_input=huge == "holdout")
    alone = nearest_two(o, s)
    np.testing.assert_array_equal(found.nearest, alone.nearest)
    np.testing.assert_array_equal(found.ratio, alone.ratio)
    reference = nearest_two(o, h)
    assert figures.reference_distance_to_closest_median == float(np.median(reference.nearest))
    assert figures.reference_closest_distances_ratio_median == float(np.median(reference.ratio))
    tiny = reference if huge == "synthetic" else alone
    assert 0.0 < float(tiny.nearest.max()) < 2.0**-440  # not lost to an underflow


def test_the_shared_walks_leave_arrays_of_zeros_as_given() -> None:
    # Every coordinate 0: the scale hands back the caller's arrays, which no tree may reorder.
    zeros = np.zeros((5, 2))
    ones = np.ones((3, 2))
    found, figures = HoldoutFigures.with_nearest(zeros, zeros[:2], ones)
    assert found.nearest.tolist() == [0.0, 0.0]
    assert figures.overfitting.closer_to_training == 1.0
    np.testing.assert_array_equal(zeros, np.zeros((5, 2)))
    _, figures = HoldoutFigures.with_nearest(zeros, zeros[:2], zeros)
    assert figures.membership.auc == 0.5  # every score 0: ties only
    np.testing.assert_array_equal(zeros, np.zeros((5, 2)))


def frames_of(case: tuple[list[tuple[int, int]], ...]) -> list[pl.DataFrame]:
    return [
        pl.DataFrame(np.array(part, dtype=np.float64), schema=["a", "b"], orient="row")
        for part in case[:3]
    ]


@given(case=grids)
@settings(max_examples=examples(100))
def test_membership_risk_on_frames_equals_the_brute_force(
    case: tuple[list[tuple[int, int]], ...],
) -> None:
    originals, synthetic, holdout = frames_of(case)
    risk = phr.membership_risk(originals, synthetic.lazy(), holdout, coords=["a", "b"])
    arrays = [f.to_numpy() for f in (originals, synthetic, holdout)]
    members_d2 = brute_nearest_d2(arrays[0], arrays[1])
    holdout_d2 = brute_nearest_d2(arrays[2], arrays[1])
    assert risk.auc == brute_auc(list(members_d2), list(holdout_d2), 1e-9)
    assert (len(risk.members), risk.synthetic, len(risk.holdout)) == tuple(map(len, arrays))


@given(case=grids)
@settings(max_examples=examples(100))
def test_dcr_overfitting_protection_equals_the_brute_force(
    case: tuple[list[tuple[int, int]], ...],
) -> None:
    # Integer grids put many synthetic records at the same distance from both sets: a tie
    # (within tie_tol) counts for the holdout (SDMetrics' strict <).
    originals, synthetic, holdout = frames_of(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallHoldoutWarning)
        found = phr.dcr_overfitting_protection(originals, synthetic, holdout, coords=["a", "b"])
    arrays = [f.to_numpy() for f in (originals, synthetic, holdout)]
    to_training = brute_nearest_d2(arrays[1], arrays[0])
    to_holdout = brute_nearest_d2(arrays[1], arrays[2])
    closer = float(np.mean(to_training * (1.0 + 1e-9) < to_holdout))
    assert found.closer_to_training == closer
    assert found.sdmetrics_score == min(2.0 * (1.0 - closer), 1.0)
    null = len(originals) / (len(originals) + len(holdout))
    assert found.null_share == null
    assert found.score == pytest.approx(min((1.0 - closer) / (1.0 - null), 1.0), rel=1e-15)
    assert found.to_dict()["synthetic"] == len(synthetic)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallHoldoutWarning)
        of_distances = DcrOverfitting.of_distances(
            to_training, to_holdout, len(originals), len(holdout)
        )
    assert of_distances == found


def test_an_empty_holdout_leaves_every_synthetic_record_closer_to_the_training_set() -> None:
    o, s = np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[0.0, 1.0]])
    with pytest.warns(SmallHoldoutWarning, match="holds 0 records for 2 training records"):
        found = DcrOverfitting.of_arrays(o, s, np.empty((0, 2)))
    assert (found.closer_to_training, found.score, found.holdout) == (1.0, 0.0, 0)
    assert (found.sdmetrics_score, found.null_share) == (0.0, 1.0)


def test_membership_risk_in_the_projected_space() -> None:
    rng = np.random.default_rng(3)
    originals = pl.DataFrame(
        {
            "x": rng.normal(size=200),
            "y": rng.normal(size=200),
            "g": rng.choice(["a", "b", "c"], 200),
        }
    )
    holdout = pl.DataFrame(
        {
            "x": rng.normal(size=150),
            "y": rng.normal(size=150),
            "g": rng.choice(["a", "b", "c"], 150),
        }
    )
    synthetic = originals.head(120).with_columns(pl.col("x") + 0.01)
    risk = phr.membership_risk(originals, synthetic, holdout, categorical=["g"], ncp=3)
    projection = phr.Projection.fit(originals, categorical=["g"], ncp=3)
    names = projection.coordinate_columns(3)
    x, s, h = (
        projection.transform(f).select(names).to_numpy() for f in (originals, synthetic, holdout)
    )
    expected = brute_auc(list(brute_nearest_d2(x, s)), list(brute_nearest_d2(h, s)))
    assert risk.auc == pytest.approx(expected, abs=1e-9)
    assert risk.auc > 0.7  # the copies of 120 of the 200 members give them away
    assert risk.tpr_at_fpr(0.1) > 0.5


def test_a_holdout_of_another_table_is_refused_before_anything_is_read() -> None:

    def never() -> pl.DataFrame:
        raise AssertionError("read")

    unread = pl.defer(never, schema={"a": pl.Float64, "b": pl.Float64})
    cases = [
        (pl.DataFrame({"a": [0.0]}), "lacks 'b'"),
        (
            pl.DataFrame({"a": [0.0], "b": [1.0], "c": [2.0]}),
            "holds 'c', which the originals do not",
        ),
        (
            # Integers against floats are compared by value, as the avatars' are; text is not.
            pl.DataFrame({"a": [0.0], "b": ["1"]}),
            "holdout column 'b' is String, but the originals' is Float64",
        ),
    ]
    for holdout, message in cases:
        for call in (phr.membership_risk, phr.dcr_overfitting_protection):
            with pytest.raises(SchemaError, match=message):
                call(unread, unread, holdout, coords=["a", "b"])


def test_the_holdout_measures_refuse_a_cluster_and_the_gpu() -> None:
    frame = pl.DataFrame({"a": [0.0, 1.0]})
    with pytest.raises(NotImplementedError, match="drop `cluster` and `device`"):
        phr.membership_risk(frame, frame, frame, coords="a", device="gpu")


def test_an_empty_holdout_is_refused_naming_it() -> None:
    frame = pl.DataFrame({"a": [0.0, 1.0]})
    with pytest.raises(NoDataError, match="holdout"):
        phr.membership_risk(frame, frame, frame.clear(), coords="a")


def test_the_report_shows_the_holdout_figures_of_the_functions() -> None:
    originals, avatars, holdout = release_with_holdout()
    options: phr.CountOptions = {"categorical": ["smoker"], "ncp": 3}
    report = phr.privacy_report(originals, avatars, holdout=holdout.lazy(), **options)
    assert report.holdout is not None
    risk = phr.membership_risk(originals, avatars, holdout, **options)
    overfit = phr.dcr_overfitting_protection(originals, avatars, holdout, **options)
    reference = phr.distance_to_closest(originals, holdout, **options)["distance_to_closest"]
    figures = report.to_dict()["holdout"]
    assert figures["membership"] == risk.to_dict()
    assert figures["dcr_overfitting_protection"] == overfit.to_dict()
    assert figures["reference"]["records"] == 200
    assert figures["reference"]["distance_to_closest_median"] == reference.median()
    without = phr.privacy_report(originals, avatars, **options)
    assert without.to_dict()["holdout"] is None
    assert without.passed == report.passed  # the holdout figures have no target
    page = report.to_html()
    assert "Against the holdout" in page
    assert "membership AUC" in page


def test_the_report_refuses_a_holdout_of_another_table() -> None:
    originals, avatars, holdout = release_with_holdout()
    with pytest.raises(SchemaError, match="holdout column 'age' is String"):
        phr.privacy_report(
            originals,
            avatars,
            holdout=holdout.with_columns(pl.col("age").cast(pl.String)),
            categorical=["smoker"],
            ncp=3,
        )


def test_report_holdout_through_the_script(tmp_path: Path) -> None:
    originals, avatars, holdout = release_with_holdout(seed=1)
    paths = {}
    for name, frame in (("originals", originals), ("avatars", avatars), ("holdout", holdout)):
        paths[name] = tmp_path / f"{name}.csv"
        frame.write_csv(paths[name])
    script = Path(sys.executable).parent / "hidden-rate"
    if not script.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    common = [
        str(paths["originals"]),
        str(paths["avatars"]),
        "--categorical",
        "smoker",
        "--ncp",
        "3",
    ]
    done = subprocess.run(
        [str(script), "report", *common, "--holdout", str(paths["holdout"]), "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr  # some target misses
    data = json.loads(done.stdout)
    expected = phr.membership_risk(originals, avatars, holdout, categorical=["smoker"], ncp=3)
    assert data["holdout"]["membership"]["auc"] == expected.auc
    assert data["provenance"]["inputs"]["holdout"]["rows"] == 200
    text = subprocess.run(
        [str(script), "report", *common, "--holdout", str(paths["holdout"])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "membership AUC" in text.stdout
    assert "DCR overfitting protection" in text.stdout
    # The page may not replace the holdout; a holdout of another table is refused: exit 2.
    before = paths["holdout"].read_bytes()
    for extra in (["--html", str(paths["holdout"])],):
        bad = subprocess.run(
            [str(script), "report", *common, "--holdout", str(paths["holdout"]), *extra],
            capture_output=True,
            text=True,
            check=False,
        )
        assert bad.returncode == 2, bad.stderr
        assert bad.stderr.count("\n") == 1, bad.stderr
    assert paths["holdout"].read_bytes() == before
    other = tmp_path / "other.csv"
    holdout.drop("bmi").write_csv(other)
    bad = subprocess.run(
        [str(script), "report", *common, "--holdout", str(other)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert "lacks 'bmi'" in bad.stderr
    assert bad.stderr.count("\n") == 1


def test_the_json_reports_the_tpr_at_10_percent_false_positives() -> None:
    members = np.arange(100, dtype=np.float64)
    holdout = np.arange(100, dtype=np.float64) + 40.0
    risk = MembershipRisk(members, holdout, 7)
    found = risk.to_dict()
    assert found["fpr"] == 0.1
    assert found["tpr_at_fpr"] == tpr_at_fpr(members, holdout, 0.1) == risk.tpr_at_fpr()
    assert tpr_at_fpr(members, holdout, 0.05) != found["tpr_at_fpr"]  # a 5 % would show


def test_membership_risk_takes_its_confidence_and_checks_it_first() -> None:
    originals, avatars, holdout = release_with_holdout()
    options: phr.CountOptions = {"categorical": ["smoker"], "ncp": 3}
    risk = phr.membership_risk(originals, avatars, holdout, confidence=0.8, **options)
    assert risk.confidence == 0.8
    assert risk.to_dict()["confidence"] == 0.8
    assert risk.auc_interval == auc_interval(risk.members, risk.holdout, 0.8)
    assert risk.auc_interval != auc_interval(risk.members, risk.holdout, 0.95)

    def unreadable() -> pl.LazyFrame:  # fails if the measure read anything before the check
        return originals.lazy().select(pl.all().map_batches(lambda _: 1 / 0))

    for confidence, error in ((0, ValueError), (1.0, ValueError), ("0.95", TypeError)):
        with pytest.raises(error, match="`confidence` must"):
            phr.membership_risk(unreadable(), avatars, holdout, confidence=confidence, **options)  # type: ignore[arg-type]
        with pytest.raises(error, match="`confidence` must"):
            MembershipRisk.of_arrays(np.zeros((3, 1)), np.zeros((3, 1)), np.zeros((3, 1)),
                                     confidence=confidence)  # type: ignore[arg-type]  # fmt: skip


@pytest.mark.parametrize("unit", [1.0, 2.0**-500, 2.0**500])
def test_the_scores_are_given_back_in_the_coordinates_units(unit: float) -> None:
    originals = pl.DataFrame({"Dim1": [0.0, 1.0, 2.0, 3.0] * 10}) * unit
    holdout = pl.DataFrame({"Dim1": [0.5, 1.5, 2.5, 3.75] * 10}) * unit
    risk = phr.membership_risk(originals, originals, holdout, coords="Dim1")
    with pytest.warns(SmallSampleWarning):  # the interval: [1, 1]
        assert risk.auc == 1.0
    distances = [0.25, 0.25, 0.25, 0.5625] * 10
    assert risk.holdout_squared_distances.tolist() == [d * unit * unit for d in distances]
    assert risk.members_squared_distances.tolist() == [0.0] * 40
    assert np.array_equal(
        np.ldexp(risk.holdout, -2 * risk.exponent), risk.holdout_squared_distances
    )
    assert risk.exponent != 0  # the scores are not the distances: their units are given
    assert risk.holdout[0] == np.ldexp(0.25 * unit * unit, 2 * risk.exponent)
    report = phr.privacy_report(
        originals, originals, holdout=holdout, coords="Dim1", allow_unlinked=True
    )
    assert report.holdout is not None
    shown = report.holdout.membership
    assert shown.holdout_squared_distances.tolist() == risk.holdout_squared_distances.tolist()


def test_few_records_or_an_interval_of_zero_width_warn() -> None:
    rng = np.random.default_rng(5)
    for members, holdout, words in (
        (rng.normal(size=5), rng.normal(size=500), "5 members"),
        (rng.normal(size=500), rng.normal(size=1), "1 holdout records"),
        (rng.normal(size=5), rng.normal(size=5), "5 members and 5 holdout records"),
    ):
        with pytest.warns(SmallSampleWarning, match=f"rest on {words} \\(fewer than 30\\)"):
            MembershipRisk(members, holdout, 10).tpr_at_fpr()
    for members, holdout, interval in (
        (np.zeros(40), np.ones(40), r"\[1, 1\]"),
        (np.ones(40), np.ones(40), r"\[0.5, 0.5\]"),
    ):
        risk = MembershipRisk(members, holdout, 10)
        with pytest.warns(SmallSampleWarning, match=f"zero width \\({interval}\\)"):
            risk.to_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MembershipRisk(rng.normal(size=30), rng.normal(size=30), 10).to_dict()


def test_an_auc_far_from_half_on_few_records_warns_by_the_rule() -> None:
    # Forty a side, the holdout shifted: each AUC warns exactly where 40 min(AUC, 1 - AUC)
    # is below 10, and says so in the result as in the warning.
    members = np.arange(40, dtype=np.float64)
    for shift in range(-45, 46, 3):
        risk = MembershipRisk(members, members + shift, 10)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = risk.to_dict()
        area = risk.auc
        far = 40 * min(area, 1 - area) < 10
        said = [str(w.message) for w in caught if issubclass(w.category, SmallSampleWarning)]
        rule = [why for why in risk.interval_warnings if "times" in why]
        assert bool(rule) == far, (shift, area)
        assert said == list(risk.interval_warnings) == found["interval_warnings"]
        if far:
            assert rule[0].startswith("DeLong's interval of the membership AUC rests on 40 ")


def test_the_rule_is_silent_where_delongs_interval_covers() -> None:
    # The simulation the rule was chosen from, at two of its points (binormal scores, fixed
    # seed): at an AUC of 0.9, 30 a side (30 x 0.1 = 3 < 10) covers in under 93 % of runs
    # and warns; 100 a side (10) covers in at least 93 % and is silent.
    rng = np.random.default_rng(7)
    shift = math.sqrt(2) * 1.2815515655446004  # binormal: AUC = Phi(shift / sqrt 2) = 0.9
    for n, warns in ((30, True), (100, False)):
        covered = 0
        for _ in range(2000):
            members, holdout = rng.normal(size=n), rng.normal(shift, 1.0, size=n)
            low, high = auc_interval(members, holdout)
            covered += low <= 0.9 <= high
        assert (covered / 2000 < 0.93) == warns, (n, covered)
        risk = MembershipRisk(rng.normal(size=n), rng.normal(shift, 1.0, size=n), 10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert bool(risk.interval_warnings) == (n * min(risk.auc, 1 - risk.auc) < 10)


def test_a_holdout_and_synthetic_set_equal_to_the_originals_are_flagged() -> None:
    # Every score 0 on both sides: DeLong's interval [0.5, 0.5], a variance of 0 that is
    # no certainty, flagged in the result, the JSON and the text, not only as a warning.
    rng = np.random.default_rng(3)
    originals = pl.DataFrame({"x": rng.normal(size=200), "y": rng.normal(size=200)})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = phr.privacy_report(originals, originals, holdout=originals, coords=["x", "y"])
        membership = report.to_dict()["holdout"]["membership"]
    said = [str(w.message) for w in caught if issubclass(w.category, SmallSampleWarning)]
    assert said == membership["interval_warnings"]
    assert membership["auc_interval"] == [0.5, 0.5]
    assert len(membership["interval_warnings"]) == 1
    assert "zero width ([0.5, 0.5])" in membership["interval_warnings"][0]
    lines = report.to_text().splitlines()
    # The holdout's section (the verdict's row of the AUC comes first, not judged here).
    at = next(
        i for i, line in enumerate(lines) if line.startswith("membership AUC ") and "DeLong" in line
    )
    assert lines[at + 1].split()[0] == "warning"
    assert "zero width" in lines[at + 1]
