"""A gate that cannot be fooled: the installed `hidden-rate` against hostile paths and signals.

Every test runs the real entry point in a subprocess, on small files made here.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from tests.helpers import brute_force_counts, hidden_share, without_provenance
from tests.paused_run import PausedRun

SCRIPT = Path(sys.executable).parent / "hidden-rate"
COORDS = ["Dim1", "Dim2"]
SPACE = ["--coords", ",".join(COORDS), "--on", "id"]
# Reset the signals a parent may have set to be ignored, then run the script itself.
LAUNCH = (
    "import os, signal, sys\n"
    "for name in ('SIGINT', 'SIGTERM', 'SIGHUP'):\n"
    "    if hasattr(signal, name):\n"
    "        signal.signal(getattr(signal, name), signal.SIG_DFL)\n"
    "for name in sys.argv[1].split(',') if sys.argv[1] else []:\n"
    "    signal.signal(getattr(signal, name), signal.SIG_IGN)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _command(*args: str, ignore: str = "") -> list[str]:
    if not SCRIPT.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    return [sys.executable, "-c", LAUNCH, ignore, str(SCRIPT), *args]


def _run(*args: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(*args), capture_output=True, text=True, check=False, umask=umask, timeout=120
    )


def _write(frame: pl.DataFrame, path: Path) -> Path:
    kind = path.suffix
    if kind == ".csv":
        frame.write_csv(path)
    elif kind == ".ipc":
        frame.write_ipc(path)
    else:
        frame.write_parquet(path)
    return path


def _read(path: Path) -> pl.DataFrame:
    """The one file ``path``, whatever glob characters its name holds."""
    if path.suffix == ".csv":
        return pl.scan_csv(path, glob=False).collect()
    if path.suffix == ".ipc":
        return pl.scan_ipc(path, glob=False).collect()
    return pl.scan_parquet(path, glob=False).collect()


def _frames(n: int = 200, seed: int = 0, noise: float = 0.3) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    y = x + rng.normal(scale=noise, size=x.shape)
    key = pl.int_range(n, dtype=pl.Int64).alias("id")
    return (
        pl.DataFrame(x, schema=COORDS).select(key, pl.all()),
        pl.DataFrame(y, schema=COORDS).select(key, pl.all()),
    )


def _rate(originals: pl.DataFrame, avatars: pl.DataFrame) -> float:
    counts = brute_force_counts(
        originals.select(COORDS).to_numpy(), avatars[COORDS].to_numpy(), 1e-9
    )
    return hidden_share(counts)


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("hidden-rate: error: ")
    assert done.stderr.endswith("\n")
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr.rstrip("\n")


@pytest.fixture
def pair(tmp_path: Path) -> dict[str, Any]:
    originals, avatars = _frames()
    return {
        "originals": _write(originals, tmp_path / "o.parquet"),
        "avatars": _write(avatars, tmp_path / "a.parquet"),
        "rate": _rate(originals, avatars),
    }


# 1. --output never overwrites an input.


def _same_as_input(pair: dict[str, Any], tmp_path: Path, how: str) -> Path:
    if how == "originals":
        return Path(pair["originals"])
    if how == "avatars":
        return Path(pair["avatars"])
    if how == "dotted":  # the same path, spelled differently
        (tmp_path / "sub").mkdir()
        return tmp_path / "sub" / ".." / "a.parquet"
    if how == "symlink":  # a link to the avatars (os.replace would only replace the link)
        os.symlink(pair["avatars"], tmp_path / "link.parquet")
        return tmp_path / "link.parquet"
    os.link(pair["avatars"], tmp_path / "hard.parquet")  # one inode, two names
    return tmp_path / "hard.parquet"


@pytest.mark.parametrize("how", ["originals", "avatars", "dotted", "symlink", "hardlink"])
def test_output_that_is_an_input_is_refused(pair: dict[str, Any], tmp_path: Path, how: str) -> None:
    output = _same_as_input(pair, tmp_path, how)
    before = {path: path.read_bytes() for path in (pair["originals"], pair["avatars"])}
    listing = sorted(os.listdir(tmp_path))
    done = _run(
        "check", str(pair["originals"]), str(pair["avatars"]), *SPACE, "--output", str(output)
    )
    line = _one_error_line(done)
    assert "--output" in line
    assert ("ORIGINALS" if how == "originals" else "AVATARS") in line
    assert {path: path.read_bytes() for path in before} == before
    assert sorted(os.listdir(tmp_path)) == listing
    if how == "symlink":
        assert output.is_symlink()


def test_output_beside_the_inputs_is_fine(pair: dict[str, Any], tmp_path: Path) -> None:
    output = tmp_path / "o.csv"  # the same stem as ORIGINALS, another file
    done = _run(
        "check", str(pair["originals"]), str(pair["avatars"]), *SPACE, "--output", str(output)
    )
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(output).height == 200


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
    originals, avatars = _frames()
    # The decoy is the avatars themselves: hidden rate 0, unlike the real originals.
    real = _write(originals, tmp_path / f"{name}.{kind}")
    _write(avatars, tmp_path / f"{decoy}.{kind}")
    avatars_path = _write(avatars, tmp_path / f"avatars[0].{kind}")
    _write(originals, tmp_path / f"avatars0.{kind}")
    done = _run("check", str(real), str(avatars_path), *SPACE, "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["n"] == 200
    assert report["hidden_rate"] == pytest.approx(_rate(originals, avatars))
    assert report["hidden_rate"] > 50


@pytest.mark.parametrize(
    ("name", "kind"),
    [("out[1]", "parquet"), ("out[1]", "csv"), ("out[1]", "ipc"), ("out*?", "parquet")],
)
def test_output_path_is_literal(pair: dict[str, Any], tmp_path: Path, kind: str, name: str) -> None:
    folder = tmp_path / "written"
    folder.mkdir()
    output = folder / f"{name}.{kind}"
    args = ("check", str(pair["originals"]), str(pair["avatars"]), *SPACE, "--output", str(output))
    done = _run(*args, "--format", "json")
    assert done.returncode == 0, done.stderr
    assert os.listdir(folder) == [output.name]
    assert json.loads(done.stdout)["hidden_rate"] == pytest.approx(pair["rate"])
    written = _read(output)
    originals = pl.read_parquet(pair["originals"])
    counts = brute_force_counts(
        originals.select(COORDS).to_numpy(),
        pl.read_parquet(pair["avatars"]).sort("id").select(COORDS).to_numpy(),
        1e-9,
    )
    assert written.columns == [*originals.columns, "local_cloaking", "hidden"]
    assert written["local_cloaking"].to_list() == counts.tolist()


# 3. --output keeps permissions: never wider than the file it replaces, or than the umask allows.


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("umask", "expected"), [(0o077, 0o600), (0o022, 0o644), (0o027, 0o640)], ids=oct
)
def test_new_output_gets_the_umask(
    pair: dict[str, Any], tmp_path: Path, umask: int, expected: int
) -> None:
    output = tmp_path / "out.parquet"
    done = _run(
        "check",
        str(pair["originals"]),
        str(pair["avatars"]),
        *SPACE,
        "--output",
        str(output),
        umask=umask,
    )
    assert done.returncode == 0, done.stderr
    assert _mode(output) == expected


@pytest.mark.parametrize(
    ("mode", "umask"), [(0o600, 0o022), (0o640, 0o077), (0o604, 0o000)], ids=oct
)
def test_replaced_output_keeps_its_mode(
    pair: dict[str, Any], tmp_path: Path, umask: int, mode: int
) -> None:
    output = tmp_path / "out.csv"
    output.write_text("previous\n")
    output.chmod(mode)
    done = _run(
        "check",
        str(pair["originals"]),
        str(pair["avatars"]),
        *SPACE,
        "--output",
        str(output),
        umask=umask,
    )
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(output).height == 200
    assert _mode(output) == mode


# 4. SIGINT, SIGTERM and SIGHUP during the write: one line, the right code, nothing left behind.

SIGNALS = [
    pytest.param(name, marks=pytest.mark.skipif(not hasattr(signal, name), reason=f"no {name}"))
    for name in ("SIGINT", "SIGTERM", "SIGHUP")
]


@pytest.fixture(scope="module")
def slow_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Inputs whose count takes long enough (seconds) to be interrupted."""
    folder = tmp_path_factory.mktemp("slow")
    originals, avatars = _frames(n=200_000, noise=0.3)
    return _write(originals, folder / "o.parquet"), _write(avatars, folder / "a.parquet")


