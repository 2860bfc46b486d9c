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

from tests.helpers import brute_force_counts, hidden_share
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
        temporary = [name for name in os.listdir(folder) if name.endswith(".tmp")]
        if temporary:
            return process, folder / temporary[0]
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

def never_ending(*args, **options):  # a count that never ends, as a huge one would seem
    def wait():
        pathlib.Path("counting").touch()
        threading.Event().wait()
    return pl.defer(wait, schema={"local_cloaking": pl.get_index_type()})

def never_ending_summary(*args, **options):  # the same, for check without --output, report
    pathlib.Path("counting").touch()
    threading.Event().wait()

cli.local_cloaking = never_ending
cli.cloaking_summary = never_ending_summary
cli.privacy_report = never_ending_summary
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


# 6. An output is a regular file: a FIFO, a socket or a directory there is refused, saying what it
# is, before any counting (the run below would never end if it counted).


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    here = Path.cwd()
    os.chdir(path.parent)  # a socket's path is limited to about 100 bytes: bind a short one
    try:
        server.bind(path.name)
    finally:
        os.chdir(here)
    server.close()  # the socket file stays


def _directory(path: Path) -> None:
    path.mkdir()


def _link_to_fifo(path: Path) -> None:
    os.mkfifo(path.with_name("pipe"))
    path.symlink_to("pipe")


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (_fifo, "a FIFO (named pipe)"),
        (_socket, "a socket"),
        (_directory, "a directory"),
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
