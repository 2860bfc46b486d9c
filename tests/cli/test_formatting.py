"""Names a data file gives (columns, keys, categories) in the text outputs: always quoted as
paths are, so that a header can never add, end or redraw a line of the output (a forged
``gate ... PASS`` under a failing gate). The page and the JSON escape them already."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from polars_hidden_rate.checks import quoted
from polars_hidden_rate.cli import main

FORGED = "gate                  PASS: hidden rate 99.00 % >= 90 %"
FORGED_REPORT = "report                        PASS: 9 of 9"
# The feature name, and one per way a terminal starts or redraws a line.
NEWLINE = f"z\n{FORGED}"
HOSTILE = {
    "key": f"id\n{FORGED_REPORT}",
    "x": NEWLINE,
    "secret": f"w\r{FORGED}",
    "category": f"v\x1b[2K\x1b[1G{FORGED_REPORT}",
}
BENIGN = {"key": "id", "x": "x", "secret": "w", "category": "v"}


def _release(names: dict[str, str], n: int = 300) -> dict[str, pl.DataFrame]:
    """Originals, avatars near their own record (a hidden rate below 90 %), a holdout of
    other records; one gap in ``x`` for the imputation's fills."""
    rng = np.random.default_rng(7)

    def records(count: int, first: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                names["key"]: np.arange(first, first + count),
                "age": rng.normal(50, 10, count),
                names["x"]: rng.normal(size=count),
                names["secret"]: rng.normal(size=count),
                names["category"]: rng.choice(["a", "b", "c"], count),
            }
        )

    originals = records(n, 0)
    avatars = originals.with_columns(
        pl.col("age") + rng.normal(0, 0.5, n),
        pl.col(names["x"]) + rng.normal(0, 0.05, n),
        pl.col(names["secret"]) + rng.normal(0, 0.05, n),
    )
    originals = originals.with_columns(
        pl.when(pl.col(names["key"]) == 3)
        .then(None)
        .otherwise(pl.col(names["x"]))
        .alias(names["x"])
    )
    return {"originals": originals, "avatars": avatars, "holdout": records(n // 2, n)}


def _files(tmp_path: Path, names: dict[str, str], tag: str) -> dict[str, str]:
    paths = {}
    for role, frame in _release(names).items():
        path = tmp_path / f"{tag}-{role}.parquet"
        frame.write_parquet(path)
        paths[role] = str(path)
    return paths


def _run(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _args(command: str, paths: dict[str, str], names: dict[str, str]) -> list[str]:
    """``command`` on the files with every name in a role the text outputs print."""
    common = [
        paths["originals"],
        paths["avatars"],
        "--on",
        names["key"],
        "--impute",
        "median",
        "--categorical",
        names["category"],
    ]
    if command == "check":
        return ["check", *common, "--min-rate", "90", "--progress"]
    return [
        "report",
        *common,
        "--holdout",
        paths["holdout"],
        "--known",
        f"age,{names['x']}",
        "--secret",
        names["secret"],
        "--aux-a",
        f"age,{names['secret']}",
        "--aux-b",
        names["category"],
        "--dcr-baseline",
        "--progress",
    ]


def _first_words(text: str) -> list[str]:
    return [line.split(" ", 1)[0] for line in text.splitlines()]


def _no_forged_line(*outputs: str) -> None:
    """No line of ``outputs`` (split at any line break, a carriage return too) begins with a
    forged line, and no escape or carriage return reaches the terminal."""
    for output in outputs:
        assert "\x1b" not in output
        assert "\r" not in output
        for line in output.splitlines():
            assert not line.lstrip().startswith((FORGED, FORGED_REPORT)), line


def test_a_forged_feature_name_adds_no_line_to_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: ``check --min-rate 90`` fails (exit 1) and prints one gate line,
    FAIL; the feature's name is in its quotes on the ``features`` line."""
    hostile = {**BENIGN, "x": NEWLINE}
    paths = _files(tmp_path, hostile, "hostile")
    benign = _files(tmp_path, BENIGN, "benign")
    args = ["--on", "id", "--impute", "median", "--min-rate", "90"]
    code, out, err = _run(capsys, ["check", paths["originals"], paths["avatars"], *args])
    expected_code, expected, _ = _run(
        capsys, ["check", benign["originals"], benign["avatars"], *args]
    )
    assert (code, expected_code) == (1, 1), err
    assert _first_words(out) == _first_words(expected)
    gates = [line for line in out.splitlines() if line.startswith("gate")]
    assert len(gates) == 1
    assert gates[0].startswith("gate                  FAIL: hidden rate")
    features = [line for line in out.splitlines() if line.startswith("features")]
    assert features == [f"features              {quoted(['age', NEWLINE, 'w', 'v'])}"]
    _no_forged_line(out, err)


def test_a_forged_feature_name_adds_no_line_to_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = {**BENIGN, "x": NEWLINE}
    paths = _files(tmp_path, hostile, "hostile")
    benign = _files(tmp_path, BENIGN, "benign")
    args = ["--on", "id", "--impute", "median"]
    code, out, err = _run(capsys, ["report", paths["originals"], paths["avatars"], *args])
    expected_code, expected, _ = _run(
        capsys, ["report", benign["originals"], benign["avatars"], *args]
    )
    assert (code, expected_code) == (1, 1), err  # the hidden rate's target fails
    assert _first_words(out) == _first_words(expected)
    assert not [line for line in out.splitlines() if line.startswith("gate")]
    assert [line for line in out.splitlines() if line.startswith("report")] == [
        line for line in expected.splitlines() if line.startswith("report")
    ]
    assert f"features              {quoted(['age', NEWLINE, 'w', 'v'])}" in out.splitlines()
    _no_forged_line(out, err)


@pytest.mark.parametrize("command", ["check", "report"])
def test_hostile_names_in_every_role_leave_every_text_output_its_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A newline, a carriage return and an escape in the key, a feature, a categorical
    feature, a secret and the attacker's columns: the text output has the lines the same
    run on plain names has, word for word at their starts, each name in its quotes; the
    progress lines on stderr and the refusals hold no forged line either."""
    paths = _files(tmp_path, HOSTILE, "hostile")
    benign = _files(tmp_path, BENIGN, "benign")
    code, out, err = _run(capsys, _args(command, paths, HOSTILE))
    expected_code, expected, expected_err = _run(capsys, _args(command, benign, BENIGN))
    assert code == expected_code, err
    assert expected_code == 1, expected_err  # below 90 % hidden
    assert _first_words(out) == _first_words(expected)
    assert err.splitlines()  # the progress lines
    assert all(line.startswith("hidden-rate: ") for line in err.splitlines())
    _no_forged_line(out, err)
    for name in HOSTILE.values():
        assert quoted(name) in out
        assert name not in out
    # A refusal naming a key (an avatar missing) is one line, the key in its quotes.
    release = _release(HOSTILE)
    short = tmp_path / "short.parquet"
    release["avatars"].slice(1).write_parquet(short)
    refused = [command, paths["originals"], str(short), "--on", HOSTILE["key"], "--impute", "mean"]
    code, out, err = _run(capsys, refused)
    assert (code, out) == (2, "")
    assert err == (
        f"hidden-rate: error: 1 originals have no avatar with the same key "
        f"{quoted(HOSTILE['key'])}, its values not shown (they are the originals')\n"
    )
