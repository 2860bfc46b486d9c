"""`singling_out_risk`: every count against a plain scan per query (`brute_singling_out`),
ties and duplicates, row order, the hypergeometric size correction against an enumeration of
the subsamples, the estimator's 0 at equal rates, and anonymeter 1.1 itself, run in the
peers' venv, where its result is defined."""

from __future__ import annotations

import datetime as dt
import math
from fractions import Fraction
from itertools import combinations
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.exceptions import ColumnNotFoundError, ComputeError, NoDataError, SchemaError

import polars_hidden_rate as phr
from polars_hidden_rate.measures.inference import attack_against_control
from polars_hidden_rate.measures.singling_out import (
    Encoded,
    SinglingOutRisk,
    design,
    query_counts,
)
from polars_hidden_rate.stats import single_chance
from tests.helpers import as_columns, brute_singling_out, run_peer


def mixed(n: int, seed: int, shift: int = 0) -> pl.DataFrame:
    """Integer grids (ties everywhere), floats with repeats, text with quotes, booleans,
    dates, missing values in each kind."""
    rng = np.random.default_rng(seed)

    def gaps(values: list[Any]) -> list[Any]:
        return [None if rng.random() < 0.1 else v for v in values]

    return pl.DataFrame(
        {
            "i": gaps([int(v) + shift for v in rng.integers(0, 6, n)]),
            "f": gaps([float(v) / 4 for v in rng.integers(-4, 5, n)]),
            # "b\\'" is "b'" as anonymeter's multivariate query asks for it.
            "t": gaps([str(v) for v in rng.choice(["a", "b'", 'c"', "b\\'", "e"], n)]),
            "b": gaps([bool(v) for v in rng.integers(0, 2, n)]),
            "d": gaps([dt.date(2020, 1, 1 + int(v)) for v in rng.integers(0, 5, n)]),
            "u": gaps([int(v) for v in rng.integers(0, 3 * n, n)]),
        },
        schema={
            "i": pl.Int64,
            "f": pl.Float64,
            "t": pl.String,
            "b": pl.Boolean,
            "d": pl.Date,
            "u": pl.Int32,
        },
    )


def ours(
    originals: pl.DataFrame,
    synthetic: pl.DataFrame,
    holdout: pl.DataFrame,
    mode: str,
    n_cols: int,
    *,
    exact: bool = True,
) -> tuple[list[tuple[int, int]], int]:
    """The matches in the originals and the holdout of each query that singles out a
    synthetic record, sorted, and how many queries were asked."""
    read = {
        "synthetic": synthetic.unique(),
        "originals": originals.unique(),
        "holdout": holdout.unique(),
    }
    encoded = Encoded.of(read, mode)  # type: ignore[arg-type]
    counts, asked, exhaustive = query_counts(encoded, mode, n_cols, exact=exact)  # type: ignore[arg-type]
    assert exhaustive
    pairs = zip(counts["originals"].tolist(), counts["holdout"].tolist(), strict=True)
    return sorted(pairs), asked


def scanned(
    originals: pl.DataFrame, synthetic: pl.DataFrame, holdout: pl.DataFrame, mode: str, n_cols: int
) -> tuple[list[tuple[int, int]], int]:
    """`ours` by the plain scan of `brute_singling_out` (how many distinct queries were
    asked: all of them in the univariate attack, where none repeats)."""
    every = brute_singling_out(originals, synthetic, holdout, mode, n_cols)
    return sorted((o, h) for s, o, h in every if s == 1), len(every)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_univariate_counts_are_the_scans(seed: int) -> None:
    originals, holdout = mixed(40, seed), mixed(30, seed + 10)
    synthetic = pl.concat([originals.head(10), mixed(25, seed + 20, shift=1)])
    found = ours(originals, synthetic, holdout, "univariate", 1)
    assert found == scanned(originals, synthetic, holdout, "univariate", 1)
    assert found[0]
    # Capped at 2 on the side taken at its own size, the larger side exact.
    capped, asked = ours(originals, synthetic, holdout, "univariate", 1, exact=False)
    assert asked == found[1]
    larger = 0 if originals.unique().height > holdout.unique().height else 1
    for mine, full in zip(capped, found[0], strict=True):
        assert mine[larger] == full[larger]
        assert mine[1 - larger] == min(full[1 - larger], 2)


