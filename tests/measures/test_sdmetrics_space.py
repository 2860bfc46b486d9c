"""SDMetrics' space (``space="sdmetrics"``) of the DCR overfitting and baseline protections:
its distance against a float64 brute force written out (`brute_sdmetrics_dcr`), and against
SDMetrics 0.32 itself in the peers' venv, float for float, on generated mixed data (missing
values, constant columns, text categories, numbers declared categorical) and on the AIDS
round-0 privacy split."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.exceptions import SchemaError

import polars_hidden_rate as phr
from polars_hidden_rate.measures.baseline import random_records
from polars_hidden_rate.measures.overfitting import DcrOverfitting
from polars_hidden_rate.measures.sdmetrics_space import SdmetricsColumns, sdmetrics_dcr
from tests.helpers import (
    SHARED_DATASETS,
    as_columns,
    block_sdmetrics_dcr,
    brute_sdmetrics_dcr,
    run_peer,
)

AIDS = SHARED_DATASETS / "aids" / "privacy"


def mixed(n: int, seed: int) -> pl.DataFrame:
    """Mixed records: floats with nulls and NaN, integers with nulls, a constant column, text
    categories with nulls, a 0/1/2 code and booleans; few distinct values, so ties."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n).round(1) * 3.0
    x[rng.random(n) < 0.1] = np.nan
    age = pl.Series("age", rng.integers(18, 90, n)).scatter(
        np.flatnonzero(rng.random(n) < 0.1), None
    )
    city = pl.Series("city", rng.choice(["Paris", "Lyon", "Nice"], n).tolist())
    return pl.DataFrame(
        {
            "x": pl.Series(x).scatter(np.flatnonzero(rng.random(n) < 0.05), None),
            "age": age,
            "constant": np.full(n, 7.0),
            "city": city.scatter(np.flatnonzero(rng.random(n) < 0.1), None),
            "stage": rng.integers(0, 3, n),
            "smoker": rng.random(n) < 0.3,
        }
    )


CATEGORICAL = ["stage"]
SDTYPES = {
    "x": "numerical",
    "age": "numerical",
    "constant": "numerical",
    "city": "categorical",
    "stage": "categorical",
    "smoker": "boolean",
}


def columns_of(frame: pl.DataFrame) -> SdmetricsColumns:
    return SdmetricsColumns.of(frame.columns, frame.schema, CATEGORICAL)


def test_the_distance_is_the_brute_force_float_for_float() -> None:
    originals, synthetic = mixed(60, 1), pl.concat([mixed(40, 2), mixed(60, 1).head(5)])
    columns = columns_of(originals)
    assert columns.numerical == (True, True, True, False, False, False)
    read = columns.arrays({"originals": originals, "synthetic": synthetic})
    found = sdmetrics_dcr(read["synthetic"], read["originals"], columns.numerical)
    brute = brute_sdmetrics_dcr(
        [list(row) for row in synthetic.iter_rows()],
        [list(row) for row in originals.iter_rows()],
        list(columns.numerical),
    )
    assert found.tolist() == brute
    assert (found[-5:] == 0.0).all()  # copies, missing values equal


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_tree_search_is_the_numpy_brute_force_float_for_float(seed: int) -> None:
    """The kd-tree search against every pair, on thousands of records: ties by the
    hundred (few values, copies), missing numbers on either side or both, a column missing
    in the whole reference (its range NaN), a constant column (range 0), queries beyond the
    reference's range; the tree's copies collapsed where they abound."""
    rng = np.random.default_rng(seed)
    n, m = 3000, 2500
    reference = np.column_stack(
        [
            rng.integers(0, 5, n).astype(float),
            rng.normal(size=n).round(1),
            np.full(n, 3.0),
            np.full(n, np.nan),
            rng.integers(1, 4, n).astype(float),
            rng.normal(size=n),
        ]
    )
    queries = np.column_stack(
        [
            rng.integers(-1, 7, m).astype(float),
            rng.normal(size=m).round(1) * 1.5,
            rng.choice([3.0, 4.0], m),
            rng.choice([1.0, np.nan], m),
            rng.integers(1, 5, m).astype(float),
            rng.normal(size=m),
        ]
    )
    for values, share in ((reference, 0.1), (queries, 0.2)):
        for k in (0, 1, 4, 5):
            values[rng.random(len(values)) < share, k] = np.nan
    queries[:200] = reference[:200]  # copies, missing values equal
    numerical = [True, True, True, True, False, True]
    for columns in (numerical, [True, False, True, True, False, False], [False, True, False]):
        d = len(columns)
        found = sdmetrics_dcr(queries[:, :d], reference[:, :d], columns)
        assert (
            found.tolist()
            == block_sdmetrics_dcr(queries[:, :d], reference[:, :d], columns).tolist()
        )
        assert (found[:200] == 0.0).all()
    heavy = np.repeat(reference[:40, [0, 4]], 200, axis=0)  # each record 200 times: collapsed
    assert sdmetrics_dcr(queries[:, [0, 4]], heavy, [True, False]).tolist() == (
        block_sdmetrics_dcr(queries[:, [0, 4]], heavy, [True, False]).tolist()
    )