def _start_writing(
    slow_pair: tuple[Path, Path], folder: Path, ignore: str = ""
) -> tuple[subprocess.Popen[str], Path]:
    """Start a check with --output into ``folder``; return once its temporary file exists."""
    originals, avatars = slow_pair
    args = ("check", str(originals), str(avatars), *SPACE, "--output", str(folder / "out.parquet"))
    process = subprocess.Popen(
        _command(*args, ignore=ignore),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        umask=0o022,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        temporary = list(folder.glob(".out.parquet.*.tmp/out.parquet"))
        if temporary:
            return process, temporary[0]
        if process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(
                f"the check ended (rc {process.returncode}) before its temporary file: {err}"
            )
        time.sleep(0.005)
    process.kill()
    process.communicate()
    pytest.fail("no temporary file appeared within 120 s")


@pytest.mark.parametrize("name", SIGNALS)
def test_signal_during_write_cleans_up(
    slow_pair: tuple[Path, Path], tmp_path: Path, name: str
) -> None:
    signum = getattr(signal, name)
    process, temporary = _start_writing(slow_pair, tmp_path)
    # Created private, before anything is written into it.
    assert stat.S_IMODE(temporary.stat().st_mode) == 0o600
    process.send_signal(signum)
    out, err = process.communicate(timeout=120)
    assert (process.returncode, err) == (128 + signum, f"hidden-rate: interrupted ({name})\n")
    assert out == ""
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP")
def test_an_ignored_sighup_stays_ignored(slow_pair: tuple[Path, Path], tmp_path: Path) -> None:
    # As under nohup: the check runs to its end.
    process, _ = _start_writing(slow_pair, tmp_path, ignore="SIGHUP")
    process.send_signal(signal.SIGHUP)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "hidden rate" in out
    assert os.listdir(tmp_path) == ["out.parquet"]


# 5. An unreadable input is named in the one-line error.


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not a columnar file\n" * 4)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _unreadable(path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads files without read permission")
    _write(_frames()[0], path)
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
    done = _run("check", *map(str, paths), *SPACE, "--output", str(output))
    line = _one_error_line(done)
    assert line.startswith(f"hidden-rate: error: cannot read {role} {str(bad)!r}: ")
    assert len(line) > len(f"hidden-rate: error: cannot read {role} {str(bad)!r}: ")
    assert not output.exists()


