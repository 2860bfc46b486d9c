"""What the command line prints beside its output: Python's warnings become lines of the output
(the text's `warning` rows, the JSON's `warnings`), once each, never Python's own format on
stderr, and nothing at all with --quiet; with --progress, every stage named once, in order."""

from __future__ import annotations

import html
import io
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
import polars_hidden_rate.gate as gate
import polars_hidden_rate.report.run as report_run
from polars_hidden_rate import progress
from polars_hidden_rate.cli import main
from polars_hidden_rate.gate import summarize_judged
from polars_hidden_rate.report import report_of_plan

# How Python prints a warning: "path/to/module.py:296: SmallHoldoutWarning: ...".
PYTHON_WARNING = re.compile(r"\.py:\d+: \w*Warning\b")
SMALL_HOLDOUT = "under half (SDMetrics' recommendation)"
FEW_RECORDS = "the membership figures rest on 20 holdout records"


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Originals (400), their avatars (k = 5) and a holdout of 20 records of the same
    population, as csv files: a holdout under half the training set, and too few records for
    the membership's interval."""
    rng = np.random.default_rng(0)
    population = pl.DataFrame(
        {
            "age": rng.normal(50, 10, 420).round(),
            "bmi": rng.normal(25, 4, 420),
            "sex": rng.choice(["F", "M"], 420),
            "smoker": rng.choice(["yes", "no"], 420),
        }
    )
    originals = population.head(400)
    sets = {
        "originals": originals,
        "avatars": phr.avatarize(originals, k=5, ncp=3, seed=0),
        "holdout": population.tail(20),
    }
    folder = tmp_path_factory.mktemp("release")
    for name, frame in sets.items():
        frame.write_csv(folder / f"{name}.csv")
    return {name: folder / f"{name}.csv" for name in sets}


def _script(*argv: str) -> subprocess.CompletedProcess[str]:
    """The installed script, as a pipeline runs it: stderr is no terminal."""
    script = Path(sys.executable).parent / "hidden-rate"
    if not script.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    return subprocess.run([str(script), *argv], capture_output=True, text=True, check=False)


def _report(release: dict[str, Path], *options: str) -> list[str]:
    paths = release
    return ["report", str(paths["originals"]), str(paths["avatars"]), "--holdout",
            str(paths["holdout"]), *options]  # fmt: skip


def test_a_small_holdout_is_said_once_in_the_report_never_as_a_python_warning(
    release: dict[str, Path],
) -> None:
    text = _script(*_report(release))
    assert text.returncode in (0, 1), text.stderr
    assert not PYTHON_WARNING.search(text.stderr + text.stdout)
    assert text.stderr == ""  # off a terminal, without --progress: nothing
    # Each measure that carries its warning shows it, and no other line repeats it.
    assert text.stdout.count(SMALL_HOLDOUT) == 1
    assert text.stdout.count(FEW_RECORDS) == 1
    shown = _script(*_report(release, "--format", "json"))
    assert shown.returncode == text.returncode
    assert not PYTHON_WARNING.search(shown.stderr)
    assert shown.stderr == ""
    found = json.loads(shown.stdout)
    # The small holdout's entry says only `small_holdout`: its words are in `warnings`; the
    # membership's are in its `interval_warnings`, not again.
    assert found["holdout"]["dcr_overfitting_protection"]["small_holdout"] is True
    assert [SMALL_HOLDOUT in each for each in found["warnings"]] == [True]
    assert [FEW_RECORDS in each for each in found["holdout"]["membership"]["interval_warnings"]]
    assert shown.stdout.count(SMALL_HOLDOUT) == 1
    assert shown.stdout.count(FEW_RECORDS) == 1


