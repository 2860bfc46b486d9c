"""The engine against a hostile caller: many thread counts, bad arguments, rescaled data."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from polars_hidden_rate import engine, kdtree
from polars_hidden_rate.engine import count_cloaking, count_within
from tests.conftest import brute_force_counts

STRATEGIES: list[engine.Strategy] = ["flat", "tree"]


# --- Threads -------------------------------------------------------------------------


def _wait_for_threads(bound: int, seconds: float = 10.0) -> int:
    """The live thread count once it is at most ``bound`` (retired workers take a moment)."""
    deadline = time.monotonic() + seconds
    while threading.active_count() > bound and time.monotonic() < deadline:
        time.sleep(0.01)
    return threading.active_count()


def test_many_thread_counts_keep_a_bounded_number_of_threads() -> None:
    rng = np.random.default_rng(1)
    originals = rng.integers(-3, 4, (3000, 3)).astype(float)
    avatars = originals + rng.integers(-1, 2, originals.shape)
    expected = brute_force_counts(originals, avatars, 1e-9)
    thresholds = engine.own_thresholds(originals, avatars, 1e-9)
    own = np.arange(len(originals))
    baseline = threading.active_count()
    bound = baseline + kdtree.MAX_THREADS
    for threads in range(1, 41):
        np.testing.assert_array_equal(count_cloaking(originals, avatars, threads=threads), expected)
        np.testing.assert_array_equal(
            count_within(originals, thresholds, own, avatars, threads=threads), expected
        )
        assert _wait_for_threads(bound) <= bound, threads


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_a_call_never_runs_more_threads_than_asked(
    monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    monkeypatch.setattr(kdtree, "MAX_THREADS", 8)
    list(kdtree._map(8, lambda task: task, 16))  # grow the pool beyond what this call asks
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

    assert sorted(kdtree._map(threads, work, 40)) == list(range(40))
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
        list(kdtree._map(3, work, 200))
    # The pool is still usable, and still counts right.
    assert sorted(kdtree._map(3, lambda task: task, 50)) == list(range(50))


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


# --- Arguments -----------------------------------------------------------------------

GOOD = np.zeros((3, 2))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"originals": np.zeros(3)}, ValueError, r"`originals` must be a 2-D array.*\(3,\)"),
        ({"avatars": np.zeros((3, 2, 1))}, ValueError, r"`avatars` must be a 2-D.*\(3, 2, 1\)"),
        ({"avatars": np.zeros((4, 2))}, ValueError, r"same shape.*\(3, 2\).*\(4, 2\)"),
        ({"avatars": np.zeros((3, 3))}, ValueError, r"same shape.*\(3, 2\).*\(3, 3\)"),
        ({"avatars": np.full((3, 2), "a")}, TypeError, "`avatars` must hold numbers.*<U1"),
        ({"strategy": "fast"}, ValueError, r"`strategy` must be one of .*'tree'.*got 'fast'"),
        ({"strategy": None}, ValueError, "`strategy` must be one of .*got None"),
        ({"tie_tol": -1e-9}, ValueError, "`tie_tol` must be a finite number >= 0, got -1e-09"),
        ({"tie_tol": float("nan")}, ValueError, "`tie_tol` must be .*got nan"),
        ({"tie_tol": float("inf")}, ValueError, "`tie_tol` must be .*got inf"),
        ({"tie_tol": np.float32(-1)}, ValueError, r"`tie_tol` must be .*got .*-1\.0"),
        ({"tie_tol": True}, TypeError, "`tie_tol` must be a number.*got True"),
        ({"tie_tol": np.True_}, TypeError, r"`tie_tol` must be a number.*got (np\.)?True"),
        ({"tie_tol": "1e-9"}, TypeError, "`tie_tol` must be a number.*got '1e-9'"),
        ({"threads": 0}, ValueError, "`threads` must be at least 1 or None, got 0"),
        ({"threads": np.int64(-2)}, ValueError, r"`threads` must be at least 1 or None, got .*-2"),
        ({"threads": 2.0}, TypeError, "`threads` must be an integer or None, got 2.0"),
        ({"threads": True}, TypeError, "`threads` must be an integer or None, got True"),
    ],
)
def test_count_cloaking_refuses_bad_arguments(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments: dict[str, Any] = {"originals": GOOD, "avatars": GOOD} | kwargs
    with pytest.raises(error, match=message):
        count_cloaking(arguments.pop("originals"), arguments.pop("avatars"), **arguments)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"queries": np.zeros(3)}, ValueError, r"`queries` must be a 2-D array.*\(3,\)"),
        ({"avatars": np.zeros(3)}, ValueError, r"`avatars` must be a 2-D array.*\(3,\)"),
        ({"avatars": np.zeros((3, 1))}, ValueError, r"queries of shape \(3, 2\).*\(3, 1\)"),
        ({"thresholds": np.ones((3, 1))}, ValueError, "thresholds and own rows"),
        ({"own": np.zeros(2, dtype=np.int64)}, ValueError, "thresholds and own rows"),
        ({"own": np.zeros(3)}, TypeError, "`own` must hold integers.*float64"),
        ({"own": np.array([0, 1, 3])}, ValueError, "own rows must lie in"),
        ({"thresholds": -np.ones(3)}, ValueError, "non-negative"),
        ({"strategy": "brute"}, ValueError, "`strategy` must be one of .*got 'brute'"),
        ({"threads": 0}, ValueError, "`threads` must be at least 1 or None, got 0"),
        ({"threads": np.bool_(True)}, TypeError, "`threads` must be an integer or None"),
    ],
)
@pytest.mark.parametrize("empty", [False, True])
def test_count_within_refuses_bad_arguments(
    kwargs: dict[str, Any], error: type[Exception], message: str, empty: bool
) -> None:
    """Also with no queries or no avatars: the shortcut for empty input checks first."""
    arguments: dict[str, Any] = {
        "queries": GOOD,
        "thresholds": np.ones(3),
        "own": np.arange(3),
        "avatars": GOOD,
    } | kwargs
    if empty and "avatars" not in kwargs and "own" not in kwargs:
        arguments["avatars"] = arguments["avatars"][:0]
        arguments["own"] = np.full(len(arguments["own"]), -1)
    with pytest.raises(error, match=message):
        count_within(
            arguments.pop("queries"),
            arguments.pop("thresholds"),
            arguments.pop("own"),
            arguments.pop("avatars"),
            **arguments,
        )


@pytest.mark.parametrize(
    ("tie_tol", "expected"),
    [
        (0, [0, 1]),
        (0.0, [0, 1]),
        (np.int64(0), [0, 1]),
        (1e-9, [1, 1]),
        (np.float64(1e-9), [1, 1]),
        (np.float32(1e-9), [1, 1]),  # its float64 value, not 1 + 1e-9 rounded to float32
        (np.float16(0.001), [1, 1]),
    ],
)
@pytest.mark.parametrize("threads", [None, 1, 2, np.int64(2), np.int32(3), np.uint8(1)])
def test_numpy_scalars_are_accepted(tie_tol: Any, expected: list[int], threads: Any) -> None:
    """A rival at d2 = 1 + 2^-40 from an original whose own avatar is at d2 = 1."""
    originals = np.array([[0.0], [100.0]])
    avatars = np.array([[1.0], [-(1.0 + 2.0**-41)]])
    for strategy in STRATEGIES:
        counts = count_cloaking(
            originals, avatars, tie_tol=tie_tol, threads=threads, strategy=strategy
        )
        assert counts.tolist() == expected


def test_lists_and_integer_arrays_are_coordinates_too() -> None:
    counts = count_cloaking([[0], [1], [3]], np.array([[1], [0], [3]], dtype=np.int32))
    assert counts.tolist() == [1, 1, 0]
