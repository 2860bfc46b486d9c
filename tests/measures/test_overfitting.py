"""The DCR overfitting protection read against the split (a null share n_t / (n_t + n_h),
SDMetrics' score beside it, a warning under half), and the holdout measures' tie rule:
distances equal in exact arithmetic stay tied after the projection's roundings, as in the
local cloaking. Exact references: integer coordinates (integer d2) and integer tables
projected with every component, whose d2 are rationals."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import ParamSpec, TypeVar

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polars_hidden_rate as phr
from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.measures.holdout_figures import HoldoutFigures
from polars_hidden_rate.measures.membership import MembershipRisk
from polars_hidden_rate.measures.overfitting import DcrOverfitting, SmallHoldoutWarning
from tests.helpers import examples

WBCD_SPLIT = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "wbcd" / "privacy"


P = ParamSpec("P")
R = TypeVar("R")


def quiet(call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``call`` with the small-holdout warning silenced (the cases here are any split)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallHoldoutWarning)
        return call(*args, **kwargs)


# -- the split --------------------------------------------------------------------------


def gaussian(rng: np.random.Generator, n: int) -> Float64Array:
    points: Float64Array = rng.normal(size=(n, 3))
    return points


@pytest.mark.parametrize(("training", "holdout"), [(1_500, 300), (1_000, 1_000), (300, 1_200)])
def test_real_unseen_records_score_near_one_at_any_split(training: int, holdout: int) -> None:
    rng = np.random.default_rng(7)
    o, h, unseen = gaussian(rng, training), gaussian(rng, holdout), gaussian(rng, 3_000)
    found = quiet(DcrOverfitting.of_arrays, o, unseen, h)
    assert found.null_share == training / (training + holdout)
    assert found.closer_to_training == pytest.approx(found.null_share, abs=0.03)
    assert found.score > 0.85
    if training == holdout:
        assert found.score == pytest.approx(found.sdmetrics_score, rel=1e-15)
    elif training > holdout:
        assert found.sdmetrics_score < 0.5  # SDMetrics reads the split as overfitting
    copies = o[:300] + rng.normal(scale=1e-6, size=(300, 3))
    assert quiet(DcrOverfitting.of_arrays, o, copies, h).score < 0.05


def test_a_holdout_under_half_the_training_set_warns_and_the_report_says_so() -> None:
    rng = np.random.default_rng(8)
    o, s = gaussian(rng, 200), gaussian(rng, 100)
    with pytest.warns(SmallHoldoutWarning, match="holds 99 records for 200 training records"):
        found = DcrOverfitting.of_arrays(o, s, gaussian(rng, 99))
    assert found.small_holdout
    assert found.to_dict()["small_holdout"] is True
    with pytest.warns(SmallHoldoutWarning):
        figures = HoldoutFigures.of_arrays(o, s, gaussian(rng, 99))
    rows = dict(figures.rows())
    assert "under half" in rows["  warning"]
    assert "SDMetrics' rule, this space" in "".join(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallHoldoutWarning)
        at_half = DcrOverfitting.of_arrays(o, s, gaussian(rng, 100))
        assert "  warning" not in dict(HoldoutFigures.of_arrays(o, s, gaussian(rng, 100)).rows())
    assert not at_half.small_holdout
    assert issubclass(SmallHoldoutWarning, UserWarning)


def test_the_json_keeps_the_raw_shares_and_sdmetrics_score() -> None:
    rng = np.random.default_rng(9)
    found = quiet(DcrOverfitting.of_arrays, gaussian(rng, 90), gaussian(rng, 40), gaussian(rng, 30))
    data = found.to_dict()
    assert data["closer_to_training"] + data["closer_to_holdout"] == pytest.approx(1.0)
    assert data["null_share"] == 90 / 120
    assert data["sdmetrics_score"] == min(2 * (1 - data["closer_to_training"]), 1.0)
    # (1 - share) / (1 - null) as one correctly rounded division: 9 of 40 over 30 of 120.
    closer = round(data["closer_to_training"] * 40)
    assert data["score"] == min(float(Fraction(40 - closer, 40) / Fraction(30, 120)), 1.0)
    assert data["tie_tol"] == 1e-9


# -- exact references -------------------------------------------------------------------


def exact_nearest(queries: np.ndarray, points: np.ndarray, weights: list[int]) -> list[int]:
    """Each query's smallest ``sum_c weights[c] * diff_c^2``, in Python integers."""
    diff = queries[:, None, :].astype(np.int64) - points[None, :, :].astype(np.int64)
    squares = (diff * diff).astype(object)
    d2 = (squares * np.array(weights, dtype=object)).sum(axis=2)
    return [min(row) for row in d2]