def test_main_restores_the_signal_handlers() -> None:
    # In process: the handlers main installs for a command are gone after it.
    from polars_hidden_rate.cli import main

    names = [name for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)]
    before = {name: signal.getsignal(getattr(signal, name)) for name in names}
    assert main(["check", "absent.parquet", "absent.csv"]) == 2
    assert {name: signal.getsignal(getattr(signal, name)) for name in names} == before


NEVER_ENDING_CHECK = """
import pathlib, sys, threading
import polars as pl
import polars_hidden_rate.cli as cli
import polars_hidden_rate.runs as runs
from polars_hidden_rate.plan import CountPlan

def never_ending_summary(*args, **options):  # a count that never ends, as a huge one would seem
    pathlib.Path("counting").touch()
    threading.Event().wait()

CountPlan.per_record_judged = never_ending_summary
runs.summarize_judged = never_ending_summary
runs.report_of_plan = never_ending_summary
sys.argv = ["hidden-rate", *sys.argv[1:]]
cli.entry()
"""


@pytest.mark.parametrize("write", [True, False])
def test_a_stop_signal_does_not_wait_for_the_count(
    slow_pair: tuple[Path, Path], tmp_path: Path, write: bool
) -> None:
    # Polars holds the thread that collects until the count ends: the stop must not wait for it.
    originals, avatars = slow_pair
    args = ["check", str(originals), str(avatars), *SPACE]
    if write:
        args += ["--output", str(tmp_path / "out.parquet")]
    process = subprocess.Popen(
        [sys.executable, "-c", NEVER_ENDING_CHECK, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "counting").exists():
            assert process.poll() is None, "the check ended before counting"
            assert time.monotonic() < deadline, "no count started within 60 s"
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert (process.returncode, err) == (143, "hidden-rate: interrupted (SIGTERM)\n")
    assert os.listdir(tmp_path) == ["counting"]


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
    done = _run("check", *args, "--format", "json")
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
    plain = [_write(originals, tmp_path / "o.csv"), _write(avatars, tmp_path / "a.csv")]
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


AIDS = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "aids"


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
    line = _one_error_line(_run("check", *paths, "--on", "id"))
    assert "feature 'x' of originals is text" in line
    assert "decimal comma" in line
    assert "--decimal-comma" in line


def test_spaces_after_separators(tmp_path: Path) -> None:
    # "1.5, 2.0, yes": the numbers are numbers, the text " yes" is "yes".
    originals, avatars = _release(seed=2)
    expected = phr.hidden_rate(originals, avatars, on="id")
    spaced = _spaced(originals, tmp_path / "o.csv")
    assert ", yes" in spaced.read_text()
    plain = _write(avatars, tmp_path / "a.csv")
    report = _check_json(str(spaced), str(plain), "--on", "id")
    assert (report["n"], report["hidden_rate"]) == (200, expected)
    report = _check_json(str(spaced), str(_spaced(avatars, tmp_path / "a2.csv")), "--on", "id")
    assert report["hidden_rate"] == expected
    # The written originals hold the numbers and the stripped text.
    output = tmp_path / "out.parquet"
    done = _run("check", str(spaced), str(plain), "--on", "id", "--output", str(output))
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
        _write(avatars.drop(*key), a)
        link = ["--on", "id"] if not key else []
        report = _check_json(str(o), str(a), *link, "--impute", "median")
        assert (report["n"], report["hidden_rate"]) == (40, expected)


def test_a_header_only_file_has_no_records(tmp_path: Path) -> None:
    originals, avatars = _release(n=40)
    o = tmp_path / "o.csv"
    o.write_text("id,x,y,smoker\n")
    a = _write(avatars, tmp_path / "a.csv")
    line = _one_error_line(_run("check", str(o), str(a), "--on", "id"))
    assert (
        line
        == f"hidden-rate: error: ORIGINALS {str(o)!r} holds no records: there is nothing to measure"
    )
    empty = _write(originals.clear(), tmp_path / "empty.parquet")
    line = _one_error_line(_run("report", str(a), str(empty)))
    assert f"AVATARS {str(empty)!r} holds no records" in line


def test_duplicated_header_names_are_refused(tmp_path: Path) -> None:
    originals, avatars = _release(n=40)
    o = tmp_path / "o.csv"
    o.write_text(originals.with_columns(z=pl.col("x")).write_csv().replace("z", "x", 1))
    assert o.read_text().startswith("id,x,y,smoker,x\n")
    a = _write(avatars, tmp_path / "a.csv")
    line = _one_error_line(_run("check", str(o), str(a), "--on", "id"))
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
    a = _write(avatars, tmp_path / "a.csv")
    report = _check_json(str(o), str(a), "--on", "id")
    assert report["hidden_rate"] == phr.hidden_rate(originals, avatars, on="id")
    # An explicit separator that leaves a file one column is refused, naming the file and the
    # separator its header holds.
    line = _one_error_line(_run("check", str(o), str(a), "--on", "id", "--separator", ","))
    assert f"ORIGINALS {str(o)!r} is one column with --separator ','" in line
    assert "give --separator ';'" in line
    line = _one_error_line(_run("check", str(o), str(a), "--on", "id", "--separator", ";"))
    assert f"AVATARS {str(a)!r} is one column with --separator ';'" in line
    assert "give --separator ','" in line


# 7. Paths in messages are quoted: a newline in one cannot fake another file's name.


def test_a_path_with_a_newline_is_quoted(pair: dict[str, Any], tmp_path: Path) -> None:
    missing = tmp_path / "o.csv\nhidden-rate: error: AVATARS file not found: other.csv"
    line = _one_error_line(_run("check", str(missing), str(pair["avatars"]), *SPACE))
    assert line == f"hidden-rate: error: ORIGINALS file not found: {str(missing)!r}"
    output = tmp_path / "no\nsuch" / "out.parquet"
    args = ("check", str(pair["originals"]), str(pair["avatars"]), *SPACE, "--output", str(output))
    line = _one_error_line(_run(*args))
    assert line == f"hidden-rate: error: --output folder not found: {str(output.parent)!r}"


# 8. Inputs that are no regular file say what they are.


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return "a FIFO (named pipe)"


def _directory(path: Path) -> str:
    path.mkdir()
    return "a directory"


def _socket(path: Path) -> str:
    import socket

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
    done = _run(command, str(pair["originals"]), str(path), *SPACE)
    line = _one_error_line(done)
    assert line == f"hidden-rate: error: AVATARS {str(path)!r} is {what}, not a regular file"


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
    originals = pl.DataFrame(x, schema=COORDS).select(key, pl.all())
    avatars = pl.DataFrame(y, schema=COORDS).select(key, pl.all())
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
    o = _write(originals, tmp_path / "originals.csv")
    a = _write(avatars, tmp_path / "avatars.csv")
    # A tenth of the avatars are copies here: only the rate is gated.
    done = _run("check", str(o), str(a), *SPACE, "--min-rate", "90", "--max-own-copies", "100")
    assert done.returncode == code, done.stderr
    gate_line = next(row for row in done.stdout.splitlines() if row.startswith("gate "))
    assert gate_line.startswith(f"gate                  {verdict}; own copies ")
    assert f"hidden rate           {rate} %\n" in done.stdout
    page = tmp_path / "report.html"
    done = _run("report", str(o), str(a), *SPACE, "--html", str(page))
    assert done.returncode == 1, done.stderr  # a rate equal to its target fails a report
    line = next(row for row in done.stdout.splitlines() if row.startswith("hidden rate (%)"))
    assert line.split()[3:] == [html[0], "target", *html[1].split(), "FAIL"]
    cells = [cell for cell in page.read_text("utf-8").split("<tr>") if "Hidden rate (%)" in cell]
    assert [f"<td>{cell}</td>" in cells[0] for cell in (html[0], "&gt; 90")] == [True, True]


@pytest.mark.parametrize("value", ["0.9", "1", "0.05"])
def test_a_fraction_for_min_rate_is_refused(pair: dict[str, Any], value: str) -> None:
    done = _run("check", str(pair["originals"]), str(pair["avatars"]), *SPACE, "--min-rate", value)
    meant = f"{100 * float(value):g}"
    assert _one_error_line(done) == (
        f"hidden-rate: error: --min-rate is a percentage: {float(value):g} means "
        f"{float(value):g} %; did you mean {meant}?"
    )


def test_demo_options_are_named_and_a_small_cohort_works() -> None:
    done = _run("demo", "--seed", "-1")
    assert _one_error_line(done) == (
        "hidden-rate: error: argument --seed: must be an integer of at least 0, got '-1'"
    )
    done = _run("demo", "--rows", "5")
    assert _one_error_line(done) == (
        "hidden-rate: error: --rows must be at least 6: k = 2 needs 3 records and --ncp 5 "
        "needs 6; got 5"
    )
    done = _run("demo", "--rows", "10")
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] in (["2"], ["5"])]
    assert [row[0] for row in rows] == ["2", "5"]
    assert "k = 10, 20, 50 left out: k must be below --rows (10)." in done.stdout
    assert done.stderr == ""