@pytest.mark.parametrize("form", ["text", "json"])
def test_quiet_prints_nothing_even_with_warnings_and_progress(
    release: dict[str, Path], form: str
) -> None:
    """--quiet: "print nothing and show no progress: only the exit code speaks"."""
    loud = _script(*_report(release, "--format", form))
    quiet = _script(*_report(release, "--format", form, "--quiet", "--progress"))
    assert (quiet.stdout, quiet.stderr) == ("", "")
    assert quiet.returncode == loud.returncode


def test_an_overlapping_holdout_is_one_line_of_the_report_not_of_stderr(
    release: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    recwarn: pytest.WarningsRecorder,
) -> None:
    mixed = pl.concat(
        [pl.read_csv(release["originals"]).head(100), pl.read_csv(release["holdout"])]
    )
    mixed.write_csv(tmp_path / "mixed.csv")
    argv = _report({**release, "holdout": tmp_path / "mixed.csv"})
    assert main(argv) in (0, 1)
    out, err = capsys.readouterr()
    assert err == ""
    assert len(recwarn) == 0  # none left the command as a Python warning
    copies = "100 of the holdout's 120 records (83.3 %) are exact copies of originals"
    lines = [line for line in out.splitlines() if copies in line]
    assert len(lines) == 1
    assert lines[0].startswith("warning ")
    assert main([*argv, "--format", "json"]) in (0, 1)
    found = json.loads(capsys.readouterr().out)
    assert [copies in each for each in found["warnings"]] == [True, False]  # and the small one
    assert main([*argv, "--quiet"]) in (0, 1)
    assert capsys.readouterr() == ("", "")


