"""SIGINT, SIGTERM and SIGHUP while the command line writes: one line, the right code, nothing
left behind, an ignored signal left ignored, the handlers restored, and no wait for the count."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import (
    NEVER_ENDING_CHECK,
    PAIR_SPACE,
    launch_command,
)

# 4. SIGINT, SIGTERM and SIGHUP during the write: one line, the right code, nothing left behind.

SIGNALS = [
    pytest.param(name, marks=pytest.mark.skipif(not hasattr(signal, name), reason=f"no {name}"))
    for name in ("SIGINT", "SIGTERM", "SIGHUP")
]


def _start_writing(
    slow_pair: tuple[Path, Path], folder: Path, ignore: str = ""
) -> tuple[subprocess.Popen[str], Path]:
    """Start a check with --output into ``folder``; return once its temporary file exists."""
    originals, avatars = slow_pair
    args = (
        "check",
        str(originals),
        str(avatars),
        *PAIR_SPACE,
        "--output",
        str(folder / "out.parquet"),
    )
    process = subprocess.Popen(
        launch_command(*args, ignore=ignore),
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


def test_main_restores_the_signal_handlers() -> None:
    # In process: the handlers main installs for a command are gone after it.
    from polars_hidden_rate.cli import main

    names = [name for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)]
    before = {name: signal.getsignal(getattr(signal, name)) for name in names}
    assert main(["check", "absent.parquet", "absent.csv"]) == 2
    assert {name: signal.getsignal(getattr(signal, name)) for name in names} == before


@pytest.mark.parametrize("write", [True, False])
def test_a_stop_signal_does_not_wait_for_the_count(
    slow_pair: tuple[Path, Path], tmp_path: Path, write: bool
) -> None:
    # Polars holds the thread that collects until the count ends: the stop must not wait for it.
    originals, avatars = slow_pair
    args = ["check", str(originals), str(avatars), *PAIR_SPACE]
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
