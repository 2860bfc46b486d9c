"""Progress on stderr: the stage a command is in and, for work counted in units, a bar with
an estimate of the time left.

Three modes, chosen from ``enabled`` and the stream (`resolve_mode`):

- ``"terminal"`` (``enabled=None`` or True on a terminal): one line redrawn in place, from
  `DELAY_SECONDS` into the command: the stage and its time, or the bar.
- ``"log"`` (``enabled=True`` off a terminal: ``progress=True``, CLI ``--progress``): plain
  lines for a log, one when a stage starts, one at each tenth of its units, one when it ends.
- ``"off"`` (``enabled=False``, or None off a terminal).

The estimate extrapolates the rate since the stage's first unit was done, not since the stage
started: what ran before it (building a tree, a probe) says nothing about the rate. A clock can
be given, so that the estimate is tested without waiting.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Literal, TextIO

Mode = Literal["off", "terminal", "log"]
Clock = Callable[[], float]

# On a terminal, work shorter than this shows nothing.
DELAY_SECONDS = 1.0
REFRESH_SECONDS = 0.2
PREFIX = "hidden-rate: "


def resolve_mode(enabled: bool | None, stream: TextIO) -> Mode:
    """The mode for ``enabled`` on ``stream``: see the module's docstring."""
    if enabled is False:
        return "off"
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # no such method, or a closed stream
        terminal = False
    if terminal:
        return "terminal"
    return "log" if enabled else "off"


