"""The `hidden-rate` command line: exit codes, outputs, atomic writes, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from polars_hidden_rate import gate
from polars_hidden_rate import plan as planner
from polars_hidden_rate.cli import main
from polars_hidden_rate.engine import count
from tests.helpers import (
    PAIR_COORDS,
    PAIR_SPACE,
    brute_force_counts,
    hidden_share,
    launch,
    one_error_line,
    write_by_suffix,
)

COORDS = ["Dim1", "Dim2", "Dim3"]
WRITERS: dict[str, Callable[[pl.DataFrame, Path], object]] = {
    "parquet": pl.DataFrame.write_parquet,
    "csv": pl.DataFrame.write_csv,
    "ipc": pl.DataFrame.write_ipc,
}


def _cohort(n: int = 300, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame, np.ndarray]:
    """Originals with a key and a text column; shuffled avatars; the reference counts."""
    rng = np.random.default_rng(seed)
    # A coarse grid: many exact ties and zero distances.
    x = rng.integers(-3, 4, (n, 3)).astype(float)
    y = x + rng.integers(-1, 2, x.shape) * 0.5
    originals = pl.DataFrame(x, schema=COORDS).select(
        pl.int_range(n, dtype=pl.Int64).alias("id") * 7,
        pl.all(),
        pl.format("p{}", pl.int_range(n)).alias("label"),
    )
    avatars = pl.DataFrame(y, schema=COORDS).with_columns(
        pl.int_range(n, dtype=pl.Int64).alias("id") * 7
    )
    order = rng.permutation(n)
    return originals, avatars[order], brute_force_counts(x, y, 1e-9)


@pytest.fixture(params=["parquet", "csv"])
def files(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    kind = request.param
    originals, avatars, counts = _cohort()
    paths = {"originals": tmp_path / f"originals.{kind}", "avatars": tmp_path / f"avatars.{kind}"}
    WRITERS[kind](originals, paths["originals"])
    WRITERS[kind](avatars, paths["avatars"])
    rate = hidden_share(counts)
    return {**paths, "kind": kind, "frame": originals, "counts": counts, "rate": rate}


def _check(files: dict[str, Any], *options: str) -> list[str]:
    return [
        "check",
        str(files["originals"]),
        str(files["avatars"]),
        "--coords",
        ",".join(COORDS),
        "--on",
        "id",
        *options,
    ]


def test_reference_rate_is_strictly_between_0_and_100(files: dict[str, Any]) -> None:
    # The thresholds below straddle it, so both exit codes are reachable.
    assert 50 < files["rate"] < 100


def test_text_summary_and_pass(files: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(_check(files, "--min-rate", str(files["rate"] - 1)))
    out, err = capsys.readouterr()
    counts = files["counts"]
    assert code == 0
    assert err == ""
    assert f"records               {len(counts)}" in out
    assert f"hidden rate           {files['rate']:.2f} %" in out
    q1, median, q3 = np.quantile(counts, [0.25, 0.5, 0.75])
    assert f"median {median:g}, quartiles {q1:g} to {q3:g}" in out
    not_hidden = int((counts == 0).sum())
    assert f"not hidden (c_i = 0)  {not_hidden} ({100 * not_hidden / len(counts):.2f} %)" in out
    assert "PASS" in out


def test_below_threshold_exits_1(files: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(_check(files, "--min-rate", str(files["rate"] + 0.01)))
    out, _ = capsys.readouterr()
    assert code == 1
    assert "FAIL" in out


def test_rate_equal_to_threshold_passes(files: dict[str, Any]) -> None:
    assert main(_check(files, "--min-rate", repr(files["rate"]), "--quiet")) == 0


def test_no_threshold_exits_0(files: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_check(files)) == 0
    assert "no threshold" in capsys.readouterr().out


def test_json(files: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(_check(files, "--format", "json", "--min-rate", "100"))
    out, err = capsys.readouterr()
    report = json.loads(out)
    counts = files["counts"]
    assert code == 1
    assert err == ""
    assert report["n"] == len(counts)
    assert report["hidden_rate"] == pytest.approx(files["rate"], abs=1e-12)
    assert report["local_cloaking_median"] == float(np.median(counts))
    assert report["not_hidden"] == int((counts == 0).sum())
    assert report["min_rate"] == 100.0
    assert report["passed"] is False


def test_json_without_threshold(files: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_check(files, "--format", "json")) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["min_rate"] is None
    assert report["passed"] is True


def test_quiet_prints_nothing(files: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_check(files, "--quiet", "--min-rate", "100")) == 1
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("suffix", ["parquet", "csv", "ipc", "feather"])
def test_output_holds_originals_with_counts(
    files: dict[str, Any], tmp_path: Path, suffix: str
) -> None:
    output = tmp_path / "out" / f"per_record.{suffix}"
    output.parent.mkdir()
    assert main(_check(files, "--output", str(output), "--quiet")) == 0
    readers: dict[str, Callable[[Path], pl.DataFrame]] = {
        "parquet": pl.read_parquet,
        "csv": pl.read_csv,
    }
    written = readers.get(suffix, pl.read_ipc)(output)
    expected = files["frame"]
    assert written.columns == [*expected.columns, "local_cloaking", "hidden"]
    assert written.select(expected.columns).equals(expected)
    np.testing.assert_array_equal(written["local_cloaking"].to_numpy(), files["counts"])
    np.testing.assert_array_equal(written["hidden"].to_numpy(), files["counts"] > 0)
    assert os.listdir(output.parent) == [output.name]


def test_output_is_written_when_the_gate_fails(files: dict[str, Any], tmp_path: Path) -> None:
    output = tmp_path / "per_record.parquet"
    assert main(_check(files, "--output", str(output), "--min-rate", "100", "--quiet")) == 1
    assert pl.read_parquet(output).height == len(files["counts"])


def test_counts_once(
    files: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    linked_result = count.linked_result  # what the planner counts with

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return linked_result(*args, **kwargs)

    monkeypatch.setattr(planner, "linked_result", counting)
    assert main(_check(files, "--quiet")) == 0
    assert len(calls) == 1
    assert main(_check(files, "--quiet", "--output", str(tmp_path / "o.parquet"))) == 0
    assert len(calls) == 2


@pytest.mark.parametrize(("options", "progress"), [((), None), (("--quiet",), False)])
def test_progress_only_on_a_terminal(
    files: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    options: tuple[str, ...],
    progress: bool | None,
) -> None:
    seen = []
    summarize_judged = gate.summarize_judged

    def spy(request: Any, verdict: Any, **kwargs: Any) -> Any:
        seen.append(request.progress)
        return summarize_judged(request, verdict, **kwargs)

    monkeypatch.setattr(gate, "summarize_judged", spy)
    assert main(_check(files, *options)) == 0
    assert seen == [progress]


def test_options_reach_the_api(files: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    reader = pl.read_parquet if files["kind"] == "parquet" else pl.read_csv
    args = _check(files, "--ncp", "2", "--tie-tol", "0", "--threads", "1", "--format", "json")
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    x = reader(files["originals"]).select(COORDS[:2]).to_numpy()
    y = reader(files["avatars"]).sort("id").select(COORDS[:2]).to_numpy()
    expected = brute_force_counts(x, y, 0.0)
    assert report["hidden_rate"] == pytest.approx(100 * np.mean(expected > 0), abs=1e-12)


def test_left_on_right_on(
    files: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    renamed = tmp_path / f"renamed.{files['kind']}"
    reader = pl.read_parquet if files["kind"] == "parquet" else pl.read_csv
    WRITERS[files["kind"]](reader(files["avatars"]).rename({"id": "key"}), renamed)
    args = ["check", str(files["originals"]), str(renamed), "--coords", ",".join(COORDS)]
    assert main([*args, "--left-on", "id", "--right-on", "key", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["hidden_rate"] == pytest.approx(files["rate"])


def _bad_input_cases(files: dict[str, Any], tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    kind = files["kind"]
    duplicated = tmp_path / f"duplicated.{kind}"
    frame = files["frame"]
    WRITERS[kind](frame.with_columns(id=pl.col("id").replace(7, 0)), duplicated)
    (tmp_path / "avatars.txt").write_text("Dim1\n1\n")
    original, avatar = str(files["originals"]), str(files["avatars"])
    coords = ["--coords", ",".join(COORDS)]
    return {
        "missing file": (
            ["check", original, str(tmp_path / f"nope.{kind}"), *coords],
            f"nope.{kind}",
        ),
        "unknown column": (["check", original, avatar, "--coords", "Dim1,Dim9"], "Dim9"),
        "unknown key": (["check", original, avatar, *coords, "--on", "idx"], "idx"),
        "duplicate keys": (
            ["check", str(duplicated), avatar, *coords, "--on", "id"],
            "not unique in originals",
        ),
        "unknown extension": (
            ["check", original, str(tmp_path / "avatars.txt"), *coords],
            "avatars.txt",
        ),
        "output extension": (
            ["check", original, avatar, *coords, "--output", str(tmp_path / "o.json")],
            "o.json",
        ),
        "min rate": (["check", original, avatar, *coords, "--min-rate", "101"], "--min-rate "),
        "ncp": (["check", original, avatar, *coords, "--ncp", "7"], "ncp"),
        "usage": (["check", original, avatar, *coords, "--bogus"], "--bogus"),
        "coords and features": (
            ["check", original, avatar, *coords, "--features", "Dim1"],
            "--features",
        ),
        "no command": ([], "required"),
    }


CASES = [
    "missing file",
    "unknown column",
    "unknown key",
    "duplicate keys",
    "unknown extension",
    "output extension",
    "min rate",
    "ncp",
    "usage",
    "coords and features",
    "no command",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_with_one_line(
    files: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    argv, culprit = _bad_input_cases(files, tmp_path)[case]
    output = tmp_path / "written" / "per_record.parquet"
    output.parent.mkdir()
    if "--output" not in argv:
        argv = [*argv, "--output", str(output)] if argv else argv
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("hidden-rate: error: ")
    assert err.endswith("\n")
    assert err.count("\n") == 1
    assert culprit in err
    assert os.listdir(output.parent) == []


def test_failure_at_count_time_leaves_nothing_and_keeps_old_output(
    files: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Duplicate keys are found only when the data is read, mid-sink.
    duplicated = tmp_path / f"duplicated.{files['kind']}"
    frame = files["frame"]
    WRITERS[files["kind"]](frame.with_columns(id=pl.lit(1, pl.Int64)), duplicated)
    folder = tmp_path / "written"
    folder.mkdir()
    output = folder / "per_record.csv"
    output.write_text("previous\n")
    args = ["check", str(duplicated), str(files["avatars"]), "--coords", "Dim1", "--on", "id"]
    assert main([*args, "--output", str(output)]) == 2
    assert "not unique" in capsys.readouterr().err
    assert os.listdir(folder) == [output.name]
    assert output.read_text() == "previous\n"


def test_missing_output_folder(files: dict[str, Any], tmp_path: Path) -> None:
    output = tmp_path / "absent" / "per_record.parquet"
    assert main(_check(files, "--output", str(output))) == 2
    assert not output.parent.exists()


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--help"]) == 0
    assert "--min-rate" in capsys.readouterr().out


def test_installed_script(files: dict[str, Any]) -> None:
    script = Path(sys.executable).parent / "hidden-rate"
    if not script.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    args = _check(files, "--format", "json", "--min-rate", "100")
    done = subprocess.run([str(script), *args], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert json.loads(done.stdout)["hidden_rate"] == pytest.approx(files["rate"])
    bad = subprocess.run(
        [str(script), *args, "--on", "nope"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1


def test_python_m_runs_the_command_line(files: dict[str, Any]) -> None:
    """``python -m polars_hidden_rate.cli`` is the script: a gate below its threshold exits 1
    (it once imported the module and exited 0, a PASS for any release), bad input 2."""
    args = _check(files, "--format", "json", "--min-rate", "100")
    command = [sys.executable, "-m", "polars_hidden_rate.cli", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert json.loads(done.stdout)["hidden_rate"] == pytest.approx(files["rate"])
    bad = subprocess.run([*command, "--on", "nope"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1


def test_failure_after_writing_removes_the_temporary_file(
    files: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The output is complete, but it cannot replace a folder of the same name.
    folder = tmp_path / "written"
    (folder / "per_record.parquet").mkdir(parents=True)
    assert main(_check(files, "--output", str(folder / "per_record.parquet"))) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "per_record.parquet" in err
    assert os.listdir(folder) == ["per_record.parquet"]
    assert (folder / "per_record.parquet").is_dir()


@pytest.mark.parametrize(
    ("command", "message", "expected"),
    [
        (
            "check",
            "x has 3 missing values; give impute='median', 'mean' or 'mode' to fill them",
            "x has 3 missing values; give --impute median, 'mean' or 'mode' to fill them",
        ),
        (
            "check",
            "linking by row order needs equal heights (or give `on`)",
            "linking by row order needs equal heights (or give --on)",
        ),
        (
            "report",
            "the attribute inference attack on `secret` needs the `known` columns too",
            "the attribute inference attack on --secret needs the --known columns too",
        ),
        (
            "report",
            "the linkability attack (`aux_cols`) needs a holdout: pass `holdout`",
            "the linkability attack (--aux-a and --aux-b) needs a holdout: pass --holdout",
        ),
        (
            "report",
            "`n_cols` sets the multivariate singling-out attack: pass singling_out='multivariate'",
            "--singling-out-cols sets the multivariate singling-out attack: pass --singling-out "
            "multivariate",
        ),
        (
            "report",
            "the singling-out attack (`singling_out`) needs a holdout to control it: pass "
            "`holdout`",
            "the singling-out attack (--singling-out) needs a holdout to control it: pass "
            "--holdout",
        ),
        (
            "report",
            "`baseline_seed` seeds the baseline: pass `dcr_baseline=True`",
            "--baseline-seed seeds the baseline: pass --dcr-baseline",
        ),
        # A keyword the command has no flag for stays as the Python API writes it.
        ("check", "pass `holdout` and `frobnicate`", "pass `holdout` and `frobnicate`"),
    ],
)
def test_the_python_api_s_words_reach_the_command_line_as_flags(
    command: str, message: str, expected: str
) -> None:
    from polars_hidden_rate.cli.parser import build_parser, flags_of, in_flags

    parser = build_parser({"check": main, "report": main, "demo": main})  # type: ignore[dict-item]
    assert in_flags(message, flags_of(parser, command)) == expected


def test_a_gap_without_impute_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = pl.DataFrame({"id": range(60), "x": [None, *map(float, range(59))]})
    frame.write_csv(tmp_path / "o.csv")
    frame.write_csv(tmp_path / "a.csv")
    code = main(["check", str(tmp_path / "o.csv"), str(tmp_path / "a.csv"), "--on", "id"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--impute median" in err
    assert "impute=" not in err


# 7. Paths in messages are quoted: a newline in one cannot fake another file's name.


def test_a_path_with_a_newline_is_quoted(pair: dict[str, Any], tmp_path: Path) -> None:
    missing = tmp_path / "o.csv\nhidden-rate: error: AVATARS file not found: other.csv"
    line = one_error_line(launch("check", str(missing), str(pair["avatars"]), *PAIR_SPACE))
    assert line == f"hidden-rate: error: ORIGINALS file not found: {str(missing)!r}"
    output = tmp_path / "no\nsuch" / "out.parquet"
    args = (
        "check",
        str(pair["originals"]),
        str(pair["avatars"]),
        *PAIR_SPACE,
        "--output",
        str(output),
    )
    line = one_error_line(launch(*args))
    assert line == f"hidden-rate: error: --output folder not found: {str(output.parent)!r}"


# Issue 19: the gate's numbers; issue 20: the demo's options.


def _hidden_exactly(hidden: int, n: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``hidden`` of ``n`` records hidden, by exact ties: pairs (and one triple) of originals
    around one point where their avatars all lie; the others' avatars are their originals."""
    pairs = hidden // 2 if hidden % 2 == 0 else (hidden - 3) // 2
    points: list[tuple[float, float, float, float]] = []
    for k in range(pairs):
        points += [(10.0 * k, 0.0, 10.0 * k + 1, 0.0), (10.0 * k + 2, 0.0, 10.0 * k + 1, 0.0)]
    if hidden % 2:
        centre = -100.0
        points += [(centre - 1, 0.0, centre, 0.0), (centre + 1, 0.0, centre, 0.0)]
        points += [(centre, 1.0, centre, 0.0)]
    points += [(7.0 * j + 0.5, 50.0, 7.0 * j + 0.5, 50.0) for j in range(n - hidden)]
    x = np.array([p[:2] for p in points])
    y = np.array([p[2:] for p in points])
    assert hidden_share(brute_force_counts(x, y, 1e-9)) == 100.0 * hidden / n
    key = pl.int_range(n, dtype=pl.Int64).alias("id")
    originals = pl.DataFrame(x, schema=PAIR_COORDS).select(key, pl.all())
    avatars = pl.DataFrame(y, schema=PAIR_COORDS).select(key, pl.all())
    return originals, avatars.sample(fraction=1.0, shuffle=True, seed=seed)