@pytest.mark.parametrize(("seed", "n_cols"), [(0, 1), (1, 2), (2, 3), (3, 4)])
def test_multivariate_counts_are_the_scans(seed: int, n_cols: int) -> None:
    columns = ["i", "f", "t", "b", "u"]
    originals, holdout = mixed(40, seed).select(columns), mixed(30, seed + 10).select(columns)
    synthetic = pl.concat([originals.head(10), mixed(25, seed + 20, shift=1).select(columns)])
    found = ours(originals, synthetic, holdout, "multivariate", n_cols)
    assert found[0] == scanned(originals, synthetic, holdout, "multivariate", n_cols)[0]
    assert found[0]


@pytest.mark.parametrize("mode", ["univariate", "multivariate"])
def test_row_order_and_duplicates_change_nothing(mode: str) -> None:
    columns = ["i", "f", "t", "b", "u"]
    originals, holdout = mixed(50, 4).select(columns), mixed(40, 5).select(columns)
    synthetic = pl.concat([originals.head(15), mixed(30, 6).select(columns)])
    first = phr.singling_out_risk(originals, synthetic, holdout, mode=mode, n_cols=2)  # type: ignore[arg-type]
    again = phr.singling_out_risk(
        pl.concat([originals, originals.head(7)]).reverse(),
        synthetic.sample(fraction=1.0, shuffle=True, seed=3),
        pl.concat([holdout.head(5), holdout]).reverse(),
        mode=mode,  # type: ignore[arg-type]
        n_cols=2,
    )
    assert first.to_dict() == again.to_dict()
    assert math.fsum(first.members_success) == math.fsum(again.members_success)


@pytest.mark.parametrize("power", [600, -600])
def test_scaling_and_infinite_values_change_nothing(power: int) -> None:
    columns = ["i", "f", "t", "u"]
    originals, holdout = mixed(50, 14).select(columns), mixed(40, 15).select(columns)
    synthetic = mixed(45, 16).select(columns)
    originals = originals.with_columns(
        pl.when(pl.col("u") == pl.col("u").max())
        .then(float("inf"))
        .otherwise(pl.col("f"))
        .alias("f")
    )
    for mode in ("univariate", "multivariate"):
        first = phr.singling_out_risk(originals, synthetic, holdout, mode=mode, n_cols=2)
        scaled = [
            frame.with_columns(pl.col("f") * 2.0**power, pl.col("u").cast(pl.Float64) * 2.0**power)
            for frame in (originals, synthetic, holdout)
        ]
        again = phr.singling_out_risk(*scaled, mode=mode, n_cols=2)
        assert first.to_dict() == again.to_dict()
    infinite = ours(originals, synthetic, holdout, "multivariate", 2)[0]
    assert infinite == scanned(originals, synthetic, holdout, "multivariate", 2)[0]


def test_a_query_asked_twice_counts_once() -> None:
    # Both "b'" records ask t == "b\\'" (escaped), which singles out the third: one query.
    synthetic = pl.DataFrame({"t": ["b'", "b'", "b\\'"], "x": [1, 2, 3]})
    originals = pl.DataFrame({"t": ["b\\'", "a", "c"], "x": [1, 5, 6]})
    found = phr.singling_out_risk(originals, synthetic, originals, mode="multivariate", n_cols=1)
    assert found.queries == 3  # t == "b\\'", x <= 1, x >= 3
    assert (
        ours(originals, synthetic, originals, "multivariate", 1)[0]
        == (scanned(originals, synthetic, originals, "multivariate", 1)[0])
    )