class Progress:
    """One stage: counts units of work done out of ``total`` (None: not counted in units) and
    reports on ``stream`` in the mode `resolve_mode` gives.

    ``started`` is when the command started (default: now), from which the terminal's delay
    runs.
    """

    def __init__(
        self,
        total: int | None,
        *,
        enabled: bool | None = None,
        label: str = "counting",
        stream: TextIO | None = None,
        clock: Clock = time.monotonic,
        started: float | None = None,
        lock: threading.RLock | None = None,
        on_close: Callable[[Progress], None] | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.mode = resolve_mode(enabled, self.stream)
        self.enabled = self.mode != "off"
        self.total = None if total is None else max(total, 1)
        self.label = label
        self.clock = clock
        self.done = 0
        self.begun = clock()
        self.started = self.begun if started is None else started
        self.first: tuple[float, int] | None = None  # (time, units) when a unit was first done
        self.drawn_at = -float("inf")
        self.shown = False
        self.tenths = 0
        self.closed = False
        # Shared with a thread that redraws the line (`Stages`).
        self.lock = lock if lock is not None else threading.RLock()
        self.on_close = on_close
        if self.mode == "log":
            self._line(f"{self.label}: started")

    def advance(self, units: int = 1) -> None:
        """Count ``units`` more done."""
        self.done += units
        if not self.enabled:
            return
        now = self.clock()
        if self.first is None:
            self.first = (now, self.done)
        if self.mode == "log":
            tenths = min(10 * self.done // self.share_total(), 10)
            if tenths > self.tenths and tenths < 10:
                self.tenths = tenths
                self._line(f"{self.status(now)}")
            return
        if now - self.drawn_at >= REFRESH_SECONDS or self.done >= self.share_total():
            self.redraw(now)

    def share_total(self) -> int:
        return self.total if self.total is not None else max(self.done, 1)

    def left(self, now: float) -> float | None:
        """Seconds left at the rate since the first unit done; None before a second unit."""
        if self.total is None or self.first is None:
            return None
        since, units = self.first
        if self.done <= units or now <= since:
            return None
        rate = (self.done - units) / (now - since)
        return max(self.total - self.done, 0) / rate

    def status(self, now: float) -> str:
        """The stage's line: its share, time and estimate."""
        elapsed = now - self.begun
        if self.total is None:
            return f"{self.label}: {elapsed:.1f} s"
        share = min(self.done / self.total, 1.0)
        left = self.left(now)
        estimate = "" if left is None else f", ~{left:.0f} s left"
        if self.mode == "log":
            return f"{self.label}: {share:.0%} done, {elapsed:.1f} s{estimate}"
        filled = int(share * 30)
        bar = "#" * filled + "." * (30 - filled)
        return f"{self.label} [{bar}] {share:6.1%} {elapsed:6.1f} s{estimate}"

    def redraw(self, now: float | None = None) -> None:
        """On a terminal, redraw the line once the command has run `DELAY_SECONDS`."""
        with self.lock:
            now = self.clock() if now is None else now
            if self.closed or self.mode != "terminal" or now - self.started < DELAY_SECONDS:
                return
            self.stream.write(f"\r{self.status(now)}\033[K")
            self.stream.flush()
            self.drawn_at = now
            self.shown = True

    def close(self) -> None:
        """End the stage: its last line, or the end of the redrawn one."""
        with self.lock:
            if self.closed:
                return
            now = self.clock()
            if self.mode == "log":
                self._line(f"{self.label}: done in {now - self.begun:.1f} s")
            else:  # a stage still running past the delay leaves its line
                self.redraw(now)
                if self.shown:
                    self.stream.write("\n")
                    self.stream.flush()
            self.closed = True
            if self.on_close is not None:
                self.on_close(self)

    def _line(self, text: str) -> None:
        self.stream.write(f"{PREFIX}{text}\n")
        self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class Stages:
    """The stages of one command, reported in one mode from its start.

    `stage` opens each stage (reading, fitting, projecting, counting, nearest
    originals, writing); on a terminal a thread redraws the current one every
    `REFRESH_SECONDS`, so that a stage without units shows its time while it runs.
    A stage opened inside another is the current one until it ends; then the outer one is.
    """

    def __init__(
        self,
        enabled: bool | None = None,
        *,
        stream: TextIO | None = None,
        clock: Clock = time.monotonic,
        ticking: bool = True,
    ) -> None:
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.current: Progress | None = None
        self._open: list[Progress] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if ticking and resolve_mode(enabled, self.stream) == "terminal":
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def stage(self, name: str, total: int | None = None) -> Progress:
        """Open stage ``name`` (``total`` units, or None); close it with ``with``."""
        with self._lock:
            self.current = Progress(
                total,
                enabled=self.enabled,
                label=name,
                stream=self.stream,
                clock=self.clock,
                started=self.started,
                lock=self._lock,
                on_close=self._closed,
            )
            self._open.append(self.current)
            return self.current

    def _closed(self, stage: Progress) -> None:
        with self._lock:
            if stage in self._open:
                self._open.remove(stage)
            self.current = self._open[-1] if self._open else None

    def close(self) -> None:
        """Stop the terminal's redraws."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()

    def _tick(self) -> None:
        while not self._stop.wait(REFRESH_SECONDS):
            with self._lock:
                if self.current is not None and self.current.total is None:
                    self.current.redraw()

    def __enter__(self) -> Stages:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class _Silent(Progress):
    """The stage of a call that shows nothing: one shared value that counts nothing, so that
    a silent call starts no clock and takes no lock."""

    def __init__(self) -> None:
        self.stream = sys.stderr
        self.mode, self.enabled, self.total, self.label = "off", False, None, ""
        self.done, self.closed, self.shown = 0, False, False

    def advance(self, units: int = 1) -> None:
        """Nothing to count."""

    def close(self) -> None:
        """Nothing to end."""

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Nothing to end."""


SILENT: Progress = _Silent()

# The stages of the command running in this process (a CLI command sets them), or None.
_active: Stages | None = None


@contextlib.contextmanager
def reporting(stages: Stages) -> Iterator[Stages]:
    """Report the stages the library opens (`stage`) through ``stages`` meanwhile."""
    global _active
    previous, _active = _active, stages
    try:
        with stages:
            yield stages
    finally:
        _active = previous


# The names the stages opened meanwhile are reported by (`renamed`).
_names: dict[str, str] = {}


@contextlib.contextmanager
def renamed(name: str, shown: str) -> Iterator[None]:
    """Meanwhile, report the stage ``name`` the library opens as ``shown``: work done again,
    named for why (the gate's count in full after a capped one), so that no stage of a
    command is named twice."""
    previous = _names.get(name)
    _names[name] = shown
    try:
        yield
    finally:
        if previous is None:
            del _names[name]
        else:
            _names[name] = previous


# How many `folded` are open.
_folding = 0


@contextlib.contextmanager
def folded() -> Iterator[None]:
    """Meanwhile, the stages without units the library opens are not reported: their time is
    the enclosing stage's (an attack's own fits of its columns, named once as the attack);
    a stage counted in units still is."""
    global _folding
    _folding += 1
    try:
        yield
    finally:
        _folding -= 1


def stage(name: str, total: int | None = None, *, enabled: bool | None = None) -> Progress:
    """Open stage ``name`` (``total`` units, or None; `renamed` may say it otherwise) of the
    running command (`reporting`), unless ``enabled`` is False or, without units, it is
    `folded`; without a command reporting, a `Progress` of its own, ``enabled`` as given
    (None: on a terminal only). A stage that shows nothing is `SILENT`, shared."""
    if enabled is False or (_folding and total is None):
        return SILENT
    if _active is not None:
        return _active.stage(_names.get(name, name), total)
    if resolve_mode(enabled, sys.stderr) == "off":
        return SILENT
    return Progress(total, enabled=enabled, label=_names.get(name, name))
