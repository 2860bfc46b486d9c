"""The progress bar: on a terminal or when asked, after a delay, never in the counts."""

from __future__ import annotations

import io

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate import engine, progress
from polars_hidden_rate.progress import Progress


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
    assert "100.0%" in capsys.readouterr().err


def test_progress_option_is_checked() -> None:
    frame = pl.DataFrame({"Dim1": [0.0, 1.0]})
    with pytest.raises(TypeError, match="progress"):
        phr.hidden_rate(frame, frame, coords="Dim1", progress="yes")  # type: ignore[arg-type]
