"""A holdout checked as the avatars are: its categories coded as the originals' (and an
inference secret's), its types by the avatars' rule, never an input itself, its copies of
originals counted; and the originals' values never quoted in a message."""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.exceptions import ComputeError, DuplicateError

import polars_hidden_rate as phr
from polars_hidden_rate.cli import main
from polars_hidden_rate.measures.holdout import HoldoutOverlapWarning

OPTIONS: phr.CountOptions = {"categorical": ["sex", "smoker"], "ncp": 3}


def release(seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Originals, their avatars (k = 5) and a holdout: independent samples of one population."""
    rng = np.random.default_rng(seed)
    population = pl.DataFrame(
        {
            "id": np.arange(600),
            "age": rng.normal(50, 10, 600).round(),
            "bmi": rng.normal(25, 4, 600),
            "sex": rng.choice(["F", "M"], 600),
            "smoker": rng.choice(["yes", "no"], 600),
        }
    )
    originals, holdout = population.head(400), population.tail(200)
    avatars = phr.avatarize(originals.drop("id"), k=5, ncp=3, seed=seed)
    return originals.drop("id"), avatars, holdout.drop("id")


HOLDOUT_MEASURES: list[Callable[..., Any]] = [
    lambda o, a, h: phr.membership_risk(o, a, h, **OPTIONS),
    lambda o, a, h: phr.dcr_overfitting_protection(o, a, h, **OPTIONS),
    lambda o, a, h: phr.inference_risk(o, a, h, known=["age", "sex"], secret="smoker"),
    lambda o, a, h: phr.privacy_report(o, a, holdout=h, **OPTIONS),
]


@pytest.mark.parametrize("measure", HOLDOUT_MEASURES)
def test_a_holdout_with_recoded_categories_is_refused(measure: Callable[..., Any]) -> None:
    originals, avatars, holdout = release()
    measure(originals, avatars, holdout)  # coded alike: measured
    recoded = holdout.with_columns(pl.col("sex").str.to_lowercase())
    with pytest.raises(ComputeError, match=r"holdout's 'sex': 200 of 200 holdout values") as error:
        measure(originals, avatars, recoded)
    assert "recoded?" in str(error.value)
    # Neither the holdout's values nor the originals' are quoted: both are real people's.
    for value in ("'f'", "'m'", "'F'", "'M'"):
        assert value not in str(error.value)


def test_recoded_synthetic_categories_are_refused_by_the_holdout_measures() -> None:
    originals, avatars, holdout = release()
    recoded = avatars.with_columns(pl.col("sex").str.to_lowercase())
    with pytest.raises(ComputeError, match=r"synthetic's 'sex' holds 'f', 'm', \.\.\.: 400 of"):
        phr.membership_risk(originals, recoded, holdout, **OPTIONS)


def test_the_report_refuses_a_recoded_holdout_through_the_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, avatars, holdout = release()
    paths = [tmp_path / f"{name}.csv" for name in ("o", "a", "h")]
    recoded = holdout.with_columns(pl.col("sex").str.to_lowercase())
    for frame, path in zip((originals, avatars, recoded), paths, strict=True):
        frame.write_csv(path)
    argv = ["report", str(paths[0]), str(paths[1]), "--holdout", str(paths[2])]
    assert main([*argv, "--categorical", "sex,smoker", "--ncp", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "holdout's 'sex'" in err
    assert "recoded?" in err


@pytest.mark.parametrize("role", ["holdout", "synthetic"])
def test_a_recoded_categorical_secret_is_refused(role: str) -> None:
    originals, avatars, holdout = release()
    sets = {"synthetic": avatars, "holdout": holdout}
    before = phr.inference_risk(originals, *sets.values(), known=["age", "bmi"], secret="smoker")
    assert 0 <= before.risk <= 1
    sets[role] = sets[role].with_columns(pl.col("smoker").str.to_uppercase())
    owner = "holdout's" if role == "holdout" else "synthetic's"
    with pytest.raises(ComputeError, match=rf"{owner} secret 'smoker'") as error:
        phr.inference_risk(originals, *sets.values(), known=["age", "bmi"], secret="smoker")
    assert "recoded?" in str(error.value)
    assert ("'YES'" in str(error.value)) == (role == "synthetic")
    assert "'yes'" not in str(error.value)


def test_a_secret_with_some_unseen_categories_is_measured() -> None:
    originals, avatars, holdout = release()
    some = holdout.with_columns(
        smoker=pl.when(pl.int_range(200) < 100).then(pl.lit("x")).otherwise(pl.col("smoker"))
    )  # exactly half: measured, as the avatars' features are
    phr.inference_risk(originals, avatars, some, known=["age", "bmi"], secret="smoker")


@pytest.mark.parametrize(
    "recast",
    [
        lambda frame: frame.with_columns(pl.col("age").cast(pl.Int64)),  # whole floats
        lambda frame: frame.with_columns(pl.col("sex").cast(pl.Enum(["M", "F"]))),
        lambda frame: frame.with_columns(pl.col("sex").cast(pl.Categorical)),
    ],
)
def test_the_holdout_types_follow_the_avatars_rule(
    recast: Callable[[pl.DataFrame], pl.DataFrame],
) -> None:
    originals, avatars, holdout = release()
    for measure in (phr.membership_risk, phr.dcr_overfitting_protection):
        expected = measure(originals, avatars, holdout, **OPTIONS)
        # The avatars in that type are measured: so is the holdout, to the same figures.
        measure(originals, recast(avatars), holdout, **OPTIONS)
        found = measure(originals, avatars, recast(holdout), **OPTIONS)
        assert found.to_dict() == expected.to_dict()
    report = phr.privacy_report(originals, avatars, holdout=recast(holdout), **OPTIONS)
    assert report.holdout is not None


def test_a_holdout_of_text_against_numbers_is_still_refused() -> None:
    originals, avatars, holdout = release()
    text = holdout.with_columns(pl.col("age").cast(pl.String))
    with pytest.raises(pl.exceptions.SchemaError, match="holdout column 'age' is String"):
        phr.membership_risk(originals, avatars, text, **OPTIONS)


def test_the_link_key_is_not_asked_of_the_holdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, avatars, holdout = release()
    keyed = [frame.with_row_index("id") for frame in (originals, avatars)]
    paths = {name: tmp_path / f"{name}.csv" for name in ("o", "a", "h")}
    for frame, path in zip((*keyed, holdout), paths.values(), strict=True):
        frame.write_csv(path)
    argv = ["report", str(paths["o"]), str(paths["a"]), "--on", "id", "--ncp", "3"]
    code = main([*argv, "--categorical", "sex,smoker", "--holdout", str(paths["h"])])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    figures = json.loads(main_json(argv, paths["h"], capsys))["holdout"]["membership"]
    linked: phr.CountOptions = {**OPTIONS, "on": "id"}
    expected = phr.membership_risk(keyed[0], keyed[1], holdout, **linked)
    assert figures["auc"] == expected.auc  # the API alike: the key is asked of no holdout


def main_json(argv: list[str], holdout: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(
        [*argv, "--categorical", "sex,smoker", "--holdout", str(holdout), "--format", "json"]
    )
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    return captured.out


def test_a_holdout_that_shares_records_with_the_originals_is_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, avatars, holdout = release()
    with warnings.catch_warnings():
        warnings.simplefilter("error", HoldoutOverlapWarning)
        phr.membership_risk(originals, avatars, holdout, **OPTIONS)  # none shared: no warning
    mixed = pl.concat([originals.head(100), holdout.head(100)])
    for measure in HOLDOUT_MEASURES[:2]:  # membership_risk, dcr_overfitting_protection
        with pytest.warns(HoldoutOverlapWarning, match=r"100 of the holdout's 200 records \(50"):
            measure(originals, avatars, mixed)
    paths = [tmp_path / f"{name}.csv" for name in ("o", "a", "h")]
    for frame, path in zip((originals, avatars, mixed), paths, strict=True):
        frame.write_csv(path)
    argv = ["report", str(paths[0]), str(paths[1]), "--holdout", str(paths[2]), "--ncp", "3"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", HoldoutOverlapWarning)  # the script says it its own way
        code = main([*argv, "--categorical", "sex,smoker", "--known", "age,sex"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert err == ""  # a line of the report: nothing on stderr (none with --quiet either)
    said = [line for line in out.splitlines() if "records (50.0 %) are exact copies" in line]
    assert len(said) == 1
    assert said[0].startswith("warning ")
    assert "100 of the holdout's 200 records (50.0 %) are" in said[0]


@pytest.mark.parametrize("how", ["originals", "avatars", "copy", "link"])
def test_a_holdout_that_is_an_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    originals, avatars, _ = release()
    paths = {name: tmp_path / f"{name}.csv" for name in ("originals", "avatars")}
    originals.write_csv(paths["originals"])
    avatars.write_csv(paths["avatars"])
    held = {
        "originals": paths["originals"],
        "avatars": paths["avatars"],
        "copy": tmp_path / "copy.csv",
        "link": tmp_path / "link.csv",
    }[how]
    if how == "copy":
        shutil.copyfile(paths["originals"], held)
    elif how == "link":
        held.hardlink_to(paths["avatars"])
    argv = ["report", str(paths["originals"]), str(paths["avatars"]), "--holdout", str(held)]
    assert main([*argv, "--categorical", "sex,smoker", "--ncp", "3"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"hidden-rate: error: HOLDOUT {str(held)!r} is the same")
    assert "never saw" in captured.err


def test_refusals_never_quote_the_originals_values() -> None:
    originals, avatars, _ = release()
    rng = np.random.default_rng(1)
    days = pl.Series([f"19{y:02d}-0{m}-1{d}" for y, m, d in rng.integers(1, 9, (400, 3))])
    born = originals.with_columns(birth_date=days)
    moved = avatars.with_columns(birth_date=days.str.replace("^19", "20"))
    with pytest.raises(ComputeError, match=r"avatars' 'birth_date' holds '20") as error:
        phr.hidden_rate(born, moved, ncp=3)
    assert not any(day in str(error.value) for day in days.to_list())
    # A numeric column read as text: named, its notation said, no value of the originals.
    commas = originals.with_columns(pl.col("bmi").round(2).cast(pl.String).str.replace(r"\.", ","))
    with pytest.raises(ComputeError, match="'bmi' of originals is text but every") as error:
        phr.hidden_rate(commas, avatars.with_columns(commas["bmi"]), ncp=3)
    assert "e.g." not in str(error.value)
    assert not any(value in str(error.value) for value in commas["bmi"].head(50).to_list())
    # A duplicated key of the originals: counted, not quoted; the avatars' (released) quoted.
    keyed = originals.with_row_index("id").with_columns(pl.col("id").cast(pl.Int64) + 7000)
    twice = keyed.with_columns(id=pl.when(pl.col("id") == 7001).then(7000).otherwise("id"))
    released = avatars.with_columns(keyed["id"])
    with pytest.raises(DuplicateError, match="not unique in originals: 2 rows") as duplicated:
        phr.hidden_rate(twice, released, coords=["age", "bmi"], on="id")
    assert "7000" not in str(duplicated.value)
    with pytest.raises(
        DuplicateError, match=r"not unique in avatars: 2 rows .*e\.g\. \{'id': 7000"
    ):
        phr.hidden_rate(keyed, twice.select(released.columns), coords=["age", "bmi"], on="id")


@pytest.mark.parametrize("name", ["aids", "wbcd"])
def test_the_papers_real_holdouts_are_accepted_without_a_warning(
    wbcd_dir: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    # The paper's round 0: holdout_0 trained the generator, remaining_0 is the real holdout
    # (WBCD's shares 35 % of its records with the originals, which repeat 42 % of theirs).
    split = wbcd_dir.parent / name / "privacy"
    files = [split / f"{part}_0.csv" for part in ("holdout", "avatar", "remaining")]
    argv = ["report", str(files[0]), str(files[1]), "--holdout", str(files[2])]
    code = main([*argv, "--ncp", "5", "--impute", "median", "--format", "json"])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    assert captured.err == ""
    figures = json.loads(captured.out)["holdout"]
    assert 0.3 < figures["membership"]["auc"] < 0.7