def exact_figures(sets: Sequence[np.ndarray], weights: list[int]) -> tuple[float, float]:
    """The share closer to the training set (strictly: a tie counts for the holdout) and
    the membership AUC (ties half), from exact distances."""
    o, s, h = sets
    to_training, to_holdout = exact_nearest(s, o, weights), exact_nearest(s, h, weights)
    closer = sum(t < u for t, u in zip(to_training, to_holdout, strict=True)) / len(s)
    members, control = exact_nearest(o, s, weights), exact_nearest(h, s, weights)
    wins = sum(2 if a < b else 1 if a == b else 0 for a in members for b in control)
    return closer, float(Fraction(wins, 2 * len(members) * len(control)))


def measured(sets: Sequence[Float64Array], tie_tol: float = 1e-9) -> tuple[float, float]:
    o, s, h = sets
    overfit = quiet(DcrOverfitting.of_arrays, o, s, h, tie_tol=tie_tol)
    risk = MembershipRisk.of_arrays(o, s, h, tie_tol=tie_tol)
    return overfit.closer_to_training, risk.auc


small_grid = st.lists(
    st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(-3, 3)), min_size=1, max_size=30
)


@given(
    o=small_grid,
    s=small_grid,
    h=small_grid,
    unit=st.sampled_from([1.0, 2.0**600, 2.0**-600]),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=examples(100))
def test_integer_coordinates_give_the_exact_figures_in_any_order_at_any_scale(
    o: list[tuple[int, ...]],
    s: list[tuple[int, ...]],
    h: list[tuple[int, ...]],
    unit: float,
    seed: int,
) -> None:
    arrays = [np.array(a, dtype=np.int64) for a in (o, s, h)]
    expected = exact_figures(arrays, weights=[1, 1, 1])
    rng = np.random.default_rng(seed)
    shuffled = [rng.permutation(a) * unit for a in arrays]
    assert measured(shuffled) == expected
    frames = [pl.DataFrame(a, schema=["a", "b", "c"], orient="row") for a in shuffled]
    found = quiet(phr.dcr_overfitting_protection, *frames, coords=["a", "b", "c"])
    risk = phr.membership_risk(*frames, coords=["a", "b", "c"])
    assert (found.closer_to_training, risk.auc) == expected


def projected(frames: list[pl.DataFrame]) -> list[Float64Array]:
    """The three tables in the default projection fitted on the first, every component."""
    projection = phr.Projection.fit(frames[0], ncp="all")
    names = projection.coordinate_columns()
    return [projection.transform(f).select(names).to_numpy() for f in frames]


def standardised_weights(training: np.ndarray) -> list[int]:
    """Integer weights proportional to ``1 / var_c`` (the population variance of each
    column): the projection with every component is an isometry of the z-scores, so its
    exact ``d2`` is ``sum_c diff_c^2 / var_c``, a common factor apart from these."""
    n = len(training)
    spreads = [
        int(((training[:, c] * n - int(training[:, c].sum())) ** 2).sum())
        for c in range(training.shape[1])
    ]  # n^3 var_c
    return [math.prod(spreads[:c] + spreads[c + 1 :]) for c in range(len(spreads))]


def integer_tables(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 4, size=(n, 4)) for n in (60, 25, 35)]


def test_projected_integer_tables_keep_their_exact_ties() -> None:
    # Exact ties between distances (the same differences, up to sign and column order
    # among columns of one variance) come out of the projection an ulp or so apart: the
    # tie rule keeps them tied, the literal comparison splits some.
    split = 0
    for seed in range(6):
        tables = integer_tables(seed)
        frames = [pl.DataFrame(t.astype(np.float64), schema=list("abcd")) for t in tables]
        o, s, h = projected(frames)
        expected = exact_figures(tables, weights=standardised_weights(tables[0]))
        assert measured((o, s, h)) == expected
        split += measured((o, s, h), tie_tol=0.0) != expected
        # Any row order, any power-of-two scale: the same floats, the same figures.
        rng = np.random.default_rng(seed)
        for unit in (2.0**600, 2.0**-600):
            assert measured([rng.permutation(a) * unit for a in (o, s, h)]) == expected
    assert split > 0