def test_the_design_is_order_invariant_and_even() -> None:
    columns = ["i", "f", "t", "b"]
    originals, holdout = mixed(60, 7).select(columns), mixed(60, 8).select(columns)
    synthetic = mixed(50, 9).select(columns)
    asked = {
        "mode": "multivariate",
        "n_cols": 2,
        "max_queries": 100,
    }
    first = phr.singling_out_risk(originals, synthetic, holdout, **asked)  # type: ignore[arg-type]
    again = phr.singling_out_risk(originals, synthetic.reverse(), holdout, **asked)  # type: ignore[arg-type]
    assert not first.exhaustive
    assert first.to_dict() == again.to_dict()
    pairs = design(40, 6, 100)
    counts = np.bincount(np.concatenate(pairs), minlength=40)
    assert (counts == 2).all()
    assert [len(p) for p in pairs] == [14, 14, 13, 13, 13, 13]


def subsample_chance(m: int, population: int, sample: int) -> Fraction:
    """Enumerate every subsample: the share in which exactly one of the ``m`` matches is."""
    hits = sum(sum(i < m for i in drawn) == 1 for drawn in combinations(range(population), sample))
    return Fraction(hits, math.comb(population, sample))


def test_the_size_correction_is_the_enumeration() -> None:
    for population in range(1, 9):
        for sample in range(1, population + 1):
            matches = np.arange(population + 1)
            found = single_chance(matches, population, sample)
            for m in matches:
                expected = subsample_chance(int(m), population, sample)
                assert math.isclose(found[m], float(expected), rel_tol=1e-14, abs_tol=0), (
                    population,
                    sample,
                    m,
                )
                assert found[m] >= 0.0


def test_the_larger_side_is_taken_at_the_smaller_size() -> None:
    counts = {"originals": np.array([1, 2, 0]), "holdout": np.array([3, 1, 1])}
    found = SinglingOutRisk.of_counts(counts, {"synthetic": 4, "originals": 5, "holdout": 8})
    assert found.resized == "holdout"
    assert found.queries == 3
    assert found.members_success.tolist() == [1.0, 0.0, 0.0]
    expected = [float(subsample_chance(m, 8, 5)) for m in (3, 1, 1)]
    assert np.allclose(found.control_success, expected, rtol=1e-14, atol=0)