def test_any_python_warning_is_one_line_of_each_output(
    release: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A warning no measure carries, raised twice in the thread that measures: one `warning`
    line of the text and of the page, one item of the JSON's `warnings`; `check` too."""
    odd = "something odd\nover two lines"
    measure, summarize = report_of_plan, summarize_judged

    def odd_report(*args: Any, **options: Any) -> Any:
        for _ in range(2):
            warnings.warn(odd, RuntimeWarning, stacklevel=1)
        return measure(*args, **options)

    def odd_summary(*args: Any, **options: Any) -> Any:
        warnings.warn(odd, UserWarning, stacklevel=1)
        return summarize(*args, **options)

    monkeypatch.setattr(report_run, "report_of_plan", odd_report)
    monkeypatch.setattr(gate, "summarize_judged", odd_summary)
    page = tmp_path / "page.html"
    assert main(_report(release, "--html", str(page))) in (0, 1)
    out, err = capsys.readouterr()
    assert err == ""
    lines = [line for line in out.splitlines() if "something odd" in line]
    assert lines == [f"{'warning':<29} something odd over two lines"]
    assert page.read_text("utf-8").count("something odd over two lines") == 1
    assert main(_report(release, "--format", "json")) in (0, 1)
    found = json.loads(capsys.readouterr().out)
    assert "something odd over two lines" in found["warnings"]
    assert json.dumps(found).count("something odd") == 1
    check = ["check", str(release["originals"]), str(release["avatars"])]
    assert main(check) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert [line for line in out.splitlines() if "odd" in line] == [
        "warning               something odd over two lines"
    ]
    assert main([*check, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == ["something odd over two lines"]
    monkeypatch.setattr(gate, "summarize_judged", summarize)
    assert main([*check, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []


def _stages(err: str) -> list[str]:
    """The stages a --progress log names, in the order they start; each ends once."""
    lines = err.splitlines()
    assert all(line.startswith("hidden-rate: ") for line in lines), err
    started = [
        line[len("hidden-rate: ") : -len(": started")]
        for line in lines
        if line.endswith(": started")
    ]
    ended = [line.split(": ")[1] for line in lines if ": done in " in line]
    assert sorted(ended) == sorted(started)
    return started


def test_every_stage_of_a_full_report_is_named_once_in_order(release: dict[str, Path]) -> None:
    options = ["--known", "age,sex", "--secret", "smoker", "--aux-a", "age,sex", "--aux-b"]
    shown = _script(*_report(release, *options, "bmi,smoker", "--dcr-baseline", "--progress"))
    assert shown.returncode in (0, 1), shown.stderr
    assert _stages(shown.stderr) == [
        "planning",
        "fitting the projection",
        "checking the holdout",
        "inference attack",
        "inference attack, nearest records",  # within it, its searches counted
        "linkability attack",
        "linkability attack, nearest records",
        "reading and projecting",
        "link test and own copies",
        "reading the holdout",
        "counting",
        "nearest records, with the holdout",
        "membership AUC and its interval",
        "direct matches",
        "DCR baseline protection",
        "DCR baseline protection, nearest records",
        "correlation protection",
        "writing the report",
    ]


def test_a_second_count_of_check_is_named_for_why(tmp_path: Path) -> None:
    """Counts in the hundreds: the capped count cannot give the quartiles, and the same read
    is counted again in full, a stage of its own name."""
    rng = np.random.default_rng(0)
    x = np.repeat(np.arange(10.0), 300)
    rng.shuffle(x)
    frame = pl.DataFrame({"x": x})
    for name in ("o", "a"):
        frame.write_csv(tmp_path / f"{name}.csv")
    argv = [str(tmp_path / "o.csv"), str(tmp_path / "a.csv"), "--coords", "x"]
    shown = _script("check", *argv, "--max-own-copies", "100", "--progress")
    assert shown.returncode == 0, shown.stderr
    assert _stages(shown.stderr) == [
        "planning",
        "reading",
        "link test and own copies",
        "counting",
        "counting in full, for the quartiles",
    ]
    assert "quartiles 299 to 299" in shown.stdout


def test_stages_renamed_and_folded() -> None:
    """`renamed` reports a stage by another name meanwhile; `folded` leaves out the stages
    without units (their time is the enclosing one's), not those counted in units."""
    stream = io.StringIO()
    clock = iter(range(100)).__next__
    stages = progress.Stages(True, stream=stream, clock=lambda: float(clock()), ticking=False)
    with progress.reporting(stages):
        with progress.renamed("counting", "counting again"), progress.stage("counting"):
            pass
        with progress.stage("attack"), progress.folded():
            with progress.stage("fitting the projection"):
                pass
            with progress.stage("nearest", 2) as bar:
                bar.advance(2)
        with progress.stage("counting"):
            pass
    assert _stages(stream.getvalue()) == ["counting again", "attack", "nearest", "counting"]
    assert progress._names == {}
    assert progress._folding == 0


def test_a_warning_a_measure_shows_is_not_shown_again(release: dict[str, Path]) -> None:
    """`PrivacyReport.with_warnings`: the membership's interval warning is in its rows and its
    entry, the small holdout in its rows only (its entry is a flag): each shows once in every
    format; any other warning is a `warning` line of the text and the page and an item of
    `warnings`, once however often it is given."""
    sets = [pl.read_csv(release[name]) for name in ("originals", "avatars", "holdout")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = phr.privacy_report(sets[0], sets[1], holdout=sets[2], ncp=3)
    raised = [str(each.message) for each in caught]
    assert any(FEW_RECORDS in each for each in raised)
    assert any(SMALL_HOLDOUT in each for each in raised)
    other = "a library's warning"
    report = report.with_warnings([*raised, other, *raised, other])
    text, page, data = report.to_text(), report.to_html(), report.to_dict()
    for words in (FEW_RECORDS, SMALL_HOLDOUT, other):
        assert text.count(words) == 1, words
        assert page.count(html.escape(words)) == 1, words
    # The small holdout's words are in its measure's lines: not again in the text.
    assert [line for line in text.splitlines() if line.startswith("warning ")] == [
        f"{'warning':<29} {other}"
    ]
    assert len(data["warnings"]) == 2
    assert SMALL_HOLDOUT in data["warnings"][0]
    assert data["warnings"][1] == other
    assert json.dumps(data).count(FEW_RECORDS) == 1