@pytest.mark.skipif(not WBCD_SPLIT.is_dir(), reason="../shared/datasets/wbcd is absent")
def test_wbcd_with_every_component_gives_the_exact_figures() -> None:
    def read(name: str) -> pl.DataFrame:
        frame = pl.read_csv(WBCD_SPLIT / f"{name}.csv")
        return frame.select(pl.all().cast(pl.Float64)).fill_null(0.0)

    training, unseen, avatars = read("holdout_0"), read("remaining_0"), read("avatar_0")
    ints = [f.to_numpy().astype(np.int64) for f in (training, avatars, unseen)]
    expected = exact_figures(ints, weights=standardised_weights(ints[0]))
    found = quiet(phr.dcr_overfitting_protection, training, avatars, unseen, ncp="all")
    risk = phr.membership_risk(training, avatars, unseen, ncp="all")
    assert (found.closer_to_training, risk.auc) == expected
    report = quiet(phr.privacy_report, training, avatars, holdout=unseen, ncp="all")
    assert report.holdout is not None
    assert report.holdout.overfitting == found
    assert report.holdout.membership.auc == risk.auc


def test_negative_scores_tie_by_their_magnitude() -> None:
    from polars_hidden_rate.measures.membership import auc

    assert auc([-1.0], [-1.0 + 2.0**-52], tie_tol=1e-9) == 0.5
    assert auc([-1.0 - 2.0**-52], [-1.0], tie_tol=1e-9) == 0.5
    assert auc([-1.0], [-0.5], tie_tol=1e-9) == 1.0
    assert auc([-1.0], [-1.0 + 2.0**-52]) == 1.0


# -- copies of training records ---------------------------------------------------------


def shared_records(training: pl.DataFrame, holdout: pl.DataFrame) -> int:
    """How many training records have an identical record in the holdout."""
    return training.join(holdout.unique(), on=training.columns, how="semi").height


def assert_copies_read_as_copies(
    report: phr.PrivacyReport, copies: int, shared: int, synthetic: int
) -> None:
    """The copies beside the score in the report's JSON, text and page and in the meaning
    of its target row."""
    import html as escaping

    assert report.holdout is not None
    found = report.holdout.overfitting
    assert (found.copies_of_training, found.copies_also_in_holdout) == (copies, shared)
    entry = report.to_dict()["holdout"]["dcr_overfitting_protection"]
    assert (entry["copies_of_training"], entry["copies_also_in_holdout"]) == (copies, shared)
    said = f"{copies:,} of {synthetic:,} synthetic records"
    lines = [line for line in report.to_text().splitlines() if said in line]
    assert any(line.lstrip().startswith("copies of training records") for line in lines)
    # The measure's line among the targets: its meaning, judged or not.
    assert any(line.lstrip().startswith("DCR overfitting protection") for line in lines)
    assert f"reads these {shared:,} copies as no closer" in lines[0]
    page = report.to_html()
    assert "copies of training records" in page
    assert escaping.escape(said) in page


def test_a_synthetic_set_of_the_training_records_reads_as_copies() -> None:
    # Grid records, as WBCD's: the training set and the holdout, drawn from one small
    # population, share records by chance (no more than the training set repeats its own:
    # no overlap warning), and the synthetic set is the training set itself. Each copy of
    # a record the holdout holds too is a tie, which counts for the holdout (SDMetrics'
    # rule): the score reaches 1, and the copies are said beside it.
    rng = np.random.default_rng(11)
    training, holdout = (
        pl.DataFrame(rng.integers(0, 4, size=(n, 3)), schema=["a", "b", "c"]) for n in (120, 80)
    )
    shared = shared_records(training, holdout)
    arrays = [f.to_numpy().astype(np.int64) for f in (training, training, holdout)]
    closer, _ = exact_figures(arrays, weights=[1, 1, 1])
    found = quiet(
        phr.dcr_overfitting_protection, training, training, holdout, coords=["a", "b", "c"]
    )
    assert closer == (120 - shared) / 120
    assert found.closer_to_training == closer
    assert found.score == 1.0  # ties for the holdout: no more than chance
    assert found.sdmetrics_score == min(2 * (1 - closer), 1.0)
    assert (found.copies_of_training, found.copies_also_in_holdout) == (120, shared)
    data = found.to_dict()
    assert (data["copies_of_training"], data["copies_also_in_holdout"]) == (120, shared)
    rows = dict(found.rows())
    assert rows["  copies of training records"] == found.copies_message()
    assert (
        "120 of 120 synthetic records (100.00 %) at distance 0"
        in rows["  copies of training records"]
    )
    assert f"{shared:,} of them of a holdout record too" in rows["  copies of training records"]
    # Every path that measures it says the same: the arrays, the two distances, the report's
    # shared walks, at any power-of-two scale and row order.
    o, s, h = (a.astype(np.float64) for a in arrays)
    assert quiet(DcrOverfitting.of_arrays, o, s, h) == found
    assert quiet(DcrOverfitting.of_arrays, o * 2.0**600, s[::-1] * 2.0**600, h * 2.0**600) == found
    to = [np.array(exact_nearest(s, x, [1, 1, 1]), dtype=np.float64) for x in (o, h)]
    assert quiet(DcrOverfitting.of_distances, to[0], to[1], 120, len(h)) == found
    assert quiet(HoldoutFigures.of_arrays, o, s, h).overfitting == found
    report = quiet(
        phr.privacy_report,
        training,
        training,
        holdout=holdout,
        coords=["a", "b", "c"],
        by_row_order=True,
        targets={"dcr_overfitting_protection": 0.5},
    )
    assert report.holdout is not None
    assert report.holdout.overfitting == found
    assert_copies_read_as_copies(report, 120, shared, 120)


