"""What the read and the count hold per record, and the sort-based link behind it.

numpy reports its buffers to ``tracemalloc``, so the peaks below are the numpy arrays
alive at once (Polars' own buffers are not traced); they pin the budget of
docs/performance.md, where 1e8 records must fit one machine.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.exceptions import ComputeError, DuplicateError

import polars_hidden_rate as phr
from polars_hidden_rate import engine
from polars_hidden_rate.engine.nearest import nearest_two
from polars_hidden_rate.frames import Link, read_aligned
from polars_hidden_rate.gate import cloaking_summary
from tests.helpers import brute_force_counts, examples

N, D = 100_000, 5
COORDS = [f"Dim{k + 1}" for k in range(D)]


@contextmanager
def numpy_peak() -> Iterator[Callable[[], float]]:
    """The peak of traced memory inside the block, in bytes per record of ``N``."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    peak: list[float] = []
    try:
        yield lambda: peak[0]
    finally:
        peak.append((tracemalloc.get_traced_memory()[1] - base) / N)
        tracemalloc.stop()


@pytest.fixture(scope="module")
def linked() -> tuple[np.ndarray, np.ndarray]:
    """Linked arrays, after one small count down every path measured here: numba's compiler
    (its first call in an environment) and the thread pools allocate traced memory too."""
    rng = np.random.default_rng(0)
    originals = rng.normal(size=(N, D))
    avatars = originals + rng.normal(scale=0.3, size=(N, D))
    small = slice(0, 2_000)
    engine.count_cloaking(originals[small], avatars[small])
    engine.count_cloaking(originals[small].copy(), avatars[small].copy(), overwrite_input=True)
    phr.local_cloaking(*frames(originals[small], avatars[small]), coords=COORDS, on="id")
    cloaking_summary(*frames(originals[small], avatars[small]), coords=COORDS, on="id")
    phr.privacy_report(*frames(originals[small], avatars[small]), coords=COORDS, on="id")
    phr.privacy_report(
        *frames(originals[small], avatars[small]),
        coords=COORDS,
        on="id",
        holdout=pl.DataFrame(originals[small], schema=COORDS).with_row_index("id"),
    )
    return originals, avatars


def frames(x: np.ndarray, y: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Keyed frames, the avatars shuffled."""
    originals = pl.DataFrame(x, schema=COORDS).with_row_index("id")
    avatars = pl.DataFrame(y, schema=COORDS).with_row_index("id")
    return originals, avatars.sample(fraction=1.0, shuffle=True, seed=1)


def test_counting_in_place_copies_neither_side(linked: tuple[np.ndarray, np.ndarray]) -> None:
    """The canonical scale and the tree's order are taken in place: what is left is the
    thresholds, the tree's indices and boxes, and the counts (about 48 B/rec at d = 5)."""
    x, y = linked
    owned_x, owned_y = x.copy(), y.copy()
    with numpy_peak() as peak:
        counts = engine.count_cloaking(owned_x, owned_y, overwrite_input=True)
    assert peak() < 64, f"{peak():.0f} B/rec"
    np.testing.assert_array_equal(counts, engine.count_cloaking(x, y))


def test_the_read_holds_each_side_once(linked: tuple[np.ndarray, np.ndarray]) -> None:
    """Column by column into one C-order array per side, avatars gathered by the link:
    80 B/rec of coordinates, the link's order and one column in flight."""
    originals, avatars = frames(*linked)
    with numpy_peak() as peak:
        aligned = read_aligned(
            originals.lazy(), avatars.lazy(), COORDS, Link(("id",), ("id",), (None,))
        )
    assert peak() < 110, f"{peak():.0f} B/rec"
    np.testing.assert_array_equal(aligned.originals, linked[0])
    np.testing.assert_array_equal(aligned.avatars, linked[1])


def test_keyed_counts_hold_the_coordinates_once(linked: tuple[np.ndarray, np.ndarray]) -> None:
    """The whole keyed path: the read's arrays are the engine's (about 130 B/rec; 250 when
    the engine copied them)."""
    originals, avatars = frames(*linked)
    with numpy_peak() as peak:
        out = phr.local_cloaking(originals.lazy(), avatars.lazy(), coords=COORDS, on="id").collect()
    assert peak() < 150, f"{peak():.0f} B/rec"
    expected = engine.count_cloaking(*linked)
    np.testing.assert_array_equal(out.get_column("local_cloaking").to_numpy(), expected)


def test_the_gate_counts_the_read_in_place(linked: tuple[np.ndarray, np.ndarray]) -> None:
    """``check`` without ``--output``: the capped count takes the read's arrays in place and
    puts the avatars back in row order for a count in full (about 139 B/rec; 258 when the
    engine copied them)."""
    originals, avatars = frames(*linked)
    with numpy_peak() as peak:
        summary = cloaking_summary(originals.lazy(), avatars.lazy(), coords=COORDS, on="id")
    assert peak() < 150, f"{peak():.0f} B/rec"
    counts = engine.count_cloaking(*linked)
    assert summary.hidden_rate == 100.0 * np.count_nonzero(counts) / N
    assert summary.local_cloaking_median == float(np.median(counts))


def test_the_report_counts_and_measures_the_read_in_place(
    linked: tuple[np.ndarray, np.ndarray],
) -> None:
    """``privacy_report`` without a holdout: the count, then the nearest originals' tree, on
    the read's arrays scaled once, the distances taken in place (about 138 B/rec; 272 when
    both copied them)."""
    originals, avatars = frames(*linked)
    with numpy_peak() as peak:
        report = phr.privacy_report(originals.lazy(), avatars.lazy(), coords=COORDS, on="id")
    assert peak() < 145, f"{peak():.0f} B/rec"
    np.testing.assert_array_equal(report.local_cloaking, engine.count_cloaking(*linked))
    found = nearest_two(*linked)
    np.testing.assert_array_equal(report.distance_to_closest, found.nearest)
    np.testing.assert_array_equal(report.closest_distances_ratio, found.ratio)


def test_the_report_s_holdout_walks_take_the_arrays_in_place(
    linked: tuple[np.ndarray, np.ndarray],
) -> None:
    """With a holdout of as many records: the three sets scaled once, in place, each the
    points of its own tree (about 311 B/rec; 440 with a scaled copy of each and a tree
    per walk)."""
    originals, avatars = frames(*linked)
    rng = np.random.default_rng(1)
    held = rng.normal(size=(N, D))
    holdout = pl.DataFrame(held, schema=COORDS).with_row_index("id")
    with numpy_peak() as peak:
        report = phr.privacy_report(
            originals.lazy(), avatars.lazy(), coords=COORDS, on="id", holdout=holdout
        )
    assert peak() < 330, f"{peak():.0f} B/rec"
    assert report.holdout is not None
    found = nearest_two(*linked)
    np.testing.assert_array_equal(report.distance_to_closest, found.nearest)
    reference = nearest_two(linked[0], held)
    assert report.holdout.reference_distance_to_closest_median == np.median(reference.nearest)


keys = st.one_of(
    st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=40, unique=True),
    st.lists(st.text(max_size=4), min_size=1, max_size=40, unique=True),
)


