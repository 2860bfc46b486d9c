"""Files read as people write them (decimal commas, spaces after separators, blank lines, odd
headers, a separator per file), paths taken literally, and inputs that cannot be read or are no
regular file named in the one-line error."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import polars_hidden_rate as phr
from polars_hidden_rate.frames.files import scan
from tests.helpers import (
    PAIR_SPACE,
    SHARED_DATASETS,
    brute_rate,
    examples,
    launch,
    noisy_frames,
    one_error_line,
    without_provenance,
    write_by_suffix,
)

# 2. Paths are literal, never glob patterns.


@pytest.mark.parametrize(
    ("name", "decoy", "kind"),
    [
        ("run[1]", "run1", "parquet"),
        ("run[1]", "run1", "csv"),
        ("run[1]", "run1", "ipc"),
        ("run*", "run-2", "parquet"),
        ("r?n", "run", "csv"),
    ],
)
def test_input_paths_are_literal(tmp_path: Path, kind: str, name: str, decoy: str) -> None:
    originals, avatars = noisy_frames()
    # The decoy is the avatars themselves: hidden rate 0, unlike the real originals.
    real = write_by_suffix(originals, tmp_path / f"{name}.{kind}")
    write_by_suffix(avatars, tmp_path / f"{decoy}.{kind}")
    avatars_path = write_by_suffix(avatars, tmp_path / f"avatars[0].{kind}")
    write_by_suffix(originals, tmp_path / f"avatars0.{kind}")
    done = launch("check", str(real), str(avatars_path), *PAIR_SPACE, "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["n"] == 200
    assert report["hidden_rate"] == pytest.approx(brute_rate(originals, avatars))
    assert report["hidden_rate"] > 50


# 5. An unreadable input is named in the one-line error.


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not a columnar file\n" * 4)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _unreadable(path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads files without read permission")
    write_by_suffix(noisy_frames()[0], path)
    path.chmod(0o200)


@pytest.mark.parametrize(
    ("damage", "kind", "role"),
    [
        (_garbage, "parquet", "ORIGINALS"),
        (_garbage, "parquet", "AVATARS"),
        (_garbage, "ipc", "AVATARS"),
        (_empty, "parquet", "ORIGINALS"),
        (_empty, "csv", "AVATARS"),
        (_empty, "ipc", "ORIGINALS"),
        (_unreadable, "parquet", "ORIGINALS"),
        (_unreadable, "csv", "AVATARS"),
    ],
)
def test_unreadable_input_is_named(
    pair: dict[str, Any], tmp_path: Path, damage: Callable[[Path], None], kind: str, role: str
) -> None:
    bad = tmp_path / f"bad input.{kind}"
    damage(bad)
    paths = [bad, pair["avatars"]] if role == "ORIGINALS" else [pair["originals"], bad]
    output = tmp_path / "out.parquet"
    done = launch("check", *map(str, paths), *PAIR_SPACE, "--output", str(output))
    line = one_error_line(done)
    assert line.startswith(f"hidden-rate: error: cannot read {role} {str(bad)!r}: ")
    assert len(line) > len(f"hidden-rate: error: cannot read {role} {str(bad)!r}: ")
    assert not output.exists()


# 6. Files read as people write them: decimal commas, spaces, blank lines, odd headers.


def _release(n: int = 200, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two numbers and a text column, linked by id: projected as FAMD by default."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    smoker = rng.choice(["yes", "no"], n)
    originals = pl.DataFrame({"id": np.arange(n), "x": x[:, 0], "y": x[:, 1], "smoker": smoker})
    noisy = x + rng.normal(scale=0.4, size=x.shape)
    flipped = np.where(rng.random(n) < 0.2, rng.choice(["yes", "no"], n), smoker)
    avatars = pl.DataFrame({"id": np.arange(n), "x": noisy[:, 0], "y": noisy[:, 1]}).with_columns(
        smoker=pl.Series(flipped)
    )
    return originals, avatars


def _check_json(*args: str) -> dict[str, Any]:
    done = launch("check", *args, "--format", "json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _spaced(frame: pl.DataFrame, path: Path) -> Path:
    """A csv with a space after each comma, header included: ``x, y, smoker``."""
    path.write_text(frame.write_csv().replace(",", ", "))
    return path


@pytest.mark.parametrize("separator", [";", "\t"])
def test_decimal_commas_are_numbers(tmp_path: Path, separator: str) -> None:
    # Read as text, the numbers became categories: every avatar value unseen, 100 %.
    originals, avatars = _release()
    expected = phr.hidden_rate(originals, avatars, on="id")
    assert expected < 90
    plain = [
        write_by_suffix(originals, tmp_path / "o.csv"),
        write_by_suffix(avatars, tmp_path / "a.csv"),
    ]
    written = []
    for frame, name in ((originals, "o_fr.csv"), (avatars, "a_fr.csv")):
        frame.write_csv(tmp_path / name, separator=separator, decimal_comma=True)
        written.append(tmp_path / name)
    assert "-0," in written[0].read_text()
    for paths in (plain, written, [written[0], plain[1]]):
        report = _check_json(*map(str, paths), "--on", "id")
        assert (report["n"], report["hidden_rate"]) == (200, expected)
    # As coordinates too (they were refused as text).
    report = _check_json(*map(str, written), "--on", "id", "--coords", "x,y")
    assert (
        report["hidden_rate"]
        == _check_json(*map(str, plain), "--on", "id", "--coords", "x,y")["hidden_rate"]
    )


AIDS = SHARED_DATASETS / "aids"


def test_the_aids_release_with_decimal_commas(tmp_path: Path) -> None:
    # The paper's release, as a French spreadsheet would save it: the same hidden rate.
    if not (AIDS / "originals.csv").is_file():
        pytest.skip(f"AIDS data not found at {AIDS}")
    options = ["--impute", "median", "--categorical", "karnof,strat,arms"]
    sources = [AIDS / "originals.csv", AIDS / "avatars_k20_ncp5.csv"]
    written = []
    for source in sources:
        frame = pl.read_csv(source, separator=";" if "originals" in source.name else ",",
                            null_values="NA", infer_schema_length=10_000)  # fmt: skip
        written.append(tmp_path / source.name)
        frame.write_csv(written[-1], separator=";", decimal_comma=True, null_value="NA")
    assert ";57,5936;" in written[1].read_text()
    plain = _check_json(*map(str, sources), *options)
    assert plain["hidden_rate"] == pytest.approx(93.12762973352034, abs=1e-12)
    commas = _check_json(*map(str, written), *options)
    assert without_provenance(commas) == without_provenance(plain)
    assert commas["provenance"]["settings"] == plain["provenance"]["settings"]


def test_decimal_comma_can_be_forced(tmp_path: Path) -> None:
    # With a comma separator, "1,5" is quoted and not sniffed: --decimal-comma reads it.
    originals, avatars = _release(seed=1)
    paths = []
    for frame, name in ((originals, "o.csv"), (avatars, "a.csv")):
        frame.write_csv(tmp_path / name, decimal_comma=True)
        paths.append(str(tmp_path / name))
    report = _check_json(*paths, "--on", "id", "--decimal-comma")
    assert report["hidden_rate"] == phr.hidden_rate(originals, avatars, on="id")
    # Without it, the text numbers are refused, naming the column and the fix.
    line = one_error_line(launch("check", *paths, "--on", "id"))
    assert "feature 'x' of originals is text" in line
    assert "decimal comma" in line
    assert "--decimal-comma" in line


def test_spaces_after_separators(tmp_path: Path) -> None:
    # "1.5, 2.0, yes": the numbers are numbers, the text " yes" is "yes".
    originals, avatars = _release(seed=2)
    expected = phr.hidden_rate(originals, avatars, on="id")
    spaced = _spaced(originals, tmp_path / "o.csv")
    assert ", yes" in spaced.read_text()
    plain = write_by_suffix(avatars, tmp_path / "a.csv")
    report = _check_json(str(spaced), str(plain), "--on", "id")
    assert (report["n"], report["hidden_rate"]) == (200, expected)
    report = _check_json(str(spaced), str(_spaced(avatars, tmp_path / "a2.csv")), "--on", "id")
    assert report["hidden_rate"] == expected
    # The written originals hold the numbers and the stripped text.
    output = tmp_path / "out.parquet"
    done = launch("check", str(spaced), str(plain), "--on", "id", "--output", str(output))
    assert done.returncode == 0, done.stderr
    written = pl.read_parquet(output)
    assert written.columns == [*originals.columns, "local_cloaking", "hidden"]
    assert written.drop("local_cloaking", "hidden").equals(originals)


@pytest.mark.parametrize("ending", ["\n\n\n", "\r\n\r\n\r\n", "\n  \n\n", "\n\n  "])
def test_blank_lines_at_the_end_are_no_records(tmp_path: Path, ending: str) -> None:
    # Read as records of nulls and imputed, they made n = 43 and moved the rate.
    originals, avatars = _release(n=40, seed=3)
    expected = phr.hidden_rate(originals, avatars, on="id")
    for key in ([], ["id"]):  # by row order too, where the counts of rows must match
        o, a = tmp_path / f"o{len(key)}.csv", tmp_path / f"a{len(key)}.csv"
        o.write_text(originals.drop(*key).write_csv().rstrip("\n") + ending)
        write_by_suffix(avatars.drop(*key), a)
        link = ["--on", "id"] if not key else []
        report = _check_json(str(o), str(a), *link, "--impute", "median")
        assert (report["n"], report["hidden_rate"]) == (40, expected)


def test_a_header_only_file_has_no_records(tmp_path: Path) -> None:
    originals, avatars = _release(n=40)
    o = tmp_path / "o.csv"
    o.write_text("id,x,y,smoker\n")
    a = write_by_suffix(avatars, tmp_path / "a.csv")
    line = one_error_line(launch("check", str(o), str(a), "--on", "id"))
    assert (
        line
        == f"hidden-rate: error: ORIGINALS {str(o)!r} holds no records: there is nothing to measure"
    )
    empty = write_by_suffix(originals.clear(), tmp_path / "empty.parquet")
    line = one_error_line(launch("report", str(a), str(empty)))
    assert f"AVATARS {str(empty)!r} holds no records" in line


def test_duplicated_header_names_are_refused(tmp_path: Path) -> None:
    originals, avatars = _release(n=40)
    o = tmp_path / "o.csv"
    o.write_text(originals.with_columns(z=pl.col("x")).write_csv().replace("z", "x", 1))
    assert o.read_text().startswith("id,x,y,smoker,x\n")
    a = write_by_suffix(avatars, tmp_path / "a.csv")
    line = one_error_line(launch("check", str(o), str(a), "--on", "id"))
    assert f"ORIGINALS {str(o)!r}" in line
    assert "['x']" in line
    assert "x_duplicated_0" not in line


def test_the_sniffer_ignores_separators_in_quoted_header_cells(tmp_path: Path) -> None:
    # Four commas inside quotes, two semicolons: the separator is ";".
    originals, avatars = _release(seed=4)
    names = {"x": "height (cm, left, standing)", "y": "weight (kg, fasting)"}
    paths = []
    for frame, name in ((originals, "o.csv"), (avatars, "a.csv")):
        frame.select("id", "x", "y").rename(names).write_csv(
            tmp_path / name, separator=";", quote_style="non_numeric"
        )
        paths.append(str(tmp_path / name))
    assert Path(paths[0]).read_text().startswith('"id";"height (cm, left, standing)";')
    report = _check_json(*paths, "--on", "id")
    expected = phr.hidden_rate(originals.drop("smoker"), avatars.drop("smoker"), on="id")
    assert report["hidden_rate"] == expected


def test_each_file_has_its_own_separator(tmp_path: Path) -> None:
    originals, avatars = _release(seed=5)
    o = tmp_path / "o.csv"
    originals.write_csv(o, separator=";")
    a = write_by_suffix(avatars, tmp_path / "a.csv")
    report = _check_json(str(o), str(a), "--on", "id")
    assert report["hidden_rate"] == phr.hidden_rate(originals, avatars, on="id")
    # An explicit separator that leaves a file one column is refused, naming the file and the
    # separator its header holds.
    line = one_error_line(launch("check", str(o), str(a), "--on", "id", "--separator", ","))
    assert f"ORIGINALS {str(o)!r} is one column with --separator ','" in line
    assert "give --separator ';'" in line
    line = one_error_line(launch("check", str(o), str(a), "--on", "id", "--separator", ";"))
    assert f"AVATARS {str(a)!r} is one column with --separator ';'" in line
    assert "give --separator ','" in line


# 8. Inputs that are no regular file say what they are.


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return "a FIFO (named pipe)"


def _directory(path: Path) -> str:
    path.mkdir()
    return "a directory"


def _socket(path: Path) -> str:

    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
    except OSError as error:  # a path too long for a socket address
        pytest.skip(f"cannot bind a unix socket here: {error}")
    finally:
        server.close()
    return "a socket"


def _device(path: Path) -> str:
    path.symlink_to(os.devnull)
    return "a character device"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
@pytest.mark.parametrize(
    ("make", "command"),
    [
        *((make, command) for make in (_fifo, _socket, _device) for command in ("check", "report")),
        (_directory, "report"),  # a directory is a parquet dataset to check
    ],
)
def test_an_input_that_is_no_regular_file_says_what_it_is(
    pair: dict[str, Any], tmp_path: Path, make: Callable[[Path], str], command: str
) -> None:
    path = tmp_path / "x.csv"
    what = make(path)
    done = launch(command, str(pair["originals"]), str(path), *PAIR_SPACE)
    line = one_error_line(done)
    assert line == f"hidden-rate: error: AVATARS {str(path)!r} is {what}, not a regular file"


# --- 10. Csv files read as people write them -------------------------------------------------

_FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(_FLOATS, min_size=1, max_size=30),
    separator=st.sampled_from([";", "\t"]),
    padding=st.lists(st.sampled_from(["", " ", "  "]), min_size=2, max_size=2),
    plainly=st.booleans(),
)
def test_csv_numbers_read_exactly_in_any_notation(
    tmp_path: Path, values: list[float], separator: str, padding: list[str], plainly: bool
) -> None:
    # The reference is the floats themselves: "-0,801931", " 1.5" and "1e300" read back bit
    # for bit, whatever the notation.
    written = pl.DataFrame({"x": values, "tag": ["t"] * len(values)})
    path = tmp_path / "x.csv"
    header, *records = written.write_csv(separator=separator, decimal_comma=not plainly).split("\n")
    before, after = padding
    padded = [
        separator.join(f"{before}{cell}{after}" for cell in record.split(separator))
        for record in records
        if record
    ]
    path.write_text("\n".join([header, *padded]) + "\n")
    read = scan(path, "ORIGINALS").collect()
    assert read.schema == pl.Schema({"x": pl.Float64, "tag": pl.String})
    assert read["tag"].to_list() == ["t"] * len(values)
    got = read["x"].to_numpy()
    assert got.tobytes() == np.asarray(values, dtype=np.float64).tobytes()


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.integers(0, 5),
    tail=st.text(alphabet=" \t\r\n", max_size=12),
    separator=st.sampled_from([",", ";"]),
)
def test_csv_blank_lines_at_the_end_are_no_records(
    tmp_path: Path, rows: int, tail: str, separator: str
) -> None:
    path = tmp_path / "x.csv"
    records = [f"{k}{separator}{k * 0.5}" for k in range(rows)]
    lines = [f"a{separator}b", *records]
    path.write_text("\n".join(lines) + ("\n" if not records else "") + tail)
    if rows == 0:
        with pytest.raises(pl.exceptions.NoDataError, match="holds no records"):
            scan(path, "ORIGINALS")
        return
    read = scan(path, "ORIGINALS").collect()
    assert read["a"].to_list() == list(range(rows))
    assert read["b"].to_list() == [k * 0.5 for k in range(rows)]
