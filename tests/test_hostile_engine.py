"""The engine against a hostile caller: many thread counts, bad arguments, rescaled data."""

from __future__ import annotations

import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import faiss
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from polars_hidden_rate import engine
from polars_hidden_rate.engine import count_cloaking, gpu, nearest, parallel, within_result
from polars_hidden_rate.engine.scale import canonical_exponent
from tests.helpers import brute_force_counts, brute_force_within, examples, local_cluster

STRATEGIES: list[engine.Strategy] = ["flat", "tree"]
# Large common offsets, some of them not dyadic; steps of 1/2 and 1/4 make exact ties.
OFFSETS = [0.0, 1e6, 2.0**40, -7.5e8, 3.0 * 2.0**-20]
STEPS = [-1.0, -0.5, -0.25, 0.0, 0.0, 0.25, 0.5, 1.0]

# The issue's example: one record of four hidden (25 %). At 1e155 the far avatars' squares
# overflowed to inf (50 %); at 1e-170 every square underflowed to 0 (100 %).
EXAMPLE_ORIGINALS = np.array([[0.0], [10.0], [20.0], [30.0]])
EXAMPLE_AVATARS = np.array([[0.125], [10.0625], [15.0], [24.0]])
EXAMPLE_COUNTS = [0, 0, 1, 0]
FACTORS = [1.0, 1e155, 1e-170, 2.0**600, 2.0**-600, 2.0**1000, 2.0**-1000]


@st.composite
def linked_data(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Integer grids times a dyadic step, plus an offset, with duplicate rows; avatars
    0, 1/4, 1/2 or 1 step away per coordinate (zero distances and exact ties)."""
    n = draw(st.integers(2, 30))
    d = draw(st.sampled_from([1, 2, 3, 6]))
    grid = draw(hnp.arrays(np.int64, (n, d), elements=st.integers(-3, 3))).astype(float)
    copies = draw(st.lists(st.integers(0, n - 1), max_size=n // 2))
    grid[: len(copies)] = grid[copies]  # exact duplicate rows
    steps = draw(hnp.arrays(np.float64, (n, d), elements=st.sampled_from(STEPS)))
    unit = 2.0 ** draw(st.integers(-20, 20))
    offset = draw(st.sampled_from(OFFSETS))
    return grid * unit + offset, (grid + steps) * unit + offset


def exactly_scaled(values: np.ndarray, k: int) -> np.ndarray | None:
    """``values * 2**k`` when that is exact (no overflow, no subnormal), else None."""
    with np.errstate(over="ignore"):  # an overflow to inf is caught just below
        scaled = np.ldexp(values, k)
    if not np.array_equal(np.ldexp(scaled, -k), values):
        return None
    if np.any((scaled != 0) & (np.abs(scaled) < np.finfo(np.float64).tiny)):
        return None
    exact: np.ndarray = scaled
    return exact


@settings(max_examples=examples(150), deadline=None)
@given(
    data=linked_data(),
    k=st.integers(-1000, 1000),
    tie_tol=st.sampled_from([0.0, 1e-9]),
    strategy=st.sampled_from(STRATEGIES),
)
def test_counts_do_not_change_under_any_power_of_two(
    data: tuple[np.ndarray, np.ndarray], k: int, tie_tol: float, strategy: engine.Strategy
) -> None:
    """count_cloaking(o * 2^k, a * 2^k) is the brute force on o, a, record by record, and
    the prelude brings both scales to bit-identical arrays."""
    originals, avatars = data
    scaled_originals, scaled_avatars = exactly_scaled(originals, k), exactly_scaled(avatars, k)
    assume(scaled_originals is not None and scaled_avatars is not None)
    assert scaled_originals is not None
    assert scaled_avatars is not None
    expected = brute_force_counts(originals, avatars, tie_tol)
    counts = count_cloaking(scaled_originals, scaled_avatars, tie_tol=tie_tol, strategy=strategy)
    np.testing.assert_array_equal(counts, expected)
    for mine, theirs in zip(
        engine.linked_arrays(scaled_originals, scaled_avatars, tie_tol),
        engine.linked_arrays(originals, avatars, tie_tol),
        strict=True,
    ):
        assert mine.tobytes() == theirs.tobytes()


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_rescaling_the_issue_example_changes_nothing(
    factor: float, strategy: engine.Strategy
) -> None:
    """No square of these rescaled data may overflow to inf or underflow to 0 (ties)."""
    counts = count_cloaking(EXAMPLE_ORIGINALS * factor, EXAMPLE_AVATARS * factor, strategy=strategy)
    assert counts.tolist() == EXAMPLE_COUNTS
    assert brute_force_counts(EXAMPLE_ORIGINALS, EXAMPLE_AVATARS, 1e-9).tolist() == EXAMPLE_COUNTS


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_huge_and_tiny_coordinates_count_as_at_a_sane_scale(strategy: engine.Strategy) -> None:
    """Coordinates near 1e200 or 1e-200 whose squares, as given, overflow or underflow:
    the counts are the brute force on the same data brought exactly to a sane scale."""
    rng = np.random.default_rng(9)
    grid = rng.integers(-3, 4, (80, 3)).astype(float)
    steps = rng.integers(-2, 3, grid.shape) / 2
    for unit, back in ((1e200, -664), (1e-200, 664)):
        originals, avatars = grid * unit, (grid + steps) * unit
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the float64 squares as given
            expected = brute_force_counts(np.ldexp(originals, back), np.ldexp(avatars, back), 0.0)
        assert (expected > 0).any()
        assert (expected == 0).any()
        np.testing.assert_array_equal(
            count_cloaking(originals, avatars, tie_tol=0.0, strategy=strategy), expected
        )


def test_the_canonical_scale_leaves_room_for_every_square() -> None:
    """No d2 or threshold can overflow, even with every coordinate at the extremes, and a
    coordinate 2^-750 times the largest keeps a normal square. (A tie_tol of 1e-3 or more is
    refused: a rounding allowance, checks.MAX_TIE_TOL.)"""
    for tie_tol in (1e-3, 1.0, 1e6, 1e300):
        with pytest.raises(ValueError, match="`tie_tol` must be below"):
            engine.linked_arrays(np.zeros((2, 1)), np.ones((2, 1)), tie_tol)
    for d in (1, 5, 100, 10_000):
        for tie_tol in (0.0, 1e-9, 9.99e-4):
            originals = np.full((2, d), np.finfo(np.float64).max)
            originals[1] = -originals[1]
            scaled, reversed_, thresholds = engine.linked_arrays(originals, -originals, tie_tol)
            t = canonical_exponent(d, tie_tol)
            assert 2.0 ** (t - 1) <= np.abs(scaled).max() < 2.0**t
            assert np.isfinite(thresholds).all()
            rows, cols = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
            every = engine.squared_distances(scaled, reversed_, rows, cols)
            assert np.isfinite(every).all()
    # A coordinate 2^-750 times the largest: its square is normal at the canonical scale.
    tiny_step = np.array([[1.0, 0.0], [0.0, 2.0**-750]])
    _, _, thresholds = engine.linked_arrays(tiny_step, np.zeros((2, 2)), 0.0)
    assert thresholds[1] >= np.finfo(np.float64).tiny


@pytest.mark.slow
def test_the_dask_path_is_scale_invariant() -> None:
    from polars_hidden_rate.cluster.arrays import count_cloaking_distributed
    from polars_hidden_rate.cluster.shards import Sizing

    with local_cluster(processes=False, workers=1, threads=2) as client:
        for factor in FACTORS:
            counts = count_cloaking_distributed(
                EXAMPLE_ORIGINALS * factor,
                EXAMPLE_AVATARS * factor,
                client=client,
                sizing=Sizing(block_rows=2, shard_rows=3),
            )
            assert counts.tolist() == EXAMPLE_COUNTS, factor


class _FakeGpuIndexFlatConfig:
    device = -1
    useFloat16 = True


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """FAISS's GPU classes, stood in for by its CPU flat index (as in test_gpu.py)."""
    monkeypatch.setattr(faiss, "StandardGpuResources", object, raising=False)
    monkeypatch.setattr(faiss, "GpuIndexFlatConfig", _FakeGpuIndexFlatConfig, raising=False)
    monkeypatch.setattr(
        faiss, "GpuIndexFlatL2", lambda res, dim, config: faiss.IndexFlatL2(dim), raising=False
    )
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1)


