"""The FAISS float32 error bound against its own derivation and against FAISS itself.

`float32_error_bound` is what lets the flat band decide a
pair in float32: a bound below the true error would count a rival wrongly, so the bound
is pinned twice. First to its derivation (the comment in ``flat.py``), written out here
term by term; then to FAISS's actual ``IndexFlatL2`` distances on data built to cancel,
measured against the float64 ``d2`` the counts are defined by.
"""

from __future__ import annotations

import itertools
from typing import Any

import faiss
import numpy as np
import pytest

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.engine import flat

U = 2.0**-24  # float32 unit roundoff, written independently of flat.FLOAT32_UNIT_ROUNDOFF

QUERY_NORM2 = [0.0, 2.0**-40, 1e-6, 0.01, 0.25, 0.81, 1.0]
AVATAR_RADII = [0.0, 2.0**-20, 1e-3, 0.5, 1.0]
LIFTS2 = [0.0, 1e-6, 0.5, 4.0, 16.0]
REFERENCE_FLOORS = [0.0, 2.0**-60]


def derived_terms(
    query_norm2: Float64Array, avatar_radius: float, dim: int, lift2: float
) -> Float64Array:
    """The first-order error terms of the derivation in ``flat.py``, times its factor 2.

    Rounding the inputs to float32 costs ``(2u + u^2)(|x| + |y|)^2``; FAISS's expanded form
    ``|x'|^2 + |y|^2 - 2 x'.y`` over ``dim + 1`` coordinates (``x'`` is the query with its
    lift) costs ``(dim + 3) u (|x'| + |y|)^2``; the factor 2 covers the second-order terms
    and the float64 reference.
    """
    norm = np.sqrt(query_norm2)
    lifted_norm = np.sqrt(query_norm2 + lift2)
    inputs = (2 * U + U * U) * (norm + avatar_radius) ** 2
    expanded = (dim + 3) * U * (lifted_norm + avatar_radius) ** 2
    terms: Float64Array = 2.0 * (inputs + expanded)
    return terms


def test_bound_covers_its_derivation() -> None:
    # Every dimension 1..128, every lift: a bound even half as large falls below the
    # derivation somewhere on this grid (at lift 0, for every dimension).
    norms2 = np.array(QUERY_NORM2)
    for dim, radius, lift2, floor in itertools.product(
        range(1, 129), AVATAR_RADII, LIFTS2, REFERENCE_FLOORS
    ):
        bound = flat.float32_error_bound(norms2, radius, dim, lift2=lift2, reference_floor=floor)
        needed = derived_terms(norms2, radius, dim, lift2) + floor
        short = bound < needed
        assert not short.any(), (dim, radius, lift2, floor, norms2[short], bound[short])


def test_bound_has_an_absolute_floor_for_underflow() -> None:
    # All-zero norms still get a positive bound: float32 results that underflow into
    # subnormals round absolutely, at most 2^-150 per operation over dim + 3 operations.
    for dim in (1, 7, 128):
        bound = flat.float32_error_bound(np.zeros(3), 0.0, dim)
        assert (bound >= (dim + 3) * 2.0**-150).all()


def measured_ratios(
    queries: Float64Array, avatars: Float64Array, *, lifted: bool = False
) -> Float64Array:
    """``|FAISS estimate - float64 d2| / bound`` for every (query, avatar) pair.

    The pipeline of `flat.Search.count_in_flat`: the data are centred and scaled by
    `flat.Search.prepare`, the avatars lifted by a zero coordinate, the queries by
    ``s_i`` (float32, ``s_i^2 <= 4``) when ``lifted``; FAISS's distance less ``s_i^2`` is the
    estimate of the scaled ``d2``, the float64 direct differences of the raw coordinates
    times the same power of two.
    """
    n, dim = queries.shape
    # Thresholds of 1 make scaled_thresholds the scale factor itself (a power of two).
    search = flat.Search.prepare(queries, np.ones(n), np.full(n, -1, np.int64), avatars)
    scale = search.scaled_thresholds[:, None]
    diff = queries[:, None, :] - avatars[None, :, :]
    truth = (diff * diff).sum(axis=2) * scale
    lift2 = 4.0 if lifted else 0.0
    lift = flat._float32_at_most(np.linspace(0.0, lift2, n))
    index = faiss.IndexFlatL2(dim + 1)
    index.add(search.lifted_avatars())
    with flat.faiss_threads(1):
        found, rivals = index.search(np.hstack([search.query_f32, lift[:, None]]), len(avatars))
    estimate = np.empty_like(truth)
    lifted_found = found.astype(np.float64) - lift.astype(np.float64)[:, None] ** 2
    np.put_along_axis(estimate, rivals, lifted_found, axis=1)
    bound = flat.float32_error_bound(
        flat.row_norms(search.query_f32) ** 2,
        search.avatar_radius,
        dim,
        lift2=lift2,
        reference_floor=search.reference_floor,
    )
    ratios: Float64Array = np.abs(estimate - truth) / bound[:, None]
    return ratios


def gaussian(rng: np.random.Generator, n: int, dim: int) -> tuple[Float64Array, Float64Array]:
    return rng.normal(size=(n, dim)), rng.normal(size=(n, dim))


