"""The process's one thread pool, and the cores it may use.

Compiled work releases the GIL, so the engine runs its tasks on threads:
`parallel_map` hands task indices to this thread and to helpers from one pool kept
for the whole process (starting threads per call would cost as much as a small count).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

from polars_hidden_rate.checks import InvariantError

# The most threads one count runs on, whatever it asks: the compiled work never waits, so
# threads beyond the cores only cost memory. The process keeps at most this many, less one.
MAX_THREADS = os.cpu_count() or 1
T = TypeVar("T")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as containers set it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def parallel_map(threads: int, work: Callable[[int], T], tasks: int) -> Iterator[T]:
    """``work(0), ..., work(tasks - 1)``, yielded as they finish, on at most ``threads``
    threads (and `MAX_THREADS`): this one and helpers from the process's pool, each
    taking the next task from a shared counter (compiled work releases the GIL).

    An exception in a task stops the others from taking new tasks and is raised here,
    once no helper runs any more; so is closing the generator early."""
    helpers = min(threads, tasks, MAX_THREADS) - 1
    if helpers <= 0:
        yield from map(work, range(tasks))
        return
    counter = _Counter(tasks)
    finished: queue.SimpleQueue[tuple[bool, T | BaseException]] = queue.SimpleQueue()

    def loop() -> None:
        while (task := counter.take()) is not None:
            try:
                result = work(task)
            except BaseException as exc:
                counter.stop()
                finished.put((False, exc))
                return
            finished.put((True, result))

    futures = _submit(loop, helpers)
    received = 0
    try:
        # This thread works too: the count progresses even while the pool serves others.
        while (task := counter.take()) is not None:
            try:
                result = work(task)
            except BaseException:
                counter.stop()
                raise
            received += 1
            yield result
            while not finished.empty():
                received += 1
                yield _unwrap(finished.get())
        # Every task taken puts one result (or its exception) once it is done.
        while received < counter.taken:
            received += 1
            yield _unwrap(finished.get())
    finally:
        counter.stop()
        for future in futures:
            future.cancel()  # a helper not started yet has nothing to do
        wait(futures)


def _unwrap(outcome: tuple[bool, T | BaseException]) -> T:
    """A task's result, or its exception raised."""
    done, value = outcome
    if not done:
        raise value if isinstance(value, BaseException) else InvariantError("a task failed")
    return value  # type: ignore[return-value]


class _Counter:
    """Hands out task indices ``0, ..., tasks - 1`` once each, until stopped."""

    def __init__(self, tasks: int) -> None:
        self.tasks = tasks
        self.taken = 0
        self.stopped = False
        self.lock = threading.Lock()

    def take(self) -> int | None:
        with self.lock:
            if self.stopped or self.taken >= self.tasks:
                return None
            self.taken += 1
            return self.taken - 1

    def stop(self) -> None:
        with self.lock:
            self.stopped = True


_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _submit(loop: Callable[[], None], helpers: int) -> list[Future[None]]:
    """Run ``helpers`` copies of ``loop`` on the process's one pool, first replacing it by a
    larger one if it is smaller. Starting threads per call costs milliseconds, as much as a
    whole count of 1,000 records; one pool keeps the threads bounded whatever the calls."""
    global _pool, _pool_size
    with _pool_lock:  # submitting under the lock: no call submits to a pool shut down
        if _pool is None or _pool_size < helpers:
            if _pool is not None:
                _pool.shutdown(wait=False)  # its threads finish the work queued, then end
            _pool = ThreadPoolExecutor(helpers, thread_name_prefix="hidden-rate")
            _pool_size = helpers
        return [_pool.submit(loop) for _ in range(helpers)]


def _forget_pools() -> None:
    """A forked child inherits the pool but not its threads: start afresh."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size = None, 0
    _pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools)