def test_copies_the_holdout_lacks_count_as_closer_and_no_copy_adds_no_line() -> None:
    o = np.array([[0.0, 0.0], [4.0, 0.0], [8.0, 0.0]])
    h = np.array([[0.0, 1.0], [8.0, 0.0]])
    s = np.array([[0.0, 0.0], [4.0, 0.0], [8.0, 0.0], [4.0, 0.5], [0.0, 0.5]])
    found = DcrOverfitting.of_arrays(o, s, h)
    assert (found.copies_of_training, found.copies_also_in_holdout) == (3, 1)
    assert found.closer_to_training == 3 / 5  # (0, 0), (4, 0) and (4, 0.5); (0, 0.5) a tie
    lone = DcrOverfitting.of_arrays(o, s[:2], h)
    assert (lone.copies_of_training, lone.copies_also_in_holdout) == (2, 0)
    assert lone.copies_message() == (
        "2 of 2 synthetic records (100.00 %) at distance 0 of a training record (in this "
        "space), none of a holdout record: each counts as closer to the training set"
    )
    apart = DcrOverfitting.of_arrays(o, s[3:] + 0.25, h)
    assert (apart.copies_of_training, apart.copies_also_in_holdout) == (0, 0)
    assert apart.copies_message() is None
    assert "  copies of training records" not in dict(apart.rows())
    assert apart.to_dict()["copies_of_training"] == 0


@pytest.mark.skipif(not WBCD_SPLIT.is_dir(), reason="../shared/datasets/wbcd is absent")
def test_wbcd_training_records_as_the_synthetic_set_read_as_copies() -> None:
    def read(name: str) -> pl.DataFrame:
        frame = pl.read_csv(WBCD_SPLIT / f"{name}.csv")
        return frame.select(pl.all().cast(pl.Float64)).fill_null(0.0)

    training, unseen = read("holdout_0"), read("remaining_0")  # the README's names
    shared = shared_records(training, unseen)
    assert shared == 158
    found = quiet(phr.dcr_overfitting_protection, training, training, unseen, ncp="all")
    assert found.score == 1.0  # SDMetrics' rule: the 158 shared records are ties
    assert (found.copies_of_training, found.copies_also_in_holdout) == (478, 158)
    report = quiet(
        phr.privacy_report, training, training, holdout=unseen, ncp="all", by_row_order=True
    )
    assert report.holdout is not None
    assert report.holdout.overfitting == found
    assert_copies_read_as_copies(report, 478, 158, 478)


def test_progress_counts_the_queries_in_sdmetrics_space_without_changing_the_score(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rng = np.random.default_rng(6)
    originals, synthetic, holdout = (
        pl.DataFrame({"x": rng.normal(size=n), "c": rng.choice(["a", "b"], n)})
        for n in (60, 50, 40)
    )
    quiet = phr.dcr_overfitting_protection(originals, synthetic, holdout, space="sdmetrics")
    capsys.readouterr()
    shown = phr.dcr_overfitting_protection(
        originals, synthetic, holdout, space="sdmetrics", progress=True
    )
    assert shown.to_dict() == quiet.to_dict()
    name = "DCR overfitting protection in SDMetrics' space, nearest records"
    err = capsys.readouterr().err
    assert f"hidden-rate: {name}: started\n" in err
    assert f"hidden-rate: {name}: done in " in err