def test_the_range_is_the_reference_sets_own() -> None:
    reference = pl.DataFrame({"v": [0.0, 10.0]})
    queries = pl.DataFrame({"v": [4.0, 100.0]})
    columns = SdmetricsColumns.of(["v"], reference.schema, ())
    read = columns.arrays({"q": queries, "r": reference})
    # 4 / 10; a difference beyond the reference's range is capped at 1
    assert sdmetrics_dcr(read["q"], read["r"], columns.numerical).tolist() == [0.4, 1.0]


def test_the_figures_do_not_depend_on_row_order() -> None:
    originals, synthetic, holdout = mixed(50, 3), mixed(45, 4), mixed(40, 5)
    found = phr.dcr_overfitting_protection(
        originals, synthetic, holdout, space="sdmetrics", categorical=CATEGORICAL
    )
    shuffled = [
        frame.sample(fraction=1.0, shuffle=True, seed=9)
        for frame in (originals, synthetic, holdout)
    ]
    again = phr.dcr_overfitting_protection(*shuffled, space="sdmetrics", categorical=CATEGORICAL)
    assert again == found
    assert found.space == "sdmetrics"
    assert found.tie_tol == 0.0


@pytest.mark.parametrize("power", [600, -600])
def test_the_figures_do_not_depend_on_a_power_of_two_scale(power: int) -> None:
    originals, synthetic, holdout = mixed(50, 13), mixed(45, 14), mixed(40, 15)
    numbers = [pl.col(name) * 2.0**power for name in ("x", "age", "constant")]
    scaled = [frame.with_columns(numbers) for frame in (originals, synthetic, holdout)]

    def dcrs(sets: list[pl.DataFrame]) -> list[list[float]]:
        columns = columns_of(sets[0])
        read = columns.arrays(dict(zip("osh", sets, strict=True)))
        return [sdmetrics_dcr(read[r], read["o"], columns.numerical).tolist() for r in "sh"]

    assert dcrs(scaled) == dcrs([originals, synthetic, holdout])
    options: dict[str, Any] = {"space": "sdmetrics", "categorical": CATEGORICAL}
    assert phr.dcr_overfitting_protection(*scaled, **options) == phr.dcr_overfitting_protection(
        originals, synthetic, holdout, **options
    )
    assert phr.dcr_baseline_protection(*scaled[:2], **options).score == (
        phr.dcr_baseline_protection(originals, synthetic, **options).score
    )


def test_options_with_no_meaning_there_are_refused() -> None:
    frame = pl.DataFrame({"a": [1.0, 2.0, 3.0]})
    with pytest.raises(ValueError, match="`space` must be 'projected' or 'sdmetrics'"):
        phr.dcr_overfitting_protection(frame, frame, frame, space="gower")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="takes no `ncp`"):
        phr.dcr_baseline_protection(frame, frame, space="sdmetrics", ncp=1)
    with pytest.raises(ValueError, match="takes no `tie_tol`"):
        phr.dcr_overfitting_protection(frame, frame, frame, space="sdmetrics", tie_tol=1e-6)
    dated = pl.DataFrame(
        {"a": [1.0, 2.0], "d": pl.Series([0, 86_400_000], dtype=pl.Datetime("ms"))}
    )
    with pytest.raises(SchemaError, match="column 'd' is Datetime"):
        phr.dcr_baseline_protection(dated, dated, space="sdmetrics")


# --- SDMetrics itself, in the peers' venv (`make peers`)


def peer_case(
    originals: pl.DataFrame,
    synthetic: pl.DataFrame,
    holdout: pl.DataFrame | None,
    sdtypes: dict[str, str],
    random: pl.DataFrame | None = None,
) -> dict[str, Any]:
    case: dict[str, Any] = {
        "peer": "sdmetrics_dcr",
        "originals": as_columns(originals),
        "synthetic": as_columns(synthetic),
        "sdtypes": sdtypes,
    }
    if holdout is not None:
        case["holdout"] = as_columns(holdout)
    if random is not None:
        case["random"] = as_columns(random)
    return case


