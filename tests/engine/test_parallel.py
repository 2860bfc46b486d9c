"""The engine's threads: many thread counts keep a bounded number of threads, a call never runs
more than asked, an exception in a task reaches the caller."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from polars_hidden_rate import engine
from polars_hidden_rate.engine import count_cloaking, parallel, within_result
from tests.helpers import brute_force_counts


def _wait_for_threads(bound: int, seconds: float = 10.0) -> int:
    """The live thread count once it is at most ``bound`` (retired workers take a moment)."""
    deadline = time.monotonic() + seconds
    while threading.active_count() > bound and time.monotonic() < deadline:
        time.sleep(0.01)
    return threading.active_count()


def test_many_thread_counts_keep_a_bounded_number_of_threads() -> None:
    rng = np.random.default_rng(1)
    originals = rng.integers(-3, 4, (3000, 3)).astype(float)
    avatars = originals + rng.integers(-1, 2, originals.shape).astype(np.float64)
    expected = brute_force_counts(originals, avatars, 1e-9)
    thresholds = engine.own_thresholds(originals, avatars, 1e-9)
    own = np.arange(len(originals))
    baseline = threading.active_count()
    bound = baseline + parallel.MAX_THREADS
    for threads in range(1, 41):
        np.testing.assert_array_equal(count_cloaking(originals, avatars, threads=threads), expected)
        np.testing.assert_array_equal(
            within_result(originals, thresholds, own, avatars, threads=threads).counts, expected
        )
        assert _wait_for_threads(bound) <= bound, threads


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_a_call_never_runs_more_threads_than_asked(
    monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    monkeypatch.setattr(parallel, "MAX_THREADS", 8)
    list(
        parallel.parallel_map(8, lambda task: task, 16)
    )  # grow the pool beyond what this call asks
    running, most = 0, 0
    lock = threading.Lock()

    def work(task: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.005)
        with lock:
            running -= 1
        return task

    assert sorted(parallel.parallel_map(threads, work, 40)) == list(range(40))
    assert most <= threads
    if threads > 1:
        assert most > 1  # the pool's threads do share the work


@pytest.mark.parametrize("where", ["worker", "caller"])
def test_an_exception_in_a_task_reaches_the_caller(where: str) -> None:
    caller = threading.current_thread()

    def work(task: int) -> int:
        time.sleep(0.002)
        in_caller = threading.current_thread() is caller
        if task >= 5 and in_caller == (where == "caller"):
            raise ZeroDivisionError(f"task {task}")
        return task

    with pytest.raises(ZeroDivisionError, match="task"):
        list(parallel.parallel_map(3, work, 200))
    # The pool is still usable, and still counts right.
    assert sorted(parallel.parallel_map(3, lambda task: task, 50)) == list(range(50))


def test_concurrent_callers_with_different_thread_counts() -> None:
    rng = np.random.default_rng(4)
    originals = rng.integers(-3, 4, (1500, 4)).astype(float)
    avatars = originals + rng.integers(-1, 2, originals.shape)
    expected = brute_force_counts(originals, avatars, 1e-9)
    with ThreadPoolExecutor(6) as callers:
        results = list(
            callers.map(lambda t: count_cloaking(originals, avatars, threads=t), range(1, 13))
        )
    for counts in results:
        np.testing.assert_array_equal(counts, expected)