def test_equal_success_gives_no_risk_at_any_sizes() -> None:
    # The estimator: equal shares at different sizes read as equal rates.
    for members, control in [(40, 40), (40, 300), (7, 1000)]:
        a = np.array([1.0] * (members // 4) + [0.0] * (members - members // 4))
        b = np.array([1.0] * (control // 4) + [0.0] * (control - control // 4))
        assert attack_against_control(a, b, 0.95, "x")[2] == 0.0
    # The attack: the same records as originals and holdout, and a holdout of other records
    # singled out as often.
    frame = mixed(40, 11).select(["i", "f", "t", "u"])
    synthetic = mixed(40, 12).select(["i", "f", "t", "u"])
    assert phr.singling_out_risk(frame, synthetic, frame).risk == 0.0
    counts = {
        "originals": np.array([1, 0, 1, 2, 1, 0]),
        "holdout": np.array([0, 1, 1, 1, 3, 0]),
    }
    found = SinglingOutRisk.of_counts(counts, {"synthetic": 9, "originals": 20, "holdout": 20})
    assert found.members.rate == found.control.rate
    assert found.risk == 0.0


def test_bad_input_is_refused_naming_it() -> None:
    frame = mixed(20, 13)
    with pytest.raises(SchemaError, match=r"'d'.*multivariate"):
        phr.singling_out_risk(frame, frame, frame, mode="multivariate")
    nan = pl.DataFrame({"x": [1.0, float("nan")]})
    with pytest.raises(ComputeError, match="'x' of originals holds NaN"):
        phr.singling_out_risk(nan, nan.head(1), nan.head(1))
    with pytest.raises(ValueError, match="`n_cols`"):
        phr.singling_out_risk(frame, frame, frame, mode="multivariate", n_cols=7)
    with pytest.raises(ValueError, match="`mode`"):
        phr.singling_out_risk(frame, frame, frame, mode="both")  # type: ignore[arg-type]
    with pytest.raises(ColumnNotFoundError):
        phr.singling_out_risk(frame, frame.drop("t"), frame)
    huge = pl.DataFrame({"x": [1, 2**60]})
    with pytest.raises(ComputeError, match="'x'"):
        phr.singling_out_risk(huge, huge, huge)
    listed = pl.DataFrame({"x": [[1], [2]]})
    with pytest.raises(SchemaError, match="'x'"):
        phr.singling_out_risk(listed, listed, listed)
    with pytest.raises(NoDataError, match="holdout: no record"):
        phr.singling_out_risk(frame, frame, frame.clear())


def test_no_query_to_ask_is_no_risk() -> None:
    grid = pl.DataFrame({"x": [1, 1, 2, 2], "y": [1, 2, 1, 2]})
    found = phr.singling_out_risk(grid, grid, grid.head(3))
    assert (found.queries, found.risk, found.risk_interval) == (0, 0.0, (0.0, 1.0))
    entry = found.to_dict()
    assert entry["members"] == {
        "successes": 0.0,
        "records": 0,
        "share": None,
        "rate": None,
        "error": None,
    }
    assert "nothing to ask" in found.rows()[0][1]


# --- anonymeter itself, in the peers' venv (`make peers`), where its result is defined


def peer_case(seed: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Numbers with ties, text, booleans and missing values; originals and holdout of one
    size, duplicates dropped (anonymeter compares their sizes after dropping them)."""
    rng = np.random.default_rng(seed)

    def frame(n: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "a": [None if rng.random() < 0.05 else float(v) for v in rng.normal(size=n)],
                "b": rng.integers(0, 8, n),
                # Quotes: anonymeter's multivariate query asks for the text escaped.
                "c": rng.choice(["x", "y'", 'z"', "y\\'"], n),
                "g": rng.integers(0, 2, n).astype(bool),
            }
        )

    originals = frame(60).unique(maintain_order=True)
    holdout = frame(200).unique(maintain_order=True).head(originals.height)
    synthetic = pl.concat([originals.head(20), frame(40)])
    return originals, synthetic, holdout


@pytest.mark.parametrize(
    ("mode", "n_cols", "seed"),
    [("univariate", 1, 0), ("multivariate", 2, 1), ("multivariate", 3, 2)],
)
def test_equal_to_anonymeter(mode: str, n_cols: int, seed: int) -> None:
    originals, synthetic, holdout = peer_case(seed)
    assert originals.height == holdout.height
    found = phr.singling_out_risk(originals, synthetic, holdout, mode=mode, n_cols=n_cols)  # type: ignore[arg-type]
    case = {
        "peer": "singling_out",
        "mode": mode,
        "n_cols": n_cols,
        "queries": found.queries,
        "confidence": 0.95,
        "originals": as_columns(originals),
        "synthetic": as_columns(synthetic),
        "holdout": as_columns(holdout),
    }
    (peer,) = run_peer([case], needs="anonymeter")
    assert peer["queries"] == found.queries
    assert (peer["n_success"], peer["n_control"]) == (
        found.members.successes,
        found.control.successes,
    )
    assert math.isclose(found.risk, peer["risk"], rel_tol=1e-9, abs_tol=1e-12)
    for ours_end, theirs in zip(found.risk_interval, peer["interval"], strict=True):
        assert math.isclose(ours_end, theirs, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(found.members.rate, peer["attack_rate"][0], rel_tol=1e-9)
    assert math.isclose(found.control.error, peer["control_rate"][1], rel_tol=1e-9)


@pytest.mark.parametrize(("seed", "n"), [(0, 3000), (1, 3000), (2, 20000)])
def test_closed_box_counts_are_the_scan(seed: int, n: int) -> None:
    """Ties on every edge; at 20000 points, so many copies that the tree holds each
    distinct point once, weighted (`KdTree.build_collapsed`)."""
    from polars_hidden_rate.engine.boxes import count_in_closed_boxes
    from polars_hidden_rate.engine.kdtree import KdTree

    rng = np.random.default_rng(seed)
    points = rng.integers(0, 4, (n, 3)).astype(np.float64)
    assert (KdTree.build_collapsed(points) is not None) == (n > 4 * 4096)
    points[::7] *= 2.0**600
    lower = rng.integers(0, 4, (400, 3)).astype(np.float64)
    upper = lower + rng.integers(0, 2, (400, 3))
    lower[::3, 1], upper[1::3, 2] = -np.inf, np.inf
    found = count_in_closed_boxes(points, lower, upper, threads=2)
    scan = [
        np.all((points >= lo) & (points <= hi), axis=1).sum()
        for lo, hi in zip(lower, upper, strict=True)
    ]
    assert found.tolist() == scan
    capped = count_in_closed_boxes(points, lower, upper, cap=2, threads=2)
    assert capped.tolist() == [min(n, 2) for n in scan]


def test_the_report_runs_the_attack_and_judges_its_target() -> None:
    columns = ["i", "f", "t", "u"]
    originals, holdout = mixed(60, 17).select(columns), mixed(60, 18).select(columns)
    synthetic = pl.concat([originals.head(30), mixed(30, 19).select(columns)])
    asked = {"features": columns, "categorical": ["t"], "impute": "median"}
    report = phr.privacy_report(
        originals,
        synthetic,
        holdout=holdout,
        singling_out="multivariate",
        n_cols=2,
        targets={"singling_out_risk": 0.0},
        allow_unlinked=True,
        **asked,  # type: ignore[arg-type]
    )
    alone = phr.singling_out_risk(originals, synthetic, holdout, mode="multivariate", n_cols=2)
    assert report.singling_out is not None
    assert report.singling_out.to_dict() == alone.to_dict()
    assert alone.queries > 0
    assert report.holdout_values["singling_out_risk"] == alone.risk
    assert report.holdout_checks["singling_out_risk"] == (alone.risk <= 0.0)
    with pytest.raises(ValueError, match="needs a holdout"):
        phr.privacy_report(originals, synthetic, singling_out="univariate", **asked)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`n_cols` sets the multivariate"):
        phr.privacy_report(
            originals,
            synthetic,
            holdout=holdout,
            singling_out="univariate",
            n_cols=2,
            **asked,  # type: ignore[arg-type]
        )
    with pytest.raises(phr.UnmeasuredTargetError, match="`singling_out`"):
        phr.privacy_report(
            originals,
            synthetic,
            holdout=holdout,
            targets={"singling_out_risk": 0.1},
            **asked,  # type: ignore[arg-type]
        )


@pytest.mark.parametrize("mode", ["univariate", "multivariate"])
def test_progress_counts_the_queries_without_changing_the_risk(
    capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    # Without the dates, which only the univariate attack asks.
    originals, synthetic, holdout = (
        mixed(n, seed).drop("d") for n, seed in ((60, 0), (50, 1), (60, 2))
    )
    quiet = phr.singling_out_risk(originals, synthetic, holdout, mode=mode, n_cols=2)  # type: ignore[arg-type]
    capsys.readouterr()
    shown = phr.singling_out_risk(
        originals,
        synthetic,
        holdout,
        mode=mode,  # type: ignore[arg-type]
        n_cols=2,
        progress=True,
    )
    assert shown.to_dict() == quiet.to_dict()
    # progress=True off a terminal: plain log lines, the stage's start and its end.
    err = capsys.readouterr().err
    assert "hidden-rate: singling-out attack, queries: started\n" in err
    assert "hidden-rate: singling-out attack, queries: done in " in err