def check_against_sdmetrics(
    originals: pl.DataFrame,
    synthetic: pl.DataFrame,
    holdout: pl.DataFrame,
    peer: dict[str, Any],
    found: DcrOverfitting,
    columns: SdmetricsColumns,
) -> None:
    read = columns.arrays({"o": originals, "s": synthetic, "h": holdout})
    to_training = sdmetrics_dcr(read["s"], read["o"], columns.numerical)
    to_holdout = sdmetrics_dcr(read["s"], read["h"], columns.numerical)
    assert to_training.tolist() == peer["to_originals"]  # every row, float for float
    assert to_holdout.tolist() == peer["to_holdout"]
    assert found.closer_to_training == peer["closer_to_training"]
    assert found.sdmetrics_score == peer["score"]


def test_the_overfitting_and_baseline_equal_sdmetrics_on_mixed_data() -> None:
    originals, synthetic, holdout = (
        mixed(70, 6),
        pl.concat([mixed(50, 7), mixed(70, 6).head(8)]),
        mixed(40, 8),
    )
    random = random_records(originals, frozenset({"city", "stage", "smoker"}), synthetic.height, 3)
    peers = run_peer([peer_case(originals, synthetic, holdout, SDTYPES, random)], needs="sdmetrics")
    found = phr.dcr_overfitting_protection(
        originals, synthetic, holdout, space="sdmetrics", categorical=CATEGORICAL
    )
    check_against_sdmetrics(originals, synthetic, holdout, peers[0], found, columns_of(originals))
    baseline = phr.dcr_baseline_protection(
        originals, synthetic, seed=3, space="sdmetrics", categorical=CATEGORICAL
    )
    assert [baseline.synthetic_median, baseline.random_median] == peers[0]["medians"]
    score = peers[0]["medians"][0] / peers[0]["medians"][1]
    assert baseline.score == min(score, 1.0)


def test_an_all_numeric_table_equals_sdmetrics() -> None:
    rng = np.random.default_rng(11)
    originals = pl.DataFrame({f"c{k}": rng.uniform(0, 1, 40) * 10.0 ** (k - 4) for k in range(10)})
    synthetic = pl.DataFrame({f"c{k}": rng.uniform(0, 1, 30) * 10.0 ** (k - 4) for k in range(10)})
    holdout = pl.DataFrame({f"c{k}": rng.uniform(0, 1, 35) * 10.0 ** (k - 4) for k in range(10)})
    sdtypes = dict.fromkeys(originals.columns, "numerical")
    peers = run_peer([peer_case(originals, synthetic, holdout, sdtypes)], needs="sdmetrics")
    found = phr.dcr_overfitting_protection(originals, synthetic, holdout, space="sdmetrics")
    columns = SdmetricsColumns.of(originals.columns, originals.schema, ())
    check_against_sdmetrics(originals, synthetic, holdout, peers[0], found, columns)


def test_the_aids_round_0_split_equals_sdmetrics() -> None:
    if not AIDS.is_dir():
        pytest.skip(f"no AIDS privacy split at {AIDS} (shared/datasets beside the checkout)")
    training, unseen, ctgan = (
        pl.read_csv(AIDS / f"{name}_0.csv") for name in ("holdout", "remaining", "ctgan")
    )
    found = phr.dcr_overfitting_protection(
        training, ctgan, unseen, space="sdmetrics", categorical="auto"
    )
    request_columns = SdmetricsColumns.of(
        training.columns,
        training.schema,
        [name for name in training.columns if training[name].drop_nulls().n_unique() <= 10],
    )
    sdtypes = {
        name: "numerical" if numerical else "categorical"
        for name, numerical in zip(request_columns.names, request_columns.numerical, strict=True)
    }
    peers = run_peer([peer_case(training, ctgan, unseen, sdtypes)], needs="sdmetrics")
    check_against_sdmetrics(training, ctgan, unseen, peers[0], found, request_columns)


# --- the report: SDMetrics' space for the DCR measures, and both spaces side by side


