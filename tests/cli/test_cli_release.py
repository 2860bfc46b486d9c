"""Checking a release from raw files, and the report, through the command line."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
import polars_hidden_rate.runs as runs
from polars_hidden_rate.cli import main
from polars_hidden_rate.measures.summary import summarize
from tests.helpers import raw_release, without_provenance, write_raw

FEATURES = ["age", "bmi", "stage", "smoker"]


OPTIONS = ["--ncp", "4", "--categorical", "stage", "--impute", "median"]


def expected_rate(originals: pl.DataFrame, avatars: pl.DataFrame) -> float:
    return phr.hidden_rate(
        originals, avatars, features=FEATURES, ncp=4, categorical=["stage"], impute="median"
    )


@pytest.mark.parametrize("separator", [";", "\t", ","])
def test_raw_csv_release_needs_no_python(
    tmp_path: Path, separator: str, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, avatars = raw_release()
    o = write_raw(originals, tmp_path / "originals.csv", separator)
    a = write_raw(avatars, tmp_path / "avatars.csv", separator)
    assert main(["check", str(o), str(a), *OPTIONS, "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["hidden_rate"] == expected_rate(originals, avatars)
    assert summary["n"] == originals.height


def test_the_raw_release_through_the_script(tmp_path: Path) -> None:
    originals, avatars = raw_release(seed=3)
    o = write_raw(originals, tmp_path / "originals.csv", ";")
    a = write_raw(avatars, tmp_path / "avatars.csv", ";")
    script = Path(sys.executable).parent / "hidden-rate"
    if not script.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    done = subprocess.run(
        [str(script), "check", str(o), str(a), *OPTIONS, "--format", "json", "--min-rate", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hidden_rate"] == expected_rate(originals, avatars)
    # Without imputation, the gaps are named, and how to fill them: exit 2, one line.
    done = subprocess.run(
        [str(script), "check", str(o), str(a), "--categorical", "stage"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "'bmi'" in done.stderr
    assert "--impute median" in done.stderr  # the command line's words, not Python's
    assert "impute=" not in done.stderr


def test_every_component_through_the_script(tmp_path: Path) -> None:
    # --ncp all: every column of the scaled space (2 numbers, 3 + 2 modalities: 7), stated in
    # the provenance and the report's space, and counted as the library counts it.
    originals, avatars = raw_release(seed=8)
    o = write_raw(originals, tmp_path / "originals.csv", ";")
    a = write_raw(avatars, tmp_path / "avatars.csv", ";")
    script = Path(sys.executable).parent / "hidden-rate"
    if not script.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    options = ["--categorical", "stage", "--impute", "median"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(script), *args], capture_output=True, text=True, check=False)

    done = run("check", str(o), str(a), "--ncp", "all", *options, "--format", "json")
    assert done.returncode == 0, done.stderr  # no --min-rate: no gate
    got = json.loads(done.stdout)
    expected = phr.hidden_rate(
        originals, avatars, features=FEATURES, ncp="all", categorical=["stage"], impute="median"
    )
    assert got["hidden_rate"] == expected
    assert expected != expected_rate(originals, avatars)  # not the space of --ncp 4
    space = got["provenance"]["settings"]["space"]
    assert (space["ncp"], space["ncp_requested"]) == (7, "all")
    assert (space["components_available"], space["components_spanned"]) == (7, 5)
    done = run("report", str(o), str(a), "--ncp", "all", *options, "--format", "json")
    assert done.returncode == 1, done.stderr  # a report: some target misses
    assert json.loads(done.stdout)["space"] == "FAMD, 7 of 7 components (the originals span 5)"
    done = run("report", str(o), str(a), "--ncp", "all", *options)
    assert "space                 FAMD, 7 of 7 components (the originals span 5)" in done.stdout
    # A word that is not "all", and a width the space does not have: exit 2, one line.
    for ncp, culprit in (("every", "'every'"), ("8", "1 <= ncp <= 7")):
        done = run("check", str(o), str(a), "--ncp", ncp, *options)
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1
        assert culprit in done.stderr
        assert "'all'" in done.stderr


def test_an_explicit_separator_and_null_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, avatars = raw_release(seed=4)
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o, separator="|", null_value="missing")
    avatars.write_csv(a, separator="|", null_value="missing")
    args = ["check", str(o), str(a), *OPTIONS, "--format", "json"]
    assert main([*args, "--separator", "|", "--null-values", "missing"]) == 0
    assert json.loads(capsys.readouterr().out)["hidden_rate"] == expected_rate(originals, avatars)
    assert main([*args, "--separator", "||"]) == 2
    assert "one character" in capsys.readouterr().err


def test_check_json_keys_and_values_are_pinned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, avatars = raw_release(seed=5)
    o = write_raw(originals, tmp_path / "o.csv", ";")
    a = write_raw(avatars, tmp_path / "a.csv", ";")
    assert main(["check", str(o), str(a), *OPTIONS, "--format", "json", "--min-rate", "50"]) in (
        0,
        1,
    )
    got = json.loads(capsys.readouterr().out)
    per_record = phr.local_cloaking(
        originals, avatars, features=FEATURES, ncp=4, categorical=["stage"], impute="median"
    )
    counts = per_record["local_cloaking"]
    not_hidden = int((counts == 0).sum())
    assert got == {
        "n": originals.height,
        "hidden_rate": 100.0 * (originals.height - not_hidden) / originals.height,
        "not_hidden": not_hidden,
        "local_cloaking_median": float(counts.median()),  # type: ignore[arg-type]
        "local_cloaking_q1": float(counts.quantile(0.25, "linear")),  # type: ignore[arg-type]
        "local_cloaking_q3": float(counts.quantile(0.75, "linear")),  # type: ignore[arg-type]
        "min_rate": 50.0,
        "passed": 100.0 * (originals.height - not_hidden) / originals.height >= 50.0,
        "not_hidden_share": 100.0 * not_hidden / originals.height,
        "max_own_copies": 10.0,
        "own_copies": 0,
        "own_copies_percent": 0.0,
        "hidden_by_ties_only": got["hidden_by_ties_only"],
        "copy_features": FEATURES,
        "unseen_modalities": {"stage": 0, "smoker": 0},
        "link_test": got["link_test"],
        # Linked by row order: what the sorted-link rule saw (no compared feature sorted).
        "sorted_link": {"checked": True, "column": None, "direction": None, "within": None},
        "failures": got["failures"],
        "provenance": got["provenance"],
        "warnings": [],
    }
    assert list(got["link_test"]) == [
        "tested",
        "linked",
        "n",
        "population",
        "partners",
        "own_closer",
        "own_farther",
        "ties",
        "own_closer_percent",
        "p_value",
        "alpha",
    ]
    assert got["link_test"]["linked"] is True
    assert list(got["provenance"]) == ["inputs", "settings", "versions", "measured_at"]
    assert (
        got["provenance"]["inputs"]["originals"]["sha256"]
        == hashlib.sha256(o.read_bytes()).hexdigest()
    )
    assert got["provenance"]["inputs"]["avatars"]["rows"] == avatars.height
    settings = got["provenance"]["settings"]
    assert settings["space"]["features"] == FEATURES
    assert settings["space"]["categorical"] == ["stage", "smoker"]
    assert settings["space"]["ncp"] == 4
    assert settings["space"]["impute"] == "median"
    assert settings["link"] == {"by": "row order"}
    assert settings["tie_tol"] == 1e-9
    assert set(got["provenance"]["versions"]) == {
        "polars-hidden-rate",
        "polars",
        "numpy",
        "faiss-cpu",
        "numba",
    }


def test_output_goes_through_a_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The summary reads what was written: make it fail after the sink, and the file the
    # output would replace must be as it was, with no temporary file left beside it.
    originals, avatars = raw_release(seed=6)
    o = write_raw(originals, tmp_path / "o.csv", ";")
    a = write_raw(avatars, tmp_path / "a.csv", ";")
    output = tmp_path / "out.parquet"
    output.write_bytes(b"the previous release")
    written: list[Path] = []

    def failing_summary(frame: pl.LazyFrame, **options: object) -> object:
        written.extend(tmp_path.glob(".out.parquet.*.tmp/out.parquet"))
        assert written, "the sink wrote a temporary file"
        assert written[0].stat().st_size > 0
        raise pl.exceptions.ComputeError("summary failed")

    monkeypatch.setattr(runs, "summarize", failing_summary)
    assert main(["check", str(o), str(a), *OPTIONS, "--output", str(output)]) == 2
    assert "summary failed" in capsys.readouterr().err
    assert output.read_bytes() == b"the previous release"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "o.csv", "out.parquet"]
    assert written  # the output was being written elsewhere, not in place
    monkeypatch.undo()
    assert main(["check", str(o), str(a), *OPTIONS, "--output", str(output), "--quiet"]) == 0
    assert summarize(pl.scan_parquet(output)).n == originals.height


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows = 0
        self.svgs = 0
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.rows += tag == "tr"
        self.svgs += tag == "svg"
        self.links += [value or "" for name, value in attrs if name in ("src", "href")]


def test_report_exit_codes_json_and_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, avatars = raw_release(seed=7)
    o = write_raw(originals, tmp_path / "o.csv", ";")
    a = write_raw(avatars, tmp_path / "a.csv", ";")
    page = tmp_path / "report.html"
    expected = phr.privacy_report(
        originals, avatars, features=FEATURES, ncp=4, categorical=["stage"], impute="median"
    )
    code = main(["report", str(o), str(a), *OPTIONS, "--format", "json", "--html", str(page)])
    assert code == (0 if expected.passed else 1)
    got = json.loads(capsys.readouterr().out)
    assert without_provenance(got) == without_provenance(json.loads(json.dumps(expected.to_dict())))
    assert got["provenance"]["inputs"]["originals"]["path"] == str(o.resolve())
    parsed = _Page()
    parsed.feed(page.read_text("utf-8"))
    assert parsed.svgs == 3
    assert parsed.rows >= 5
    assert parsed.links == []
    # Targets every metric meets, then one it cannot: exit 0, then 1.
    easy = [f"--target={name}=-1" for name in expected.values]
    assert main(["report", str(o), str(a), *OPTIONS, *easy, "--quiet"]) == 0
    hard = [*easy, "--target", "hidden_rate=100"]
    assert main(["report", str(o), str(a), *OPTIONS, *hard]) == 1
    text = capsys.readouterr().out
    assert "FAIL" in text
    assert "hidden rate interval" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--target", "hiden_rate=90"], "hiden_rate"),
        (["--target", "hidden_rate"], "NAME=VALUE"),
        (["--html", "{o}"], "--html"),
        (["--html", "{missing}/r.html"], "--html folder not found"),
        (["--known", "agee"], "known column 'agee' not found in originals"),
        (["--known", "age,id"], "known column 'id' not found in avatars"),
        (["--known", "age,age"], "names a column twice"),
        (["--known", "age,"], "empty column name"),
        (
            ["--target", "correlation_protection_rate=90"],
            "--target correlation_protection_rate needs --known",
        ),
    ],
)
def test_report_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    originals, avatars = raw_release(n=50, seed=8)
    o = write_raw(originals, tmp_path / "o.csv", ";")
    a = write_raw(avatars, tmp_path / "a.csv", ";")
    before = o.read_bytes()
    filled = [item.format(o=o, missing=tmp_path / "nowhere") for item in extra]
    assert main(["report", str(o), str(a), *OPTIONS, *filled]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert message in err
    assert o.read_bytes() == before


def test_report_known_adds_the_correlation_protection_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, avatars = raw_release(seed=9)
    o = write_raw(originals, tmp_path / "o.csv", ";")
    a = write_raw(avatars, tmp_path / "a.csv", ";")
    easy = [f"--target={name}=-1" for name in phr.report.METRICS]
    args = ["report", str(o), str(a), *OPTIONS, *easy, "--known", "stage,smoker, age"]
    expected = phr.correlation_protection_rate(
        originals.drop("id"),
        avatars,
        ["stage", "smoker", "age"],
        features=FEATURES,
        ncp=4,
        categorical=["stage"],
        impute="median",
    )
    code = main([*args, "--format", "json"])
    got = json.loads(capsys.readouterr().out)["correlation_protection_rate"]
    assert got["value"] == expected
    assert got["known"] == ["stage", "smoker", "age"]
    assert got["passed"] is (expected > 95.0)
    assert got["reason"] is None
    # The rate decides the verdict: every other target met, the exit code is the rate's.
    assert code == (0 if expected > 95.0 else 1)
    assert main([*args, "--target", "correlation_protection_rate=-1", "--quiet"]) == 0
    assert main([*args, "--target", "correlation_protection_rate=100", "--quiet"]) == 1
    main(args)
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    shown = next(line for line in lines if line[:3] == ["correlation", "protection", "(%)"])
    assert shown[-4:-1] == ["target", ">", "95"]
    assert (next(line for line in lines if line[:2] == ["column", "direct"])[:9]) == [
        "column",
        "direct",
        "match",
        "prot.",
        "(%)",
        "not",
        "applicable:",
        "no",
        "public",
    ]
    verdict = next(line for line in lines if line[0] == "report")
    # The rate counts, and so do the own copies against --max-own-copies.
    assert verdict[2:] == [str(6 + (expected > 95.0)), "of", "7"]


@pytest.mark.parametrize("shared", [0.0, 0.8])
def test_dates_give_one_verdict_whatever_the_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shared: float
) -> None:
    # An ISO date column: a Date in parquet, and in csv once parsed; never text in one of them.
    import datetime as dt

    originals, avatars = raw_release()
    rng = np.random.default_rng(3)
    n = originals.height
    start = dt.date(1950, 1, 1)
    born = [start + dt.timedelta(days=int(day)) for day in rng.integers(0, 20_000, n)]
    moved = [
        day if rng.random() < shared else day + dt.timedelta(days=int(rng.integers(1, 400)))
        for day in born
    ]
    seen = {}
    for kind in ("parquet", "csv"):
        paths = []
        for name, frame, dates in (("o", originals, born), ("a", avatars, moved)):
            path = tmp_path / f"{name}.{kind}"
            frame = frame.with_columns(birth_date=pl.Series(dates, dtype=pl.Date))
            frame.write_parquet(path) if kind == "parquet" else frame.write_csv(path)
            paths.append(str(path))
        code = main(["check", *paths, *OPTIONS, "--format", "json"])
        captured = capsys.readouterr()
        assert code in (0, 1), captured.err
        seen[kind] = without_provenance(json.loads(captured.out))
    assert seen["csv"] == seen["parquet"]


def test_a_csv_date_is_read_as_parquet_reads_it(tmp_path: Path) -> None:
    import datetime as dt

    from polars_hidden_rate.frames.files import scan

    frame = pl.DataFrame(
        {
            "day": [dt.date(2020, 1, 1), dt.date(2021, 5, 3)],
            "at": [dt.datetime(2020, 1, 1, 10), dt.datetime(2020, 1, 2, 11, 30, 5)],
            "text": ["10:00", "x"],
        }
    )
    frame.write_csv(tmp_path / "f.csv")
    frame.write_parquet(tmp_path / "f.parquet")
    read = {kind: scan(tmp_path / f"f.{kind}", "originals") for kind in ("csv", "parquet")}
    assert read["csv"].collect_schema() == read["parquet"].collect_schema()
    assert read["csv"].collect().equals(read["parquet"].collect())


def test_report_linkability_and_dcr_baseline_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--aux-a, --aux-b, --neighbors and --dcr-baseline, --baseline-seed: the JSON's
    ``linkability`` and ``dcr_baseline_protection`` are the standalone functions' values on
    the same data and options, the text and the provenance say them; the holdout's measures'
    targets turned off (``NAME=none``), so the exit code is the other metrics'."""
    originals, avatars = raw_release(seed=12)
    holdout, _ = raw_release(n=150, seed=13)
    o = write_raw(originals, tmp_path / "o.csv", ";")
    a = write_raw(avatars, tmp_path / "a.csv", ";")
    h = write_raw(holdout, tmp_path / "h.csv", ";")
    easy = [f"--target={name}=-1" for name in phr.report.METRICS]
    easy += [f"--target={name}=none" for name in phr.report.HOLDOUT_METRICS]
    args = ["report", str(o), str(a), *OPTIONS, *easy, "--holdout", str(h)]
    asked = ["--aux-a", "age,stage", "--aux-b", "bmi,smoker", "--neighbors", "2"]
    asked += ["--dcr-baseline", "--baseline-seed", "4"]
    assert main([*args, *asked, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    options = {"categorical": ["stage"], "impute": "median"}
    sides = (["age", "stage"], ["bmi", "smoker"])
    linked = phr.linkability_risk(
        originals,
        avatars,
        holdout,
        aux_cols=sides,
        n_neighbors=2,
        **options,  # type: ignore[arg-type]
    )
    assert data["linkability"] == linked.to_dict()
    baseline = phr.dcr_baseline_protection(
        originals.drop("id"),
        avatars,
        seed=4,
        features=FEATURES,
        ncp=4,
        **options,  # type: ignore[arg-type]
    )
    assert data["dcr_baseline_protection"] == baseline.to_dict()
    settings = data["provenance"]["settings"]
    assert settings["linkability"] == {
        "aux_cols": [["age", "stage"], ["bmi", "smoker"]],
        "n_neighbors": 2,
        "space": "projected",
    }
    assert settings["dcr_baseline"] == {"seed": 4}
    # Without them: null, and nothing in the provenance.
    assert main([*args, "--format", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["linkability"] is None
    assert plain["dcr_baseline_protection"] is None
    assert "linkability" not in plain["provenance"]["settings"]
    # The text: a line for each; a failing target still decides the exit code alone.
    assert main([*args, *asked, "--target", "hidden_rate=100"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("linkability risk") for line in lines)
    assert any(line.startswith("DCR baseline protection") for line in lines)


def test_report_singling_out_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--singling-out and --singling-out-cols: the JSON's ``singling_out`` is the standalone
    function's on the report's features, the provenance says it, its target judges it."""
    originals, avatars = raw_release(seed=15)
    holdout, _ = raw_release(n=300, seed=16)
    o = write_raw(originals, tmp_path / "o.csv", ";")
    a = write_raw(avatars, tmp_path / "a.csv", ";")
    h = write_raw(holdout, tmp_path / "h.csv", ";")
    easy = [f"--target={name}=-1" for name in phr.report.METRICS]
    # The other holdout measures' default targets off: this run judges the attack alone.
    off = ["--target=membership_auc=none", "--target=dcr_overfitting_protection=none"]
    args = ["report", str(o), str(a), *OPTIONS, *easy, *off, "--holdout", str(h)]
    asked = ["--singling-out", "multivariate", "--singling-out-cols", "2"]
    assert main([*args, *asked, "--target", "singling_out_risk=1", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    alone = phr.singling_out_risk(
        originals, avatars, holdout, mode="multivariate", n_cols=2, columns=FEATURES
    )
    assert data["singling_out"] == alone.to_dict()
    assert data["holdout_metrics"]["singling_out_risk"]["passed"] is True
    assert data["holdout_metrics"]["singling_out_risk"]["direction"] == "<="
    settings = data["provenance"]["settings"]
    assert settings["singling_out"] == {"mode": "multivariate", "n_cols": 2}
    # A target the risk exceeds fails the report.
    if alone.risk > 0:
        assert main([*args, *asked, "--target", "singling_out_risk=0"]) == 1
        lines = capsys.readouterr().out.splitlines()
        assert any(line.startswith("singling-out risk") for line in lines)


def _refused_report(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]) -> str:
    """``report`` on a small raw release with ``extra`` flags (``{h}`` the holdout's path):
    exit 2 pinned; its stderr."""
    originals, avatars = raw_release(n=50, seed=8)
    held_out, _ = raw_release(n=50, seed=9)
    o = write_raw(originals, tmp_path / "o.csv", ";")
    a = write_raw(avatars, tmp_path / "a.csv", ";")
    h = write_raw(held_out, tmp_path / "h.csv", ";")
    filled = [item.format(h=h) for item in extra]
    assert main(["report", str(o), str(a), *OPTIONS, *filled]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--singling-out", "univariate"], "needs a holdout to control it: pass --holdout"),
        (["--singling-out-cols", "2"], "--singling-out-cols sets the multivariate"),
        (
            ["--holdout", "{h}", "--singling-out", "univariate", "--singling-out-cols", "2"],
            "--singling-out-cols sets the multivariate",
        ),
        (["--singling-out", "both"], "argument --singling-out: invalid choice"),
        (["--singling-out-cols", "0"], "argument --singling-out-cols: must be"),
        (["--target", "singling_out_risk=0.1"], "--target singling_out_risk"),
    ],
)
def test_report_singling_out_bad_flags_are_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    err = _refused_report(tmp_path, capsys, extra)
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_report_attacks_in_anonymeter_space_and_an_auto_categorical_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--space gower applies to the inference and the linkability attacks; a number secret
    that --categorical auto makes categorical is judged by equality."""
    rng = np.random.default_rng(14)

    def cohort(n: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "age": rng.normal(40, 9, n),
                "wtkg": rng.normal(75, 12, n),
                "homo": rng.integers(0, 2, n),
                "karnof": rng.choice([70, 80, 90, 100], n),
            }
        )

    originals, holdout = cohort(200), cohort(100)
    avatars = originals.with_columns(pl.col("age") + rng.normal(0, 3, 200))
    o = write_raw(originals, tmp_path / "o.csv", ",")
    a = write_raw(avatars, tmp_path / "a.csv", ",")
    h = write_raw(holdout, tmp_path / "h.csv", ",")
    easy = [f"--target={name}=-1" for name in phr.report.METRICS]
    easy += [f"--target={name}=none" for name in phr.report.HOLDOUT_METRICS]  # judged by default
    args = ["report", str(o), str(a), "--categorical", "auto", "--holdout", str(h), *easy]
    args += ["--known", "age,wtkg", "--secret", "homo", "--target=correlation_protection_rate=-1"]
    code = main([*args, "--format", "json", "--allow-unlinked"])
    assert code == 0
    inference = json.loads(capsys.readouterr().out)["holdout"]["inference"]
    assert inference["secret_kind"] == "categorical"  # homo: 2 values, auto-categorical
    assert inference["space"] == "projected"
    gower = [*args, "--space", "gower", "--aux-a", "age", "--aux-b", "karnof", "--allow-unlinked"]
    assert main([*gower, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["holdout"]["inference"]["space"] == "gower"
    assert data["linkability"]["space"] == "gower"
    alone = phr.linkability_risk(
        originals, avatars, holdout, aux_cols=("age", "karnof"), space="gower"
    )
    assert data["linkability"] == alone.to_dict()
    assert data["provenance"]["settings"]["inference"]["space"] == "gower"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--aux-a", "age"], "--aux-a needs --aux-b"),
        (["--aux-b", "age"], "--aux-b needs --aux-a"),
        (["--aux-a", "age", "--aux-b", "bmi"], "needs a holdout to control it: give --holdout"),
        (["--neighbors", "2"], "--neighbors sets the linkability attack"),
        (["--neighbors", "0"], "argument --neighbors: must be an integer of at least 1"),
        (["--space", "gower"], "--space sets the space of the attacks"),
        (["--space", "euclid"], "argument --space: invalid choice"),
        (["--baseline-seed", "3"], "--baseline-seed seeds the DCR baseline protection"),
        (["--dcr-baseline", "--baseline-seed", "-1"], "argument --baseline-seed: must be"),
        (
            ["--holdout", "{h}", "--aux-a", "age", "--aux-b", "age,bmi"],
            "'age' is in both --aux-a and --aux-b",
        ),
        (
            ["--holdout", "{h}", "--aux-a", "nope", "--aux-b", "bmi"],
            "--aux-a column 'nope' not found in originals",
        ),
        (
            ["--holdout", "{h}", "--aux-a", "age", "--aux-b", "bmi,bmi"],
            "`--aux-b` names a column twice",
        ),
    ],
)
def test_report_linkability_and_baseline_flags_bad_input_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    err = _refused_report(tmp_path, capsys, extra)
    assert err.count("\n") == 1
    assert message in err


def test_an_input_named_with_a_newline_is_quoted_on_the_page_as_in_the_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals, avatars = raw_release(seed=7)
    o = write_raw(originals, tmp_path / "o\nriginals.csv", ";")
    a = write_raw(avatars, tmp_path / "a.csv", ";")
    page = tmp_path / "report.html"
    easy = [f"--target={name}=-1" for name in phr.report.METRICS]
    code = main(["report", str(o), str(a), *OPTIONS, *easy, "--html", str(page)])
    text = capsys.readouterr().out
    assert code == 0
    quoted = repr(str(o.resolve()))
    assert quoted in text
    html = page.read_text("utf-8")
    assert "o\nriginals" not in html  # never the raw line break
    assert quoted.replace("'", "&#x27;") in html