@pytest.mark.parametrize(
    ("hidden", "code", "verdict", "rate", "html"),
    [
        (17_999, 1, "FAIL: hidden rate 89.995 % < 90 %", "89.995", ["89.995", "> 90", "FAIL"]),
        (18_000, 0, "PASS: hidden rate 90.00 % >= 90 %", "90.00", ["90", "> 90", "FAIL"]),
    ],
)
def test_the_printed_verdict_never_contradicts_the_exit_code(
    tmp_path: Path, hidden: int, code: int, verdict: str, rate: str, html: list[str]
) -> None:
    """At 89.995 % the gate printed "FAIL: 90.00 % < 90 %", and the report 90 beside > 90."""
    originals, avatars = _hidden_exactly(hidden, 20_000)
    o = write_by_suffix(originals, tmp_path / "originals.csv")
    a = write_by_suffix(avatars, tmp_path / "avatars.csv")
    # A tenth of the avatars are copies here: only the rate is gated.
    done = launch(
        "check", str(o), str(a), *PAIR_SPACE, "--min-rate", "90", "--max-own-copies", "100"
    )
    assert done.returncode == code, done.stderr
    gate_line = next(row for row in done.stdout.splitlines() if row.startswith("gate "))
    assert gate_line.startswith(f"gate                  {verdict}; own copies ")
    assert f"hidden rate           {rate} %\n" in done.stdout
    page = tmp_path / "report.html"
    done = launch("report", str(o), str(a), *PAIR_SPACE, "--html", str(page))
    assert done.returncode == 1, done.stderr  # a rate equal to its target fails a report
    line = next(row for row in done.stdout.splitlines() if row.startswith("hidden rate (%)"))
    assert line.split()[3:] == [html[0], "target", *html[1].split(), "FAIL"]
    cells = [cell for cell in page.read_text("utf-8").split("<tr>") if "Hidden rate (%)" in cell]
    assert [f"<td>{cell}</td>" in cells[0] for cell in (html[0], "&gt; 90")] == [True, True]


@pytest.mark.parametrize("value", ["0.9", "1", "0.05"])
def test_a_fraction_for_min_rate_is_refused(pair: dict[str, Any], value: str) -> None:
    done = launch(
        "check", str(pair["originals"]), str(pair["avatars"]), *PAIR_SPACE, "--min-rate", value
    )
    meant = f"{100 * float(value):g}"
    assert one_error_line(done) == (
        f"hidden-rate: error: --min-rate is a percentage: {float(value):g} means "
        f"{float(value):g} %; did you mean {meant}?"
    )


def test_demo_options_are_named_and_a_small_cohort_works() -> None:
    done = launch("demo", "--seed", "-1")
    assert one_error_line(done) == (
        "hidden-rate: error: argument --seed: must be an integer of at least 0, got '-1'"
    )
    done = launch("demo", "--rows", "5")
    assert one_error_line(done) == (
        "hidden-rate: error: --rows must be at least 6: k = 2 needs 3 records and --ncp 5 "
        "needs 6; got 5"
    )
    done = launch("demo", "--rows", "10")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] in (["2"], ["5"])]
    assert [row[0] for row in rows] == ["2", "5"]
    assert "k = 10, 20, 50 left out: k must be below --rows (10)." in done.stdout
    assert done.stderr == ""
