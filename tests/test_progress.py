"""The progress bar: on a terminal or when asked, after a delay, never in the counts."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate import engine, progress
from polars_hidden_rate.progress import Progress, Stages
from tests.helpers import without_provenance


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "DELAY_SECONDS", 0.0)


@pytest.mark.usefixtures("no_delay")
def test_bar_is_drawn_on_a_terminal_and_ends_the_line() -> None:
    stream = Terminal()
    with Progress(10, stream=stream) as bar:
        for _ in range(10):
            bar.advance()
    text = stream.getvalue()
    assert "100.0%" in text
    assert text.endswith("\n")


@pytest.mark.usefixtures("no_delay")
def test_no_bar_off_a_terminal_or_when_disabled() -> None:
    for stream, enabled in ((io.StringIO(), None), (Terminal(), False)):
        with Progress(10, enabled=enabled, stream=stream) as bar:
            bar.advance(10)
        assert stream.getvalue() == ""


def test_short_work_shows_nothing() -> None:
    stream = Terminal()
    with Progress(10, stream=stream) as bar:
        bar.advance(10)
    assert stream.getvalue() == ""


@pytest.mark.usefixtures("no_delay")
@pytest.mark.parametrize("strategy", ["flat", "tree"])
def test_engine_reports_progress_without_changing_counts(
    capsys: pytest.CaptureFixture[str], strategy: engine.Strategy
) -> None:
    rng = np.random.default_rng(0)
    originals = rng.integers(-2, 3, (500, 3)).astype(float)
    avatars = originals + rng.integers(-1, 2, originals.shape)
    quiet = phr.count_cloaking(originals, avatars, strategy=strategy)
    shown = phr.count_cloaking(originals, avatars, strategy=strategy, progress=True)
    np.testing.assert_array_equal(quiet, shown)
    # progress=True off a terminal: plain log lines, the stage's start and its end.
    err = capsys.readouterr().err
    assert "hidden-rate: counting: started\n" in err
    assert "hidden-rate: counting: done in " in err


def test_progress_option_is_checked() -> None:
    frame = pl.DataFrame({"Dim1": [0.0, 1.0]})
    with pytest.raises(TypeError, match="progress"):
        phr.hidden_rate(frame, frame, coords="Dim1", progress="yes")  # type: ignore[arg-type]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_estimate_ignores_the_setup_before_the_first_unit() -> None:
    # 10 s of setup (a tree, a probe), then 100 units at 1 s each. Extrapolating from the
    # stage's start would say 180 s left at 10 %, twice the truth; the rate since the first
    # unit says 90 s.
    clock = FakeClock()
    bar = Progress(100, enabled=True, stream=io.StringIO(), clock=clock)
    clock.now = 10.0
    for _ in range(10):
        clock.now += 1.0
        bar.advance()
    assert bar.left(clock.now) == pytest.approx(90.0)


@pytest.mark.parametrize("setup", [0.0, 5.0, 60.0])
@pytest.mark.parametrize("chunk", [1, 7])
def test_the_estimate_stays_within_twice_the_truth_after_a_tenth(setup: float, chunk: int) -> None:
    # Work that slows down by half over the run, advanced in uneven chunks.
    clock = FakeClock()
    bar = Progress(1000, enabled=True, stream=io.StringIO(), clock=clock)
    clock.now = setup
    times = []
    done = 0
    while done < 1000:
        step = min(chunk + done % 3, 1000 - done)
        clock.now += step * (1.0 + done / 2000)
        done += step
        bar.advance(step)
        times.append((clock.now, done, bar.left(clock.now)))
    end = clock.now
    for now, done, left in times:
        if 100 <= done < 1000:
            assert left is not None
            assert 0.5 * (end - now) <= left <= 2.0 * (end - now)


def test_log_mode_writes_plain_lines_at_start_tenths_and_end() -> None:
    clock = FakeClock()
    stream = io.StringIO()
    with Progress(20, enabled=True, stream=stream, clock=clock, label="counting") as bar:
        for _ in range(20):
            clock.now += 0.5
            bar.advance()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "hidden-rate: counting: started"
    assert lines[1].startswith("hidden-rate: counting: 10% done, 1.0 s")
    assert [line.split(": ")[2].split("%")[0] for line in lines[1:-1]] == [
        str(10 * k) for k in range(1, 10)
    ]
    assert lines[-1] == "hidden-rate: counting: done in 10.0 s"
    assert "\r" not in stream.getvalue()


def test_stages_name_each_stage_from_the_start_in_a_log() -> None:
    clock = FakeClock()
    stream = io.StringIO()
    with Stages(True, stream=stream, clock=clock) as stages:
        with stages.stage("reading"):
            clock.now += 2.0
        with stages.stage("counting", total=4) as bar:
            clock.now += 1.0
            bar.advance(4)
    assert stream.getvalue().splitlines() == [
        "hidden-rate: reading: started",
        "hidden-rate: reading: done in 2.0 s",
        "hidden-rate: counting: started",
        "hidden-rate: counting: done in 1.0 s",
    ]


def test_stages_are_silent_off_a_terminal_unless_asked() -> None:
    stream = io.StringIO()
    with Stages(None, stream=stream) as stages, stages.stage("reading"):
        pass
    assert stream.getvalue() == ""


def test_on_a_terminal_a_stage_without_units_is_redrawn_after_the_delay() -> None:
    clock = FakeClock()
    stream = Terminal()
    with Stages(None, stream=stream, clock=clock, ticking=False) as stages:
        with stages.stage("reading") as stage:
            clock.now = 0.5
            stage.redraw()  # what the ticking thread does
            assert stream.getvalue() == ""  # within the first second: nothing
            clock.now = 1.5
            stage.redraw()
        with stages.stage("fitting") as stage:
            clock.now = 2.0
    text = stream.getvalue()
    assert text == "\rreading: 1.5 s\033[K\rreading: 1.5 s\033[K\n\rfitting: 0.5 s\033[K\n"


def test_the_terminal_ticker_redraws_and_stops() -> None:
    stream = Terminal()
    with Stages(None, stream=stream, clock=lambda: 100.0) as stages:
        stages.started = 0.0
        with stages.stage("reading") as stage:
            stage.started = 0.0
            for _ in range(100):
                if stream.getvalue():
                    break
                time.sleep(0.05)
    assert stream.getvalue().startswith("\rreading: ")


def test_a_stage_inside_another_hands_the_line_back_when_it_ends() -> None:
    clock = FakeClock()
    stream = io.StringIO()
    with Stages(True, stream=stream, clock=clock) as stages:
        with stages.stage("writing"):
            with stages.stage("counting", total=2) as bar:
                bar.advance(2)
            assert stages.current is not None
            assert stages.current.label == "writing"
        assert stages.current is None
    assert stream.getvalue().splitlines() == [
        "hidden-rate: writing: started",
        "hidden-rate: counting: started",
        "hidden-rate: counting: done in 0.0 s",
        "hidden-rate: writing: done in 0.0 s",
    ]


def test_library_stages_are_silent_without_a_command_reporting() -> None:
    assert progress._active is None
    stream_stage = progress.stage("reading", enabled=False)
    assert stream_stage.mode == "off"


@pytest.mark.parametrize("command", ["check", "report"])
def test_progress_names_every_stage_in_a_log(tmp_path: Path, command: str) -> None:
    """Issue 22: ``--progress`` off a terminal: one plain line per stage event on stderr, from
    the first stage on; the output and the exit code are those of a run without it."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    originals = pl.DataFrame(x, schema=["x", "y", "z"], orient="row")
    avatars = pl.DataFrame(
        x + rng.normal(scale=0.3, size=x.shape), schema=["x", "y", "z"], orient="row"
    )
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o)
    avatars.write_csv(a)
    script = Path(sys.executable).parent / "hidden-rate"
    if not script.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    base = [str(script), command, str(o), str(a), "--format", "json"]
    quiet = subprocess.run(base, capture_output=True, text=True, check=False)
    shown = subprocess.run([*base, "--progress"], capture_output=True, text=True, check=False)
    assert quiet.stderr == ""  # off a terminal, nothing unless asked
    assert shown.returncode == quiet.returncode
    strip = without_provenance
    assert strip(json.loads(shown.stdout)) == strip(json.loads(quiet.stdout))
    lines = shown.stderr.splitlines()
    assert all(line.startswith("hidden-rate: ") for line in lines)
    stages = [line.split(": ")[1] for line in lines if line.endswith(": started")]
    expected = [
        "planning",
        "fitting the projection",
        "reading and projecting",
        "link test and own copies",
        "counting",
    ]
    if command == "report":
        expected += ["nearest originals", "direct matches", "writing the report"]
    assert stages == expected
    assert sum(line.endswith(" s") and ": done in " in line for line in lines) == len(expected)
    assert "\r" not in shown.stderr
    silent = subprocess.run([*base, "--progress", "--quiet"], capture_output=True, text=True)
    assert silent.stderr == ""
