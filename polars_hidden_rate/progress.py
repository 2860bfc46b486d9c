"""A progress bar on stderr for long counts: shown only on a terminal, and only after a while."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

# Work shorter than this shows nothing.
DELAY_SECONDS = 2.0
REFRESH_SECONDS = 0.2


class Progress:
    """Counts units of work done out of ``total`` and redraws one line on ``stream``.

    ``enabled=None`` shows the bar only when ``stream`` is a terminal.
    """

    def __init__(
        self,
        total: int,
        *,
        enabled: bool | None = None,
        label: str = "counting",
        stream: TextIO | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _isatty(self.stream) if enabled is None else enabled
        self.total = max(total, 1)
        self.label = label
        self.done = 0
        self.started = time.monotonic()
        self.drawn_at = 0.0
        self.shown = False

    def advance(self, units: int = 1) -> None:
        self.done += units
        now = time.monotonic()
        if not self.enabled or now - self.started < DELAY_SECONDS:
            return
        if now - self.drawn_at >= REFRESH_SECONDS or self.done >= self.total:
            self._draw(now)

    def _draw(self, now: float) -> None:
        share = min(self.done / self.total, 1.0)
        filled = int(share * 30)
        elapsed = now - self.started
        eta = elapsed * (1 - share) / share if share > 0 else float("nan")
        self.stream.write(
            f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {share:6.1%} "
            f"{elapsed:6.1f}s elapsed, ~{eta:5.0f}s left"
        )
        self.stream.flush()
        self.drawn_at = now
        self.shown = True

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
