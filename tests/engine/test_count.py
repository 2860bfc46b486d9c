"""The counting queries' boundary (`count_cloaking`, `within_result`): bad arguments refused by
name, under `python -O` too; numpy scalars, lists and integer arrays accepted; thresholds kept
in the caller's units."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from polars_hidden_rate import engine
from polars_hidden_rate.engine import count_cloaking, nearest, within_result
from tests.helpers import brute_force_within

STRATEGIES: list[engine.Strategy] = ["flat", "tree"]


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


def test_the_planners_entry_counts_as_the_public_one_and_refuses_unchecked_arrays() -> None:
    """`linked_result` takes what the planner's read gives (C-order float64 of one shape)
    and counts as `cloaking_result` does; anything else is the package's own error."""
    from polars_hidden_rate.checks import InvariantError
    from polars_hidden_rate.engine.count import CountSettings, linked_result

    rng = np.random.default_rng(7)
    originals = rng.integers(0, 4, size=(300, 3)).astype(np.float64)
    avatars = rng.integers(0, 4, size=(300, 3)).astype(np.float64)
    expected = engine.cloaking_result(originals, avatars, threads=2, closer=True)
    found = linked_result(
        originals.copy(),
        avatars.copy(),
        1e-9,
        CountSettings(threads=2, strategy="auto", cap=None),
        closer=True,
    )
    np.testing.assert_array_equal(found.counts, expected.counts)
    np.testing.assert_array_equal(found.closer, expected.closer)
    settings = CountSettings(threads=2, strategy="auto", cap=None)
    unchecked: list[tuple[Any, Any]] = [
        (np.asfortranarray(originals), avatars),
        (originals, avatars[:, :2]),
        (originals.astype(np.float32), avatars),
    ]
    for left, right in unchecked:
        with pytest.raises(InvariantError, match="C-order float64 arrays of one shape"):
            linked_result(left, right, 1e-9, settings)