# 7. An output is a regular file: a FIFO, a socket or a directory there is refused, saying what it
# is, before any counting (the run below would never end if it counted).


def _output_fifo(path: Path) -> None:
    os.mkfifo(path)


def _output_socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    here = Path.cwd()
    os.chdir(path.parent)  # a socket's path is limited to about 100 bytes: bind a short one
    try:
        server.bind(path.name)
    finally:
        os.chdir(here)
    server.close()  # the socket file stays


def _output_directory(path: Path) -> None:
    path.mkdir()


def _link_to_fifo(path: Path) -> None:
    os.mkfifo(path.with_name("pipe"))
    path.symlink_to("pipe")


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (_output_fifo, "a FIFO (named pipe)"),
        (_output_socket, "a socket"),
        (_output_directory, "a directory"),
        (_link_to_fifo, "a FIFO (named pipe)"),
    ],
    ids=["fifo", "socket", "directory", "link-to-fifo"],
)
@pytest.mark.parametrize("option", ["--output", "--html"])
def test_a_non_regular_output_is_refused_before_counting(
    slow_pair: tuple[Path, Path],
    tmp_path: Path,
    make: Callable[[Path], None],
    what: str,
    option: str,
) -> None:
    folder = tmp_path / "written"
    folder.mkdir()
    output = folder / ("out.csv" if option == "--output" else "out.html")
    make(output)
    listing = {name: os.lstat(folder / name).st_mode for name in os.listdir(folder)}
    command = "check" if option == "--output" else "report"
    arguments = [command, *map(str, slow_pair), *SPACE, option, str(output)]
    done = subprocess.run(
        [sys.executable, "-c", NEVER_ENDING_CHECK, *arguments],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    line = _one_error_line(done)
    assert line == (
        f"hidden-rate: error: {option} {str(output)!r} exists and is {what}, not a regular file"
    )
    assert not (tmp_path / "counting").exists()
    assert {name: os.lstat(folder / name).st_mode for name in os.listdir(folder)} == listing


# 7. Concurrent runs: a file created or replaced while a run counts is left as it is.


def test_a_file_created_meanwhile_is_left_intact(pair: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "written"
    folder.mkdir()
    output = folder / "out.csv"
    args = ("check", pair["originals"], pair["avatars"], *SPACE, "--output", output)
    run = PausedRun(tmp_path / "signals", *args)
    output.write_text("someone else's\n")
    done = run.finish()
    line = _one_error_line(done)
    assert f"--output {str(output)!r} was created while this run was counting" in line
    assert output.read_text() == "someone else's\n"
    assert os.listdir(folder) == ["out.csv"]


def test_a_file_replaced_by_another_run_meanwhile_is_left_intact(
    pair: dict[str, Any], tmp_path: Path
) -> None:
    folder = tmp_path / "written"
    folder.mkdir()
    output = folder / "out.csv"
    output.write_text("previous\n")
    args = ("check", pair["originals"], pair["avatars"], *SPACE, "--output", output)
    first = PausedRun(tmp_path / "signals", *map(str, args))
    second = _run(*map(str, args), "--coords", "Dim1")  # another run, other counts
    assert second.returncode == 0, second.stderr
    written = output.read_bytes()
    assert written != b"previous\n"

    line = _one_error_line(first.finish())
    assert f"--output {str(output)!r} was replaced or changed while this run was counting" in line
    assert output.read_bytes() == written
    assert os.listdir(folder) == ["out.csv"]


def test_a_file_found_at_the_start_is_replaced(pair: dict[str, Any], tmp_path: Path) -> None:
    # The pause itself changes nothing: the file the run found is the one it replaces.
    output = tmp_path / "out.csv"
    output.write_text("previous\n")
    args = ("check", pair["originals"], pair["avatars"], *SPACE, "--output", output)
    done = PausedRun(tmp_path / "signals", *map(str, args)).finish()
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(output).height == 200


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chgrp needs root")
def test_replaced_output_keeps_its_group(pair: dict[str, Any], tmp_path: Path) -> None:
    output = tmp_path / "out.csv"
    output.write_text("previous\n")
    output.chmod(0o640)
    group = os.stat(output).st_gid + 4321  # not the group a new file gets
    os.chown(output, -1, group)
    done = _run(
        "check", str(pair["originals"]), str(pair["avatars"]), *SPACE, "--output", str(output)
    )
    assert done.returncode == 0, done.stderr
    assert (os.stat(output).st_gid, _mode(output)) == (group, 0o640)


def test_a_nan_code_is_missing_with_or_without_categorical(tmp_path: Path) -> None:
    # Issue 20 item 2: NaN in a numeric column declared categorical was a modality 'NaN'.
    rng = np.random.default_rng(21)
    n = 120
    k = rng.integers(0, 3, n).astype(float)
    k[7] = np.nan
    originals = pl.DataFrame({"x": rng.normal(size=n), "k": k})
    avatars = originals.with_columns(pl.col("x") + rng.normal(scale=0.2, size=n))
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o)
    avatars.write_csv(a)
    for extra in ([], ["--categorical", "k"]):
        done = _run("check", str(o), str(a), "--ncp", "2", *extra)
        assert done.returncode == 2, (extra, done.stdout)
        assert "'k'" in done.stderr
        assert "NaN" in done.stderr
    filled = _run("check", str(o), str(a), "--ncp", "2", "--categorical", "k", "--impute", "mode")
    assert filled.returncode == 0, filled.stderr
