"""Scale: counts that do not move under a power of two, on every path (flat, tree, Dask, GPU),
and a canonical scale that leaves room for every square."""

from __future__ import annotations

import warnings

import faiss
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import polars_hidden_rate as phr
from polars_hidden_rate import engine
from polars_hidden_rate.engine import count_cloaking, gpu
from polars_hidden_rate.engine.scale import exponent_for
from tests.helpers import brute_force_counts, examples, local_cluster, quarter_hidden_pair

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
            t = exponent_for(1.0, d, tie_tol) + 1  # 2^e brings 1.0 = 2^0 into [2^(t-1), 2^t)
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
    """FAISS's GPU classes, stood in for by its CPU flat index (as in tests/engine/test_gpu.py)."""
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


@pytest.mark.parametrize("factor", [1.0, 1e155, 1e-170, 2.0**600, 2.0**-600, 1e300, 1e-300])
def test_hidden_rate_does_not_move_with_scale(factor: float) -> None:
    originals, avatars = quarter_hidden_pair()
    assert phr.hidden_rate(originals * factor, avatars * factor, coords="d1") == 25.0
