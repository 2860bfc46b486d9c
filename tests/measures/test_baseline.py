"""SDMetrics' DCR baseline protection (`dcr_baseline_protection`): the medians against a
float64 brute force, invariant to row order and to power-of-two scales, the random records
as SDMetrics draws them (deterministic with the seed), and SDMetrics itself, run in the
peers' venv, where the spaces meet (one numeric column: the ratio of medians does not
depend on the unit)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.exceptions import NoDataError

import polars_hidden_rate as phr
from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.cli import main
from polars_hidden_rate.measures.baseline import DcrBaseline, column_seed, random_records
from tests.helpers import as_columns, examples, run_peer


def brute_median_dcr(originals: Float64Array, queries: Float64Array) -> float:
    dcr = []
    for q in queries.tolist():
        best = math.inf
        for x in originals.tolist():
            d2 = 0.0
            for a, b in zip(q, x, strict=True):
                d2 += (a - b) * (a - b)
            best = min(best, d2)
        dcr.append(math.sqrt(best))
    return float(np.median(dcr))


grid = st.lists(st.tuples(st.integers(-3, 3), st.integers(-2, 2)), min_size=1, max_size=12)


@given(
    sets=st.tuples(grid, grid, grid),
    offset=st.sampled_from([0.0, 2.0**40]),
    unit=st.sampled_from([2.0**-600, 2.0**600]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=examples(200), deadline=None)
def test_the_medians_equal_the_brute_force_whatever_the_order_and_scale(
    sets: tuple[list[tuple[int, int]], ...], offset: float, unit: float, seed: int
) -> None:
    o, s, r = (np.array(rows, dtype=np.float64) + offset for rows in sets)
    found = DcrBaseline.of_arrays(o, s, r)
    synthetic, random = brute_median_dcr(o, s), brute_median_dcr(o, r)
    assert (found.synthetic_median, found.random_median) == (synthetic, random)
    expected = math.nan if random == 0.0 else min(synthetic / random, 1.0)
    assert found.score == pytest.approx(expected, nan_ok=True)
    rng = np.random.default_rng(seed)
    scaled = DcrBaseline.of_arrays(
        o[rng.permutation(len(o))] * unit, s[rng.permutation(len(s))] * unit, r * unit
    )
    assert scaled.score == found.score or (math.isnan(scaled.score) and math.isnan(found.score))
    assert scaled.synthetic_median == math.ldexp(synthetic, round(math.log2(unit)))


def test_random_records_are_drawn_as_sdmetrics_draws_them() -> None:
    originals = pl.DataFrame(
        {
            "i": [3, 7, 5, None],
            "f": [0.5, 2.5, None, 1.0],
            "c": ["b", "a", "b", "c"],
            "k": [10, 20, 10, 20],
        }
    )
    drawn = random_records(originals, frozenset({"k"}), 2000, seed=3)
    assert drawn.schema == originals.schema
    assert drawn["i"].drop_nulls().is_between(3, 7).all()
    assert set(drawn["i"].drop_nulls().to_list()) == {3, 4, 5, 6, 7}
    assert drawn["f"].drop_nulls().is_between(0.5, 2.5).all()
    assert set(drawn["c"].to_list()) == {"a", "b", "c"}
    assert set(drawn["k"].to_list()) == {10, 20}  # a categorical integer: its values only
    assert 0.15 < drawn["i"].null_count() / 2000 < 0.35  # the originals' missing share
    assert drawn["c"].null_count() == 0
    own = np.random.default_rng(column_seed(3, "i")).integers(3, 8, 2000)  # numpy's draws
    present = drawn["i"].is_not_null().to_numpy()
    assert drawn["i"].drop_nulls().to_list() == own[present].tolist()
    assert random_records(originals, frozenset(), 50, seed=3).equals(
        random_records(originals.reverse(), frozenset(), 50, seed=3).select(originals.columns)
    )


def test_each_column_draws_the_same_whatever_the_other_columns_and_their_order() -> None:
    rng = np.random.default_rng(6)
    originals = pl.DataFrame(
        {
            "a": rng.normal(size=40),
            "b": rng.integers(-5, 5, 40),
            "c": rng.choice(["p", "q", "r"], 40),
            "d": [None, *rng.normal(size=39)],
        }
    )
    drawn = random_records(originals, frozenset(), 300, seed=5)
    for columns in (["d", "c", "b", "a"], ["b", "a"], ["c"], ["a", "d"]):
        alone = random_records(originals.select(columns), frozenset(), 300, seed=5)
        assert alone.equals(drawn.select(columns)), columns
    other = random_records(originals, frozenset(), 300, seed=6)
    assert all(not other[name].equals(drawn[name]) for name in originals.columns)
    # Two columns with the same values draw differently: each has its own generator.
    twins = random_records(originals.select("a", e="a"), frozenset(), 300, seed=5)
    assert not twins["a"].equals(twins["e"])


def test_missing_values_and_nans_give_as_large_a_share_of_missing_draws() -> None:
    originals = pl.DataFrame(
        {
            "nan": [1.0, math.nan, 2.0, math.nan, 4.0, math.nan, 3.0, math.nan],
            "null": [1.0, None, 2.0, None, 4.0, 5.0, 3.0, 2.5],
            "both": [1.0, None, math.nan, math.nan, 4.0, 5.0, 3.0, 2.5],
            "none": [1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 3.0, 2.5],
        }
    )
    drawn = random_records(originals, frozenset(), 4000, seed=1)
    assert drawn["nan"].null_count() / 4000 == pytest.approx(0.5, abs=0.03)
    assert drawn["null"].null_count() / 4000 == pytest.approx(0.25, abs=0.03)
    assert drawn["both"].null_count() / 4000 == pytest.approx(0.375, abs=0.03)
    assert drawn["none"].null_count() == 0
    assert not any(drawn[name].is_nan().any() for name in drawn.columns)  # missing: null
    assert drawn["nan"].drop_nulls().is_between(1.0, 4.0).all()


def test_as_many_random_records_as_synthetic_ones_are_drawn() -> None:
    rng = np.random.default_rng(3)
    originals = pl.DataFrame({"x": rng.normal(size=60), "y": rng.normal(size=60)})
    synthetic = pl.DataFrame({"x": rng.normal(size=7), "y": rng.normal(size=7)})
    found = phr.dcr_baseline_protection(originals, synthetic, seed=2, coords=["x", "y"])
    o = originals.to_numpy()
    for records in (7, 60):
        random = random_records(originals, frozenset(), records, seed=2).to_numpy()
        assert (found.random_median == brute_median_dcr(o, random)) is (records == 7)
    assert found.synthetic == 7


def column_order_cases() -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(5)
    n, m = 80, 80  # the report links them by row order
    frames = [
        pl.DataFrame(
            {
                "a": rng.normal(size=size),
                "b": rng.normal(size=size) * 20.0,
                "c": rng.choice(["p", "q", "r"], size),
                "d": rng.integers(0, 9, size),
            }
        )
        for size in (n, m)
    ]
    return frames[0], frames[1]


def test_the_score_does_not_depend_on_the_order_of_the_columns() -> None:
    originals, synthetic = column_order_cases()
    first = phr.dcr_baseline_protection(originals, synthetic, seed=5, coords=["a", "b"])
    swapped = phr.dcr_baseline_protection(
        originals.select("b", "a"), synthetic, seed=5, coords=["b", "a"]
    )
    assert swapped == first
    features = phr.dcr_baseline_protection(
        originals, synthetic, seed=5, features=["a", "b", "c", "d"]
    )
    for order in (["d", "c", "b", "a"], ["c", "a", "d", "b"]):
        found = phr.dcr_baseline_protection(
            originals.select(order), synthetic.select(order), seed=5, features=order
        )
        # The same random records; the projection of columns listed in another order may
        # round its coordinates an ulp apart.
        assert found.score == pytest.approx(features.score, rel=1e-12)
        assert found.random_median == pytest.approx(features.random_median, rel=1e-12)
    report = phr.privacy_report(
        originals.select("d", "c", "b", "a"),
        synthetic,
        coords=["b", "a"],
        dcr_baseline=True,
        baseline_seed=5,
        allow_unlinked=True,
    )
    assert report.dcr_baseline == first


def test_the_cli_baseline_does_not_depend_on_the_order_of_the_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, synthetic = column_order_cases()
    found = []
    for order in (["a", "b", "c", "d"], ["d", "b", "c", "a"]):
        o, s = tmp_path / f"o{order[0]}.csv", tmp_path / f"s{order[0]}.csv"
        originals.select(order).write_csv(o)
        synthetic.select(list(reversed(order))).write_csv(s)
        coords = ",".join(name for name in order if name in "ab")
        args = ["report", str(o), str(s), "--coords", coords, "--allow-unlinked"]
        code = main([*args, "--dcr-baseline", "--baseline-seed", "5", "--format", "json"])
        assert code in (0, 1)  # measured; the release's own targets decide which
        found.append(json.loads(capsys.readouterr().out)["dcr_baseline_protection"])
    expected = phr.dcr_baseline_protection(originals, synthetic, seed=5, coords=["a", "b"])
    assert found == [expected.to_dict()] * 2


def test_the_score_through_the_projection() -> None:
    rng = np.random.default_rng(0)
    originals = pl.DataFrame(
        {
            "x": rng.normal(size=200),
            "y": rng.normal(size=200) * 50.0,
            "c": rng.choice(["p", "q"], 200),
        }
    )
    copies = phr.dcr_baseline_protection(originals, originals)
    assert (copies.score, copies.synthetic_median) == (0.0, 0.0)
    fresh = pl.DataFrame(
        {
            "x": rng.normal(size=150),
            "y": rng.normal(size=150) * 50.0,
            "c": rng.choice(["p", "q"], 150),
        }
    )
    found = phr.dcr_baseline_protection(originals, fresh, seed=4)
    assert found == phr.dcr_baseline_protection(originals, fresh, seed=4)  # deterministic
    assert found != phr.dcr_baseline_protection(originals, fresh, seed=5)
    assert 0.0 < found.score <= 1.0
    assert found.synthetic == 150
    assert found.originals == 200
    shuffled = phr.dcr_baseline_protection(originals, fresh.reverse(), seed=4)
    assert shuffled.synthetic_median == found.synthetic_median
    assert found.to_dict()["seed"] == 4
    coords = phr.dcr_baseline_protection(
        originals.select("x", "y"), fresh.select("x", "y"), coords=["x", "y"]
    )
    assert 0.0 < coords.score <= 1.0


def test_bad_requests_are_refused() -> None:
    frame = pl.DataFrame({"x": [1.0, 2.0, 4.0]})
    with pytest.raises(ValueError, match="takes no `on`"):
        phr.dcr_baseline_protection(frame, frame, on="x")
    with pytest.raises(ValueError, match="seed"):
        phr.dcr_baseline_protection(frame, frame, seed=-1)
    with pytest.raises(NotImplementedError):
        phr.dcr_baseline_protection(frame, frame, device="gpu")
    with pytest.raises(NoDataError):
        phr.dcr_baseline_protection(frame, frame.clear())
    with pytest.raises(TypeError, match="unexpected keyword"):
        phr.dcr_baseline_protection(frame, frame, nope=1)  # type: ignore[call-arg]


# --- SDMetrics itself, in the peers' venv (`make peers`)


def sdmetrics_cases() -> list[tuple[pl.DataFrame, pl.DataFrame, int]]:
    rng = np.random.default_rng(2)
    floats = pl.DataFrame({"x": rng.normal(size=120) * 7.0 + 3.0})
    near = pl.DataFrame({"x": floats["x"].head(60) + rng.normal(size=60) * 0.01})
    integers = pl.DataFrame({"n": rng.integers(0, 1000, 90)})
    return [
        (floats, near, 0),
        (floats, pl.DataFrame({"x": rng.uniform(-10.0, 15.0, 80)}), 11),
        (integers, pl.DataFrame({"n": rng.integers(0, 1000, 70)}), 5),
    ]


def test_the_score_equals_sdmetrics_in_one_column() -> None:
    cases = sdmetrics_cases()
    peers = run_peer(
        [
            {
                "peer": "baseline",
                "originals": as_columns(o),
                "synthetic": as_columns(s),
                "seed": column_seed(seed, o.columns[0]),  # the column's own generator
            }
            for o, s, seed in cases
        ],
        needs="sdmetrics",
    )
    for (originals, synthetic, seed), peer in zip(cases, peers, strict=True):
        found = phr.dcr_baseline_protection(originals, synthetic, seed=seed)
        assert math.isclose(found.score, peer["score"], rel_tol=1e-9)
        # The units differ (SDMetrics divides by the range, the projection by the standard
        # deviation), by one factor for both medians.
        factor: Any = found.synthetic_median / peer["synthetic_median"]
        assert math.isclose(found.random_median / peer["random_median"], factor, rel_tol=1e-9)


@pytest.mark.parametrize(
    ("space", "name"),
    [
        ("projected", "DCR baseline protection, nearest records"),
        ("sdmetrics", "DCR baseline protection in SDMetrics' space, nearest records"),
    ],
)
def test_progress_counts_the_queries_without_changing_the_score(
    capsys: pytest.CaptureFixture[str], space: str, name: str
) -> None:
    rng = np.random.default_rng(4)
    originals, synthetic = (
        pl.DataFrame({"x": rng.normal(size=n), "c": rng.choice(["a", "b"], n)}) for n in (60, 50)
    )
    quiet = phr.dcr_baseline_protection(originals, synthetic, space=space)  # type: ignore[arg-type]
    capsys.readouterr()
    shown = phr.dcr_baseline_protection(originals, synthetic, space=space, progress=True)  # type: ignore[arg-type]
    assert shown.to_dict() == quiet.to_dict()
    err = capsys.readouterr().err
    assert f"hidden-rate: {name}: started\n" in err
    assert f"hidden-rate: {name}: done in " in err
