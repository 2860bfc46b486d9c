"""A real `hidden-rate check` that pauses once its output is complete and before it is moved
into place, until the test says go: two runs then race deterministically, with no sleep."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

# The script's own entry point, with a pause where the count is done and the output staged: after
# a directory's parts are written (DatasetJob.write), or a file sunk and summarised (summarize).
PAUSED_CHECK = """
import pathlib, sys, time
import polars_hidden_rate.cli as cli
import polars_hidden_rate.runs as runs
import polars_hidden_rate.to_parquet as to_parquet

signals = pathlib.Path(sys.argv[1])

def pause(result):
    (signals / "staged").touch()
    while not (signals / "go").exists():
        time.sleep(0.01)
    return result

write = to_parquet.DatasetJob.write
to_parquet.DatasetJob.write = lambda self, *args: pause(write(self, *args))
summarize = runs.summarize
runs.summarize = lambda *args, **options: pause(summarize(*args, **options))
sys.argv = ["hidden-rate", *sys.argv[2:]]
cli.entry()
"""


class PausedRun:
    """``hidden-rate ARGS`` in a subprocess, paused with its output staged (see PAUSED_CHECK)."""

    def __init__(self, signals: Path, *args: str | Path, umask: int = 0o022) -> None:
        signals.mkdir()
        self.signals = signals
        self.process = subprocess.Popen(
            [sys.executable, "-c", PAUSED_CHECK, str(signals), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            umask=umask,
        )
        deadline = time.monotonic() + 120
        while not (signals / "staged").exists():
            if self.process.poll() is not None:
                out, err = self.process.communicate()
                pytest.fail(f"the run ended (rc {self.process.returncode}) unstaged: {out}{err}")
            if time.monotonic() > deadline:
                self.process.kill()
                pytest.fail("the run staged no output within 120 s")
            time.sleep(0.01)

    def finish(self) -> subprocess.CompletedProcess[str]:
        """Let the run go on; its outcome."""
        (self.signals / "go").touch()
        try:
            out, err = self.process.communicate(timeout=120)
        finally:
            self.process.kill()
        return subprocess.CompletedProcess(self.process.args, self.process.returncode, out, err)
