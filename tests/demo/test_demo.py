"""The demonstration and the default projection, end to end through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate.cli import main
from polars_hidden_rate.demo.cohort import DEFAULT_KS, cohort, k_table, sweep_k


def test_demo_prints_the_k_table_and_writes_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    plots = tmp_path / "plots"
    assert main(["demo", "--rows", "800", "--plot", str(plots)]) == 0
    out = capsys.readouterr().out
    rows = [
        line.split()
        for line in out.splitlines()
        if line.split()[:1] in (["2"], ["5"], ["10"], ["20"], ["50"])
    ]
    assert [int(row[0]) for row in rows] == list(DEFAULT_KS)
    rates = [float(row[1]) for row in rows]
    medians = [float(row[3]) for row in rows]
    # From k = 5 on, a larger k hides more; the median local cloaking never falls.
    assert rates[1] < rates[2] < rates[3] < rates[4]
    assert medians == sorted(medians)
    expected = k_table(sweep_k(cohort(800, seed=0), seed=0))
    np.testing.assert_allclose(rates, expected["hidden_rate"].round(2).to_numpy())
    for name in ("local_cloaking.png", "hidden_rate_by_k.png"):
        assert (plots / name).stat().st_size > 1000


def test_sweep_measures_each_anonymization() -> None:
    originals = cohort(300, seed=2)
    per_record = sweep_k(originals, (3, 30), ncp=4, seed=5)
    assert per_record.columns == ["k", "local_cloaking"]
    for k in (3, 30):
        avatars = phr.avatarize(originals, k, ncp=4, seed=5)
        expected = phr.local_cloaking(originals, avatars, ncp=4)["local_cloaking"]
        got = per_record.filter(pl.col("k") == k)["local_cloaking"]
        assert got.to_list() == expected.to_list()


@pytest.fixture
def raw_files(tmp_path: Path) -> tuple[Path, Path, pl.DataFrame, pl.DataFrame]:
    key = pl.int_range(pl.len(), dtype=pl.Int64).alias("id")
    originals = cohort(400, seed=1).with_columns(key)
    avatars = phr.avatarize(originals.drop("id"), 5, seed=1).with_columns(key)
    originals.write_parquet(tmp_path / "originals.parquet")
    avatars.sample(fraction=1.0, shuffle=True, seed=0).write_csv(tmp_path / "avatars.csv")
    return tmp_path / "originals.parquet", tmp_path / "avatars.csv", originals, avatars


def test_check_projects_raw_columns_by_default(
    raw_files: tuple[Path, Path, pl.DataFrame, pl.DataFrame], capsys: pytest.CaptureFixture[str]
) -> None:
    original_path, avatar_path, originals, avatars = raw_files
    assert (
        main(["check", str(original_path), str(avatar_path), "--on", "id", "--format", "json"]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["hidden_rate"] == pytest.approx(phr.hidden_rate(originals, avatars, on="id"))


def test_check_features_and_ncp(
    raw_files: tuple[Path, Path, pl.DataFrame, pl.DataFrame], capsys: pytest.CaptureFixture[str]
) -> None:
    original_path, avatar_path, originals, avatars = raw_files
    args = ["check", str(original_path), str(avatar_path), "--on", "id", "--format", "json"]
    assert main([*args, "--features", "age,weight_kg,smoker", "--ncp", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    expected = phr.hidden_rate(
        originals, avatars, on="id", features=["age", "weight_kg", "smoker"], ncp=2
    )
    assert report["hidden_rate"] == pytest.approx(expected)
    assert main([*args, "--features", "age,nope"]) == 2
    assert "nope" in capsys.readouterr().err