@pytest.mark.usefixtures("fake_gpu")
@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("max_k", [1, 2048])
def test_the_gpu_path_is_scale_invariant(
    monkeypatch: pytest.MonkeyPatch, factor: float, max_k: int
) -> None:
    """The GPU path's prelude, k-NN passes and CPU fallback (``max_k=1``), on the CPU."""
    monkeypatch.setattr(gpu, "GPU_MAX_K", max_k)
    monkeypatch.setattr(gpu, "FIRST_K", 1)
    rng = np.random.default_rng(6)
    grid = rng.integers(-3, 4, (60, 3)).astype(float)
    avatars = grid + rng.integers(-2, 3, grid.shape) / 4
    expected = brute_force_counts(grid, avatars, 1e-9)
    counts = gpu.count_cloaking_gpu(grid * factor, avatars * factor)
    if factor in (1e155, 1e-170):  # not powers of two: rounded, but no tie was that close
        np.testing.assert_array_equal(counts, count_cloaking(grid * factor, avatars * factor))
    else:
        np.testing.assert_array_equal(counts, expected)
    example = gpu.count_cloaking_gpu(EXAMPLE_ORIGINALS * factor, EXAMPLE_AVATARS * factor)
    assert example.tolist() == EXAMPLE_COUNTS


def test_within_result_keeps_the_callers_units() -> None:
    """within_result takes thresholds in the caller's units and rescales nothing: here every
    d2 underflows to 0, so every avatar is within a threshold of 0 (bring data to a sane
    scale first, as count_cloaking does)."""
    queries = np.array([[0.0], [3.0]]) * 2.0**-600
    avatars = np.array([[1.0], [2.0], [5.0]]) * 2.0**-600
    thresholds, own = np.zeros(2), np.array([-1, 1])
    for strategy in STRATEGIES:
        counts = within_result(queries, thresholds, own, avatars, strategy=strategy).counts
        assert counts.tolist() == brute_force_within(queries, thresholds, own, avatars).tolist()
        assert counts.tolist() == [3, 2]


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
        ({"originals": np.array([[0.0, np.nan]] * 3)}, ValueError, "NaN or infinite"),
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
        (
            {"thresholds": np.ones((3, 1))},
            ValueError,
            r"3 queries need as many thresholds.*\(3, 1\)",
        ),
        (
            {"own": np.zeros(2, dtype=np.int64)},
            ValueError,
            r"3 queries need as many own rows.*\(2,\)",
        ),
        ({"own": None, "avatars": GOOD[:2]}, ValueError, "own=None links query i to avatar i.*3 q"),
        ({"own": np.zeros(3)}, TypeError, "`own` must hold integers.*float64"),
        ({"own": np.array([0, 1, 3])}, ValueError, "own rows must lie in"),
        ({"thresholds": -np.ones(3)}, ValueError, "non-negative"),
        ({"strategy": "brute"}, ValueError, "`strategy` must be one of .*got 'brute'"),
        ({"threads": 0}, ValueError, "`threads` must be at least 1 or None, got 0"),
        ({"threads": np.bool_(True)}, TypeError, "`threads` must be an integer or None"),
    ],
)
@pytest.mark.parametrize("empty", [False, True])
def test_within_result_refuses_bad_arguments(
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
        within_result(
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
        (np.float16(0.0005), [1, 1]),  # below the bound on tie_tol (1e-3)
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


def _tree_of(points: np.ndarray) -> Any:
    from polars_hidden_rate.engine.kdtree import KdTree

    return KdTree.build(points)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: _tree_of(GOOD).count_rivals(GOOD, np.ones(3), None, rows=np.arange(3)),
            "`rows` needs `own`",
        ),
        (
            lambda: _tree_of(GOOD).count_rivals(
                GOOD, np.ones(3), np.arange(3), rows=np.array([0, 1, 3])
            ),
            r"`rows` must lie in \[0, 3\)",
        ),
        (
            lambda: _tree_of(GOOD).count_and_closer(GOOD, np.ones(3), None, np.ones(2)),
            r"`closer_than` must hold one value per query \(3\)",
        ),
        (
            lambda: engine.within_result(GOOD, np.ones(3), None, GOOD, closer_than=np.ones(4)),
            r"`closer_than` must hold one value per query \(3\)",
        ),
        (
            lambda: _tree_of(GOOD).build(GOOD, companions=(np.zeros((2, 1)),)),
            "each companion must be a writable C-order 2-D float64 array of 3 rows",
        ),
        (
            lambda: nearest.squared_nearest(_tree_of(GOOD), GOOD, threads=1, rows=np.arange(4)),
            "`rows` must name every one of the 3 queries once, got 4 rows",
        ),
        (
            lambda: nearest.squared_nearest(_tree_of(GOOD), np.zeros((3, 3)), threads=1),
            "the queries must have the tree's 2 columns",
        ),
        (
            lambda: nearest.squared_nearest(_tree_of(GOOD), GOOD, threads=1, seed=np.zeros(2)),
            r"`seed` must hold one d2 per query \(3\)",
        ),
        (
            lambda: nearest.within_reach(_tree_of(GOOD), GOOD, np.ones(2), threads=1),
            r"`thresholds` must hold one per query \(3\)",
        ),
        (
            lambda: nearest.tied_matches(
                _tree_of(GOOD), np.zeros(2), GOOD, np.zeros(3), 0.0, tie_tol=0.0, threads=1
            ),
            r"`values` must hold one per point of the tree \(3\)",
        ),
    ],
)
def test_the_engines_argument_checks_raise(call: Any, message: str) -> None:
    """The kernels check no index: the engine refuses what they would read past, with a
    ValueError (no assert, which ``python -O`` drops)."""
    with pytest.raises(ValueError, match=message):
        call()


def test_the_checks_hold_under_python_o() -> None:
    """``python -O`` drops asserts: the package's checks are exceptions, and stay."""
    import subprocess
    import sys

    script = (
        "import numpy as np\n"
        "from polars_hidden_rate.checks import InvariantError, known\n"
        "from polars_hidden_rate.engine.kdtree import KdTree\n"
        "assert False, 'asserts are on'\n"
        "tree = KdTree.build(np.zeros((3, 2)))\n"
        "try:\n"
        "    tree.count_rivals(np.zeros((3, 2)), np.ones(3), None, rows=np.arange(3))\n"
        "except ValueError as error:\n"
        "    print('refused:', error)\n"
        "try:\n"
        "    known(None, 'a value')\n"
        "except InvariantError as error:\n"
        "    print('refused:', error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-O", "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == [
        "refused: `rows` needs `own`",
        "refused: a value is missing (a bug in polars_hidden_rate)",
    ]