def opposite_clusters(
    rng: np.random.Generator, n: int, dim: int
) -> tuple[Float64Array, Float64Array]:
    """Two tight clusters far from the centre: near pairs of large norms, so that
    ``|x|^2 + |y|^2 - 2x.y`` cancels almost completely."""
    side = np.where(np.arange(n) % 2 == 0, -1.0, 1.0)[:, None] * np.ones(dim)
    return (
        side + rng.normal(size=(n, dim)) * 1e-4,
        side + rng.normal(size=(n, dim)) * 1e-4,
    )


def halfway(rng: np.random.Generator, n: int, dim: int) -> Float64Array:
    """Values in [0.5, 1) a hair over half a float32 step past a float32: each rounds by
    (almost) the largest relative error float32 allows, away from zero."""
    grid = rng.uniform(0.5, 1.0, size=(n, dim)).astype(np.float32)
    step = np.spacing(grid).astype(np.float64)
    values: Float64Array = grid.astype(np.float64) + step * (0.5 + 2.0**-20)
    return values


def mirrored_halfway(
    rng: np.random.Generator, n: int, dim: int
) -> tuple[Float64Array, Float64Array]:
    """Queries ``+v`` and ``-v``, avatars ``-v`` and ``+v`` (the centre is exactly 0), with
    every coordinate rounding the worst way: each pair ``x = -y`` is as far apart as the
    norms allow and both roundings widen it, so the input rounding costs its full term."""
    v = halfway(rng, n // 2, dim)
    return np.vstack([v, -v]), np.vstack([-v, v])


CASES: list[tuple[str, int, int, float, bool]] = [
    # (builder, n, dim, common offset, lifted); n >= 20 takes FAISS's BLAS (expanded) path,
    # n < 20 its direct-difference loop.
    ("gaussian", 64, 1, 0.0, False),
    ("gaussian", 64, 8, 0.0, True),
    ("gaussian", 8, 128, 0.0, False),
    ("gaussian", 48, 128, 0.0, True),
    ("opposite_clusters", 64, 1, 0.0, False),
    ("opposite_clusters", 64, 2, 1e9, False),
    ("opposite_clusters", 64, 32, 2.0**30, True),
    ("opposite_clusters", 48, 128, -7.5e8, False),
    ("opposite_clusters", 10, 128, 1e12, False),
    ("mirrored_halfway", 64, 1, 0.0, False),
    ("mirrored_halfway", 64, 3, 0.0, False),
    ("mirrored_halfway", 64, 16, 0.0, True),
    ("mirrored_halfway", 32, 128, 0.0, False),
]
BUILDERS = {
    "gaussian": gaussian,
    "opposite_clusters": opposite_clusters,
    "mirrored_halfway": mirrored_halfway,
}


@pytest.mark.parametrize(("builder", "n", "dim", "offset", "lifted"), CASES)
def test_faiss_error_is_within_the_bound(
    builder: str, n: int, dim: int, offset: float, lifted: bool
) -> None:
    worst = 0.0
    for seed in range(5):
        queries, avatars = BUILDERS[builder](np.random.default_rng(seed), n, dim)
        ratios = measured_ratios(queries + offset, avatars + offset, lifted=lifted)
        worst = max(worst, float(ratios.max()))
    assert worst <= 1.0, f"FAISS error {worst:.3f} x the bound"


def worst_ratio(builder: str, dim: int, seeds: int = 20) -> float:
    worst = 0.0
    for seed in range(seeds):
        queries, avatars = BUILDERS[builder](np.random.default_rng(seed), 64, dim)
        worst = max(worst, float(measured_ratios(queries, avatars).max()))
    return worst


def test_bound_is_not_vacuous() -> None:
    # In one and two dimensions the constructed worst cases reach a sizeable fraction of
    # the bound (0.26 and 0.18 observed with faiss-cpu 1.15 on x86-64): a bound four times
    # larger than needed fails here. In many dimensions the (dim + 3)u term is the
    # worst-case sequential-summation bound, which FAISS's blocked SIMD/BLAS sums do not
    # approach, so the observed fraction falls roughly like 1/dim there.
    observed = max(worst_ratio("opposite_clusters", 1), worst_ratio("mirrored_halfway", 1))
    assert observed >= 0.1, observed
    assert worst_ratio("opposite_clusters", 2) >= 0.08


def test_lift_and_radius_round_the_safe_way() -> None:
    # s_i is rounded down so that s_i^2 never exceeds its slack (no true rival pushed out of
    # the radius), and the radius up so that FAISS's float32 radius is never below R.
    rng = np.random.default_rng(0)
    slack = np.concatenate([rng.uniform(0.0, 16.0, 5000), 2.0 ** rng.uniform(-60, 4, 5000)])
    lift = flat._float32_at_most(slack)
    assert lift.dtype == np.float32
    assert (lift.astype(np.float64) ** 2 <= slack).all()
    # ... and by no more than needed: the next float32 up would overshoot.
    above = np.nextafter(lift, np.float32(np.inf)).astype(np.float64)
    assert (above**2 > slack).all()
    for value in [*slack[:2000].tolist(), 1.0 + 2.0**-30, 3.0 - 2.0**-40]:
        radius = flat._float32_at_least(value)
        assert radius >= value
        assert float(np.nextafter(np.float32(radius), np.float32(0))) < value


def test_a_pair_whose_interval_starts_at_the_threshold_is_settled() -> None:
    # Avatars at d2 = 1, 1 and 4 from the query, threshold 1: the first two are rivals
    # (d2 <= T). Intervals that start exactly at the scaled threshold are unsure and go to
    # float64; one that ends exactly at it is inside without settling; one past it is out.
    queries = np.array([[0.0, 0.0]])
    avatars = np.array([[1.0, 0.0], [0.0, -1.0], [2.0, 0.0]])
    search = flat.Search.prepare(queries, np.array([1.0]), np.array([-1]), avatars)
    scaled = float(search.scaled_thresholds[0])
    rows, owner, rival = np.array([0]), np.zeros(3, np.int64), np.arange(3)
    starts_at = search.settle(rows, owner, rival, np.full(3, scaled), np.full(3, 5.0 * scaled))
    assert starts_at.tolist() == [2]
    ends_at = search.settle(rows, owner[:1], rival[:1], np.zeros(1), np.full(1, scaled))
    assert ends_at.tolist() == [1]
    past = search.settle(
        rows, owner, rival, np.full(3, np.nextafter(scaled, np.inf)), np.full(3, 5.0 * scaled)
    )
    assert past.tolist() == [0]


def test_found_values_at_the_cutoffs_are_settled_or_decided() -> None:
    # settle_found decides on FAISS's float32 values through per-query cutoffs. Avatars at
    # d2 = 1, 1 and 4 from the query, threshold 1: a value at the top of the band
    # (T + s^2 + E, an interval starting at T) is settled in float64; one float32 step past
    # it is out; a value below T + s^2 - E is a sure rival, counted without settling.
    queries = np.array([[0.0, 0.0]])
    avatars = np.array([[1.0, 0.0], [0.0, -1.0], [2.0, 0.0]])
    search = flat.Search.prepare(queries, np.array([1.0]), np.array([-1]), avatars)
    scaled = float(search.scaled_thresholds[0])
    rows, lims, rival = np.array([0]), np.array([0, 3]), np.arange(3)
    lift, bound = np.array([0.5], np.float32), np.array([scaled / 4])
    top = np.float32(scaled + 0.25 + scaled / 4)
    assert float(top) == scaled + 0.25 + scaled / 4  # exact: the test is at the cutoff itself

    def count(found: list[np.float32], cap: int | None = None) -> int:
        values = np.array(found, np.float32)
        return int(search.settle_found(rows, lims, values, rival, lift, bound, cap)[0])

    assert count([top] * 3) == 2
    past = np.nextafter(top, np.float32(np.inf))
    assert count([past] * 3) == 0
    sure = np.float32(scaled / 2)  # far below T + s^2 - E: decided, even for avatar 2
    assert count([top, past, sure]) == 2
    assert count([top, top, sure], cap=1) == 1


@pytest.mark.parametrize(("spread", "cap"), [(0.3, None), (3.0, None), (3.0, 1), (3.0, 7)])
def test_settle_found_agrees_with_settle_on_intervals(spread: float, cap: int | None) -> None:
    # The cutoff path gives, chunk by chunk, the counts of settle on the float64 intervals it
    # replaced (own avatars present, elsewhere and missing; ties among duplicates).
    rng = np.random.default_rng(int(spread * 10) + (cap or 0))
    queries = rng.standard_normal((300, 6))
    avatars = queries + rng.normal(scale=spread, size=queries.shape)
    avatars[::7] = avatars[1::7][: len(avatars[::7])]
    thresholds = ((queries - avatars) ** 2).sum(axis=1) * (1 + 1e-9)
    own = np.where(rng.random(300) < 0.8, np.arange(300), rng.integers(-1, 300, 300))
    search = flat.Search.prepare(queries, thresholds, own, avatars)
    index = faiss.IndexFlatL2(queries.shape[1] + 1)
    index.add(search.lifted_avatars())
    captured: list[tuple[Any, ...]] = []
    settle_found = search.settle_found

    def spy(*args: Any) -> Any:
        captured.append(args)
        return settle_found(*args)

    object.__setattr__(search, "settle_found", spy)
    for rows in np.array_split(np.arange(300), 3):
        counts = search.count_in_flat(index, rows, cap)
        _, lims, found, rival, lift, bound, _ = captured[-1]
        ends = np.asarray(lims, np.int64)
        sizes = ends[1:] - ends[:-1]
        owner = np.repeat(np.arange(len(rows)), sizes)
        estimate = np.asarray(found, np.float64) - np.asarray(lift, np.float64)[owner] ** 2
        at_least, at_most = estimate - bound[owner], estimate + bound[owner]
        reference = search.settle(rows, owner, np.asarray(rival), at_least, at_most, cap)
        assert counts.tolist() == reference.tolist()
        assert sizes.sum() > (len(rows) if spread > 1 else 0)  # rivals to settle, when wide
