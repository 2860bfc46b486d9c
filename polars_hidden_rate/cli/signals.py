"""Stop signals as exceptions, and work run where a stop signal can reach the main thread."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TypeVar

T = TypeVar("T")

# Signals that stop a command cleanly: one line on stderr, exit 128 + the signal number.
_STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


class Interrupted(BaseException):
    """A stop signal, raised in the main thread so that ``finally`` blocks clean up."""


@contextlib.contextmanager
def stop_signals_raised() -> Iterator[list[int]]:
    """Within the block, the stop signals raise `Interrupted`; yield those received.

    Only in the main thread (where Python runs signal handlers), and never for a signal
    that is ignored (as SIGHUP under ``nohup``). The previous handlers come back after.
    """
    received: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise Interrupted(signum)

    previous: dict[int, signal.Handlers | Callable[[int, FrameType | None], object] | int] = {}
    if threading.current_thread() is threading.main_thread():
        for name in _STOP_SIGNALS:
            signum = getattr(signal, name, None)
            if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
                old = signal.signal(signum, stop)
                previous[signum] = signal.SIG_DFL if old is None else old
    try:
        yield received
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def in_background(work: Callable[[], T]) -> T:
    """``work()``, run in a daemon thread while this one waits, so that a stop signal is handled
    at once: Polars holds the thread that calls it until the count is done."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as error:  # handed to the waiting thread
            failure.append(error)

    worker = threading.Thread(target=run, name="hidden-rate-count", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.05)
    if failure:
        raise failure[0]
    return outcome[0]