@settings(max_examples=examples(100), deadline=None)
@given(keys=keys, seed=st.integers(0, 2**32 - 1), split=st.booleans())
def test_the_link_pairs_every_key_in_any_order(keys: list[object], seed: int, split: bool) -> None:
    """Integer and text keys, one column or two, the avatars in any order: each original
    gets the avatar with its key, as a dictionary lookup says."""
    rng = np.random.default_rng(seed)
    n = len(keys)
    x = rng.integers(-3, 4, size=(n, 2)).astype(np.float64)
    y = x + rng.integers(-1, 2, size=(n, 2))
    originals = pl.DataFrame({"k": keys, "a": x[:, 0], "b": x[:, 1]}, strict=False)
    permutation = rng.permutation(n)
    avatars = pl.DataFrame(
        {"k": [keys[p] for p in permutation], "a": y[permutation, 0], "b": y[permutation, 1]},
        strict=False,
    )
    on: list[str] = ["k"]
    if split:  # a second key column, constant on one side of the split
        originals = originals.with_columns(part=pl.int_range(n) % 2)
        avatars = avatars.with_columns(part=pl.Series(permutation % 2))
        on = ["part", "k"]
    aligned = read_aligned(
        originals.lazy(), avatars.lazy(), ["a", "b"], Link(tuple(on), tuple(on), (None,) * len(on))
    )
    np.testing.assert_array_equal(aligned.originals, x)
    np.testing.assert_array_equal(aligned.avatars, y)
    counts = phr.local_cloaking(originals, avatars, coords=["a", "b"], on=on)
    np.testing.assert_array_equal(
        counts.get_column("local_cloaking"), brute_force_counts(x, y, 1e-9)
    )


@pytest.mark.parametrize(
    ("avatar_ids", "error", "message"),
    [
        (
            [5, 1, 5, 2, 5],
            DuplicateError,
            r"not unique in avatars: 3 rows share a key, e.g. \{'id': 5\}",
        ),
        (
            [1, 2, 2, 1, 3],
            DuplicateError,
            r"not unique in avatars: 4 rows share a key, e.g. \{'id': 1\}",
        ),
        (
            [1, 2, 3, 4, 6],
            ComputeError,
            r"1 originals have no avatar with the same key 'id', its values not shown",
        ),
    ],
)
def test_the_link_names_a_broken_key(
    avatar_ids: list[int], error: type[Exception], message: str
) -> None:
    originals = pl.DataFrame({"id": [1, 2, 3, 4, 5], "a": [0.0, 1.0, 2.0, 3.0, 4.0]})
    avatars = pl.DataFrame({"id": avatar_ids, "a": [0.5, 1.5, 2.5, 3.5, 4.5]})
    with pytest.raises(error, match=message):
        phr.local_cloaking(originals, avatars, coords="a", on="id")