def release(seed: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Originals, avatars near them (gaps in ``bmi``, ``stage`` a 0/1/2 code), a holdout."""
    from tests.helpers import raw_release

    originals, avatars = raw_release(n=120, seed=seed)
    holdout, _ = raw_release(n=80, seed=seed + 1)
    return originals.drop("id"), avatars, holdout.drop("id")


SPACE_OPTIONS: dict[str, Any] = {"categorical": ["stage"], "impute": "median", "ncp": 3}


def test_the_report_reads_the_dcr_measures_in_both_spaces_and_flags_a_differing_verdict() -> None:
    originals, avatars, holdout = release(20)
    alone = phr.dcr_overfitting_protection(
        originals, avatars, holdout, space="sdmetrics", categorical=["stage"]
    )
    projected = phr.dcr_overfitting_protection(originals, avatars, holdout, **SPACE_OPTIONS)
    assert alone.score != projected.score  # the two distances read this release apart
    target = (alone.score + projected.score) / 2  # one space passes, the other fails
    report = phr.privacy_report(
        originals,
        avatars,
        holdout=holdout,
        compare_spaces=True,
        dcr_baseline=True,
        baseline_seed=4,
        targets={"dcr_overfitting_protection": target},
        **SPACE_OPTIONS,
    )
    comparison = report.space_comparison
    assert comparison is not None
    assert comparison.overfitting == {"projected": projected, "sdmetrics": alone}
    assert comparison.baseline["sdmetrics"] == phr.dcr_baseline_protection(
        originals, avatars, seed=4, space="sdmetrics", categorical=["stage"]
    )
    assert comparison.baseline["projected"] == report.dcr_baseline
    assert report.holdout is not None
    assert report.holdout.overfitting == projected
    assert comparison.differs
    data = report.to_dict()["space_comparison"]
    assert data["dcr_overfitting_protection"]["sdmetrics"] == alone.to_dict()
    assert data["passed"] == {
        "projected": projected.score >= target,
        "sdmetrics": alone.score >= target,
    }
    assert data["differs"] is True
    text = report.to_text()
    assert "the verdict depends on the distance" in text
    assert "the verdict depends on the distance" in report.to_html()
    # Without the option: no section, the JSON's entry null.
    plain = phr.privacy_report(originals, avatars, holdout=holdout, **SPACE_OPTIONS)
    assert plain.space_comparison is None
    assert plain.to_dict()["space_comparison"] is None


def test_the_report_measures_the_dcr_measures_in_sdmetrics_space() -> None:
    originals, avatars, holdout = release(22)
    report = phr.privacy_report(
        originals,
        avatars,
        holdout=holdout,
        dcr_space="sdmetrics",
        dcr_baseline=True,
        **SPACE_OPTIONS,
    )
    assert report.holdout is not None
    assert report.holdout.overfitting == phr.dcr_overfitting_protection(
        originals, avatars, holdout, space="sdmetrics", categorical=["stage"]
    )
    assert report.dcr_baseline == phr.dcr_baseline_protection(
        originals, avatars, space="sdmetrics", categorical=["stage"]
    )
    assert report.to_dict()["holdout"]["dcr_overfitting_protection"]["space"] == "sdmetrics"
    text = report.to_text()
    assert text.count("SDMetrics' distance (each column's difference") == 2  # both measures
    assert report.space_comparison is None


@pytest.mark.parametrize("option", [{"compare_spaces": True}, {"dcr_space": "sdmetrics"}])
def test_the_report_refuses_a_space_option_with_nothing_to_act_on(option: dict[str, Any]) -> None:
    originals, avatars, _ = release(24)
    name = next(iter(option))
    with pytest.raises(ValueError, match=f"`{name}` sets the space of the DCR"):
        phr.privacy_report(originals, avatars, **option, **SPACE_OPTIONS)
    with pytest.raises(ValueError, match="`space` must be 'projected' or 'sdmetrics'"):
        phr.privacy_report(originals, avatars, dcr_space="gower", **SPACE_OPTIONS)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`space` must be 'projected' or 'gower'"):
        phr.privacy_report(originals, avatars, attack_space="sdmetrics", **SPACE_OPTIONS)  # type: ignore[arg-type]


def test_the_command_line_takes_space_sdmetrics_and_compare_spaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from polars_hidden_rate.cli import main
    from tests.helpers import write_raw

    originals, avatars, holdout = release(26)
    o, a, h = (
        write_raw(frame, tmp_path / f"{name}.csv", ",")
        for name, frame in (("o", originals), ("a", avatars), ("h", holdout))
    )
    options = ["--categorical", "stage", "--impute", "median", "--ncp", "3"]
    args = ["report", str(o), str(a), *options, "--holdout", str(h), "--allow-unlinked"]
    main([*args, "--space", "sdmetrics", "--compare-spaces", "--dcr-baseline", "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    alone = phr.dcr_overfitting_protection(
        originals, avatars, holdout, space="sdmetrics", categorical=["stage"]
    )
    assert data["holdout"]["dcr_overfitting_protection"] == alone.to_dict()
    assert data["space_comparison"]["dcr_overfitting_protection"]["sdmetrics"] == alone.to_dict()
    assert data["dcr_baseline_protection"]["space"] == "sdmetrics"
    assert data["provenance"]["settings"]["dcr_space"] == {
        "space": "sdmetrics",
        "compare_spaces": True,
    }
    # Nothing to act on: exit 2, one line naming the flag.
    for flag in (["--compare-spaces"], ["--space", "sdmetrics"]):
        assert main(["report", str(o), str(a), *options, *flag]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"{' '.join(flag)} sets the space of the DCR" in err
